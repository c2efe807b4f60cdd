//! The order in which one client's fair waiters for one lock join Redis's
//! queue: the order they came to the client's local line.
//!
//! Only the first of a client's entries in a fair lock's queue can be first
//! in line before the others, so only that one (the local line's head) needs
//! to wait in Redis; the others are parked with nothing but their entries.
//! That holds only if the client's entries stand in Redis's queue in the
//! order of its local line. Tasks on a multi-thread runtime reach the
//! connection in any order, so each waiter takes a ticket as it enters the
//! line and sends its join only when every earlier ticket's join has been
//! answered (or given up): one join in flight per client and lock, which is
//! what one release lets through anyway. Each turn wakes the one ticket whose
//! turn it is, not the whole line.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use tokio::time::Instant;

/// The tickets of one line.
#[derive(Debug, Default)]
pub(crate) struct JoinOrder {
    state: Mutex<Issued>,
}

#[derive(Debug, Default)]
struct Issued {
    /// The next ticket to give out.
    next: u64,
    /// Every ticket below this one is done: its turn to join.
    turn: u64,
    /// Tickets done out of turn (a waiter that left before joining).
    done_early: BTreeSet<u64>,
    /// The waiting tickets' wakers: only the ticket whose turn comes is woken
    /// (a burst of a thousand waiters would otherwise wake every one of them
    /// at each join, a million polls).
    wakers: HashMap<u64, Waker>,
    /// When the turn last moved; `None` before it ever did.
    moved_at: Option<Instant>,
}

impl JoinOrder {
    fn issued(&self) -> MutexGuard<'_, Issued> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next ticket, behind every one given out before.
    pub(crate) fn ticket(self: &Arc<Self>) -> JoinTicket {
        let mut issued = self.issued();
        let number = issued.next;
        issued.next += 1;
        JoinTicket {
            order: self.clone(),
            number,
            done: AtomicBool::new(false),
        }
    }

    fn done(&self, number: u64) {
        let mut issued = self.issued();
        issued.wakers.remove(&number);
        if number != issued.turn {
            issued.done_early.insert(number);
            return;
        }
        let mut turn = number + 1;
        while issued.done_early.remove(&turn) {
            turn += 1;
        }
        issued.turn = turn;
        issued.moved_at = Some(Instant::now());
        let next = issued.wakers.remove(&turn);
        drop(issued);
        if let Some(next) = next {
            next.wake();
        }
    }
}

/// A waiter's place in its line's join order; done (the next may join) when
/// [`JoinTicket::done`] is called or it is dropped.
#[derive(Debug)]
pub(crate) struct JoinTicket {
    order: Arc<JoinOrder>,
    number: u64,
    done: AtomicBool,
}

impl JoinTicket {
    /// Waits until every earlier ticket is done; `false` when the order did
    /// not move for `patience` (an earlier waiter whose future is not polled
    /// never has its join answered). A long line whose joins go on is waited
    /// out, however long it takes.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the wait (and then the ticket) lets the later
    /// tickets on.
    pub(crate) async fn turn(&self, patience: std::time::Duration) -> bool {
        let mut since = Instant::now();
        loop {
            let my_turn = std::future::poll_fn(|cx| {
                let mut issued = self.order.issued();
                if issued.turn >= self.number {
                    return Poll::Ready(());
                }
                issued.wakers.insert(self.number, cx.waker().clone());
                Poll::Pending
            });
            if tokio::time::timeout_at(since + patience, my_turn)
                .await
                .is_ok()
            {
                return true;
            }
            match self.order.issued().moved_at {
                Some(moved) if moved > since => since = moved,
                _ => return false,
            }
        }
    }

    /// This waiter's join was answered (or will never be sent): the next may
    /// join. Once; later calls (and the drop) do nothing.
    pub(crate) fn done(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            self.order.done(self.number);
        }
    }
}

impl Drop for JoinTicket {
    fn drop(&mut self) {
        self.done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn ready(ticket: &JoinTicket) -> bool {
        let mut turn = Box::pin(ticket.turn(std::time::Duration::from_secs(1)));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        turn.as_mut().poll(&mut cx).is_ready()
    }

    #[tokio::test]
    async fn joins_go_in_ticket_order_and_a_leaver_lets_the_rest_on() {
        let order = Arc::new(JoinOrder::default());
        let (first, second, third) = (order.ticket(), order.ticket(), order.ticket());
        assert!(ready(&first));
        assert!(!ready(&second) && !ready(&third));
        // The third leaves before its turn: it holds nobody up later.
        drop(third);
        assert!(!ready(&second));
        first.done();
        first.done();
        assert!(ready(&second));
        let fourth = order.ticket();
        assert!(!ready(&fourth));
        drop(second);
        assert!(
            ready(&fourth),
            "the third left early, so the fourth is next"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_stuck_behind_a_join_that_never_ends_gives_up() {
        let order = Arc::new(JoinOrder::default());
        let _stuck = order.ticket();
        let behind = order.ticket();
        assert!(!behind.turn(std::time::Duration::from_secs(4)).await);
    }

    #[tokio::test]
    async fn a_waiting_ticket_is_woken_when_its_turn_comes() {
        let order = Arc::new(JoinOrder::default());
        let first = order.ticket();
        let second = order.ticket();
        let waiting = tokio::spawn(async move {
            assert!(second.turn(std::time::Duration::from_secs(30)).await);
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("no panic");
    }

    /// A waker that counts its wakes.
    struct Counting(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_turn_wakes_only_the_ticket_whose_turn_it_is() {
        let order = Arc::new(JoinOrder::default());
        let first = order.ticket();
        let waiting: Vec<_> = (0..3).map(|_| order.ticket()).collect();
        let counters: Vec<_> = (0..3)
            .map(|_| Arc::new(Counting(std::sync::atomic::AtomicUsize::new(0))))
            .collect();
        let mut turns: Vec<_> = waiting
            .iter()
            .map(|t| Box::pin(t.turn(std::time::Duration::from_secs(30))))
            .collect();
        for (turn, counter) in turns.iter_mut().zip(&counters) {
            let waker = Waker::from(counter.clone());
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(turn.as_mut().poll(&mut cx).is_pending());
        }
        drop(first);
        let woken: Vec<usize> = counters
            .iter()
            .map(|c| c.0.load(Ordering::SeqCst))
            .collect();
        assert_eq!(woken, [1, 0, 0], "only the next ticket is woken");
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_far_back_in_a_line_that_moves_waits_it_out() {
        let order = Arc::new(JoinOrder::default());
        let tickets: Vec<_> = (0..10).map(|_| order.ticket()).collect();
        let last = order.ticket();
        let patience = std::time::Duration::from_secs(1);
        let waiting = tokio::spawn(async move { last.turn(patience).await });
        for ticket in tickets {
            // Each join takes most of the patience; the line takes ten times it.
            tokio::time::sleep(std::time::Duration::from_millis(900)).await;
            drop(ticket);
        }
        assert!(waiting.await.expect("no panic"), "the line moved all along");
    }
}
