//! Host time per memory access of the bus and DRAM models (a micro-benchmark, not a test).
//!
//!     cargo run --release -p secmem-timing --example memory_bench [accesses]
//!
//! Three request streams, each at about the data bus's rate: a sequential stream of line
//! reads; reads of random lines presented in program order with times jittered by up to 4000
//! cycles (an out-of-order core's view); and the same with a write-back per two reads. Prints
//! the best of five runs in ns of this thread's CPU time per access (wall time where Linux's
//! /proc/thread-self/schedstat is missing), so that a shared, loaded machine inflates it less.

use std::hint::black_box;
use std::time::Instant;

use secmem_timing::{Bus, BusParams, Cycle, Dram, DramParams, MemoryModel};

/// Numbers below `m` from a fixed xorshift sequence.
fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
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

fn random(m: &mut dyn MemoryModel, n: u64, writes: bool) -> Cycle {
    let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
    let mut acc = 0;
    for k in 0..n {
        let t = (k * 45).saturating_sub(rnd(4000));
        let addr = rnd(1 << 28) & !63;
        acc ^= if writes && k % 3 == 2 { m.write(addr, 64, t) } else { m.read(addr, 64, t).last };
    }
    acc
}

enum Run {
    Stream,
    Random,
    RandomWrites,
}
use Run::*;

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
    println!("{:>6} {:>10} {:>12} {:>14} {:>20}", "model", "queue", "stream ns", "random ns", "random+writes ns");
    for (name, make) in models {
        for q in [0, 16] {
            let mut best = [f64::MAX; 3];
            for _ in 0..5 {
                for (i, kind) in [Stream, Random, RandomWrites].into_iter().enumerate() {
                    let mut m = make(q);
                    let start = Instant::now();
                    let t0 = cpu_ns(start);
                    black_box(match kind {
                        Stream => stream(m.as_mut(), n),
                        Random => random(m.as_mut(), n, false),
                        RandomWrites => random(m.as_mut(), n, true),
                    });
                    best[i] = best[i].min((cpu_ns(start) - t0) as f64 / n as f64);
                }
            }
            println!("{:>6} {:>10} {:>12.1} {:>14.1} {:>20.1}", name, q, best[0], best[1], best[2]);
        }
    }
}
