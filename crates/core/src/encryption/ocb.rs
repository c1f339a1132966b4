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
//! bitmap cache (`ocb.bitmap_cache_entries`, `ocb.bitmap_prefetch`). On a miss the speculation
//! is posted with the fetch request (`speculation.at_fetch`, as tdes's): its engine computes
//! the line's offsets from the nonce at the request and encrypts every ordered pair of table
//! values (N² blocks) for each of the ⌊f/2⌋ blocks the bitmap says hold two frequent chunks
//! (with `at_fetch` off, from once the demand path's offsets and the bitmap are known); an
//! arriving block equal to one of them (the CAM) needs no decryption, and is placed once the
//! bitmap is in. OCB's block
//! C_j = Δ_j ⊕ AES_K(P_j ⊕ Δ_j) is a permutation of P_j under the line's offsets, so a block
//! matches exactly when it deciphers to a pair of table values: the decision is taken on the
//! plaintext, and test builds compare it with the real OCB encryptions of every pair
//! (`speculated_blocks`). The chunks are usable once their block is known and the bitmap
//! says where they go; the tag is computed once every block's plaintext is known.
//! `ocb.reorder_chunks=false` speculates every block in place (no bitmap; 004 Fig. 6's
//! comparison). With speculation off nothing of this exists and ocb is as above.
//!
//! Per-block MACs (`ocb.chunk_mac_bytes`, 004 §3.3: "each cipher size chunk to have its own
//! MAC"): tdes's chunk MAC at AES's block size with the bitmap as a second tweak,
//! T_j = AES_Km(P_j ⊕ R' ⊕ (j+1)·L' ⊕ b·L_b) truncated, R' = AES_Km(a/B ‖ ctr_a),
//! L' = AES_Km(1^128), L_b = AES_Km(1^127 ‖ 0), products in GF(2^128), b the line's bitmap (0
//! without re-ordering). P_j is block j as stored (re-ordered): the counter makes a replayed
//! line-with-MACs fail under the current counter, the bitmap term makes a changed or replayed
//! bitmap fail every block, and the position j makes swapped blocks fail. The bitmap enters
//! beside R', not inside it, so R' is computed from the counter alone, while the bitmap is on
//! its way. The MACs are stored beside the line and read in its
//! burst. With them the chunk MACs are the integrity: a block is verified once its plaintext
//! is known and its MAC computed (one AES) and compared, and the access when every block is;
//! nothing waits for OCB's whole-line tag, whose AES a read does not book. The tag is still stored,
//! read and checked functionally, only because RustCrypto's OCB3 deciphers nothing without it
//! (a redundant check of the whole line; its traffic is as without chunk MACs). MAC
//! speculation (with `speculation.frequent_values`): for each speculated block the engine also
//! computes the MAC of every pair of table values, once R' and the bitmap are known, so a block whose
//! ciphertext and MAC both match needs neither decryption nor MAC computation: it is verified
//! when it and its MAC are in. Like tdes's, the MACs bind address, counter and bitmap, not
//! freshness (a rolled-back line, counter, bitmap and MACs pass: that needs a tree).
//!
//! A line whose counter, tag and bytes are all zero is the all-zero initial memory.

use super::{Boot, BootLines, ChunkMacCounts, Encryption, EncryptionScheme, NonceCounter, derive_key, Seed};
use crate::mem::BootImage;
use std::sync::Arc;
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, B_CTR, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::port::chunk_arrivals;
use crate::stats::Stats;
use crate::wordbuf::WordBuffer;
use secmem_crypto::modes::OcbAes;
use secmem_crypto::{Aes128, Field};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};
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
        param("ocb.chunk_mac_bytes", Def::Int(0), "B", "a MAC of this many bytes (1 to 16) per 128-bit AES block, stored beside the line, checked on every read and speculated with speculation.frequent_values; the access is then verified by these, not by the line's tag (004 §3.3, Fig. 7); 0: none, the OCB tag verifies the line"),
        param("ocb.reorder_chunks", Def::Bool(true), "bool", "with speculation.frequent_values: re-order each line's chunks by its frequent value bitmap so frequent chunks fill whole AES blocks (004 §3.2.2, Fig. 4); false: speculate every block in place"),
        param("ocb.bitmap_cache_entries", Def::Int(1024), "entries", "on-chip write-back cache of 8-B words of re-ordering bitmaps, in 8-way sets (more than 8 entries: 8 × a power of two; up to 8: one fully associative set): 1024 = 8 KB, the bitmaps of a 128-entry TLB's 4-KB pages (004 §3.2.2); 0: none, each bitmap read and written in memory"),
        param("ocb.bitmap_prefetch", Def::Int(1), "words", "bitmap words fetched after each missed one (004 §3.2.2: \"simple hardware prefetch\"); 0: none"),
    ],
    stats: &[
        stat("ocb.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("ocb.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("ocb.tag_failures", "lines", "lines whose tag did not match (tampering noticed)"),
        stat("ocb.counter_bus_reads", "reads", "counter words read from memory (buffer misses)"),
        stat("ocb.counter_buffer_hit_rate", "fraction", "counter reads served by the on-chip buffer"),
        stat("ocb.decrypt_exposed_cycles", "cycles", "decryption cycles after the data arrived, summed"),
        stat("ocb.decrypt_exposed_per_read", "cycles", "ocb.decrypt_exposed_cycles / ocb.reads"),
        stat("ocb.check_cycles_per_read", "cycles", "tag-check cycles per read"),
        stat("ocb.space_overhead", "fraction", "memory the counters and tags take, per byte of data"),
        stat("ocb.bitmap_reads", "reads", "reads of the written-lines bitmap"),
        stat("ocb.bitmap_writes", "writes", "writes of the bitmap"),
        stat("ocb.bitmap_bus_reads", "reads", "bitmap blocks read from memory"),
        stat("ocb.bitmap_prefetches", "reads", "bitmap blocks prefetched"),
        stat("ocb.bitmap_bus_writes", "writes", "bitmap blocks written to memory"),
        stat("ocb.bitmap_cache_hit_rate", "fraction", "bitmap reads served on chip"),
        stat("ocb.bitmap_wait_cycles", "cycles", "cycles reads waited for the bitmap, summed"),
        stat("ocb.bitmap_wait_per_read", "cycles", "ocb.bitmap_wait_cycles / ocb.bitmap_reads"),
    ],
};

/// ocb's registration. The tag (or per-block MACs) binds line, address and counter: changes and moves fail it, an old line with its old counter and tag passes.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees { confidential: true, hides_equal_lines: true, hides_rewrites: true, ..Guarantees::detecting(Detection::Access, Detection::Access, Detection::Never) }),
    coverage: Coverage { lays_out: &[Role::Counters, Role::Macs], protects: Role::LINES, guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Ocb::new(p, m, c, seed)?)),
};

/// Per-block MACs (see the module's comment): their key, offsets (j+1)·L', L_b, size and store.
#[derive(Clone)]
struct ChunkMacs {
    key: Aes128,
    offsets: [u128; MAX_LINE / 16],
    l_bitmap: u128,
    bytes: usize,
    store: PerLine,
}

impl ChunkMacs {
    fn new(seed: Seed, bytes: usize, store: PerLine) -> ChunkMacs {
        let key = Aes128::new(&derive_key(seed, 0x0cb5));
        let enc = |v: u128| {
            let mut b = v.to_be_bytes();
            key.encrypt(&mut b);
            u128::from_be_bytes(b)
        };
        let (l, l_bitmap) = (enc(u128::MAX), enc(u128::MAX - 1));
        let mut offsets = [0u128; MAX_LINE / 16];
        for (j, o) in offsets.iter_mut().enumerate() {
            *o = Field::GF128.mul(l, j as u128 + 1);
        }
        ChunkMacs { key, offsets, l_bitmap, bytes, store }
    }

    /// R' of line `addr` (line size `line`) at counter `ctr` (a/B < 2^64 and the counter leave
    /// the top 32 bits zero: never L' or L_b's input).
    fn r(&self, line: u64, addr: u64, ctr: u32) -> u128 {
        let mut b = [0u8; 16];
        b[4..12].copy_from_slice(&(addr / line).to_be_bytes());
        b[12..].copy_from_slice(&ctr.to_be_bytes());
        self.key.encrypt(&mut b);
        u128::from_be_bytes(b)
    }

    /// The MAC of each 16-B block of `plain` (as stored) into `out`.
    fn compute(&self, line: u64, addr: u64, ctr: u32, bitmap: u32, plain: &[u8], out: &mut [u8]) {
        let r = self.r(line, addr, ctr) ^ Field::GF128.mul(self.l_bitmap, bitmap as u128);
        let mut blocks = [[0u8; 16]; MAX_LINE / 16];
        let n = plain.len() / 16;
        for (j, (b, p)) in blocks[..n].iter_mut().zip(plain.chunks_exact(16)).enumerate() {
            *b = (u128::from_be_bytes(p.try_into().unwrap()) ^ r ^ self.offsets[j]).to_be_bytes();
        }
        self.key.encrypt_many(&mut blocks[..n]);
        for (o, b) in out.chunks_exact_mut(self.bytes).zip(&blocks[..n]) {
            o.copy_from_slice(&b[..self.bytes]);
        }
    }

    /// What MAC speculation finds (004 §3.3): bit j (< `positions`) set when the fetched MAC of
    /// block j equals the real MAC of some ordered pair of `values` at that position.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    fn speculated_hits(&self, line: u64, addr: u64, ctr: u32, bitmap: u32, values: &[u64], positions: usize, fetched: &[u8]) -> u64 {
        let (mut bits, n) = (0, fetched.len() / self.bytes);
        let (mut plain, mut want) = (vec![0u8; n * 16], vec![0u8; fetched.len()]);
        for &a in values {
            for &b in values {
                for blk in plain.chunks_exact_mut(16) {
                    blk[..8].copy_from_slice(&a.to_le_bytes());
                    blk[8..].copy_from_slice(&b.to_le_bytes());
                }
                self.compute(line, addr, ctr, bitmap, &plain, &mut want);
                for j in 0..positions {
                    if want[j * self.bytes..(j + 1) * self.bytes] == fetched[j * self.bytes..(j + 1) * self.bytes] {
                        bits |= 1 << j;
                    }
                }
            }
        }
        bits
    }
}

/// The boot image (`memory.boot_encrypted`): zeros sealed under counter 0, and their tags.
/// With re-ordering, every boot line's bitmap marks all its chunks frequent (zero is what the
/// boot writes; all-frequent is the identity order), sealed under counter 0 beside the tags.
struct BootOcb {
    cipher: OcbAes,
    tags: PerLine,
    tag_bytes: usize,
    line: usize,
    bitmaps: Option<(PerLine, BitmapSeal)>,
    macs: Option<ChunkMacs>,
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
        v.extend(self.macs.as_ref().map(|c| c.store));
        v
    }

    fn entry(&self, k: usize, addr: u64, out: &mut [u8]) {
        match (k, &self.bitmaps, &self.macs) {
            (1, Some((_, seal)), _) => seal.seal(addr, 0, self.bitmap(), out),
            // The last store is the MACs': of zeros (all-frequent zeros re-order to zeros).
            (_, b, Some(c)) if k == 1 + b.is_some() as usize => {
                let bm = if b.is_some() { self.bitmap() } else { 0 };
                c.compute(self.line as u64, addr, 0, bm, &[0u8; MAX_LINE][..self.line], out)
            }
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
    /// Per-block MACs (`ocb.chunk_mac_bytes`).
    macs: Option<ChunkMacs>,
    /// Test builds: every (address, counter) encrypted under, which must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64)>,
    // statistics
    reads: u64,
    writes: u64,
    tag_failures: u64,
    exposed: u64,
    check_cycles: u64,
    mac_counts: ChunkMacCounts,
}

impl Ocb {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Ocb, ConfigError> {
        let tag_bytes = p.u64_min("ocb.tag_bytes", 1)?;
        let cipher = OcbAes::new(&derive_key(seed, 0x0cb3), tag_bytes as usize)
            .ok_or_else(|| ConfigError(format!("ocb.tag_bytes: {} is not 8 or 16", tag_bytes)))?;
        let ctr_buf = WordBuffer::new(p.u64_min("ocb.counter_buffer_entries", 0)?, "ocb.counter_buffer_entries")?;
        let ctrs = m.layout.per_line(Role::Counters, "ocb counters", covered, B_CTR);
        let tags = m.layout.per_line(Role::Macs, "ocb tags", covered, tag_bytes);
        let mut bitmaps = None;
        if let Some(fv) = m.spec.fv.as_mut() {
            fv.dedicate(p.u64_min("aes.latency", 1)?, p.rate("aes.throughput")? / p.freq("core.clock")?, 16);
            if p.bool("ocb.reorder_chunks")? {
                let store = m.layout.per_line(Role::Macs, "ocb bitmaps", covered, bitmap_bytes(m.line()));
                let (entries, prefetch) = (p.u64_min("ocb.bitmap_cache_entries", 0)?, p.u64_min("ocb.bitmap_prefetch", 0)?);
                let b = Bitmaps::new(store, covered, &derive_key(seed, 0x0cb4), entries, prefetch)
                    .map_err(|e| ConfigError(format!("ocb.bitmap_cache_entries: {}", e)))?;
                bitmaps = Some(b);
            }
        }
        let mac_bytes = p.u64_min("ocb.chunk_mac_bytes", 0)?;
        if mac_bytes > 16 {
            return Err(ConfigError(format!("ocb.chunk_mac_bytes: {} exceeds the 16-B AES block", mac_bytes)));
        }
        let macs = (mac_bytes > 0).then(|| {
            let store = m.layout.per_line(Role::Macs, "ocb chunk MACs", covered, m.line() / 16 * mac_bytes);
            ChunkMacs::new(seed, mac_bytes as usize, store)
        });
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
            macs,
            #[cfg(test)]
            nonces_used: Default::default(),
            reads: 0,
            writes: 0,
            tag_failures: 0,
            exposed: 0,
            check_cycles: 0,
            mac_counts: ChunkMacCounts::default(),
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
    /// When the miss was requested (speculation posted with the fetch starts then).
    t_req: Cycle,
    ctr: u32,
    /// The bitmap and when it is known (re-ordering on).
    bitmap: Option<(u32, Cycle)>,
    t_ctr: Cycle,
    t_off: Cycle,
    t_tag: Cycle,
    /// The fetched per-block MACs (empty without) and when they are in.
    macs: &'a [u8],
    t_macs: Cycle,
    /// The line's last beat, and when each 16-B block of it is in.
    last: Cycle,
    arrive: &'a [Cycle],
    /// Raw never-written zeros: not ciphertext, nothing speculated matches.
    initial: bool,
}

impl Ocb {
    fn tag_failure(&mut self, addr: u64, ctr: u32) -> IntegrityError {
        self.tag_failures += 1;
        IntegrityError::tampered(addr, format!("ocb tag mismatch (counter {}): line, counter, tag or bitmap was changed", ctr))
    }

    /// Check the per-block MACs `fetched` of the line deciphered (as stored) into `stored`.
    fn check_macs(&mut self, addr: u64, ctr: u32, bitmap: u32, initial: bool, stored: &[u8], fetched: &[u8]) -> Result<(), IntegrityError> {
        let Some(c) = &self.macs else { return Ok(()) };
        if initial && all_zero(fetched) {
            return Ok(());
        }
        let mut want = [0u8; MAX_LINE];
        let want = &mut want[..fetched.len()];
        c.compute(self.line, addr, ctr, bitmap, stored, want);
        if want != fetched {
            self.mac_counts.failures += 1;
            return Err(IntegrityError::tampered(addr, format!("ocb chunk MAC mismatch (counter {}): line, counter, bitmap or MACs were changed", ctr)));
        }
        Ok(())
    }

    /// When the MACs of the blocks not in `skip` are checked: each one AES once R' (`t_rm`: and the bitmap)
    /// and its plaintext (`plain`) are known, compared once the fetched MACs are in.
    fn mac_blocks(m: &mut Machine, t_rm: Cycle, plain: &[Cycle], skip: u64, t_macs: Cycle) -> Cycle {
        let mut done = 0;
        for (j, &p) in plain.iter().enumerate() {
            if skip >> j & 1 == 0 {
                done = done.max(m.aes.run(p.max(t_rm), 16).max(t_macs) + 1);
            }
        }
        done
    }

    /// Book a read's verification at `done` (data usable at `ready`) in the MAC counts.
    fn verified(&mut self, m: &mut Machine, blocks: usize, ready: Cycle, done: Cycle) {
        let done = done.max(ready);
        self.mac_counts.checks += blocks as u64;
        self.mac_counts.check_exposed += done - ready;
        self.check_cycles += done - ready;
        m.note_check(done);
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
        let t_ad = if ad.is_empty() || self.macs.is_some() { 0 } else { m.aes.run(t_bm, 16) };
        let mut stored = [0u8; MAX_LINE];
        let stored = &mut stored[..out.len()];
        stored.copy_from_slice(out);
        #[cfg(test)]
        let ct = stored.to_vec();
        if !sp.initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), ad, stored, tag) {
            return Err(self.tag_failure(addr, ctr));
        }
        self.check_macs(addr, ctr, bitmap, sp.initial, stored, sp.macs)?;
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
            if let Some(c) = &self.macs {
                // A hit needs its MAC to match too (a truncated MAC may also match other pairs).
                let real = c.speculated_hits(self.line, addr, ctr, bitmap, &vals[..k], positions, sp.macs);
                assert_eq!(hits, hits & real, "plaintext and MAC matching disagree");
            }
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
        // With per-block MACs, R' (then the bitmap's term) and the demand MACs of the blocks
        // not matched are booked before this miss's speculation (tdes's order).
        let t_rm = if self.macs.is_some() { (m.aes.run(sp.t_ctr, 16) + xor).max(t_bm) } else { 0 };
        let mut plain_at = [0; MAX_LINE / 16];
        for j in 0..n {
            plain_at[j] = dec[j] + xor;
        }
        let mut mac_done = 0;
        if self.macs.is_some() {
            mac_done = Self::mac_blocks(m, t_rm, &plain_at[..n], hits, sp.t_macs);
        }
        let fv = m.spec.fv.as_mut().expect("speculating");
        let mut spec = [0; MAX_LINE / 16];
        let mut spec_mac = [0; MAX_LINE / 16];
        let mut launched = 0u64;
        let lat = m.aes.latency();
        let at_fetch = fv.at_fetch && k > 0;
        let engine = fv.engine.as_mut().unwrap_or(&mut m.aes);
        // Posted with the fetch (004 §3.2 ①-②, Fig. 3), the speculation's engine computes the
        // line's offsets (and R') from the nonce at the request, as tdes's does; the blocks'
        // places still come from the bitmap, which a hit waits for. Otherwise it starts from
        // the demand path's offsets and the bitmap, known once counter and bitmap are read.
        let (start, s_rm) = if at_fetch {
            let s_off = engine.run(sp.t_req, 16);
            let s_rm = if self.macs.is_some() { (engine.run(sp.t_req, 16) + xor).max(t_bm) } else { 0 };
            (s_off, s_rm)
        } else {
            (start, t_rm)
        };
        let t_place = if self.bitmaps.is_some() { t_bm } else { 0 };
        // With per-block MACs, each speculated block's N² MACs follow its ciphertexts, from when
        // R' and the bitmap are known, not started unless they beat the block's own MAC. They
        // are launched whether or not the ciphertexts were: a block deciphered the ordinary way
        // to a pair whose speculated MAC matches needs no MAC computation either (as otp's).
        let mut mac_launched = 0u64;
        for j in 0..if k > 0 { positions } else { 0 } {
            if let Some(d) = engine.run_by(start, pairs * 16, slow[j]) {
                spec[j] = d;
                launched |= 1 << j;
            }
            if self.macs.is_some() {
                if let Some(d) = engine.run_by(s_rm, pairs * 16, plain_at[j] + lat) {
                    spec_mac[j] = d;
                    mac_launched |= 1 << j;
                }
            }
        }
        // Posted at the fetch, the engine goes on through the blocks after those the bitmap
        // marks until the bitmap says where they end: work it had started by then is done for
        // nothing (re-ordering puts the frequent blocks first, so it is never the other way).
        let mut wasted = 0u64;
        if at_fetch && self.bitmaps.is_some() {
            for _ in positions..n {
                wasted += engine.run_by(start, pairs * 16, t_bm + lat).is_some() as u64;
            }
        }
        let cam = hits;
        hits &= launched;
        // A hit block is known when it and its speculation are in: usable then (its place is
        // known: the bitmap came before the speculation), and in the tag's checksum.
        let (mut ready, mut plain_all, mut base, mut early) = (0, 0, 0, 0);
        let mut known = [0; MAX_LINE / 16];
        for j in 0..n {
            let (mut r, mut p) = (slow[j], plain_at[j]);
            if hits >> j & 1 == 1 {
                let fast = sp.arrive[j].max(spec[j]).max(t_place) + fv.match_latency;
                early += (fast < slow[j]) as u64;
                (r, p) = (fast.min(r), fast.min(p));
            }
            known[j] = p;
            ready = ready.max(r);
            plain_all = plain_all.max(p);
            base = base.max(slow[j]);
        }
        let match_latency = fv.match_latency;
        let c = &mut fv.counts;
        c.line(out.len() / 8, frequent);
        c.hits += 2 * hits.count_ones() as u64;
        c.early += 2 * early;
        c.encryptions += pairs * (launched.count_ones() as u64 + mac_launched.count_ones() as u64 + wasted);
        c.saved_cycles += base - ready;
        if self.macs.is_some() {
            // A pair block whose speculated MAC matches is verified when it is known (matched
            // in ciphertext, or deciphered) and its MAC is in; a pair block whose MAC
            // speculation was not launched is MACed the ordinary way once known.
            let mut done = mac_done;
            for j in 0..n {
                if cam >> j & 1 == 0 {
                    continue;
                }
                if mac_launched >> j & 1 == 1 {
                    self.mac_counts.speculated += 1;
                    let at = if hits >> j & 1 == 1 { sp.arrive[j].max(spec[j]).max(t_place) } else { known[j] };
                    done = done.max(at.max(spec_mac[j]).max(sp.t_macs) + match_latency);
                } else {
                    done = done.max(m.aes.run(known[j].max(t_rm), 16).max(sp.t_macs) + 1);
                }
            }
            self.verified(m, n, ready, done);
            self.exposed += ready.saturating_sub(sp.last);
            return Ok(ready);
        }
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
        let n = out.len() / 16;
        // The per-block MACs come with the line, in its burst (004 §2.2).
        let mut macs = [0u8; MAX_LINE];
        let mac_len = self.macs.as_ref().map_or(0, |c| n * c.bytes);
        let (tr, t_macs) = match &self.macs {
            Some(c) => {
                let (tr, tm) = m.port.read_beside(addr, out, c.store.addr(addr), &mut macs[..mac_len], t);
                (tr, tm.last)
            }
            None => (m.port.read(addr, out, t), 0),
        };
        let macs = &macs[..mac_len];
        // Offsets need the nonce; each chunk is deciphered once it and its offset are here.
        let t_off = m.aes.run(t_ctr, 16);
        // With re-ordering the bitmap is read next: it orders the chunks; the tag comes last.
        let bitmap = self.bitmaps.as_mut().map(|b| b.read(&mut m.port, &mut m.aes, addr, ctr, t_ctr, t));
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        let t_tag = m.port.read(ga, tag, t).last;
        let mut arrive = [0; MAX_LINE / 16];
        chunk_arrivals(m.port.beat(), tr, 16, &mut arrive[..n]);
        // Never-written memory is raw zeros unless it starts encrypted (the boot image).
        let initial = addr >= self.boot_end && ctr == 0 && all_zero(tag) && all_zero(out);
        if m.spec.fv.is_some() {
            let sp = Speculated { addr, t_req: t, ctr, bitmap, t_ctr, t_off, t_tag, macs, t_macs, last: tr.last, arrive: &arrive[..n], initial };
            return self.read_speculated(m, sp, tag, out);
        }
        if self.macs.is_some() {
            // Each block MACed once deciphered; nothing waits for the tag (see the module).
            let mut plain_at = [0; MAX_LINE / 16];
            for (p, &a) in plain_at.iter_mut().zip(&arrive[..n]) {
                *p = m.aes.run(a.max(t_off), 16) + m.xor_latency;
            }
            let ready = plain_at[..n].iter().copied().max().unwrap_or(t_off);
            let t_rm = m.aes.run(t_ctr, 16) + m.xor_latency;
            let done = Self::mac_blocks(m, t_rm, &plain_at[..n], 0, t_macs);
            if !initial && !self.cipher.decrypt(&Self::nonce(addr, ctr), &[], out, tag) {
                return Err(self.tag_failure(addr, ctr));
            }
            self.check_macs(addr, ctr, 0, initial, out, macs)?;
            self.verified(m, n, ready, done);
            self.exposed += ready.saturating_sub(tr.last);
            return Ok(ready);
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
        // The per-block MACs are of the blocks as stored (re-ordered), before encryption.
        let mut macs = [0u8; MAX_LINE];
        let mac_len = self.macs.as_ref().map_or(0, |c| plain.len() / 16 * c.bytes);
        if let Some(c) = &self.macs {
            c.compute(self.line, addr, ctr, bitmap, ct, &mut macs[..mac_len]);
        }
        let mut tag = [0u8; 16];
        let tag = &mut tag[..self.tag_bytes as usize];
        self.cipher.encrypt(&Self::nonce(addr, ctr), ad, ct, tag);
        // Offset, then all chunks in parallel, then the tag (and HASH(A) beside them).
        let t_off = m.aes.run(t, 16);
        let t_enc = m.aes.run(t_off, plain.len() as u64) + m.xor_latency;
        let t_ad = if ad.is_empty() { 0 } else { m.aes.run(t, 16) };
        let t_tag = m.aes.run(t_enc, 16).max(t_ad);
        let done = match &self.macs {
            // The MACs go with the line, in its burst: R', then every block's MAC.
            Some(c) => {
                let t_rm = m.aes.run(t, 16);
                let t_m = m.aes.run(t_rm + m.xor_latency, plain.len() as u64);
                m.port.write_beside(addr, ct, c.store.addr(addr), &macs[..mac_len], t_enc.max(t_m))
            }
            None => m.port.write(addr, ct, t_enc),
        };
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
        let lines = BootOcb { cipher: self.cipher.clone(), tags: self.tags, tag_bytes: self.tag_bytes as usize, line: self.line as usize, bitmaps, macs: self.macs.clone() };
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
        v.extend(self.macs.as_ref().map(|c| Meta::new(MetaKind::ChunkMacs("ocb"), c.store.addr(addr), c.store.bytes)));
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.tag_failures, self.exposed, self.check_cycles) = (0, 0, 0, 0, 0);
        self.mac_counts = ChunkMacCounts::default();
        self.ctr_buf.reset_stats();
        if let Some(b) = &mut self.bitmaps {
            b.reset_stats();
        }
    }

    fn space_overhead(&self) -> f64 {
        self.ctrs.overhead() + self.tags.overhead() + self.bitmaps.as_ref().map_or(0.0, |b| b.store.overhead()) + self.macs.as_ref().map_or(0.0, |c| c.store.overhead())
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
        if self.macs.is_some() {
            self.mac_counts.stats("ocb", self.reads, out);
        }
        if let Some(b) = &self.bitmaps {
            let c = &b.counts;
            out.int("ocb.bitmap_reads", c.reads);
            out.int("ocb.bitmap_writes", c.writes);
            out.int("ocb.bitmap_bus_reads", c.bus_reads);
            out.int("ocb.bitmap_prefetches", c.prefetches);
            out.int("ocb.bitmap_bus_writes", c.bus_writes);
            out.rate("ocb.bitmap_cache_hit_rate", c.hits, c.reads);
            out.int("ocb.bitmap_wait_cycles", c.wait_cycles);
            out.rate("ocb.bitmap_wait_per_read", c.wait_cycles, c.reads);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::MetaKind;
    use crate::testutil::{frequent_line_miss, frequent_lines, params, stat};
    use crate::{Engine, IntegrityError};

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

    /// 300 `frequent_lines` written and read back as misses (statistics of the reads), with
    /// four speculation pipelines and a memory slow enough for speculation to be in time.
    fn frequent_reads(extra: &[&str]) -> Engine {
        let sets: Vec<&str> = extra.iter().copied().chain(["speculation.engines=4", "memory.latency=250"]).collect();
        let mut e = engine("none", &sets);
        let want = frequent_lines(&mut e, 300);
        read_back(&mut e, &want);
        e
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
    fn speculation_posted_with_the_fetch_does_not_wait_for_the_counter() {
        // No counter buffer: every counter comes from memory with its line. Posted with the
        // fetch (004 §3.2 ①-②) the speculation computes its own offsets from the request on
        // and is in when the blocks arrive; waiting for the demand path's offsets it cannot
        // beat the decryption. (The bitmap word is on chip: the neighbour's read brought it.)
        let mut t = Vec::new();
        for at_fetch in ["true", "false"] {
            let at = format!("speculation.at_fetch={at_fetch}");
            let mut e = engine("none", &[FV, "speculation.engines=4", "memory.latency=250", "ocb.counter_buffer_entries=0", "speculation.use_before_verify=false", &at]);
            let o = frequent_line_miss(&mut e);
            t.push((o.ready, stat(&e, "speculation.fv_early_hits")));
        }
        assert_eq!(t[0].1, 16.0, "both lines' chunks: {:?}", t);
        assert_eq!(t[1].1, 0.0, "{:?}", t);
        assert!(t[0].0 < t[1].0, "ready after {:?} cycles (at the fetch, after the counter)", t);
    }

    #[test]
    fn reordered_lines_round_trip_under_every_integrity_scheme() {
        for integ in crate::testutil::integrities_with("ocb") {
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
            let e = frequent_reads(&[&fv, &r]);
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
            ready.push(frequent_line_miss(&mut e).ready);
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

    const MACS: &str = "ocb.chunk_mac_bytes=8";

    #[test]
    fn chunk_mac_lines_round_trip_under_every_integrity_scheme() {
        for integ in crate::testutil::integrities_with("ocb") {
            for (spec, boot) in [("speculation.frequent_values=0", "false"), (FV, "true")] {
                let b = format!("memory.boot_encrypted={}", boot);
                let mut e = engine(integ, &[MACS, spec, &b]);
                let want = frequent_lines(&mut e, 300);
                read_back(&mut e, &want);
                assert_eq!(stat(&e, "ocb.mac_checks"), 4.0 * stat(&e, "ocb.reads"), "{}", integ);
                assert_eq!(stat(&e, "ocb.mac_failures"), 0.0);
                if boot == "true" {
                    assert_eq!(read(&mut e, 0x30_0000).unwrap(), vec![0u8; 64], "{}: boot zeros", integ);
                }
                e.check(0).unwrap();
            }
        }
    }

    #[test]
    fn the_chunk_mac_binds_block_position_counter_bitmap_and_line() {
        // The MACs alone (RustCrypto's OCB3 tag also fails on most of these, so the engine
        // tests below cannot tell which check caught a change).
        let store = crate::layout::Layout::new(1 << 20, 64).per_line(crate::decl::Role::Macs, "MACs", 1 << 20, 32);
        let c = super::ChunkMacs::new(super::Seed::fixed(3), 8, store);
        let line = crate::testutil::pattern(9, 64);
        let mac = |addr: u64, ctr: u32, bm: u32, l: &[u8]| {
            let mut o = [0u8; 32];
            c.compute(64, addr, ctr, bm, l, &mut o);
            o
        };
        let base = mac(0x8000, 5, 0x66, &line);
        assert_ne!(base, mac(0x8000, 6, 0x66, &line), "counter (a replayed line with its MACs)");
        assert_ne!(base, mac(0x8000, 5, 0x67, &line), "bitmap");
        assert_ne!(base, mac(0x8040, 5, 0x66, &line), "line address");
        let mut swapped = line.clone();
        swapped[..16].copy_from_slice(&line[16..32]);
        swapped[16..32].copy_from_slice(&line[..16]);
        let s = mac(0x8000, 5, 0x66, &swapped);
        assert!(s[..8] != base[..8] && s[8..16] != base[8..16] && s[16..] == base[16..], "swapped blocks");
        // Two equal blocks at two positions get different MACs.
        let zeros = mac(0x8000, 5, 0x66, &[0u8; 64]);
        assert_ne!(zeros[..8], zeros[8..16]);
    }

    #[test]
    fn chunk_macs_catch_changed_blocks_macs_bitmaps_and_replays_with_and_without_speculation() {
        let setup = |spec: &str| {
            let mut e = engine("none", &[MACS, spec]);
            e.write(0x100, &[0u8; 64], 0).unwrap();
            let mut l = crate::testutil::pattern(1, 64);
            l[8..24].fill(0);
            e.write(0x8000, &l, 0).unwrap();
            e.flush(0).unwrap();
            (e, l)
        };
        let flip = |e: &mut Engine, a: u64| {
            let mut b = [0u8; 1];
            e.untrusted().read(a, &mut b);
            e.untrusted().write(a, &[b[0] ^ 1]);
        };
        let macs_of = |e: &Engine| *e.metadata_of(0x8000).iter().find(|m| m.kind == MetaKind::ChunkMacs("ocb")).expect("MACs listed");
        for spec in ["speculation.frequent_values=0", FV] {
            let fail = |e: &mut Engine, what: &str, mac_only: bool| {
                let err = read(e, 0x8000).expect_err(what);
                assert_eq!(err.addr, 0x8000);
                let by_mac = err.what.contains("chunk MAC");
                assert!(by_mac || (!mac_only && err.what.contains("tag mismatch")), "{} {}: {}", spec, what, err.what);
            };
            let (mut e, l) = setup(spec);
            assert_eq!(read(&mut e, 0x8000).unwrap(), l);
            assert_eq!(macs_of(&e).len, 32);
            let (mut e, _) = setup(spec);
            flip(&mut e, 0x8000 + 20);
            fail(&mut e, "changed block", false);
            let (mut e, _) = setup(spec);
            let a = macs_of(&e).addr;
            flip(&mut e, a + 9);
            fail(&mut e, "changed MAC", true);
            // The line and its MACs replayed after a rewrite (the counter is the new one).
            let (mut e, _) = setup(spec);
            let a = macs_of(&e).addr;
            let (mut old, mut old_macs) = ([0u8; 64], [0u8; 32]);
            e.untrusted().read(0x8000, &mut old);
            e.untrusted().read(a, &mut old_macs);
            e.write(0x8000, &[7u8; 64], 0).unwrap();
            e.flush(0).unwrap();
            e.untrusted().write(0x8000, &old);
            e.untrusted().write(a, &old_macs);
            fail(&mut e, "replayed line and MACs", false);
            if spec == FV {
                let (mut e, _) = setup(spec);
                let ba = bitmap_addr(&e, 0x8000);
                flip(&mut e, ba);
                fail(&mut e, "changed bitmap", false);
            }
        }
    }

    #[test]
    fn mac_speculation_decides_as_the_real_speculated_macs_do() {
        // Every miss asserts that the blocks matched on plaintext are matched by the real
        // speculated ciphertexts (`speculated_blocks`) and MACs (`ChunkMacs::speculated_hits`),
        // also with 1-B MACs, which other pairs can match too.
        for (n, bytes) in [(8, 8), (8, 1)] {
            let fv = format!("speculation.frequent_values={}", n);
            let mb = format!("ocb.chunk_mac_bytes={}", bytes);
            let e = frequent_reads(&[&fv, &mb]);
            let (spec, hits) = (stat(&e, "ocb.mac_speculated"), stat(&e, "speculation.fv_hits"));
            let freq = stat(&e, "speculation.fv_frequent_chunks");
            // (Posted with the fetch, a block's ciphertexts start at the request while its MACs
            // wait for the bitmap, so a block can match without its MACs speculated in time.)
            assert!(spec > 0.0 && 2.0 * spec <= freq && hits <= freq, "{} MACs speculated, {} chunk hits, {} frequent", spec, hits, freq);
            assert_eq!(stat(&e, "ocb.mac_checks"), 4.0 * 300.0);
        }
    }

    #[test]
    fn with_chunk_macs_a_line_of_frequent_values_is_verified_on_arrival() {
        // 004 §3.3 with data issued only once authenticated (Fig. 7's "ciphertext and MAC
        // speculation"): without, the last block is deciphered and then MACed; with, the
        // matched blocks need neither: at least the MAC's 80-cycle AES is gone from the path.
        let mut t = Vec::new();
        for spec in ["speculation.frequent_values=0", FV] {
            let mut e = engine("none", &[MACS, spec, "speculation.engines=4", "aes.engines=4", "memory.latency=250", "aes.latency=80", "speculation.use_before_verify=false"]);
            let o = frequent_line_miss(&mut e);
            assert_eq!(o.ready, o.verified);
            t.push(o.verified);
            if spec == FV {
                // Both lines are pairs of table values (zeros, 0x0101…01): all 8 blocks' MACs speculated.
                assert_eq!(stat(&e, "ocb.mac_speculated"), 8.0);
            }
        }
        assert!(t[1] + 75 <= t[0], "verified after {:?} cycles (off, on)", t);
    }
}
