//! Every encryption scheme through the engine, and what the adversary can and cannot do to
//! each (seeds 000 §4, 004 §2–3, 002 §4–6).

use crate::encryption::{derive_key, Seed};
use secmem_crypto::Aes128;
use crate::registry::ENCRYPTION_SCHEMES;
use crate::testutil::{params, pattern};
use crate::power::PowerError;
use crate::{AccessKind, Engine, IntegrityError, Stats};

fn engine(integ: &str, enc: &str, extra: &[&str]) -> Engine {
    Engine::new(&params(integ, enc, extra), 7).unwrap()
}

fn read(e: &mut Engine, addr: u64, n: usize) -> Result<Vec<u8>, IntegrityError> {
    let mut v = vec![0u8; n];
    e.read(addr, &mut v, 0)?;
    Ok(v)
}

fn write(e: &mut Engine, addr: u64, data: &[u8]) {
    e.write(addr, data, 0).unwrap();
}

fn flush(e: &mut Engine) {
    e.flush(0).unwrap();
}

fn peek(e: &mut Engine, addr: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    e.untrusted().read(addr, &mut b);
    b
}

fn stats(e: &Engine) -> Stats {
    let mut s = Stats::default();
    e.stats(&mut s);
    s
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

const ENCRYPTED: [&str; 5] = ["direct", "otp", "ocb", "tdes", "mecu"];

#[test]
fn every_scheme_is_registered() {
    for s in ENCRYPTED {
        assert!(ENCRYPTION_SCHEMES.contains(&s), "{}", s);
        assert_eq!(engine("none", s, &[]).encryption().name(), s);
    }
}

/// Write a spread of regions (more than the L2 holds), flush, read back, audit.
#[test]
fn round_trips_under_every_encryption_and_integrity() {
    for enc in ENCRYPTED.iter().chain(&["none"]) {
        for integ in ["none", "chash"] {
            let mut e = engine(integ, enc, &[]);
            let regions: Vec<(u64, Vec<u8>)> =
                (0..48u64).map(|k| (k * 90_001 + 5, pattern(k + 11, 700 + (k as usize * 53) % 900))).collect();
            for (a, d) in &regions {
                write(&mut e, *a, d);
            }
            for (a, d) in &regions {
                assert_eq!(&read(&mut e, *a, d.len()).unwrap(), d, "{}+{} cached/evicted read at {:#x}", integ, enc, a);
            }
            flush(&mut e);
            for (a, d) in regions.iter().rev() {
                assert_eq!(&read(&mut e, *a, d.len()).unwrap(), d, "{}+{} read after flush at {:#x}", integ, enc, a);
            }
            // Untouched memory is zero; rewrites of part of a line keep the rest.
            assert_eq!(read(&mut e, 40 << 20, 100).unwrap(), vec![0u8; 100]);
            write(&mut e, regions[3].0 + 1, b"xy");
            flush(&mut e);
            let mut want = regions[3].1.clone();
            want[1..3].copy_from_slice(b"xy");
            assert_eq!(read(&mut e, regions[3].0, want.len()).unwrap(), want);
            assert!(e.check(0).unwrap() > 0);
        }
    }
}

#[test]
fn no_plaintext_is_left_in_untrusted_memory() {
    let secret = b"TOP-SECRET-TOP-SECRET-TOP-SECRET";
    for enc in ENCRYPTED {
        for integ in ["none", "chash"] {
            let mut e = engine(integ, enc, &[]);
            for k in 0..300u64 {
                write(&mut e, k * 4096 + 64, secret);
            }
            flush(&mut e);
            let size = e.layout().end();
            let pages = e.untrusted().touched_pages(0, size);
            assert!(!pages.is_empty());
            for p in pages {
                let buf = peek(&mut e, p, 4096);
                assert!(!buf.windows(8).any(|w| w == &secret[..8]), "{}+{}: plaintext in page {:#x}", integ, enc, p);
            }
            assert_eq!(read(&mut e, 299 * 4096 + 64, secret.len()).unwrap(), secret);
        }
    }
    // The check can fail: without encryption the secret is there.
    let mut e = engine("none", "none", &[]);
    write(&mut e, 64, secret);
    flush(&mut e);
    assert_eq!(&peek(&mut e, 64, 32)[..], &secret[..]);
}

/// Equal plaintexts never give equal ciphertexts at two addresses or across rewrites, nor
/// equal chunks within a line; the MECU alone repeats a rewrite's ciphertext within one
/// resume cycle, by design (002 §4.1: the adversary learns the write footprint).
#[test]
fn equal_plaintexts_give_different_ciphertexts() {
    let plain = [0x55u8; 64];
    for enc in ENCRYPTED {
        let mut e = engine("none", enc, &[]);
        write(&mut e, 0x10000, &plain);
        write(&mut e, 0x20000, &plain);
        flush(&mut e);
        let (a1, b1) = (peek(&mut e, 0x10000, 64), peek(&mut e, 0x20000, 64));
        assert_ne!(a1, b1, "{}: same plaintext at two addresses", enc);
        assert_ne!(a1, plain.to_vec(), "{}", enc);
        let chunk = if enc == "tdes" { 8 } else { 16 };
        assert_ne!(a1[..chunk], a1[chunk..2 * chunk], "{}: equal chunks of one line", enc);
        write(&mut e, 0x10000, &plain);
        flush(&mut e);
        let a2 = peek(&mut e, 0x10000, 64);
        if enc == "mecu" {
            assert_eq!(a2, a1, "mecu reuses the pad within a resume cycle");
            e.suspend().unwrap();
            e.resume().unwrap();
            write(&mut e, 0x10000, &plain);
            flush(&mut e);
            assert_ne!(peek(&mut e, 0x10000, 64), a1, "mecu: a new resume cycle, a new pad");
        } else {
            assert_ne!(a2, a1, "{}: same plaintext rewritten", enc);
        }
    }
}

/// 002 §4.3: counter-mode ciphertexts are malleable ("sell" ⊕ "sell" ⊕ "buy"); an integrity
/// scheme, or ocb's tag, detects the change.
#[test]
fn counter_mode_malleability_succeeds_without_integrity_and_is_detected_with_it() {
    let delta = xor(b"sell", b"buy!");
    let attack = |e: &mut Engine| {
        let ct = peek(e, 0x4000, 4);
        e.untrusted().write(0x4000, &xor(&ct, &delta));
    };
    for enc in ["otp", "mecu"] {
        let mut e = engine("none", enc, &[]);
        write(&mut e, 0x4000, b"sell");
        flush(&mut e);
        attack(&mut e);
        assert_eq!(read(&mut e, 0x4000, 4).unwrap(), b"buy!", "{}", enc);

        let mut e = engine("chash", enc, &[]);
        write(&mut e, 0x4000, b"sell");
        flush(&mut e);
        attack(&mut e);
        let err = read(&mut e, 0x4000, 4).unwrap_err();
        assert_eq!(err.addr, 0x4000, "{}", enc);
    }
    // ocb is its own MAC: detected with no integrity scheme at all.
    let mut e = engine("none", "ocb", &[]);
    write(&mut e, 0x4000, b"sell");
    flush(&mut e);
    attack(&mut e);
    let err = read(&mut e, 0x4000, 4).unwrap_err();
    assert!(err.what.contains("ocb tag mismatch"), "{}", err);
    // Block modes garble instead of flipping bits where the adversary wants.
    for enc in ["direct", "tdes"] {
        let mut e = engine("none", enc, &[]);
        write(&mut e, 0x4000, b"sell");
        flush(&mut e);
        attack(&mut e);
        assert_ne!(read(&mut e, 0x4000, 4).unwrap(), b"buy!", "{}", enc);
    }
}

#[test]
fn ocb_tag_detects_changes_to_line_counter_and_tag_but_not_a_replay() {
    let meta = engine("none", "ocb", &[]).encryption().metadata_of(0x8000);
    assert_eq!(meta.len(), 2);
    let targets = [("line", 0x8000 + 20), ("counter", meta[0].addr), ("tag", meta[1].addr + 3)];
    for (what, a) in targets {
        let mut e = engine("none", "ocb", &[]);
        write(&mut e, 0x8000, &pattern(5, 64));
        flush(&mut e);
        let b = peek(&mut e, a, 1);
        e.untrusted().write(a, &[b[0] ^ 0x10]);
        let err = read(&mut e, 0x8000, 64).unwrap_err();
        assert_eq!(err.addr, 0x8000, "{}", what);
        let mut s = Stats::default();
        e.stats(&mut s);
        assert_eq!(s.get_f64("ocb.tag_failures"), Some(1.0), "{}", what);
    }
    // A per-line MAC cannot tell an old (line, counter, tag) from the current one.
    let mut e = engine("none", "ocb", &[]);
    write(&mut e, 0x8000, b"balance=100");
    flush(&mut e);
    let old = e.untrusted().snapshot();
    write(&mut e, 0x8000, b"balance=000");
    flush(&mut e);
    e.untrusted().restore(&old).unwrap();
    assert_eq!(read(&mut e, 0x8000, 11).unwrap(), b"balance=100");
    // ...which a tree does.
    let mut e = engine("chash", "ocb", &[]);
    write(&mut e, 0x8000, b"balance=100");
    flush(&mut e);
    let old = e.untrusted().snapshot();
    write(&mut e, 0x8000, b"balance=000");
    flush(&mut e);
    e.untrusted().restore(&old).unwrap();
    assert!(read(&mut e, 0x8000, 11).is_err());
}

#[test]
fn metadata_lives_in_each_schemes_own_region_at_the_linear_layout() {
    for (enc, region, bytes) in [
        ("direct", "direct random vectors", 4),
        ("ocb", "ocb counters", 4),
        ("tdes", "tdes counters", 4),
        ("otp", "otp time stamps", 4),
    ] {
        let e = engine("none", enc, &[]);
        let m = e.encryption().metadata_of(0x1000);
        let base = e.layout().regions().iter().find(|r| r.name == region).unwrap().base;
        // TS_base + addr/B·B_TS (000 §5.1).
        assert_eq!(m[0].addr, base + 0x1000 / 64 * bytes, "{}", enc);
    }
}

#[test]
fn otp_time_stamp_cache_and_speculation_keep_data_right_and_start_pads_early() {
    let exercise = |opts: &[&str]| {
        let mut e = engine("chash", "otp", opts);
        for k in 0..400u64 {
            write(&mut e, k * 64 * 7, &pattern(k, 64));
        }
        for k in 0..400u64 {
            assert_eq!(read(&mut e, k * 64 * 7, 64).unwrap(), pattern(k, 64), "{:?}", opts);
        }
        flush(&mut e);
        for k in 0..400u64 {
            assert_eq!(read(&mut e, k * 64 * 7, 64).unwrap(), pattern(k, 64), "{:?} after flush", opts);
        }
        stats(&e)
    };
    let base = exercise(&[]);
    assert_eq!(base.get_f64("otp.pad_early_fraction"), Some(0.0), "off by default");
    for opts in [&["otp.ts_cache_entries=1024"][..], &["speculation.stamps=true"], &["otp.ts_cache_entries=256", "speculation.stamps=true"]] {
        let s = exercise(opts);
        assert!(s.get_f64("otp.pad_early_fraction").unwrap() > 0.05, "{:?}: {:?}", opts, s.get("otp.pad_early_fraction"));
        if opts[0].starts_with("otp.ts_cache") {
            assert!(s.get_f64("otp.ts_cache_hits").unwrap() > 0.0);
            // Hits need no bus read of the stamp.
            assert!(s.get_f64("otp.ts_bus_reads").unwrap() < base.get_f64("otp.ts_bus_reads").unwrap(), "{:?}", opts);
        }
        if opts.len() > 1 || opts[0].starts_with("speculation.stamps") {
            assert!(s.get_f64("otp.spec_hits").unwrap() > 0.0);
        }
        // Same functional work, same bus traffic for the lines themselves.
        assert_eq!(s.get_f64("otp.reads"), base.get_f64("otp.reads"), "{:?}", opts);
    }
}

#[test]
fn otp_cached_time_stamps_are_trusted_copies() {
    // The adversary changes a stamp while the processor holds it on chip: the on-chip copy
    // is used. Once no copy is on chip, the changed stamp garbles the line.
    for (entries, survives) in [("1024", true), ("0", false)] {
        let mut e = engine("none", "otp", &[&format!("otp.ts_cache_entries={}", entries)]);
        write(&mut e, 0x3000, b"stamped");
        // Evict the line (not the stamp cache): a flush drops on-chip copies, so push the
        // line out with others of its set instead.
        // (16 KiB apart: the same set of the 4-way 16 KiB L2.)
        for k in 1..=6u64 {
            write(&mut e, 0x3000 + k * 16 * 1024, b"x");
        }
        // The 32-entry stamp buffer holds the stamp's bus word too: push it out with the
        // stamps of 40 other lines, two lines (one 8-B word of stamps) apart.
        for k in 0..40u64 {
            read(&mut e, (1 << 20) + k * 128, 1).unwrap();
        }
        let ts = e.encryption().metadata_of(0x3000)[0].addr;
        let v = peek(&mut e, ts, 4);
        e.untrusted().write(ts, &[v[0] ^ 1, v[1], v[2], v[3]]);
        let got = read(&mut e, 0x3000, 7).unwrap();
        assert_eq!(got == b"stamped", survives, "ts_cache_entries={}", entries);
    }
}

#[test]
fn bad_encryption_parameters_are_refused_naming_the_key() {
    let bad = [
        ("direct", "direct.rv_bytes=3", "direct.rv_bytes"),
        ("ocb", "ocb.tag_bytes=12", "ocb.tag_bytes"),
        ("otp", "otp.ts_cache_entries=12", "otp.ts_cache_entries"),
        ("mecu", "mecu.state_bits=40", "mecu.state_bits"),
        ("mecu", "mecu.lines_per_block=0", "mecu.lines_per_block"),
        ("tdes", "tdes.latency=0", "tdes.latency"),
    ];
    for (enc, set, key) in bad {
        let err = Engine::new(&params("none", enc, &[set]), 1).err().unwrap().0;
        assert!(err.starts_with(key), "{}: {}", set, err);
    }
}

#[test]
fn direct_decryption_adds_the_aes_latency_to_every_miss_and_otp_hides_it() {
    // Fig. 7: a cold miss under each scheme on an idle machine.
    let miss = |enc: &str, extra: &[&str]| {
        let mut e = engine("none", enc, extra);
        // A line of the same page first (its stamp in another bus word), long before.
        e.access(0x9080, AccessKind::Load, 0).unwrap();
        e.access(0x9000, AccessKind::Load, 1000).unwrap().ready - 1000
    };
    let (none, direct, otp) = (miss("none", &[]), miss("direct", &[]), miss("otp", &[]));
    let spec = miss("otp", &["speculation.stamps=true"]);
    // suh2003: L2 10, memory 80, 8 beats of 5 cycles, AES 40, XOR 1.
    assert_eq!(none, 10 + 80 + 35);
    assert_eq!(direct, none + 40 + 1, "the last chunk's decryption follows its arrival");
    assert!(otp > none && otp < direct, "otp {} between none {} and direct {}", otp, none, direct);
    // A right guess (the page's stamps so far: 0, never written) has the pad ready before the
    // line, which only waits for the stamp's bus beat (fetched to confirm the guess).
    assert_eq!(spec, none + 5 + 1);
    let tdes = {
        let mut p = params("none", "tdes", &[]);
        p.set("tdes.latency", "96").unwrap();
        let mut e = Engine::new(&p, 1).unwrap();
        e.access(0x9000, AccessKind::Load, 1000).unwrap().ready - 1000
    };
    // TDES 96 cycles after the last 8-B chunk; the counter's beat (for the whitening offset,
    // computed meanwhile) holds the bus for one beat. Engines book input in slots of one unit
    // (here 8 B = 2.5 cycles), so a chunk may wait up to one slot for its start.
    let want = none + 5 + 96 + 1;
    assert!(tdes >= want && tdes <= want + 3, "tdes {} for {}", tdes, want);
}

// ---------------------------------------------------------------------------------------
// The MECU (seed 002)
// ---------------------------------------------------------------------------------------

fn mecu(integ: &str, extra: &[&str]) -> Engine {
    engine(integ, "mecu", extra)
}

fn mecu_stat(e: &Engine, k: &str) -> f64 {
    stats(e).get_f64(&format!("mecu.{}", k)).unwrap()
}

#[test]
fn mecu_state_storage_reproduces_002_table_2() {
    // 4 GiB of memory, 64-B lines, 16-bit state: 128 MB, 8 MB, 512 KB, 32 KB, 2 KB.
    for (n, bytes) in [(1u64, 128u64 << 20), (16, 8 << 20), (256, 512 << 10), (4096, 32 << 10), (65536, 2 << 10)] {
        let p = params("none", "mecu", &["memory.size=4GiB", &format!("mecu.lines_per_block={}", n)]);
        let e = Engine::new(&p, 1).unwrap();
        assert_eq!(mecu_stat(&e, "state_storage_bytes") as u64, bytes, "N = {}", n);
    }
    // §4.2's example: sharing a counter among 64 lines drops 128 MB to 2 MB.
    let e = Engine::new(&params("none", "mecu", &["memory.size=4GiB", "mecu.lines_per_block=64"]), 1).unwrap();
    assert_eq!(mecu_stat(&e, "state_storage_bytes") as u64, 2 << 20);
}

/// The lazy re-encryption rewrites a block's other lines without their write-backs: every
/// integrity scheme that pairs with the MECU still reads them back and passes its full check
/// (tdx's MAC over the ciphertext refused them until it covered the decrypted line).
#[test]
fn every_integrity_scheme_over_the_mecu_keeps_the_lines_a_resume_reencrypts() {
    let mecu_scheme = crate::registry::encryption("mecu").unwrap();
    let mut paired = 0;
    for integ in crate::registry::INTEGRITY_SCHEMES {
        if crate::registry::compatible(crate::registry::integrity(integ).unwrap(), mecu_scheme).is_err() {
            continue;
        }
        paired += 1;
        let mut e = mecu(integ, &["mecu.lines_per_block=16"]);
        for k in 0..32u64 {
            write(&mut e, k * 64, &pattern(k, 64));
        }
        flush(&mut e);
        e.suspend().unwrap();
        e.resume().unwrap();
        write(&mut e, 3 * 64, b"new");
        flush(&mut e);
        assert!(mecu_stat(&e, "reencrypted_lines") >= 15.0, "{integ}: block 0 re-encrypted");
        for k in (0..32u64).filter(|&k| k != 3) {
            assert_eq!(read(&mut e, k * 64, 64).unwrap_or_else(|err| panic!("{integ}+mecu: line {k}: {err}")), pattern(k, 64), "{integ}");
        }
        e.check(0).unwrap_or_else(|err| panic!("{integ}+mecu: the check after a re-encryption: {err}"));
    }
    assert!(paired >= 5, "only {paired} integrity schemes pair with the mecu");
}

#[test]
fn mecu_lazily_reencrypts_a_block_on_its_first_write_after_a_resume() {
    let mut e = mecu("none", &["mecu.lines_per_block=16"]);
    for k in 0..64u64 {
        write(&mut e, k * 64, &pattern(k, 64));
    }
    flush(&mut e);
    assert_eq!(mecu_stat(&e, "reencryptions"), 0.0, "state 0: memory is seeded, nothing re-encrypted");
    e.suspend().unwrap();
    e.resume().unwrap();
    // Reads do not re-encrypt.
    for k in 0..64u64 {
        assert_eq!(read(&mut e, k * 64, 64).unwrap(), pattern(k, 64));
    }
    assert_eq!(mecu_stat(&e, "reencryptions"), 0.0);
    let before: Vec<Vec<u8>> = (0..16u64).map(|k| peek(&mut e, k * 64, 64)).collect();
    // The first write to block 0 re-encrypts its 15 other lines; more writes to it do not.
    write(&mut e, 3 * 64, b"new");
    flush(&mut e);
    assert_eq!(mecu_stat(&e, "reencryptions"), 1.0);
    assert_eq!(mecu_stat(&e, "reencrypted_lines"), 15.0);
    for k in 0..16u64 {
        assert_ne!(peek(&mut e, k * 64, 64), before[k as usize], "line {} re-encrypted under the new stamp", k);
    }
    write(&mut e, 5 * 64, b"more");
    flush(&mut e);
    assert_eq!(mecu_stat(&e, "reencryptions"), 1.0);
    // Block 1 (lines 16..32) is untouched and still under the old stamp.
    assert_eq!(e.encryption().name(), "mecu");
    let m = e.mecu_offline_view();
    assert!(m.is_err(), "running: nothing to read offline");
    for k in 0..64u64 {
        let mut want = pattern(k, 64);
        if k == 3 {
            want[..3].copy_from_slice(b"new");
        }
        if k == 5 {
            want[..4].copy_from_slice(b"more");
        }
        assert_eq!(read(&mut e, k * 64, 64).unwrap(), want, "line {}", k);
    }
    assert!(mecu_stat(&e, "stall_cycles") > 15.0 * 40.0, "the processor stalls while 15 lines are read and written");
}

#[test]
fn offline_read_at_suspend_finds_no_plaintext_and_no_key() {
    let secret = b"PASSWORD=hunter2;PASSWORD=hunter2";
    let mut e = mecu("none", &[]);
    for k in 0..200u64 {
        write(&mut e, k * 4096 + 128, secret);
    }
    e.suspend().unwrap();
    let view = e.mecu_offline_view().unwrap();
    assert_eq!(view.key, None, "the key left with the removable device");
    assert_eq!(view.state_counter, None, "s is on the device too");
    let key = derive_key(Seed::fixed(7), 0x3ec0);
    let end = e.layout().end();
    for p in e.untrusted().touched_pages(0, end) {
        let buf = peek(&mut e, p, 4096);
        assert!(!buf.windows(8).any(|w| w == &secret[..8]), "plaintext in page {:#x}", p);
        assert!(!buf.windows(16).any(|w| w == key), "the key in page {:#x}", p);
    }
    // Suspended: the MECU cannot decrypt (no key), and says so.
    let mut b = [0u8; 8];
    let r = e.read(128, &mut b, 0);
    let err = r.expect_err("a read while suspended fails");
    assert!(err.what.contains("suspended"), "{}", err);
    assert_ne!(&b, &secret[..8]);
    assert!(matches!(e.suspend(), Err(PowerError::Refused(_))));
    e.resume().unwrap();
    assert_eq!(read(&mut e, 199 * 4096 + 128, secret.len()).unwrap(), secret);
    assert_eq!(mecu_stat(&e, "state"), 1.0);
}

#[test]
fn a_rollback_of_s_is_refused_on_the_device_and_gives_pad_reuse_on_the_mecu() {
    let (p1, p2) = (b"attack at dawn!!".to_vec(), b"retreat at nine!".to_vec());
    for on_device in [true, false] {
        let mut e = mecu("none", &[&format!("mecu.s_on_device={}", on_device)]);
        e.suspend().unwrap();
        e.resume().unwrap();
        write(&mut e, 0x6000, &p1);
        e.suspend().unwrap();
        let c1 = peek(&mut e, 0x6000, 16);
        let view = e.mecu_offline_view().unwrap();
        let rollback = e.mecu_set_state_counter(0);
        if on_device {
            assert_eq!(view.state_counter, None);
            assert!(rollback.unwrap_err().to_string().contains("removable"));
        } else {
            assert_eq!(view.state_counter, Some(1));
            rollback.unwrap();
        }
        e.resume().unwrap();
        write(&mut e, 0x6000, &p2);
        e.suspend().unwrap();
        let c2 = peek(&mut e, 0x6000, 16);
        let reused = xor(&c1, &c2) == xor(&p1, &p2);
        assert_eq!(reused, !on_device, "s on device: {}", on_device);
    }
}

#[test]
fn after_a_reboot_old_memory_is_garbage_not_an_old_plaintext() {
    for integ in ["none", "chash"] {
        let mut e = mecu(integ, &[]);
        let secret = pattern(9, 200);
        write(&mut e, 0x7000, &secret);
        e.suspend().unwrap();
        e.resume().unwrap();
        assert_eq!(read(&mut e, 0x7000, 200).unwrap(), secret, "a resume keeps memory readable");
        e.reboot().unwrap();
        assert_eq!(mecu_stat(&e, "state"), 0.0);
        match read(&mut e, 0x7000, 200) {
            Ok(v) => {
                assert_eq!(integ, "none", "chash must notice");
                assert_ne!(v, secret);
                assert!(xor(&v, &secret).iter().filter(|&&b| b == 0).count() < 10, "garbage, not a partial plaintext");
            }
            Err(err) => assert_eq!(integ, "chash", "{}", err),
        }
        if integ == "none" {
            // The new instance works normally. (A tree built under the old key is garbage
            // to the new instance too: it would have to be initialised again, 003 §4.6.2.)
            write(&mut e, 0x9000, b"fresh");
            flush(&mut e);
            assert_eq!(read(&mut e, 0x9000, 5).unwrap(), b"fresh");
        }
    }
}

#[test]
fn the_state_counter_runs_out_and_a_reboot_resets_it() {
    let mut e = mecu("none", &["mecu.state_bits=2"]);
    for s in 1..=3 {
        e.suspend().unwrap();
        e.resume().unwrap();
        assert_eq!(mecu_stat(&e, "state"), s as f64);
    }
    e.suspend().unwrap();
    assert!(e.resume().unwrap_err().to_string().contains("exhausted"));
    e.reboot().unwrap();
    write(&mut e, 0, b"ok");
    flush(&mut e);
    assert_eq!(read(&mut e, 0, 2).unwrap(), b"ok");
}

#[test]
fn power_management_is_refused_by_schemes_without_it() {
    for enc in ["none", "otp", "direct"] {
        let mut e = engine("none", enc, &[]);
        let err = e.suspend().unwrap_err().to_string();
        assert!(err.contains("only mecu"), "{}: {}", enc, err);
    }
}

/// 002 §6.4: the power fails at each step of a block's re-encryption. With the capacitors the
/// block is finished (every line under the one new stamp, the triggering write done); without
/// them some cuts leave lines under a stamp that is not theirs: garbage.
#[test]
fn a_power_cut_at_every_step_of_a_reencryption_loses_nothing_with_capacitors() {
    const N: u64 = 4;
    const BASE: u64 = N * 64 * 5; // block 5
    let mut garbled_without = Vec::new();
    for capacitor in [true, false] {
        let steps = mecu("none", &["mecu.lines_per_block=4"]).arm_power_cut(0).unwrap();
        assert_eq!(steps, 2 * N + 2);
        for step in 0..steps {
            let mut e = mecu("none", &["mecu.lines_per_block=4", &format!("mecu.capacitor={}", capacitor)]);
            let old: Vec<Vec<u8>> = (0..N).map(|k| pattern(k + 100, 64)).collect();
            for (k, d) in old.iter().enumerate() {
                write(&mut e, BASE + k as u64 * 64, d);
            }
            e.suspend().unwrap();
            e.resume().unwrap();
            e.arm_power_cut(step).unwrap();
            let new = pattern(999, 64);
            e.write(BASE + 2 * 64, &new, 0).unwrap();
            e.flush(0).unwrap();
            assert!(e.power_lost(), "step {}", step);
            e.restore_power().unwrap();
            let mut garbled = false;
            for k in 0..N {
                let got = read(&mut e, BASE + k * 64, 64).unwrap();
                let ok = if k == 2 && capacitor { got == new } else { got == old[k as usize] || (k == 2 && got == new) };
                if capacitor {
                    assert!(ok, "capacitor, cut at step {}: line {} lost", step, k);
                } else {
                    garbled |= !ok;
                }
            }
            if !capacitor && garbled {
                garbled_without.push(step);
            }
        }
    }
    // Without capacitors: every cut after the first other line was rewritten and before the
    // written line got its new pad leaves a mixed block (the written line itself is not
    // re-encrypted, so after the stamp update it too is under the wrong stamp).
    assert_eq!(garbled_without, (2..=2 * N + 1).collect::<Vec<_>>());
}

#[test]
fn dma_goes_through_a_second_mecu_sharing_the_stamp_table() {
    let mut e = mecu("none", &["mecu.lines_per_block=8"]);
    // Processor writes, device reads (through a dirty L2 line: coherent).
    write(&mut e, 0x1000, b"from the cpu");
    let mut b = [0u8; 12];
    e.dma_read(0x1000, &mut b, 0).unwrap();
    assert_eq!(&b, b"from the cpu");
    // Device writes (partial lines across a boundary), processor reads.
    let data = pattern(3, 150);
    e.dma_write(0x2030, &data, 0).unwrap();
    assert_eq!(read(&mut e, 0x2030, 150).unwrap(), data);
    let raw = peek(&mut e, 0x2030, 150);
    assert_ne!(raw, data, "DMA data is encrypted in memory too");
    // After a resume, a DMA write re-encrypts its block once, for both MECUs.
    e.suspend().unwrap();
    e.resume().unwrap();
    e.dma_write(0x4000, b"dma", 0).unwrap();
    assert_eq!(mecu_stat(&e, "reencryptions"), 1.0);
    write(&mut e, 0x4040, b"cpu");
    flush(&mut e);
    assert_eq!(mecu_stat(&e, "reencryptions"), 1.0, "the shared stamp is already current");
    assert_eq!(read(&mut e, 0x4000, 3).unwrap(), b"dma");
    assert_eq!(read(&mut e, 0x4040, 3).unwrap(), b"cpu");
    assert!(mecu_stat(&e, "dma_writes") >= 4.0);
    // Behind an integrity tree, DMA is refused.
    let mut e = mecu("chash", &[]);
    assert!(e.dma_write(0, b"x", 0).unwrap_err().to_string().contains("integrity"));
}

#[test]
fn timed_resume_cycles_increment_s_stall_the_core_and_record_series() {
    let mut e = mecu("none", &["mecu.resume_period=100000", "mecu.lines_per_block=64"]);
    let mut t = 0;
    let mut instr = 0;
    let mut stalls = 0;
    for k in 0..3000u64 {
        let a = (k * 64 * 37) % (8 << 20);
        let o = e.access(a, AccessKind::Load, t).unwrap();
        e.write_cached(a, &[k as u8]);
        t = o.ready.max(e.settle().unwrap()) + 20;
        instr += 50;
        if k % 5 == 0 {
            let until = e.poll(t, instr).unwrap();
            if until > t {
                stalls += 1;
                t = until;
            }
        }
    }
    let s = stats(&e);
    let resumes = s.get_f64("mecu.resumes").unwrap();
    assert!(resumes >= 3.0, "{}", resumes);
    assert_eq!(s.get_f64("mecu.state").unwrap(), resumes);
    let ipc = s.get_series("mecu.ipc_per_resume_cycle").unwrap();
    assert_eq!(ipc.len() as f64, resumes);
    assert!(ipc.iter().all(|&x| x > 0.0));
    let stall = s.get_series("mecu.stall_cycles_per_resume_cycle").unwrap();
    assert_eq!(stall[0], 0.0, "nothing is re-encrypted in the first cycle");
    assert!(stall[1..].iter().any(|&x| x > 0.0));
    assert!(stalls > 0, "poll made the core wait for re-encryptions");
    assert!(s.get_f64("mecu.time_to_quiescence_cycles").unwrap() > 0.0);
    for k in 0..3000u64 {
        let a = (k * 64 * 37) % (8 << 20);
        let mut b = [0u8; 1];
        e.read(a, &mut b, 0).unwrap();
        let last = (0..3000u64).filter(|j| (j * 64 * 37) % (8 << 20) == a).max().unwrap();
        assert_eq!(b[0], last as u8);
    }
}


// ---------------------------------------------------------------------------------------
// memory.boot_encrypted: never-written memory as a secure boot leaves it

const BOOTED: [&str; 4] = ["none", "otp", "ocb", "tdes"];

#[test]
fn boot_encrypted_memory_reads_as_zeros_holds_ciphertext_and_round_trips_under_every_integrity() {
    for enc in BOOTED {
        for integ in crate::testutil::integrities_with(enc) {
            let mut e = engine(integ, enc, &["memory.boot_encrypted=true", "tdes.chunk_mac_bytes=4", "otp.chunk_mac_bytes=4"]);
            // Never written: zeros to the program, ciphertext to the adversary (but for none).
            assert_eq!(read(&mut e, 0x30_0000, 64).unwrap(), vec![0u8; 64], "{}+{}", integ, enc);
            let raw = peek(&mut e, 0x30_0040, 64);
            assert_eq!(raw == [0u8; 64], enc == "none", "{}+{}: {:?}", integ, enc, &raw[..8]);
            // Parts of lines written into never-written pages keep the rest of each line zero.
            let regions: Vec<(u64, Vec<u8>)> = (0..8u64).map(|k| (k * 290_001 + 5, pattern(k + 3, 100 + k as usize * 37))).collect();
            for (a, d) in &regions {
                write(&mut e, *a, d);
            }
            flush(&mut e);
            for (a, d) in &regions {
                assert_eq!(&read(&mut e, *a, d.len()).unwrap(), d, "{}+{} at {:#x}", integ, enc, a);
                assert_eq!(read(&mut e, a - 5, 5).unwrap(), vec![0u8; 5], "{}+{} before {:#x}", integ, enc, a);
            }
            e.check(0).unwrap();
        }
    }
}

#[test]
fn boot_encrypted_memory_no_longer_takes_raw_zeros_for_a_never_written_line() {
    // The adversary zeroes a never-written line (and its MACs or tag): raw zeros were the
    // initial state; with a boot image they are a change that the MACs or tag catch.
    for (enc, macs) in [("tdes", "tdes.chunk_mac_bytes=4"), ("otp", "otp.chunk_mac_bytes=4"), ("ocb", "ocb.tag_bytes=8"), ("ocb", "ocb.chunk_mac_bytes=8")] {
        for boot in [false, true] {
            let b = format!("memory.boot_encrypted={}", boot);
            let mut e = engine("none", enc, &[macs, &b]);
            let a = 0x20_0000;
            for m in e.metadata_of(a) {
                e.untrusted().write(m.addr, &vec![0u8; m.len as usize]);
            }
            e.untrusted().write(a, &[0u8; 64]);
            let r = read(&mut e, a, 64);
            if boot {
                assert!(r.is_err(), "{}: a zeroed boot line passed", enc);
            } else {
                assert_eq!(r.unwrap(), vec![0u8; 64], "{}", enc);
            }
            // A bit flipped in another never-written line is caught either way.
            let mut x = [0u8; 1];
            e.untrusted().read(a + 0x1000 + 9, &mut x);
            e.untrusted().write(a + 0x1000 + 9, &[x[0] ^ 4]);
            assert!(read(&mut e, a + 0x1000, 64).is_err(), "{} boot={}: a flipped bit passed", enc, boot);
        }
    }
}

#[test]
fn speculation_matches_the_zeros_of_boot_encrypted_memory() {
    // Never-written lines of zeros: raw zeros never match a speculated ciphertext or MAC; the
    // boot image does (and test builds check each decision against real speculative work).
    for (enc, extra) in [("tdes", ["tdes.chunk_mac_bytes=4", "tdes.engines=4"]), ("otp", ["otp.chunk_mac_bytes=4", "aes.engines=4"])] {
        let mut hits = Vec::new();
        for boot in [false, true] {
            let b = format!("memory.boot_encrypted={}", boot);
            let mut e = engine("none", enc, &[extra[0], extra[1], "speculation.frequent_values=8", "memory.latency=250", &b]);
            write(&mut e, 0x100, &[0u8; 8]);
            for k in 0..200u64 {
                e.access(0x40_0000 + k * 64, AccessKind::Load, k * 1000).unwrap();
                e.settle().unwrap();
                e.track_values(0x40_0000 + k * 64, 64);
            }
            hits.push(stats(&e).get_f64("speculation.fv_hits").unwrap());
        }
        assert_eq!(hits[0], 0.0, "{}: raw zeros matched", enc);
        // Two lines share a counter (stamp) word: half the misses fetch it after their line,
        // too late for tdes's speculation, which needs R = TDES(address ‖ counter) first.
        assert!(hits[1] >= 0.5 * 1600.0, "{}: {} of 1600 zero chunks matched", enc, hits[1]);
    }
}

#[test]
fn schemes_without_a_boot_image_refuse_it_by_name() {
    for enc in ["direct", "mecu"] {
        let err = Engine::new(&params("none", enc, &["memory.boot_encrypted=true"]), 7).err().expect(enc);
        assert!(err.0.contains("memory.boot_encrypted") && err.0.contains(enc), "{}", err.0);
    }
}

#[test]
fn a_fixed_seed_keeps_its_keys_and_secret_material_gives_full_aes_keys() {
    // A simulation's seed: the splitmix64 keys every earlier run had (first key of seed 1).
    let k = derive_key(Seed::fixed(1), 1);
    assert_eq!(u64::from_le_bytes(k[..8].try_into().unwrap()), 0xe99f_f867_dbf6_82c9, "{:x?}", k);
    // Secret material: each key is AES_K(purpose), so it depends on all 128 bits of K and on
    // nothing a 64-bit seed could give.
    let secret = [0x5au8; 16];
    let mut want = [0u8; 16];
    want[..8].copy_from_slice(&0x07b0u64.to_le_bytes());
    Aes128::new(&secret).encrypt(&mut want);
    assert_eq!(derive_key(Seed::secret(secret), 0x07b0), want);
    let mut flipped = secret;
    flipped[15] ^= 1;
    assert_ne!(derive_key(Seed::secret(flipped), 0x07b0), want, "the last bit of the material counts");
    assert_ne!(derive_key(Seed::secret(secret), 0x07b1), want, "purposes get different keys");
    assert_eq!(format!("{:?}", Seed::secret(secret)), "Seed(secret)", "Debug never prints key material");
    // An engine keyed by secret material encrypts differently from every seeded one tried,
    // and the same material gives the same engine.
    let p = params("none", "otp", &[]);
    let cipher = |s: Seed| {
        let mut e = Engine::with_keys(&p, s).unwrap();
        write(&mut e, 0, &[7u8; 64]);
        flush(&mut e);
        peek(&mut e, 0, 64)
    };
    let secret_ct = cipher(Seed::secret(secret));
    assert_eq!(secret_ct, cipher(Seed::secret(secret)));
    for v in [0u64, 1, 2, Seed::secret(secret).value()] {
        assert_ne!(secret_ct, cipher(Seed::fixed(v)), "seed {}", v);
    }
}
