//! Timing resources shared by the functional engine and the core model.
//!
//! Each resource answers "if this operation is requested at cycle `t`, when is it done?" and
//! books its occupancy, so contention (bus bandwidth, engine throughput, full buffers) is
//! real. The functional code calls them as it performs the very operations they time.

pub mod bus;
pub mod calendar;
pub mod memory;
pub mod pipe;
pub mod slots;
pub mod tags;

pub use bus::{Bus, BusParams, Transfer};
pub use calendar::Calendar;
pub use memory::{Beat, MemCounters, MemoryModel};
pub use pipe::Pipe;
pub use slots::Slots;
pub use tags::{Tags, NO_SLOT};

/// Processor cycles.
pub type Cycle = u64;
