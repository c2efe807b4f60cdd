//! `run NAME -- COMMAND`: `flock(1)` across machines. Takes the lock, runs the
//! command while holding it (renewed by the watchdog, or for a fixed lease),
//! and releases it once the command's process group is gone; stops the
//! command before the hold stops being surely valid.

use std::time::Duration;

use redisson_locks::{Client, LockGuard, RLock};

use crate::args::{HoldOptions, LockKind};
use crate::child::{run_while_held, take};
use crate::exit::{Code, Failure};

/// What the command line asked of `run`.
#[derive(Debug)]
pub(crate) struct Options<'a> {
    pub(crate) name: &'a str,
    pub(crate) kind: &'a LockKind,
    pub(crate) hold: &'a HoldOptions,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) command: &'a [String],
}

/// Takes the lock, runs the command, releases the lock.
pub(crate) async fn run(client: &Client, options: Options<'_>) -> Result<(), Failure> {
    let name = options.name;
    let lock = lock_of(client, name, options.kind)?;
    let lock = match options.max_hold {
        Some(limit) => lock.with_max_hold(limit),
        None => lock,
    };
    let spans = crate::deadline::spans(client.config(), options.hold.lease, options.max_hold);
    let grace = crate::deadline::grace(options.hold.grace, &spans)?;
    let what = format!("the {} '{name}'", kind_words(options.kind));
    let (guard, stops) = take(
        &format!("cannot take {what}"),
        format!("{what} was not acquired within the wait: it is held"),
        acquire(&lock, options.hold),
    )
    .await?;
    let mut env = vec![("REDISSON_LOCK_NAME", name.to_owned())];
    if options.kind.fenced {
        let token = lock_token(client, name).await?;
        env.push(("REDISSON_LOCK_TOKEN", token.to_string()));
    }
    run_while_held(&what, (guard, stops), options.command, &env, grace).await
}

/// The lock the flags name; a name no lock can have is a usage error.
fn lock_of(client: &Client, name: &str, kind: &LockKind) -> Result<RLock, Failure> {
    let lock = if kind.fair {
        client.get_fair_lock(name)
    } else if kind.read || kind.write {
        client.get_read_write_lock(name).map(|rw| {
            if kind.read {
                rw.read_lock()
            } else {
                rw.write_lock()
            }
        })
    } else if kind.fenced {
        client.get_fenced_lock(name).map(|fenced| (*fenced).clone())
    } else {
        client.get_lock(name)
    };
    lock.map_err(|e| Failure::new(Code::Usage, crate::exit::words(&e)))
}

fn kind_words(kind: &LockKind) -> &'static str {
    match () {
        () if kind.fair => "fair lock",
        () if kind.read => "read lock",
        () if kind.write => "write lock",
        () if kind.fenced => "fenced lock",
        () => "lock",
    }
}

/// Waits as `--wait` and `--lease` say: `None` when the wait ran out.
async fn acquire(lock: &RLock, hold: &HoldOptions) -> redisson_locks::Result<Option<LockGuard>> {
    match (hold.wait, hold.lease) {
        (None, None) => lock.lock().await.map(Some),
        (None, Some(lease)) => lock.lock_with_lease(lease).await.map(Some),
        (Some(wait), None) => lock.try_lock_wait(wait).await,
        (Some(wait), Some(lease)) => lock.try_lock_with_lease(wait, lease).await,
    }
}

/// The fencing token of the hold just taken: the name's counter, which no
/// other acquisition can move while this one holds the lock.
async fn lock_token(client: &Client, name: &str) -> Result<u64, Failure> {
    let fenced = client
        .get_fenced_lock(name)
        .map_err(|e| Failure::new(Code::Usage, crate::exit::words(&e)))?;
    fenced
        .get_token()
        .await
        .map_err(|e| Failure::of("cannot read the fencing token", &e).with_code(Code::ToolFailed))?
        .ok_or_else(|| {
            Failure::new(
                Code::ToolFailed,
                format!("the fenced lock '{name}' has no token after it was taken"),
            )
        })
}
