//! Nanoseconds per `add` of a 76-byte element (8-byte address ‖ 64-byte chunk ‖ 4-byte time
//! stamp, as LHash hashes it) for each multiset hash.
//!
//! `cargo run --release -p secmem-crypto --example msetspeed`

use secmem_crypto::{Multiset, MultisetHash, MULTISET_HASHES};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    const N: u64 = 1_000_000;
    let chunk = [0x5au8; 64];
    for name in MULTISET_HASHES {
        let mut h = Multiset::by_name(name, *b"secmem-msetspeed", 42).unwrap();
        // Warm up.
        for i in 0..10_000u64 {
            h.add(&[&i.to_le_bytes(), &chunk, &(i as u32).to_le_bytes()]);
        }
        let t = Instant::now();
        for i in 0..N {
            let addr = (i * 64).to_le_bytes();
            let ts = (i as u32).to_le_bytes();
            h.add(black_box(&[&addr[..], &chunk[..], &ts[..]]));
        }
        let ns = t.elapsed().as_nanos() as f64 / N as f64;
        black_box(&h);
        println!("{name:>4}: {ns:7.1} ns/add (76-byte element, {N} adds)");
    }
}
