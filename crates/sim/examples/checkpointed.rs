//! A sampled run from per-window checkpoints against full detail (docs/sampling.md,
//! "Sampling from checkpoints"): for an input, the checkpoint pass (once per B), then for each
//! scheme pair the windows run from the checkpoints, and with `--full` the full detailed run;
//! IPC, interval, error, and host CPU seconds of each. Everything runs on this thread (a
//! trace file is decoded here, not on a read-ahead thread), so the CPU times count decoding.
//!
//! `cargo run --release --example checkpointed INPUT N [--warmup W] [--plan U:W:D]
//!  [--warm B1,B2] [--prewarm LINES] [-s i+e,…] [--dir DIR] [--full]` (INPUT: a built-in, or a trace file if
//! it has a `/`; DIR: where checkpoints go, default a temporary directory, removed after)

use secmem_sim::checkpointed::{length, run_windows, starts};
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
    let prewarm = opt("--prewarm").map(|s| secmem_core::params::parse_count(&s).expect("--prewarm LINES") as usize).unwrap_or(DEFAULT_PREWARM);
    let keep = opt("--dir");
    let dir = keep.clone().map(std::path::PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join(format!("secmem-checkpointed-{}", std::process::id())));
    let name = input.rsplit('/').next().unwrap_or(&input).to_string();
    println!("{} instructions after {} of warm-up; plan U:W:D = {}:{}:{}", n, warmup, plan.period, plan.window, plan.warming);
    println!(
        "{:<12} {:<10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>4} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "input", "schemes", "B", "full IPC", "sampled", "±95%", "error", "in?", "image MB", "pass s", "full s", "windows s", "speedup", "w/ pass"
    );
    let mut fulls = std::collections::HashMap::new();
    for &b in &warms {
        let st = starts(&plan, warmup, n, b).unwrap_or_else(|e| panic!("{}", e));
        let d = dir.join(format!("{}-{}", name, b));
        std::fs::create_dir_all(&d).unwrap();
        let path = |j: usize| d.join(format!("w{:05}.smt", j));
        let t = cpu();
        let done = write_windows(&mut *source(&input), &st, length(&plan, b), prewarm, &path, false).unwrap();
        let pass = cpu() - t;
        for pair in schemes.split(',') {
            let (i, e) = pair.split_once('+').expect("schemes as i+e");
            let p = configure("suh2003", Some(i), Some(e), &[]).unwrap_or_else(|e| panic!("{}", e));
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
            let mut open = |j: usize| NativeReader::open(path(j)).map(|r| (Box::new(r) as Box<dyn TraceSource>, done.prewarm[j])).map_err(|e| e.to_string());
            let t = cpu();
            let r = run_windows(&p, &mut open, done.instructions.len(), plan, b, 1, &name).unwrap();
            let tw = cpu() - t;
            assert!(r.error.is_none(), "{:?}", r.error);
            let g = |k: &str| r.stats.get_f64(k).unwrap_or(f64::NAN);
            assert_eq!(g("trace.value_mismatches"), 0.0, "every window's loads find the input's bytes");
            let err = (g("ipc") - full_ipc) / full_ipc * 100.0;
            println!(
                "{:<12} {:<10} {:>8} {:>8.4} {:>8.4} {:>8.4} {:>6.2}% {:>4} {:>9.1} {:>9.2} {:>8.2} {:>8.2} {:>7.1}x {:>7.1}x",
                name,
                pair,
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
        }
        if keep.is_none() {
            std::fs::remove_dir_all(&d).unwrap();
        }
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir(&dir);
    }
}
