//! `run-permit NAME -- COMMAND`: at most N copies of a job across machines.
//! Takes a renewed permit of a permit-expirable semaphore (Redisson's
//! `RPermitExpirableSemaphore`, so Java jobs count against the same N), or
//! with `--fair` of a fair semaphore (served in arrival order), runs the
//! command while it is held, and gives it back when the command ends. A
//! holder that dies gives it back by itself, a lease later.

use std::time::Duration;

use redisson_locks::Client;

use crate::child::{run_while_held, take};
use crate::exit::{words, Code, Failure};
use crate::held::Held;
use crate::out::note;

/// What the command line asked of `run-permit`.
#[derive(Debug)]
pub(crate) struct Options<'a> {
    pub(crate) name: &'a str,
    pub(crate) permits: Option<u32>,
    pub(crate) wait: Option<Duration>,
    /// A fair semaphore's permit, in arrival order.
    pub(crate) fair: bool,
    pub(crate) grace: Option<Duration>,
    pub(crate) command: &'a [String],
}

/// Takes a permit, runs the command, gives the permit back.
pub(crate) async fn run(client: &Client, options: Options<'_>) -> Result<(), Failure> {
    if options.fair {
        return run_fair(client, options).await;
    }
    let name = options.name;
    let semaphore = client
        .get_permit_expirable_semaphore(name)
        .map_err(|e| Failure::new(Code::Usage, words(&e)))?;
    let spans = crate::deadline::spans(client.config(), None, None);
    let grace = crate::deadline::grace(options.grace, &spans)?;
    if let Some(permits) = options.permits {
        set_permits(name, permits, semaphore.try_set_permits(permits)).await?;
    }
    let what = format!("a permit of '{name}'");
    let taking = async {
        match options.wait {
            None => semaphore.acquire_renewed().await.map(Some),
            Some(wait) => semaphore.try_acquire_renewed(wait).await,
        }
    };
    let id = |permit: &redisson_locks::Permit| (permit.id().to_string(), permit.id().to_string());
    run_under(&options, (what, grace), taking, id).await
}

/// `run-permit --fair`: the same under a fair semaphore's permit, taken in
/// arrival order.
async fn run_fair(client: &Client, options: Options<'_>) -> Result<(), Failure> {
    let name = options.name;
    let semaphore = client
        .get_fair_semaphore(name)
        .map_err(|e| Failure::new(Code::Usage, words(&e)))?;
    let spans = crate::deadline::spans(client.config(), None, None);
    let grace = crate::deadline::grace(options.grace, &spans)?;
    if let Some(permits) = options.permits {
        set_permits(name, permits, semaphore.try_set_permits(permits)).await?;
    }
    let what = format!("a permit of the fair semaphore '{name}'");
    let taking = async {
        match options.wait {
            None => semaphore.acquire(1).await.map(Some),
            Some(wait) => semaphore.try_acquire(1, wait).await,
        }
    };
    let id = |permits: &redisson_locks::FairPermits| {
        let hold = permits.hold_id().to_owned();
        (hold.clone(), format!("hold {hold}"))
    };
    run_under(&options, (what, grace), taking, id).await
}

/// Takes `what` through `taking`, runs the command while it is held (its id
/// in the environment, as `id` gives it with the id as shown), and gives it
/// back.
async fn run_under<H: Held>(
    options: &Options<'_>,
    (what, grace): (String, Duration),
    taking: impl std::future::Future<Output = redisson_locks::Result<Option<H>>>,
    id: impl Fn(&H) -> (String, String),
) -> Result<(), Failure> {
    let (held, stops) = take(
        &format!("cannot take {what}"),
        format!("{what} was not acquired within the wait: all are out"),
        taking,
    )
    .await?;
    let (id, shown) = id(&held);
    let env = [
        ("REDISSON_LOCK_NAME", options.name.to_owned()),
        ("REDISSON_PERMIT_ID", id),
    ];
    run_while_held(
        &format!("{what} ({shown})"),
        (held, stops),
        options.command,
        &env,
        grace,
    )
    .await
}

/// Applies `--permits` through `setting` (a `try_set_permits`), noting on
/// stderr when the count was set already.
async fn set_permits(
    name: &str,
    permits: u32,
    setting: impl std::future::Future<Output = redisson_locks::Result<bool>>,
) -> Result<(), Failure> {
    let set = setting.await.map_err(|e| {
        Failure::of(&format!("cannot set the permits of '{name}'"), &e).with_code(Code::ToolFailed)
    })?;
    if !set {
        note(&format!(
            "redisson-locks: note: '{name}' has its permits set already: --permits \
             {permits} was not applied (the count stays as it was)"
        ));
    }
    Ok(())
}
