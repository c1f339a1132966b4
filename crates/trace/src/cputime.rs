//! CPU time of the calling thread, for the stage timings of the tracer and trace-input
//! benchmarks (wall time says little on a machine shared with other work).

/// Seconds of CPU (user + system) the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
