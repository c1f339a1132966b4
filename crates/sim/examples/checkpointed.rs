//! A sampled run from per-window checkpoints against full detail (docs/sampling.md,
//! "Sampling from checkpoints"): for an input, the checkpoint pass (once per B), then for each
//! scheme pair the windows run from the checkpoints, and with `--full` the full detailed run;
//! IPC, interval, error, and host CPU seconds of each. Everything runs on this thread (a
//! trace file is decoded here, not on a read-ahead thread), so the CPU times count decoding.
//!
//! `cargo run --release --example checkpointed INPUT N [--warmup W] [--plan U:W:D]
//!  [--warm B1,B2] [--prewarm LINES] [-s i+e,…] [--set k=v,…] [--modes replay,install]
//!  [--select STEP:COUNT] [--dir DIR] [--full] [--compare]` (INPUT: a built-in, or a trace file if
//! it has a `/`; DIR: where checkpoints go, default a temporary directory, removed after).
//! `--modes` runs the windows once for each `sampling.prewarm` given, one after the other
//! (interleaved with each other in time, for CPU comparisons); `--select STEP:COUNT` runs
//! only windows 0, STEP, 2·STEP, … (COUNT of them: a profile of a few windows).
//! With `--dir`, a second run over the same DIR, input, plan and B reuses the pass made there.
//! `--compare` also runs the plan with full warming (`--sample`) and compares the windows
//! one by one: the warming error (Σ cycles against Σ cycles of the same windows) and the
//! counts that differ most between them, to show where bounded warming's error comes from.

use secmem_sim::checkpointed::{length, run_windows, sampled_windows, starts};
use secmem_sim::{configure, run, RunOptions, Sampling};
use secmem_trace::checkpoint::{write_windows, DEFAULT_PREWARM};
use secmem_trace::cputime::thread_cpu_seconds as cpu;
use secmem_trace::{NativeReader, TraceSource};

fn source(w: &str) -> Box<dyn TraceSource> {
    if w.contains('/') {
        Box::new(NativeReader::open(w).unwrap_or_else(|e| panic!("{}: {}", w, e)))
    } else {
        secmem_trace::workloads::builtin(w, 1).unwrap()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let input = args.first().cloned().unwrap_or("hot".into());
    let n = args.get(1).and_then(|s| secmem_core::params::parse_count(s)).unwrap_or(10_000_000);
    let warmup = opt("--warmup").and_then(|s| secmem_core::params::parse_count(&s)).unwrap_or(n / 10);
    let plan = Sampling::parse(&opt("--plan").unwrap_or_default(), n).unwrap_or_else(|e| panic!("{}", e));
    let warms: Vec<u64> = opt("--warm").unwrap_or("100k".into()).split(',').map(|s| secmem_core::params::parse_count(s).expect("--warm B1,B2")).collect();
    let schemes = opt("-s").unwrap_or("chash+otp".into());
    let full = args.iter().any(|a| a == "--full");
    let compare = args.iter().any(|a| a == "--compare");
    let prewarm = opt("--prewarm").map(|s| secmem_core::params::parse_count(&s).expect("--prewarm LINES") as usize).unwrap_or(DEFAULT_PREWARM);
    let sets: Vec<String> = opt("--set").map(|s| s.split(',').map(String::from).collect()).unwrap_or_default();
    let modes: Vec<Option<String>> = match opt("--modes") {
        Some(m) => m.split(',').map(|x| Some(x.to_string())).collect(),
        None => vec![None],
    };
    let select = opt("--select").map(|s| {
        let (a, b) = s.split_once(':').expect("--select STEP:COUNT");
        (a.parse::<usize>().expect("STEP"), b.parse::<usize>().expect("COUNT"))
    });
    let keep = opt("--dir");
    let dir = keep.clone().map(std::path::PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join(format!("secmem-checkpointed-{}", std::process::id())));
    let name = input.rsplit('/').next().unwrap_or(&input).to_string();
    println!("{} instructions after {} of warm-up; plan U:W:D = {}:{}:{}", n, warmup, plan.period, plan.window, plan.warming);
    println!(
        "{:<12} {:<10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>4} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "input", "schemes", "B", "full IPC", "sampled", "±95%", "error", "in?", "image MB", "pass s", "full s", "windows s", "speedup", "w/ pass"
    );
    let mut fulls = std::collections::HashMap::new();
    let mut fully_warmed = std::collections::HashMap::new();
    for &b in &warms {
        let st = starts(&plan, warmup, n, b).unwrap_or_else(|e| panic!("{}", e));
        let d = dir.join(format!("{}-{}", name, b));
        std::fs::create_dir_all(&d).unwrap();
        let path = |j: usize| d.join(format!("w{:05}.smt", j));
        // With --dir, a pass already made there (its counts in `made`) is reused: the windows
        // alone can then be timed or profiled (callgrind) without the pass.
        let made = d.join("made");
        let t = cpu();
        let done = match std::fs::read_to_string(&made).ok().filter(|_| keep.is_some()) {
            Some(s) => {
                let v: Vec<Vec<u64>> = s.lines().map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect()).collect();
                secmem_trace::checkpoint::Written { instructions: v[0].clone(), prewarm: v[1].clone(), image_bytes: v[2][0], read: v[2][1] }
            }
            None => {
                let done = write_windows(&mut *source(&input), &st, length(&plan, b), prewarm, &path, false).unwrap();
                let line = |v: &[u64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ");
                let text = format!("{}\n{}\n{} {}\n", line(&done.instructions), line(&done.prewarm), done.image_bytes, done.read);
                std::fs::write(&made, text).unwrap();
                done
            }
        };
        let pass = cpu() - t;
        for (pair, mode) in schemes.split(',').flat_map(|p| modes.iter().map(move |m| (p, m.clone()))) {
            let (i, e) = pair.split_once('+').expect("schemes as i+e");
            let mut extra = sets.clone();
            extra.extend(mode.iter().map(|m| format!("sampling.prewarm={}", m)));
            let p = configure("suh2003", Some(i), Some(e), &extra).unwrap_or_else(|e| panic!("{}", e));
            let label = match &mode {
                Some(m) => format!("{}/{}", pair, m),
                None => pair.to_string(),
            };
            let (full_ipc, tf, fs) = fulls
                .entry(pair.to_string())
                .or_insert_with(|| {
                    if !full {
                        return (f64::NAN, f64::NAN, secmem_core::stats::Stats::default());
                    }
                    let o = RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 };
                    let t = cpu();
                    let r = run(&p, &mut *source(&input), &o).unwrap();
                    assert!(r.error.is_none(), "{:?}", r.error);
                    (r.stats.get_f64("ipc").unwrap(), cpu() - t, r.stats)
                })
                .clone();
            let (step, count) = select.unwrap_or((1, done.instructions.len()));
            let count = count.min(done.instructions.len().div_ceil(step));
            let open = |j: usize| secmem_sim::checkpointed::open_window(path(j * step), done.prewarm[j * step]);
            let t = cpu();
            let (r, each) = run_windows(&p, &open, count, plan, b, 1, &name, 1).unwrap();
            let tw = cpu() - t;
            assert!(r.error.is_none(), "{:?}", r.error);
            let g = |k: &str| r.stats.get_f64(k).unwrap_or(f64::NAN);
            assert_eq!(g("trace.value_mismatches"), 0.0, "every window's loads find the input's bytes");
            let err = (g("ipc") - full_ipc) / full_ipc * 100.0;
            println!(
                "{:<12} {:<10} {:>8} {:>8.4} {:>8.4} {:>8.4} {:>6.2}% {:>4} {:>9.1} {:>9.2} {:>8.2} {:>8.2} {:>7.1}x {:>7.1}x",
                name,
                label,
                b,
                full_ipc,
                g("ipc"),
                g("ci95.ipc"),
                err,
                if !full { "-" } else if (g("ipc") - full_ipc).abs() <= g("ci95.ipc") { "yes" } else { "NO" },
                done.image_bytes as f64 / 1e6,
                pass,
                tf,
                tw,
                tf / tw,
                tf / (tw + pass),
            );
            // Where a difference comes from: the rates of both runs.
            let rates = ["l1d.miss_rate", "l2.miss_rate", "l2.meta_miss_rate", "core.branch_mispredict_rate"];
            let line = |s: &secmem_core::stats::Stats| rates.iter().map(|k| format!("{}={:.4}", k, s.get_f64(k).unwrap_or(f64::NAN))).collect::<Vec<_>>().join(" ");
            println!("    sampled {}\n    full    {}", line(&r.stats), line(&fs));
            if compare && select.is_none() {
                // The same plan with full warming: once per scheme pair, whatever B.
                let full_warm = fully_warmed.entry(pair.to_string()).or_insert_with(|| {
                    let o = RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 };
                    let t = cpu();
                    let w = sampled_windows(&p, &mut *source(&input), &o, plan).unwrap();
                    println!("    full warming (--sample) over the whole input: {:.2} s", cpu() - t);
                    w
                });
                compare_windows(&each, full_warm);
            }
        }
        if keep.is_none() {
            std::fs::remove_dir_all(&d).unwrap();
        }
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir(&dir);
    }
}

/// The same windows from checkpoints (`ck`) and with full warming (`fw`): Σ cycles of each,
/// the counts whose sums differ most (relative), and how the cycle difference spreads over
/// windows.
fn compare_windows(ck: &[secmem_core::stats::Stats], fw: &[secmem_core::stats::Stats]) {
    use secmem_core::stats::Stat;
    let n = ck.len().min(fw.len());
    let sum = |w: &[secmem_core::stats::Stats], k: &str| -> f64 { w[..n].iter().map(|s| s.get_f64(k).unwrap_or(0.0)).sum() };
    let (cc, cf) = (sum(ck, "cycles"), sum(fw, "cycles"));
    println!("    compare: {} windows; cycles checkpointed {:.0}, full warming {:.0} ({:+.2}%): IPC error from warming {:+.2}%", n, cc, cf, (cc - cf) / cf * 100.0, (cf / cc - 1.0) * 100.0);
    // Counts, and the numerators of rates (misses of a miss rate).
    let count = |s: &secmem_core::stats::Stats, k: &str| -> f64 {
        match s.get(k) {
            Some(Stat::Int(v)) => *v as f64,
            Some(Stat::Rate(_, num, _)) => *num as f64,
            _ => 0.0,
        }
    };
    let csum = |w: &[secmem_core::stats::Stats], k: &str| -> f64 { w[..n].iter().map(|s| count(s, k)).sum() };
    let mut d: Vec<(f64, String, f64, f64)> = Vec::new();
    for (k, v) in &ck[0].0 {
        if !matches!(v, Stat::Int(_) | Stat::Rate(..)) || k == "cycles" || k == "instructions" || k.starts_with("mem.resident") {
            continue;
        }
        let (a, b) = (csum(ck, k), csum(fw, k));
        if a.max(b) >= 10.0 && a != b {
            d.push(((a - b).abs() / b.max(1.0), k.clone(), a, b));
        }
    }
    d.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap());
    for (r, k, a, b) in d.iter().take(40) {
        println!("      {:<40} checkpointed {:>12.0} full warming {:>12.0} ({:+.1}%)", k, a, b, r * (a - b).signum() * 100.0);
    }
    // The cycle difference by window: how concentrated it is.
    let mut dw: Vec<f64> = (0..n).map(|j| ck[j].get_f64("cycles").unwrap_or(0.0) - fw[j].get_f64("cycles").unwrap_or(0.0)).collect();
    dw.sort_by(|x, y| y.abs().partial_cmp(&x.abs()).unwrap());
    let top: f64 = dw.iter().take(n / 10).sum();
    println!("      Σ Δcycles {:.0}; the 10% of windows differing most carry {:.0}; more cycles in {} windows, fewer in {}", dw.iter().sum::<f64>(), top, dw.iter().filter(|x| **x > 0.0).count(), dw.iter().filter(|x| **x < 0.0).count());
}
