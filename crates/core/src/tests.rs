//! Behaviour of the engine under every scheme combination, and what the adversary can do.

use crate::layout::MetaKind;
use crate::testutil::{params, pattern};
use crate::{AccessKind, Engine};

const SCHEMES: [(&str, &str); 4] = [("none", "none"), ("chash", "none"), ("none", "otp"), ("chash", "otp")];

/// Every integrity scheme with and without encryption; one over an encryption scheme's
/// counters (which pairs with neither) with each encryption scheme it protects.
fn all_pairs() -> Vec<(&'static str, &'static str)> {
    let pairs = crate::registry::pair_names();
    let mut v: Vec<_> = pairs.iter().copied().filter(|&(_, e)| e == "none" || e == "otp").collect();
    let rest: Vec<_> = pairs.iter().copied().filter(|&(i, _)| !v.iter().any(|&(j, _)| j == i)).collect();
    v.extend(rest);
    v
}

fn engine(integ: &str, enc: &str) -> Engine {
    Engine::new(&params(integ, enc, &[]), 7).unwrap()
}

fn read(e: &mut Engine, addr: u64, n: usize) -> Result<Vec<u8>, crate::IntegrityError> {
    let mut v = vec![0u8; n];
    e.read(addr, &mut v, 0)?;
    Ok(v)
}

/// Write a spread of regions (more than the L2 holds), flush, read back.
#[test]
fn round_trips_under_every_combination() {
    for (i, e_) in all_pairs().iter().enumerate() {
        let mut e = engine(e_.0, e_.1);
        let regions: Vec<(u64, Vec<u8>)> =
            (0..64u64).map(|k| (k * 70_001 + 13, pattern(k + i as u64, 1000 + (k as usize * 37) % 900))).collect();
        for (a, d) in &regions {
            e.write(*a, d, 0).unwrap();
        }
        for (a, d) in &regions {
            assert_eq!(&read(&mut e, *a, d.len()).unwrap(), d, "{:?} cached/evicted read at {:#x}", e_, a);
        }
        e.flush(0).unwrap();
        for (a, d) in regions.iter().rev() {
            assert_eq!(&read(&mut e, *a, d.len()).unwrap(), d, "{:?} read after flush at {:#x}", e_, a);
        }
        assert!(e.check(0).unwrap() > 0);
    }
}

#[test]
fn untouched_memory_of_gigabytes_reads_zero_and_costs_only_what_is_touched() {
    for (integ, enc) in SCHEMES {
        let mut e = Engine::new(&params(integ, enc, &["memory.size=4GiB"]), 1).unwrap();
        assert_eq!(read(&mut e, 3 << 30, 256).unwrap(), vec![0u8; 256]);
        e.write(3 << 30, b"hello", 0).unwrap();
        e.flush(0).unwrap();
        assert_eq!(read(&mut e, 3 << 30, 5).unwrap(), b"hello");
        assert!(e.untrusted().resident_bytes() < 1 << 20, "{} {}: only touched pages allocated", integ, enc);
    }
}

fn flip(e: &mut Engine, addr: u64, bit: u8) {
    let mut b = [0u8; 1];
    e.untrusted().read(addr, &mut b);
    b[0] ^= 1 << bit;
    e.untrusted().write(addr, &b);
}

#[test]
fn chash_detects_a_flipped_bit_in_data() {
    for enc in ["none", "otp"] {
        let mut e = engine("chash", enc);
        e.write(0x4000, &pattern(1, 64), 0).unwrap();
        e.flush(0).unwrap();
        flip(&mut e, 0x4000 + 17, 3);
        let err = read(&mut e, 0x4000, 8).unwrap_err();
        assert_eq!(err.addr, 0x4000, "{}", enc);
        assert!(err.what.contains("data chunk"), "{}", err);
    }
}

#[test]
fn unprotected_memory_accepts_tampering_and_otp_alone_is_malleable() {
    let mut e = engine("none", "otp");
    e.write(0x4000, b"sell", 0).unwrap();
    e.flush(0).unwrap();
    // Counter mode: flipping ciphertext bits flips the same plaintext bits (002 §4.3).
    let delta: Vec<u8> = b"sell".iter().zip(b"buy!").map(|(a, b)| a ^ b).collect();
    let mut ct = [0u8; 4];
    e.untrusted().read(0x4000, &mut ct);
    for (c, d) in ct.iter_mut().zip(&delta) {
        *c ^= d;
    }
    e.untrusted().write(0x4000, &ct);
    assert_eq!(read(&mut e, 0x4000, 4).unwrap(), b"buy!");
}

#[test]
fn chash_detects_a_flipped_bit_in_every_tree_level() {
    for enc in ["none", "otp"] {
        let path: Vec<(String, u64)> = engine("chash", enc)
            .integrity()
            .metadata_of(0x8000)
            .into_iter()
            .filter(|m| matches!(m.kind, MetaKind::TreeLevel(_)))
            .map(|m| (m.kind.to_string(), m.addr))
            .collect();
        assert!(path.len() >= 8, "64 MiB with a 4-ary tree has many levels: {:?}", path);
        for (level, node) in path {
            let mut e = engine("chash", enc);
            assert_eq!(e.layout().region_of(node).unwrap().name, "chash tree");
            e.write(0x8000, &pattern(2, 64), 0).unwrap();
            e.flush(0).unwrap();
            flip(&mut e, node + 5, 0);
            let err = read(&mut e, 0x8000, 64).unwrap_err();
            assert!(err.what.contains("tree chunk") || err.addr == 0x8000, "{}: {}", level, err);
        }
    }
}

#[test]
fn chash_detects_replay_of_an_old_memory_snapshot() {
    for enc in ["none", "otp"] {
        let mut e = engine("chash", enc);
        e.write(0x10000, b"balance=100", 0).unwrap();
        e.flush(0).unwrap();
        let old = e.untrusted().snapshot();
        e.write(0x10000, b"balance=000", 0).unwrap();
        e.flush(0).unwrap();
        // Data, tree chunks and time stamps all rolled back together: only the on-chip root
        // remembers.
        e.untrusted().restore(&old).unwrap();
        assert!(read(&mut e, 0x10000, 11).is_err(), "{}: replay must be detected", enc);
    }
}

#[test]
fn replay_goes_unnoticed_without_integrity() {
    let mut e = engine("none", "otp");
    e.write(0x10000, b"balance=100", 0).unwrap();
    e.flush(0).unwrap();
    let old = e.untrusted().snapshot();
    e.write(0x10000, b"balance=000", 0).unwrap();
    e.flush(0).unwrap();
    e.untrusted().restore(&old).unwrap();
    assert_eq!(read(&mut e, 0x10000, 11).unwrap(), b"balance=100");
}

#[test]
fn chash_detects_a_block_spliced_to_another_address() {
    for enc in ["none", "otp"] {
        let mut e = engine("chash", enc);
        e.write(0x20000, &pattern(3, 64), 0).unwrap();
        e.write(0x30000, &pattern(4, 64), 0).unwrap();
        e.flush(0).unwrap();
        let mut line = [0u8; 64];
        e.untrusted().read(0x20000, &mut line);
        e.untrusted().write(0x30000, &line);
        let err = read(&mut e, 0x30000, 64).unwrap_err();
        assert_eq!(err.addr, 0x30000, "{}", enc);
        // The untouched original still verifies.
        assert_eq!(read(&mut e, 0x20000, 64).unwrap(), pattern(3, 64));
    }
}

#[test]
fn otp_leaves_no_plaintext_in_untrusted_memory() {
    let mut e = engine("chash", "otp");
    let secret = b"TOP-SECRET-TOP-SECRET-TOP-SECRET";
    for k in 0..300u64 {
        e.write(k * 4096 + 64, secret, 0).unwrap();
    }
    e.flush(0).unwrap();
    let size = e.layout().end();
    let pages = e.untrusted().touched_pages(0, size);
    assert!(!pages.is_empty());
    let mut buf = vec![0u8; 4096];
    for p in pages {
        e.untrusted().read(p, &mut buf);
        assert!(!buf.windows(8).any(|w| w == &secret[..8]), "plaintext found in page {:#x}", p);
    }
    assert_eq!(read(&mut e, 299 * 4096 + 64, secret.len()).unwrap(), secret);
}

#[test]
fn otp_ciphertexts_differ_across_addresses_and_rewrites() {
    let mut e = engine("none", "otp");
    let plain = [0x55u8; 64];
    let ct = |e: &mut Engine, a: u64| {
        let mut b = [0u8; 64];
        e.untrusted().read(a, &mut b);
        b
    };
    e.write(0x1000, &plain, 0).unwrap();
    e.write(0x2000, &plain, 0).unwrap();
    e.flush(0).unwrap();
    let (a1, b1) = (ct(&mut e, 0x1000), ct(&mut e, 0x2000));
    assert_ne!(a1, b1, "same plaintext at two addresses");
    assert_ne!(a1, plain);
    e.write(0x1000, &plain, 0).unwrap();
    e.flush(0).unwrap();
    assert_ne!(ct(&mut e, 0x1000), a1, "same plaintext rewritten");
}

#[test]
fn timer_wrap_rekeys_reencrypts_and_data_survives() {
    let p = params("chash", "otp", &["otp.ts_bits=4"]);
    let mut e = Engine::new(&p, 3).unwrap();
    let addrs: Vec<u64> = (0..40u64).map(|k| k * 8192).collect();
    for (i, a) in addrs.iter().enumerate() {
        e.write(*a, &pattern(i as u64, 48), 0).unwrap();
    }
    e.flush(0).unwrap();
    let before = {
        let mut b = [0u8; 48];
        e.untrusted().read(addrs[0], &mut b);
        b
    };
    // Dirty write-backs advance TIMER past 2^4 − 1 several times.
    for round in 0..3u64 {
        for (i, a) in addrs.iter().enumerate().take(10) {
            e.write(*a, &pattern(i as u64 + 100 * round, 48), 0).unwrap();
        }
        e.flush(0).unwrap();
    }
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    assert!(s.get_f64("otp.reencryptions").unwrap() >= 2.0, "{:?}", s.get("otp.reencryptions"));
    assert!(s.get_f64("otp.timer").unwrap() < 16.0);
    for (i, a) in addrs.iter().enumerate() {
        let want = if i < 10 { pattern(i as u64 + 200, 48) } else { pattern(i as u64, 48) };
        assert_eq!(read(&mut e, *a, 48).unwrap(), want, "line {} after re-keying", i);
    }
    let mut after = [0u8; 48];
    e.untrusted().read(addrs[0], &mut after);
    assert_ne!(before, after);
}

#[test]
fn chash_fetches_tree_chunks_only_up_to_the_first_cached_ancestor() {
    let mut e = engine("chash", "none");
    e.write(0x40000, &[1u8; 64], 0).unwrap();
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    let first = s.get_f64("chash.hash_loads").unwrap();
    assert!(first >= 8.0, "a cold miss walks the whole path: {}", first);
    // The neighbouring chunk shares every ancestor, now cached.
    e.write(0x40040, &[2u8; 64], 0).unwrap();
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    assert_eq!(s.get_f64("chash.hash_loads").unwrap(), first);
}

#[test]
fn protected_misses_take_longer_and_move_more_bytes() {
    let mut res = vec![];
    for (integ, enc) in SCHEMES {
        let mut e = engine(integ, enc);
        let mut t = 0;
        for k in 0..2000u64 {
            let o = e.access(k * 4096 * 3 % (48 << 20), AccessKind::Load, t).unwrap();
            e.write_cached(k * 4096 * 3 % (48 << 20), &[k as u8]);
            t = o.ready.max(e.settle().unwrap());
        }
        let mut s = crate::Stats::default();
        e.stats(&mut s);
        res.push((t, s.get_f64("mem.read_bytes").unwrap() + s.get_f64("mem.write_bytes").unwrap()));
    }
    let (base_t, base_b) = res[0];
    for (i, (t, b)) in res.iter().enumerate().skip(1) {
        assert!(*t > base_t, "{:?} slower than baseline", SCHEMES[i]);
        assert!(*b > base_b, "{:?} moves metadata too", SCHEMES[i]);
    }
}

#[test]
fn same_seed_same_ciphertext_different_seed_different() {
    let run = |seed| {
        let mut e = Engine::new(&params("chash", "otp", &[]), seed).unwrap();
        e.write(0x5000, &[9u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        let mut b = [0u8; 64];
        e.untrusted().read(0x5000, &mut b);
        b
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn bad_scheme_names_and_geometry_are_refused() {
    let p = params("merkle", "none", &[]);
    let e = Engine::new(&p, 1).err().unwrap().0;
    let all = crate::registry::INTEGRITY_SCHEMES.join(", ");
    assert_eq!(e, format!("unknown integrity scheme 'merkle' (choose from {})", all));
    let p = params("none", "rot13", &[]);
    assert!(Engine::new(&p, 1).err().unwrap().0.starts_with("unknown encryption scheme 'rot13'"));
    let p = params("chash", "none", &["chash.arity=8"]);
    assert!(Engine::new(&p, 1).err().unwrap().0.starts_with("chash.arity: 8 hashes of 16 B do not fit"));
    let p = params("chash", "none", &["l2.size=1000KiB"]);
    assert!(Engine::new(&p, 1).err().unwrap().0.starts_with("l2:"));
}

#[test]
fn chash_hash_function_and_size_are_knobs() {
    for (alg, bytes, arity) in [("sha1", "20", 3u64), ("sha256", "32", 2), ("md5", "8", 8)] {
        let p = params("chash", "none", &[&format!("chash.hash={}", alg), &format!("chash.hash_bytes={}", bytes)]);
        let mut e = Engine::new(&p, 1).unwrap();
        e.write(0x9000, b"knob", 0).unwrap();
        e.flush(0).unwrap();
        assert_eq!(read(&mut e, 0x9000, 4).unwrap(), b"knob");
        let mut s = crate::Stats::default();
        e.stats(&mut s);
        assert_eq!(s.get_f64("chash.arity").unwrap() as u64, arity, "{}", alg);
        flip(&mut e, 0x9000, 1);
        e.flush(0).unwrap();
        assert!(read(&mut e, 0x9000, 4).is_err());
    }
}

#[test]
fn a_direct_mapped_l2_survives_write_backs_that_displace_the_accessed_line() {
    // Writing back a victim pulls its tree parent into the same single-way set.
    for (integ, enc) in SCHEMES {
        let mut e = Engine::new(&params(integ, enc, &["l2.size=64KiB", "l2.ways=1"]), 1).unwrap();
        for k in 0..500u64 {
            e.write(0x7140 + k * 0x10000 % (32 << 20), &[k as u8; 3], 0).unwrap();
        }
        for k in 0..500u64 {
            assert_eq!(read(&mut e, 0x7140 + k * 0x10000 % (32 << 20), 3).unwrap(), vec![k as u8; 3], "{} {}", integ, enc);
        }
    }
}

/// Whether tampering is noticed: on the read itself, or at the latest by a full check (the
/// log hash only ever notices at its integrity-check).
fn noticed(e: &mut Engine, addr: u64, n: usize) -> bool {
    read(e, addr, n).is_err() || e.check(0).is_err()
}

fn written(integ: &str, enc: &str) -> Engine {
    let mut e = engine(integ, enc);
    for k in 0..40u64 {
        e.write(0x4000 + k * 4096, &pattern(k, 64), 0).unwrap();
    }
    e.flush(0).unwrap();
    e
}

#[test]
fn every_scheme_notices_a_flipped_data_bit() {
    for (integ, enc) in all_pairs().into_iter().filter(|p| p.0 != "none") {
        let mut e = written(integ, enc);
        flip(&mut e, 0x4000 + 3 * 4096 + 9, 2);
        assert!(noticed(&mut e, 0x4000 + 3 * 4096, 64), "{}+{}", integ, enc);
    }
}

#[test]
fn replay_is_noticed_by_trees_and_log_hash_but_not_by_mac() {
    for (integ, enc) in all_pairs().into_iter().filter(|p| p.0 != "none") {
        let mut e = written(integ, enc);
        let old = e.untrusted().snapshot();
        e.write(0x4000, b"new value", 0).unwrap();
        e.flush(0).unwrap();
        e.untrusted().restore(&old).unwrap();
        // TDX's MACs, like mac, bind no time (Intel documents no replay protection).
        assert_eq!(noticed(&mut e, 0x4000, 9), !matches!(integ, "mac" | "tdx"), "{}+{}", integ, enc);
    }
}

#[test]
fn lhash_reads_tampered_data_but_its_check_fails() {
    let mut e = written("lhash", "none");
    flip(&mut e, 0x4000 + 1, 0);
    let v = read(&mut e, 0x4000, 4).unwrap();
    assert_ne!(v, pattern(0, 4), "the log hash lets the read through...");
    let err = e.check(0).unwrap_err();
    assert!(err.what.contains("READHASH"), "...and its integrity-check catches it: {}", err);
}

#[test]
fn lhash_notices_reordered_time_stamps() {
    for enc in ["none", "otp"] {
        let mut e = written("lhash", enc);
        let md = e.integrity().metadata_of(0x4000);
        let ts = md.iter().find(|m| m.kind == MetaKind::LogStamp).unwrap().addr;
        let mut v = [0u8; 4];
        e.untrusted().read(ts, &mut v);
        e.untrusted().write(ts, &(u32::from_le_bytes(v) + 5).to_le_bytes());
        assert!(noticed(&mut e, 0x4000, 4), "{}", enc);
    }
}

#[test]
fn lhash_notices_a_page_added_twice_or_skipped_by_the_page_table() {
    for skip in [false, true] {
        let mut e = written("lhash", "none");
        let pt = e.integrity().metadata_of(0x4000 + 4096).iter().find(|m| m.kind == MetaKind::PageTable).unwrap().addr;
        let mut b = [0u8];
        e.untrusted().read(pt, &mut b);
        assert_ne!(b[0], 0, "the page is listed");
        e.untrusted().write(pt, &[0]);
        if !skip {
            // The next use re-adds the page's chunks: they are in WRITEHASH twice.
            let _ = read(&mut e, 0x4000 + 4096, 4);
        }
        let err = e.check(0);
        assert!(err.is_err(), "page table {} not noticed", if skip { "skip" } else { "double add" });
    }
}

/// `engine`, with pages 0x4000.. of memory from before the trace (`Engine::set_predating`)
/// written in: lhash adds them untimed.
fn predating(enc: &str) -> Engine {
    let mut e = engine("lhash", enc);
    e.set_predating(true);
    for k in 0..8u64 {
        e.write(0x4000 + k * 4096, &pattern(k, 64), 0).unwrap();
    }
    e.set_predating(false);
    e
}

#[test]
fn lhash_sets_up_pages_from_before_the_trace_untimed_and_still_checks_them() {
    for enc in ["none", "otp"] {
        let mut e = predating(enc);
        assert_eq!(stat(&e, "lhash.pages_added"), 8.0, "{}", enc);
        assert_eq!(stat(&e, "lhash.pages_predating"), 8.0, "{}", enc);
        // 8 pages of 64 zero chunks were written, but only the reads of the 8 lines written
        // were booked on the bus (the page table, stamps and chunks moved unbooked).
        assert!(stat(&e, "mem.write_bytes") < 4096.0, "{}: {}", enc, stat(&e, "mem.write_bytes"));
        e.flush(0).unwrap();
        for k in 0..8u64 {
            assert_eq!(read(&mut e, 0x4000 + k * 4096, 64).unwrap(), pattern(k, 64), "{}", enc);
        }
        assert_eq!(e.check(0).unwrap(), 8 * 64, "{}: every chunk of every page is checked", enc);
        // The same pages added by the program itself are booked: 64 chunks each.
        let mut t = written("lhash", enc);
        assert!(stat(&t, "mem.write_bytes") >= 40.0 * 4096.0, "{}", enc);
        assert_eq!(stat(&t, "lhash.pages_predating"), 0.0, "{}", enc);
        t.check(0).unwrap();
    }
}

#[test]
fn lhash_notices_tampering_with_a_page_set_up_before_the_trace() {
    for enc in ["none", "otp"] {
        // Data written there, and a chunk never written since it was added.
        for (addr, n) in [(0x4000 + 3 * 4096, 64), (0x4000 + 3 * 4096 + 1024, 16)] {
            let mut e = predating(enc);
            e.flush(0).unwrap();
            flip(&mut e, addr + 5, 1);
            assert!(noticed(&mut e, addr, n), "{} at 0x{:x}", enc, addr);
        }
        // Dropping the page from the untrusted page table: added twice, or skipped.
        let mut e = predating(enc);
        e.flush(0).unwrap();
        let pt = e.integrity().metadata_of(0x4000).iter().find(|m| m.kind == MetaKind::PageTable).unwrap().addr;
        e.untrusted().write(pt, &[0]);
        assert!(e.check(0).is_err(), "{}", enc);
    }
}

#[test]
fn lhash_passes_repeated_checks_on_honest_memory() {
    let mut e = written("lhash", "otp");
    for round in 0..3u64 {
        for k in 0..40u64 {
            let a = 0x4000 + k * 4096 + round * 64;
            e.write(a, &pattern(k + round, 64), 0).unwrap();
        }
        assert!(e.check(0).unwrap() > 0, "round {}", round);
    }
    for k in 0..40u64 {
        assert_eq!(read(&mut e, 0x4000 + k * 4096 + 128, 64).unwrap(), pattern(k + 2, 64));
    }
}

#[test]
fn naive_and_chash_agree_on_every_attack_outcome_but_naive_reads_whole_paths() {
    let mut s = crate::Stats::default();
    let mut e = written("naive", "none");
    e.reset_stats();
    read(&mut e, 0x4000 + 7 * 4096, 8).unwrap();
    e.stats(&mut s);
    let levels = s.get_f64("naive.levels").unwrap();
    assert_eq!(s.get_f64("naive.hash_loads").unwrap(), levels - 1.0, "one miss reads every internal level");
    assert!(s.get_f64("l2.meta_misses").unwrap() == 0.0, "naive never caches tree chunks");
}

#[test]
fn naive_remembers_hashes_only_of_the_exact_bytes_it_checked() {
    // Every node of the path is checked (and remembered) by a first read; a bit flipped in
    // any of them afterwards must still be noticed on the next read.
    let path: Vec<u64> = engine("naive", "none").integrity().metadata_of(0x8000).into_iter().map(|m| m.addr).collect();
    assert!(path.len() >= 8);
    for node in path {
        let mut e = engine("naive", "none");
        e.write(0x8000, &pattern(3, 64), 0).unwrap();
        e.flush(0).unwrap();
        assert_eq!(read(&mut e, 0x8000, 64).unwrap(), pattern(3, 64));
        e.flush(0).unwrap();
        flip(&mut e, node + 9, 3);
        let err = read(&mut e, 0x8000, 64).unwrap_err();
        assert!(err.what.contains("tree chunk") || err.addr == 0x8000, "node 0x{:x}: {}", node, err);
    }
}

#[test]
fn space_overheads_follow_000_section_6_2_1() {
    let so = |i: &str| {
        let mut s = crate::Stats::default();
        engine(i, "none").stats(&mut s);
        s.get_f64("integrity.space_overhead").unwrap()
    };
    assert!((so("chash") - 1.0 / 3.0).abs() < 0.01, "4-ary tree: 1/(m-1) = 33%");
    assert!((so("lhash") - 4.0 / 64.0).abs() < 1e-9, "B_TS/B_chunk = 6.25%");
    assert!((so("mac") - 16.0 / 64.0).abs() < 1e-9);
}

fn stat(e: &Engine, k: &str) -> f64 {
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    s.get_f64(k).unwrap_or_else(|| panic!("no stat {}", k))
}

#[test]
fn mhash_checks_whole_chunks_and_caches_the_sibling_block() {
    let mut e = written("mhash", "none");
    e.reset_stats();
    read(&mut e, 0x4000 + 5 * 4096, 8).unwrap(); // block 0 of a two-block chunk
    assert_eq!(stat(&e, "l2.misses"), 1.0);
    read(&mut e, 0x4000 + 5 * 4096 + 64, 8).unwrap(); // its sibling came along
    assert_eq!(stat(&e, "l2.misses"), 1.0, "the sibling block was cached by the chunk check");
    assert!((stat(&e, "mhash.space_overhead") - 1.0 / 7.0).abs() < 0.01, "8-ary tree over 128-B chunks");
}

#[test]
fn mhash_write_back_updates_the_mac_from_the_old_block_alone() {
    let mut e = written("mhash", "otp");
    read(&mut e, 0x4000 + 9 * 4096, 8).unwrap();
    e.reset_stats();
    e.write(0x4000 + 9 * 4096, b"changed", 0).unwrap();
    e.flush(0).unwrap();
    assert!(stat(&e, "mhash.old_block_reads") >= 1.0);
    assert!(stat(&e, "mhash.mac_updates") >= 1.0);
    assert_eq!(read(&mut e, 0x4000 + 9 * 4096, 7).unwrap(), b"changed");
    assert_eq!(read(&mut e, 0x4000 + 9 * 4096 + 64, 8).unwrap(), vec![0u8; 8], "the untouched sibling still verifies");
}

#[test]
fn mhash_notices_an_old_block_tampered_before_its_write_back() {
    let mut e = written("mhash", "none");
    read(&mut e, 0x4000 + 11 * 4096, 8).unwrap();
    e.write(0x4000 + 11 * 4096, b"new", 0).unwrap();
    // The write-back reads the old value unchecked: corrupt it first.
    flip(&mut e, 0x4000 + 11 * 4096 + 40, 1);
    e.flush(0).unwrap();
    assert!(read(&mut e, 0x4000 + 11 * 4096, 3).is_err(), "the MAC no longer matches memory");
}

#[test]
fn an_ocb_tag_mismatch_is_an_integrity_error_on_the_read_even_without_integrity() {
    let mut e = engine("none", "ocb");
    e.write(0x6000, b"authenticated", 0).unwrap();
    e.flush(0).unwrap();
    flip(&mut e, 0x6000 + 3, 5);
    let err = read(&mut e, 0x6000, 13).unwrap_err();
    assert_eq!(err.addr & !63, 0x6000, "{}", err);
    // Untampered lines still read back.
    e.write(0x7000, b"fine", 0).unwrap();
    e.flush(0).unwrap();
    assert_eq!(read(&mut e, 0x7000, 4).unwrap(), b"fine");
}

#[test]
fn data_waits_for_its_check_only_where_the_machine_says_so() {
    // 003 §4.3: chash returns data for speculative use while the check completes; with
    // speculation.use_before_verify off (001, 004: issue only after authentication) the same
    // miss is usable only once verified.
    let t = 1000;
    let miss = |spec: &str| {
        let mut e = Engine::new(&params("chash", "otp", &[&format!("speculation.use_before_verify={}", spec)]), 7).unwrap();
        e.write(0x10_0000, b"x", 0).unwrap();
        e.flush(0).unwrap();
        let o = e.access(0x10_0000, AccessKind::Load, t).unwrap();
        assert!(!o.hit);
        o
    };
    let (early, late) = (miss("true"), miss("false"));
    assert_eq!(early.verified, late.verified, "the check itself takes as long either way");
    assert!(early.ready < early.verified, "chash's check outlasts the data's arrival: {:?}", early);
    assert_eq!(late.ready, late.verified);
}

#[test]
fn accesses_are_counted_by_kind() {
    let mut e = engine("none", "none");
    for (k, kind) in [(0u64, AccessKind::Fetch), (1, AccessKind::Load), (2, AccessKind::Store), (3, AccessKind::Walk), (4, AccessKind::Load)] {
        e.access(k * 4096, kind, 0).unwrap();
        e.settle().unwrap();
    }
    e.access(4096, AccessKind::Load, 0).unwrap();
    let mut s = crate::Stats::default();
    e.stats(&mut s);
    let get = |k: &str| s.get_f64(k).unwrap();
    assert_eq!((get("l2.fetch_accesses"), get("l2.fetch_misses")), (1.0, 1.0));
    assert_eq!((get("l2.load_accesses"), get("l2.load_misses")), (3.0, 2.0));
    assert_eq!((get("l2.store_accesses"), get("l2.walk_accesses")), (1.0, 1.0));
    assert_eq!(get("l2.accesses"), 6.0);
    assert_eq!(get("l2.misses"), 5.0);
}

/// A guess of a line's L2 slot (`cached_at`, the core's L1 lines remember one) that has gone
/// stale — its line evicted, another line in that slot — is refused: the bytes are the
/// right line's, and the guess moves to its slot.
#[test]
fn a_stale_slot_guess_never_gives_another_lines_bytes() {
    let mut e = engine("none", "none");
    // 16 KiB, 4 ways of 64 B: lines 4 KiB apart share a set.
    let (a, stride) = (0x10_0000u64, 4096u64);
    e.write(a, &[0xaa; 8], 0).unwrap();
    e.access(a, AccessKind::Load, 0).unwrap();
    let mut guess = secmem_timing::NO_SLOT;
    assert_eq!(e.cached_at(a, 8, &mut guess), &[0xaa; 8]);
    e.settle().unwrap();
    let stale = guess;
    for k in 1..=4u64 {
        e.write(a + k * stride, &[k as u8; 8], 0).unwrap();
    }
    let b = (1..=4u64).map(|k| a + k * stride).find(|&b| e.machine().l2.tags.holds(stale, b)).expect("another line took the slot");
    // b most recent, so a's refill takes another slot and b keeps the stale one.
    read(&mut e, b, 8).unwrap();
    e.access(a, AccessKind::Load, 0).unwrap();
    assert!(e.machine().l2.tags.holds(stale, b) && !e.machine().l2.tags.holds(stale, a));
    let mut g = stale;
    assert_eq!(e.cached_at(a, 8, &mut g), &[0xaa; 8], "a's bytes, not b's");
    assert_ne!(g, stale);
    assert!(e.machine().l2.tags.holds(g, a));
    // And the same for a write: it lands in a's line, b is untouched.
    let mut g = stale;
    e.write_cached_at(a, &[0x55; 8], &mut g);
    e.settle().unwrap();
    assert_eq!(read(&mut e, a, 8).unwrap(), vec![0x55; 8]);
    assert_eq!(read(&mut e, b, 8).unwrap(), vec![((b - a) / stride) as u8; 8]);
}

#[test]
fn only_a_failed_check_is_called_an_integrity_failure() {
    // A nonce counter that runs out is no tamper (issue 33): two write-backs of 1-bit counters.
    let mut e = Engine::new(&params("none", "ocb", &["ocb.counter_bits=1"]), 1).unwrap();
    e.write(0x1000, &pattern(1, 64), 0).unwrap();
    e.flush(0).unwrap();
    e.write(0x1000, &pattern(2, 64), 0).unwrap();
    let err = e.flush(0).unwrap_err();
    assert_eq!(err.kind, crate::Failure::Exhausted, "{}", err);
    assert!(err.to_string().starts_with("cannot write back 0x1000: ocb: the nonce counter is exhausted"), "{}", err);
    // A suspended MECU refuses every line: unavailable, not tampered.
    let mut e = Engine::new(&params("none", "mecu", &[]), 1).unwrap();
    e.write(0x1000, &pattern(1, 64), 0).unwrap();
    e.suspend().unwrap();
    let mut b = [0u8; 8];
    let err = e.read(0x1000, &mut b, 0).unwrap_err();
    assert_eq!(err.kind, crate::Failure::Unavailable, "{}", err);
    assert!(!err.to_string().contains("integrity check failed"), "{}", err);
    // A tamper still is.
    let mut e = Engine::new(&params("chash", "none", &[]), 1).unwrap();
    e.write(0x1000, &pattern(1, 64), 0).unwrap();
    e.flush(0).unwrap();
    e.untrusted().write(0x1000, &[0xFF]);
    let err = e.read(0x1000, &mut b, 0).unwrap_err();
    assert!(err.is_tamper() && err.to_string().starts_with("integrity check failed at 0x1000"), "{}", err);
}

/// Memory set up untimed (`Engine::set_up`, a lazily set-up loader image) under every pair:
/// it reads back exactly, before and after a flush, whole lines and parts of lines, among
/// lines the run wrote itself; the set-up books no time and moves no counted byte; and a
/// changed bit of a line so set up is caught as the pair declares for any line.
#[test]
fn memory_set_up_untimed_reads_back_exactly_and_a_tamper_with_it_is_caught_as_declared() {
    use crate::decl::Detection;
    let counted = ["l2.accesses", "l2.misses", "l2.meta_accesses", "l2.data_writebacks", "mem.read_bytes", "mem.write_bytes", "mem.reads", "aes.units", "hash.ops"];
    for (integ, enc) in crate::registry::pair_names() {
        let g = crate::registry::guarantees(&params(integ, enc, &[])).unwrap();
        let mut e = engine(integ, enc);
        let line = e.line() as usize;
        // The run's own lines, some still cached and dirty, beside the set-up.
        e.write(0x4_0000 - 3 * line as u64, &pattern(99, 5 * line), 1000).unwrap();
        let before: Vec<f64> = counted.iter().map(|k| stat(&e, k)).collect();
        let busy = e.busy_until();
        let base = 0x4_0000u64;
        let lines: Vec<Vec<u8>> = (0..12u64).map(|k| pattern(k + 1, line)).collect();
        for (k, l) in lines.iter().enumerate() {
            e.set_up(base + (k * line) as u64, l, 2000).unwrap();
        }
        // Part of a line set up already, and part of one never written.
        e.set_up(base + 5, &[0xEE; 9], 2000).unwrap();
        e.set_up(base + 64 * line as u64 + 7, &[0xDD; 3], 2000).unwrap();
        let after: Vec<f64> = counted.iter().map(|k| stat(&e, k)).collect();
        assert_eq!(before, after, "{}+{}: the set-up was counted ({:?})", integ, enc, counted);
        assert_eq!(e.busy_until(), busy, "{}+{}: the set-up booked time", integ, enc);
        let mut want: Vec<u8> = lines.concat();
        want[5..14].fill(0xEE);
        let mut part = vec![0u8; line];
        part[7..10].fill(0xDD);
        for round in 0..2 {
            assert_eq!(read(&mut e, base, want.len()).unwrap(), want, "{}+{} round {}", integ, enc, round);
            assert_eq!(read(&mut e, base + 64 * line as u64, line).unwrap(), part, "{}+{} round {}", integ, enc, round);
            assert_eq!(read(&mut e, base - 3 * line as u64, 3 * line).unwrap(), pattern(99, 5 * line)[..3 * line], "{}+{}", integ, enc);
            e.flush(0).unwrap();
        }
        e.check(0).unwrap_or_else(|err| panic!("{}+{}: {}", integ, enc, err));
        // The adversary flips a bit of a line that was only ever set up (never cached).
        let mut e = engine(integ, enc);
        e.set_up(base, &lines[0], 0).unwrap();
        e.set_up(base + line as u64, &lines[1], 0).unwrap();
        // A scheme that checks lines together (mhash) cached the line while setting up its
        // neighbour: it reaches memory, to be tampered with, when written back.
        if e.machine().l2.tags.find(base + line as u64).is_some() {
            e.flush(0).unwrap();
        }
        crate::testutil::flip(&mut e, base + line as u64 + 3);
        let r = read(&mut e, base + line as u64, line);
        match g.tamper {
            Detection::Access => assert!(r.is_err(), "{}+{}: tampered set-up line read as {:?}", integ, enc, r),
            Detection::Check => assert!(r.is_err() || e.check(0).is_err(), "{}+{}: not caught at the check", integ, enc),
            Detection::Never => {}
        }
    }
}


/// `Engine::set_up` books no time on the bus or any cipher engine, a scheme's own included
/// (tdes's TDES pipelines): a read of another page right after it has its data when it would
/// on a machine without it. (Its check may end sooner: tree nodes the set-up read, sgx's,
/// stay cached.)
#[test]
fn memory_set_up_leaves_every_engine_idle() {
    for (integ, enc) in crate::registry::pair_names().into_iter().filter(|&(i, _)| i == "none") {
        let outcome = |set_up: bool| {
            let mut e = engine(integ, enc);
            let line = e.line() as usize;
            if set_up {
                for k in 0..64u64 {
                    e.set_up(0x10_0000 + k * line as u64, &pattern(k, line), 0).unwrap();
                }
            }
            let o = e.access(0x80_0000, AccessKind::Load, 0).unwrap();
            (o.ready, e.settle().unwrap())
        };
        assert_eq!(outcome(true), outcome(false), "none+{}", enc);
    }
}

/// A checkpoint's prewarm taken as state (`Engine::set_installing`) leaves the L2 exactly as
/// reading the same lines through the checks does — the same data and tree lines, in the same
/// recency order, as dirty — and the same bytes in every data line, without a check or a
/// write-back; memory stays consistent with the tree (a full check passes), and a line
/// tampered with in memory after the install is caught when it is read from there, against
/// the tree chunks the install brought in.
#[test]
fn a_prewarm_installed_as_state_leaves_the_l2_as_checked_reads_do_and_tampering_after_it_is_caught() {
    // 700 lines spread over memory (a 256-line L2): their tree paths share some chunks.
    let addr = |k: u64| 0x10_0000 + (k * 37 % 4096) * 64 + (k / 350) * 0x80_0000;
    let set_up = || {
        let mut e = engine("chash", "otp");
        for k in 0..700 {
            e.write(addr(k), &pattern(k, 64), 0).unwrap();
        }
        e.flush(0).unwrap();
        e
    };
    // Reads, and stores of the bytes memory holds (a prewarm's dirty lines), displacing
    // dirty data and tree lines many times over.
    let prewarm = |e: &mut Engine| {
        for k in (0..700).rev().chain(0..300) {
            if k % 3 == 0 {
                e.write(addr(k), &pattern(k, 64), 0).unwrap();
            } else {
                assert_eq!(read(e, addr(k), 64).unwrap(), pattern(k, 64), "line {k}");
            }
        }
    };
    let (mut replayed, mut installed) = (set_up(), set_up());
    prewarm(&mut replayed);
    assert!(installed.set_installing(true));
    prewarm(&mut installed);
    installed.set_installing(false);
    let (r, i) = (replayed.machine().l2.lines_by_recency(), installed.machine().l2.lines_by_recency());
    assert!(i.iter().filter(|l| l.1).count() > 20 && i.iter().filter(|l| l.2).count() > 20, "tree lines and dirty lines in the L2");
    assert_eq!(r, i, "the same lines, order and dirtiness");
    let bytes = |e: &Engine, a: u64| e.cached(a, 64).to_vec();
    for &(a, meta, _) in &i {
        if !meta {
            assert_eq!(bytes(&installed, a), bytes(&replayed, a), "data line {a:#x}");
        }
    }
    let stat = |e: &Engine, k: &str| crate::testutil::stat(e, k);
    assert!(stat(&replayed, "chash.checks") > stat(&installed, "chash.checks") + 500.0, "the install checks nothing");
    assert!(stat(&installed, "otp.writes") < stat(&replayed, "otp.writes"), "nor writes back");
    // A line out of the L2 whose parent chunk the install brought in: tampered with in
    // memory now, it is caught when read.
    let k = (0..700)
        .find(|&k| {
            let m = installed.machine();
            m.l2.tags.find(addr(k)).is_none() && installed.metadata_of(addr(k)).first().is_some_and(|p| m.l2.tags.find(p.addr).is_some())
        })
        .expect("a line out of the L2 whose parent is in");
    flip(&mut installed, addr(k) + 5, 2);
    assert!(read(&mut installed, addr(k), 64).is_err(), "tampering after the install is caught");
    flip(&mut installed, addr(k) + 5, 2);
    assert_eq!(read(&mut installed, addr(k), 64).unwrap(), pattern(k, 64));
    installed.check(0).expect("memory and tree consistent after the install");
    // A scheme that does not declare it reads the prewarm through its checks.
    assert!(!engine("mhash", "otp").set_installing(true));
}
