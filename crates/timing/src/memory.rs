//! The memory model behind the timed port: what a transfer of untrusted bytes costs.
//!
//! Two implementations: `Bus` (one shared data bus behind a fixed first-chunk latency, the
//! machines of seeds 000/003) and `Dram` (channels, banks and rows with an open-page policy,
//! the SDRAM of seed 004 Table 2). Both take the physical address so that a model with banks
//! and rows can tell row hits from conflicts; the bus ignores it.
//!
//! Every method answers "if this transfer is requested at cycle `t`, when is it done?" and
//! books the resources it occupies, like every other timing resource.

use crate::Cycle;

/// When a transfer's first and last chunks arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub first: Cycle,
    pub last: Cycle,
}

/// The transfer of `n` beats of `bc` cycles from bus slot `s` on.
#[inline]
pub(crate) fn transfer(s: u64, n: u64, bc: Cycle) -> Transfer {
    Transfer { first: s * bc + bc, last: s * bc + n * bc }
}

/// The data bus's geometry: a transfer of n bytes takes ⌈n/width⌉ beats of `cycles` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beat {
    pub width: u64,
    pub cycles: Cycle,
}

/// Counters every memory model keeps (the `mem.*` statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemCounters {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    /// Processor cycles the data bus carried data.
    pub busy_cycles: u64,
    /// Cycles reads waited beyond the unloaded latency (bus or bank contention).
    pub queue_cycles: u64,
}

pub trait MemoryModel: Send {
    /// Read `bytes` at `addr`, requested at `t`: when the first and last beats arrive.
    fn read(&mut self, addr: u64, bytes: u64, t: Cycle) -> Transfer;

    /// Reads of `bytes` at each of `addrs`, all requested at `t`: the same as one `read` each,
    /// in order (a model may book them in one pass); `f` gets each transfer in order.
    fn read_many(&mut self, addrs: &[u64], bytes: u64, t: Cycle, f: &mut dyn FnMut(Transfer)) {
        for &a in addrs {
            f(self.read(a, bytes, t));
        }
    }

    /// Two reads back to back as one transfer (a time stamp and the line after it, 000
    /// Fig. 7b): when each piece has arrived.
    fn read_pair(&mut self, a: u64, a_bytes: u64, b: u64, b_bytes: u64, t: Cycle) -> (Transfer, Transfer) {
        (self.read(a, a_bytes, t), self.read(b, b_bytes, t))
    }

    /// A posted write of `bytes` at `addr` issued at `t`: when the writer is rid of it
    /// (writers do not wait for it): on memory, or, with a controller write queue
    /// (`WriteQueue`), when the queue accepted it.
    fn write(&mut self, addr: u64, bytes: u64, t: Cycle) -> Cycle;

    /// Writes of `bytes` at each of `addrs`, all issued at `t`: the same as one `write` each,
    /// in order. Returns the latest of their `write` answers.
    fn write_many(&mut self, addrs: &[u64], bytes: u64, t: Cycle) -> Cycle {
        addrs.iter().fold(t, |done, &a| done.max(self.write(a, bytes, t)))
    }

    /// Two posted writes as one transfer (a line and its time stamp): the later `write` answer.
    fn write_pair(&mut self, a: u64, a_bytes: u64, b: u64, b_bytes: u64, t: Cycle) -> Cycle {
        self.write(a, a_bytes, t).max(self.write(b, b_bytes, t))
    }

    /// The data bus's beat (when each chunk of a transfer arrives).
    fn beat(&self) -> Beat;

    /// Cycles from a read request to its first beat on an idle memory (a row hit for DRAM):
    /// streaming loops issue the next read this long before the previous one arrives.
    fn latency(&self) -> Cycle;

    /// Cycle from which nothing is booked (queued writes included, as a bound).
    fn free_at(&self) -> Cycle;

    fn counters(&self) -> &MemCounters;

    /// Zero the counters (end of warm-up); bookings and open rows stay.
    fn reset_stats(&mut self);

    /// The model's own statistics (`mem.<name>`), e.g. row hits.
    fn extra_stats(&self, _out: &mut dyn FnMut(&'static str, u64)) {}

    /// The model's name (`bus`, `dram`), reported as `mem.model`.
    fn name(&self) -> &'static str;
}
