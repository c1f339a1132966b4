//! The memory controller's write queue: posted writes wait so that reads go first (issue 15
//! item 2; the write buffers of the seeds' SimpleScalar memory systems yield to reads).
//!
//! A real controller serves a waiting read before any queued write, drains queued writes
//! when no read is waiting, and forces the oldest write out when the queue is full. The
//! timing model presents requests in program order with out-of-order times, and every
//! booking is final, so "no read is waiting at cycle x" is only known once the reads
//! wanting cycle x have been presented. The queue therefore defers a write's booking: a
//! posted write is held, unbooked, until `capacity` younger writes have been posted; then it
//! is booked at the first free slots at or after its own issue time. Reads presented in the
//! meantime were booked first (read priority), so the write takes the time they left idle:
//! drained when reads were idle if such time came before the queue filled, or after them
//! when the queue filled while the bus was busy (forced). A writer is rid of its data when
//! the queue accepts it: at once while an entry is free, else when the oldest write has
//! left for memory.
//!
//! With capacity 0 there is no queue: each write is booked when presented, as before.

use std::collections::VecDeque;

use crate::Cycle;

/// A write waiting in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    pub addr: u64,
    pub bytes: u64,
    /// Cycle the write was issued (before any `write_delay`).
    pub t: Cycle,
}

#[derive(Clone, Debug, Default)]
pub struct WriteQueue {
    capacity: usize,
    q: VecDeque<Posted>,
    /// Writes that found the queue full, and the cycles they waited for an entry.
    pub full_waits: u64,
    pub wait_cycles: u64,
}

impl WriteQueue {
    pub fn new(capacity: usize) -> WriteQueue {
        WriteQueue { capacity, q: VecDeque::with_capacity(capacity + 1), ..Default::default() }
    }

    /// Whether writes are queued at all (capacity > 0).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Post a write (the queue must be enabled). Returns the oldest write if the queue
    /// overflowed: the caller books it now and reports when it left with `accept`.
    #[inline]
    pub fn post(&mut self, w: Posted) -> Option<Posted> {
        debug_assert!(self.enabled());
        self.q.push_back(w);
        (self.q.len() > self.capacity).then(|| self.q.pop_front().expect("queue overflowed"))
    }

    /// The oldest queued write, taken out to be booked with one that overflowed (a batch).
    #[inline]
    pub fn take_oldest(&mut self) -> Option<Posted> {
        self.q.pop_front()
    }

    /// When the write posted at `t` is accepted, given when the write it displaced left for
    /// memory (`None`: an entry was free).
    #[inline]
    pub fn accept(&mut self, t: Cycle, displaced_done: Option<Cycle>) -> Cycle {
        match displaced_done {
            Some(done) if done > t => {
                self.full_waits += 1;
                self.wait_cycles += done - t;
                done
            }
            _ => t,
        }
    }

    /// Entries (0: no queue).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Take out the `i`-th oldest write (to be booked now).
    #[inline]
    pub fn remove(&mut self, i: usize) -> Option<Posted> {
        self.q.remove(i)
    }

    /// Writes waiting, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &Posted> {
        self.q.iter()
    }

    /// A cycle by which every queued write would be on memory if drained now, one after the
    /// other after everything booked (`booked_end`); `cost` bounds one write's occupancy.
    pub fn drained_by(&self, booked_end: Cycle, delay: Cycle, cost: impl Fn(&Posted) -> Cycle) -> Cycle {
        let start = self.q.iter().map(|w| w.t + delay).fold(booked_end, Cycle::max);
        self.q.iter().fold(start, |end, w| end + cost(w))
    }

    /// Zero the counters; queued writes stay.
    pub fn reset_stats(&mut self) {
        (self.full_waits, self.wait_cycles) = (0, 0);
    }

    /// `mem.write_queue_*` statistics, when there is a queue.
    pub fn stats(&self, out: &mut dyn FnMut(&'static str, u64)) {
        if self.enabled() {
            out("write_queue_full_waits", self.full_waits);
            out("write_queue_wait_cycles", self.wait_cycles);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(t: Cycle) -> Posted {
        Posted { addr: 0, bytes: 64, t }
    }

    #[test]
    fn the_oldest_write_leaves_when_the_queue_overflows() {
        let mut q = WriteQueue::new(2);
        assert_eq!(q.post(w(10)), None);
        assert_eq!(q.post(w(20)), None);
        assert_eq!(q.post(w(30)), Some(w(10)));
        assert_eq!(q.pending().map(|p| p.t).collect::<Vec<_>>(), vec![20, 30]);
    }

    #[test]
    fn a_writer_waits_only_while_the_queue_is_full() {
        let mut q = WriteQueue::new(1);
        assert_eq!(q.accept(100, None), 100);
        assert_eq!(q.accept(100, Some(60)), 100, "the displaced write had left before");
        assert_eq!(q.accept(100, Some(145)), 145);
        assert_eq!((q.full_waits, q.wait_cycles), (1, 45));
    }

    #[test]
    fn queued_writes_are_bounded_after_everything_booked() {
        let mut q = WriteQueue::new(4);
        q.post(w(500));
        q.post(w(100));
        // From max(booked end 300, latest issue 500 + delay 5): two writes of 40 cycles.
        assert_eq!(q.drained_by(300, 5, |p| p.bytes / 8 * 5), 585);
        assert_eq!(WriteQueue::new(4).drained_by(300, 5, |_| 40), 300);
    }
}
