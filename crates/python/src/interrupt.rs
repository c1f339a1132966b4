//! Ctrl-C and SIGTERM during a run: while Rust simulates with the GIL released, Python's own
//! handler could only note the signal and raise `KeyboardInterrupt` once the run is over,
//! throwing its results away. For the length of a run, SIGINT and SIGTERM instead ask the
//! run loop to stop (`secmem_sim::run::request_stop`); it returns what it measured, marked
//! `interrupted`, and the previous handlers (Python's) are put back.

use std::sync::Mutex;

/// Runs in progress and the handlers they replaced: the first run in installs, the last out
/// restores (runs may overlap in Python threads).
static ACTIVE: Mutex<(usize, Option<[libc::sigaction; 2]>)> = Mutex::new((0, None));

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    secmem_sim::run::request_stop(sig);
}

/// KeyboardInterrupt if SIGINT or SIGTERM asked the call that just returned to stop (its own
/// error, e.g. a wait for a FIFO's reader cut short, is then beside the point).
pub fn check() -> pyo3::PyResult<()> {
    match secmem_sim::run::stop_requested() {
        Some(sig) => Err(keyboard_interrupt(sig, "")),
        None => Ok(()),
    }
}

/// KeyboardInterrupt("interrupted by SIGTERM…") with `.signal` set to the signal's name, as
/// Python's own handler (secmem._signals) makes it: the CLI's exit status reads it.
pub fn keyboard_interrupt(sig: i32, detail: &str) -> pyo3::PyErr {
    let name = secmem_sim::run::signal_name(sig);
    let e = pyo3::exceptions::PyKeyboardInterrupt::new_err(format!("interrupted by {}{}", name, detail));
    pyo3::Python::attach(|py| {
        use pyo3::types::PyAnyMethods;
        let _ = e.value(py).setattr("signal", name);
    });
    e
}

/// Keeps SIGINT and SIGTERM routed to the run loop while alive.
pub struct Guard(());

impl Guard {
    pub fn install() -> Guard {
        let mut a = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if a.0 == 0 {
            secmem_sim::run::clear_stop();
            // SAFETY: sigaction with a handler that only stores to an atomic (async-signal-
            // safe); the old actions are kept to be restored exactly.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                new.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: [libc::sigaction; 2] = std::mem::zeroed();
                for (s, o) in SIGNALS.iter().zip(old.iter_mut()) {
                    libc::sigaction(*s, &new, o);
                    if o.sa_sigaction == libc::SIG_IGN {
                        // Ignored by whoever started us (nohup, a shell's background job):
                        // it stays ignored, as Python's own handling leaves it.
                        libc::sigaction(*s, o, std::ptr::null_mut());
                    }
                }
                a.1 = Some(old);
            }
        }
        a.0 += 1;
        Guard(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut a = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        a.0 -= 1;
        if a.0 == 0 {
            if let Some(old) = a.1.take() {
                // SAFETY: putting back the actions `install` replaced.
                unsafe {
                    for (s, o) in SIGNALS.iter().zip(old.iter()) {
                        libc::sigaction(*s, o, std::ptr::null_mut());
                    }
                }
            }
        }
    }
}
