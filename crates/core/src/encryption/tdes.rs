//! tdes: Triple-DES (EDE, three keys; RustCrypto `des`) in a parallelizable direct mode over
//! 64-bit chunks (seed 004 §3.2.1: "the line is divided into 8 64-bit chunks and each chunk is
//! encrypted using parallelizable encryption modes with Triple-DES as the block cipher … all
//! the 8 chunks of the same cache line can be encrypted or decrypted simultaneously").
//!
//! The mode is XE (Rogaway's tweakable construction, the core of OCB): chunk i of the line at
//! `a` is C_i = TDES_K(P_i ⊕ Δ_i) with the whitening offset Δ_i = R ⊕ (i+1)·L in GF(2^64),
//! R = TDES_K'(a/B ‖ ctr_a) and L = TDES_K'(1^64). The per-line counter ctr_a grows on each
//! dirty eviction as 004 does for its nonce, drawn from one on-chip sequence (`NonceCounter`:
//! never the stored counter plus one, which an adversary could roll back); it lives in
//! untrusted memory (4 B, linear layout of 000 §5.1). Equal plaintexts therefore differ across chunks, lines and rewrites, and a
//! chunk is deciphered as soon as it arrives: Δ is XORed after the cipher, off its critical
//! path, so only the last chunk's 96-ns decryption adds to the miss (004 Table 2).
//!
//! The TDES engine is the scheme's own pipelined unit (`tdes.latency`, `tdes.throughput`).
//!
//! The cipher is FIPS 46-3 Triple-DES EDE with three keys: `secmem_crypto::tdes::FastTdes`,
//! checked bit for bit against RustCrypto's `des::TdesEde3` by its tests and at construction.
//!
//! A line whose counter is 0 and whose bytes are all zero is the all-zero initial memory.

use super::{derive_key, Encryption, NonceCounter};
use crate::integrity::IntegrityError;
use crate::layout::{is_initial, Meta, MetaKind, PerLine, B_CTR, MAX_LINE};
use crate::machine::Machine;
use crate::port::chunk_arrivals;
use crate::wordbuf::WordBuffer;
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use secmem_timing::{Cycle, Pipe};
use secmem_crypto::tdes::{agrees_with_rustcrypto, FastTdes};
use crate::decl::{param, Component, Def, Kind};

/// tdes's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "tdes",
    kind: Kind::Encryption,
    summary: "Triple-DES (EDE3) in a parallelizable mode over 64-bit chunks",
    source: "004 §3.2.1",
    params: &[
        param("tdes.latency", Def::Int(96), "cycles", "Triple-DES latency: 96 ns at 1 GHz, 48 stages (004 §4, Table 2)"),
        param("tdes.throughput", Def::Str("2.5GB/s"), "B/s", "pipelined TDES throughput: 20 Gbit/s (004 §4)"),
        param("tdes.counter_buffer_entries", Def::Int(32), "entries", "on-chip buffer of 8-B words of per-line counters"),
        param("tdes.counter_bits", Def::Int(32), "bits", "width of the on-chip sequence nonce counters are drawn from"),
    ],
};

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
    data: FastTdes,
    tweak: FastTdes,
    /// (i+1)·L for chunk i.
    offsets: [u64; MAX_LINE / 8],
    engine: Pipe,
    ctrs: PerLine,
    line: u64,
    ctr_buf: WordBuffer,
    nonces: NonceCounter,
    /// Test builds: every (address, counter) encrypted under, which must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64)>,
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
        let ctr_buf = WordBuffer::new(p.u64_min("tdes.counter_buffer_entries", 0)?, "tdes.counter_buffer_entries")?;
        let line = m.line();
        let lines = covered.div_ceil(line);
        if lines > u32::MAX as u64 {
            return Err(ConfigError(format!("tdes: {} lines do not fit the 32-bit line number of the nonce", lines)));
        }
        let ctrs = m.layout.per_line("tdes counters", covered, B_CTR);
        let (kd, kt) = (key24(seed, 0x7de5), key24(seed, 0x7de7));
        if !agrees_with_rustcrypto(&kd) || !agrees_with_rustcrypto(&kt) {
            return Err(ConfigError("tdes: the table-driven Triple-DES disagrees with RustCrypto's".into()));
        }
        let (data, tweak) = (FastTdes::new(&kd), FastTdes::new(&kt));
        let l = tweak.encrypt_u64(u64::MAX);
        let mut offsets = [0u64; MAX_LINE / 8];
        for (i, o) in offsets.iter_mut().enumerate() {
            *o = gf_mul(l, i as u64 + 1);
        }
        let nonces = NonceCounter::new(p, "tdes")?;
        Ok(Tdes {
            data,
            tweak,
            offsets,
            engine,
            ctrs,
            line,
            ctr_buf,
            nonces,
            #[cfg(test)]
            nonces_used: Default::default(),
            reads: 0,
            writes: 0,
            exposed: 0,
        })
    }

    pub fn ctr_addr(&self, addr: u64) -> u64 {
        self.ctrs.addr(addr)
    }

    fn r(&self, addr: u64, ctr: u32) -> u64 {
        self.tweak.encrypt_u64(((addr / self.line) << 32) | ctr as u64)
    }

    fn whiten(&self, r: u64, buf: &mut [u8]) {
        for (i, c) in buf.chunks_exact_mut(8).enumerate() {
            let d = (r ^ self.offsets[i]).to_be_bytes();
            for (b, x) in c.iter_mut().zip(d) {
                *b ^= x;
            }
        }
    }

    /// Encrypt a line in place (XE over TDES).
    pub fn encrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.whiten(self.r(addr, ctr), buf);
        self.data.encrypt_blocks(buf);
    }

    pub fn decrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.data.decrypt_blocks(buf);
        self.whiten(self.r(addr, ctr), buf);
    }
}

impl Encryption for Tdes {
    fn name(&self) -> &'static str {
        "tdes"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.ctr_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let ca = self.ctr_addr(addr);
        // Line and counter are read one after the other: let the host load both at once.
        m.port.prefetch(ca);
        let tr = m.port.read(addr, out, t);
        // The counter only feeds the whitening, XORed after the cipher: fetched after the line.
        let mut cb = [0u8; B_CTR as usize];
        let t_ctr = self.ctr_buf.read(&mut m.port, ca, &mut cb, t);
        let ctr = u32::from_le_bytes(cb);
        let mut arrive = [0; MAX_LINE / 8];
        let n = out.len() / CHUNK as usize;
        chunk_arrivals(m.port.beat(), tr, CHUNK, &mut arrive[..n]);
        let t_dec = self.engine.run_each(arrive[..n].iter().copied());
        let t_r = self.engine.run(t_ctr, CHUNK);
        if !is_initial(ctr as u64, out) {
            self.decrypt(addr, ctr, out);
        }
        let ready = t_dec.max(t_r) + m.xor_latency;
        self.exposed += ready.saturating_sub(tr.last);
        Ok(ready)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let ctr = self.nonces.next(addr, "tdes")?;
        #[cfg(test)]
        assert!(self.nonces_used.insert((addr, ctr as u64)), "tdes reused the nonce {:?}", (addr, ctr as u64));
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.encrypt(addr, ctr, ct);
        let t_r = self.engine.run(t, CHUNK);
        let t_enc = self.engine.run(t_r + m.xor_latency, plain.len() as u64);
        let done = m.port.write(addr, ct, t_enc);
        Ok(done.max(self.ctr_buf.write(&mut m.port, self.ctr_addr(addr), &ctr.to_le_bytes(), t_enc)))
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::Counter("tdes"), self.ctr_addr(addr), B_CTR)]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
        self.ctr_buf.reset_stats();
        self.engine.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        self.ctrs.overhead()
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("tdes.reads", self.reads);
        out.int("tdes.writes", self.writes);
        out.int("tdes.counter_bus_reads", self.ctr_buf.bus_reads());
        out.float("tdes.counter_buffer_hit_rate", self.ctr_buf.hit_rate());
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

    #[test]
    fn gf_doubling_reduces_by_the_64_bit_polynomial() {
        assert_eq!(dbl(1), 2);
        assert_eq!(dbl(1 << 63), 0x1B);
        assert_eq!(gf_mul(0x8000_0000_0000_0001, 3), 0x8000_0000_0000_0001 ^ 0x1B ^ 2);
    }
}
