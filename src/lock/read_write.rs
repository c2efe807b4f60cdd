//! The read-write lock's scripts, and `RReadWriteLock`, the pair of locks over one
//! hash: shared readers, one exclusive writer, both reentrant per owner.

use std::sync::Arc;

use crate::transport::conn::Conn;

use super::client_order::ClientOrder;
use super::kind::LockKind;
use super::rlock::RLock;
use crate::engine::contract::RenewKind;
use crate::engine::contract::{
    plain, Acquirer, BoxFuture, ChannelOf, Outcome, Target, Wait, Waits,
};
use crate::engine::self_wait::Claim;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, Kind, Labels};
use crate::transport::keys::rwlock_channel;
use crate::transport::pubsub::Class;
use crate::transport::scripts::{self, Released, HOLDS_READ};

/// A read-write lock (Redisson's `RReadWriteLock`): any number of readers, or one
/// writer. Both sides are [`RLock`]s with every method of the reentrant lock, and
/// both are reentrant per owner.
///
/// The writer may also take the read lock, then release the write lock: the lock
/// stays in read mode (a *downgrade*) and waiting readers are woken at once. A
/// reader cannot *upgrade*: its write request waits until no reader is left, itself
/// included. `write_lock().lock()` from an owner holding the read lock is therefore
/// refused with [`Error::WouldDeadlock`]; a timed try times out.
///
/// Each read hold has its own lease and its own key, so a reader that vanished
/// stops keeping the lock alive when its own holds expire, and the watchdog renews
/// only this client's readers.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let rw = client.get_read_write_lock("catalog")?;
/// let reading = rw.read_lock().lock().await?; // shared with other readers
/// reading.unlock().await?;
/// let writing = rw.write_lock().lock().await?; // alone
/// writing.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RReadWriteLock {
    read: RLock,
    write: RLock,
}

impl RReadWriteLock {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RReadWriteLock {
            read: RLock::new(client.clone(), name.clone(), Arc::new(ReadSide)),
            write: RLock::new(client, name, Arc::new(WriteSide)),
        }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// assert_eq!(rw.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The shared side (Redisson `readLock()`): an [`RLock`] that any number of
    /// owners hold together while no writer does.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let reading = rw.read_lock().lock().await?;
    /// let other_reader = rw.read_lock().lock().await?; // does not wait
    /// other_reader.unlock().await?;
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self) -> RLock {
        self.read.clone()
    }

    /// The exclusive side (Redisson `writeLock()`): an [`RLock`] held by one
    /// owner, with no readers. Its holder may take the read lock and then release
    /// the write lock (a downgrade).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let writing = rw.write_lock().lock().await?; // waits for readers to leave
    /// // Downgrade: read inside the write hold's scope, then let the write go.
    /// let reading = writing.scope(rw.read_lock().lock()).await?;
    /// writing.unlock().await?; // waiting readers get in now
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self) -> RLock {
        self.write.clone()
    }
}

/// The shared side of a read-write lock (Redisson `readLock()`).
#[derive(Debug)]
pub(crate) struct ReadSide;

/// The exclusive side of a read-write lock (Redisson `writeLock()`).
#[derive(Debug)]
pub(crate) struct WriteSide;

/// Forces one side open: deletes the lock (and every read hold's key) when it is
/// in that side's `mode`.
fn force_side(client: Arc<Engine>, name: Arc<str>, mode: &'static str) -> BoxFuture<Result<bool>> {
    Box::pin(async move {
        let channel = rwlock_channel(&name);
        scripts::rw_force_release(&mut client.conn.clone(), &name, &channel, mode).await
    })
}

impl LockKind for ReadSide {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        Arc::new(ReadOps::new(name.clone(), owner, self.labels(client, name)))
    }

    fn kind(&self) -> Kind {
        kind!("read")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        force_side(client, name, "read")
    }

    fn claim(&self) -> Claim {
        Claim::Read
    }

    /// Held in read mode, and during a downgrade (write mode with read holds: more
    /// than the `mode` and writer fields), as Redisson answers.
    fn is_locked(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let (mode, fields): (Option<String>, u64) = redis::pipe()
                .atomic()
                .hget(&*name, "mode")
                .hlen(&*name)
                .query_async(&mut client.conn.clone())
                .await
                .map_err(|e| Error::from_redis(&name, e))?;
            Ok(match mode.as_deref() {
                Some("read") => true,
                Some("write") => fields > 2,
                _ => false,
            })
        })
    }
}

impl LockKind for WriteSide {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        wait: Wait,
    ) -> Arc<dyn Acquirer> {
        // Refuse, rather than wait on itself, an upgrade without a time limit.
        let ops = WriteOps::new(
            name.clone(),
            owner,
            matches!(wait, Wait::Forever),
            self.labels(client, name),
        );
        Arc::new(ops.ordered(client))
    }

    fn kind(&self) -> Kind {
        kind!("write")
    }

    fn field(&self, owner: String) -> String {
        writer_field(&owner)
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        force_side(client, name, "write")
    }

    fn claim(&self) -> Claim {
        Claim::Write
    }

    /// Held in write mode.
    fn is_locked(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let mode: Option<String> =
                redis::AsyncCommands::hget(&mut client.conn.clone(), &*name, "mode")
                    .await
                    .map_err(|e| Error::from_redis(&name, e))?;
            Ok(mode.as_deref() == Some("write"))
        })
    }
}

/// The read side's scripts, bound to one name and owner.
#[derive(Debug)]
pub(crate) struct ReadOps {
    target: Target,
}

/// Both sides wait on the read-write lock's one channel.
fn rw_target(name: Arc<str>, owner: String, labels: Labels) -> Target {
    Target::new(name, owner, ChannelOf::ReadWrite, labels)
}

impl ReadOps {
    pub(crate) fn new(name: Arc<str>, owner: String, labels: Labels) -> Self {
        ReadOps {
            target: rw_target(name, owner, labels),
        }
    }
}

impl Acquirer for ReadOps {
    fn target(&self) -> &Target {
        &self.target
    }

    fn renewal(&self) -> (&str, RenewKind) {
        (self.owner(), RenewKind::ReadHolds)
    }

    fn waits(&self) -> Waits {
        Waits {
            class: Class::Shared,
            ..Waits::LISTENING
        }
    }

    fn attempt(
        self: Arc<Self>,
        mut conn: Conn,
        lease_ms: u64,
        _queue: bool,
    ) -> BoxFuture<Result<Outcome>> {
        Box::pin(async move {
            scripts::read_acquire(&mut conn, self.name(), lease_ms, self.owner())
                .await
                .map(plain)
        })
    }

    fn release(self: Arc<Self>, mut conn: Conn, _lease_ms: u64) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            scripts::read_release(&mut conn, self.name(), self.channel(), self.owner()).await
        })
    }
}

/// The write side's scripts, bound to one name and owner.
#[derive(Debug)]
pub(crate) struct WriteOps {
    target: Target,
    /// The owner's field in the hash: `<owner>:write`.
    field: String,
    /// Refuse, rather than wait on itself, when the owner holds a read.
    refuse_upgrade: bool,
    /// Its waiters' part in the lock's order of waiting clients (see
    /// [`WriteOps::ordered`]).
    order: ClientOrder,
}

impl WriteOps {
    pub(crate) fn new(name: Arc<str>, owner: String, refuse_upgrade: bool, labels: Labels) -> Self {
        WriteOps {
            field: writer_field(&owner),
            target: rw_target(name, owner, labels),
            refuse_upgrade,
            order: ClientOrder::none(),
        }
    }

    /// Its waiters wait in the lock's order of this crate's clients, as the
    /// reentrant lock's do, and its releases name the first for a turn (see
    /// `client_order.rs`): a write release's two messages are answered by one
    /// client's attempt. Readers keep no order. Not with the heuristic
    /// `waiter_order` switched off.
    pub(crate) fn ordered(mut self, client: &Engine) -> Self {
        self.order = ClientOrder::of(client, self.name());
        self
    }
}

/// The hash field counting an owner's write holds.
pub(crate) fn writer_field(owner: &str) -> String {
    format!("{owner}:write")
}

impl Acquirer for WriteOps {
    fn target(&self) -> &Target {
        &self.target
    }

    fn renewal(&self) -> (&str, RenewKind) {
        (&self.field, RenewKind::HashField)
    }

    /// Writers wait in this client's local line, as the reentrant lock's
    /// waiters do: one in Redis, the others parked (readers share the lock and
    /// never park behind a writer).
    fn waits(&self) -> Waits {
        Waits {
            local_line: true,
            ordered: self.order.is_kept(),
            ..Waits::LISTENING
        }
    }

    fn attempt(
        self: Arc<Self>,
        mut conn: Conn,
        lease_ms: u64,
        queue: bool,
    ) -> BoxFuture<Result<Outcome>> {
        Box::pin(async move {
            let (order, place) = self.order.before_attempt(self.owner(), queue);
            let reply = scripts::write_acquire(
                &mut conn,
                self.name(),
                lease_ms,
                self.owner(),
                self.refuse_upgrade,
                order,
            )
            .await?;
            if reply.is_some_and(|busy| busy.ttl == HOLDS_READ) {
                return Err(Error::WouldDeadlock {
                    name: self.name().to_owned(),
                    reason: crate::engine::self_wait::UPGRADE_REFUSED.to_owned(),
                });
            }
            self.order.attempted(queue, place, reply.is_some());
            Ok(plain(reply))
        })
    }

    fn release(self: Arc<Self>, mut conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            scripts::write_release(
                &mut conn,
                self.name(),
                self.channel(),
                lease_ms,
                self.owner(),
                self.order.sent(self.owner()),
            )
            .await
        })
    }

    /// Leaves the lock's order of waiting clients (a waiter that gave up).
    fn abandon(self: Arc<Self>, mut conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async move { self.order.leave(&mut conn, self.target()).await })
    }
}
