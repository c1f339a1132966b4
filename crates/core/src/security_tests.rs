//! The read path against an adversary who changes metadata: every outcome is correct data or
//! an `IntegrityError` for the access concerned (or what the scheme's security model allows,
//! e.g. replay under `mac`), never a panic, never a repeated (key, nonce) — the schemes
//! assert nonce uniqueness themselves in test builds.

use crate::registry::ENCRYPTION_SCHEMES;
use crate::decl::Detection;
use crate::layout::MetaKind;
use crate::testutil::{integrities_with, params, pattern};
use crate::{Engine, IntegrityError};
use std::collections::HashMap;

fn engine(integ: &str, enc: &str) -> Engine {
    engine_with(integ, enc, &[])
}

fn engine_with(integ: &str, enc: &str, extra: &[&str]) -> Engine {
    Engine::new(&params(integ, enc, extra), 7).unwrap()
}

fn read(e: &mut Engine, addr: u64, n: usize) -> Result<Vec<u8>, IntegrityError> {
    let mut v = vec![0u8; n];
    e.read(addr, &mut v, 0)?;
    Ok(v)
}

#[test]
fn a_detected_tamper_is_reported_for_its_own_access_only() {
    // The old engine parked ocb's tag failure in a side channel that the integrity scheme's
    // own failure left untaken: the next, untouched read then failed with the stale error.
    for integ in integrities_with("ocb") {
        let mut e = engine(integ, "ocb");
        e.write(0x1000, b"victim", 0).unwrap();
        e.write(0x80_0000, b"bystander", 0).unwrap();
        e.flush(0).unwrap();
        let mut b = [0u8; 1];
        e.untrusted().read(0x1000, &mut b);
        e.untrusted().write(0x1000, &[b[0] ^ 1]);
        let err = read(&mut e, 0x1000, 6).expect_err(integ);
        assert_eq!(err.addr & !63, 0x1000, "{}: {}", integ, err);
        assert_eq!(read(&mut e, 0x80_0000, 9).unwrap(), b"bystander", "{}: a stale error leaked", integ);
        assert_eq!(read(&mut e, 0x90_0000, 4).unwrap(), [0; 4], "{}", integ);
    }
}

#[test]
fn a_counter_rolled_back_while_its_line_is_cached_cannot_make_a_write_back_reuse_a_nonce() {
    // The old ocb and tdes re-read the stored counter at write-back: rolling it back while the
    // line was cached re-encrypted the unchanged half of the line to the same ciphertext, and
    // an all-ones counter panicked on overflow.
    for enc in ["ocb", "tdes"] {
        for integ in integrities_with(enc) {
            for rolled in [None, Some(u32::MAX)] {
                let mut e = engine(integ, enc);
                let a = 0x4000;
                let line: Vec<u8> = pattern(3, 64);
                e.write(a, &line, 0).unwrap();
                e.flush(0).unwrap();
                let ctr = e.metadata_of(a).into_iter().find(|m| matches!(m.kind, MetaKind::Counter(_))).unwrap().addr;
                let mut old = [0u8; 4];
                e.untrusted().read(ctr, &mut old);
                let mut ct_before = [0u8; 64];
                e.untrusted().read(a, &mut ct_before);
                // Rewrite the first half while the line is cached; meanwhile the adversary
                // sets the counter back (or to all ones).
                assert_eq!(read(&mut e, a, 64).unwrap(), line);
                let back = rolled.unwrap_or(u32::from_le_bytes(old) - 1);
                e.untrusted().write(ctr, &back.to_le_bytes());
                e.write(a, &[0xAB; 32], 0).unwrap();
                e.flush(0).unwrap();
                let mut ct_after = [0u8; 64];
                e.untrusted().read(a, &mut ct_after);
                assert_ne!(ct_before[32..], ct_after[32..], "{}+{}: the unchanged half re-encrypted alike", integ, enc);
                let mut want = line.clone();
                want[..32].fill(0xAB);
                assert_eq!(read(&mut e, a, 64).unwrap(), want, "{}+{}", integ, enc);
            }
        }
    }
}

/// A deterministic generator for the adversary's choices.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a scheme pair lets the adversary get away with on a read that does not fail.
#[derive(PartialEq, Debug)]
enum Allowed {
    /// Only the last value written (a tree over everything).
    Current,
    /// Any value ever written there (per-block MACs: replay goes unnoticed).
    Replayed,
    /// Anything, but the final log-hash check must then fail.
    UntilChecked,
    /// Anything (no protection).
    Anything,
}

/// What the pair declares (`registry::guarantees`), as what a read may return.
fn allowed(integ: &str, enc: &str, extra: &[&str]) -> Allowed {
    let g = crate::registry::guarantees(&params(integ, enc, extra)).unwrap();
    let noticed = [g.tamper, g.splice, g.replay];
    if noticed.contains(&Detection::Check) {
        Allowed::UntilChecked
    } else if noticed.iter().all(|&d| d == Detection::Access) {
        Allowed::Current
    } else if g.tamper == Detection::Access {
        Allowed::Replayed
    } else {
        Allowed::Anything
    }
}

#[test]
fn what_a_read_may_return_follows_the_seeds_security_models() {
    // The seeds' statements for the seeds' schemes, independent of the declarations
    // `allowed` derives from (a scheme beyond the seeds is held to its own declarations).
    for integ in ["none", "mac", "naive", "chash", "mhash", "lhash"] {
        for enc in ["none", "direct", "otp", "ocb", "tdes", "mecu"] {
            let want = match (integ, enc) {
                ("naive" | "chash" | "mhash", _) => Allowed::Current,
                ("lhash", _) => Allowed::UntilChecked,
                ("mac", _) | ("none", "ocb") => Allowed::Replayed,
                _ => Allowed::Anything,
            };
            assert!(allowed(integ, enc, &[]) == want, "{}+{}", integ, enc);
        }
    }
    for enc in ["tdes", "otp"] {
        let key = format!("{}.chunk_mac_bytes=4", enc);
        assert!(allowed("none", enc, &[&key]) == Allowed::Replayed, "{}", key);
    }
}

#[test]
fn random_metadata_pokes_and_rollbacks_give_correct_data_or_an_error_for_every_scheme_pair() {
    assert_eq!(random_pokes(ENCRYPTION_SCHEMES, &[]), crate::registry::pair_names().len() * 6);
}

#[test]
fn frequent_value_speculation_leaves_every_poke_detected_or_harmless() {
    // Speculation only changes when data is usable: the same pokes give the same outcomes.
    // (In test builds tdes also checks each speculative decision against real encryptions.)
    assert_eq!(random_pokes(&["tdes", "ocb", "otp"], &["speculation.frequent_values=8"]), ["tdes", "ocb", "otp"].map(|e| integrities_with(e).len()).iter().sum::<usize>() * 6);
}

#[test]
fn tdes_chunk_macs_with_mac_speculation_give_correct_data_a_replay_or_an_error() {
    // Per-chunk MACs (004 §3.3) make tdes alone detect tampering (not replay), speculating or not.
    assert_eq!(random_pokes(&["tdes"], &["tdes.chunk_mac_bytes=4"]), integrities_with("tdes").len() * 6);
    assert_eq!(random_pokes(&["tdes"], &["tdes.chunk_mac_bytes=4", "speculation.frequent_values=8"]), integrities_with("tdes").len() * 6);
}

#[test]
fn ocb_chunk_macs_with_mac_speculation_give_correct_data_a_replay_or_an_error() {
    // Per-block MACs verify ocb's lines in place of its tag (004 §3.3, Fig. 7), with re-ordering
    // bitmaps when speculating: tampering is detected, speculating or not.
    assert_eq!(random_pokes(&["ocb"], &["ocb.chunk_mac_bytes=8"]), integrities_with("ocb").len() * 6);
    assert_eq!(random_pokes(&["ocb"], &["ocb.chunk_mac_bytes=8", "speculation.frequent_values=8"]), integrities_with("ocb").len() * 6);
}

#[test]
fn otp_chunk_macs_with_mac_speculation_give_correct_data_a_replay_or_an_error() {
    // Counter mode with per-chunk MACs (004 §3.3, Fig. 8): tampering is detected, speculating or not.
    assert_eq!(random_pokes(&["otp"], &["otp.chunk_mac_bytes=4"]), integrities_with("otp").len() * 6);
    assert_eq!(random_pokes(&["otp"], &["otp.chunk_mac_bytes=4", "speculation.frequent_values=8"]), integrities_with("otp").len() * 6);
}

/// Tamper with metadata at random, keep using the memory, and check every read: correct data,
/// or what the scheme pair's security model allows, or an error. Returns the trials run.
fn random_pokes(encs: &[&str], extra: &[&str]) -> usize {
    const LINES: [u64; 6] = [0x0, 0x40, 0x1000, 0x2_0000, 0x80_0000, 0x80_0040];
    let mut trials = 0;
    for enc in encs {
        for integ in integrities_with(enc) {
            for seed in 1..=6u64 {
                trials += 1;
                let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let mut e = engine_with(integ, enc, extra);
                let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
                let mut history: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
                for (k, &a) in LINES.iter().enumerate() {
                    let v = pattern(seed * 100 + k as u64, 64);
                    e.write(a, &v, 0).unwrap();
                    history.entry(a).or_default().push(v.clone());
                    model.insert(a, v);
                }
                e.flush(0).unwrap();
                let early = e.untrusted().snapshot();
                let mut early_mem = crate::UntrustedMemory::new(e.untrusted().size());
                early_mem.restore(&early).unwrap();
                // Rewrite some lines, cache others, then tamper while they are cached.
                for _ in 0..3 {
                    let a = LINES[dice.below(LINES.len() as u64) as usize];
                    let v = pattern(dice.next(), 64);
                    e.write(a, &v, 0).unwrap();
                    history.entry(a).or_default().push(v.clone());
                    model.insert(a, v);
                }
                e.flush(0).unwrap();
                for &a in &LINES[..3] {
                    let _ = read(&mut e, a, 64).unwrap();
                }
                let mut failed = None;
                for _ in 0..4 {
                    let a = LINES[dice.below(LINES.len() as u64) as usize];
                    let md = e.metadata_of(a);
                    if md.is_empty() {
                        break;
                    }
                    let m = md[dice.below(md.len() as u64) as usize];
                    let mut bytes = vec![0u8; m.len as usize];
                    match dice.below(3) {
                        0 => bytes.fill(0xFF),
                        1 => bytes.iter_mut().for_each(|b| *b = dice.next() as u8),
                        _ => early_mem.read(m.addr, &mut bytes),
                    }
                    e.untrusted().write(m.addr, &bytes);
                    // Keep using the memory: writes to cached and uncached lines, reads.
                    let w = LINES[dice.below(LINES.len() as u64) as usize];
                    let v = pattern(dice.next(), 16);
                    match e.write(w, &v, 0) {
                        Ok(_) => {
                            let mut line = model[&w].clone();
                            line[..16].copy_from_slice(&v);
                            history.entry(w).or_default().push(line.clone());
                            model.insert(w, line);
                        }
                        Err(err) => {
                            failed = Some(err);
                            break;
                        }
                    }
                }
                if failed.is_none() {
                    if let Err(err) = e.flush(0) {
                        failed = Some(err);
                    }
                }
                let mut wrong = false;
                if failed.is_none() {
                    for &a in &LINES {
                        match read(&mut e, a, 64) {
                            Ok(v) if v == model[&a] => {}
                            Ok(v) => {
                                let how = allowed(integ, enc, extra);
                                assert!(
                                    how == Allowed::Anything
                                        || how == Allowed::UntilChecked
                                        || (how == Allowed::Replayed && history[&a].contains(&v)),
                                    "{}+{} seed {}: read of {:#x} returned data never written there",
                                    integ,
                                    enc,
                                    seed,
                                    a
                                );
                                wrong = true;
                            }
                            Err(err) => {
                                assert!(!err.what.is_empty());
                                break;
                            }
                        }
                    }
                }
                if wrong && allowed(integ, enc, extra) == Allowed::UntilChecked {
                    assert!(e.check(0).is_err(), "{}+{} seed {}: wrong data and a passing check", integ, enc, seed);
                }
            }
        }
    }
    trials
}

#[test]
fn a_tampered_line_of_frequent_values_is_still_detected_under_speculation() {
    // The line is all frequent values (zeros), so its chunks would be speculation hits; a
    // flipped bit must still fail the scheme's check, never pass as the speculated value.
    let at_access: Vec<&str> =
        integrities_with("tdes").into_iter().filter(|i| crate::registry::guarantees(&params(i, "tdes", &[])).unwrap().tamper == Detection::Access).collect();
    assert!(at_access.len() >= 4, "{:?}", at_access);
    for integ in at_access {
        let mut e = engine_with(integ, "tdes", &["speculation.frequent_values=8"]);
        e.write(0x3000, &[0u8; 64], 0).unwrap();
        e.write(0x3040, &[0u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        let mut b = [0u8; 1];
        e.untrusted().read(0x3008, &mut b);
        e.untrusted().write(0x3008, &[b[0] ^ 0x80]);
        let err = read(&mut e, 0x3000, 64).expect_err(integ);
        assert_eq!(err.addr & !63, 0x3000, "{}: {}", integ, err);
        let mut s = crate::Stats::default();
        e.stats(&mut s);
        assert!(s.get_f64("speculation.fv_frequent_chunks").unwrap() > 0.0, "{}: nothing was speculated", integ);
    }
}
