//! ocb: OCB3 authenticated encryption of every line (seed 004 §2.1, Fig. 1; RFC 7253), with
//! RustCrypto's `ocb3` over AES-128.
//!
//! The nonce is the line address ‖ a per-line counter incremented on each dirty eviction
//! (004: "the nonce associated with dynamic data blocks is incremented each time the
//! corresponding dirty data block is evicted"), so equal plaintexts never give equal
//! ciphertexts at two addresses or across rewrites. Counters (4 B) and tags
//! (`ocb.tag_bytes`) live in untrusted memory at linear layouts (000 §5.1). The tag is checked
//! on every read, so OCB is also the block's MAC: a line, counter or tag changed by the
//! adversary fails the check and the read reports an `IntegrityError` (through
//! `Encryption::take_error`). Like any per-line MAC it does not detect the replay of an old
//! (line, counter, tag) triple: that needs a tree.
//!
//! Timing: the counter is fetched first; the nonce-dependent offset (one AES) is computed when
//! it arrives; each chunk is deciphered when it has arrived and its offset is known (OCB is
//! fully parallelizable, 004 Table 1) and the tag needs one more AES over the checksum after
//! the last chunk. Data may be used once deciphered, like chash's speculative use; the check's
//! completion is what a barrier waits for (`Machine::note_check`).
//!
//! A line whose counter, tag and bytes are all zero is the all-zero initial memory.

use super::{chunk_arrivals, derive_key, Encryption};
use crate::wordbuf::WordBuffer;
use crate::integrity::chash::MAX_LINE;
use crate::integrity::IntegrityError;
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use aes::cipher::consts::{U12, U16, U8};
use ocb3::aead::AeadInOut;
use ocb3::{KeyInit, Ocb3};
use secmem_timing::Cycle;

const B_CTR: u64 = 4;

/// OCB3-AES128 with a 96-bit nonce and a 64- or 128-bit tag (the tag length is part of
/// OCB3's nonce formatting, so the two are different functions, not one truncated).
#[derive(Clone)]
pub enum OcbAes {
    Tag8(Ocb3<aes::Aes128, U12, U8>),
    Tag16(Ocb3<aes::Aes128, U12, U16>),
}

impl OcbAes {
    pub fn new(key: &[u8; 16], tag_bytes: usize) -> Option<OcbAes> {
        match tag_bytes {
            8 => Some(OcbAes::Tag8(Ocb3::new(key.into()))),
            16 => Some(OcbAes::Tag16(Ocb3::new(key.into()))),
            _ => None,
        }
    }

    pub fn tag_bytes(&self) -> usize {
        match self {
            OcbAes::Tag8(_) => 8,
            OcbAes::Tag16(_) => 16,
        }
    }

    /// Encrypt `buf` in place with associated data `ad`; the tag goes to `tag`.
    pub fn encrypt(&self, nonce: &[u8; 12], ad: &[u8], buf: &mut [u8], tag: &mut [u8]) {
        match self {
            OcbAes::Tag8(c) => tag.copy_from_slice(&c.encrypt_inout_detached(nonce.into(), ad, buf.into()).expect("line fits")),
            OcbAes::Tag16(c) => tag.copy_from_slice(&c.encrypt_inout_detached(nonce.into(), ad, buf.into()).expect("line fits")),
        }
    }

    /// Decrypt `buf` in place; false (and `buf` zeroed) if the tag does not match.
    pub fn decrypt(&self, nonce: &[u8; 12], ad: &[u8], buf: &mut [u8], tag: &[u8]) -> bool {
        let ok = match self {
            OcbAes::Tag8(c) => c.decrypt_inout_detached(nonce.into(), ad, (&mut *buf).into(), tag.try_into().unwrap()).is_ok(),
            OcbAes::Tag16(c) => c.decrypt_inout_detached(nonce.into(), ad, (&mut *buf).into(), tag.try_into().unwrap()).is_ok(),
        };
        if !ok {
            buf.fill(0);
        }
        ok
    }
}

pub struct Ocb {
    cipher: OcbAes,
    tag_bytes: u64,
    ctr_base: u64,
    tag_base: u64,
    line: u64,
    ctr_buf: WordBuffer,
    pending: Option<IntegrityError>,
    // statistics
    reads: u64,
    writes: u64,
    tag_failures: u64,
    exposed: u64,
    check_cycles: u64,
}

impl Ocb {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Ocb, ConfigError> {
        let tag_bytes = p.u64_min("ocb.tag_bytes", 1)?;
        let cipher = OcbAes::new(&derive_key(seed, 0x0cb3), tag_bytes as usize)
            .ok_or_else(|| ConfigError(format!("ocb.tag_bytes: {} is not 8 or 16", tag_bytes)))?;
        let ctr_buf = WordBuffer::new(p.u64_min("ocb.counter_buffer_entries", 0)?, 8, "ocb.counter_buffer_entries")?;
        let line = m.line();
        if line % 16 != 0 {
            return Err(ConfigError(format!("l2.line: {} B is not a whole number of 16-B AES chunks", line)));
        }
        let lines = covered.div_ceil(line);
        let ctr_base = m.layout.alloc("ocb counters", lines * B_CTR);
        let tag_base = m.layout.alloc("ocb tags", lines * tag_bytes);
        Ok(Ocb {
            cipher,
            tag_bytes,
            ctr_base,
            tag_base,
            line,
            ctr_buf,
            pending: None,
            reads: 0,
            writes: 0,
            tag_failures: 0,
            exposed: 0,
            check_cycles: 0,
        })
    }

    pub fn ctr_addr(&self, addr: u64) -> u64 {
        self.ctr_base + addr / self.line * B_CTR
    }

    pub fn tag_addr(&self, addr: u64) -> u64 {
        self.tag_base + addr / self.line * self.tag_bytes
    }

    /// Nonce = line address ‖ counter (big-endian, 96 bits).
    fn nonce(addr: u64, ctr: u32) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&addr.to_be_bytes());
        n[8..].copy_from_slice(&ctr.to_be_bytes());
        n
    }
}

impl Encryption for Ocb {
    fn name(&self) -> &'static str {
        "ocb"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.mem.prefetch(addr);
        m.mem.prefetch(self.ctr_addr(addr));
        m.mem.prefetch(self.tag_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle {
        self.reads += 1;
        let (ca, ga) = (self.ctr_addr(addr), self.tag_addr(addr));
        // Counter, line and tag are read one after another: let the host load them at once.
        m.mem.prefetch(addr);
        m.mem.prefetch(ga);
        let t_ctr = self.ctr_buf.read(m, ca, B_CTR, t);
        let tr = m.bus.read(t, out.len() as u64);
        let t_tag = m.bus.read(t, self.tag_bytes).last;
        let ctr = m.mem.read_u32(ca);
        m.mem.read(addr, out);
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        m.mem.read(ga, tag);
        // Offsets need the nonce; each chunk is deciphered once it and its offset are here.
        let t_off = m.aes.run(t_ctr, 16);
        let mut arrive = [0; MAX_LINE / 16];
        let n = out.len() / 16;
        chunk_arrivals(m, tr, 16, &mut arrive[..n]);
        let t_dec = m.aes.run_each(arrive[..n].iter().map(|&a| a.max(t_off)));
        let ready = t_dec + m.xor_latency;
        // Tag = AES(checksum ⊕ offset ⊕ L$) after the last chunk, then compared.
        let checked = m.aes.run(ready, 16).max(t_tag) + 1;
        m.note_check(checked);
        self.check_cycles += checked - ready;
        self.exposed += ready.saturating_sub(tr.last);
        let initial = ctr == 0 && tag.iter().all(|&b| b == 0) && out.iter().all(|&b| b == 0);
        if !initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), &[], out, tag) {
            self.tag_failures += 1;
            self.pending.get_or_insert(IntegrityError {
                addr,
                what: format!("ocb tag mismatch (counter {}): line, counter or tag was changed", ctr),
            });
        }
        ready
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle {
        self.writes += 1;
        let ca = self.ctr_addr(addr);
        // The counter is on chip whenever its line was: the line was read (or allocated)
        // before it became dirty. Re-reading it here costs no bus time in the model.
        let ctr = m.mem.read_u32(ca).checked_add(1).expect("ocb: a line's 32-bit counter wrapped (2^32 write-backs)");
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        self.cipher.encrypt(&Self::nonce(addr, ctr), &[], ct, tag);
        m.mem.write(addr, ct);
        m.mem.write_u32(ca, ctr);
        m.mem.write(self.tag_addr(addr), tag);
        self.ctr_buf.wrote(ca);
        // Offset, then all chunks in parallel, then the tag.
        let t_off = m.aes.run(t, 16);
        let t_enc = m.aes.run(t_off, plain.len() as u64) + m.xor_latency;
        let t_tag = m.aes.run(t_enc, 16);
        let done = m.bus.write(t_enc, plain.len() as u64);
        let done = done.max(m.bus.write(t_enc, B_CTR));
        done.max(m.bus.write(t_tag, self.tag_bytes))
    }

    fn take_error(&mut self) -> Option<IntegrityError> {
        self.pending.take()
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        vec![("ocb counter".to_string(), self.ctr_addr(addr)), ("ocb tag".to_string(), self.tag_addr(addr))]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.tag_failures, self.exposed, self.check_cycles) = (0, 0, 0, 0, 0);
        self.ctr_buf.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        (B_CTR + self.tag_bytes) as f64 / self.line as f64
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("ocb.reads", self.reads);
        out.int("ocb.writes", self.writes);
        out.int("ocb.tag_bytes", self.tag_bytes);
        out.int("ocb.tag_failures", self.tag_failures);
        out.int("ocb.counter_bus_reads", self.ctr_buf.bus_reads());
        out.float("ocb.counter_buffer_hit_rate", self.ctr_buf.hit_rate());
        out.int("ocb.decrypt_exposed_cycles", self.exposed);
        out.float("ocb.decrypt_exposed_per_read", ratio(self.exposed, self.reads));
        out.float("ocb.check_cycles_per_read", ratio(self.check_cycles, self.reads));
        out.float("ocb.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;


    /// RFC 7253 Appendix A, the sample results for K = 000102…0F (TAGLEN 128).
    #[test]
    fn rfc7253_sample_vectors() {
        let key: [u8; 16] = hex("000102030405060708090A0B0C0D0E0F").try_into().unwrap();
        let c = OcbAes::new(&key, 16).unwrap();
        let cases = [
            ("BBAA99887766554433221100", "", "", "785407BFFFC8AD9EDCC5520AC9111EE6"),
            ("BBAA99887766554433221101", "0001020304050607", "0001020304050607", "6820B3657B6F615A5725BDA0D3B4EB3A257C9AF1F8F03009"),
            ("BBAA99887766554433221102", "0001020304050607", "", "81017F8203F081277152FADE694A0A00"),
            ("BBAA99887766554433221103", "", "0001020304050607", "45DD69F8F5AAE72414054CD1F35D82760B2CD00D2F99BFA9"),
            (
                "BBAA99887766554433221104",
                "000102030405060708090A0B0C0D0E0F",
                "000102030405060708090A0B0C0D0E0F",
                "571D535B60B277188BE5147170A9A22C3AD7A4FF3835B8C5701C1CCEC8FC3358",
            ),
            (
                "BBAA9988776655443322110D",
                "000102030405060708090A0B0C0D0E0F1011121314151617 18191A1B1C1D1E1F2021222324252627",
                "000102030405060708090A0B0C0D0E0F1011121314151617 18191A1B1C1D1E1F2021222324252627",
                "D5CA91748410C1751FF8A2F618255B68A0A12E093FF454606E59F9C1D0DDC54B65E8628E568BAD7A ED07BA06A4A69483A7035490C5769E60",
            ),
        ];
        for (n, a, p, want) in cases {
            let nonce: [u8; 12] = hex(n).try_into().unwrap();
            let (ad, plain, want) = (hex(a), hex(p), hex(want));
            let mut buf = plain.clone();
            let mut tag = [0u8; 16];
            c.encrypt(&nonce, &ad, &mut buf, &mut tag);
            let mut got = buf.clone();
            got.extend_from_slice(&tag);
            assert_eq!(got, want, "nonce {}", n);
            assert!(c.decrypt(&nonce, &ad, &mut buf, &tag));
            assert_eq!(buf, plain);
            tag[3] ^= 1;
            assert!(!c.decrypt(&nonce, &ad, &mut got[..plain.len()], &tag), "forged tag accepted");
        }
    }

    /// RFC 7253 Appendix A, "wider variety" (page 18), AES-128 with 128- and 64-bit tags.
    #[test]
    fn rfc7253_wider_variety() {
        for (tag_bytes, want) in [(16usize, "67E944D23256C5E0B6C61FA22FDF1EA2"), (8, "192C9B7BD90BA06A")] {
            let mut key = [0u8; 16];
            key[15] = 8 * tag_bytes as u8;
            let ocb = OcbAes::new(&key, tag_bytes).unwrap();
            let mut c = Vec::new();
            let num = |i: u32| {
                let mut n = [0u8; 12];
                n[8..].copy_from_slice(&i.to_be_bytes());
                n
            };
            let mut tag = vec![0u8; tag_bytes];
            for i in 0..128usize {
                let s = vec![0u8; i];
                let mut buf = s.clone();
                ocb.encrypt(&num(3 * i as u32 + 1), &s, &mut buf, &mut tag);
                c.extend_from_slice(&buf);
                c.extend_from_slice(&tag);
                let mut buf = s.clone();
                ocb.encrypt(&num(3 * i as u32 + 2), &[], &mut buf, &mut tag);
                c.extend_from_slice(&buf);
                c.extend_from_slice(&tag);
                ocb.encrypt(&num(3 * i as u32 + 3), &s, &mut [], &mut tag);
                c.extend_from_slice(&tag);
            }
            ocb.encrypt(&num(385), &c, &mut [], &mut tag);
            assert_eq!(tag, hex(want), "TAGLEN {}", 8 * tag_bytes);
        }
    }
}
