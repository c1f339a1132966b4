//! Reading speed of trace files of any format, in records per second.
//!
//! `cargo run --release -p secmem-trace --example readspeed -- PATH [FORMAT]`
//!
//! FORMAT: native, champsim, lackey (default: detect).

use secmem_trace::{open_trace_as, Instr};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: readspeed PATH [FORMAT]");
    let format = args.next();
    let t = Instant::now();
    let mut src = open_trace_as(&path, format.as_deref()).unwrap_or_else(|e| panic!("{e}"));
    let mut r = Instr::default();
    let (mut n, mut acc, mut sum) = (0u64, 0u64, 0u64);
    loop {
        match src.next_into(&mut r) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                eprintln!("{e}");
                break;
            }
        }
        n += 1;
        acc += r.accesses.len() as u64;
        sum = sum.wrapping_add(r.pc);
    }
    std::hint::black_box(sum);
    let s = t.elapsed().as_secs_f64();
    println!(
        "{path}: {n} records, {acc} accesses in {s:.3} s: {:.2} M records/s",
        n as f64 / s / 1e6
    );
}
