//! Traces of real programs that carry data values, and the built-in workloads.
//!
//! - [`record`]: the [`Instr`] record, filled in place by every [`TraceSource`].
//! - [`workloads`]: built-in programs generated on the fly (`stream`, `chase`, `hot`, `mix`).
//! - [`native`]: the native trace file format (`docs/trace-format.md`).

pub mod native;
pub mod record;
pub mod workloads;

pub use native::{open_trace, NativeReader, NativeWriter};

pub use record::{Access, Branch, Instr, OpClass, Reg};

/// Errors reading a trace: always name where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A damaged or truncated file; `offset` counts bytes of the uncompressed file
    /// (the 16-byte header, then the decompressed record stream).
    #[error("{path}: {what} at byte offset {offset}")]
    Corrupt {
        path: String,
        offset: u64,
        what: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// A stream of instruction records.
pub trait TraceSource: Send {
    /// Fill `out` with the next record; `Ok(false)` at the end of the trace.
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError>;
    /// A short name for reports (workload name or file name).
    fn name(&self) -> &str;
}
