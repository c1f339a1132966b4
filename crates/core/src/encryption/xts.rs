//! xts: AES-XTS with the physical address as tweak and a key per key ID, as the memory
//! encryption that ships in server processors does it: Intel TME/MKTME ("Memory Encryption
//! Technologies Specification", rev. 1.5: AES-XTS-128, -256 on later parts, the physical
//! address as tweak, a KeyID in the upper physical address bits selecting the key) and AMD
//! SME/SEV (Kaplan, Powell, Woller, "AMD Memory Encryption", 2016: AES with a physical
//! address tweak, a key per guest). No counters, no MACs, no tree: nothing in memory but the
//! ciphertext.
//!
//! - **Cipher**: IEEE 1619 XTS-AES (RustCrypto's `xts-mode` over `aes`), each 16-B unit of a
//!   line its own XTS data unit whose tweak is that unit's physical address (KeyID bits not
//!   included: the key already differs). Per 16-B unit rather than one data unit per line:
//!   every unit is enciphered independently under its own address, so each chunk is decrypted
//!   as it arrives off the bus, as direct.rs does, and units move on their own as in the
//!   vendors' description of an address tweak against "ciphertext block move" attacks; a
//!   per-line data unit would only add the GF(2^128) doubling between units.
//! - **Key table**: `xts.key_ids` keys (KeyID 0 the platform key), each two AES keys drawn
//!   from the run's seed, held on chip and built when first used; the page-to-KeyID map is
//!   `Machine::key_ids` (`xts.key_map`, `Engine::set_key_id`).
//! - **Timing**: the tweaks AES_K2(address) need only the address, so they are computed while
//!   the line is on its way; each chunk is then XORed, deciphered and XORed again once it has
//!   arrived (000 Fig. 7a): the whole AES latency adds to every miss, with no pad to
//!   precompute. AES-256 has 14 rounds to AES-128's 10: its units take 4/10 of `aes.latency`
//!   more, on the same pipelined engine. Writes encipher all units in parallel.
//! - **What it leaves open**: deterministic per address and key, so the same plaintext
//!   rewritten at an address gives the same ciphertext (a real leak); a changed or moved
//!   block decrypts to garbage, unnoticed; an old line put back decrypts fine (replay).
//!
//! Never-written memory is all-zero plaintext: an all-zero line of ciphertext is taken as that
//! initial state (as every scheme here takes zeros with zero metadata; XTS has no metadata).

use super::{derive_key, Encryption, EncryptionScheme, Seed};
use crate::decl::{param, Component, Coverage, Def, Guarantees, Kind, Role, stat};
use crate::error::IntegrityError;
use crate::keyid::KeyIds;
use crate::layout::{all_zero, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::port::chunk_arrivals;
use crate::stats::Stats;
use aes::cipher::{Array, KeyInit};
use secmem_timing::Cycle;
use xts_mode::{get_tweak_default, Xts128};

/// xts's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "xts",
    kind: Kind::Encryption,
    summary: "AES-XTS per 16-B unit with the physical address as tweak and a key per key ID (Intel TME/MKTME, AMD SME/SEV): no metadata, the whole AES latency adds to a miss",
    source: "IEEE 1619; Intel MKTME spec rev. 1.5; AMD memory encryption white paper 2016",
    params: &[
        param("xts.key_bits", Def::Int(128), "bits", "AES-XTS-128 (TME, MKTME, SME) or AES-XTS-256 (two 256-bit keys; 14 rounds)"),
        param("xts.key_ids", Def::Int(64), "key IDs", "keys in the on-chip key table, a power of two: log2 of it is the physical address bits the KeyID takes (MKTME)"),
        param("xts.address_bits", Def::Int(46), "bits", "physical address width the KeyID bits are taken from (MKTME: MAX_PA); what is left must hold memory.size"),
        param("xts.key_map", Def::Str(""), "START+SIZE:ID,...", "key ID of address ranges (whole pages; later ranges win; others KeyID 0), e.g. 0x100000+1MiB:2; the Python API also sets it (SecureMemory.set_key_id)"),
    ],
    stats: &[
        stat("xts.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("xts.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("xts.keyid_address_bits", "bits", "upper physical address bits the key ID takes"),
        stat("xts.keys_used", "keys", "key IDs some line was written under"),
        stat("xts.decrypt_exposed_cycles", "cycles", "decryption cycles after the line arrived, summed (nothing is precomputed)"),
        stat("xts.decrypt_exposed_per_read", "cycles", "xts.decrypt_exposed_cycles / xts.reads"),
        stat("xts.space_overhead", "fraction", "memory its metadata takes, per byte of data (none)"),
    ],
};

/// xts's registration. A key and tweak per address hide equal lines at two addresses, not a
/// rewrite; a flipped bit garbles its 16-B unit (not malleable), unnoticed; key IDs separate
/// domains.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |p| {
        Ok(Guarantees {
            confidential: true,
            hides_equal_lines: true,
            hides_rewrites: false,
            malleable: false,
            key_domains: p.u64_min("xts.key_ids", 1)? > 1,
            ..Guarantees::NONE
        })
    },
    coverage: Coverage { lays_out: &[], protects: Role::LINES, guarded: &[] },
    build: |p, m, _covered, seed| Ok(Box::new(Xts::new(p, m, seed)?)),
};

/// One key ID's XTS key pair.
trait Cipher: Send {
    fn encrypt(&self, addr: u64, buf: &mut [u8]);
    fn decrypt(&self, addr: u64, buf: &mut [u8]);
}

/// The tweak of the 16-B unit with index `i`: its physical address, little-endian (IEEE 1619's
/// data unit sequence number).
fn tweak(i: u128) -> Array<u8, aes::cipher::consts::U16> {
    get_tweak_default(i << 4)
}

impl<C> Cipher for Xts128<C>
where
    C: aes::cipher::BlockCipherEncrypt + aes::cipher::BlockCipherDecrypt + aes::cipher::BlockSizeUser<BlockSize = aes::cipher::consts::U16> + Send,
{
    fn encrypt(&self, addr: u64, buf: &mut [u8]) {
        self.encrypt_area(buf, 16, (addr >> 4) as u128, tweak);
    }

    fn decrypt(&self, addr: u64, buf: &mut [u8]) {
        self.decrypt_area(buf, 16, (addr >> 4) as u128, tweak);
    }
}

pub struct Xts {
    seed: Seed,
    key_bits: u64,
    /// The key table, by key ID: built at first use.
    keys: Vec<Option<Box<dyn Cipher>>>,
    /// Cycles AES-256's four extra rounds add to a unit.
    extra_rounds: Cycle,
    reads: u64,
    writes: u64,
    exposed: u64,
}

/// Derivation purpose of the key table's keys (each key ID and half its own).
const KEYS: u64 = 0x7e5;

impl Xts {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Xts, ConfigError> {
        let key_bits = p.u64_min("xts.key_bits", 128)?;
        if !matches!(key_bits, 128 | 256) {
            return Err(ConfigError(format!("xts.key_bits: {} is not 128 or 256", key_bits)));
        }
        let ids = KeyIds::new(p.u64_min("xts.key_ids", 1)?, p.u64_min("xts.address_bits", 0)?, m.layout.data_size, &p.str("xts.key_map")?, "xts")?;
        let n = ids.count() as usize;
        m.key_ids = ids;
        let extra_rounds = if key_bits == 256 { m.aes.latency() * 4 / 10 } else { 0 };
        Ok(Xts { seed, key_bits, keys: (0..n).map(|_| None).collect(), extra_rounds, reads: 0, writes: 0, exposed: 0 })
    }

    /// Key ID `id`'s cipher, built the first time it is used.
    fn cipher(&mut self, id: u32) -> &dyn Cipher {
        let (seed, bits) = (self.seed, self.key_bits);
        &**self.keys[id as usize].get_or_insert_with(|| {
            let part = |k: u64| derive_key(seed, KEYS ^ (u64::from(id) << 8) ^ k);
            if bits == 256 {
                let key = |a: u64| {
                    let mut k = [0u8; 32];
                    k[..16].copy_from_slice(&part(a));
                    k[16..].copy_from_slice(&part(a + 1));
                    k
                };
                Box::new(Xts128::new(aes::Aes256::new(&key(0).into()), aes::Aes256::new(&key(2).into())))
            } else {
                Box::new(Xts128::new(aes::Aes128::new(&part(0).into()), aes::Aes128::new(&part(1).into())))
            }
        })
    }

    /// How many key IDs' keys have been used.
    fn keys_used(&self) -> u64 {
        self.keys.iter().filter(|k| k.is_some()).count() as u64
    }
}

impl Encryption for Xts {
    fn name(&self) -> &'static str {
        "xts"
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let tr = m.port.read(addr, out, t);
        let n = out.len() / 16;
        // The tweaks need only the address: enciphered while the line is on its way.
        let t_tweak = m.aes.run(t, out.len() as u64);
        let mut arrive = [0; MAX_LINE / 16];
        chunk_arrivals(m.port.beat(), tr, 16, &mut arrive[..n]);
        let x = m.xor_latency;
        let t_dec = m.aes.run_each(arrive[..n].iter().map(|&a| (a + x).max(t_tweak)));
        if !all_zero(out) {
            let id = m.key_ids.of(addr);
            self.cipher(id).decrypt(addr, out);
        }
        let ready = t_dec + self.extra_rounds + x;
        self.exposed += ready.saturating_sub(tr.last);
        Ok(ready)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        let id = m.key_ids.of(addr);
        self.cipher(id).encrypt(addr, ct);
        let x = m.xor_latency;
        let t_tweak = m.aes.run(t, plain.len() as u64);
        // No chaining: every unit enters the pipeline as soon as its tweak is known.
        let tc = m.aes.run(t_tweak + x, plain.len() as u64) + self.extra_rounds + x;
        Ok(m.port.write(addr, ct, tc))
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        0.0
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        out.int("xts.reads", self.reads);
        out.int("xts.writes", self.writes);
        out.int("xts.key_bits", self.key_bits);
        out.int("xts.key_ids", u64::from(m.key_ids.count()));
        out.int("xts.keyid_address_bits", u64::from(m.key_ids.bits()));
        out.int("xts.keys_used", self.keys_used());
        out.int("xts.decrypt_exposed_cycles", self.exposed);
        out.rate("xts.decrypt_exposed_per_read", self.exposed, self.reads);
        out.float("xts.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// IEEE 1619-2018 Annex B: one data unit `ptx` with sequence number `dsn` under (key1,
    /// key2), as the `xts-mode` crate that xts enciphers lines with computes it.
    fn ieee(key1: &str, key2: &str, dsn: u128, ptx: &[u8]) -> Vec<u8> {
        let mut buf = ptx.to_vec();
        let (k1, k2) = (hex(key1), hex(key2));
        if k1.len() == 16 {
            let x = Xts128::new(aes::Aes128::new_from_slice(&k1).unwrap(), aes::Aes128::new_from_slice(&k2).unwrap());
            x.encrypt_sector(&mut buf, get_tweak_default(dsn));
            let mut back = buf.clone();
            x.decrypt_sector(&mut back, get_tweak_default(dsn));
            assert_eq!(back, ptx);
        } else {
            let x = Xts128::new(aes::Aes256::new_from_slice(&k1).unwrap(), aes::Aes256::new_from_slice(&k2).unwrap());
            x.encrypt_sector(&mut buf, get_tweak_default(dsn));
        }
        buf
    }

    #[test]
    fn ieee_1619_test_vectors() {
        // Vectors 1-3: XTS-AES-128, 32-B data units.
        assert_eq!(ieee("00000000000000000000000000000000", "00000000000000000000000000000000", 0, &[0; 32]), hex("917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e"));
        assert_eq!(ieee("11111111111111111111111111111111", "22222222222222222222222222222222", 0x33_3333_3333, &[0x44; 32]), hex("c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0"));
        assert_eq!(ieee("fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0", "22222222222222222222222222222222", 0x33_3333_3333, &[0x44; 32]), hex("af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89"));
        // Vector 10: XTS-AES-256, a 512-B data unit of bytes 0..255 twice, sequence number 0xff;
        // its first 32 B of ciphertext (whole blocks: no stealing, so they depend on nothing after).
        let ptx: Vec<u8> = (0..512).map(|i| i as u8).collect();
        let ct = ieee(
            "2718281828459045235360287471352662497757247093699959574966967627",
            "3141592653589793238462643383279502884197169399375105820974944592",
            0xff,
            &ptx,
        );
        assert_eq!(&ct[..32], &hex("1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b")[..]);
    }

    #[test]
    fn lines_round_trip_under_both_key_sizes_and_each_key_id_has_its_own_key() {
        for bits in ["128", "256"] {
            let kb = format!("xts.key_bits={}", bits);
            let mut e = crate::Engine::new(&crate::testutil::params("none", "xts", &[&kb, "xts.key_map=0x101000+4KiB:1"]), 1).unwrap();
            let line: Vec<u8> = (0..64u8).collect();
            for a in [0x10_0000u64, 0x10_1000] {
                e.write(a, &line, 0).unwrap();
            }
            e.flush(0).unwrap();
            let raw = |e: &mut crate::Engine, a: u64| {
                let mut b = [0u8; 64];
                e.untrusted().read(a, &mut b);
                b
            };
            // Key ID 0 and key ID 1 at addresses with the same offset in their pages: every
            // unit differs (a different key), and neither is the plaintext.
            let (c0, c1) = (raw(&mut e, 0x10_0000), raw(&mut e, 0x10_1000));
            assert!(c0.chunks(16).zip(c1.chunks(16)).all(|(x, y)| x != y) && c0[..] != line[..], "{}", bits);
            let mut got = [0u8; 64];
            for a in [0x10_0000u64, 0x10_1000] {
                e.read(a, &mut got, 0).unwrap();
                assert_eq!(got[..], line[..], "{} 0x{:x}", bits, a);
            }
            let mut s = crate::Stats::default();
            e.stats(&mut s);
            assert_eq!((s.get_f64("xts.key_bits"), s.get_f64("xts.keys_used"), s.get_f64("xts.keyid_address_bits")), (Some(bits.parse().unwrap()), Some(2.0), Some(6.0)));
        }
    }

    #[test]
    fn the_whole_aes_latency_adds_to_a_miss_and_aes_256_adds_its_four_rounds() {
        let exposed = |bits: &str| {
            let kb = format!("xts.key_bits={}", bits);
            let mut e = crate::Engine::new(&crate::testutil::params("none", "xts", &[&kb]), 1).unwrap();
            e.write(0x10_0000, &[5u8; 64], 0).unwrap();
            e.flush(1_000_000).unwrap();
            e.reset_stats();
            let mut b = [0u8; 64];
            e.read(0x10_0000, &mut b, 2_000_000).unwrap();
            let mut s = crate::Stats::default();
            e.stats(&mut s);
            s.get_f64("xts.decrypt_exposed_cycles").unwrap()
        };
        // suh2003: AES latency 40, an XOR on each side of it: 42 cycles after the last chunk,
        // plus the wait for the engine's next 16-B slot (3.2 B/cycle: one every 5 cycles).
        let (e128, e256) = (exposed("128"), exposed("256"));
        assert!((42.0..47.0).contains(&e128), "{}", e128);
        assert_eq!(e256 - e128, 16.0, "4/10 of the 40-cycle latency");
    }

    #[test]
    fn each_unit_is_an_xts_data_unit_tweaked_by_its_address() {
        // A line at 0x1240 under vector 2's keys: unit i is vector-style XTS of that unit alone
        // with sequence number 0x1240 + 16 i.
        let k1 = hex("11111111111111111111111111111111");
        let k2 = hex("22222222222222222222222222222222");
        let x = Xts128::new(aes::Aes128::new_from_slice(&k1).unwrap(), aes::Aes128::new_from_slice(&k2).unwrap());
        let plain: Vec<u8> = (0..64u8).collect();
        let mut line = plain.clone();
        Cipher::encrypt(&x, 0x1240, &mut line);
        for i in 0..4 {
            let unit = ieee("11111111111111111111111111111111", "22222222222222222222222222222222", 0x1240 + 16 * i as u128, &plain[16 * i..16 * i + 16]);
            assert_eq!(&line[16 * i..16 * i + 16], &unit[..], "unit {}", i);
        }
        Cipher::decrypt(&x, 0x1240, &mut line);
        assert_eq!(line, plain);
    }
}
