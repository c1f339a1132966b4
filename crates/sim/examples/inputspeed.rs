//! Simulation speed reading a trace file, with the reader on the simulating thread (as
//! before read-ahead) and on a thread of its own: `inputspeed FILE FORMAT [REPEAT]`.
//! Prints the fastest of REPEAT runs (default 3) of each, interleaved, in simulated
//! instructions per second (suh2003, no protection), and the reader alone.
//!
//! `cargo run --release -p secmem-sim --example inputspeed -- t.champsim.xz champsim`

use std::time::Instant;

use secmem_trace::cputime::thread_cpu_seconds;
use secmem_trace::{ChampSimReader, Instr, LackeyReader, NativeReader, ReadAhead, TraceSource};

fn direct(path: &str, format: &str) -> Box<dyn TraceSource> {
    match format {
        "native" => Box::new(NativeReader::open(path).unwrap()),
        "champsim" => Box::new(ChampSimReader::open(path).unwrap()),
        _ => Box::new(LackeyReader::open(path).unwrap()),
    }
}

/// Simulated instructions per second of wall time, and the simulating thread's CPU seconds.
fn simulate(mut src: Box<dyn TraceSource>) -> (f64, f64) {
    let p = secmem_sim::configure("suh2003", Some("none"), Some("none"), &[]).unwrap();
    let o = secmem_sim::RunOptions { instructions: u64::MAX / 2, warmup: 0, seed: 1, progress: false, interval: 0 };
    let (t, cpu) = (Instant::now(), thread_cpu_seconds());
    let r = secmem_sim::run(&p, src.as_mut(), &o).unwrap();
    (r.stats.get_f64("instructions").unwrap() / t.elapsed().as_secs_f64(), thread_cpu_seconds() - cpu)
}

fn read(mut src: Box<dyn TraceSource>) -> f64 {
    let (mut i, mut n, t) = (Instr::default(), 0u64, Instant::now());
    while src.next_into(&mut i).unwrap() {
        n += 1;
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (path, format) = (&a[0], a[1].as_str());
    let repeat: usize = a.get(2).map_or(3, |r| r.parse().unwrap());
    let (mut on, mut ahead, mut alone) = ((0f64, f64::MAX), (0f64, f64::MAX), 0f64);
    for _ in 0..repeat {
        let (s, c) = simulate(direct(path, format));
        on = (on.0.max(s), on.1.min(c));
        let (s, c) = simulate(Box::new(ReadAhead::new(direct(path, format))));
        ahead = (ahead.0.max(s), ahead.1.min(c));
        alone = alone.max(read(direct(path, format)));
    }
    println!(
        "{path}: simulated {:.2} M instr/s with the reader on the simulating thread ({:.2} s of its CPU), {:.2} M/s read ahead ({:.2} s); the reader alone {:.2} M records/s",
        on.0 / 1e6,
        on.1,
        ahead.0 / 1e6,
        ahead.1,
        alone / 1e6
    );
}
