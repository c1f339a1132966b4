//! Several cores at once (`cores = N`): each an out-of-order core with its own trace, its
//! own L1s, private levels, TLBs and page map, all sharing ONE engine — so the protected last
//! level, its metadata, the memory controller and the crypto engines are contended for, as
//! in ChampSim's and the counter-tree papers' multi-core runs.
//!
//! The cores run on one host thread in a fixed order: the core furthest behind in time
//! (`Core::now`, the lowest index on a tie) times its next instruction, so every core books
//! the shared resources at about the same simulated time (ChampSim steps every core each
//! cycle). Nothing depends on the host: the same config, traces and seed give the same
//! statistics, bit for bit.
//!
//! Each core warms up for `warmup` instructions and then measures `instructions`; at that
//! count its statistics stop (`coreK.*`), and it keeps running — replaying its trace from the
//! start when it ends — until every core has reached its count, so the contention it causes
//! lasts until the end. The shared statistics (`l2.*`, `mem.*`, the schemes') cover the span
//! from the last core's end of warm-up to the last core's count; `cycles` is that span and
//! `ipc` the mix's throughput (the sum of the cores' IPCs). Each core's share of the shared
//! structures (its protected-level and metadata accesses, memory reads and queueing) is
//! counted over its own measured window.
//!
//! Physical frames come from one pool, first touch first served across the cores
//! (`PageMap::sharing`), so copies of one program never share data, and the protected
//! memory, the metadata layout and the adversary see physical addresses only. The protected
//! level's evictions reach every core's levels above it (inclusion), between instructions.

use crate::ooo::{Core, StepError};
use crate::run::{interruption, RunOptions, RunResult};
use secmem_core::stats::{Stat, Stats};
use secmem_core::{ConfigError, Engine, Params};
use secmem_trace::progress::Progress;
use secmem_trace::{Instr, TraceSource};
use std::time::Instant;

pub use crate::params::{cores, MAX_CORES};

/// One core's program: how to open its trace (again, to replay it after the core's count).
pub struct MixInput {
    pub name: String,
    pub open: Box<dyn FnMut() -> Result<Box<dyn TraceSource>, String>>,
}

/// The program of each core: `names` as given when there is one per core, one name repeated
/// on every core (rate mode), or, with `cores` = 1, one core per name.
pub fn assign(cores: u64, names: &[String]) -> Result<Vec<String>, ConfigError> {
    match names.len() as u64 {
        0 => Err(ConfigError("a mix needs at least one workload".into())),
        1 => Ok(vec![names[0].clone(); cores as usize]),
        k if k > MAX_CORES => Err(ConfigError(format!("{} workloads: a mix has at most {} cores", k, MAX_CORES))),
        k if cores == 1 || k == cores => Ok(names.to_vec()),
        k => Err(ConfigError(format!(
            "cores = {} but {} workloads were given ({}): give one workload per core, or one for rate mode",
            cores,
            k,
            names.join(",")
        ))),
    }
}

/// The shared structures' counters one core's instructions move (taken before and after each
/// of its instructions).
#[derive(Clone, Copy, Default)]
struct Share {
    l2_accesses: u64,
    l2_misses: u64,
    meta_accesses: u64,
    meta_misses: u64,
    reads: u64,
    read_bytes: u64,
    write_bytes: u64,
    queue_cycles: u64,
}

impl Share {
    #[inline(always)]
    fn of(eng: &Engine) -> Share {
        let m = eng.machine();
        let (c, p) = (&m.counters, m.port.counters());
        Share {
            l2_accesses: c.data_accesses,
            l2_misses: c.data_misses,
            meta_accesses: c.meta_accesses,
            meta_misses: c.meta_misses,
            reads: p.reads,
            read_bytes: p.read_bytes,
            write_bytes: p.write_bytes,
            queue_cycles: p.queue_cycles,
        }
    }

    /// Close the stretch `open` began (if one is open): what moved the counters since is
    /// `self`'s.
    #[inline(always)]
    fn close(&mut self, open: &mut Option<Share>, eng: &Engine) {
        if let Some(o) = open.take() {
            self.add(&o, &Share::of(eng));
        }
    }

    /// Add what happened between `a` and `b` (counters reset between them count from zero).
    #[inline(always)]
    fn add(&mut self, a: &Share, b: &Share) {
        let d = |x: u64, y: u64| y.wrapping_sub(x);
        self.l2_accesses = self.l2_accesses.wrapping_add(d(a.l2_accesses, b.l2_accesses));
        self.l2_misses = self.l2_misses.wrapping_add(d(a.l2_misses, b.l2_misses));
        self.meta_accesses = self.meta_accesses.wrapping_add(d(a.meta_accesses, b.meta_accesses));
        self.meta_misses = self.meta_misses.wrapping_add(d(a.meta_misses, b.meta_misses));
        self.reads = self.reads.wrapping_add(d(a.reads, b.reads));
        self.read_bytes = self.read_bytes.wrapping_add(d(a.read_bytes, b.read_bytes));
        self.write_bytes = self.write_bytes.wrapping_add(d(a.write_bytes, b.write_bytes));
        self.queue_cycles = self.queue_cycles.wrapping_add(d(a.queue_cycles, b.queue_cycles));
    }
}

/// One core's progress through its trace.
struct Lane {
    name: String,
    /// Instructions of its first pass (warm-up and measured).
    n: u64,
    measuring: bool,
    /// Reached its count: statistics stopped, running on for the others.
    done: bool,
    start_cycle: u64,
    share: Share,
    stats: Option<Stats>,
    /// Times its trace was started again after its count.
    replays: u64,
    /// Records read since its trace was (last) opened.
    read: u64,
    /// Its first instruction, read while its memory image was loaded.
    first: Option<Instr>,
    /// Replaying: its trace's memory image is skipped (it is in memory already, and writing
    /// it again would hold the shared bus for nothing anyone measures).
    skip_image: bool,
}

/// Run one core per input on one engine (see the module comment). `alone[k]`: core k's IPC
/// when its program runs alone on the same machine, if known, for the mix's speedups.
pub fn run_mix(p: &Params, inputs: &mut [MixInput], o: &RunOptions, alone: &[Option<f64>]) -> Result<RunResult, ConfigError> {
    mix_run(p, inputs, o, alone, false)
}

/// [`run_mix`]; `one_by_one` picks the next core after every instruction, the simple path the
/// runs of instructions between picks are tested against.
fn mix_run(p: &Params, inputs: &mut [MixInput], o: &RunOptions, alone: &[Option<f64>], one_by_one: bool) -> Result<RunResult, ConfigError> {
    let k = inputs.len();
    if k == 0 || k as u64 > MAX_CORES {
        return Err(ConfigError(format!("a mix has 1 to {} cores, not {}", MAX_CORES, k)));
    }
    if o.interval > 0 {
        return Err(ConfigError("--interval measures one core: it cannot be combined with a mix".into()));
    }
    let wall = Instant::now();
    let mut eng = Engine::new(p, o.seed)?;
    let mut cores: Vec<Core> = Vec::with_capacity(k);
    for i in 0..k {
        let mut c = Core::new(p, &eng)?;
        if i == 0 {
            c.pm.set_order(p, o.seed)?;
        } else {
            c.pm = cores[0].pm.sharing();
        }
        c.hier.evictions = Some(Vec::new());
        cores.push(c);
    }
    let mut srcs = Vec::with_capacity(k);
    for inp in inputs.iter_mut() {
        let mut s = (inp.open)().map_err(|e| ConfigError(format!("{}: {}", inp.name, e)))?;
        s.show_progress(false);
        srcs.push(s);
    }
    let mut lanes: Vec<Lane> = inputs
        .iter()
        .map(|inp| Lane { name: inp.name.clone(), n: 0, measuring: false, done: false, start_cycle: 0, share: Share::default(), stats: None, replays: 0, read: 0, first: None, skip_image: false })
        .collect();
    let total = o.warmup.saturating_add(o.instructions);
    let names: Vec<String> = inputs.iter().map(|l| l.name.clone()).collect();
    let label = format!("{} {}+{}", names.join(","), p.str("integrity")?, p.str("encryption")?);
    let mut bar = Progress::new(o.progress, total.saturating_mul(k as u64), label);
    let mut ins = Instr::default();
    let mut error: Option<String> = None;
    let mut interrupted = None;
    // Instructions every core timed (replays too), and since all began measuring.
    let mut steps: u64 = 0;
    let mut all_measuring: Option<(Instant, u64, u64)> = None; // (wall, steps, cycle)
    let mut waiting = k; // cores not done
    let mut log: Vec<u64> = Vec::new();
    // Lanes measuring or done, and the sum of the lanes' instruction counts (for the bar).
    let mut settled = 0;
    let mut progressed: u64 = 0;
    if total == 0 {
        waiting = 0;
    }
    // Each trace's memory image (its external records before its first instruction: the
    // loader's, a fast-forward's) is memory that was there before the run: written first,
    // core by core, and every core starts once all of it is in. Otherwise one core's image
    // would hold the shared bus while another already ran (a built-in workload's is 18 MiB).
    let mut start = 0;
    for c in 0..k {
        loop {
            match srcs[c].next_into(&mut ins) {
                Ok(true) if ins.external => {
                    lanes[c].read += 1;
                    if let Err(e) = cores[c].external(&ins, &mut eng) {
                        error = Some(format!("core {} ({}): {} (loading its memory image)", c, lanes[c].name, step_error(e)));
                        break;
                    }
                }
                Ok(true) => {
                    lanes[c].read += 1;
                    lanes[c].first = Some(ins.clone());
                    break;
                }
                Ok(false) => break, // told below, when the core finds its trace over
                Err(e) => {
                    error = Some(format!("core {} ({}): trace error before its first instruction: {}", c, lanes[c].name, e));
                    break;
                }
            }
        }
        if error.is_some() {
            waiting = 0;
            break;
        }
        match cores[c].load_image(&mut eng) {
            Ok(t) => start = start.max(t),
            Err(e) => {
                error = Some(format!("core {} ({}): {} (loading its memory image)", c, lanes[c].name, step_error(e)));
                waiting = 0;
                break;
            }
        }
        propagate(&mut cores, c, &mut log);
    }
    for core in &mut cores {
        core.start_at(start);
    }
    'run: while waiting > 0 {
        // The core furthest behind goes next (the lowest number on a tie)...
        let mut c = 0;
        for (i, core) in cores.iter().enumerate().skip(1) {
            if core.now() < cores[c].now() {
                c = i;
            }
        }
        // ...and keeps going while it still is: its time below every lower-numbered core's
        // and at most every higher-numbered one's (they do not move meanwhile). One pick
        // serves a run of its instructions (8 on hot, 21 on mix).
        let below = cores[..c].iter().map(Core::now).min().unwrap_or(u64::MAX);
        let upto = cores[c + 1..].iter().map(Core::now).min().unwrap_or(u64::MAX);
        let limit = (below - 1).min(upto); // below > its time, so at least 1
        let core = &mut cores[c];
        let lane = &mut lanes[c];
        let src = &mut srcs[c];
        // The shared counters when this core's current measured stretch began: what moves
        // them between two of its instructions is its own, so a stretch needs two snapshots,
        // not two an instruction.
        let mut open: Option<Share> = None;
        let mut failed = false;
        while core.now() <= limit {
            if steps & 0xFF == 0 {
                if let Some((e, name)) = interruption(steps, "instructions") {
                    (error, interrupted) = (Some(e), Some(name));
                    failed = true;
                    break;
                }
            }
            let next = match lane.first.take() {
                Some(first) => {
                    ins = first;
                    Ok(true)
                }
                None => src.next_into(&mut ins),
            };
            match next {
                Ok(true) if lane.skip_image && ins.external => {
                    lane.read += 1;
                    continue;
                }
                Ok(true) => {
                    lane.read += 1;
                    lane.skip_image = false;
                }
                Ok(false) if lane.done && lane.read > 0 => {
                    // Past its count: start the trace again (its loads' values no longer match
                    // memory, which nobody measures any more).
                    lane.replays += 1;
                    lane.read = 0;
                    lane.skip_image = true;
                    match (inputs[c].open)() {
                        Ok(s) => *src = s,
                        Err(e) => {
                            error = Some(format!("core {} ({}): reopening its trace: {}", c, lane.name, e));
                            failed = true;
                            break;
                        }
                    }
                    continue;
                }
                Ok(false) => {
                    error = Some(if lane.n < o.warmup {
                        format!("core {} ({}): the trace ended after {} instructions, before the warm-up of {} was over", c, lane.name, lane.n, o.warmup)
                    } else {
                        format!(
                            "core {} ({}): the trace ended after {} instructions, {} of the {} to measure",
                            c,
                            lane.name,
                            lane.n,
                            lane.n - o.warmup,
                            o.instructions
                        )
                    });
                    failed = true;
                    break;
                }
                Err(e) => {
                    if let Some((e, name)) = interruption(steps, "instructions") {
                        (error, interrupted) = (Some(e), Some(name));
                    } else {
                        error = Some(format!("core {} ({}): trace error after {} instructions: {}", c, lane.name, lane.n, e));
                    }
                    failed = true;
                    break;
                }
            }
            let r = if ins.external {
                // The memory it writes is nobody's share.
                lane.share.close(&mut open, &eng);
                core.external(&ins, &mut eng)
            } else {
                if !lane.done && !lane.measuring && lane.n >= o.warmup {
                    lane.measuring = true;
                    core.reset_stats();
                    lane.start_cycle = core.now();
                    lane.share = Share::default();
                    settled += 1;
                    if settled == k {
                        eng.reset_stats();
                        all_measuring = Some((Instant::now(), steps, core.now()));
                    }
                }
                steps += 1;
                if !lane.done {
                    lane.n += 1;
                    progressed += 1;
                }
                if steps & 0xFFFF == 0 {
                    bar.update(progressed);
                }
                if lane.measuring && !lane.done && open.is_none() {
                    open = Some(Share::of(&eng));
                }
                let mut r = Ok(());
                if steps & 0xFF == 0 {
                    if let Err(e) = core.poll(&mut eng, steps) {
                        r = Err(StepError::Integrity(e));
                    }
                }
                if r.is_ok() {
                    r = core.step(&ins, &mut eng);
                }
                if r.is_ok() && !lane.done && lane.n >= total {
                    lane.share.close(&mut open, &eng);
                    if !lane.measuring {
                        settled += 1; // no instructions to measure
                    }
                    lane.done = true;
                    waiting -= 1;
                    lane.stats = Some(core_stats(core, lane, o));
                }
                r
            };
            if let Err(e) = r {
                error = Some(format!("core {} ({}): {} (instruction {})", c, lane.name, step_error(e), lane.n));
                failed = true;
                break;
            }
            // Inclusion needs every core: done between picks.
            if one_by_one || waiting == 0 || core.hier.evictions.as_ref().is_some_and(|e| !e.is_empty()) {
                break;
            }
        }
        lane.share.close(&mut open, &eng);
        propagate(&mut cores, c, &mut log);
        if failed {
            break 'run;
        }
    }
    bar.finish();

    // Cores that did not reach their count report what they measured.
    for (c, lane) in lanes.iter_mut().enumerate() {
        if lane.stats.is_none() {
            if !lane.measuring {
                cores[c].reset_stats();
                lane.start_cycle = cores[c].last_commit();
                lane.share = Share::default();
            }
            lane.stats = Some(core_stats(&cores[c], lane, o));
        }
    }
    if all_measuring.is_none() {
        eng.reset_stats(); // not every core got past its warm-up: no shared window
    }
    let end = lanes.iter().zip(&cores).map(|(l, c)| l.stats.as_ref().and_then(|s| s.get_f64("core_end")).unwrap_or(c.last_commit() as f64) as u64).max().unwrap_or(0);
    let (since, steps0, start) = all_measuring.unwrap_or((Instant::now(), steps, end));
    // Every instruction the cores timed once all measured (past their counts and replays
    // too): the span the shared statistics cover, and the host's work.
    let timed = steps - steps0;
    let mut s = Stats::default();
    let measured: u64 = lanes.iter().map(|l| l.stats.as_ref().and_then(|s| s.get_f64("instructions")).unwrap_or(0.0) as u64).sum();
    let ipcs: Vec<f64> = lanes.iter().map(|l| l.stats.as_ref().and_then(|s| s.get_f64("ipc")).unwrap_or(0.0)).collect();
    let throughput: f64 = ipcs.iter().sum();
    s.int("instructions", measured);
    s.int("cycles", end.saturating_sub(start));
    s.float("ipc", throughput);
    s.str("workload", &mix_name(&names));
    s.int("warmup", o.warmup);
    s.int("seed", o.seed);
    if let Some(name) = &interrupted {
        s.str("interrupted", name);
    }
    s.int("cores", k as u64);
    s.float("mix.throughput", throughput);
    s.int("mix.timed_instructions", timed);
    if alone.len() == k && alone.iter().all(|a| a.is_some_and(|x| x > 0.0)) {
        let speedups: Vec<f64> = ipcs.iter().zip(alone).map(|(i, a)| i / a.unwrap()).collect();
        s.float("mix.weighted_speedup", speedups.iter().sum());
        let inv: f64 = speedups.iter().map(|x| if *x > 0.0 { 1.0 / x } else { f64::INFINITY }).sum();
        s.float("mix.harmonic_speedup", if inv.is_finite() { k as f64 / inv } else { 0.0 });
    }
    eng.stats(&mut s);
    for (c, lane) in lanes.iter_mut().enumerate() {
        let prefix = format!("core{}.", c);
        s.str(&format!("{}workload", prefix), &lane.name);
        if let Some(a) = alone.get(c).copied().flatten() {
            s.float(&format!("{}ipc_alone", prefix), a);
            s.float(&format!("{}speedup", prefix), if a > 0.0 { ipcs[c] / a } else { 0.0 });
        }
        s.int(&format!("{}replays", prefix), lane.replays);
        for (key, v) in lane.stats.take().unwrap_or_default().0 {
            if key != "core_end" {
                s.0.push((format!("{}{}", prefix, key), v));
            }
        }
    }
    if error.is_none() {
        let now = cores.iter().map(Core::now).max().unwrap_or(0);
        let moved = |e: &Engine| e.machine().port.counters().read_bytes + e.machine().port.counters().write_bytes;
        let bytes0 = moved(&eng);
        match eng.finish(now) {
            Ok(done) => {
                s.int("integrity.final_check_cycles", done - now);
                s.int("integrity.final_check_bytes", moved(&eng) - bytes0);
            }
            Err(e) => error = Some(format!("{} (at the end of the run)", e)),
        }
    }
    let secs = since.elapsed().as_secs_f64();
    s.float("sim.wall_seconds", wall.elapsed().as_secs_f64());
    s.float("sim.instructions_per_second", if secs > 0.0 { timed as f64 / secs } else { 0.0 });
    Ok(RunResult { stats: s, error })
}

/// Inclusion: what left the protected level during core `c`'s work leaves the levels above
/// it of the core it belongs to (`c`'s own were cleared as it happened). Cores share no
/// frames, so a line can only be in its owner's levels: telling only that core keeps this at
/// one lookup per eviction, not one per level of every core.
#[inline(never)]
fn propagate(cores: &mut [Core], c: usize, log: &mut Vec<u64>) {
    let Some(ev) = cores[c].hier.evictions.as_mut() else { return };
    if ev.is_empty() {
        return;
    }
    std::mem::swap(ev, log);
    for &a in log.iter() {
        let o = cores[c].pm.owner(a);
        if o != c {
            cores[o].hier.evicted(a);
        }
    }
    log.clear();
}

fn step_error(e: StepError) -> String {
    match e {
        StepError::Integrity(e) => e.to_string(),
        StepError::OutOfMemory(va) => format!("out of simulated physical memory at virtual address 0x{:x}: raise memory.size", va),
    }
}

/// "mcf,gcc,xz" or, in rate mode, "4xmcf".
pub fn mix_name(names: &[String]) -> String {
    if names.len() > 1 && names.iter().all(|n| *n == names[0]) {
        format!("{}x{}", names.len(), names[0])
    } else {
        names.join(",")
    }
}

/// One core's statistics over its own measured window.
fn core_stats(core: &Core, lane: &Lane, o: &RunOptions) -> Stats {
    let measured = if lane.measuring { lane.n.saturating_sub(o.warmup) } else { 0 };
    let end = if lane.measuring { core.last_commit() } else { lane.start_cycle };
    let cycles = end.saturating_sub(lane.start_cycle);
    let sh = &lane.share;
    let mut s = Stats::default();
    s.int("instructions", measured);
    s.int("cycles", cycles);
    s.rate("ipc", measured, cycles);
    s.0.push(("core_end".into(), Stat::Int(end)));
    s.int("l2.accesses", sh.l2_accesses);
    s.rate("l2.miss_rate", sh.l2_misses, sh.l2_accesses);
    s.int("l2.meta_accesses", sh.meta_accesses);
    s.rate("l2.meta_hit_rate", sh.meta_accesses - sh.meta_misses.min(sh.meta_accesses), sh.meta_accesses);
    s.int("mem.reads", sh.reads);
    s.int("mem.read_bytes", sh.read_bytes);
    s.int("mem.write_bytes", sh.write_bytes);
    s.int("mem.bus_queue_cycles", sh.queue_cycles);
    s.rate("mem.queue_cycles_per_read", sh.queue_cycles, sh.reads);
    core.stats(&mut s);
    s
}

/// IPC of `input` alone on the same machine (one core), measured as a mix's core is: what
/// weighted speedups divide by when the results store does not have it.
pub fn alone_ipc(p: &Params, input: &mut MixInput, o: &RunOptions) -> Result<f64, String> {
    let mut one = p.clone();
    one.set("cores", "1").map_err(|e| e.0)?;
    let mut src = (input.open)()?;
    let o = RunOptions { progress: false, ..o.clone() };
    let r = crate::run::run(&one, &mut *src, &o).map_err(|e| e.0)?;
    if let Some(e) = r.error {
        return Err(format!("{} alone: {}", input.name, e));
    }
    Ok(r.stats.get_f64("ipc").unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configure;
    use secmem_core::AccessKind;
    use crate::run::simulated;
    use secmem_trace::workloads::builtin;
    use secmem_trace::TraceError;

    #[test]
    fn an_eviction_reaches_the_private_levels_of_the_core_that_owns_the_line() {
        let p = configure("suh2003", Some("none"), Some("none"), &[]).unwrap();
        let mut eng = Engine::new(&p, 1).unwrap();
        let mut cores = vec![Core::new(&p, &eng).unwrap(), Core::new(&p, &eng).unwrap(), Core::new(&p, &eng).unwrap()];
        cores[1].pm = cores[0].pm.sharing();
        cores[2].pm = cores[0].pm.sharing();
        let mut pa = Vec::new();
        for (c, core) in cores.iter_mut().enumerate() {
            core.hier.evictions = Some(Vec::new());
            let a = core.pm.translate(0x4000).unwrap();
            core.hier.access(AccessKind::Load, a, 0, &mut eng).unwrap();
            assert!(core.hier.holds(a), "core {} holds its line", c);
            pa.push(a);
        }
        assert_eq!(pa.iter().collect::<std::collections::HashSet<_>>().len(), 3, "one virtual page, three frames");
        // Core 0's work pushed core 2's line and its own out of the shared level.
        cores[0].hier.evictions.as_mut().unwrap().extend([pa[2], pa[0]]);
        let mut log = Vec::new();
        propagate(&mut cores, 0, &mut log);
        assert!(!cores[2].hier.holds(pa[2]), "the owner drops it");
        assert!(cores[1].hier.holds(pa[1]), "a core whose line stayed keeps it");
        assert!(cores[0].hier.evictions.as_ref().unwrap().is_empty() && log.is_empty(), "the log is spent");
    }

    /// A built-in workload cut after `left` instructions (external records aside).
    struct Cut(Box<dyn TraceSource>, u64);

    impl TraceSource for Cut {
        fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
            if self.1 == 0 || !self.0.next_into(out)? {
                return Ok(false);
            }
            self.1 -= !out.external as u64;
            Ok(true)
        }
        fn name(&self) -> &str {
            self.0.name()
        }
    }

    fn input(w: &'static str, cut: Option<u64>) -> MixInput {
        MixInput {
            name: w.to_string(),
            open: Box::new(move || {
                let s = builtin(w, 1).map_err(|e| e.to_string())?;
                Ok(match cut {
                    Some(n) => Box::new(Cut(s, n)),
                    None => s,
                })
            }),
        }
    }

    fn opts(n: u64) -> RunOptions {
        RunOptions { instructions: n, warmup: n / 4, seed: 1, progress: false, interval: 0 }
    }

    fn mix(sets: &[&str], inputs: &mut [MixInput], n: u64) -> RunResult {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = configure("suh2003", Some("chash"), Some("otp"), &sets).unwrap();
        run_mix(&p, inputs, &opts(n), &[]).unwrap()
    }

    #[test]
    fn each_core_of_a_mix_sets_its_own_image_up_lazily() {
        // Each core's image lands in its own frames, set up when that core first uses them:
        // every load of both cores reads the trace's bytes, as with the images timed.
        for image in ["timed", "lazy"] {
            let set = format!("pages.image={}", image);
            let s = mix(&["cores=2", &set], &mut [input("mix", None), input("hot", None)], 20_000).stats;
            for c in 0..2 {
                assert_eq!(s.get_f64(&format!("core{}.trace.value_mismatches", c)), Some(0.0), "core {}, {}", c, image);
                assert_eq!(s.get_f64(&format!("core{}.instructions", c)), Some(20_000.0), "core {}, {}", c, image);
            }
        }
    }

    #[test]
    fn a_mix_gives_bit_identical_statistics_twice() {
        let run = || simulated(&mix(&[], &mut [input("stream", None), input("chase", None), input("hot", None)], 30_000).stats);
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        assert_eq!(a.get_f64("cores"), Some(3.0));
        for c in 0..3 {
            assert_eq!(a.get_f64(&format!("core{}.instructions", c)), Some(30_000.0), "core {}", c);
            assert!(a.get_f64(&format!("core{}.ipc", c)).unwrap() > 0.0);
        }
        let sum: f64 = (0..3).map(|c| a.get_f64(&format!("core{}.ipc", c)).unwrap()).sum();
        assert!((a.get_f64("ipc").unwrap() - sum).abs() < 1e-12, "ipc is the mix's throughput");
    }

    #[test]
    fn runs_of_one_cores_instructions_between_picks_give_what_picking_after_each_gives() {
        // Same schedule, and each core's share of the shared counters summed over a run of its
        // instructions instead of one by one: every statistic bit-identical.
        let p = configure("suh2003", Some("chash"), Some("otp"), &["l2.size=64KiB".to_string()]).unwrap();
        // The last mix replays hot's trace, cut short, while chase finishes (memory images
        // skipped on the replays).
        let (n, cut) = (20_000, Some(20_000 + 5_000));
        for ws in [&[("stream", None), ("chase", None), ("hot", None)][..], &[("mix", None); 4][..], &[("hot", cut), ("chase", None)][..]] {
            let run = |one_by_one| {
                let mut ins: Vec<MixInput> = ws.iter().map(|&(w, cut)| input(w, cut)).collect();
                simulated(&mix_run(&p, &mut ins, &opts(n), &[], one_by_one).unwrap().stats)
            };
            let (batched, simple) = (run(false), run(true));
            assert_eq!(batched, simple, "{:?}", ws);
            assert!(batched.get_f64("core0.mem.reads").unwrap() > 0.0);
            assert_eq!(batched.get_f64("core0.replays").unwrap() > 0.0, ws[0].1.is_some());
            assert!(batched.get_f64("mix.timed_instructions").unwrap() >= batched.get_f64("instructions").unwrap() * 0.9);
        }
    }

    #[test]
    fn copies_of_one_program_get_their_own_pages_and_read_back_their_own_values() {
        // Rate mode: both copies store to the same virtual addresses. Had they shared frames,
        // each would load the other's values (value mismatches).
        let one = {
            let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
            let mut src = builtin("mix", 1).unwrap();
            crate::run(&p, &mut *src, &opts(40_000)).unwrap().stats
        };
        let r = mix(&[], &mut [input("mix", None), input("mix", None)], 40_000);
        assert!(r.error.is_none(), "{:?}", r.error);
        let s = r.stats;
        assert_eq!(s.get_f64("core0.trace.value_mismatches"), Some(0.0));
        assert_eq!(s.get_f64("core1.trace.value_mismatches"), Some(0.0));
        let pages = one.get_f64("mem.pages_mapped").unwrap();
        assert!(s.get_f64("core1.mem.pages_mapped").unwrap() >= 2.0 * pages - 2.0, "{} vs {}", s.get_f64("core1.mem.pages_mapped").unwrap(), pages);
        // Contention: the two copies together wait longer for memory than one alone.
        assert!(s.get_f64("mem.bus_queue_cycles").unwrap() > one.get_f64("mem.bus_queue_cycles").unwrap());
        assert!(s.get_f64("core0.ipc").unwrap() < one.get_f64("ipc").unwrap());
    }

    #[test]
    fn a_core_past_its_count_replays_its_trace_until_the_others_are_done() {
        // `hot` is fast; `chase` misses: hot reaches its count first and runs on, replaying.
        let n = 20_000;
        let total = n + n / 4;
        let r = mix(&[], &mut [input("hot", Some(total)), input("chase", None)], n);
        assert!(r.error.is_none(), "{:?}", r.error);
        let s = r.stats;
        assert!(s.get_f64("core0.replays").unwrap() >= 1.0);
        assert_eq!(s.get_f64("core0.instructions"), Some(n as f64), "its statistics stop at its count");
        assert_eq!(s.get_f64("core1.replays"), Some(0.0));
    }

    #[test]
    fn a_trace_that_ends_early_is_one_line_naming_the_core_with_what_was_measured() {
        let n = 20_000;
        let r = mix(&[], &mut [input("hot", None), input("chase", Some(n / 4 + 100))], n);
        let e = r.error.unwrap();
        assert_eq!(e, format!("core 1 (chase): the trace ended after {} instructions, 100 of the {} to measure", n / 4 + 100, n));
        assert!(r.stats.get_f64("core0.instructions").unwrap() > 0.0);
        assert_eq!(r.stats.get_f64("core1.instructions"), Some(100.0));
    }

    #[test]
    fn weighted_and_harmonic_speedups_divide_by_each_program_alone() {
        let p = configure("suh2003", Some("chash"), Some("otp"), &["cores=2".to_string()]).unwrap();
        let mut ins = [input("stream", None), input("hot", None)];
        let alone: Vec<Option<f64>> = ins.iter_mut().map(|i| Some(alone_ipc(&p, i, &opts(20_000)).unwrap())).collect();
        let s = run_mix(&p, &mut ins, &opts(20_000), &alone).unwrap().stats;
        let sp: Vec<f64> = (0..2).map(|c| s.get_f64(&format!("core{}.ipc", c)).unwrap() / alone[c].unwrap()).collect();
        assert!((s.get_f64("mix.weighted_speedup").unwrap() - (sp[0] + sp[1])).abs() < 1e-12);
        assert!((s.get_f64("mix.harmonic_speedup").unwrap() - 2.0 / (1.0 / sp[0] + 1.0 / sp[1])).abs() < 1e-12);
        assert!(sp.iter().all(|&x| x > 0.0 && x <= 1.0 + 1e-9), "sharing never helps here: {:?}", sp);
    }

    #[test]
    fn mixes_are_checked_before_the_run() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(assign(4, &n(&["mcf"])).unwrap(), n(&["mcf"; 4]));
        assert_eq!(assign(1, &n(&["mcf", "gcc"])).unwrap(), n(&["mcf", "gcc"]));
        assert_eq!(assign(2, &n(&["mcf", "gcc"])).unwrap(), n(&["mcf", "gcc"]));
        let e = assign(4, &n(&["mcf", "gcc"])).unwrap_err().0;
        assert_eq!(e, "cores = 4 but 2 workloads were given (mcf,gcc): give one workload per core, or one for rate mode");
        let e = configure("suh2003", None, None, &["cores=65".to_string()]).err().unwrap().0;
        assert_eq!(e, "cores: 65 is more than 64");
        let p = configure("suh2003", None, None, &["cores=2".to_string()]).unwrap();
        let mut src = builtin("hot", 1).unwrap();
        let e = crate::run(&p, &mut *src, &opts(1000)).err().unwrap().0;
        assert!(e.starts_with("cores = 2: a run of several cores is a mix"), "{}", e);
        assert_eq!(mix_name(&n(&["mcf"; 3])), "3xmcf");
    }
}
