//! direct: AES-CBC over the L2 line (seed 000 §4.2, Fig. 4).
//!
//! A line of B bytes is B/16 chunks, EB[i] = AES_K(B[i] ⊕ EB[i−1]) with EB[−1] = IV, and
//! IV = (line address ‖ RV ‖ zeros) as in the paper: RV is a random vector chosen afresh on
//! every write-back and stored in untrusted memory with the line, at the linear layout of
//! 000 §5.1 (`RV_base + addr/B·B_RV`). The CBC mode itself is RustCrypto's `cbc`.
//!
//! Timing (Fig. 7a): each 16-B chunk is decrypted as soon as it has arrived off the bus; the
//! line is usable when the last chunk's decryption (and the XOR with the previous chunk or
//! the IV) is done, so the whole AES latency adds to every miss. Encryption is sequential (a
//! chunk's input needs the previous chunk's output) and happens in the write buffer.
//!
//! Memory is all-zero plaintext at power-on: a line whose RV is 0 and whose bytes are all zero
//! is that initial state (fresh RVs are never 0).

use super::{Encryption, EncryptionScheme, Rng, derive_key, Seed};
use crate::error::IntegrityError;
use crate::layout::{is_initial, Meta, MetaKind, PerLine, MAX_LINE};
use crate::machine::Machine;
use crate::port::chunk_arrivals;
use crate::wordbuf::WordBuffer;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use aes::cipher::KeyInit;
use secmem_crypto::modes::{cbc_decrypt, cbc_encrypt};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Guarantees, Kind, Role, param, stat};

/// direct's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "direct",
    kind: Kind::Encryption,
    summary: "AES-CBC over the line with IV = (address, random vector); the whole AES latency adds to a miss",
    source: "000 §4.2, Fig. 4",
    params: &[
        param("direct.rv_bytes", Def::Int(4), "B", "random vector per line in IV = (address, RV): 1, 2, 4 or 8 (000 §4.2, §6.3.1)"),
        param("direct.rv_buffer_entries", Def::Int(32), "entries", "on-chip buffer of 8-B words of random vectors, like the time-stamp buffer"),
    ],
    stats: &[
        stat("direct.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("direct.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("direct.rv_bus_reads", "reads", "random-vector reads from memory (buffer misses)"),
        stat("direct.rv_buffer_hit_rate", "fraction", "random-vector reads served by the on-chip buffer"),
        stat("direct.decrypt_exposed_cycles", "cycles", "decryption cycles after the data arrived (not hidden), summed"),
        stat("direct.decrypt_exposed_per_read", "cycles", "direct.decrypt_exposed_cycles / direct.reads"),
        stat("direct.space_overhead", "fraction", "memory the random vectors take, per byte of data"),
    ],
};

/// direct's registration. A fresh random vector per write-back hides equal lines and rewrites; CBC garbles a flipped block (its vector, stored beside the line, is not authenticated: flipping it flips the first block's bits).
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees { confidential: true, hides_equal_lines: true, hides_rewrites: true, malleable: false, ..Guarantees::NONE }),
    coverage: Coverage { lays_out: &[Role::Vectors], protects: Role::LINES, guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Direct::new(p, m, c, seed)?)),
};

pub struct Direct {
    aes: aes::Aes128,
    rng: Rng,
    rv_bytes: u64,
    rv_mask: u64,
    rvs: PerLine,
    rv_buf: WordBuffer,
    // statistics
    reads: u64,
    writes: u64,
    exposed: u64,
}

impl Direct {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Direct, ConfigError> {
        let rv_bytes = p.u64_min("direct.rv_bytes", 1)?;
        if !matches!(rv_bytes, 1 | 2 | 4 | 8) {
            return Err(ConfigError(format!("direct.rv_bytes: {} is not 1, 2, 4 or 8", rv_bytes)));
        }
        let rv_buf = WordBuffer::new(p.u64_min("direct.rv_buffer_entries", 0)?, "direct.rv_buffer_entries")?;
        let rvs = m.layout.per_line(Role::Vectors, "direct random vectors", covered, rv_bytes);
        Ok(Direct {
            aes: aes::Aes128::new(&derive_key(seed, 0xd1ec7).into()),
            rng: Rng::new(seed.value(), 0xd1ec7),
            rv_bytes,
            rv_mask: if rv_bytes == 8 { u64::MAX } else { (1u64 << (8 * rv_bytes)) - 1 },
            rvs,
            rv_buf,
            reads: 0,
            writes: 0,
            exposed: 0,
        })
    }

    pub fn rv_addr(&self, addr: u64) -> u64 {
        self.rvs.addr(addr)
    }

    /// IV = address ‖ RV, padded with zeros to 128 bits (000 §4.2).
    fn iv(&self, addr: u64, rv: u64) -> [u8; 16] {
        let mut iv = [0u8; 16];
        iv[..8].copy_from_slice(&addr.to_le_bytes());
        iv[8..8 + self.rv_bytes as usize].copy_from_slice(&rv.to_le_bytes()[..self.rv_bytes as usize]);
        iv
    }
}

impl Encryption for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.rv_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let ra = self.rv_addr(addr);
        // Line and random vector are read one after the other: let the host load both at once.
        m.port.prefetch(ra);
        let tr = m.port.read(addr, out, t);
        // The RV is needed only for the first chunk's final XOR: fetched after the line.
        let mut b = [0u8; 8];
        let t_rv = self.rv_buf.read(&mut m.port, ra, &mut b[..self.rv_bytes as usize], t);
        let rv = u64::from_le_bytes(b);
        let mut arrive = [0; MAX_LINE / 16];
        let n = out.len() / 16;
        chunk_arrivals(m.port.beat(), tr, 16, &mut arrive[..n]);
        let t_dec = m.aes.run_each(arrive[..n].iter().copied());
        if !is_initial(rv, out) {
            cbc_decrypt(&self.aes, &self.iv(addr, rv), out);
        }
        let ready = t_dec.max(t_rv) + m.xor_latency;
        self.exposed += ready.saturating_sub(tr.last);
        Ok(ready)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let rv = loop {
            let r = self.rng.next_u64() & self.rv_mask;
            if r != 0 {
                break r;
            }
        };
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        cbc_encrypt(&self.aes, &self.iv(addr, rv), ct);
        // Chaining: each chunk's AES starts when the previous one is done.
        let mut tc = t;
        for _ in 0..plain.len() / 16 {
            tc = m.aes.run(tc + m.xor_latency, 16);
        }
        let done = m.port.write(addr, ct, tc);
        let rvb = &rv.to_le_bytes()[..self.rv_bytes as usize];
        Ok(done.max(self.rv_buf.write(&mut m.port, self.rv_addr(addr), rvb, tc)))
    }

    fn drop_cached(&mut self) {
        self.rv_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::RandomVector, self.rv_addr(addr), self.rv_bytes)]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
        self.rv_buf.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        self.rvs.overhead()
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("direct.reads", self.reads);
        out.int("direct.writes", self.writes);
        out.int("direct.rv_bytes", self.rv_bytes);
        out.int("direct.rv_bus_reads", self.rv_buf.bus_reads());
        let (hits, reads) = self.rv_buf.hits();
        out.rate("direct.rv_buffer_hit_rate", hits, reads);
        out.int("direct.decrypt_exposed_cycles", self.exposed);
        out.rate("direct.decrypt_exposed_per_read", self.exposed, self.reads);
        out.float("direct.space_overhead", self.space_overhead());
    }
}
