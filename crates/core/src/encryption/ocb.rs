//! ocb: OCB3 authenticated encryption of every line (seed 004 §2.1, Fig. 1; RFC 7253), with
//! RustCrypto's `ocb3` over AES-128.
//!
//! The nonce is the line address ‖ a counter that grows on each dirty eviction (004: "the
//! nonce associated with dynamic data blocks is incremented each time the corresponding dirty
//! data block is evicted"), so equal plaintexts never give equal ciphertexts at two addresses
//! or across rewrites. The counter written with a line is drawn from one on-chip sequence
//! (`NonceCounter`), never computed from the counter stored in untrusted memory: an adversary
//! who rolls a stored counter back (or replays a whole line with its counter and tag) could
//! otherwise make a write-back reuse a nonce. Counters (4 B) and tags (`ocb.tag_bytes`) live
//! in untrusted memory at linear layouts (000 §5.1). The tag is checked on every read, so OCB
//! is also the block's MAC: a line, counter or tag changed by the adversary fails the check
//! and that read reports an `IntegrityError`. Like any per-line MAC it does not detect the
//! replay of an old (line, counter, tag) triple: that needs a tree.
//!
//! Timing: the counter is fetched first; the nonce-dependent offset (one AES) is computed when
//! it arrives; each chunk is deciphered when it has arrived and its offset is known (OCB is
//! fully parallelizable, 004 Table 1) and the tag needs one more AES over the checksum after
//! the last chunk. Data may be used once deciphered, like chash's speculative use; the check's
//! completion is what a barrier waits for (`Machine::note_check`).
//!
//! A line whose counter, tag and bytes are all zero is the all-zero initial memory.

use super::{derive_key, Boot, BootLines, Encryption, NonceCounter};
use crate::mem::BootImage;
use std::sync::Arc;
use crate::integrity::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, B_CTR, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::port::chunk_arrivals;
use crate::stats::Stats;
use crate::wordbuf::WordBuffer;
use secmem_crypto::modes::OcbAes;
use secmem_timing::Cycle;
use crate::decl::{param, Component, Def, Kind};

/// ocb's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "ocb",
    kind: Kind::Encryption,
    summary: "OCB3 authenticated encryption of every line; its tag is the line's MAC",
    source: "004 §2.1, Fig. 1; RFC 7253",
    params: &[
        param("ocb.tag_bytes", Def::Int(8), "B", "OCB3 tag per line: 8 or 16"),
        param("ocb.counter_buffer_entries", Def::Int(32), "entries", "on-chip buffer of 8-B words of per-line counters"),
        param("ocb.counter_bits", Def::Int(32), "bits", "width of the on-chip sequence nonce counters are drawn from"),
    ],
};

/// The boot image (`memory.boot_encrypted`): zeros sealed under counter 0, and their tags.
struct BootOcb {
    cipher: OcbAes,
    tags: PerLine,
    tag_bytes: usize,
    line: usize,
}

impl BootOcb {
    fn seal(&self, addr: u64, line: &mut [u8], tag: &mut [u8]) {
        line.fill(0);
        self.cipher.encrypt(&Ocb::nonce(addr, 0), &[], line, tag);
    }
}

impl BootLines for BootOcb {
    fn line(&self, addr: u64, out: &mut [u8]) {
        self.seal(addr, out, &mut [0u8; 16][..self.tag_bytes]);
    }

    fn stores(&self) -> Vec<PerLine> {
        vec![self.tags]
    }

    fn entry(&self, _: usize, addr: u64, out: &mut [u8]) {
        // The tag covers the whole line: sealed again for it.
        self.seal(addr, &mut [0u8; MAX_LINE][..self.line], out);
    }
}

pub struct Ocb {
    cipher: OcbAes,
    /// Never-written program memory, [0, boot_end), holds the boot image (`boot_encrypted`).
    boot_end: u64,
    line: u64,
    tag_bytes: u64,
    ctrs: PerLine,
    tags: PerLine,
    ctr_buf: WordBuffer,
    nonces: NonceCounter,
    /// Test builds: every (address, counter) encrypted under, which must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64)>,
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
        let ctr_buf = WordBuffer::new(p.u64_min("ocb.counter_buffer_entries", 0)?, "ocb.counter_buffer_entries")?;
        let ctrs = m.layout.per_line("ocb counters", covered, B_CTR);
        let tags = m.layout.per_line("ocb tags", covered, tag_bytes);
        Ok(Ocb {
            cipher,
            boot_end: 0,
            line: m.line(),
            tag_bytes,
            ctrs,
            tags,
            ctr_buf,
            nonces: NonceCounter::new(p, "ocb")?,
            #[cfg(test)]
            nonces_used: Default::default(),
            reads: 0,
            writes: 0,
            tag_failures: 0,
            exposed: 0,
            check_cycles: 0,
        })
    }

    pub fn ctr_addr(&self, addr: u64) -> u64 {
        self.ctrs.addr(addr)
    }

    pub fn tag_addr(&self, addr: u64) -> u64 {
        self.tags.addr(addr)
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
        m.port.prefetch(addr);
        m.port.prefetch(self.ctr_addr(addr));
        m.port.prefetch(self.tag_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let (ca, ga) = (self.ctr_addr(addr), self.tag_addr(addr));
        // Counter, line and tag are read one after another: let the host load them at once.
        m.port.prefetch(addr);
        m.port.prefetch(ga);
        let mut cb = [0u8; B_CTR as usize];
        let t_ctr = self.ctr_buf.read(&mut m.port, ca, &mut cb, t);
        let ctr = u32::from_le_bytes(cb);
        let tr = m.port.read(addr, out, t);
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        let t_tag = m.port.read(ga, tag, t).last;
        // Offsets need the nonce; each chunk is deciphered once it and its offset are here.
        let t_off = m.aes.run(t_ctr, 16);
        let mut arrive = [0; MAX_LINE / 16];
        let n = out.len() / 16;
        chunk_arrivals(m.port.beat(), tr, 16, &mut arrive[..n]);
        let t_dec = m.aes.run_each(arrive[..n].iter().map(|&a| a.max(t_off)));
        let ready = t_dec + m.xor_latency;
        // Tag = AES(checksum ⊕ offset ⊕ L$) after the last chunk, then compared.
        let checked = m.aes.run(ready, 16).max(t_tag) + 1;
        m.note_check(checked);
        self.check_cycles += checked - ready;
        self.exposed += ready.saturating_sub(tr.last);
        // Never-written memory is raw zeros unless it starts encrypted (the boot image).
        let initial = addr >= self.boot_end && ctr == 0 && all_zero(tag) && all_zero(out);
        if !initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), &[], out, tag) {
            self.tag_failures += 1;
            return Err(IntegrityError {
                addr,
                what: format!("ocb tag mismatch (counter {}): line, counter or tag was changed", ctr),
            });
        }
        Ok(ready)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let ctr = self.nonces.next(addr, "ocb")?;
        #[cfg(test)]
        assert!(self.nonces_used.insert((addr, ctr as u64)), "ocb reused the nonce {:?}", (addr, ctr as u64));
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        self.cipher.encrypt(&Self::nonce(addr, ctr), &[], ct, tag);
        // Offset, then all chunks in parallel, then the tag.
        let t_off = m.aes.run(t, 16);
        let t_enc = m.aes.run(t_off, plain.len() as u64) + m.xor_latency;
        let t_tag = m.aes.run(t_enc, 16);
        let done = m.port.write(addr, ct, t_enc);
        let done = done.max(self.ctr_buf.write(&mut m.port, self.ctr_addr(addr), &ctr.to_le_bytes(), t_enc));
        Ok(done.max(m.port.write(self.tag_addr(addr), tag, t_tag)))
    }

    fn boot_encrypted(&mut self, end: u64) -> Result<Option<Arc<dyn BootImage>>, String> {
        self.boot_end = end;
        let lines = BootOcb { cipher: self.cipher.clone(), tags: self.tags, tag_bytes: self.tag_bytes as usize, line: self.line as usize };
        Ok(Some(Boot::image(lines, end, self.line)))
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::Counter("ocb"), self.ctr_addr(addr), B_CTR), Meta::new(MetaKind::Tag, self.tag_addr(addr), self.tag_bytes)]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.tag_failures, self.exposed, self.check_cycles) = (0, 0, 0, 0, 0);
        self.ctr_buf.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        self.ctrs.overhead() + self.tags.overhead()
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("ocb.reads", self.reads);
        out.int("ocb.writes", self.writes);
        out.int("ocb.tag_bytes", self.tag_bytes);
        out.int("ocb.tag_failures", self.tag_failures);
        out.int("ocb.counter_bus_reads", self.ctr_buf.bus_reads());
        let (hits, reads) = self.ctr_buf.hits();
        out.rate("ocb.counter_buffer_hit_rate", hits, reads);
        out.int("ocb.decrypt_exposed_cycles", self.exposed);
        out.rate("ocb.decrypt_exposed_per_read", self.exposed, self.reads);
        out.rate("ocb.check_cycles_per_read", self.check_cycles, self.reads);
        out.float("ocb.space_overhead", self.space_overhead());
    }
}
