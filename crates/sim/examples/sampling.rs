//! Sampled against full detailed runs: for each built-in workload and scheme pair, IPC and
//! L2 miss rate of both, the sampled interval, whether it holds the full run's value, and
//! the host CPU time of each, and per instruction in detail and in functional warming
//! (docs/sampling.md's figures). Times are the simulating thread's: a trace file is decoded
//! on a thread of its own (`ReadAhead`), so for one the decoding alone is timed too (every
//! record of the run read on this thread, no simulation: `dec ns/i`), and the speed-up
//! with it counted in both runs (`w/ dec`), as the process's CPU time would count it.
//!
//! `cargo run --release --example sampling [INSTRUCTIONS] [--plan U:W:D] [-w a,b] [-s i+e,…]
//!  [--set k=v]… [--sampled-only]` (a workload with a `/` in it is a trace file)

use secmem_sim::{configure, run, run_sampled, RunOptions, Sampling};
use secmem_trace::cputime::thread_cpu_seconds as cpu;

/// A built-in workload, or the trace file at `w` if it names a path.
fn source(w: &str) -> Box<dyn secmem_trace::TraceSource> {
    if w.contains('/') {
        secmem_trace::open_trace_as(w, None).unwrap_or_else(|e| panic!("{}: {}", w, e))
    } else {
        secmem_trace::workloads::builtin(w, 1).unwrap()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n = args.first().and_then(|s| secmem_core::params::parse_count(s)).unwrap_or(10_000_000);
    let plan = Sampling::parse(&opt("--plan").unwrap_or_default(), n).unwrap_or_else(|e| panic!("{}", e));
    let workloads = opt("-w").unwrap_or("stream,chase,hot,mix".into());
    let schemes = opt("-s").unwrap_or("none+none,chash+otp".into());
    let sets: Vec<String> = args.windows(2).filter(|w| w[0] == "--set").map(|w| w[1].clone()).collect();
    let sampled_only = args.iter().any(|a| a == "--sampled-only");
    let warmup = n / 10;
    println!("{} instructions after {} of warm-up; plan U:W:D = {}:{}:{}", n, warmup, plan.period, plan.window, plan.warming);
    println!(
        "{:<7} {:<11} {:>8} {:>8} {:>8} {:>7} {:>4} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>7}",
        "workload", "schemes", "IPC", "sampled", "±95%", "error", "in?", "L2 miss", "sampled", "full s", "sampled", "speedup", "det ns/i", "func ns/i", "dec ns/i", "w/ dec"
    );
    for w in workloads.split(',') {
        // Decoding alone, on this thread: what the read-ahead thread spends on the same records.
        let dec = if w.contains('/') {
            let mut r = secmem_trace::NativeReader::open(w).unwrap_or_else(|e| panic!("{}: {}", w, e));
            let (mut ins, mut k, t) = (secmem_trace::Instr::default(), 0u64, cpu());
            while k < n + warmup && secmem_trace::TraceSource::next_into(&mut r, &mut ins).unwrap() {
                k += 1;
            }
            (cpu() - t) / k.max(1) as f64
        } else {
            0.0
        };
        for pair in schemes.split(',') {
            let (i, e) = pair.split_once('+').expect("schemes as i+e");
            let p = configure("suh2003", Some(i), Some(e), &sets).unwrap_or_else(|e| panic!("{}", e));
            let o = RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 };
            let t = cpu();
            let s = run_sampled(&p, &mut *source(w), &o, Some(plan)).unwrap();
            let ts = cpu() - t;
            assert!(s.error.is_none(), "{:?}", s.error);
            let s = s.stats;
            let g = |k: &str| s.get_f64(k).unwrap_or(f64::NAN);
            let (full_ipc, full_miss, tf) = if sampled_only {
                (f64::NAN, f64::NAN, f64::NAN)
            } else {
                let t = cpu();
                let f = run(&p, &mut *source(w), &o).unwrap().stats;
                (f.get_f64("ipc").unwrap(), f.get_f64("l2.miss_rate").unwrap(), cpu() - t)
            };
            let detailed = g("sampling.windows") as u64 * (plan.window + plan.warming);
            let err = (g("ipc") - full_ipc) / full_ipc * 100.0;
            let inside = (g("ipc") - full_ipc).abs() <= g("ci95.ipc");
            let name = w.rsplit('/').next().unwrap_or(w);
            let with_dec = (tf + dec * (n + warmup) as f64) / (ts + dec * (n + warmup) as f64);
            println!(
                "{:<7} {:<11} {:>8.4} {:>8.4} {:>8.4} {:>6.2}% {:>4} {:>8.4} {:>8.4} {:>8.2} {:>8.2} {:>6.1}x {:>9.0} {:>9.0} {:>9.0} {:>6.1}x",
                name,
                pair,
                full_ipc,
                g("ipc"),
                g("ci95.ipc"),
                err,
                if sampled_only { "-" } else if inside { "yes" } else { "NO" },
                full_miss,
                g("l2.miss_rate"),
                tf,
                ts,
                tf / ts,
                g("sim.detailed_seconds") / detailed as f64 * 1e9,
                g("sim.functional_seconds") / (n + warmup - detailed) as f64 * 1e9,
                dec * 1e9,
                with_dec,
            );
        }
    }
}
