//! Off-chip memory: a fixed first-chunk latency and one shared data bus.
//!
//! Memory is modelled as a pipelined device (any number of requests in flight); what
//! serialises traffic is the data bus, `width` bytes per beat, one beat per bus cycle of
//! `beat_cycles` processor cycles (Table 1 of seeds 000/003: 200 MHz, 8 B wide, 1 GHz core →
//! 5 cycles/beat). Reads, writes and metadata transfers of every scheme share it.
//!
//! The bus is a reservation calendar of bus cycles: a transfer takes the earliest run of free
//! bus cycles at or after it is wanted. The timing model presents requests in program order
//! but with out-of-order times (a load that issues late, a write that waits for a hash); a
//! calendar lets each fill the gap that was free at its own time instead of queueing behind
//! whatever was presented before it.

use crate::calendar::Calendar;
use crate::divisor::Divisor;
use crate::memory::{transfer, Beat, MemCounters, MemoryModel, Transfer};
use crate::write_queue::{Posted, WriteQueue};
use crate::Cycle;

#[derive(Clone, Copy, Debug)]
pub struct BusParams {
    /// Cycles from request to the arrival of the first bus-width chunk.
    pub latency: Cycle,
    /// Bytes per beat.
    pub width: u64,
    /// Processor cycles per beat.
    pub beat_cycles: Cycle,
    /// Cycles a posted write waits in the controller's write queue before it may take the bus,
    /// so that reads presented meanwhile go first (reads stall the core, writes do not).
    pub write_delay: Cycle,
}

#[derive(Clone, Debug)]
pub struct Bus {
    p: BusParams,
    /// `p.width` and `p.beat_cycles`, to divide by (every transfer does).
    width: Divisor,
    beat: Divisor,
    /// Bus cycles booked.
    cal: Calendar,
    /// `queue_cycles`: cycles reads waited for the data bus beyond the memory latency.
    pub c: MemCounters,
    wq: WriteQueue,
}

impl Bus {
    /// Cycles from a read request to its first chunk (without queueing).
    pub fn latency(&self) -> Cycle {
        self.p.latency
    }

    pub fn new(p: BusParams) -> Bus {
        assert!(p.width > 0 && p.beat_cycles > 0);
        Bus { p, width: Divisor::new(p.width), beat: Divisor::new(p.beat_cycles), cal: Calendar::new(), c: MemCounters::default(), wq: WriteQueue::new(0) }
    }

    /// Posted writes wait in a controller queue of `entries` writes, so that reads go first
    /// (see `WriteQueue`); 0: no queue, each write is booked when issued.
    pub fn with_write_queue(mut self, entries: usize) -> Bus {
        self.wq = WriteQueue::new(entries);
        self
    }

    pub fn params(&self) -> BusParams {
        self.p
    }

    /// Cycle from which no transfer is booked or queued (queued writes: a bound, as if
    /// drained one after the other after everything booked).
    pub fn free_at(&self) -> Cycle {
        let bc = self.p.beat_cycles;
        self.wq.drained_by(self.cal.end() * bc, self.p.write_delay, |w| (self.beats(w.bytes) + 1) * bc)
    }

    pub fn reset_stats(&mut self) {
        self.c = MemCounters::default();
        self.wq.reset_stats();
    }

    #[inline]
    fn beats(&self, bytes: u64) -> u64 {
        self.width.div_ceil(bytes).max(1)
    }

    /// Read `bytes` requested at `t`.
    #[inline]
    pub fn read(&mut self, t: Cycle, bytes: u64) -> Transfer {
        let (n, want, bc) = (self.beats(bytes), self.read_want(t), self.p.beat_cycles);
        let tr = transfer(self.cal.reserve(self.beat.div_ceil(want), n), n, bc);
        self.count_reads(1, n, (tr.first - bc).saturating_sub(want));
        tr
    }

    /// Read `k` transfers of `bytes` each, all requested at `t`: the same as `k` calls of
    /// `read`, booked in one search; `f` gets each transfer in order.
    pub fn read_many(&mut self, t: Cycle, bytes: u64, k: usize, mut f: impl FnMut(Transfer)) {
        let (n, want, bc) = (self.beats(bytes), self.read_want(t), self.p.beat_cycles);
        let mut queued = 0;
        self.cal.reserve_many(self.beat.div_ceil(want), n, k, |s| {
            let tr = transfer(s, n, bc);
            queued += (tr.first - bc).saturating_sub(want);
            f(tr);
        });
        self.count_reads(k as u64, n, queued);
    }

    /// The cycle a read requested at `t` wants its first beat on the bus: once memory has
    /// the data.
    #[inline]
    fn read_want(&self, t: Cycle) -> Cycle {
        (t + self.p.latency).saturating_sub(self.p.beat_cycles)
    }

    #[inline]
    fn count_reads(&mut self, k: u64, n: u64, queued: Cycle) {
        self.c.queue_cycles += queued;
        self.c.busy_cycles += k * n * self.p.beat_cycles;
        self.c.read_bytes += k * n * self.p.width;
        self.c.reads += k;
    }

    /// Write `bytes` issued at `t`; returns when the writer is rid of it (writers do not wait
    /// for it): on memory, or accepted by the write queue if there is one. The beats go into
    /// the earliest idle bus cycles from `t + write_delay` on (from when it is booked, with a
    /// queue), one by one, filling gaps between reads rather than splitting them.
    #[inline]
    pub fn write(&mut self, t: Cycle, bytes: u64) -> Cycle {
        self.write_many(t, bytes, 1)
    }

    /// Write `k` transfers of `bytes` each, all issued at `t`: the same as `k` calls of
    /// `write` (their beats take the first free bus cycles, in order), booked in one pass
    /// when there is no queue. Returns when the writer is rid of the last.
    #[inline]
    pub fn write_many(&mut self, t: Cycle, bytes: u64, k: usize) -> Cycle {
        if k == 0 {
            return t;
        }
        let n = self.beats(bytes) * k as u64;
        self.c.busy_cycles += n * self.p.beat_cycles;
        self.c.write_bytes += n * self.p.width;
        self.c.writes += k as u64;
        if !self.wq.enabled() {
            return self.drain(t, n);
        }
        (0..k).fold(t, |done, _| {
            let displaced = self.wq.post(Posted { addr: 0, bytes, t }).map(|w| self.drain(w.t, self.beats(w.bytes)));
            done.max(self.wq.accept(t, displaced))
        })
    }

    /// Book `n` write beats issued at `t`; returns when the last is on memory.
    #[inline]
    fn drain(&mut self, t: Cycle, n: u64) -> Cycle {
        let bc = self.p.beat_cycles;
        (self.cal.reserve_each(self.beat.div_ceil(t + self.p.write_delay), n) + 1) * bc
    }
}

/// The bus ignores addresses: memory is one pipelined device behind it.
impl MemoryModel for Bus {
    fn read(&mut self, _addr: u64, bytes: u64, t: Cycle) -> Transfer {
        Bus::read(self, t, bytes)
    }

    fn read_many(&mut self, addrs: &[u64], bytes: u64, t: Cycle, f: &mut dyn FnMut(Transfer)) {
        Bus::read_many(self, t, bytes, addrs.len(), f)
    }

    /// One transfer: the first piece takes whole beats, the second follows on the next beat.
    fn read_pair(&mut self, _a: u64, a_bytes: u64, _b: u64, b_bytes: u64, t: Cycle) -> (Transfer, Transfer) {
        let (na, bc) = (self.beats(a_bytes), self.p.beat_cycles);
        let tr = Bus::read(self, t, na * self.p.width + b_bytes);
        (Transfer { first: tr.first, last: tr.first + (na - 1) * bc }, Transfer { first: tr.first + na * bc, last: tr.last })
    }

    fn write(&mut self, _addr: u64, bytes: u64, t: Cycle) -> Cycle {
        Bus::write(self, t, bytes)
    }

    fn write_pair(&mut self, _a: u64, a_bytes: u64, _b: u64, b_bytes: u64, t: Cycle) -> Cycle {
        Bus::write(self, t, self.beats(a_bytes) * self.p.width + b_bytes)
    }

    fn write_many(&mut self, addrs: &[u64], bytes: u64, t: Cycle) -> Cycle {
        Bus::write_many(self, t, bytes, addrs.len())
    }

    fn beat(&self) -> Beat {
        Beat { width: self.p.width, cycles: self.p.beat_cycles }
    }

    fn latency(&self) -> Cycle {
        self.p.latency
    }

    fn free_at(&self) -> Cycle {
        Bus::free_at(self)
    }

    fn counters(&self) -> &MemCounters {
        &self.c
    }

    fn reset_stats(&mut self) {
        Bus::reset_stats(self)
    }

    fn extra_stats(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.wq.stats(out)
    }

    fn name(&self) -> &'static str {
        "bus"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table1() -> Bus {
        Bus::new(BusParams { latency: 80, width: 8, beat_cycles: 5, write_delay: 0 })
    }

    #[test]
    fn line_read_takes_latency_plus_beats() {
        let mut b = table1();
        let t = b.read(100, 64);
        assert_eq!(t.first, 180);
        assert_eq!(t.last, 215);
        assert_eq!(b.c.read_bytes, 64);
    }

    #[test]
    fn back_to_back_reads_contend_for_the_bus() {
        let mut b = table1();
        let a = b.read(0, 64);
        let c = b.read(0, 64);
        assert_eq!(c.first, a.last + 5, "second transfer starts when the first frees the bus");
        assert_eq!(b.c.queue_cycles, 40);
    }

    #[test]
    fn narrow_transfers_still_take_a_whole_beat() {
        let mut b = table1();
        let t = b.read(0, 4);
        assert_eq!(t.last - t.first, 0);
        assert_eq!(b.c.read_bytes, 8, "a 4-byte time stamp costs a full 8-byte beat");
        assert_eq!(b.write(1000, 64), 1040);
    }

    #[test]
    fn a_request_presented_late_but_wanted_early_fills_the_earlier_gap() {
        let mut b = table1();
        b.write(5000, 64);
        let r = b.read(100, 64);
        assert_eq!(r.first, 180, "the bus was free at 175");
        assert_eq!(b.c.queue_cycles, 0);
        // A read overlapping the booked write goes after it.
        let r = b.read(4930, 64);
        assert_eq!(r.first, 5045);
    }

    #[test]
    fn reads_requested_together_are_booked_like_one_read_each() {
        let (mut a, mut b) = (table1(), table1());
        for (k, t) in [(0u64, 0u64), (1, 500), (2, 90), (3, 4000), (4, 3990)] {
            // Writes fragment the bus alike in both.
            a.write(t + 7 * k, 24);
            b.write(t + 7 * k, 24);
            let singles: Vec<Transfer> = (0..13).map(|_| a.read(t, 64)).collect();
            let mut batch = Vec::new();
            b.read_many(t, 64, 13, |tr| batch.push(tr));
            assert_eq!(singles, batch);
        }
        assert_eq!(a.c, b.c);
    }

    #[test]
    fn writes_issued_together_are_booked_like_one_write_each() {
        let (mut a, mut b) = (table1(), table1());
        for t in [0u64, 300, 100, 5000] {
            // Reads fragment the bus alike in both.
            assert_eq!(a.read(t + 20, 64), b.read(t + 20, 64));
            let singles = (0..14).map(|_| a.write(t, 64)).max().unwrap();
            assert_eq!(singles, b.write_many(t, 64, 14));
        }
        assert_eq!(a.c, b.c);
        assert_eq!(a.free_at(), b.free_at());
    }

    #[test]
    fn a_pair_is_one_transfer_whose_second_piece_follows_the_first() {
        let mut b = table1();
        let (ts, line) = MemoryModel::read_pair(&mut b, 0, 4, 64, 64, 100);
        assert_eq!((ts.first, ts.last), (180, 180), "a 4-B stamp is one beat");
        assert_eq!((line.first, line.last), (185, 220));
        assert_eq!((b.c.reads, b.c.read_bytes), (1, 72));
        let done = MemoryModel::write_pair(&mut b, 64, 64, 0, 4, 1000);
        assert_eq!((done, b.c.writes, b.c.write_bytes), (1045, 1, 72));
    }

    #[test]
    fn saturated_bus_serialises_every_beat() {
        let mut b = table1();
        let mut last = 0;
        for _ in 0..1000 {
            last = b.read(0, 64).last;
        }
        assert_eq!(last, 75 + 1000 * 40);
        assert_eq!(b.c.busy_cycles, 40_000);
    }

    #[test]
    fn a_fragmented_calendar_stays_fast_and_never_double_books() {
        let mut b = table1();
        // Single-beat holes everywhere: no 8-beat read fits before the end.
        for k in 0..20_000u64 {
            b.write(k * 10, 8);
        }
        let end = b.free_at();
        for _ in 0..20_000 {
            let r = b.read(0, 64);
            assert!(r.first >= end, "{} < {}", r.first, end);
        }
        assert_eq!(b.c.busy_cycles, 20_000 * 5 + 20_000 * 40);
    }

    #[test]
    fn gaps_are_found_across_word_boundaries() {
        let mut b = table1();
        // Book slots 0..60 and 70..200: a 10-slot gap straddles the 64-slot word boundary.
        b.write(0, 60 * 8);
        b.write(70 * 5, 130 * 8);
        let r = b.read(0, 64); // 8 beats, wanted at slot 15
        assert_eq!(r.first, 61 * 5, "fits in the gap 60..70");
        let r = b.read(0, 64);
        assert_eq!(r.first, 201 * 5, "the next one goes after the busy run");
    }

    #[test]
    fn queued_writes_let_reads_presented_later_go_first() {
        // Without a queue the write issued at 80 (slots 16..24) pushes the read wanted at 0
        // (slots 15..23) behind it.
        let mut b = table1();
        assert_eq!(b.write(80, 64), 120);
        assert_eq!(b.read(0, 64).first, 125);
        // With one, the read goes first and the write waits, unbooked, for an entry to be
        // needed.
        let mut b = table1().with_write_queue(4);
        assert_eq!(b.write(80, 64), 80, "accepted at once");
        assert_eq!(b.read(0, 64).first, 80);
        for _ in 0..3 {
            assert_eq!(b.write(100_000, 64), 100_000);
        }
        // The fifth write displaces the first: its beats take the idle slots from 16 on,
        // after the read's (23..31), on memory at 155; the fifth waits for its entry until then.
        assert_eq!(b.write(100, 64), 155);
        assert_eq!((b.wq.full_waits, b.wq.wait_cycles), (1, 55));
        assert_eq!((b.c.writes, b.c.write_bytes, b.c.busy_cycles), (5, 320, 240), "counted when issued");
    }

    #[test]
    fn a_full_queue_forces_its_oldest_write_after_the_reads_booked() {
        let mut b = table1().with_write_queue(2);
        for _ in 0..10 {
            b.read(0, 64); // the bus is busy from slot 15 to 95
        }
        assert_eq!(b.write(100, 64), 100);
        assert_eq!(b.write(100, 64), 100);
        // The third write finds the queue full: the first drains in slots 95..103.
        assert_eq!(b.write(100, 64), 515);
        // Writes drain in order behind it.
        assert_eq!(b.write(100, 64), 555);
        let mut s = Vec::new();
        b.extra_stats(&mut |k, v| s.push((k, v)));
        assert_eq!(s, vec![("write_queue_full_waits", 2), ("write_queue_wait_cycles", 415 + 455)]);
        assert_eq!(b.free_at(), 555 + 2 * 45, "two writes still queued");
    }

    #[test]
    fn the_write_delay_holds_back_queued_writes_too() {
        let mut b = Bus::new(BusParams { write_delay: 50, ..table1().params() }).with_write_queue(1);
        b.write(0, 64);
        // Displaced at once: its beats start at slot 10.
        assert_eq!(b.write(0, 64), 90);
    }

    #[test]
    fn without_a_queue_the_bus_reports_nothing_more() {
        let mut b = table1();
        b.write(0, 64);
        let mut n = 0;
        b.extra_stats(&mut |_, _| n += 1);
        assert_eq!(n, 0);
    }

    #[test]
    fn the_window_slides_over_long_runs() {
        let mut b = table1();
        for k in 0..50_000u64 {
            let t = k * 400;
            let r = b.read(t, 64);
            assert_eq!(r.first, t + 80, "an idle bus never delays a read ({})", k);
        }
        assert!(b.free_at() > (1 << 20) * 5);
    }
}
