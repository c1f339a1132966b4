//! Off-chip memory: a fixed first-chunk latency and one shared data bus.
//!
//! Memory is modelled as a pipelined device (any number of requests in flight); what
//! serialises traffic is the data bus, `width` bytes per beat, one beat every `beat_cycles`
//! processor cycles (Table 1 of seeds 000/003: 200 MHz, 8 B wide, 1 GHz core → 5 cycles/beat).
//! Reads, writes and metadata transfers of every scheme share it.

use crate::Cycle;

#[derive(Clone, Copy, Debug)]
pub struct BusParams {
    /// Cycles from request to the arrival of the first bus-width chunk.
    pub latency: Cycle,
    /// Bytes per beat.
    pub width: u64,
    /// Processor cycles per beat.
    pub beat_cycles: Cycle,
}

/// When a transfer's first and last chunks arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub first: Cycle,
    pub last: Cycle,
}

#[derive(Clone, Debug)]
pub struct Bus {
    p: BusParams,
    free_at: Cycle,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub busy_cycles: u64,
    /// Cycles requests waited for the data bus beyond the DRAM latency.
    pub queue_cycles: u64,
}

impl Bus {
    pub fn new(p: BusParams) -> Bus {
        assert!(p.width > 0 && p.beat_cycles > 0);
        Bus { p, free_at: 0, read_bytes: 0, write_bytes: 0, reads: 0, writes: 0, busy_cycles: 0, queue_cycles: 0 }
    }

    pub fn params(&self) -> BusParams {
        self.p
    }

    /// Cycle from which the bus is idle.
    pub fn free_at(&self) -> Cycle {
        self.free_at
    }

    pub fn reset_stats(&mut self) {
        (self.read_bytes, self.write_bytes, self.reads, self.writes) = (0, 0, 0, 0);
        (self.busy_cycles, self.queue_cycles) = (0, 0);
    }

    #[inline]
    fn beats(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.p.width).max(1)
    }

    /// Read `bytes` requested at `t`.
    #[inline]
    pub fn read(&mut self, t: Cycle, bytes: u64) -> Transfer {
        let beats = self.beats(bytes);
        let want = t + self.p.latency - self.p.beat_cycles;
        let start = want.max(self.free_at);
        self.queue_cycles += start - want;
        let dur = beats * self.p.beat_cycles;
        self.free_at = start + dur;
        self.busy_cycles += dur;
        self.read_bytes += beats * self.p.width;
        self.reads += 1;
        Transfer { first: start + self.p.beat_cycles, last: start + dur }
    }

    /// Write `bytes` issued at `t`; returns when the bus is done with it.
    #[inline]
    pub fn write(&mut self, t: Cycle, bytes: u64) -> Cycle {
        let beats = self.beats(bytes);
        let start = t.max(self.free_at);
        let dur = beats * self.p.beat_cycles;
        self.free_at = start + dur;
        self.busy_cycles += dur;
        self.write_bytes += beats * self.p.width;
        self.writes += 1;
        start + dur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table1() -> Bus {
        Bus::new(BusParams { latency: 80, width: 8, beat_cycles: 5 })
    }

    #[test]
    fn line_read_takes_latency_plus_beats() {
        let mut b = table1();
        let t = b.read(100, 64);
        assert_eq!(t.first, 180);
        assert_eq!(t.last, 215);
        assert_eq!(b.read_bytes, 64);
    }

    #[test]
    fn back_to_back_reads_contend_for_the_bus() {
        let mut b = table1();
        let a = b.read(0, 64);
        let c = b.read(0, 64);
        assert_eq!(c.first, a.last + 5, "second transfer starts when the first frees the bus");
        assert!(b.queue_cycles > 0);
    }

    #[test]
    fn narrow_transfers_still_take_a_whole_beat() {
        let mut b = table1();
        let t = b.read(0, 4);
        assert_eq!(t.last - t.first, 0);
        assert_eq!(b.read_bytes, 8, "a 4-byte time stamp costs a full 8-byte beat");
        let done = b.write(1000, 64);
        assert_eq!(done, 1040);
    }
}
