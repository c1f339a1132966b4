//! Host time per memory access of the bus and DRAM models (a micro-benchmark, not a test).
//!
//!     cargo run --release -p secmem-timing --example memory_bench [accesses]
//!
//! Request streams on 004 Table 2's memory at 1:5 (a 64-B line takes the bus 40 cycles):
//! - stream: sequential line reads, one per 40 cycles (the bus's rate; DRAM row hits);
//! - random: reads of random lines in 256 MiB, one per 60 cycles on average, presented in
//!   program order with times jittered by up to 4000 cycles (an out-of-order core's view);
//! - +writes: the same with a write-back for every two reads;
//! - saturated: +writes at one access per 45 cycles, more than the DRAM serves when every
//!   access is a row conflict, so its latencies grow without bound (a worst case).
//!
//! Prints the best of five runs in ns of this thread's CPU time per access (wall time where
//! Linux's /proc/thread-self/schedstat is missing), so that a loaded machine inflates it less.

use std::hint::black_box;
use std::time::Instant;

use secmem_timing::{Bus, BusParams, Cycle, Dram, DramParams, MemoryModel};

/// Numbers below `m` from a fixed linear congruential sequence (Knuth's MMIX constants).
fn lcg(mut x: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % m
    }
}

/// Nanoseconds this thread has run on a CPU (wall-clock nanoseconds without schedstat).
fn cpu_ns(start: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| start.elapsed().as_nanos() as u64)
}

fn stream(m: &mut dyn MemoryModel, n: u64) -> Cycle {
    (0..n).fold(0, |acc, k| acc ^ m.read(k * 64, 64, k * 40).last)
}

/// Random lines, one per `gap` cycles on average, a write for every two reads if `writes`.
fn random(m: &mut dyn MemoryModel, n: u64, gap: u64, writes: bool) -> Cycle {
    let mut rnd = lcg(0x2545_f491_4f6c_dd1d);
    let mut acc = 0;
    for k in 0..n {
        let t = (k * gap).saturating_sub(rnd(4000));
        let addr = rnd(1 << 28) & !63;
        acc ^= if writes && k % 3 == 2 { m.write(addr, 64, t) } else { m.read(addr, 64, t).last };
    }
    acc
}

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(2_000_000, |s| s.parse().expect("accesses: a number"));
    let bus = |q: usize| -> Box<dyn MemoryModel> {
        Box::new(Bus::new(BusParams { latency: 80, width: 8, beat_cycles: 5, write_delay: 0 }).with_write_queue(q))
    };
    // Seed 004 Table 2 at 1:5 (configs/shi2007.toml).
    let table2 = DramParams {
        channels: 1,
        banks: 4,
        row_bytes: 4096,
        interleave: 64,
        t_rp: 7,
        t_rcd: 7,
        t_cas: 20,
        clock: 5,
        width: 8,
        write_delay: 0,
    };
    let dram = |q: usize| -> Box<dyn MemoryModel> { Box::new(Dram::new(table2).unwrap().with_write_queue(q)) };
    type Make<'a> = &'a dyn Fn(usize) -> Box<dyn MemoryModel>;
    let models: [(&str, Make); 2] = [("bus", &bus), ("dram", &dram)];
    type Run<'a> = &'a dyn Fn(&mut dyn MemoryModel) -> Cycle;
    let runs: [(&str, Run); 4] = [
        ("stream", &|m| stream(m, n)),
        ("random", &|m| random(m, n, 60, false)),
        ("+writes", &|m| random(m, n, 60, true)),
        ("saturated", &|m| random(m, n, 45, true)),
    ];
    print!("{:>6} {:>6}", "model", "queue");
    runs.iter().for_each(|(name, _)| print!(" {:>12}", format!("{} ns", name)));
    println!();
    for (name, make) in models {
        for q in [0, 16] {
            let mut best = [f64::MAX; 4];
            for _ in 0..5 {
                for (i, (_, run)) in runs.iter().enumerate() {
                    let mut m = make(q);
                    let start = Instant::now();
                    let t0 = cpu_ns(start);
                    black_box(run(m.as_mut()));
                    best[i] = best[i].min((cpu_ns(start) - t0) as f64 / n as f64);
                }
            }
            print!("{:>6} {:>6}", name, q);
            best.iter().for_each(|b| print!(" {:>12.1}", b));
            println!();
        }
    }
}
