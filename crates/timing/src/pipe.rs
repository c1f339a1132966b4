//! A pipelined engine (AES, hash): input enters at the engine's throughput and each unit of
//! `unit_bytes` leaves `latency` cycles after it entered. An operation on n bytes occupies
//! the engine for n / throughput cycles, booked in 16-byte slots (a 76-byte log-hash element
//! costs five slots, not two 64-byte chunks); its result is ready `latency` cycles after its
//! last unit entered.
//! The input port is booked on a calendar of processor cycles (see `Calendar`), so an
//! operation wanted early is not held up by one booked for later.

use crate::calendar::Calendar;
use crate::divisor::Divisor;
use crate::Cycle;

/// Engine input is booked in slots of at most this many bytes (and at most one unit).
const SLOT_BYTES: u64 = 16;
const FX: u64 = 1024;

/// How an engine turns bytes into occupied slots and slots into cycles.
#[derive(Clone, Copy, Debug)]
struct Rate {
    latency: Cycle,
    /// Cycles per slot, in 1/1024 cycle (throughputs like 3.2 B/cycle are fractional); a
    /// `Divisor`, as every operation divides by it.
    slot_fx: Divisor,
    /// Bytes per slot.
    slot_bytes: Divisor,
    /// Slots per unit (a unit leaves `latency` cycles after it entered).
    unit_slots: u64,
    unit_bytes: Divisor,
}

impl Rate {
    #[inline]
    fn slots(&self, bytes: u64) -> u64 {
        self.slot_bytes.div_ceil(bytes).max(1)
    }

    /// The first slot whose start is at or after cycle `t`.
    #[inline]
    fn slot_at(&self, t: Cycle) -> u64 {
        self.slot_fx.div_ceil(t * FX)
    }

    /// The cycle slot `s` starts.
    #[inline]
    fn start(&self, s: u64) -> Cycle {
        (s * self.slot_fx.get()).div_ceil(FX)
    }

    /// Completion of an operation of `n` slots entering at `start`: the last unit enters one
    /// unit-time before the occupancy ends.
    #[inline]
    fn done(&self, start: Cycle, n: u64) -> Cycle {
        start + (n.saturating_sub(self.unit_slots) * self.slot_fx.get()).div_ceil(FX) + self.latency
    }
}

#[derive(Clone, Debug)]
pub struct Pipe {
    rate: Rate,
    cal: Calendar,
    pub units: u64,
    pub ops: u64,
    /// Cycles operations waited for the engine to accept them.
    pub wait_cycles: u64,
}

impl Pipe {
    /// `bytes_per_cycle` is the engine throughput (e.g. 3.2 GB/s at 1 GHz = 3.2).
    pub fn new(latency: Cycle, bytes_per_cycle: f64, unit_bytes: u64) -> Pipe {
        assert!(bytes_per_cycle > 0.0 && unit_bytes > 0);
        let slot_bytes = SLOT_BYTES.min(unit_bytes);
        let slot_fx = ((slot_bytes as f64 / bytes_per_cycle) * FX as f64).round().max(1.0) as u64;
        let rate = Rate {
            latency,
            slot_fx: Divisor::new(slot_fx),
            slot_bytes: Divisor::new(slot_bytes),
            unit_slots: unit_bytes.div_ceil(slot_bytes).max(1),
            unit_bytes: Divisor::new(unit_bytes),
        };
        Pipe { rate, cal: Calendar::new(), units: 0, ops: 0, wait_cycles: 0 }
    }

    pub fn latency(&self) -> Cycle {
        self.rate.latency
    }

    /// Untimed while `on` (see `Calendar::freeze`): operations start when wanted.
    pub fn freeze(&mut self, on: bool) {
        self.cal.freeze(on);
    }

    /// Whether it is untimed (`freeze`).
    pub fn frozen(&self) -> bool {
        self.cal.frozen()
    }

    /// Cycle from which the engine accepts new work without waiting.
    pub fn free_at(&self) -> Cycle {
        self.rate.start(self.cal.end())
    }

    pub fn reset_stats(&mut self) {
        (self.units, self.ops, self.wait_cycles) = (0, 0, 0);
    }

    pub fn unit_bytes(&self) -> u64 {
        self.rate.unit_bytes.get()
    }

    /// Issue an operation over `bytes` whose input is ready at `t`; returns its completion.
    #[inline]
    pub fn run(&mut self, t: Cycle, bytes: u64) -> Cycle {
        let (r, n) = (self.rate, self.rate.slots(bytes));
        let start = r.start(self.cal.reserve(r.slot_at(t), n));
        self.count(1, start.saturating_sub(t), bytes);
        r.done(start, n)
    }

    /// Issue an operation over `bytes` ready at `t` only if it completes by `deadline`
    /// (speculative work that would finish too late to help is not started); its completion.
    #[inline]
    pub fn run_by(&mut self, t: Cycle, bytes: u64, deadline: Cycle) -> Option<Cycle> {
        let (r, n) = (self.rate, self.rate.slots(bytes));
        let s = self.cal.find(r.slot_at(t), n);
        let start = r.start(s);
        if r.done(start, n) > deadline {
            return None;
        }
        self.cal.take(s, n);
        self.count(1, start.saturating_sub(t), bytes);
        Some(r.done(start, n))
    }

    /// Issue operations over `bytes` each whose inputs are ready at `ready`, as one `run`
    /// each in order would (fastest when ascending); returns the latest completion.
    pub fn run_in_order(&mut self, ready: &[Cycle], bytes: u64) -> Cycle {
        let (r, n) = (self.rate, self.rate.slots(bytes));
        let (mut done, mut waited, mut t) = (0, 0, ready.iter());
        self.cal.reserve_in_order(ready.iter().map(|&t| r.slot_at(t)), n, |s| {
            let start = r.start(s);
            waited += start.saturating_sub(*t.next().expect("one start per request"));
            done = done.max(r.done(start, n));
        });
        self.count(ready.len() as u64, waited, bytes);
        done
    }

    /// Account `k` operations over `bytes` each that waited `waited` cycles in all.
    #[inline]
    fn count(&mut self, k: u64, waited: Cycle, bytes: u64) {
        self.wait_cycles += waited;
        self.units += k * self.rate.unit_bytes.div_ceil(bytes);
        self.ops += k;
    }

    /// Issue units whose inputs become ready at the given times (in order), e.g. CBC
    /// decryption of chunks as they arrive; returns the completion of the last.
    #[inline]
    pub fn run_each(&mut self, ready: impl IntoIterator<Item = Cycle>) -> Cycle {
        let mut done = 0;
        for t in ready {
            done = self.run(t, self.rate.unit_bytes.get());
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_that_would_finish_after_its_deadline_is_not_started() {
        let mut p = Pipe::new(40, 3.2, 16);
        assert_eq!(p.run(0, 64), 55);
        // Behind the four units booked: done at 60, so a deadline of 59 refuses it, unbooked.
        assert_eq!(p.run_by(0, 16, 59), None);
        assert_eq!(p.run_by(0, 16, 60), Some(60));
        assert_eq!(p.run(0, 16), 65);
    }

    #[test]
    fn single_unit_costs_latency() {
        let mut p = Pipe::new(40, 3.2, 16);
        assert_eq!(p.run(100, 16), 140);
    }

    #[test]
    fn units_pipeline_at_the_throughput() {
        // 16-B AES blocks at 3.2 B/cycle: one every 5 cycles.
        let mut p = Pipe::new(40, 3.2, 16);
        assert_eq!(p.run(0, 64), 15 + 40);
        // The next operation queues behind the four units already issued.
        assert_eq!(p.run(0, 16), 20 + 40);
        assert_eq!(p.wait_cycles, 20);
    }

    #[test]
    fn operations_issued_in_order_complete_as_single_runs_do() {
        let (mut a, mut b) = (Pipe::new(160, 3.2, 64), Pipe::new(160, 3.2, 64));
        let long: Vec<Cycle> = (0..100).map(|k| 1000 + k * 7).collect();
        for ready in [vec![0u64, 40, 80, 120], vec![100, 100, 90, 500], vec![7, 300, 301, 302, 10], long] {
            let singles = ready.iter().map(|&t| a.run(t, 64)).max().unwrap();
            assert_eq!(singles, b.run_in_order(&ready, 64));
        }
        assert_eq!((a.ops, a.units, a.wait_cycles, a.free_at()), (b.ops, b.units, b.wait_cycles, b.free_at()));
    }

    #[test]
    fn occupancy_is_proportional_to_bytes() {
        let mut p = Pipe::new(160, 3.2, 64);
        p.run(0, 76);
        // 76 B at 3.2 B/cycle = 23.75 cycles, booked as five 16-B slots of 5 cycles.
        assert_eq!(p.free_at(), 25);
        assert_eq!(p.run(0, 64), 25 + 160);
    }

    #[test]
    fn an_operation_booked_for_later_does_not_delay_an_earlier_one() {
        let mut p = Pipe::new(40, 3.2, 16);
        assert_eq!(p.run(1000, 64), 1000 + 15 + 40);
        assert_eq!(p.run(0, 64), 15 + 40, "the engine was idle at cycle 0");
        assert_eq!(p.wait_cycles, 0);
    }

    #[test]
    fn hash_of_a_chunk_every_twenty_cycles() {
        let mut p = Pipe::new(80, 3.2, 64);
        let a = p.run(0, 64);
        let b = p.run(0, 64);
        assert_eq!((a, b), (80, 100));
    }
}
