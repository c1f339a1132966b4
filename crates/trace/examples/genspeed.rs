//! Generation speed of the built-in workloads and of reading them back from a native trace.
//!
//! `cargo run --release -p secmem-trace --example genspeed [RECORDS]`

use secmem_trace::workloads::{builtin, builtin_workloads};
use secmem_trace::{open_trace, Instr, NativeWriter, TraceSource};
use std::time::Instant;

fn time(src: &mut dyn TraceSource, n: u64) -> f64 {
    let mut r = Instr::default();
    let t = Instant::now();
    let mut sum = 0u64;
    for _ in 0..n {
        if !src.next_into(&mut r).unwrap() {
            break;
        }
        sum = sum.wrapping_add(r.pc ^ r.accesses.len() as u64);
    }
    std::hint::black_box(sum);
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(50_000_000, |s| s.parse().expect("RECORDS"));
    for (name, _) in builtin_workloads() {
        let mut w = builtin(name, 1).unwrap();
        // Skip the external image and start-up so the rate is the steady state.
        time(w.as_mut(), 100_000);
        println!("{name:8} {:7.1} M records/s", time(w.as_mut(), n) / 1e6);
    }

    // The native format: write and read back part of `mix`.
    let m = n.min(20_000_000);
    let path = std::env::temp_dir().join(format!("genspeed-{}.smt", std::process::id()));
    let mut w = builtin("mix", 1).unwrap();
    let mut r = Instr::default();
    let mut out = NativeWriter::create(&path).unwrap();
    let t = Instant::now();
    let mut external = 0;
    for _ in 0..m {
        w.next_into(&mut r).unwrap();
        out.write(&r).unwrap();
        external += r.external as u64;
    }
    out.finish().unwrap();
    let wr = m as f64 / t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let rd = time(open_trace(path.to_str().unwrap()).unwrap().as_mut(), m);
    std::fs::remove_file(&path).ok();
    println!(
        "native   mix {m} records ({external} external): {:.2} bytes/record, write {:.1} M records/s, read {:.1} M records/s",
        bytes as f64 / m as f64,
        wr / 1e6,
        rd / 1e6
    );
}
