//! A sampled run from per-window checkpoints (`secmem run --sample U:W:D --checkpointed B`,
//! issue 35). `--sample` reads every instruction of the input and warms the machine over all
//! of them; here each of the plan's windows is run on its own from its checkpoint
//! (`secmem_trace::checkpoint`: the memory image its records touch, then B + D + W records):
//! a cold machine warmed functionally over the B instructions before the window, then D in
//! detail unmeasured and W measured — the same phases, on the same instructions, as the
//! window of a `--sample` run, but with the warming bounded to B. The instructions between
//! windows are never read again, and the windows are independent (any subset runs anywhere:
//! Dask tasks, `secmem/windows.py`).
//!
//! The windows combine as `--sample`'s do (`sample::combine`: ratio estimators with their
//! 95% intervals). What the bounded warming costs in accuracy is not in the interval: it is
//! measured against the same plan with full warming (`--check-warmup`) and against full
//! detail (docs/sampling.md).

use crate::run::{run_inner, RunOptions, RunResult};
use crate::sample::{combine, Measured, Sampling};
use secmem_core::stats::Stats;
use secmem_core::{ConfigError, Params};
use secmem_trace::TraceSource;
use std::time::Instant;

/// The first instruction of the input each window's checkpoint holds, for a run measuring
/// `instructions` after `warmup` sampled by `plan` with B = `warm` instructions of
/// functional warming before each window's detail: B before the D + W of the window. Refused
/// with one line when B does not fit between windows (they would overlap) or the plan does
/// not fit the run.
pub fn starts(plan: &Sampling, warmup: u64, instructions: u64, warm: u64) -> Result<Vec<u64>, ConfigError> {
    plan.check(instructions)?;
    let between = plan.period - plan.window - plan.warming;
    if warm > between {
        return Err(ConfigError(format!(
            "--checkpointed: B = {} is more than the U - W - D = {} instructions warmed between windows (lower B or raise U)",
            warm, between
        )));
    }
    Ok((0..plan.windows(instructions)).map(|j| warmup + j * plan.period + between - warm).collect())
}

/// Instructions each checkpoint holds: B + D + W.
pub fn length(plan: &Sampling, warm: u64) -> u64 {
    warm + plan.warming + plan.window
}

/// The windows of a `--sample` run of `src` with full warming, uncombined: each window's
/// statistics, to compare window by window with the same windows run from checkpoints
/// (`run_windows`) and find where bounded warming's error comes from.
pub fn sampled_windows(p: &Params, src: &mut dyn TraceSource, o: &RunOptions, plan: Sampling) -> Result<Vec<Stats>, ConfigError> {
    let (r, m) = run_inner(p, src, o, Some(plan), Some(0))?;
    if let Some(e) = r.error {
        return Err(ConfigError(e));
    }
    Ok(m.map(|m| m.windows).unwrap_or_default())
}

/// Opens window j's checkpoint: its source, and the prewarm loads it begins with. Called
/// from the threads that run the windows.
pub type Open<'a> = dyn Fn(usize) -> Result<(Box<dyn TraceSource>, u64), String> + Sync + 'a;

/// A window's checkpoint at `path`, beginning with `prewarm` loads, as `run_windows` reads
/// one: in batches of packed slots on the window's own thread (`ReadInline`; the windows
/// already fill every core: docs/speed.md, sixth pass).
pub fn open_window(path: impl AsRef<std::path::Path>, prewarm: u64) -> Result<(Box<dyn TraceSource>, u64), String> {
    secmem_trace::NativeReader::open(path).map(|r| (Box::new(secmem_trace::ReadInline::new(r)) as Box<dyn TraceSource>, prewarm)).map_err(|e| e.to_string())
}

/// Run `count` windows from their checkpoints (`open(j)`: window j's, and the prewarm loads
/// it begins with), each on a machine of its own, on up to `threads` threads of this process,
/// and combine them; also each window's own statistics. `plan` is the whole run's (its W and
/// D are each window's); `warm` is B. The windows are independent, so the statistics are the
/// same whatever `threads` is (but for the host's times): they are put together in window
/// order. A window that fails ends the run with the error, keeping the windows before it; so
/// does a stop request (SIGINT/SIGTERM), between windows.
pub fn run_windows(
    p: &Params,
    open: &Open<'_>,
    count: usize,
    plan: Sampling,
    warm: u64,
    seed: u64,
    name: &str,
    threads: usize,
) -> Result<(RunResult, Vec<Stats>), ConfigError> {
    if plan.window == 0 {
        return Err(ConfigError("--sample: the measured window W must be at least 1 instruction".into()));
    }
    let wall = Instant::now();
    // A window's image is memory from before the window: it is set up untimed through the
    // schemes as each page comes into use (`pages.image=lazy`), not written through the
    // caches and flushed. Exact either way (every load reads the input's bytes); lazy costs
    // 6% less of a window (docs/sampling.md) and holds no traffic for fetch to wait out.
    let mut q = p.clone();
    q.set("pages.image", "lazy")?;
    let p = &q;
    let one = Sampling { period: plan.window + plan.warming, window: plan.window, warming: plan.warming };
    let o = RunOptions { instructions: one.period, warmup: warm, seed, progress: false, interval: 0 };
    let window = |j: usize| -> Result<Result<Measured, String>, ConfigError> {
        if let Some((e, _)) = crate::run::interruption(j as u64, "windows") {
            return Ok(Err(e));
        }
        let (mut src, prewarm) = match open(j) {
            Ok(x) => x,
            Err(e) => return Ok(Err(format!("checkpoint of window {}: {}", j, e))),
        };
        let o = RunOptions { warmup: prewarm + warm, ..o.clone() };
        let (r, m) = run_inner(p, &mut *src, &o, Some(one), Some(prewarm))?;
        Ok(match (r.error, m.filter(|m| m.windows.len() == 1)) {
            (Some(e), _) => Err(format!("window {} from its checkpoint: {}", j, e)),
            (None, None) => Err(format!("window {} from its checkpoint measured nothing", j)),
            (None, Some(m)) => Ok(m),
        })
    };
    // Each thread takes the next window not yet taken; none is taken after one has failed
    // (the run keeps the windows before the first failure, as on one thread).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let work = || {
        use std::sync::atomic::Ordering::Relaxed;
        let mut mine = Vec::new();
        loop {
            let j = next.fetch_add(1, Relaxed);
            if j >= count || j > failed.load(Relaxed) {
                return Ok(mine);
            }
            let w = window(j)?;
            if w.is_err() {
                failed.fetch_min(j, Relaxed);
            }
            mine.push((j, w));
        }
    };
    let threads = threads.clamp(1, count.max(1));
    let mut all: Vec<(usize, Result<Measured, String>)> = if threads == 1 {
        work()?
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            let mut all = Vec::new();
            for h in hs {
                all.extend(h.join().expect("a window's thread panicked")?);
            }
            Ok::<_, ConfigError>(all)
        })?
    };
    all.sort_by_key(|w| w.0);
    let (mut done, mut state, mut cpu, mut error) = (Vec::with_capacity(count), None, [0.0f64; 2], None);
    for (_, w) in all {
        match w {
            Ok(mut m) => {
                cpu[0] += m.cpu[0];
                cpu[1] += m.cpu[1];
                state.get_or_insert(m.state);
                done.append(&mut m.windows);
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let c = combine(&done, state.as_ref().unwrap_or(&Stats::default()));
    // In the order of a sampled run's statistics (`run::sampled_stats`).
    let (head, rest) = c.0.split_at(c.0.len().min(3));
    let mut s = Stats(head.to_vec());
    s.str("workload", name);
    s.int("warmup", warm);
    s.int("seed", seed);
    s.0.extend(rest.iter().cloned());
    s.int("sampling.period", plan.period);
    s.int("sampling.window", plan.window);
    s.int("sampling.warming", plan.warming);
    s.int("sampling.windows", done.len() as u64);
    s.int("sampling.instructions", done.len() as u64 * plan.period);
    s.int("sampling.checkpointed", warm);
    s.float("sim.functional_seconds", cpu[0]);
    s.float("sim.detailed_seconds", cpu[1]);
    s.float("sim.wall_seconds", wall.elapsed().as_secs_f64());
    if done.is_empty() && error.is_none() {
        error = Some("no window to run".into());
    }
    Ok((RunResult { stats: s, error }, done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{configure, run};
    use secmem_trace::checkpoint::{write_windows, write_windows_as, DEFAULT_PREWARM};
    use secmem_trace::{workloads, Consistent, NativeReader, Skip};
    use std::path::PathBuf;

    fn f(s: &Stats, k: &str) -> f64 {
        s.get_f64(k).unwrap_or_else(|| panic!("no {k}"))
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("secmem-checkpointed-{}-{}", name, std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Window `j`'s checkpoint in `d`.
    fn window(d: &std::path::Path, j: usize) -> PathBuf {
        d.join(format!("w{j}.smt"))
    }

    /// The checkpoints of built-in `w` starting at `st` for the plan and B = `warm`, with the
    /// default prewarm, written into `d` (`window`): each window's prewarm loads.
    fn cut(w: &str, d: &std::path::Path, st: &[u64], plan: &Sampling, warm: u64) -> Vec<u64> {
        let done = write_windows(&mut *workloads::builtin(w, 1).unwrap(), st, length(plan, warm), DEFAULT_PREWARM, &|j| window(d, j), false).unwrap();
        assert_eq!(done.instructions.len(), st.len());
        done.prewarm
    }

    /// The checkpoint at `path` read record by record by its reader (what `open_window`'s
    /// batches are checked against), beginning with `prewarm` loads.
    fn open_at(path: PathBuf, prewarm: u64) -> Result<(Box<dyn TraceSource>, u64), String> {
        NativeReader::open(path).map(|r| (Box::new(r) as Box<dyn TraceSource>, prewarm)).map_err(|e| e.to_string())
    }

    /// A run's statistics without the host's times (`sim.*`).
    fn simulated(s: &Stats) -> Vec<(String, secmem_core::stats::Stat)> {
        s.0.iter().filter(|(k, _)| !k.starts_with("sim.")).cloned().collect()
    }

    /// Checkpoints of `w` for the plan, in a fresh directory; the run from them.
    fn from_checkpoints(p: &Params, w: &str, warmup: u64, n: u64, plan: Sampling, warm: u64) -> Stats {
        let d = dir(w);
        let st = starts(&plan, warmup, n, warm).unwrap();
        let prewarm = cut(w, &d, &st, &plan, warm);
        let open = |j: usize| open_at(window(&d, j), prewarm[j]);
        let (r, _) = run_windows(p, &open, st.len(), plan, warm, 1, w, 1).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert!(r.error.is_none(), "{:?}", r.error);
        r.stats
    }

    /// Every load of every window finds in simulated memory the bytes the trace says, as in
    /// the full run (which finds them too): the image holds what full detail would read.
    /// And the full run's IPC lies inside the interval, on three workloads. (Not on stream
    /// at every B: at B = 30 k its 40 windows measured +5.3% with an interval of ±2.7%;
    /// docs/sampling.md.)
    #[test]
    fn windows_from_checkpoints_read_full_details_bytes_and_hold_the_full_runs_ipc() {
        let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
        for (w, n) in [("hot", 2_000_000u64), ("mix", 2_000_000), ("chase", 2_000_000)] {
            let plan = Sampling { period: 50_000, window: 2_000, warming: 3_000 };
            let o = RunOptions { instructions: n, warmup: 200_000, seed: 1, progress: false, interval: 0 };
            let full = run(&p, &mut *workloads::builtin(w, 1).unwrap(), &o).unwrap().stats;
            let s = from_checkpoints(&p, w, o.warmup, n, plan, 30_000);
            assert_eq!(f(&s, "sampling.windows"), 40.0);
            assert_eq!(f(&s, "instructions"), 40.0 * 2_000.0);
            assert_eq!(f(&full, "trace.value_mismatches"), 0.0, "{w}: full run");
            assert_eq!(f(&s, "trace.value_mismatches"), 0.0, "{w}: every window's loads find full detail's bytes");
            let (ipc, half, full_ipc) = (f(&s, "ipc"), f(&s, "ci95.ipc"), f(&full, "ipc"));
            assert!(half > 0.0, "{w}");
            assert!((ipc - full_ipc).abs() <= half, "{w}: full IPC {full_ipc} outside {ipc} ± {half}");
        }
    }

    /// Windows run on several threads give, window by window and combined, the statistics
    /// one thread gives (host times aside); a window that fails ends the run as on one
    /// thread: its error, and the windows before it.
    #[test]
    fn windows_on_several_threads_give_what_one_thread_gives() {
        let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
        let plan = Sampling { period: 50_000, window: 2_000, warming: 3_000 };
        let (warmup, n, warm) = (100_000u64, 500_000u64, 20_000u64);
        let st = starts(&plan, warmup, n, warm).unwrap();
        let d = dir("threads");
        let prewarm = cut("mix", &d, &st, &plan, warm);
        let open = |j: usize| open_at(window(&d, j), prewarm[j]);
        let keep = simulated;
        let (one, each1) = run_windows(&p, &open, st.len(), plan, warm, 1, "mix", 1).unwrap();
        assert!(one.error.is_none(), "{:?}", one.error);
        assert_eq!(each1.len(), st.len());
        for t in [2, 3, 64] {
            let (r, each) = run_windows(&p, &open, st.len(), plan, warm, 1, "mix", t).unwrap();
            assert!(r.error.is_none(), "{:?}", r.error);
            assert!(keep(&r.stats) == keep(&one.stats), "{t} threads: the combined statistics differ");
            assert_eq!(each.len(), each1.len());
            for (j, (a, b)) in each.iter().zip(&each1).enumerate() {
                assert!(keep(a) == keep(b), "{t} threads: window {j} differs");
            }
        }
        // Read in batches of packed slots (`open_window`, as `secmem run --checkpointed` opens
        // them), its prewarm taken before the first slice: the same windows.
        let inline = |j: usize| super::open_window(window(&d, j), prewarm[j]);
        for t in [1, 3] {
            let (r, each) = run_windows(&p, &inline, st.len(), plan, warm, 1, "mix", t).unwrap();
            assert!(r.error.is_none(), "{:?}", r.error);
            assert!(keep(&r.stats) == keep(&one.stats), "inline, {t} threads: the combined statistics differ");
            for (j, (a, b)) in each.iter().zip(&each1).enumerate() {
                assert!(keep(a) == keep(b), "inline, {t} threads: window {j} differs");
            }
        }
        // Window 4's checkpoint is gone: windows 0-3 are kept, whatever the threads.
        let gone = |j: usize| if j == 4 { Err("no such file".to_string()) } else { open(j) };
        for t in [1, 3] {
            let (r, each) = run_windows(&p, &gone, st.len(), plan, warm, 1, "mix", t).unwrap();
            let e = r.error.expect("window 4 fails");
            assert!(e.starts_with("checkpoint of window 4: no such file"), "{t} threads: {e}");
            assert_eq!(each.len(), 4, "{t} threads");
            assert_eq!(f(&r.stats, "sampling.windows"), 4.0, "{t} threads");
            for (a, b) in each.iter().zip(&each1) {
                assert!(keep(a) == keep(b), "{t} threads");
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Each window's pages keep the frames a run of the whole input gives them: in the full
    /// run stream's three arrays, laid out in the order they are first touched, thrash the
    /// L1D's sets (miss rate 1.0); mapped in each window's own order they missed a quarter
    /// as often (0.25, and the L2 0.50 against 0.13). The windows' miss rates are the full run's.
    #[test]
    fn windows_from_checkpoints_keep_the_whole_runs_page_layout() {
        let p = configure("suh2003", Some("none"), Some("none"), &[]).unwrap();
        let plan = Sampling { period: 50_000, window: 2_000, warming: 3_000 };
        let o = RunOptions { instructions: 1_000_000, warmup: 200_000, seed: 1, progress: false, interval: 0 };
        let full = run(&p, &mut *workloads::builtin("stream", 1).unwrap(), &o).unwrap().stats;
        let s = from_checkpoints(&p, "stream", o.warmup, o.instructions, plan, 30_000);
        for k in ["l1d.miss_rate", "l2.miss_rate"] {
            let (a, b) = (f(&s, k), f(&full, k));
            assert!((a - b).abs() < 0.05, "{k}: windows {a}, full run {b}");
        }
    }

    /// One window from its checkpoint (without prewarm) is the run of the same instructions
    /// after `--skip` with the same warming (B functional, D detailed, W measured), both
    /// images flushed before the first instruction: the same instructions and accesses, every
    /// load finding the trace's bytes, and the IPC within 1% — what may differ is where code
    /// pages land (the checkpoint maps every page in the input's first-touch order, code and
    /// data; the skip's image maps the data pages first, code as it is fetched).
    #[test]
    fn one_window_from_its_checkpoint_is_the_run_after_skip_with_the_same_warming() {
        let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
        let (warm, plan) = (20_000u64, Sampling { period: 100_000, window: 2_000, warming: 3_000 });
        let st = starts(&plan, 0, 200_000, warm).unwrap();
        let d = dir("one");
        // No prewarm: the run after --skip has none either.
        write_windows(&mut *workloads::builtin("hot", 1).unwrap(), &st, length(&plan, warm), 0, &|j| window(&d, j), false).unwrap();
        let open = |j: usize| open_at(window(&d, j + 1), 0);
        let (ck, _) = run_windows(&p, &open, 1, plan, warm, 1, "hot", 1).unwrap();
        assert!(ck.error.is_none(), "{:?}", ck.error);
        // The same instructions after --skip: warm-up B, then one period of D + W.
        let one = Sampling { period: 5_000, window: 2_000, warming: 3_000 };
        let o = RunOptions { instructions: 5_000, warmup: warm, seed: 1, progress: false, interval: 0 };
        let mut src = Consistent::new(Skip::new(workloads::builtin("hot", 1).unwrap(), st[1]));
        let (sk, _) = run_inner(&p, &mut src, &o, Some(one), Some(0)).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        let (a, b) = (&ck.stats, &sk.stats);
        for k in ["instructions", "l1d.accesses", "core.loads", "core.stores"] {
            assert_eq!(f(a, k), f(b, k), "{k}");
        }
        assert_eq!(f(a, "trace.value_mismatches"), 0.0);
        assert_eq!(f(b, "trace.value_mismatches"), 0.0);
        let (x, y) = (f(a, "ipc"), f(b, "ipc"));
        // Measured: 0.7025 against 0.7015 (0.14%).
        assert!((x - y).abs() / y < 0.01, "checkpoint {x} against skip {y}");
    }

    /// Window `path`'s machine after its `prewarm` records, as `run_windows` leaves it then:
    /// the image set up and flushed, the prewarm run (`Core::prewarm`) under functional
    /// warming's frozen engines.
    fn prewarmed(p: &Params, path: &std::path::Path, prewarm: u64) -> (crate::ooo::Core, secmem_core::Engine) {
        let mut q = p.clone();
        q.set("pages.image", "lazy").unwrap();
        let mut eng = secmem_core::Engine::new(&q, 1).unwrap();
        let mut core = crate::ooo::Core::new(&q, &eng).unwrap();
        core.pm.set_order(&q, 1).unwrap();
        eng.set_untimed(true);
        let (mut src, mut ins, mut n) = (NativeReader::open(path).unwrap(), secmem_trace::Instr::default(), 0u64);
        // The prewarm is packed, before the image (`Prewarm`).
        let mut packed = None;
        while src.next_into(&mut ins).unwrap() {
            packed = packed.or_else(|| src.take_prewarm());
            if ins.external {
                core.external(&ins, &mut eng).unwrap();
                continue;
            }
            core.settle_image(&mut eng).unwrap();
            break;
        }
        let mut p = secmem_trace::checkpoint::Prewarm::new(packed.expect("a packed prewarm")).unwrap();
        while let Some(ins) = p.next().unwrap() {
            n += 1;
            if n & 0xFF == 0 {
                core.poll(&mut eng, n).unwrap();
            }
            core.prewarm(ins, &mut eng).unwrap();
        }
        assert_eq!(n, prewarm);
        (core, eng)
    }

    /// A window's prewarm taken as state (`sampling.prewarm=install`) leaves its machine as
    /// the checked replay does: the same data and tree lines in the L2, in the same recency
    /// order and as dirty, the same bytes in every data line, and the same L1, TLB and page
    /// walk counts (the core's path is the same; only the protected level's checks and
    /// write-backs are left out), with a tenth of the checks (those left are the image's
    /// set-up). Then both run the windows alike.
    #[test]
    fn a_windows_prewarm_installed_as_state_leaves_the_machine_the_checked_replay_leaves() {
        let plan = Sampling { period: 200_000, window: 2_000, warming: 3_000 };
        let (warmup, n, warm) = (400_000u64, 400_000u64, 30_000u64);
        let st = starts(&plan, warmup, n, warm).unwrap();
        let d = dir("install");
        let prewarm = cut("mix", &d, &st, &plan, warm);
        let mode = |m: &str| configure("suh2003", Some("chash"), Some("otp"), &[format!("sampling.prewarm={m}")]).unwrap();
        for j in 0..st.len() {
            let (cr, er) = prewarmed(&mode("replay"), &window(&d, j), prewarm[j]);
            let (ci, ei) = prewarmed(&mode("install"), &window(&d, j), prewarm[j]);
            let (r, i) = (er.machine().l2.lines_by_recency(), ei.machine().l2.lines_by_recency());
            assert!(i.iter().filter(|l| l.1).count() > 1000 && i.iter().filter(|l| l.2).count() > 100, "window {j}: tree lines and dirty lines");
            assert_eq!(r.len(), i.len(), "window {j}");
            assert!(r == i, "window {j}: the same lines, order and dirtiness");
            for &(a, meta, _) in &i {
                if !meta {
                    assert_eq!(ei.cached(a, 64), er.cached(a, 64), "window {j}: data line {a:#x}");
                }
            }
            let (mut sr, mut si) = (Stats::default(), Stats::default());
            cr.stats(&mut sr);
            ci.stats(&mut si);
            assert_eq!(sr.0, si.0, "window {j}: the core's counts");
            let checks = |e: &secmem_core::Engine| {
                let mut s = Stats::default();
                e.stats(&mut s);
                f(&s, "chash.checks")
            };
            // The installed window's checks are its image's set-up (measured: 2,523 against 24,430).
            assert!(checks(&ei) * 5.0 < checks(&er), "window {j}: {} checks installed, {} replayed", checks(&ei), checks(&er));
        }
        let open = |j: usize| open_at(window(&d, j), prewarm[j]);
        let (ri, _) = run_windows(&mode("install"), &open, st.len(), plan, warm, 1, "mix", 1).unwrap();
        let (rr, _) = run_windows(&mode("replay"), &open, st.len(), plan, warm, 1, "mix", 1).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(f(&ri.stats, "trace.value_mismatches"), 0.0);
        let (a, b) = (f(&ri.stats, "ipc"), f(&rr.stats, "ipc"));
        assert!((a - b).abs() / b < 0.002, "installed {a} against replayed {b}");
    }

    /// A window's prewarm packed into one record (`Prewarm`, the default since session 11)
    /// gives every window the statistics the same prewarm written as instruction records
    /// gives, to the last digit (host times aside), under both `sampling.prewarm` modes:
    /// the same `Core::prewarm` calls, counts and polls, without the parser's work.
    #[test]
    fn a_packed_prewarm_gives_every_window_what_its_records_give() {
        let plan = Sampling { period: 100_000, window: 2_000, warming: 3_000 };
        let (warmup, n, warm) = (300_000u64, 600_000u64, 30_000u64);
        for w in ["mix", "hot"] {
            let st = starts(&plan, warmup, n, warm).unwrap();
            let d = dir(&format!("packed-{w}"));
            let dd = &d;
            let path = |packed: bool| move |j: usize| dd.join(format!("w{j}-{packed}.smt"));
            let (pp, pr) = (path(true), path(false));
            let a = write_windows_as(&mut *workloads::builtin(w, 1).unwrap(), &st, length(&plan, warm), DEFAULT_PREWARM, &pp, false, true).unwrap();
            let b = write_windows_as(&mut *workloads::builtin(w, 1).unwrap(), &st, length(&plan, warm), DEFAULT_PREWARM, &pr, false, false).unwrap();
            assert_eq!(a, b, "{w}: the same windows written");
            assert!(a.prewarm.iter().all(|&k| k > 30_000), "{w}: {:?}", a.prewarm);
            for mode in ["install", "replay"] {
                let p = configure("suh2003", Some("chash"), Some("otp"), &[format!("sampling.prewarm={mode}")]).unwrap();
                let run = |path: &(dyn Fn(usize) -> PathBuf + Sync)| {
                    let open = |j: usize| open_at(path(j), a.prewarm[j]);
                    let (r, each) = run_windows(&p, &open, st.len(), plan, warm, 1, w, 1).unwrap();
                    assert!(r.error.is_none(), "{:?}", r.error);
                    each
                };
                let (x, y) = (run(&pp), run(&pr));
                assert_eq!(x.len(), st.len());
                assert_eq!(x.len(), y.len());
                for (j, (x, y)) in x.iter().zip(&y).enumerate() {
                    assert!(simulated(x) == simulated(y), "{w} {mode}: window {j} differs");
                }
            }
            // A prewarm that does not hold the records the pass counted: one line, no run.
            let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
            let open = |j: usize| open_at(pp(j), a.prewarm[j] + 1);
            let e = run_windows(&p, &open, 1, plan, warm, 1, w, 1).unwrap().0.error.unwrap();
            assert!(e.contains("prewarm holds") && !e.contains('\n'), "{e}");
            std::fs::remove_dir_all(&d).unwrap();
        }
    }

    #[test]
    fn a_warming_longer_than_the_gap_between_windows_is_refused_with_one_line() {
        let plan = Sampling { period: 10_000, window: 2_000, warming: 3_000 };
        let e = starts(&plan, 0, 100_000, 5_001).unwrap_err().0;
        assert!(e.starts_with("--checkpointed:") && e.contains("5000") && !e.contains('\n'), "{e}");
        assert_eq!(starts(&plan, 100, 100_000, 5_000).unwrap()[..2], [100, 10_100]);
        assert!(starts(&plan, 0, 15_000, 0).unwrap_err().0.contains("at least 2"));
    }
}
