//! tdx: a MAC per line kept in the line's ECC bits with a TD-owner bit, as Intel TDX's
//! memory integrity does it (Intel, "Intel Trust Domain Extensions" white paper, 2023,
//! "Memory confidentiality and integrity": a 28-bit MAC over the ciphertext computed with
//! SHA-3, stored with a TD-owner bit in the ECC bits of the line, checked on every read; no
//! replay protection). No tree and no extra transfer: the bits travel on the ECC lanes of the
//! line's own beats (`Port::attach_side`).
//!
//! MAC = SHA3-256(K ‖ physical address ‖ key ID ‖ ciphertext) truncated to `tdx.mac_bits`
//! (RustCrypto's `sha3`); the owner bit is set when the line was written under a TD-private
//! key ID (at least `tdx.private_key_ids`; TDX partitions the KeyID space into shared and
//! private IDs). A read fails when the owner bit is set and the reader's key ID is shared (a
//! host or VMM reading a TD's memory; TDX returns zeros there, here the read is refused), or
//! when the MAC does not match: changed bits, a line moved to another address, or read or put
//! back under another key ID. An old line with its old bits still passes: replay is open, as
//! Intel documents.
//!
//! Key IDs come from the encryption scheme's key table (xts); under any other scheme every
//! line is key ID 0. TDX pairs its MAC with AES-XTS, which keeps nothing in memory but the
//! ciphertext. Paired with a scheme that keeps per-line metadata (random vectors, counters,
//! tags), a MAC over the ciphertext alone would leave that metadata unchecked, so there the
//! MAC covers the decrypted line instead (as mac does); so it does with a scheme that re-enciphers
//! lines on its own (the MECU's lazy re-encryption after a resume), whose new ciphertext a MAC
//! over the old would refuse. A line whose side bits and plaintext
//! are all zero is the initial all-zero memory. A MAC over the ciphertext starts on the hash
//! engine when the line has arrived, beside its decryption, as the hardware's MAC unit at
//! the memory controller works (`Port::moved_line_arrived`); a MAC over the decrypted line
//! starts when decryption hands it over. Data are usable once decrypted either way.

use super::{Integrity, IntegrityScheme, Verified};
use crate::decl::{param, Component, Coverage, Def, Detection, Guarantees, Kind, Role, stat};
use crate::encryption::{derive_key, Encryption, Seed};
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, MAX_LINE};
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::Cycle;
use sha3::{Digest, Sha3_256};

/// tdx's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "tdx",
    kind: Kind::Integrity,
    summary: "a truncated SHA-3 MAC per line over ciphertext, address and key ID with a TD-owner bit, in the line's ECC bits (Intel TDX): no extra transfer, no tree, no replay protection",
    source: "Intel TDX white paper (2023), memory integrity",
    params: &[
        param("tdx.mac_bits", Def::Int(28), "bits", "MAC width kept per line (TDX: 28); with the owner bit it must fit the line's ECC bits (8 per 64 data bits)"),
        param("tdx.bind_key_id", Def::Bool(true), "bool", "the MAC covers the key ID; false: ciphertext and address only, so a line read or put back under another key ID passes (the MAC is over ciphertext, which the wrong key does not change)"),
        param("tdx.private_key_ids", Def::Int(1), "key ID", "the first TD-private key ID: lines written under it or above get the TD-owner bit, and a read of them under a lower (shared) key ID is refused"),
    ],
    stats: &[
        stat("tdx.checks", "checks", "line MACs checked on reads"),
        stat("tdx.mac_writes", "MACs", "line MACs (and owner bits) written with their lines"),
        stat("tdx.ecc_bits_per_line", "bits", "ECC side bits used per line: the MAC and the owner bit"),
        stat("tdx.space_overhead", "fraction", "memory its metadata takes outside ECC bits, per byte of data"),
    ],
};

/// tdx's registration. The MAC binds ciphertext, address and key ID, not time.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |p| {
        let cross_domain = if p.bool("tdx.bind_key_id")? { Detection::Access } else { Detection::Never };
        Ok(Guarantees { cross_domain, ..Guarantees::detecting(Detection::Access, Detection::Access, Detection::Never) })
    },
    coverage: Coverage { lays_out: &[Role::Macs], protects: &[Role::Data], guarded: &[] },
    build: |p, m, seed| Ok(Box::new(Tdx::new(p, m, seed)?)),
};

/// Derivation purpose of the MAC key.
const MAC_KEY: u64 = 0x7d8;

pub struct Tdx {
    key: [u8; 16],
    mac_bits: u32,
    bind_key_id: bool,
    private: u32,
    side: PerLine,
    data: u64,
    /// Whether the MAC covers the ciphertext (the encryption keeps no per-line metadata), once
    /// known.
    over_ciphertext: Option<bool>,
    checks: u64,
    writes: u64,
}

impl Tdx {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Tdx, ConfigError> {
        let mac_bits = p.u64_min("tdx.mac_bits", 1)?;
        if mac_bits > 63 {
            return Err(ConfigError(format!("tdx.mac_bits: {} exceeds 63 (a 64-bit word with the owner bit)", mac_bits)));
        }
        let private = p.u64_min("tdx.private_key_ids", 0)?;
        let data = m.layout.data_size;
        let side = m.layout.ecc_per_line(Role::Macs, "tdx MACs and owner bits", data, mac_bits + 1).map_err(|e| ConfigError(format!("tdx.mac_bits: {}", e)))?;
        m.port.attach_side(side, data, m.line()).map_err(|e| ConfigError(format!("tdx: {}", e)))?;
        Ok(Tdx { key: derive_key(seed, MAC_KEY), mac_bits: mac_bits as u32, bind_key_id: p.bool("tdx.bind_key_id")?, private: private.min(u32::MAX as u64) as u32, side, data, over_ciphertext: None, checks: 0, writes: 0 })
    }

    /// The side word of a line: its MAC, and the owner bit above it.
    fn word(&self, addr: u64, key_id: u32, ct: &[u8]) -> u64 {
        let mut h = Sha3_256::new();
        h.update(self.key);
        h.update(addr.to_le_bytes());
        if self.bind_key_id {
            h.update(key_id.to_le_bytes());
        }
        h.update(ct);
        let d = h.finalize();
        let mac = u64::from_le_bytes(d[..8].try_into().unwrap()) & ((1u64 << self.mac_bits) - 1);
        mac | u64::from(key_id >= self.private) << self.mac_bits
    }

    /// Bytes hashed for a MAC of a `line`-byte line (what the hash engine is booked for).
    fn hashed(&self, line: usize) -> u64 {
        (16 + 8 + 4 + line) as u64
    }

    fn side_bytes(&self) -> usize {
        self.side.bytes as usize
    }

    /// What the MAC of the line at `addr` covers into `out`: the line just moved, as it
    /// crossed the bus, or `plain` where the encryption keeps per-line metadata.
    fn input(&mut self, m: &Machine, enc: &dyn Encryption, addr: u64, plain: &[u8], out: &mut [u8]) -> Result<(), IntegrityError> {
        if !*self.over_ciphertext.get_or_insert_with(|| enc.metadata_of(addr).is_empty() && !enc.reenciphers_in_place()) {
            out.copy_from_slice(plain);
            return Ok(());
        }
        let ct = m.port.moved_line(addr).ok_or_else(|| IntegrityError::refused(addr, "tdx: the line did not cross the port, so its ECC bits did not either"))?;
        out.copy_from_slice(ct);
        Ok(())
    }
}

impl Integrity for Tdx {
    fn name(&self) -> &'static str {
        "tdx"
    }

    fn verify(&mut self, m: &mut Machine, enc: &mut dyn Encryption, addr: u64, plain: &mut [u8], _t_req: Cycle, t_data: Cycle) -> Result<Verified, IntegrityError> {
        if addr >= self.data {
            return Ok(Verified { ready: t_data, checked: t_data });
        }
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        self.input(m, enc, addr, plain, ct)?;
        let mut b = [0u8; 8];
        let nb = self.side_bytes();
        if !m.port.read_side(addr, &mut b[..nb]) {
            return Err(IntegrityError::refused(addr, "tdx: the line's ECC bits are not beside it"));
        }
        let stored = u64::from_le_bytes(b);
        self.checks += 1;
        let key_id = m.key_ids.of(addr);
        let t_input = match self.over_ciphertext {
            Some(true) => m.port.moved_line_arrived(addr).map_or(t_data, |a| a.min(t_data)),
            _ => t_data,
        };
        let (slot, t_start) = m.read_buf.acquire(t_input);
        let h_done = m.hash.run(t_start, self.hashed(ct.len()));
        let owner = stored >> self.mac_bits & 1 == 1;
        if owner && key_id < self.private {
            m.read_buf.hold_until(slot, t_start);
            return Err(IntegrityError::refused(addr, format!("tdx: a TD-owned line read under shared key ID {}", key_id)));
        }
        let fresh = stored == 0 && all_zero(plain);
        let matched = fresh || self.word(addr, key_id, ct) == stored;
        let v = super::conclude(m, slot, t_start, matched, h_done + 1, || {
            IntegrityError::tampered(addr, format!("data does not match its MAC in the ECC bits (key ID {})", key_id))
        })?;
        // The MAC may finish before the decryption: the line is neither usable nor checked
        // before it is decrypted.
        Ok(Verified { ready: v.ready.max(t_data), checked: v.checked.max(t_data) })
    }

    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty || v.addr >= self.data {
            return super::write_back_plain(m, enc, v);
        }
        let (slot, start) = m.write_buf.acquire(v.t);
        let done = enc.write_line(m, v.addr, &v.bytes, start)?;
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..v.bytes.len()];
        self.input(m, enc, v.addr, &v.bytes, ct)?;
        let word = self.word(v.addr, m.key_ids.of(v.addr), ct);
        let nb = self.side_bytes();
        // Over the ciphertext, so after the encryption; the bits go out with the line.
        let h_done = m.hash.run(start, self.hashed(ct.len()));
        if !m.port.write_side(v.addr, &word.to_le_bytes()[..nb]) {
            return Err(IntegrityError::refused(v.addr, "tdx: the line's ECC bits are not beside it"));
        }
        self.writes += 1;
        m.write_buf.hold_until(slot, done.max(h_done));
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::Mac, self.side.addr(addr), self.side.bytes)]
    }

    /// None: the bits are in the ECC lanes, not in memory the data could use.
    fn space_overhead(&self) -> f64 {
        0.0
    }

    fn reset_stats(&mut self) {
        (self.checks, self.writes) = (0, 0);
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("tdx.checks", self.checks);
        out.int("tdx.mac_writes", self.writes);
        out.int("tdx.mac_bits", u64::from(self.mac_bits));
        out.int("tdx.ecc_bits_per_line", u64::from(self.mac_bits) + 1);
        out.float("tdx.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::params;
    use crate::Engine;
    use secmem_timing::Cycle;

    const A: u64 = 0x10_0000;

    #[test]
    fn a_td_owned_line_read_under_a_shared_key_id_is_refused_and_under_another_private_one_fails_its_mac() {
        let mut e = Engine::new(&params("tdx", "xts", &["xts.key_map=0x100000+4KiB:3"]), 1).unwrap();
        e.write(A, &[7u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        e.set_key_id(A, 4096, 0).unwrap();
        let mut b = [0u8; 64];
        let err = e.read(A, &mut b, 0).unwrap_err();
        assert!(!err.is_tamper() && err.what.contains("TD-owned line read under shared key ID 0"), "{}", err);
        e.set_key_id(A, 4096, 5).unwrap();
        let err = e.read(A, &mut b, 0).unwrap_err();
        assert!(err.is_tamper() && err.what.contains("key ID 5"), "{}", err);
        e.set_key_id(A, 4096, 3).unwrap();
        e.read(A, &mut b, 0).unwrap();
        assert_eq!(b, [7u8; 64]);
        // Shared lines carry no owner bit: the platform key reads its own.
        e.write(A + 4096, &[9u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        e.read(A + 4096, &mut b, 0).unwrap();
        assert_eq!(b, [9u8; 64]);
    }

    #[test]
    fn the_mac_and_owner_bit_must_fit_the_ecc_bits_of_a_line() {
        let err = Engine::new(&params("tdx", "xts", &["l2.line=16B"]), 1).err().unwrap().0;
        assert!(err.contains("tdx.mac_bits: 29 bits per line exceed the 16 ECC bits of a 16-B line"), "{}", err);
        let err = Engine::new(&params("tdx", "xts", &["tdx.mac_bits=64"]), 1).err().unwrap().0;
        assert!(err.contains("exceeds 63"), "{}", err);
        assert!(Engine::new(&params("tdx", "xts", &["l2.line=32B", "tdx.mac_bits=31"]), 1).is_ok());
    }

    #[test]
    fn the_mac_comes_with_the_line_at_no_extra_transfer() {
        let mut e = Engine::new(&params("tdx", "xts", &[]), 1).unwrap();
        e.write(A, &[1u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        e.reset_stats();
        let mut b = [0u8; 64];
        e.read(A, &mut b, 0).unwrap();
        let mut s = crate::Stats::default();
        e.stats(&mut s);
        assert_eq!(s.get_f64("mem.read_bytes"), Some(64.0));
        assert_eq!(s.get_f64("tdx.checks"), Some(1.0));
    }

    /// When a miss is checked, and when it is usable (data used before the check), under a
    /// given AES latency.
    fn miss_times(aes: &str) -> (Cycle, Cycle) {
        let mut e = Engine::new(&params("tdx", "xts", &[aes, "hash.latency=160"]), 1).unwrap();
        e.write(A, &[1u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        let o = e.access(A, crate::AccessKind::Load, 1_000_000).unwrap();
        assert!(!o.hit);
        (o.verified, o.ready)
    }

    #[test]
    fn the_mac_over_the_ciphertext_runs_beside_the_decryption() {
        // The hash starts when the ciphertext has arrived: a slower decryption under a
        // 160-cycle hash delays the check not at all, and never makes the data usable sooner.
        let (checked_fast, ready_fast) = miss_times("aes.latency=10");
        let (checked_slow, ready_slow) = miss_times("aes.latency=80");
        assert_eq!(checked_fast, checked_slow);
        assert!(ready_slow > ready_fast && checked_slow >= ready_slow);
        // A MAC over the decrypted line (here under otp, which keeps per-line stamps) starts
        // after the decryption: there the AES latency shows in the check.
        let e = |aes: &str| {
            let mut x = Engine::new(&params("tdx", "otp", &[aes, "hash.latency=160"]), 1).unwrap();
            x.write(A, &[1u8; 64], 0).unwrap();
            x.flush(0).unwrap();
            x.access(A, crate::AccessKind::Load, 1_000_000).unwrap().verified
        };
        assert!(e("aes.latency=400") > e("aes.latency=10"));
    }
}
