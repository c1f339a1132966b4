//! A process-wide request to stop long work (a run, a fast-forward, reading ahead): whoever
//! catches SIGINT or SIGTERM (the Python glue) stores the signal here, and every loop that
//! may last more than a moment looks at it. Here rather than in the run loop so that the
//! readers and adapters of this crate (`Skip`, `ReadAhead`) stop too.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked for a stop (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

/// Ask long work to stop because of `signal`. Async-signal-safe: one atomic store.
pub fn request_stop(signal: i32) {
    STOP.store(signal, Ordering::Relaxed);
}

/// Forget a stop request (before new work starts).
pub fn clear_stop() {
    STOP.store(0, Ordering::Relaxed);
}

/// The signal a stop was requested for, if any.
#[inline]
pub fn stop_requested() -> Option<i32> {
    Some(STOP.load(Ordering::Relaxed)).filter(|&s| s != 0)
}

/// The signal's name as every message of an interruption gives it ("interrupted by SIGINT").
pub fn signal_name(sig: i32) -> String {
    match sig {
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        _ => format!("signal {}", sig),
    }
}

/// The error a source returns when a stop request ended it (the run loop reports the
/// signal itself, as an interruption, not as a damaged trace).
pub fn interrupted(signal: i32) -> crate::TraceError {
    crate::TraceError::Other(format!("interrupted by {}", signal_name(signal)))
}
