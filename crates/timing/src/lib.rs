//! Timing resources shared by the functional engine and the core model.
//!
//! Each resource answers "if this operation is requested at cycle `t`, when is it done?" and
//! books its occupancy, so contention (bus bandwidth, engine throughput, full buffers) is
//! real. The functional code calls them as it performs the very operations they time.

pub mod bus;
pub mod calendar;
pub mod divisor;
pub mod dram;
pub mod memory;
pub mod pipe;
pub mod slots;
pub mod tags;
pub mod write_queue;

pub use bus::{Bus, BusParams};
pub use calendar::Calendar;
pub use divisor::Divisor;
pub use dram::{Dram, DramParams};
pub use memory::{Beat, MemCounters, MemoryModel, Transfer};
pub use pipe::Pipe;
pub use slots::Slots;
pub use tags::{Tags, NO_SLOT};
pub use write_queue::WriteQueue;

/// Processor cycles.
pub type Cycle = u64;

/// Numbers below `m` from a fixed xorshift sequence: the tests' random but reproducible inputs.
#[cfg(test)]
pub(crate) fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    }
}
