//! Redisson's single-hash multi-lock (`getMultiLock(group, values)`): all of a
//! set of members of one group, or none, in one hash named after the group, so
//! one script takes them all at once (no ordering, no partial holds to undo).
//!
//! A member is named in the hash by a hash of its encoded value
//! ([`group_member_id`](crate::transport::keys::group_member_id)); its holder, the end of
//! the hold and the hold count sit in fields beside it (`lua/group_common.lua`).
//! Waiters sleep on the group's unlock channel, as a reentrant lock named after
//! the group would.

use std::sync::Arc;

use super::kind::LockKind;
use crate::engine::contract::RenewKind;
use crate::engine::contract::{plain, Acquirer, BoxFuture, ChannelOf, Outcome, Target, Wait};
use crate::engine::self_wait::Claim;
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::{kind, Kind};
use crate::transport::keys::lock_channel;
use crate::transport::scripts::{self, Released};

/// The members of one group lock: their ids, deduplicated and sorted.
#[derive(Debug)]
pub(crate) struct GroupMembers {
    ids: Arc<[String]>,
}

impl GroupMembers {
    /// `ids` must not be empty (the client checks).
    pub(crate) fn new(mut ids: Vec<String>) -> Self {
        ids.sort();
        ids.dedup();
        GroupMembers { ids: ids.into() }
    }

    /// Whether there is no member at all (a group hash with no live hold).
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl LockKind for GroupMembers {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        Arc::new(GroupOps {
            hold: scripts::group_hold(&self.ids, &owner),
            count: self.field(owner.clone()),
            target: Target::new(
                name.clone(),
                owner,
                ChannelOf::Lock,
                self.labels(client, name),
            ),
            ids: self.ids.clone(),
        })
    }

    /// The first member's count: every member's moves with it.
    fn field(&self, owner: String) -> String {
        let first = self.ids.first().map_or("", String::as_str);
        format!("{first}:{owner}:lock_count")
    }

    fn kind(&self) -> Kind {
        kind!("group")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        let ids = self.ids.clone();
        Box::pin(async move {
            let channel = lock_channel(&name);
            scripts::group_force_release(&mut client.conn.clone(), &name, &channel, &ids).await
        })
    }

    fn claim(&self) -> Claim {
        Claim::Members(self.ids.clone())
    }

    /// Whether any of the members is held, by anyone (the group's other members
    /// do not count).
    fn is_locked(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        let ids = self.ids.clone();
        Box::pin(
            async move { scripts::group_is_locked(&mut client.conn.clone(), &name, &ids).await },
        )
    }
}

/// The group lock's scripts, bound to one group, member set and owner.
#[derive(Debug)]
struct GroupOps {
    target: Target,
    ids: Arc<[String]>,
    /// The watchdog's identity of this hold (`scripts::group_hold`).
    hold: String,
    /// The field counting this owner's holds of the first member.
    count: String,
}

impl Acquirer for GroupOps {
    fn target(&self) -> &Target {
        &self.target
    }

    fn renewal(&self) -> (&str, RenewKind) {
        (&self.hold, RenewKind::GroupMembers)
    }

    fn count_field(&self) -> &str {
        &self.count
    }

    fn attempt(
        self: Arc<Self>,
        mut conn: crate::transport::conn::Conn,
        lease_ms: u64,
        _queue: bool,
    ) -> BoxFuture<Result<Outcome>> {
        Box::pin(async move {
            scripts::group_acquire(&mut conn, self.name(), &self.ids, lease_ms, self.owner())
                .await
                .map(plain)
        })
    }

    fn release(
        self: Arc<Self>,
        mut conn: crate::transport::conn::Conn,
        lease_ms: u64,
    ) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            scripts::group_release(
                &mut conn,
                self.name(),
                self.channel(),
                &self.ids,
                lease_ms,
                self.owner(),
            )
            .await
        })
    }
}
