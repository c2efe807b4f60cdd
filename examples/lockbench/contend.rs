//! What a task contends with: its lock (and the read side of a read-write
//! lock), taken directly or through a multi-lock, a RedLock or a semaphore.

use std::time::Duration;

use redisson_locks::{
    Client, FairPermits, LockGuard, MultiGuard, MultiLock, RFairSemaphore, RLock, RSemaphore,
    RedGuard, RedLock,
};

use crate::options::{err, Kind, Options};

/// What a task acquires: the lock itself, or a multi-lock or RedLock around it.
pub(crate) enum Contender {
    Lock,
    Multi(MultiLock),
    Red(RedLock),
    /// A semaphore, one permit taken and given back like a lock.
    Semaphore(RSemaphore),
    /// A fair semaphore, one permit taken in turn.
    FairSemaphore(RFairSemaphore),
}

/// What it holds.
pub(crate) enum Held {
    Lock(LockGuard),
    Multi(MultiGuard),
    Red(RedGuard),
    Permit(RSemaphore),
    FairPermits(FairPermits),
}

impl Contender {
    pub(crate) async fn acquire(&self, lock: &RLock) -> Result<Held, String> {
        Ok(match self {
            Contender::Lock => Held::Lock(lock.lock().await.map_err(err)?),
            Contender::Multi(multi) => Held::Multi(multi.lock().await.map_err(err)?),
            Contender::Red(red) => Held::Red(
                red.lock_with_lease(Duration::from_secs(30))
                    .await
                    .map_err(err)?,
            ),
            Contender::Semaphore(sem) => {
                sem.acquire().await.map_err(err)?;
                Held::Permit(sem.clone())
            }
            Contender::FairSemaphore(sem) => Held::FairPermits(sem.acquire(1).await.map_err(err)?),
        })
    }
}

impl Held {
    pub(crate) async fn release(self) -> Result<(), String> {
        match self {
            Held::Lock(guard) => guard.unlock().await,
            Held::Multi(guard) => guard.unlock().await,
            Held::Red(guard) => guard.unlock().await,
            Held::Permit(sem) => sem.release().await,
            Held::FairPermits(permits) => permits.release().await,
        }
        .map_err(err)
    }
}

/// One task's locks and how it takes them.
pub(crate) struct TaskLocks {
    /// The lock a write (or any op of a kind without a read side) takes.
    pub(crate) exclusive: RLock,
    /// The read side a read takes, for `read` and `rw-mix`.
    pub(crate) shared_side: Option<RLock>,
    pub(crate) contender: Contender,
}

/// Task `task`'s locks of the kind `o` asks for, on lock name `name` of its
/// client (`task % clients`); a RedLock's three locks are spread over clients.
pub(crate) async fn task_locks(
    o: &Options,
    clients: &[Client],
    task: usize,
    name: String,
) -> Result<TaskLocks, String> {
    let client = &clients[task % o.clients];
    let base = name.clone();
    let (exclusive, shared_side) = locks(o.kind, client, name)?;
    let contender = match o.kind {
        Kind::Multi => Contender::Multi(
            MultiLock::new(vec![
                client.get_lock(format!("{base}:a")).map_err(err)?,
                client.get_lock(format!("{base}:b")).map_err(err)?,
            ])
            .map_err(err)?,
        ),
        Kind::RedLock => Contender::Red(
            RedLock::new(
                (0..3)
                    .map(|i| clients[(task + i) % o.clients].get_lock(format!("{base}:{i}")))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?,
            )
            .map_err(err)?,
        ),
        Kind::Semaphore => {
            let sem = client.get_semaphore(format!("{base}:sem")).map_err(err)?;
            sem.try_set_permits(permits(o)?).await.map_err(err)?;
            Contender::Semaphore(sem)
        }
        Kind::FairSemaphore => {
            let sem = client
                .get_fair_semaphore(format!("{base}:fsem"))
                .map_err(err)?;
            sem.try_set_permits(permits(o)?).await.map_err(err)?;
            Contender::FairSemaphore(sem)
        }
        _ => Contender::Lock,
    };
    Ok(TaskLocks {
        exclusive,
        shared_side,
        contender,
    })
}

/// Each semaphore's permits (`--permits`), as the semaphores count them.
fn permits(o: &Options) -> Result<u32, String> {
    u32::try_from(o.permits).map_err(|_| format!("--permits {} is too many", o.permits))
}

/// The exclusive lock and the read side (if any) of `kind` named `name`.
fn locks(kind: Kind, client: &Client, name: String) -> Result<(RLock, Option<RLock>), String> {
    Ok(match kind {
        Kind::Reentrant => (client.get_lock(name).map_err(err)?, None),
        Kind::Fair => (client.get_fair_lock(name).map_err(err)?, None),
        Kind::Read => {
            let rw = client.get_read_write_lock(name).map_err(err)?;
            (rw.read_lock(), Some(rw.read_lock()))
        }
        Kind::Write => (
            client.get_read_write_lock(name).map_err(err)?.write_lock(),
            None,
        ),
        Kind::RwMix => {
            let rw = client.get_read_write_lock(name).map_err(err)?;
            (rw.write_lock(), Some(rw.read_lock()))
        }
        Kind::Fenced => ((*client.get_fenced_lock(name).map_err(err)?).clone(), None),
        Kind::Spin => (client.get_spin_lock(name).map_err(err)?, None),
        Kind::NonReentrant => (client.get_non_reentrant_lock(name).map_err(err)?, None),
        Kind::Group => (client.get_multi_lock(name, ["a", "b"]).map_err(err)?, None),
        Kind::Multi | Kind::RedLock | Kind::Semaphore | Kind::FairSemaphore => {
            (client.get_lock(name).map_err(err)?, None)
        }
    })
}
