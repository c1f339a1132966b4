//! One simulation: a trace through the core model and the secure engine.

use crate::ooo::{Core, StepError};
use crate::sample::{Measured, Sampling, Windows};
use secmem_core::stats::Stats;
use secmem_core::{ConfigError, Engine, Params};
use secmem_trace::progress::Progress;
use secmem_trace::{Instr, One, Record, Recs, TraceSource};
use std::time::Instant;

// The stop request lives with the trace sources (a fast-forward stops on it too); runs look
// every 256 instructions, stop, and keep what they measured, marked `interrupted`.
pub use secmem_trace::stop::{clear_stop, request_stop, signal_name, stop_requested};

/// A stop request (SIGINT/SIGTERM) if one came: the run's one-line error ("interrupted by
/// SIGINT after 1200 instructions") and the signal's name, as every run loop reports them.
pub(crate) fn interruption(done: u64, unit: &str) -> Option<(String, String)> {
    stop_requested().map(|sig| {
        let name = signal_name(sig);
        (format!("interrupted by {} after {} {}", name, done, unit), name)
    })
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Instructions to measure after the warm-up.
    pub instructions: u64,
    /// Instructions simulated (caches, trees, counters warm) before measuring.
    pub warmup: u64,
    /// Keys, random vectors and workload generation.
    pub seed: u64,
    /// Draw a progress bar on stderr when the run lasts more than a moment.
    pub progress: bool,
    /// Statistics of every this many measured instructions as series (`interval.*`,
    /// `--interval N`); 0: none.
    pub interval: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { instructions: 10_000_000, warmup: 1_000_000, seed: 1, progress: false, interval: 0 }
    }
}

/// Statistics of the measured region, and what stopped the run early, if anything. Results
/// up to the problem are kept.
pub struct RunResult {
    pub stats: Stats,
    pub error: Option<String>,
}

pub fn run(p: &Params, src: &mut dyn TraceSource, o: &RunOptions) -> Result<RunResult, ConfigError> {
    run_sampled(p, src, o, None)
}

/// `run`, sampled by `plan` if one is given (`--sample`, see `sample`): the warm-up and the
/// periods between measured windows are warmed functionally, and the statistics are the
/// windows' combined, with 95% intervals (`ci95.*`) and the plan (`sampling.*`).
pub fn run_sampled(p: &Params, src: &mut dyn TraceSource, o: &RunOptions, plan: Option<Sampling>) -> Result<RunResult, ConfigError> {
    if let Some(plan) = &plan {
        plan.check(o.instructions)?;
        if o.interval > 0 {
            return Err(ConfigError("--interval measures every instruction in detail: it cannot be combined with --sample".into()));
        }
    }
    run_inner(p, src, o, plan, None).map(|(r, _)| r)
}

/// `run_sampled` without its checks (a checkpointed window is one period: `checkpointed`),
/// also handing back the windows uncombined. `checkpoint`: Some(k) when the input is a
/// checkpoint: the external records before the first instruction are its memory image,
/// flushed to memory before it runs (`Core::settle_image`), and its first k instructions
/// its prewarm (`Core::prewarm`), part of the warm-up.
pub(crate) fn run_inner(p: &Params, src: &mut dyn TraceSource, o: &RunOptions, plan: Option<Sampling>, checkpoint: Option<u64>) -> Result<(RunResult, Option<Measured>), ConfigError> {
    let cores = crate::params::cores(p)?;
    if cores > 1 {
        return Err(ConfigError(format!("cores = {}: a run of several cores is a mix (run_mix), with one trace per core{}", cores, if plan.is_some() { "; sampling runs one core" } else { "" })));
    }
    let wall = Instant::now();
    let mut eng = Engine::new(p, o.seed)?;
    let mut core = Core::new(p, &eng)?;
    core.pm.set_order(p, o.seed)?;
    let mut buf = Instr::default();
    let mut recs: Recs = Recs::EMPTY;
    let total = o.warmup.saturating_add(o.instructions);
    let mut n: u64 = 0;
    let mut measuring = false;
    let mut start_cycle = 0;
    let mut measure_wall = Instant::now();
    let mut error = None;
    let label = format!("{} {}+{}", src.name(), p.str("integrity")?, p.str("encryption")?);
    // A run to the input's end (`instructions` = u64::MAX) shows its count and rate, no ETA.
    let mut bar = Progress::new(o.progress, if total == u64::MAX { 0 } else { total }, label);
    src.show_progress(o.progress);
    let mut interrupted = None;
    let mut sampler = if plan.is_some() { None } else { IpcSampler::new(p)? };
    let mut windows = plan.map(|plan| Windows::new(plan, &mut eng));
    let mut intervals = (o.interval > 0).then(|| Intervals::new(o.interval));
    // Lines the warm-up's own misses brought into the L2: fewer than it holds, and the
    // measurement starts in a cache the program has not filled (empty, or holding the memory
    // image written before the first instruction).
    let mut warmup_fills = 0;
    let l2_fills = |e: &Engine| e.machine().counters.data_misses + e.machine().counters.meta_misses;
    let prewarm = checkpoint.unwrap_or(0).min(o.warmup);
    let mut packed = None;
    'run: loop {
        // A stretch of instructions needing nothing but their step, taken without the checks
        // below (a sixth of the host instructions per instruction on gzip): not an external
        // record, the first instruction, a 256th one (stop requests, polls, progress), the
        // warm-up's end or the run's end, and not in a sampled run or with intervals. Each
        // step is the one the loop below would take, in the same order.
        if windows.is_none() && intervals.is_none() && n & 0xFF != 0 {
            let mut end = (n | 0xFF).min(total);
            if !measuring {
                end = end.min(o.warmup);
            }
            while n < end {
                let most = recs.len().min(usize::try_from(end - n).unwrap_or(usize::MAX));
                let k = recs.before_external(most);
                if k == 0 {
                    break;
                }
                let (stretch, rest) = recs.split_at(k);
                recs = rest;
                let (done, r) = core.step_all(stretch, &mut eng);
                n += done as u64;
                if let Err(e) = r {
                    error = Some(step_error(e, n));
                    break 'run;
                }
            }
        }
        if let Some(iv) = intervals.as_mut().filter(|iv| measuring && n == iv.next) {
            iv.close(Mark::now(n, &core, &eng));
        }
        if n >= total {
            break;
        }
        if let Some((e, name)) = (n & 0xFF == 0).then(|| interruption(n, "instructions")).flatten() {
            (error, interrupted) = (Some(e), Some(name));
            break;
        }
        // Records are read where the source holds them (a trace file's batch of packed slots),
        // not copied, a slice at a time: never more than the run still needs.
        if recs.is_empty() {
            // A checkpoint's packed prewarm (its file's first record), kept for the first
            // instruction.
            if checkpoint.is_some() && n == 0 && packed.is_none() {
                packed = src.take_prewarm();
            }
            recs = match src.next_slice(&mut buf, usize::try_from(total - n).unwrap_or(usize::MAX)) {
                Ok(r) if r.is_empty() => break,
                Ok(r) => r,
                Err(e) => {
                    // A source that stopped on the request (a fast-forward, a live program's
                    // pipe) is an interruption, not a damaged trace.
                    if let Some((e, name)) = interruption(n, "instructions") {
                        (error, interrupted) = (Some(e), Some(name));
                    } else {
                        error = Some(format!("trace error after {} instructions: {}", n, e));
                    }
                    break;
                }
            };
        }
        let (ins, rest) = recs.split_first().expect("a slice left");
        recs = rest;
        if checkpoint.is_some() && n == 0 && ins.external().is_none() {
            if let Err(e) = core.settle_image(&mut eng) {
                error = Some(format!("{:?} (flushing the checkpoint's memory image)", e));
                break;
            }
            // A packed prewarm runs now, as its records did when the file held them there:
            // the same calls, counts and polls.
            if let Some(b) = packed.take() {
                warmup_fills = l2_fills(&eng);
                if let Err(e) = run_prewarm(b, prewarm, &mut n, &mut core, &mut eng) {
                    error = Some(e);
                    break;
                }
            }
        }
        let r = if let Some(ins) = ins.external() {
            core.external(ins, &mut eng)
        } else {
            // A sampled run (`windows`) starts and ends its measurements itself.
            let i = n.checked_sub(o.warmup);
            if n == 0 {
                warmup_fills = l2_fills(&eng); // the image's, before the first instruction
            }
            if windows.is_none() && !measuring && n >= o.warmup {
                measuring = true;
                warmup_fills = l2_fills(&eng) - warmup_fills;
                eng.reset_stats();
                core.reset_stats();
                if let Some(s) = &mut sampler {
                    s.series.clear();
                }
                start_cycle = core.now();
                measure_wall = Instant::now();
                if let Some(iv) = &mut intervals {
                    iv.start(Mark { n, cycle: start_cycle, ..Mark::now(n, &core, &eng) });
                }
            }
            n += 1;
            if n & 0xFFFF == 0 {
                bar.update(n);
            }
            if n & 0xFF == 0 {
                if let Some(s) = &mut sampler {
                    s.poll(core.now(), n);
                }
                if let Err(e) = core.poll(&mut eng, n) {
                    error = Some(format!("{} (instruction {})", e, n));
                    break;
                }
            }
            match ins {
                One::Plain(ins) => one(ins, n <= prewarm, i, &mut windows, &mut core, &mut eng),
                One::View(ins) => one(&ins, n <= prewarm, i, &mut windows, &mut core, &mut eng),
            }
        };
        if let Err(e) = r {
            error = Some(step_error(e, n));
            break;
        }
    }
    bar.finish();
    if let Some(w) = windows.as_mut().filter(|w| w.measured() > 0) {
        let mut s = sampled_stats(w, n.saturating_sub(o.warmup), src.name(), o, interrupted);
        finish(&mut eng, &core, &mut s, &mut error);
        let secs = w.measuring_since.map_or(0.0, |t| t.elapsed().as_secs_f64());
        s.float("sim.wall_seconds", wall.elapsed().as_secs_f64());
        s.float("sim.instructions_per_second", if secs > 0.0 { n.saturating_sub(o.warmup) as f64 / secs } else { 0.0 });
        let m = w.take();
        return Ok((RunResult { stats: s, error }, Some(m)));
    }
    if let (Some(w), None) = (&windows, &error) {
        if n >= o.warmup {
            error = Some(format!(
                "the trace ended after {} instructions, before the first sampled window was over (period {})",
                n, w.plan.period
            ));
        }
    }
    if !measuring {
        // Nothing was measured: report zeros, not warm-up counters.
        eng.reset_stats();
        core.reset_stats();
        if n >= o.warmup {
            measuring = true; // a zero-length measurement (instructions = 0)
            start_cycle = core.last_commit();
        } else if error.is_none() {
            error = Some(format!("the trace ended after {} instructions, before the warm-up of {} was over", n, o.warmup));
        }
    }
    let measured = if measuring { n - o.warmup.min(n) } else { 0 };
    if let Some(iv) = intervals.as_mut().filter(|iv| measuring && n > iv.last.n) {
        iv.close(Mark::now(n, &core, &eng));
    }
    let cycles = if measuring { core.last_commit().saturating_sub(start_cycle) } else { 0 };
    let measured_secs = measure_wall.elapsed().as_secs_f64();
    let mut s = Stats::default();
    s.int("instructions", measured);
    s.int("cycles", cycles);
    s.rate("ipc", measured, cycles);
    s.str("workload", src.name());
    s.int("warmup", o.warmup);
    s.int("seed", o.seed);
    if let Some(name) = interrupted {
        s.str("interrupted", &name);
    }
    eng.stats(&mut s);
    if let Some(smp) = &sampler {
        s.int("sample.ipc_period", smp.period);
        s.series("sample.ipc", smp.series.clone());
    }
    core.stats(&mut s);
    s.int("l2.lines", eng.machine().l2.tags.slots() as u64);
    s.int("l2.warmup_fills", warmup_fills);
    if let Some(iv) = &intervals {
        iv.stats(&mut s);
    }
    finish(&mut eng, &core, &mut s, &mut error);
    s.float("sim.wall_seconds", wall.elapsed().as_secs_f64());
    s.float("sim.instructions_per_second", if measuring && measured_secs > 0.0 { measured as f64 / measured_secs } else { 0.0 });
    Ok((RunResult { stats: s, error }, None))
}

/// An instruction (not external) outside the loop's plain stretches: prewarmed, in its
/// window's phase (sampled runs), or stepped.
#[inline]
fn one<R: Record>(ins: &R, prewarming: bool, i: Option<u64>, windows: &mut Option<Windows>, core: &mut Core, eng: &mut Engine) -> Result<(), StepError> {
    match windows {
        Some(_) if prewarming => core.prewarm(ins, eng),
        Some(w) => w.instruction(i, ins, core, eng),
        None => core.step(ins, eng),
    }
}

/// A step's error as the run reports it.
fn step_error(e: StepError, n: u64) -> String {
    match e {
        StepError::Integrity(e) => format!("{} (instruction {})", e, n),
        StepError::OutOfMemory(va) => {
            format!("out of simulated physical memory at virtual address 0x{:x} (instruction {}): raise memory.size", va, n)
        }
    }
}

/// A checkpoint's packed prewarm (`secmem_trace::checkpoint::Prewarm`), `expected` records
/// of it: each through `Core::prewarm` as the first instructions of the window's warm-up,
/// counted in `n` and polled every 256th, as the loop above runs them when they are records.
fn run_prewarm(b: Vec<u8>, expected: u64, n: &mut u64, core: &mut Core, eng: &mut Engine) -> Result<(), String> {
    let mut p = secmem_trace::checkpoint::Prewarm::new(b).map_err(|e| format!("checkpoint: {}", e))?;
    if p.records() != expected {
        return Err(format!("checkpoint: its prewarm holds {} records where {} were expected", p.records(), expected));
    }
    while let Some(ins) = p.next().map_err(|e| format!("checkpoint: {}", e))? {
        *n += 1;
        if *n & 0xFF == 0 {
            core.poll(eng, *n).map_err(|e| format!("{} (instruction {})", e, *n))?;
        }
        core.prewarm(ins, eng).map_err(|e| step_error(e, *n))?;
    }
    Ok(())
}

/// Schemes that verify at the end (lhash's certified execution) do it now, after the
/// measured statistics were taken: its cost is reported apart, not mixed into them.
fn finish(eng: &mut Engine, core: &Core, s: &mut Stats, error: &mut Option<String>) {
    if error.is_some() {
        return;
    }
    let moved = |e: &Engine| e.machine().port.counters().read_bytes + e.machine().port.counters().write_bytes;
    let (t0, bytes0) = (core.now(), moved(eng));
    match eng.finish(t0) {
        Ok(done) => {
            let b = moved(eng) - bytes0;
            s.int("integrity.final_check_cycles", done - t0);
            s.int("integrity.final_check_bytes", b);
        }
        Err(e) => *error = Some(format!("{} (at the end of the run)", e)),
    }
}

/// A sampled run's statistics in the order of a full run's: instructions, cycles and IPC
/// (of the measured windows), what ran, then the rest of the windows' combination, the plan
/// (`sampling.*`, `covered`: instructions run after the warm-up) and the intervals (`ci95.*`).
fn sampled_stats(w: &mut Windows, covered: u64, name: &str, o: &RunOptions, interrupted: Option<String>) -> Stats {
    let c = w.stats(covered);
    let (head, rest) = c.0.split_at(3);
    let mut s = Stats(head.to_vec());
    s.str("workload", name);
    s.int("warmup", o.warmup);
    s.int("seed", o.seed);
    if let Some(name) = interrupted {
        s.str("interrupted", &name);
    }
    s.0.extend(rest.iter().cloned());
    s
}

/// The IPC of every `sample.ipc_period` cycles, recorded as the series `sample.ipc` (the
/// baseline curve of 002 Fig. 4, for any scheme). Windows close at the run loop's polls
/// (every 256 instructions).
pub(crate) struct IpcSampler {
    period: u64,
    next: u64,
    start_cycle: u64,
    start_instr: u64,
    series: Vec<f64>,
}

impl IpcSampler {
    pub(crate) fn new(p: &Params) -> Result<Option<IpcSampler>, ConfigError> {
        let period = p.u64_min("sample.ipc_period", 0)?;
        Ok((period > 0).then_some(IpcSampler { period, next: period, start_cycle: 0, start_instr: 0, series: Vec::new() }))
    }

    fn poll(&mut self, now: u64, instructions: u64) {
        if now >= self.next {
            let cycles = now - self.start_cycle;
            self.series.push((instructions - self.start_instr) as f64 / cycles.max(1) as f64);
            (self.start_cycle, self.start_instr) = (now, instructions);
            self.next = (now / self.period + 1) * self.period;
        }
    }
}

/// Where a run stood at an interval's boundary: what `Intervals` takes differences of.
#[derive(Clone, Copy, Default)]
struct Mark {
    n: u64,
    cycle: u64,
    accesses: u64,
    misses: u64,
    read_bytes: u64,
    write_bytes: u64,
}

impl Mark {
    fn now(n: u64, core: &Core, eng: &Engine) -> Mark {
        let (c, p) = (&eng.machine().counters, eng.machine().port.counters());
        Mark { n, cycle: core.last_commit(), accesses: c.data_accesses, misses: c.data_misses, read_bytes: p.read_bytes, write_bytes: p.write_bytes }
    }
}

/// `--interval N`: the measured region cut into pieces of N instructions (the last may be
/// shorter), each one element of the `interval.*` series. The cycles of the pieces add up to
/// the run's `cycles`, their misses and bytes to its totals.
struct Intervals {
    every: u64,
    next: u64,
    last: Mark,
    /// instructions, cycles, ipc, l2.misses, l2.miss_rate, mem.read_bytes, mem.write_bytes
    series: [Vec<f64>; 7],
}

const INTERVAL_KEYS: [&str; 7] = ["instructions", "cycles", "ipc", "l2.misses", "l2.miss_rate", "mem.read_bytes", "mem.write_bytes"];

impl Intervals {
    fn new(every: u64) -> Intervals {
        Intervals { every, next: u64::MAX, last: Mark::default(), series: Default::default() }
    }

    fn start(&mut self, m: Mark) {
        self.last = m;
        self.next = m.n.saturating_add(self.every);
    }

    fn close(&mut self, m: Mark) {
        let l = self.last;
        let (n, cycles) = (m.n - l.n, m.cycle.saturating_sub(l.cycle));
        let (acc, miss) = (m.accesses - l.accesses, m.misses - l.misses);
        let v = [
            n as f64,
            cycles as f64,
            secmem_core::stats::ratio(n, cycles),
            miss as f64,
            secmem_core::stats::ratio(miss, acc),
            (m.read_bytes - l.read_bytes) as f64,
            (m.write_bytes - l.write_bytes) as f64,
        ];
        for (s, x) in self.series.iter_mut().zip(v) {
            s.push(x);
        }
        self.last = m;
        self.next = m.n.saturating_add(self.every);
    }

    fn stats(&self, s: &mut Stats) {
        s.int("interval.period", self.every);
        for (k, v) in INTERVAL_KEYS.iter().zip(&self.series) {
            s.series(&format!("interval.{k}"), v.clone());
        }
    }
}

/// A run's statistics without the host's own figures (`sim.*`: wall time, speed): what the
/// simulated machine did, identical for identical inputs.
pub fn simulated(s: &Stats) -> Stats {
    Stats(s.0.iter().filter(|(k, _)| !k.starts_with("sim.")).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipc_sampler_closes_a_window_at_the_first_poll_past_each_period() {
        let mut p = secmem_core::Params::from_toml("[sample]\nipc_period = 1000\n", "t").unwrap();
        let mut s = IpcSampler::new(&p).unwrap().unwrap();
        for k in 1..=10u64 {
            s.poll(k * 500, k * 100);
        }
        assert_eq!(s.series, [0.2; 5]);
        p.set("sample.ipc_period", "0").unwrap();
        assert!(IpcSampler::new(&p).unwrap().is_none());
    }
}
