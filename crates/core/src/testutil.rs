//! Helpers shared by the core crate's tests.

use crate::params::Params;

/// The default machine with the given schemes, a 16 KiB L2 (so a few hundred lines already
/// force evictions and tree traffic) and 64 MiB of memory, then `extra` `key=value`s.
pub fn params(integ: &str, enc: &str, extra: &[&str]) -> Params {
    let mut p = crate::decl::defaults(crate::registry::engine_components());
    p.overlay(&Params::from_toml(include_str!("../../../configs/suh2003.toml"), "suh2003").unwrap());
    p.set("integrity", integ).unwrap();
    p.set("encryption", enc).unwrap();
    p.set("l2.size", "16KiB").unwrap();
    p.set("memory.size", "64MiB").unwrap();
    for e in extra {
        p.set_str(e).unwrap();
    }
    p
}

/// The integrity schemes that pair with encryption scheme `enc` (`registry::compatible`).
pub fn integrities_with(enc: &str) -> Vec<&'static str> {
    crate::registry::pair_names().into_iter().filter(|&(_, e)| e == enc).map(|(i, _)| i).collect()
}

/// The next number of a xorshift sequence kept in `x` (nonzero): the tests' reproducible
/// random inputs.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// `n` deterministic pseudo-random bytes (xorshift), distinct per seed.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n).map(|_| xorshift(&mut x) as u8).collect()
}

/// Writes `lines` lines at 1 MiB whose chunks mix a few small values (frequent) with random
/// words, flushes them to memory and returns them (frequent value speculation's tests).
pub fn frequent_lines(e: &mut crate::Engine, lines: u64) -> Vec<Vec<u8>> {
    let mut want = Vec::new();
    for k in 0..lines {
        let mut line = pattern(k + 1, 64);
        for (i, c) in line.chunks_exact_mut(8).enumerate() {
            if (k + i as u64) % 3 != 0 {
                c.copy_from_slice(&((k + i as u64) % 5).to_le_bytes());
            }
        }
        e.write(0x10_0000 + k * 64, &line, 0).unwrap();
        want.push(line);
    }
    e.flush(0).unwrap();
    want
}

/// `n` lines of `pattern(k, 64)` written from `base` on and flushed to memory, then the
/// statistics reset: the memory a test measures against, in place.
pub fn lines_in_memory(e: &mut crate::Engine, base: u64, n: u64) {
    for k in 0..n {
        e.write(base + k * 64, &pattern(k, 64), 0).unwrap();
    }
    e.flush(0).unwrap();
    e.reset_stats();
}

/// A statistic of `e` (panics naming it if absent).
pub fn stat(e: &crate::Engine, k: &str) -> f64 {
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    s.get_f64(k).unwrap_or_else(|| panic!("no statistic {}", k))
}

/// An engine of `enc` with `extra` that wrote 300 `frequent_lines`, flushed them and read them
/// all back, each a miss checked to give the data written; statistics cover the reads only.
/// Asserts that both speculation decisions occur (some chunks frequent, some not).
pub fn speculated_reads(enc: &str, extra: &[&str]) -> crate::Engine {
    let mut e = crate::Engine::new(&params("none", enc, extra), 3).unwrap();
    let want = frequent_lines(&mut e, 300);
    e.reset_stats();
    for (k, w) in want.iter().enumerate() {
        let mut got = vec![0u8; 64];
        e.read(0x10_0000 + k as u64 * 64, &mut got, 0).unwrap();
        assert_eq!(&got, w, "speculation changed the data of line {}", k);
    }
    let (chunks, freq) = (stat(&e, "speculation.fv_chunks"), stat(&e, "speculation.fv_frequent_chunks"));
    assert_eq!(chunks, 300.0 * 8.0);
    assert!(freq > 0.3 * chunks && freq < chunks, "{} of {} chunks frequent", freq, chunks);
    e
}

/// The miss on a line of zeros (frequent values) at 0x2000, 1 000 000 cycles after its
/// neighbour, a line of 0x01 bytes at 0x2040, was read: that read brought the counter (stamp,
/// bitmap) word both lines share on chip. Returns the miss's outcome, timed from its request.
pub fn frequent_line_miss(e: &mut crate::Engine) -> crate::Outcome {
    e.write(0x2000, &[0u8; 64], 0).unwrap();
    e.write(0x2040, &[1u8; 64], 0).unwrap();
    e.flush(0).unwrap();
    e.access(0x2040, crate::AccessKind::Load, 0).unwrap();
    e.settle().unwrap();
    let mut o = e.access(0x2000, crate::AccessKind::Load, 1_000_000).unwrap();
    o.ready -= 1_000_000;
    o.verified -= 1_000_000;
    o
}

/// One bit of the byte at `addr` of untrusted memory flipped (the adversary's smallest change).
pub fn flip(e: &mut crate::Engine, addr: u64) {
    let mut b = [0u8; 1];
    e.untrusted().read(addr, &mut b);
    e.untrusted().write(addr, &[b[0] ^ 1]);
}

/// A replay: the 64-B line at `a` written and flushed twice, then its first ciphertext and its
/// first MAC (`mac_bytes` at `mac`) put back in memory over the second. A read of `a` must fail.
pub fn replay_line_and_mac(e: &mut crate::Engine, a: u64, mac: u64, mac_bytes: usize) {
    e.write(a, &pattern(1, 64), 0).unwrap();
    e.flush(0).unwrap();
    let (mut old_line, mut old_mac) = ([0u8; 64], vec![0u8; mac_bytes]);
    e.untrusted().read(a, &mut old_line);
    e.untrusted().read(mac, &mut old_mac);
    e.write(a, &pattern(2, 64), 0).unwrap();
    e.flush(0).unwrap();
    e.untrusted().write(a, &old_line);
    e.untrusted().write(mac, &old_mac);
}
