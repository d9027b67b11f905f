//! The waiters of one key (`WAIT timeout`): a first-come-first-served queue, as a pure
//! structure the shell drives with the clock.
//!
//! Terms:
//! * **waiter** — a blocked request, identified by a `ticket` (unique per server run) and
//!   carrying its own data `T` (the parsed request, the blocked client);
//! * **deadline** — the instant its `WAIT timeout` runs out (`None`: `WAIT 0`, no limit);
//! * **head** — the earliest waiter still queued. Only the head is ever judged: no waiter
//!   overtakes an earlier one, whatever their costs;
//! * **wake** — the next instant the key's timer must fire: the head's retry instant (when
//!   the algorithm said it would be admitted) or the earliest deadline, whichever comes first.

use std::collections::VecDeque;

/// One blocked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<T> {
    pub ticket: u64,
    pub deadline_ms: Option<i64>,
    pub data: T,
}

/// The waiters of one key, oldest first.
#[derive(Debug, Clone)]
pub struct WaitQueue<T> {
    waiters: VecDeque<Waiter<T>>,
}

impl<T> Default for WaitQueue<T> {
    fn default() -> Self {
        WaitQueue { waiters: VecDeque::new() }
    }
}

impl<T> WaitQueue<T> {
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Queues a waiter at the tail.
    pub fn push(&mut self, waiter: Waiter<T>) {
        self.waiters.push_back(waiter);
    }

    /// The earliest waiter, the only one ever judged.
    pub fn head(&self) -> Option<&Waiter<T>> {
        self.waiters.front()
    }

    /// Removes the head (admitted, or answered for good).
    pub fn pop_head(&mut self) -> Option<Waiter<T>> {
        self.waiters.pop_front()
    }

    /// Removes a waiter wherever it is (its client disconnected). `None` if it is not queued.
    pub fn remove(&mut self, ticket: u64) -> Option<Waiter<T>> {
        let at = self.waiters.iter().position(|w| w.ticket == ticket)?;
        self.waiters.remove(at)
    }

    /// Removes and returns, oldest first, every waiter whose deadline is at or before `now_ms`.
    pub fn take_timed_out(&mut self, now_ms: i64) -> Vec<Waiter<T>> {
        let mut out = Vec::new();
        let mut kept = VecDeque::with_capacity(self.waiters.len());
        for w in self.waiters.drain(..) {
            if w.deadline_ms.is_some_and(|d| d <= now_ms) {
                out.push(w);
            } else {
                kept.push_back(w);
            }
        }
        self.waiters = kept;
        out
    }

    /// The earliest deadline of any waiter.
    pub fn next_deadline(&self) -> Option<i64> {
        self.waiters.iter().filter_map(|w| w.deadline_ms).min()
    }

    /// When the key's timer must fire: the head's retry instant (`None` if the head has not
    /// been judged yet or can wait only for room, not time) or the earliest deadline.
    pub fn wake_at(&self, head_retry_at: Option<i64>) -> Option<i64> {
        match (head_retry_at, self.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The waiters, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Waiter<T>> {
        self.waiters.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn waiter(ticket: u64, deadline_ms: Option<i64>) -> Waiter<()> {
        Waiter { ticket, deadline_ms, data: () }
    }

    #[test]
    fn first_come_first_served() {
        let mut q = WaitQueue::default();
        for t in 1..=3 {
            q.push(waiter(t, None));
        }
        assert_eq!(q.head().map(|w| w.ticket), Some(1));
        assert_eq!(q.remove(2).map(|w| w.ticket), Some(2));
        assert_eq!(q.remove(2), None);
        assert_eq!(q.pop_head().map(|w| w.ticket), Some(1));
        assert_eq!(q.pop_head().map(|w| w.ticket), Some(3));
        assert!(q.is_empty());
    }

    #[test]
    fn the_timer_fires_for_the_head_or_the_earliest_deadline() {
        let mut q = WaitQueue::default();
        assert_eq!(q.wake_at(Some(5)), Some(5));
        q.push(waiter(1, None));
        q.push(waiter(2, Some(30)));
        q.push(waiter(3, Some(20)));
        assert_eq!(q.wake_at(None), Some(20));
        assert_eq!(q.wake_at(Some(10)), Some(10));
        assert_eq!(q.wake_at(Some(25)), Some(20));
        let gone: Vec<u64> = q.take_timed_out(20).iter().map(|w| w.ticket).collect();
        assert_eq!(gone, [3]);
        assert_eq!(q.iter().map(|w| w.ticket).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(q.wake_at(None), Some(30));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(Option<i64>),
        Pop,
        Remove(u64),
        TimeOut(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => prop::option::of(0i64..100).prop_map(Op::Push),
            1 => Just(Op::Pop),
            1 => (0u64..20).prop_map(Op::Remove),
            1 => (0i64..100).prop_map(Op::TimeOut),
        ]
    }

    proptest! {
        /// Against a plain list: order is arrival order after any mix of pops, removals and
        /// timeouts; timed-out waiters are exactly those due, oldest first; the wake instant is
        /// the minimum of the head's retry and every deadline.
        #[test]
        fn matches_a_list(ops in prop::collection::vec(op(), 0..60), retry in prop::option::of(0i64..100)) {
            let mut q = WaitQueue::default();
            let mut model: Vec<(u64, Option<i64>)> = Vec::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Push(d) => {
                        q.push(waiter(next, d));
                        model.push((next, d));
                        next += 1;
                    }
                    Op::Pop => {
                        let got = q.pop_head().map(|w| w.ticket);
                        let want = (!model.is_empty()).then(|| model.remove(0).0);
                        prop_assert_eq!(got, want);
                    }
                    Op::Remove(t) => {
                        let got = q.remove(t).map(|w| w.ticket);
                        let want = model.iter().position(|w| w.0 == t).map(|i| model.remove(i).0);
                        prop_assert_eq!(got, want);
                    }
                    Op::TimeOut(now) => {
                        let got: Vec<u64> = q.take_timed_out(now).iter().map(|w| w.ticket).collect();
                        let want: Vec<u64> =
                            model.iter().filter(|w| w.1.is_some_and(|d| d <= now)).map(|w| w.0).collect();
                        model.retain(|w| w.1.is_none_or(|d| d > now));
                        prop_assert_eq!(got, want);
                    }
                }
                let order: Vec<u64> = q.iter().map(|w| w.ticket).collect();
                prop_assert_eq!(order, model.iter().map(|w| w.0).collect::<Vec<_>>());
                prop_assert_eq!(q.len(), model.len());
                let earliest = model.iter().filter_map(|w| w.1).chain(retry).min();
                prop_assert_eq!(q.wake_at(retry), earliest);
            }
        }
    }
}
