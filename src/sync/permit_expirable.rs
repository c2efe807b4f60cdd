//! `RPermitExpirableSemaphore`: Redisson's semaphore whose permits have ids and
//! leases, on its keys and channel.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::settle::{check_permits, settled_acquire, Took};
use super::waiting::{wait_for, Attempt, Waiting};
use tokio::time::Instant;

use crate::config::duration_to_millis;
use crate::engine::contract::{BoxFuture, RenewKind, Wait};
use crate::engine::validity::{Drift, Validity};
use crate::engine::watchdog::Renewal;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, HoldMeter, Kind, Labels};
use crate::transport::pubsub::Class;
use crate::transport::scripts::{self, epoch_millis, PermitKeys, PermitsTaken};

/// The id of one permit of an [`RPermitExpirableSemaphore`]: 16 random bytes,
/// written as 32 lowercase hex digits, as Redisson's `acquire()` returns them
/// (so an id taken in Java can be released in Rust, and the reverse).
///
/// ```
/// use redisson_locks::PermitId;
/// let id: PermitId = "0123456789abcdef0123456789abcdef".parse()?;
/// assert_eq!(id.to_string(), "0123456789abcdef0123456789abcdef");
/// # Ok::<(), redisson_locks::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// A fresh random id.
    fn random() -> Self {
        PermitId(uuid::Uuid::new_v4().into_bytes())
    }

    /// The id's 16 bytes, as they are stored in Redis (the member of the
    /// semaphore's `{name}:timeout` sorted set), for inspecting it there.
    ///
    /// ```
    /// let id: redisson_locks::PermitId = "0123456789abcdef0123456789abcdef".parse()?;
    /// assert_eq!(id.as_bytes()[..2], [0x01, 0x23]);
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    /// Parses the 32 hex digits Redisson prints (either case).
    fn from_str(text: &str) -> Result<Self> {
        crate::numeral::hex_bytes(text)
            .map(PermitId)
            .ok_or_else(|| Error::invalid(format!("{text:?} is not a permit id (32 hex digits)")))
    }
}

/// A distributed semaphore whose permits expire: Redisson's
/// `RPermitExpirableSemaphore`, on the same keys and channel.
///
/// Each acquire takes a permit under a new [`PermitId`] with a lease; the
/// permit comes back to the pool when it is released by that id, or when its
/// lease ends (a process that died holding it cannot keep it). Use it where a
/// holder may vanish; a plain [`RSemaphore`](crate::RSemaphore) where permits
/// are handed around freely.
///
/// Layout: the number of available permits in a string named after the
/// semaphore, and the permits out in a sorted set `{name}:timeout` (id →
/// the epoch-ms instant its lease ends, on the acquiring client's clock, as in
/// Redisson: keep clocks in step). Every operation first returns the permits
/// whose lease ended. Waiters sleep on `redisson_sc:{name}`, and at most until
/// the first lease ends.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// use std::time::Duration;
/// let workers = client.get_permit_expirable_semaphore("render-workers")?;
/// workers.try_set_permits(4).await?;
/// let permit = workers.acquire(Duration::from_secs(60)).await?;
/// // ... work for at most a minute, or extend with update_lease ...
/// workers.release(&permit).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RPermitExpirableSemaphore {
    client: Arc<Engine>,
    keys: PermitKeys,
}

/// The score Redisson gives a permit taken without a lease; no lease may end
/// at or after it.
const NEVER_MS: u64 = 922_337_203_685_477;

/// The permit-expirable semaphore's kind, as its measurements name it.
const PERMIT_EXPIRABLE: Kind = kind!("permit_expirable_semaphore");

impl RPermitExpirableSemaphore {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RPermitExpirableSemaphore {
            keys: PermitKeys::new(name.into()),
            client,
        }
    }

    /// The semaphore's name, its key (Redisson `getName()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// assert_eq!(workers.name(), "workers");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.keys.semaphore
    }

    /// Takes a permit for `lease`, waiting as long as it takes (Redisson
    /// `acquire(leaseTime, unit)`); its id, to release it with.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// let permit = workers.acquire(Duration::from_secs(30)).await?;
    /// workers.release(&permit).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero lease or one over
    /// [`MAX_DURATION`](crate::MAX_DURATION); [`Error::Redis`] when Redis fails
    /// more than `retry_attempts` times in a row, or a reply does not come (the
    /// permit, if it was taken, is released again from the background).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future never leaves a permit taken (one the
    /// script took is released by its id) and leaves no subscription behind.
    pub async fn acquire(&self, lease: Duration) -> Result<PermitId> {
        self.take(lease, Wait::Forever)
            .await?
            .ok_or_else(|| Error::unexpected("acquire", "gave up without a wait limit"))
    }

    /// Takes a permit for `lease` if one is available now (Redisson
    /// `tryAcquire(-1, leaseTime, unit)`); its id, or `None`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// if let Some(permit) = workers.try_acquire(Duration::from_secs(30)).await? {
    ///     workers.release(&permit).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](RPermitExpirableSemaphore::acquire), without retries.
    ///
    /// # Cancel safety
    /// As [`acquire`](RPermitExpirableSemaphore::acquire).
    pub async fn try_acquire(&self, lease: Duration) -> Result<Option<PermitId>> {
        self.take(lease, Wait::Once).await
    }

    /// Takes a permit for `lease`, waiting at most `wait` (Redisson
    /// `tryAcquire(waitTime, leaseTime, unit)`); its id, or `None`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// let wait = Duration::from_secs(5);
    /// if let Some(permit) = workers.try_acquire_wait(wait, Duration::from_secs(30)).await? {
    ///     workers.release(&permit).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](RPermitExpirableSemaphore::acquire), and
    /// [`Error::InvalidArgument`] for a wait over [`MAX_DURATION`](crate::MAX_DURATION).
    ///
    /// # Cancel safety
    /// As [`acquire`](RPermitExpirableSemaphore::acquire).
    pub async fn try_acquire_wait(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        self.take(lease, Wait::For(wait)).await
    }

    /// Takes a permit whose lease the client's watchdog renews while the
    /// returned [`Permit`] is held, waiting as long as it takes: Redisson's
    /// missing "watchdog for RPermitExpirableSemaphore" (redisson#3046).
    ///
    /// The permit is leased for
    /// [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) and, every
    /// third of it, its score in `{name}:timeout` (its lease end, epoch ms) is
    /// moved to a full timeout from then, for many permits per script call, as
    /// the locks' holds are. So a Java client sees an ordinary permit whose lease
    /// keeps moving; a holder that dies gives its permit back within one
    /// timeout; dropping the `Permit` releases it. A
    /// [`max_hold`](crate::Config::max_hold) bounds it as it bounds a lock's hold.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("render-workers")?;
    /// workers.try_set_permits(4).await?;
    /// let permit = workers.acquire_renewed().await?;
    /// // ... work for as long as it takes; the lease follows ...
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when Redis fails more than `retry_attempts` times in a
    /// row, or a reply does not come (the permit, if it was taken, is released
    /// again from the background).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future never leaves a permit taken (one the
    /// script took is released by its id), nor a renewal registered, nor a
    /// subscription.
    pub async fn acquire_renewed(&self) -> Result<Permit> {
        self.take_renewed(Wait::Forever)
            .await?
            .ok_or_else(|| Error::unexpected("acquire", "gave up without a wait limit"))
    }

    /// [`acquire_renewed`](RPermitExpirableSemaphore::acquire_renewed), waiting
    /// at most `wait` (zero: one attempt); `None` when no permit came in time.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// if let Some(permit) = workers.try_acquire_renewed(Duration::from_secs(5)).await? {
    ///     println!("working under permit {}", permit.id());
    ///     permit.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire_renewed`](RPermitExpirableSemaphore::acquire_renewed), and
    /// [`Error::InvalidArgument`] for a wait over [`MAX_DURATION`](crate::MAX_DURATION).
    ///
    /// # Cancel safety
    /// As [`acquire_renewed`](RPermitExpirableSemaphore::acquire_renewed).
    pub async fn try_acquire_renewed(&self, wait: Duration) -> Result<Option<Permit>> {
        self.take_renewed(Wait::For(wait)).await
    }

    /// Gives permit `id` back (Redisson `release(permitId)`), waking a waiter.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// let permit = workers.acquire(Duration::from_secs(30)).await?;
    /// workers.release(&permit).await?;
    /// assert!(workers.release(&permit).await.unwrap_err().is_not_held());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] (its `owner` names the permit) when no such permit is
    /// out: never issued, released already, or its lease ended (it is back in
    /// the pool all the same); [`Error::Redis`] when the command fails.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any point, the release happens (finished, and
    /// sent again if it failed in transit, from the client's thread).
    pub async fn release(&self, id: &PermitId) -> Result<()> {
        if self.try_release(id).await? {
            Ok(())
        } else {
            Err(Error::NotHeld {
                name: self.name().to_owned(),
                owner: format!("permit {id}"),
            })
        }
    }

    /// Gives permit `id` back (Redisson `tryRelease(permitId)`); `false` when no
    /// such permit was out (see [`release`](RPermitExpirableSemaphore::release)).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// let stale: redisson_locks::PermitId = "0123456789abcdef0123456789abcdef".parse()?;
    /// assert!(!workers.try_release(&stale).await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when no send reached the server within the settle's
    /// budget (a release that fails in transit is sent again until the
    /// server answers: releasing an id twice changes nothing; `true` then
    /// when the first send may have been the one that released it).
    ///
    /// # Cancel safety
    /// As [`release`](RPermitExpirableSemaphore::release).
    pub async fn try_release(&self, id: &PermitId) -> Result<bool> {
        let send = {
            let (conn, keys, id) = (self.client.conn.clone(), self.keys.clone(), *id);
            move |first_may_have_run: bool| {
                let (mut conn, keys) = (conn.clone(), keys.clone());
                async move {
                    let released = scripts::pes_release(&mut conn, &keys, id.as_bytes()).await?;
                    // Sent again after a first send that may have run: "not
                    // out" may be that send's doing, and the permit is back
                    // either way.
                    Ok(released || first_may_have_run)
                }
            }
        };
        let call: BoxFuture<Result<bool>> = Box::pin(send(false));
        super::settle::settled_release(
            &self.client.conn,
            call,
            send,
            super::settle::SettleTerms::of(&self.client.config),
            Labels::new(PERMIT_EXPIRABLE, &self.keys.semaphore, &self.client.config),
        )
        .await
    }

    /// Gives permit `id` a new lease of `lease` from now (Redisson
    /// `updateLeaseTime(permitId, leaseTime, unit)`), shorter or longer; `false`
    /// when no such permit is out (a permit whose lease ended cannot be revived).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// let permit = workers.acquire(Duration::from_secs(30)).await?;
    /// // ... the work takes longer than planned ...
    /// assert!(workers.update_lease(&permit, Duration::from_secs(60)).await?);
    /// workers.release(&permit).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero lease or one over
    /// [`MAX_DURATION`](crate::MAX_DURATION); [`Error::Redis`] when the command
    /// fails.
    pub async fn update_lease(&self, id: &PermitId, lease: Duration) -> Result<bool> {
        let expiry = lease_end(lease)?;
        let mut conn = self.client.conn.clone();
        scripts::pes_update_lease(&mut conn, &self.keys, id.as_bytes(), expiry).await
    }

    /// How many permits are available now, once every permit whose lease ended
    /// is back (Redisson `availablePermits()`); 0 for a semaphore never set.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// println!("{} free", workers.available_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn available_permits(&self) -> Result<i64> {
        let mut conn = self.client.conn.clone();
        scripts::pes_available(&mut conn, &self.keys).await
    }

    /// Sets the number of permits, only if the semaphore was never set (Redisson
    /// `trySetPermits(permits)`); `true` when this call set it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// workers.try_set_permits(4).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits;
    /// [`Error::Redis`] when the command fails.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        let mut conn = self.client.conn.clone();
        let (name, channel) = (&self.keys.semaphore, &self.keys.channel);
        scripts::semaphore_try_set(&mut conn, name, channel, permits).await
    }

    /// Adds `change` permits, or removes them when negative (Redisson
    /// `addPermits(change)`), waking waiters when permits are available
    /// afterwards.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// workers.add_permits(2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn add_permits(&self, change: i32) -> Result<()> {
        let mut conn = self.client.conn.clone();
        let (name, channel) = (&self.keys.semaphore, &self.keys.channel);
        scripts::semaphore_add(&mut conn, name, channel, change).await?;
        Ok(())
    }

    /// Takes a permit leased for `lease`, waiting as `wait` says.
    async fn take(&self, lease: Duration, wait: Wait) -> Result<Option<PermitId>> {
        let lease_ms = duration_to_millis("lease", lease)?;
        let attempt = || async move {
            let id = PermitId::random();
            Ok(match self.attempt(id, lease_ms).await? {
                Attempt::Done(_) => Attempt::Done(id),
                Attempt::NotYet(hint) => Attempt::NotYet(hint),
            })
        };
        wait_for(self.waiting(), wait, attempt).await
    }

    /// Takes a permit renewed by the watchdog, waiting as `wait` says.
    async fn take_renewed(&self, wait: Wait) -> Result<Option<Permit>> {
        let lease = self.client.config.lock_watchdog_timeout;
        wait_for(self.waiting(), wait, || self.attempt_renewed(lease)).await
    }

    /// One renewed attempt: a [`Permit`], renewed by the watchdog, the moment
    /// it succeeds, so that nothing dropped after it leaves the permit out.
    async fn attempt_renewed(&self, lease: Duration) -> Result<Attempt<Permit>> {
        let lease_ms = duration_to_millis("watchdog timeout", lease)?;
        let id = PermitId::random();
        let field = id.to_string();
        let sent = match self.attempt(id, lease_ms).await? {
            Attempt::Done(sent) => sent,
            Attempt::NotYet(hint) => return Ok(Attempt::NotYet(hint)),
        };
        let config = &self.client.config;
        let drift = Drift {
            factor: config.clock_drift_factor,
        };
        let labels = Labels::new(PERMIT_EXPIRABLE, &self.keys.semaphore, config);
        let term_end = config.max_hold.map(|limit| sent + limit);
        let validity = Validity::new(sent, lease, drift)
            .with_term(term_end)
            .measured(HoldMeter::start(&labels));
        let validity = Arc::new(validity);
        Ok(Attempt::Done(Permit {
            semaphore: self.clone(),
            id,
            renewal: Some(self.client.watchdog.activate(
                &self.keys.semaphore,
                &field,
                RenewKind::Permit,
                validity.clone(),
            )),
            validity,
        }))
    }

    fn waiting(&self) -> Waiting<'_> {
        Waiting {
            client: &self.client,
            name: &self.keys.semaphore,
            channel: &self.keys.channel,
            class: Class::Counted,
            local_line: true,
            kind: PERMIT_EXPIRABLE,
        }
    }

    /// One attempt under `id` (new for each attempt); when taken, the instant
    /// it was sent (its lease counts from no earlier). If its future is
    /// dropped after the script ran, or its outcome is unknown, the permit is
    /// released by that id (a release of an id that took nothing changes
    /// nothing).
    async fn attempt(&self, id: PermitId, lease_ms: u64) -> Result<Attempt<Instant>> {
        let sent = Instant::now();
        let expiry = lease_end_ms(lease_ms)?;
        let (mut conn, keys) = (self.client.conn.clone(), self.keys.clone());
        let call: BoxFuture<Result<Option<PermitsTaken>>> = Box::pin(async move {
            let taken = scripts::pes_acquire(&mut conn, &keys, &[id.0], expiry).await?;
            Ok(Some(taken))
        });
        let labels = Labels::new(PERMIT_EXPIRABLE, &self.keys.semaphore, &self.client.config);
        let outcome = settled_acquire(&self.client.conn, call, self.give_back(id), labels).await;
        match outcome? {
            Some(PermitsTaken::Taken) => Ok(Attempt::Done(sent)),
            Some(PermitsTaken::Busy(hint)) => Ok(Attempt::NotYet(hint)),
            None => Ok(Attempt::NotYet(None)),
        }
    }

    /// Releases permit `id` if an attempt under it may have taken one (from a
    /// task: the caller is gone), retrying until the server answers.
    fn give_back(
        &self,
        id: PermitId,
    ) -> impl FnOnce(Took<PermitsTaken>) -> BoxFuture<()> + Send + 'static {
        let (conn, keys) = (self.client.conn.clone(), self.keys.clone());
        let terms = super::settle::SettleTerms::of(&self.client.config);
        move |took| {
            Box::pin(async move {
                if let Took::Surely(PermitsTaken::Busy(_)) = took {
                    return;
                }
                let what = format!(
                    "permit-expirable semaphore {:?} (permit {id})",
                    keys.semaphore
                );
                super::settle::settle_retrying(terms, &what, || {
                    let (mut conn, keys) = (conn.clone(), &keys);
                    async move { scripts::pes_release(&mut conn, keys, &id.0).await.map(drop) }
                })
                .await;
            })
        }
    }
}

/// A permit of an [`RPermitExpirableSemaphore`] whose lease the client's
/// watchdog renews while this value lives (from
/// [`acquire_renewed`](RPermitExpirableSemaphore::acquire_renewed)).
///
/// # Validity
/// As a [`LockGuard`](crate::LockGuard)'s: the permit is surely out until the
/// instant its last confirmed acquire or renewal was sent, plus the lease,
/// minus the clock-drift margin. [`valid_for`](Permit::valid_for) gives the
/// time left, [`lease_lost`](Permit::lease_lost) completes once a renewal found
/// the permit gone (its lease ended, someone released it by id) or the
/// validity ran out. The lease end is on this client's wall clock, as in
/// Redisson: every client reclaims expired permits by its own clock. So the
/// validity holds only while the clients' wall clocks agree: a client whose
/// clock runs ahead by *d* reclaims the permit *d* early (the drift margin
/// covers clock rates, not offsets). Keep the clocks synchronised (NTP), or
/// stop work well before [`valid_for`](Permit::valid_for) ends.
///
/// # Drop
/// Dropping it stops the renewal at once and sends the release from the
/// client's own background thread, wherever it is dropped; that release's
/// errors cannot be reported (call [`release`](Permit::release) to see them).
/// A process killed while holding it leaves the permit to its lease: it is
/// back within one watchdog timeout.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let workers = client.get_permit_expirable_semaphore("workers")?;
/// {
///     let permit = workers.acquire_renewed().await?;
///     assert!(permit.valid_for().is_some());
///     // ... a `?` here still releases the permit ...
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping the permit releases it at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct Permit {
    semaphore: RPermitExpirableSemaphore,
    id: PermitId,
    /// The watchdog's renewal; taken when the permit ends.
    renewal: Option<Renewal>,
    validity: Arc<Validity>,
}

impl Permit {
    /// The permit's id, as Redisson's `acquire()` returns it: what a Java
    /// client would release or update it by.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// println!("{}", permit.id()); // 32 hex digits
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> PermitId {
        self.id
    }

    /// How much longer the permit is surely out; `None` once it is lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// if permit.valid_for().is_some_and(|left| left.as_secs() >= 1) {
    ///     // ... a side effect that needs the permit ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        self.validity.valid_for()
    }

    /// Is the permit lost (see [`lease_lost`](Permit::lease_lost))?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// assert!(!permit.is_lease_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.validity.is_lost()
    }

    /// Completes when the permit is lost: a renewal found it gone, or its
    /// validity ran out without a confirmed renewal (the server unreachable,
    /// this process paused). Lost is for good.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// tokio::select! {
    ///     () = permit.lease_lost() => eprintln!("permit lost; stopping"),
    ///     () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn lease_lost(&self) {
        self.validity.wait_lost().await
    }

    /// Runs `work` and drops it the moment the permit is lost (as
    /// [`LockGuard::run`](crate::LockGuard::run) does for a hold): a job that
    /// needs its slot stops before another holder can take that slot.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// match permit.run(async { /* the job */ }).await {
    ///     Ok(()) => permit.release().await?,
    ///     Err(e) if e.is_lease_lost() => eprintln!("job abandoned: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the permit was lost first (a loss that ties
    /// with the end wins: the job's result is not trusted).
    ///
    /// # Cancel safety
    /// Dropping the call drops `work` where it stands; the permit stays out.
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        crate::engine::validity::while_held(
            work,
            || self.validity.is_lost(),
            self.validity.wait_lost(),
        )
        .await
        .ok_or_else(|| Error::LeaseLost {
            name: self.semaphore.keys.semaphore.to_string(),
        })
    }

    /// Gives the permit back, reporting errors (dropping it does the same,
    /// silently).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let permit = client.get_permit_expirable_semaphore("workers")?.acquire_renewed().await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the permit was no longer out (its lease ended,
    /// or it was released by id elsewhere); [`Error::Redis`] when the command
    /// fails.
    ///
    /// # Cancel safety
    /// The renewal stops at the first poll; dropped while the release is in
    /// flight, the release may or may not happen (the permit's lease, no longer
    /// renewed, bounds the difference).
    pub async fn release(mut self) -> Result<()> {
        let releasing = self.end();
        releasing.await
    }

    /// The one way a permit ends (release or drop): the renewal stops before
    /// the release is sent, so no renewal outlives it.
    fn end(&mut self) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        drop(self.renewal.take());
        let (semaphore, id) = (self.semaphore.clone(), self.id);
        async move { semaphore.release(&id).await }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.renewal.is_none() {
            return; // released already
        }
        let releasing = self.end();
        let name = self.semaphore.keys.semaphore.clone();
        self.semaphore.client.conn.spawn_cleanup(async move {
            if let Err(e) = releasing.await {
                if !e.is_not_held() {
                    crate::trace::warn_event!(
                        "permit-expirable semaphore {name:?}: releasing a dropped permit failed (it ends with its lease): {e}"
                    );
                }
            }
        });
    }
}

/// The epoch-ms instant a lease of `lease` from now ends.
fn lease_end(lease: Duration) -> Result<u64> {
    lease_end_ms(duration_to_millis("lease", lease)?)
}

fn lease_end_ms(lease_ms: u64) -> Result<u64> {
    let end = epoch_millis().saturating_add(lease_ms);
    if end >= NEVER_MS {
        return Err(Error::invalid(format!(
            "a lease of {lease_ms} ms would end after Redisson's 'never' ({NEVER_MS})"
        )));
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_read_and_print_as_redisson_does() {
        let text = "12890d18437ee59381f78cc85ddcaa8b";
        let id: PermitId = text.parse().unwrap();
        assert_eq!(id.as_bytes()[..3], [0x12, 0x89, 0x0d]);
        assert_eq!(id.to_string(), text);
        assert_eq!(
            "12890D18437EE59381F78CC85DDCAA8B"
                .parse::<PermitId>()
                .unwrap(),
            id
        );
        for bad in [
            "",
            "12",
            "zz890d18437ee59381f78cc85ddcaa8b",
            "é2890d18437ee59381f78cc85ddcaa8",
            // Signs are not hex digits: this would print back as another id.
            "+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f",
            "-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0",
            " 12890d18437ee59381f78cc85ddcaa8",
        ] {
            assert!(
                bad.parse::<PermitId>().unwrap_err().is_invalid_argument(),
                "{bad}"
            );
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }

    #[test]
    fn every_permit_id_that_parses_prints_back_as_it_was_read() {
        // Every pair of characters from a small alphabet of digits, letters,
        // signs and spaces, at every place of an id.
        let alphabet = "0aF+- g";
        for place in 0..16 {
            for high in alphabet.chars() {
                for low in alphabet.chars() {
                    let mut text = "0".repeat(32);
                    text.replace_range(2 * place..2 * place + 2, &format!("{high}{low}"));
                    if let Ok(id) = text.parse::<PermitId>() {
                        assert_eq!(id.to_string(), text.to_ascii_lowercase(), "{text}");
                    }
                }
            }
        }
    }
}
