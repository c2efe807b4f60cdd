//! `elect NAME -- COMMAND`: run a command as the leader, as `etcdctl elect`
//! does; and `elect NAME --listen`: one line per change of leader.

use std::time::Duration;

use redisson_locks::{Client, Leader, LeaderChange};
use serde_json::json;

use crate::child::{run_while_held, take};
use crate::exit::{words, Code, Failure};
use crate::signals::Stops;
use crate::{out, units};

/// What the command line asked of `elect`.
#[derive(Debug)]
pub(crate) struct Options<'a> {
    pub(crate) name: &'a str,
    pub(crate) listen: bool,
    pub(crate) count: Option<u64>,
    pub(crate) wait: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    pub(crate) command: &'a [String],
    pub(crate) json: bool,
}

/// Campaigns and runs the command as leader, or listens.
pub(crate) async fn run(client: &Client, options: Options<'_>) -> Result<(), Failure> {
    let name = options.name;
    let election = client
        .get_leader_election(name)
        .map_err(|e| Failure::new(Code::Usage, words(&e)))?;
    if options.listen {
        return listen(election.observe(), options.count, options.json).await;
    }
    let spans = crate::deadline::spans(client.config(), None, None);
    let grace = crate::deadline::grace(options.grace, &spans)?;
    let what = format!("leadership of '{name}'");
    let (leadership, stops) = take(
        "cannot campaign",
        format!("{what} was not won within the wait: another participant leads"),
        async {
            match options.wait {
                None => election.campaign().await.map(Some),
                Some(wait) => election.try_campaign(wait).await,
            }
        },
    )
    .await?;
    let env = [
        ("REDISSON_LOCK_NAME", name.to_owned()),
        ("REDISSON_LEADER_EPOCH", leadership.epoch().to_string()),
    ];
    let what = format!("{what} (epoch {})", leadership.epoch());
    run_while_held(&what, (leadership, stops), options.command, &env, grace).await
}

/// Prints each change of leader, the leader at start first, until `count`
/// lines or a signal to stop (SIGINT, SIGTERM, SIGHUP: exit 0).
async fn listen(
    mut observer: redisson_locks::Observer,
    count: Option<u64>,
    json: bool,
) -> Result<(), Failure> {
    let mut stops = Stops::listen()?;
    let mut printed = 0u64;
    loop {
        let change = tokio::select! {
            change = observer.next() => change
                .map_err(|e| Failure::of("cannot read who leads", &e))?,
            _ = stops.next() => return Ok(()),
        };
        if json {
            out::json_line(&as_json(&change))?;
        } else {
            out::print(&format!("{}\n", crate::escape::escaped(&line(&change))))?;
        }
        printed += 1;
        if count.is_some_and(|count| printed >= count) {
            return Ok(());
        }
    }
}

/// `epoch 7: 6c47fd2f:1 (pid 4121 on web-3), since 09:15:02`, or `vacant`.
fn line(change: &LeaderChange) -> String {
    match change {
        LeaderChange::Elected(leader) => {
            let mut line = format!(
                "epoch {}: {} ({})",
                leader.epoch,
                units::short_owner(&leader.owner),
                units::identity(&leader.owner)
            );
            if let Some(since) = leader.since_ms {
                line.push_str(&format!(", since {}", units::clock(since)));
            }
            line
        }
        _ => "vacant".to_owned(),
    }
}

fn as_json(change: &LeaderChange) -> serde_json::Value {
    match change {
        LeaderChange::Elected(leader) => json!({ "leader": leader_json(leader) }),
        _ => json!({ "leader": null }),
    }
}

fn leader_json(leader: &Leader) -> serde_json::Value {
    json!({
        "epoch": leader.epoch,
        "owner": leader.owner,
        "since_ms": leader.since_ms,
        "lease_left_ms": leader.lease_left.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    })
}
