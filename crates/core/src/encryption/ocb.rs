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
//! Ciphertext speculation (004 §3.2–3.2.2, Figs. 2–4; `speculation.frequent_values`): AES
//! blocks are 128 bits, two Frequent Value Table values, so each write-back re-orders the
//! line's chunks by their bitmap (`speculation::reorder`: frequent chunks first, in whole
//! blocks) before OCB, passes the bitmap as OCB's associated data (a changed or replayed
//! bitmap fails the tag) and stores it encrypted in its own per-line region, read through a
//! bitmap cache (`ocb.bitmap_cache_entries`, `ocb.bitmap_prefetch`). On a miss, once the
//! offsets and the bitmap are known, the speculation engine encrypts every ordered pair of
//! table values (N² blocks) for each of the ⌊f/2⌋ blocks the bitmap says hold two frequent
//! chunks; an arriving block equal to one of them (the CAM) needs no decryption. OCB's block
//! C_j = Δ_j ⊕ AES_K(P_j ⊕ Δ_j) is a permutation of P_j under the line's offsets, so a block
//! matches exactly when it deciphers to a pair of table values: the decision is taken on the
//! plaintext, and test builds compare it with the real OCB encryptions of every pair
//! (`speculated_blocks`). The chunks are usable once their block is known and the bitmap
//! says where they go; the tag is computed once every block's plaintext is known.
//! `ocb.reorder_chunks=false` speculates every block in place (no bitmap; 004 Fig. 6's
//! comparison). With speculation off nothing of this exists and ocb is as above.
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
use crate::speculation::reorder::{bitmap_bytes, frequent_blocks, pair_blocks, permute, unpermute, BitmapSeal, Bitmaps};

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
        param("ocb.reorder_chunks", Def::Bool(true), "bool", "with speculation.frequent_values: re-order each line's chunks by its frequent value bitmap so frequent chunks fill whole AES blocks (004 §3.2.2, Fig. 4); false: speculate every block in place"),
        param("ocb.bitmap_cache_entries", Def::Int(1024), "entries", "on-chip write-back cache of 8-B words of re-ordering bitmaps, in 8-way sets (more than 8 entries: 8 × a power of two; up to 8: one fully associative set): 1024 = 8 KB, the bitmaps of a 128-entry TLB's 4-KB pages (004 §3.2.2); 0: none, each bitmap read and written in memory"),
        param("ocb.bitmap_prefetch", Def::Int(1), "words", "bitmap words fetched after each missed one (004 §3.2.2: \"simple hardware prefetch\"); 0: none"),
    ],
};

/// The boot image (`memory.boot_encrypted`): zeros sealed under counter 0, and their tags.
/// With re-ordering, every boot line's bitmap marks all its chunks frequent (zero is what the
/// boot writes; all-frequent is the identity order), sealed under counter 0 beside the tags.
struct BootOcb {
    cipher: OcbAes,
    tags: PerLine,
    tag_bytes: usize,
    line: usize,
    bitmaps: Option<(PerLine, BitmapSeal)>,
}

impl BootOcb {
    fn bitmap(&self) -> u32 {
        (((1u64 << (self.line / 8)) - 1) & u32::MAX as u64) as u32
    }

    fn seal(&self, addr: u64, line: &mut [u8], tag: &mut [u8]) {
        line.fill(0);
        let ad = self.bitmap().to_le_bytes();
        let ad = self.bitmaps.as_ref().map_or(&[][..], |(s, _)| &ad[..s.bytes as usize]);
        self.cipher.encrypt(&Ocb::nonce(addr, 0), ad, line, tag);
    }
}

impl BootLines for BootOcb {
    fn line(&self, addr: u64, out: &mut [u8]) {
        self.seal(addr, out, &mut [0u8; 16][..self.tag_bytes]);
    }

    fn stores(&self) -> Vec<PerLine> {
        let mut v = vec![self.tags];
        v.extend(self.bitmaps.as_ref().map(|(s, _)| *s));
        v
    }

    fn entry(&self, k: usize, addr: u64, out: &mut [u8]) {
        match (k, &self.bitmaps) {
            (1, Some((_, seal))) => seal.seal(addr, 0, self.bitmap(), out),
            // The tag covers the whole line: sealed again for it.
            _ => self.seal(addr, &mut [0u8; MAX_LINE][..self.line], out),
        }
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
    /// Re-ordering bitmaps (speculation on, `ocb.reorder_chunks`).
    bitmaps: Option<Bitmaps>,
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
        let mut bitmaps = None;
        if let Some(fv) = m.spec.fv.as_mut() {
            fv.dedicate(p.u64_min("aes.latency", 1)?, p.rate("aes.throughput")? / p.freq("core.clock")?, 16);
            if p.bool("ocb.reorder_chunks")? {
                let store = m.layout.per_line("ocb bitmaps", covered, bitmap_bytes(m.line()));
                let (entries, prefetch) = (p.u64_min("ocb.bitmap_cache_entries", 0)?, p.u64_min("ocb.bitmap_prefetch", 0)?);
                let b = Bitmaps::new(store, covered, &derive_key(seed, 0x0cb4), entries, prefetch)
                    .map_err(|e| ConfigError(format!("ocb.bitmap_cache_entries: {}", e)))?;
                bitmaps = Some(b);
            }
        }
        Ok(Ocb {
            cipher,
            boot_end: 0,
            line: m.line(),
            tag_bytes,
            ctrs,
            tags,
            ctr_buf,
            nonces: NonceCounter::new(p, "ocb")?,
            bitmaps,
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

/// A speculated read's times and facts, up to the offsets (see `Ocb::read_speculated`).
struct Speculated<'a> {
    addr: u64,
    ctr: u32,
    /// The bitmap and when it is known (re-ordering on).
    bitmap: Option<(u32, Cycle)>,
    t_off: Cycle,
    t_tag: Cycle,
    /// The line's last beat, and when each 16-B block of it is in.
    last: Cycle,
    arrive: &'a [Cycle],
    /// Raw never-written zeros: not ciphertext, nothing speculated matches.
    initial: bool,
}

impl Ocb {
    fn tag_failure(&mut self, addr: u64, ctr: u32) -> IntegrityError {
        self.tag_failures += 1;
        IntegrityError { addr, what: format!("ocb tag mismatch (counter {}): line, counter, tag or bitmap was changed", ctr) }
    }

    /// The rest of a read with frequent value speculation on (004 §3.2.2): the bitmap, the
    /// demand decryptions, the CAM's decision, the speculative encryptions and the tag.
    fn read_speculated(&mut self, m: &mut Machine, sp: Speculated, tag: &[u8], out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        let (addr, ctr, n) = (sp.addr, sp.ctr, sp.arrive.len());
        let xor = m.xor_latency;
        // The bitmap (which blocks hold frequent pairs, where the chunks go) and its AD block.
        let (bitmap, t_bm) = match (&mut self.bitmaps, sp.bitmap) {
            (Some(b), Some((bm, tb))) => {
                b.counts.wait_cycles += tb.saturating_sub(sp.t_off);
                (bm, tb)
            }
            _ => (0, sp.t_off),
        };
        let mut dec = [0; MAX_LINE / 16];
        for (d, &a) in dec.iter_mut().zip(sp.arrive) {
            *d = m.aes.run(a.max(sp.t_off), 16);
        }
        let ad_bytes = bitmap.to_le_bytes();
        let ad = self.bitmaps.as_ref().map_or(&[][..], |b| &ad_bytes[..b.bytes()]);
        // OCB's HASH(K, A): one AES over the bitmap, XORed into the tag.
        let t_ad = if ad.is_empty() { 0 } else { m.aes.run(t_bm, 16) };
        let mut stored = [0u8; MAX_LINE];
        let stored = &mut stored[..out.len()];
        stored.copy_from_slice(out);
        #[cfg(test)]
        let ct = stored.to_vec();
        if !sp.initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), ad, stored, tag) {
            return Err(self.tag_failure(addr, ctr));
        }
        match &self.bitmaps {
            Some(_) => unpermute(bitmap, stored, out),
            None => out.copy_from_slice(stored),
        }
        let fv = m.spec.fv.as_mut().expect("speculating");
        let (mut vals, mut k) = ([0u64; 64], 0);
        for v in fv.table.values() {
            vals[k] = v;
            k += 1;
        }
        // The blocks speculated: those the bitmap says hold two frequent chunks (all, in place;
        // none for raw never-written zeros, whose "bitmap" was never written either).
        let positions = match &self.bitmaps {
            _ if sp.initial => 0,
            Some(_) => pair_blocks(bitmap).min(n),
            None => n,
        };
        // Which of them the CAM matches, decided on the plaintext (see the module's comment).
        let mut hits = if k == 0 { 0 } else { frequent_blocks(fv.table.frequent_chunks(stored), positions) };
        #[cfg(test)]
        if !sp.initial {
            assert_eq!(hits, self.speculated_blocks(addr, ctr, &vals[..k], positions, &ct), "plaintext and ciphertext matching disagree");
        }
        let frequent = fv.table.frequent_chunks(out);
        // N² pairs per speculated block, in block order, once offsets and bitmap are known; work
        // that could not finish before the block is deciphered anyway is not started.
        let pairs = (k * k) as u64;
        let start = sp.t_off.max(t_bm);
        let mut slow = [0; MAX_LINE / 16];
        for j in 0..n {
            slow[j] = dec[j].max(t_bm) + xor;
        }
        let mut spec = [0; MAX_LINE / 16];
        let mut launched = 0u64;
        let engine = fv.engine.as_mut().unwrap_or(&mut m.aes);
        for j in 0..if k > 0 { positions } else { 0 } {
            if let Some(d) = engine.run_by(start, pairs * 16, slow[j]) {
                spec[j] = d;
                launched |= 1 << j;
            }
        }
        hits &= launched;
        // A hit block is known when it and its speculation are in: usable then (its place is
        // known: the bitmap came before the speculation), and in the tag's checksum.
        let (mut ready, mut plain_all, mut base, mut early) = (0, 0, 0, 0);
        for j in 0..n {
            let (mut r, mut p) = (slow[j], dec[j] + xor);
            if hits >> j & 1 == 1 {
                let fast = sp.arrive[j].max(spec[j]) + fv.match_latency;
                early += (fast < slow[j]) as u64;
                (r, p) = (fast.min(r), fast.min(p));
            }
            ready = ready.max(r);
            plain_all = plain_all.max(p);
            base = base.max(slow[j]);
        }
        let c = &mut fv.counts;
        c.line(out.len() / 8, frequent);
        c.hits += 2 * hits.count_ones() as u64;
        c.early += 2 * early;
        c.encryptions += pairs * launched.count_ones() as u64;
        c.saved_cycles += base - ready;
        // Tag = AES(checksum ⊕ offset) ⊕ HASH(A), once every block's plaintext is known.
        let checked = m.aes.run(plain_all, 16).max(t_ad).max(sp.t_tag) + 1;
        m.note_check(checked);
        self.check_cycles += checked.saturating_sub(ready);
        self.exposed += ready.saturating_sub(sp.last);
        Ok(ready)
    }

    /// What the CAM finds (004 Fig. 2 ③–④) by real speculative encryption: bit j set when block
    /// j (< `positions`) of the fetched ciphertext `ct` of the line at `addr` (counter `ctr`)
    /// equals OCB's encryption of some ordered pair of `values` at block j under that nonce.
    /// Each pair is enciphered by RustCrypto's OCB3 in a line holding it at block j (a block's
    /// ciphertext depends on nothing else of the line, nor on the associated data).
    #[cfg(test)]
    fn speculated_blocks(&self, addr: u64, ctr: u32, values: &[u64], positions: usize, ct: &[u8]) -> u64 {
        let mut bits = 0;
        let mut line = vec![0u8; ct.len()];
        let mut tag = [0u8; 16];
        for j in 0..positions {
            for &a in values {
                for &b in values {
                    line.fill(0);
                    line[16 * j..16 * j + 8].copy_from_slice(&a.to_le_bytes());
                    line[16 * j + 8..16 * j + 16].copy_from_slice(&b.to_le_bytes());
                    self.cipher.encrypt(&Self::nonce(addr, ctr), &[], &mut line, &mut tag[..self.tag_bytes as usize]);
                    if line[16 * j..16 * j + 16] == ct[16 * j..16 * j + 16] {
                        bits |= 1 << j;
                    }
                }
            }
        }
        bits
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
        // Offsets need the nonce; each chunk is deciphered once it and its offset are here.
        let t_off = m.aes.run(t_ctr, 16);
        // With re-ordering the bitmap is read next: it orders the chunks; the tag comes last.
        let bitmap = self.bitmaps.as_mut().map(|b| b.read(&mut m.port, &mut m.aes, addr, ctr, t_ctr, t));
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        let t_tag = m.port.read(ga, tag, t).last;
        let mut arrive = [0; MAX_LINE / 16];
        let n = out.len() / 16;
        chunk_arrivals(m.port.beat(), tr, 16, &mut arrive[..n]);
        // Never-written memory is raw zeros unless it starts encrypted (the boot image).
        let initial = addr >= self.boot_end && ctr == 0 && all_zero(tag) && all_zero(out);
        if m.spec.fv.is_some() {
            let sp = Speculated { addr, ctr, bitmap, t_off, t_tag, last: tr.last, arrive: &arrive[..n], initial };
            return self.read_speculated(m, sp, tag, out);
        }
        let t_dec = m.aes.run_each(arrive[..n].iter().map(|&a| a.max(t_off)));
        let ready = t_dec + m.xor_latency;
        // Tag = AES(checksum ⊕ offset ⊕ L$) after the last chunk, then compared.
        let checked = m.aes.run(ready, 16).max(t_tag) + 1;
        m.note_check(checked);
        self.check_cycles += checked - ready;
        self.exposed += ready.saturating_sub(tr.last);
        if !initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), &[], out, tag) {
            return Err(self.tag_failure(addr, ctr));
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
        // With re-ordering, the frequent chunks (by the table now) go first, and the bitmap
        // saying so is the associated data (004 §3.2.2).
        let bitmap = match (&self.bitmaps, &m.spec.fv) {
            (Some(_), Some(fv)) => {
                let bm = fv.table.frequent_chunks(plain) as u32;
                permute(bm, plain, ct);
                bm
            }
            _ => {
                ct.copy_from_slice(plain);
                0
            }
        };
        let ad_bytes = bitmap.to_le_bytes();
        let ad = self.bitmaps.as_ref().map_or(&[][..], |b| &ad_bytes[..b.bytes()]);
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        self.cipher.encrypt(&Self::nonce(addr, ctr), ad, ct, tag);
        // Offset, then all chunks in parallel, then the tag (and HASH(A) beside them).
        let t_off = m.aes.run(t, 16);
        let t_enc = m.aes.run(t_off, plain.len() as u64) + m.xor_latency;
        let t_ad = if ad.is_empty() { 0 } else { m.aes.run(t, 16) };
        let t_tag = m.aes.run(t_enc, 16).max(t_ad);
        let done = m.port.write(addr, ct, t_enc);
        let done = done.max(self.ctr_buf.write(&mut m.port, self.ctr_addr(addr), &ctr.to_le_bytes(), t_enc));
        let done = done.max(m.port.write(self.tag_addr(addr), tag, t_tag));
        Ok(match &mut self.bitmaps {
            Some(b) => done.max(b.write(&mut m.port, &mut m.aes, addr, ctr, bitmap, t)),
            None => done,
        })
    }

    fn boot_encrypted(&mut self, end: u64) -> Result<Option<Arc<dyn BootImage>>, String> {
        self.boot_end = end;
        let bitmaps = self.bitmaps.as_ref().map(|b| (b.store, b.seal.clone()));
        let lines = BootOcb { cipher: self.cipher.clone(), tags: self.tags, tag_bytes: self.tag_bytes as usize, line: self.line as usize, bitmaps };
        Ok(Some(Boot::image(lines, end, self.line)))
    }

    fn write_back_cached(&mut self, m: &mut Machine, t: Cycle) -> Cycle {
        self.bitmaps.as_mut().map_or(t, |b| b.write_back(&mut m.port, t))
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
        if let Some(b) = &mut self.bitmaps {
            b.clear();
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        let mut v = vec![Meta::new(MetaKind::Counter("ocb"), self.ctr_addr(addr), B_CTR), Meta::new(MetaKind::Tag, self.tag_addr(addr), self.tag_bytes)];
        v.extend(self.bitmaps.as_ref().map(|b| Meta::new(MetaKind::FvBitmap, b.store.addr(addr), b.store.bytes)));
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.tag_failures, self.exposed, self.check_cycles) = (0, 0, 0, 0, 0);
        self.ctr_buf.reset_stats();
        if let Some(b) = &mut self.bitmaps {
            b.reset_stats();
        }
    }

    fn space_overhead(&self) -> f64 {
        self.ctrs.overhead() + self.tags.overhead() + self.bitmaps.as_ref().map_or(0.0, |b| b.store.overhead())
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
        if let Some(b) = &self.bitmaps {
            let c = &b.counts;
            out.int("ocb.bitmap_reads", c.reads);
            out.int("ocb.bitmap_writes", c.writes);
            out.int("ocb.bitmap_bus_reads", c.bus_reads);
            out.int("ocb.bitmap_prefetches", c.prefetches);
            out.int("ocb.bitmap_bus_writes", c.bus_writes);
            let (hits, lookups) = b.cache_hits();
            out.rate("ocb.bitmap_cache_hit_rate", hits, lookups);
            out.int("ocb.bitmap_wait_cycles", c.wait_cycles);
            out.rate("ocb.bitmap_wait_per_read", c.wait_cycles, c.reads);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::MetaKind;
    use crate::testutil::{frequent_lines, params, stat};
    use crate::{AccessKind, Engine, IntegrityError};

    const FV: &str = "speculation.frequent_values=8";

    fn engine(integ: &str, extra: &[&str]) -> Engine {
        Engine::new(&params(integ, "ocb", extra), 3).unwrap()
    }

    /// Read `lines` lines of `frequent_lines` back, each a miss well after the last, checking
    /// the data; statistics cover the reads only.
    fn read_back(e: &mut Engine, want: &[Vec<u8>]) {
        e.reset_stats();
        for (k, w) in want.iter().enumerate() {
            let mut got = vec![0u8; 64];
            e.read(0x10_0000 + k as u64 * 64, &mut got, 10_000 + k as u64 * 5_000).unwrap();
            assert_eq!(&got, w, "line {}", k);
        }
    }

    fn read(e: &mut Engine, addr: u64) -> Result<Vec<u8>, IntegrityError> {
        let mut v = vec![0u8; 64];
        e.read(addr, &mut v, 0)?;
        Ok(v)
    }

    fn bitmap_addr(e: &Engine, addr: u64) -> u64 {
        e.metadata_of(addr).iter().find(|m| m.kind == MetaKind::FvBitmap).expect("bitmap listed").addr
    }

    #[test]
    fn reordered_lines_round_trip_under_every_integrity_scheme() {
        for integ in crate::integrity::INTEGRITY_SCHEMES {
            for boot in ["false", "true"] {
                let b = format!("memory.boot_encrypted={}", boot);
                let mut e = engine(integ, &[FV, &b]);
                // 300 lines: more than the 16-KiB L2, so lines and tree nodes are evicted and
                // come back through the re-ordering.
                let want = frequent_lines(&mut e, 300);
                read_back(&mut e, &want);
                assert!(stat(&e, "ocb.bitmap_reads") >= 300.0, "{}", integ);
                assert!(stat(&e, "speculation.fv_frequent_chunks") > 0.3 * 2400.0, "{}", integ);
                if boot == "true" {
                    assert_eq!(read(&mut e, 0x30_0000).unwrap(), vec![0u8; 64], "{}: boot zeros", integ);
                }
                e.check(0).unwrap();
            }
        }
    }

    #[test]
    fn ciphertext_speculation_decides_as_the_real_speculative_encryptions_do() {
        // Every miss runs `speculated_blocks` (RustCrypto's OCB3 encryption of every ordered
        // pair of table values at every speculated block) and asserts the plaintext decision
        // equals it; re-ordering makes more blocks predictable than in place (004 Fig. 6).
        let mut hits = Vec::new();
        for (n, reorder) in [(8, true), (16, true), (32, true), (8, false)] {
            let fv = format!("speculation.frequent_values={}", n);
            let r = format!("ocb.reorder_chunks={}", reorder);
            let mut e = engine("none", &[&fv, &r, "speculation.engines=4", "memory.latency=250"]);
            let want = frequent_lines(&mut e, 300);
            read_back(&mut e, &want);
            let (h, freq) = (stat(&e, "speculation.fv_hits"), stat(&e, "speculation.fv_frequent_chunks"));
            assert!(h > 0.0 && h <= freq, "{} values: {} hits of {} frequent chunks", n, h, freq);
            assert!(stat(&e, "speculation.fv_encryptions") > 0.0);
            hits.push(h);
        }
        assert!(hits[0] > 1.5 * hits[3], "re-ordered {} vs in place {} chunk hits", hits[0], hits[3]);
    }

    #[test]
    fn a_line_of_frequent_values_is_usable_before_its_decryption_would_finish() {
        let mut ready = Vec::new();
        for extra in [&["speculation.frequent_values=0"][..], &[FV][..]] {
            let mut e = engine("none", &[extra[0], "speculation.engines=4", "memory.latency=250", "aes.latency=80"]);
            e.write(0x2000, &[0u8; 64], 0).unwrap();
            e.write(0x2040, &[1u8; 64], 0).unwrap();
            e.flush(0).unwrap();
            // The neighbour brings the counter and bitmap words both lines share on chip.
            e.access(0x2040, AccessKind::Load, 0).unwrap();
            e.settle().unwrap();
            let t = 1_000_000;
            ready.push(e.access(0x2000, AccessKind::Load, t).unwrap().ready - t);
        }
        // Without: the last block's 80-cycle decryption follows its arrival; with: a match.
        assert!(ready[1] + 70 < ready[0], "ready after {:?} cycles (off, on)", ready);
    }

    #[test]
    fn a_changed_replayed_or_misplaced_bitmap_and_swapped_chunks_fail_the_tag() {
        let frequent = |k: u64| -> Vec<u8> {
            // chunks 1, 2, 5, 6 are the frequent zero (004 Fig. 4), the others not
            let mut l = crate::testutil::pattern(k, 64);
            for i in [1, 2, 5, 6] {
                l[i * 8..i * 8 + 8].fill(0);
            }
            l
        };
        let setup = || {
            let mut e = engine("none", &[FV]);
            e.write(0x100, &[0u8; 64], 0).unwrap();
            e.write(0x8000, &frequent(1), 0).unwrap();
            e.write(0x8040, &frequent(2), 0).unwrap();
            e.flush(0).unwrap();
            e
        };
        let poke = |e: &mut Engine, a: u64, f: &dyn Fn(&mut [u8])| {
            let mut b = [0u8; 64];
            e.untrusted().read(a, &mut b);
            f(&mut b);
            e.untrusted().write(a, &b);
        };
        let expect_fail = |e: &mut Engine, what: &str| {
            let err = read(e, 0x8000).expect_err(what);
            assert_eq!(err.addr, 0x8000, "{}", what);
            assert!(err.what.contains("tag mismatch"), "{}: {}", what, err.what);
        };
        // A flipped bitmap bit.
        let mut e = setup();
        assert_eq!(read(&mut e, 0x8000).unwrap(), frequent(1));
        e.flush(0).unwrap();
        let ba = bitmap_addr(&e, 0x8000);
        poke(&mut e, ba, &|b| b[0] ^= 0x08);
        expect_fail(&mut e, "flipped bitmap");
        // The neighbour's bitmap in this line's place.
        let mut e = setup();
        let (ba, bb) = (bitmap_addr(&e, 0x8000), bitmap_addr(&e, 0x8040));
        assert_eq!(bb, ba + 1, "bitmaps are a byte per line, side by side");
        let mut nb = [0u8; 1];
        e.untrusted().read(bb, &mut nb);
        e.untrusted().write(ba, &nb);
        expect_fail(&mut e, "misplaced bitmap");
        // The line's own older bitmap, replayed after a rewrite with another bitmap.
        let mut e = setup();
        let (mut old, ba) = ([0u8; 1], bitmap_addr(&e, 0x8000));
        e.untrusted().read(ba, &mut old);
        e.write(0x8000, &[7u8; 64], 0).unwrap();
        e.flush(0).unwrap();
        e.untrusted().write(ba, &old);
        expect_fail(&mut e, "replayed bitmap");
        // Two 8-B chunks of the stored line swapped (within a block, and across blocks).
        for (i, j) in [(0, 1), (1, 4)] {
            let mut e = setup();
            poke(&mut e, 0x8000, &|b| {
                let mut c = [0u8; 8];
                c.copy_from_slice(&b[i * 8..i * 8 + 8]);
                b.copy_within(j * 8..j * 8 + 8, i * 8);
                b[j * 8..j * 8 + 8].copy_from_slice(&c);
            });
            expect_fail(&mut e, &format!("chunks {} and {} swapped", i, j));
        }
        // Untouched, the line still reads right after all that.
        let mut e = setup();
        assert_eq!(read(&mut e, 0x8000).unwrap(), frequent(1));
    }

    #[test]
    fn bitmap_traffic_is_its_own_and_is_all_the_traffic_speculation_adds() {
        // Writes, write-backs and reads from the start (no reset).
        let run = |extra: &[&str]| {
            let mut e = engine("none", extra);
            let want = frequent_lines(&mut e, 300);
            for (k, w) in want.iter().enumerate() {
                assert_eq!(&read(&mut e, 0x10_0000 + k as u64 * 64).unwrap(), w);
            }
            e.flush(0).unwrap();
            e
        };
        let off = run(&["speculation.frequent_values=0"]);
        assert!(off.metadata_of(0x8000).iter().all(|m| m.kind != MetaKind::FvBitmap));
        for cache in ["0", "1024"] {
            let c = format!("ocb.bitmap_cache_entries={}", cache);
            let on = run(&[FV, &c]);
            let (reads, bus, pre) = (stat(&on, "ocb.bitmap_reads"), stat(&on, "ocb.bitmap_bus_reads"), stat(&on, "ocb.bitmap_prefetches"));
            let (writes, bus_w) = (stat(&on, "ocb.bitmap_writes"), stat(&on, "ocb.bitmap_bus_writes"));
            assert!(reads >= 300.0 && writes >= 300.0);
            // Every memory read and write speculation added is a bitmap's, counted as such.
            assert_eq!(stat(&on, "mem.reads") - stat(&off, "mem.reads"), bus + pre, "cache {}", cache);
            assert_eq!(stat(&on, "mem.writes") - stat(&off, "mem.writes"), bus_w, "cache {}", cache);
            if cache == "0" {
                assert_eq!((bus, pre, bus_w), (reads, 0.0, writes));
            } else {
                // Eight lines' bitmaps to a word, the next word prefetched, written back when
                // the word leaves or at the flush: few bus transfers.
                assert!(bus + pre < 0.2 * reads, "{} + {} bus reads for {} bitmaps", bus, pre, reads);
                assert!(bus_w < 0.2 * writes, "{} bus writes for {} bitmaps", bus_w, writes);
            }
        }
        // A cache that is not 8-way sets of a power of two is refused by name.
        let err = Engine::new(&params("none", "ocb", &[FV, "ocb.bitmap_cache_entries=12"]), 3).err().expect("12 entries");
        assert!(err.0.contains("ocb.bitmap_cache_entries"), "{}", err.0);
        // The region is the linear layout of a byte per line.
        let e = engine("none", &[FV]);
        let base = e.layout().regions().iter().find(|r| r.name == "ocb bitmaps").unwrap().base;
        assert_eq!(bitmap_addr(&e, 0x1000), base + 0x1000 / 64);
    }
}
