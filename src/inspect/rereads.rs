//! When to read again: what a [`Watch`](crate::inspect::Watch) and an
//! election [`Observer`](crate::Observer) wait on between two readings. A
//! message on a channel they listen on wakes them at once; without one, a
//! reading is due an interval after the last began, so a change nothing
//! announces (a lease run out, an acquire, a Java win) is still seen.
//!
//! Both are documented as cancel safe, and callers do drop their calls: a
//! `select!` against a ticker, a `timeout` in a loop. So nothing here lives
//! in the call. The due instant is kept from one call to the next (a call
//! that started its own interval afresh would never reach it when dropped
//! more often than that), and so is a wake-up taken from the channel but not
//! yet answered by a finished reading.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use crate::engine::Engine;
use crate::transport::pubsub::{Class, Subscription};

/// Wake-ups from channels, and the re-read interval, kept across calls.
#[derive(Debug)]
pub(crate) struct Rereads {
    every: Duration,
    /// Woken by the relays of the channels listened on; a wake-up that comes
    /// while nobody waits is kept (one permit).
    woken: Arc<Notify>,
    /// Channels listened on, each relayed by a task that stops when its
    /// sender is dropped (with this).
    relays: Vec<(String, oneshot::Sender<()>)>,
    /// When a reading is due without a wake-up: the interval after the last
    /// finished reading began. `None` before the first: it is due at once.
    due: Option<Instant>,
    /// A wake-up was taken, and no reading has finished since.
    woken_unanswered: bool,
}

impl Rereads {
    /// Reading every `every` at the latest, listening to nothing yet.
    pub(crate) fn new(every: Duration) -> Rereads {
        Rereads {
            every,
            woken: Arc::new(Notify::new()),
            relays: Vec::new(),
            due: None,
            woken_unanswered: false,
        }
    }

    /// Listens on exactly `channels` (as one more waiter of `client`'s
    /// subscription to each, in the class every message wakes, so it never
    /// takes a wake-up from a waiter), unless it already does.
    pub(crate) fn listen(&mut self, client: &Engine, lock: &str, channels: Vec<String>) {
        if self.relays.iter().map(|(c, _)| c).eq(channels.iter()) {
            return;
        }
        let lock: Arc<str> = lock.into();
        self.relays = channels
            .into_iter()
            .map(|channel| {
                let subscription = client.pubsub.subscribe(&channel, &lock, Class::All);
                let (stop, stopped) = oneshot::channel();
                client
                    .conn
                    .spawner()
                    .spawn(relay(subscription, self.woken.clone(), stopped));
                (channel, stop)
            })
            .collect();
    }

    /// Listens to nothing any more: readings come at the interval only.
    pub(crate) fn stop_listening(&mut self) {
        self.relays.clear();
    }

    /// Waits until a reading is due: at once before the first, after a
    /// wake-up no finished reading has answered yet, or once the interval
    /// since the last reading began has passed.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up it takes is kept until [`read`](Rereads::read)
    /// answers it, and the due instant does not move until then.
    pub(crate) async fn until_due(&mut self) {
        let Some(due) = self.due else { return };
        if self.woken_unanswered {
            return;
        }
        if tokio::time::timeout_at(due, self.woken.notified())
            .await
            .is_ok()
        {
            self.woken_unanswered = true;
        }
    }

    /// A reading that began at `began` has finished (well or not): the next
    /// is due an interval after it began, or at the next wake-up.
    pub(crate) fn read(&mut self, began: Instant) {
        self.due = Some(began + self.every);
        self.woken_unanswered = false;
    }
}

/// Passes every wake-up of `subscription` on to `woken` until stopped; the
/// subscription ends with it.
async fn relay(subscription: Subscription, woken: Arc<Notify>, mut stopped: oneshot::Receiver<()>) {
    loop {
        let notified = subscription.notified();
        tokio::pin!(notified);
        // Registered before anything else is awaited: nothing in between is lost.
        notified.as_mut().enable();
        tokio::select! {
            _ = &mut stopped => return,
            _ = notified => woken.notify_one(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mistake this type exists to avoid: a caller that drops its wait
    /// more often than the interval must still find a reading due.
    #[tokio::test(start_paused = true)]
    async fn a_reading_falls_due_however_often_the_wait_is_dropped() {
        let mut rereads = Rereads::new(Duration::from_millis(500));
        rereads.until_due().await; // the first: at once
        rereads.read(Instant::now());
        let start = Instant::now();
        loop {
            let dropped = tokio::time::timeout(Duration::from_millis(100), rereads.until_due());
            if dropped.await.is_ok() {
                break;
            }
        }
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_taken_by_a_dropped_wait_is_answered_by_the_next() {
        let mut rereads = Rereads::new(Duration::from_secs(60));
        rereads.read(Instant::now());
        rereads.woken.notify_one();
        // The wait takes the wake-up and returns; the reading it stood for
        // is dropped before it finishes (no `read`).
        rereads.until_due().await;
        let start = Instant::now();
        rereads.until_due().await;
        assert_eq!(start.elapsed(), Duration::ZERO, "the wake-up was kept");
        rereads.read(Instant::now());
        let waited = tokio::time::timeout(Duration::from_secs(1), rereads.until_due()).await;
        assert!(waited.is_err(), "answered: the next waits again");
    }
}
