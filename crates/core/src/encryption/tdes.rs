//! tdes: Triple-DES (EDE, three keys; RustCrypto `des`) in a parallelizable direct mode over
//! 64-bit chunks (seed 004 §3.2.1: "the line is divided into 8 64-bit chunks and each chunk is
//! encrypted using parallelizable encryption modes with Triple-DES as the block cipher … all
//! the 8 chunks of the same cache line can be encrypted or decrypted simultaneously").
//!
//! The mode is XE (Rogaway's tweakable construction, the core of OCB): chunk i of the line at
//! `a` is C_i = TDES_K(P_i ⊕ Δ_i) with the whitening offset Δ_i = R ⊕ (i+1)·L in GF(2^64),
//! R = TDES_K'(a/B ‖ ctr_a) and L = TDES_K'(1^64). The per-line counter ctr_a, incremented on
//! each dirty eviction as 004 does for its nonce, lives in untrusted memory (4 B, linear layout
//! of 000 §5.1). Equal plaintexts therefore differ across chunks, lines and rewrites, and a
//! chunk is deciphered as soon as it arrives: Δ is XORed after the cipher, off its critical
//! path, so only the last chunk's 96-ns decryption adds to the miss (004 Table 2).
//!
//! The TDES engine is the scheme's own pipelined unit (`tdes.latency`, `tdes.throughput`).
//! A line whose counter is 0 and whose bytes are all zero is the all-zero initial memory.

use super::{chunk_arrivals, derive_key, Encryption, WordBuffer};
use crate::integrity::chash::MAX_LINE;
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use des::cipher::array::Array;
use des::cipher::consts::U8;
use des::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use des::TdesEde3;
use secmem_timing::{Cycle, Pipe};

const B_CTR: u64 = 4;
const CHUNK: u64 = 8;

/// x·2 in GF(2^64) with x^64 + x^4 + x^3 + x + 1 (the 64-bit-block doubling of OCB/CMAC).
fn dbl(x: u64) -> u64 {
    (x << 1) ^ if x >> 63 == 1 { 0x1B } else { 0 }
}

/// a·b in GF(2^64) for a small multiplier b.
fn gf_mul(a: u64, mut b: u64) -> u64 {
    let (mut acc, mut x) = (0u64, a);
    while b != 0 {
        if b & 1 == 1 {
            acc ^= x;
        }
        x = dbl(x);
        b >>= 1;
    }
    acc
}

pub struct Tdes {
    data: TdesEde3,
    tweak: TdesEde3,
    /// (i+1)·L for chunk i.
    offsets: [u64; MAX_LINE / 8],
    engine: Pipe,
    ctr_base: u64,
    line: u64,
    ctr_buf: WordBuffer,
    // statistics
    reads: u64,
    writes: u64,
    exposed: u64,
}

fn key24(seed: u64, purpose: u64) -> [u8; 24] {
    let (a, b) = (derive_key(seed, purpose), derive_key(seed, purpose + 1));
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(&a);
    k[16..].copy_from_slice(&b[..8]);
    k
}

impl Tdes {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Tdes, ConfigError> {
        let hz = p.freq("core.clock")?;
        let engine = Pipe::new(p.u64_min("tdes.latency", 1)?, p.rate("tdes.throughput")? / hz, CHUNK);
        let ctr_buf = WordBuffer::new(p.u64_min("tdes.counter_buffer_entries", 0)?, 8, "tdes.counter_buffer_entries")?;
        let line = m.line();
        if line % CHUNK != 0 {
            return Err(ConfigError(format!("l2.line: {} B is not a whole number of 8-B TDES chunks", line)));
        }
        let lines = covered.div_ceil(line);
        if lines > u32::MAX as u64 {
            return Err(ConfigError(format!("tdes: {} lines do not fit the 32-bit line number of the nonce", lines)));
        }
        let ctr_base = m.layout.alloc("tdes counters", lines * B_CTR);
        let data = TdesEde3::new(&key24(seed, 0x7de5).into());
        let tweak = TdesEde3::new(&key24(seed, 0x7de7).into());
        let mut l = [0xFFu8; 8];
        tweak.encrypt_block((&mut l).into());
        let l = u64::from_be_bytes(l);
        let mut offsets = [0u64; MAX_LINE / 8];
        for (i, o) in offsets.iter_mut().enumerate() {
            *o = gf_mul(l, i as u64 + 1);
        }
        Ok(Tdes { data, tweak, offsets, engine, ctr_base, line, ctr_buf, reads: 0, writes: 0, exposed: 0 })
    }

    pub fn ctr_addr(&self, addr: u64) -> u64 {
        self.ctr_base + addr / self.line * B_CTR
    }

    fn r(&self, addr: u64, ctr: u32) -> u64 {
        let mut n = [0u8; 8];
        n[..4].copy_from_slice(&((addr / self.line) as u32).to_be_bytes());
        n[4..].copy_from_slice(&ctr.to_be_bytes());
        self.tweak.encrypt_block((&mut n).into());
        u64::from_be_bytes(n)
    }

    fn whiten(&self, r: u64, buf: &mut [u8]) {
        for (i, c) in buf.chunks_exact_mut(8).enumerate() {
            let d = (r ^ self.offsets[i]).to_be_bytes();
            for (b, x) in c.iter_mut().zip(d) {
                *b ^= x;
            }
        }
    }

    fn blocks(buf: &mut [u8]) -> &mut [Array<u8, U8>] {
        Array::<u8, U8>::slice_as_chunks_mut(buf).0
    }

    /// Encrypt a line in place (XE over TDES).
    pub fn encrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.whiten(self.r(addr, ctr), buf);
        self.data.encrypt_blocks(Self::blocks(buf));
    }

    pub fn decrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.data.decrypt_blocks(Self::blocks(buf));
        self.whiten(self.r(addr, ctr), buf);
    }
}

impl Encryption for Tdes {
    fn name(&self) -> &'static str {
        "tdes"
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle {
        self.reads += 1;
        let tr = m.bus.read(t, out.len() as u64);
        m.mem.read(addr, out);
        // The counter only feeds the whitening, XORed after the cipher: fetched after the line.
        let ca = self.ctr_addr(addr);
        let t_ctr = self.ctr_buf.read(m, ca, B_CTR, t);
        let ctr = m.mem.read_u32(ca);
        let mut arrive = [0; MAX_LINE / 8];
        let n = out.len() / CHUNK as usize;
        chunk_arrivals(m, tr, CHUNK, &mut arrive[..n]);
        let t_dec = self.engine.run_each(arrive[..n].iter().copied());
        let t_r = self.engine.run(t_ctr, CHUNK);
        if !(ctr == 0 && out.iter().all(|&b| b == 0)) {
            self.decrypt(addr, ctr, out);
        }
        let ready = t_dec.max(t_r) + m.xor_latency;
        self.exposed += ready.saturating_sub(tr.last);
        ready
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle {
        self.writes += 1;
        let ca = self.ctr_addr(addr);
        let ctr = m.mem.read_u32(ca).checked_add(1).expect("tdes: a line's 32-bit counter wrapped (2^32 write-backs)");
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.encrypt(addr, ctr, ct);
        m.mem.write(addr, ct);
        m.mem.write_u32(ca, ctr);
        self.ctr_buf.wrote(ca);
        let t_r = self.engine.run(t, CHUNK);
        let t_enc = self.engine.run(t_r + m.xor_latency, plain.len() as u64);
        let done = m.bus.write(t_enc, plain.len() as u64);
        done.max(m.bus.write(t_enc, B_CTR))
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        vec![("tdes counter".to_string(), self.ctr_addr(addr))]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
        self.ctr_buf.reset_stats();
        self.engine.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        B_CTR as f64 / self.line as f64
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("tdes.reads", self.reads);
        out.int("tdes.writes", self.writes);
        out.int("tdes.counter_bus_reads", self.ctr_buf.bus_reads());
        out.float("tdes.counter_buffer_hit_rate", ratio(self.ctr_buf.hits, self.ctr_buf.reads));
        out.int("tdes.engine_units", self.engine.units);
        out.int("tdes.engine_wait_cycles", self.engine.wait_cycles);
        out.int("tdes.decrypt_exposed_cycles", self.exposed);
        out.float("tdes.decrypt_exposed_per_read", ratio(self.exposed, self.reads));
        out.float("tdes.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn ecb(key: &str, plain: &str) -> (Vec<u8>, TdesEde3) {
        let k: [u8; 24] = hex(key).try_into().unwrap();
        let c = TdesEde3::new(&k.into());
        let mut buf = hex(plain);
        c.encrypt_blocks(Tdes::blocks(&mut buf));
        (buf, c)
    }

    /// NIST SP 800-67 Rev. 1 Appendix B (three distinct keys), SP 800-20 Table A.1 (variable
    /// plaintext, first entry) and the classic DES example (K1 = K2 = K3 is single DES).
    #[test]
    fn nist_tdes_vectors() {
        let cases = [
            (
                "0123456789ABCDEF 23456789ABCDEF01 456789ABCDEF0123",
                "5468652071756663 6B2062726F776E20 666F78206A756D70",
                "A826FD8CE53B855F CCE21C8112256FE6 68D5C05DD9B6B900",
            ),
            ("0101010101010101 0101010101010101 0101010101010101", "8000000000000000", "95F8A5E5DD31D900"),
            ("133457799BBCDFF1 133457799BBCDFF1 133457799BBCDFF1", "0123456789ABCDEF", "85E813540F0AB405"),
        ];
        for (k, p, want) in cases {
            let (mut got, c) = ecb(k, p);
            assert_eq!(got, hex(want), "key {}", k);
            c.decrypt_blocks(Tdes::blocks(&mut got));
            assert_eq!(got, hex(p));
        }
    }

    #[test]
    fn gf_doubling_reduces_by_the_64_bit_polynomial() {
        assert_eq!(dbl(1), 2);
        assert_eq!(dbl(1 << 63), 0x1B);
        assert_eq!(gf_mul(0x8000_0000_0000_0001, 3), 0x8000_0000_0000_0001 ^ 0x1B ^ 2);
    }
}
