//! Sampled simulation (`--sample`), after SMARTS (Wunderlich, Wenisch, Falsafi and Hoe,
//! "SMARTS: Accelerating Microarchitecture Simulation via Rigorous Statistical Sampling",
//! ISCA 2003): the measured instructions are cut into periods of U; each period runs
//! functional warming (`Core::warm`: caches, TLBs, predictor, and the secure engine's real
//! work on real bytes — tree, counters, time stamps, untrusted memory), then D instructions of
//! detailed warming (the out-of-order window, queues and ports fill again), then W measured
//! instructions in full detail. Each window's statistics are kept; the run reports their
//! combination with a 95% confidence interval from the spread between windows (SMARTS §3,
//! the central limit theorem with Student's t for the sample size).
//!
//! How windows combine (`combine`):
//! - a rate (`Stat::Rate`: IPC = instructions/cycles, a miss rate, loads per miss) is the
//!   ratio estimator Σnum/Σden over the windows; its interval comes from the windows'
//!   residuals num_i − R·den_i (Cochran, Sampling Techniques, 3rd ed., §6.4);
//! - any other float is the mean of the windows' values, with the interval of a mean;
//! - a count is summed over the windows (what the measured windows did together); a value
//!   that is not zero right after a statistics reset is state, not a count (resident bytes,
//!   configured sizes), and is reported as the last window saw it;
//! - series are joined, strings kept.
//!
//! Each interval's half-width is `ci95.<key>`.

use crate::ooo::{Core, StepError};
use secmem_core::stats::{Stat, Stats};
use secmem_core::{ConfigError, Engine};
use secmem_timing::Cycle;
use secmem_trace::cputime::thread_cpu_seconds;
use secmem_trace::Record;
use std::time::Instant;

/// Windows aimed for when U is not given: SMARTS measured ~10,000 units of 1,000; fewer
/// larger windows cost less detail per instruction for the same interval on our workloads.
const DEFAULT_WINDOWS: u64 = 1_000;
/// Default measured window and detailed warm-up (instructions). SMARTS used W = 1,000 with
/// 2,000 of detailed warming for an 8-wide core; the windows are longer here because a
/// protected miss can hold the core for a thousand cycles.
pub const DEFAULT_WINDOW: u64 = 2_000;
pub const DEFAULT_WARMING: u64 = 3_000;
/// The shortest default period: at most a tenth of the instructions in detail.
const MIN_DETAIL_SHARE: u64 = 10;

/// One sampling plan: every `period` instructions, `warming` in detail unmeasured, then
/// `window` measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    pub period: u64,
    pub window: u64,
    pub warming: u64,
}

impl Sampling {
    /// `--sample` as given: empty for defaults chosen from the `instructions` measured, or
    /// `U`, `U:W` or `U:W:D` (counts such as `1M`). Refused with one line naming the problem.
    pub fn parse(spec: &str, instructions: u64) -> Result<Sampling, ConfigError> {
        let err = |m: String| ConfigError(format!("--sample: {}", m));
        let spec = spec.trim();
        let parts: Vec<&str> = if spec.is_empty() { vec![] } else { spec.split(':').collect() };
        if parts.len() > 3 {
            return Err(err(format!("'{}' is not U:W:D (period, measured window, detailed warm-up), e.g. 1M:2000:3000", spec)));
        }
        let count = |i: usize, what: &str| -> Result<Option<u64>, ConfigError> {
            match parts.get(i) {
                None => Ok(None),
                Some(t) => secmem_core::params::parse_count(t)
                    .map(Some)
                    .ok_or_else(|| err(format!("{} '{}' is not a count of instructions (e.g. 1M:2000:3000)", what, t))),
            }
        };
        let period = count(0, "the period U")?;
        let window = count(1, "the window W")?.unwrap_or(DEFAULT_WINDOW);
        let warming = count(2, "the detailed warm-up D")?.unwrap_or(DEFAULT_WARMING);
        let period = period.unwrap_or_else(|| (instructions / DEFAULT_WINDOWS).max((window + warming) * MIN_DETAIL_SHARE));
        let s = Sampling { period, window, warming };
        s.check(instructions)?;
        Ok(s)
    }

    /// Whether the plan fits `instructions` measured instructions.
    pub fn check(&self, instructions: u64) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(format!("--sample: {}", m)));
        if self.window == 0 {
            return err("the measured window W must be at least 1 instruction".into());
        }
        if self.window.saturating_add(self.warming) > self.period {
            return err(format!("W + D = {} + {} is more than the period U = {}", self.window, self.warming, self.period));
        }
        let n = self.windows(instructions);
        if n < 2 {
            return err(format!(
                "a period of {} leaves {} measured window{} in {} instructions; an interval needs at least 2 (lower U or raise --instructions)",
                self.period,
                n,
                if n == 1 { "" } else { "s" },
                instructions
            ));
        }
        Ok(())
    }

    /// Windows measured in `instructions`.
    pub fn windows(&self, instructions: u64) -> u64 {
        instructions / self.period
    }

    /// What instruction `i` of the measured region (from 0) runs as.
    #[inline]
    pub fn phase(&self, i: u64) -> Phase {
        let pos = i % self.period;
        let functional = self.period - self.window - self.warming;
        if pos < functional {
            Phase::Functional
        } else if pos < functional + self.warming {
            Phase::Warming
        } else {
            Phase::Measured
        }
    }

    /// Instructions from `i` of the measured region to the end of its phase (`i` included).
    #[inline]
    pub fn phase_left(&self, i: u64) -> u64 {
        let pos = i % self.period;
        let functional = self.period - self.window - self.warming;
        let end = match self.phase(i) {
            Phase::Functional => functional,
            Phase::Warming => functional + self.warming,
            Phase::Measured => self.period,
        };
        end - pos
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Functional warming (`Core::warm`).
    Functional,
    /// Detailed, not measured.
    Warming,
    /// Detailed and measured.
    Measured,
}

/// The windows a sampled run measured, uncombined: each window's statistics, those right
/// after the first reset (`combine`'s `state`), and the host CPU seconds warming and in
/// detail (`Windows::take`; a checkpointed run combines the windows of many runs).
pub(crate) struct Measured {
    pub windows: Vec<Stats>,
    pub state: Stats,
    pub cpu: [f64; 2],
}

/// A sampled run in progress: which phase the core is in and the windows measured so far.
pub struct Windows {
    pub plan: Sampling,
    phase: Phase,
    /// The last commit before the current window.
    start: Cycle,
    done: Vec<Stats>,
    /// Statistics right after the first window's reset (see `combine`).
    state: Option<Stats>,
    /// Instructions left in the current phase of the measured region (0: find out at the
    /// next): the phase is found once per phase, not by two divisions per instruction.
    left: u64,
    /// When the measured region began (for `sim.instructions_per_second`).
    pub measuring_since: Option<Instant>,
    /// Host CPU seconds spent warming functionally and in detail, and the reading at the
    /// last switch (`sim.functional_seconds`, `sim.detailed_seconds`).
    cpu: [f64; 2],
    cpu_at: f64,
}

impl Windows {
    /// A sampled run of `eng`: it starts warming functionally, untimed.
    pub fn new(plan: Sampling, eng: &mut Engine) -> Windows {
        eng.set_untimed(true);
        Windows { plan, phase: Phase::Functional, left: 0, start: 0, done: Vec::new(), state: None, measuring_since: None, cpu: [0.0; 2], cpu_at: thread_cpu_seconds() }
    }

    /// Run instruction `i` of the measured region (None: of the warm-up, which is warmed
    /// functionally) in its phase, switching the core between functional warming and detail.
    #[inline]
    pub fn instruction<R: Record>(&mut self, i: Option<u64>, ins: &R, core: &mut Core, eng: &mut Engine) -> Result<(), StepError> {
        let Some(i) = i else {
            return core.warm(ins, eng);
        };
        if self.left == 0 {
            self.enter(i, core, eng);
        }
        self.left -= 1;
        if self.phase == Phase::Functional {
            return core.warm(ins, eng);
        }
        core.step(ins, eng)?;
        if self.phase == Phase::Measured && self.left == 0 {
            self.close(core, eng);
        }
        Ok(())
    }

    /// Instruction `i` of the measured region starts a phase: switch to it if it is not the
    /// current one, and count its instructions.
    #[cold]
    fn enter(&mut self, i: u64, core: &mut Core, eng: &mut Engine) {
        if i == 0 {
            self.measuring_since = Some(Instant::now());
        }
        let phase = self.plan.phase(i);
        if phase != self.phase {
            self.switch(phase, core, eng);
        }
        self.left = self.plan.phase_left(i);
    }

    #[cold]
    fn switch(&mut self, phase: Phase, core: &mut Core, eng: &mut Engine) {
        if self.phase == Phase::Functional {
            self.lap();
            eng.set_untimed(false);
            core.resume();
        }
        if phase == Phase::Measured {
            // Counted from the last commit before the window, so windows measure commit to
            // commit (a window's own fill and drain are not charged twice).
            self.start = core.last_commit();
            eng.reset_stats();
            core.reset_stats_from(self.start);
            if self.state.is_none() {
                let mut s = Stats::default();
                eng.stats(&mut s);
                core.stats(&mut s);
                self.state = Some(s);
            }
        }
        self.phase = phase;
    }

    /// The window is over: keep its statistics; functional warming goes on at its CPI.
    fn close(&mut self, core: &mut Core, eng: &mut Engine) {
        let cycles = core.last_commit() - self.start;
        let w = self.plan.window;
        let mut s = Stats::default();
        s.int("instructions", w);
        s.int("cycles", cycles);
        s.rate("ipc", w, cycles);
        eng.stats(&mut s);
        core.stats(&mut s);
        self.done.push(s);
        core.start_warming(cycles, w);
        eng.set_untimed(true);
        self.lap();
        self.phase = Phase::Functional;
    }

    /// Charge the CPU time since the last switch to the phase that is ending.
    fn lap(&mut self) {
        let now = thread_cpu_seconds();
        self.cpu[(self.phase != Phase::Functional) as usize] += now - self.cpu_at;
        self.cpu_at = now;
    }

    /// The windows measured, uncombined (after `stats`, which times the last phase).
    pub(crate) fn take(&mut self) -> Measured {
        Measured { windows: std::mem::take(&mut self.done), state: self.state.take().unwrap_or_default(), cpu: self.cpu }
    }

    /// Windows measured so far.
    pub fn measured(&self) -> usize {
        self.done.len()
    }

    /// The windows combined (`combine`), then the plan: `sampling.period`, `.window`,
    /// `.warming`, `.windows`, and `.instructions`, those the run went through after its
    /// warm-up (`covered`).
    pub fn stats(&mut self, covered: u64) -> Stats {
        self.lap();
        let mut s = combine(&self.done, self.state.as_ref().unwrap_or(&Stats::default()));
        s.int("sampling.period", self.plan.period);
        s.int("sampling.window", self.plan.window);
        s.int("sampling.warming", self.plan.warming);
        s.int("sampling.windows", self.done.len() as u64);
        s.int("sampling.instructions", covered);
        s.float("sim.functional_seconds", self.cpu[0]);
        s.float("sim.detailed_seconds", self.cpu[1]);
        s
    }
}

/// Student's t quantile for a two-sided 95% interval with `df` degrees of freedom.
pub fn t95(df: u64) -> f64 {
    use distrs::StudentsT;
    StudentsT::ppf(0.975, df.max(1) as f64)
}

/// Combine the windows' statistics (each the same keys in the same order) as the module
/// says; `state` is a statistics object taken right after a reset (its nonzero counts are
/// state). The intervals are appended as `ci95.<key>` when there are two windows or more.
pub fn combine(windows: &[Stats], state: &Stats) -> Stats {
    let mut out = Stats::default();
    let mut ci = Vec::new();
    let Some(first) = windows.first() else { return out };
    let n = windows.len() as f64;
    let t = t95(windows.len() as u64 - 1);
    for (j, (k, v)) in first.0.iter().enumerate() {
        let all = || windows.iter().map(move |w| &w.0[j].1);
        match v {
            Stat::Int(_) => {
                let is_state = matches!(state.get(k), Some(Stat::Int(v)) if *v != 0);
                let v = if is_state {
                    match windows.last().map(|w| &w.0[j].1) {
                        Some(Stat::Int(v)) => *v,
                        _ => 0,
                    }
                } else {
                    all().map(|s| if let Stat::Int(v) = s { *v } else { 0 }).sum()
                };
                out.int(k, v);
            }
            Stat::Rate(..) => {
                let parts: Vec<(u64, u64)> = all().map(|s| if let Stat::Rate(_, a, b) = s { (*a, *b) } else { (0, 0) }).collect();
                let (num, den) = parts.iter().fold((0u64, 0u64), |(x, y), (a, b)| (x + a, y + b));
                out.rate(k, num, den);
                let r = secmem_core::stats::ratio(num, den);
                let ss: f64 = parts.iter().map(|&(a, b)| (a as f64 - r * b as f64).powi(2)).sum();
                let mean_den = den as f64 / n;
                let half = if den > 0 { t * (ss / (n - 1.0) / n).sqrt() / mean_den } else { 0.0 };
                ci.push((k.clone(), half));
            }
            Stat::Float(_) => {
                let xs: Vec<f64> = all().map(|s| if let Stat::Float(v) = s { *v } else { 0.0 }).collect();
                let mean = xs.iter().sum::<f64>() / n;
                let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                out.float(k, mean);
                ci.push((k.clone(), t * (var / n).sqrt()));
            }
            Stat::Str(s) => out.str(k, s),
            Stat::Series(_) => out.series(k, all().flat_map(|s| if let Stat::Series(v) = s { v.clone() } else { vec![] }).collect()),
        }
    }
    for (k, half) in ci.into_iter().filter(|_| windows.len() > 1) {
        out.float(&format!("ci95.{}", k), half);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_t_matches_the_published_table() {
        // Two-sided 95% (t_0.975) from any table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2.
        for (df, t) in [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042), (100, 1.984), (1000, 1.962)] {
            assert!((t95(df) - t).abs() < 1e-3, "df {}: {} vs {}", df, t95(df), t);
        }
    }

    #[test]
    fn defaults_scale_with_the_run_and_bad_plans_say_why() {
        let s = Sampling::parse("", 1_000_000_000).unwrap();
        assert_eq!(s, Sampling { period: 1_000_000, window: DEFAULT_WINDOW, warming: DEFAULT_WARMING });
        let s = Sampling::parse("", 10_000_000).unwrap();
        assert_eq!(s.period, 50_000, "a tenth in detail at most");
        assert_eq!(Sampling::parse("100k:1k", 1_000_000).unwrap(), Sampling { period: 100_000, window: 1000, warming: DEFAULT_WARMING });
        assert_eq!(Sampling::parse("10000:1000:0", 50_000).unwrap().windows(50_000), 5);
        let e = |s: &str, n: u64| Sampling::parse(s, n).err().unwrap().0;
        assert_eq!(e("1M:x", 10_000_000), "--sample: the window W 'x' is not a count of instructions (e.g. 1M:2000:3000)");
        assert!(e("1:2:3:4", 10).contains("is not U:W:D"));
        assert_eq!(e("10k:0:0", 1_000_000), "--sample: the measured window W must be at least 1 instruction");
        assert_eq!(e("10k:8k:3k", 1_000_000), "--sample: W + D = 8000 + 3000 is more than the period U = 10000");
        assert!(e("1M", 1_500_000).contains("leaves 1 measured window in 1500000 instructions"), "{}", e("1M", 1_500_000));
    }

    #[test]
    fn phases_tile_each_period_with_the_measured_window_last() {
        let s = Sampling { period: 10, window: 3, warming: 2 };
        let p: String = (0..20)
            .map(|i| match s.phase(i) {
                Phase::Functional => 'f',
                Phase::Warming => 'w',
                Phase::Measured => 'M',
            })
            .collect();
        assert_eq!(p, "fffffwwMMMfffffwwMMM");
        // What is left of each instruction's phase, itself included (the run's countdown).
        let left: Vec<u64> = (0..10).map(|i| s.phase_left(i)).collect();
        assert_eq!(left, [5, 4, 3, 2, 1, 2, 1, 3, 2, 1]);
        let edge = Sampling { period: 5, window: 5, warming: 0 };
        assert_eq!((0..6).map(|i| edge.phase_left(i)).collect::<Vec<_>>(), [5, 4, 3, 2, 1, 5]);
    }

    #[test]
    fn windows_combine_as_ratio_estimates_sums_and_means() {
        let w = |instr: u64, cycles: u64, misses: u64, resident: u64, f: f64| {
            let mut s = Stats::default();
            s.int("instructions", instr);
            s.rate("ipc", instr, cycles);
            s.rate("l2.miss_rate", misses, 100);
            s.int("mem.resident_bytes", resident);
            s.float("x", f);
            s.str("integrity", "chash");
            s
        };
        let mut state = Stats::default();
        state.int("instructions", 0);
        state.int("mem.resident_bytes", 4096);
        let ws = [w(1000, 2000, 10, 4096, 1.0), w(1000, 1000, 30, 8192, 3.0), w(1000, 1000, 20, 8192, 2.0)];
        let c = combine(&ws, &state);
        assert_eq!(c.get("instructions"), Some(&Stat::Int(3000)));
        assert_eq!(c.get("mem.resident_bytes"), Some(&Stat::Int(8192)), "state: as last seen");
        assert_eq!(c.get_f64("ipc"), Some(0.75), "Σinstructions / Σcycles, not the mean of 0.5, 1, 1");
        assert_eq!(c.get_f64("l2.miss_rate"), Some(0.2));
        assert_eq!(c.get_f64("x"), Some(2.0));
        // Residuals of ipc: 1000 − 0.75·(2000, 1000, 1000) = (−500, 250, 250): s² = 375000/2,
        // SE = sqrt(s²/3) / mean cycles (4000/3).
        let se = (375_000.0f64 / 2.0 / 3.0).sqrt() / (4000.0 / 3.0);
        assert!((c.get_f64("ci95.ipc").unwrap() - 4.303 * se).abs() < 1e-3);
        // A mean's interval: values 1, 3, 2: s = 1, half-width t·1/√3.
        assert!((c.get_f64("ci95.x").unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-3);
        assert!(c.get("ci95.instructions").is_none() && c.get("ci95.integrity").is_none());
    }
}

#[cfg(test)]
mod runs {
    use super::*;
    use crate::{configure, run, run_sampled, RunOptions};
    use secmem_trace::workloads::builtin;
    use secmem_trace::{Instr, TraceSource};

    fn both(w: &str, i: &str, e: &str, sets: &[&str], n: u64, warmup: u64, plan: &str) -> (Stats, Stats) {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = configure("suh2003", Some(i), Some(e), &sets).unwrap();
        let o = RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 };
        let full = run(&p, &mut *builtin(w, 1).unwrap(), &o).unwrap();
        let plan = Sampling::parse(plan, n).unwrap();
        let s = run_sampled(&p, &mut *builtin(w, 1).unwrap(), &o, Some(plan)).unwrap();
        assert_eq!((&full.error, &s.error), (&None, &None));
        (full.stats, s.stats)
    }

    fn f(s: &Stats, k: &str) -> f64 {
        s.get_f64(k).unwrap_or_else(|| panic!("missing {}", k))
    }

    #[test]
    fn a_sampled_runs_interval_holds_the_full_runs_ipc() {
        for (w, i, e) in [("stream", "none", "none"), ("mix", "chash", "otp")] {
            let (full, s) = both(w, i, e, &[], 300_000, 50_000, "15k:1k:2k");
            assert_eq!(f(&s, "sampling.windows"), 20.0);
            assert_eq!(f(&s, "instructions"), 20_000.0, "the windows' instructions");
            let (ipc, half) = (f(&s, "ipc"), f(&s, "ci95.ipc"));
            assert!(half > 0.0 && half < 0.25 * ipc, "{} {}+{}: a useful interval, {} ± {}", w, i, e, ipc, half);
            assert!((ipc - f(&full, "ipc")).abs() <= half, "{} {}+{}: {} ± {} vs full {}", w, i, e, ipc, half, f(&full, "ipc"));
            for k in ["l2.miss_rate", "core.branch_mispredict_rate"] {
                assert!(s.get(&format!("ci95.{}", k)).is_some(), "{}", k);
            }
        }
    }

    #[test]
    fn windows_tiling_the_run_count_what_the_full_run_counts() {
        // U = W, no detailed warm-up: every measured instruction is in a window and the
        // warm-up is warmed functionally, so every count must be the full run's.
        let (full, s) = both("mix", "chash", "otp", &["l2.size=64KiB"], 100_000, 20_000, "10k:10k:0");
        for k in ["l2.accesses", "l2.misses", "l2.meta_misses", "l2.data_writebacks", "mem.read_bytes", "mem.write_bytes", "core.loads", "core.branches", "hash.ops"] {
            assert_eq!(f(&s, k), f(&full, k), "{}", k);
        }
        assert_eq!(f(&s, "l2.miss_rate"), f(&full, "l2.miss_rate"));
        // Cycles differ only by where counting starts (the full run: from the fetch front).
        let (c, fc) = (f(&s, "cycles"), f(&full, "cycles"));
        assert!((c - fc).abs() < 0.01 * fc, "{} vs {}", c, fc);
    }

    #[test]
    fn functional_warming_leaves_memory_and_metadata_as_detailed_execution_does() {
        // mix, whose start misses the L1D on every access, as the seeds' machine runs it; and
        // hot, which hits there, with page walks that read through the L1D (as ChampSim's).
        let p = configure("suh2003", Some("chash"), Some("otp"), &["l2.size=64KiB".into()]).unwrap();
        warming_ends_as_detailed_execution(&p, "mix", 60_000);
        let sets = ["l2.size=64KiB".to_string(), "tlb.walk=true".into()];
        let p = configure("suh2003", Some("chash"), Some("otp"), &sets).unwrap();
        warming_ends_as_detailed_execution(&p, "hot", 60_000);
    }

    const LEVEL_KEYS: [&str; 7] = ["l1d.accesses", "l1d.miss_rate", "l1i.accesses", "l1i.miss_rate", "tlb.dtlb_misses", "tlb.itlb_misses", "ptw.reads"];

    fn warming_ends_as_detailed_execution(p: &secmem_core::Params, workload: &str, instructions: u64) {
        let mut ends = Vec::new();
        for warm in [false, true] {
            let mut eng = Engine::new(p, 1).unwrap();
            let mut core = Core::new(p, &eng).unwrap();
            let mut src = builtin(workload, 1).unwrap();
            eng.set_untimed(warm);
            let mut ins = Instr::default();
            let mut n = 0;
            while n < instructions && src.next_into(&mut ins).unwrap() {
                if ins.external {
                    core.external(&ins, &mut eng).unwrap();
                    continue;
                }
                n += 1;
                if warm { core.warm(&ins, &mut eng) } else { core.step(&ins, &mut eng) }.unwrap();
            }
            let mut s = Stats::default();
            eng.stats(&mut s);
            let mem = eng.untrusted_ref();
            let bytes: Vec<u8> = mem
                .touched_pages(0, mem.size())
                .into_iter()
                .flat_map(|a| {
                    let mut b = vec![0u8; 4096];
                    mem.read(a, &mut b);
                    b
                })
                .collect();
            // The tree verifies every chunk of memory against the on-chip root.
            let checked = eng.check(core.now()).unwrap();
            // Every level's and TLB's accesses and misses: warming's shortcuts for the page
            // and line it touched last (`warm::Recent`) must hit and miss where detail does.
            let mut c = Stats::default();
            core.stats(&mut c);
            let levels: Vec<Option<f64>> = LEVEL_KEYS.iter().map(|k| c.get_f64(k)).collect();
            ends.push((bytes, s.get_f64("l2.misses"), s.get_f64("otp.writes"), s.get_f64("otp.timer"), checked, levels));
        }
        assert!(ends[0].1 > Some(1000.0), "{}: the L2 must miss and write back", workload);
        let dtlb_misses = ends[0].5[LEVEL_KEYS.iter().position(|&k| k == "tlb.dtlb_misses").unwrap()];
        assert!(dtlb_misses > Some(10.0), "{}: the D-TLB must miss: {:?}", workload, ends[0].5);
        assert!(ends[0] == ends[1], "{}: untrusted memory, misses, counters or checked chunks differ: {:?} vs {:?}", workload, &ends[0].5, &ends[1].5);
    }

    #[test]
    fn a_plan_that_does_not_fit_the_run_is_refused() {
        let p = configure("suh2003", None, None, &[]).unwrap();
        let o = RunOptions { instructions: 10_000, warmup: 0, seed: 1, progress: false, interval: 0 };
        let plan = Sampling { period: 8_000, window: 1_000, warming: 1_000 };
        let e = run_sampled(&p, &mut *builtin("hot", 1).unwrap(), &o, Some(plan)).err().unwrap().0;
        assert!(e.starts_with("--sample: a period of 8000 leaves 1 measured window"), "{}", e);
    }
}
