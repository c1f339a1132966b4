//! Nanoseconds per tag of one block, for each pad generator and tag width, with the digest
//! (PR) and the pad (R_T) also timed alone; and whether the CPU multiplied carry-less in
//! hardware. Time is this thread's CPU time (other processes on a shared machine inflate wall
//! time far more), fastest of five rounds.
//!
//! `cargo run --release -p secmem-codeauth --example tagspeed [BLOCK_BYTES]`

use secmem_codeauth::{Keys, PadKind, Params, Tagger, Width};
use std::hint::black_box;

fn thread_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn best_ns(n: u64, mut f: impl FnMut(u64)) -> f64 {
    (0..5)
        .map(|_| {
            let t = thread_ns();
            for i in 0..n {
                f(i);
            }
            (thread_ns() - t) as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let block: u32 = std::env::args().nth(1).map_or(64, |s| s.parse().expect("block size in bytes"));
    let keys = Keys::derive(b"tagspeed");
    let code: Vec<u8> = (0..block).map(|i| i as u8).collect();
    const N: u64 = 200_000;
    println!("block {block} B, pclmulqdq {}", secmem_crypto::gf2w::clmul_available());
    println!("{:<11} {:>5} {:>10} {:>10} {:>10}", "pad", "w", "tag ns", "PR ns", "pad ns");
    for pad in PadKind::ALL {
        for width in Width::ALL {
            let t = Tagger::new(&keys, Params::new(pad, width, block).unwrap()).unwrap();
            let addr = |i: u64| 0x40_0000 + (i % 4096) * block as u64;
            let tag = best_ns(N, |i| {
                black_box(t.tag(black_box(&code), 7, addr(i)).unwrap());
            });
            let pr = best_ns(N, |i| {
                black_box(t.digest(black_box(&code), 7, addr(i)).unwrap());
            });
            let pd = best_ns(N, |i| {
                black_box(t.pad(7, addr(i)).unwrap());
            });
            println!("{:<11} {:>5} {:>10.1} {:>10.1} {:>10.1}", pad.name(), width.bits(), tag, pr, pd);
        }
    }
}
