//! Progress of long work on stderr (a run, a trace), naming what runs: a one-line bar on a
//! terminal (after two seconds), otherwise a plain line every ten seconds
//! (`SECMEM_PROGRESS_SECONDS` changes the interval), so logs and CI stay readable.

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    want: bool,
    terminal: bool,
    interval: f64,
    label: String,
    /// Instructions expected in all; 0 when unknown (a program traced to its end): the
    /// count and rate are shown without a bar or ETA.
    total: u64,
    start: Instant,
    last_line: f64,
    shown: bool,
}

/// Seconds between two plain progress lines off a terminal: `SECMEM_PROGRESS_SECONDS`, 10 by
/// default. The Python layer's progress lines (compare, sweep) use the same value.
pub fn line_seconds() -> f64 {
    std::env::var("SECMEM_PROGRESS_SECONDS").ok().and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| *v >= 0.0).unwrap_or(10.0)
}

impl Progress {
    pub fn new(want: bool, total: u64, label: String) -> Progress {
        let interval = line_seconds();
        Progress { want, terminal: std::io::stderr().is_terminal(), interval, label, total, start: Instant::now(), last_line: 0.0, shown: false }
    }

    /// `done` instructions so far.
    pub fn update(&mut self, done: u64) {
        if !self.want {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64();
        let due = if self.terminal { secs >= 2.0 } else { secs - self.last_line >= self.interval };
        if !due {
            return;
        }
        let rate = done as f64 / secs;
        if self.total == 0 {
            let figures = format!("{:.1}M instr  {:.2} M instr/s", done as f64 / 1e6, rate / 1e6);
            if self.terminal {
                eprint!("\r{} {} ", self.label, figures);
                self.shown = true;
            } else {
                eprintln!("secmem: {}: {}", self.label, figures);
                self.last_line = secs;
            }
            let _ = std::io::stderr().flush();
            return;
        }
        let frac = (done as f64 / self.total as f64).min(1.0);
        let eta = if rate > 0.0 { (self.total.saturating_sub(done)) as f64 / rate } else { 0.0 };
        let figures = format!(
            "{:.1}M/{:.1}M instr  {:.2} M instr/s  ETA {:.0}s",
            done as f64 / 1e6,
            self.total as f64 / 1e6,
            rate / 1e6,
            eta
        );
        if self.terminal {
            let w = 30;
            let filled = (frac * w as f64) as usize;
            eprint!("\r{} [{}{}] {:5.1}% {} ", self.label, "#".repeat(filled), " ".repeat(w - filled), frac * 100.0, figures);
            self.shown = true;
        } else {
            eprintln!("secmem: {}: {:.0}% {}", self.label, frac * 100.0, figures);
            self.last_line = secs;
        }
        let _ = std::io::stderr().flush();
    }

    /// Clear the bar (a terminal's line) so that what follows prints cleanly.
    pub fn finish(&mut self) {
        if self.shown {
            eprint!("\r{}\r", " ".repeat(110));
            let _ = std::io::stderr().flush();
            self.shown = false;
        }
    }
}
