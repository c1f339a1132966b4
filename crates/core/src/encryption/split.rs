//! split: counter-mode encryption with split counters (Yan, Rogers, Englender, Solihin,
//! Prvulovic, ISCA 2006), the counter organisation of the counter-tree family.
//!
//! One 64-B counter block covers `split.arity` consecutive lines (SC-64: a 4 KiB page of 64-B
//! lines): a 64-bit major counter, then one minor counter per line, packed in the remaining
//! 448 bits (SC-16/32/64/128: 28/14/7/3-bit minors; 8 lines a block gives 56-bit counters
//! that never overflow, the monolithic organisation of SGX's version nodes). Line `a`'s counter is
//! major·2^m + minor_a, and chunk i of the line is XORed with the pad AES_K((a | i) ‖ counter),
//! so a (line, counter) pair names every pad. Counter blocks live in untrusted memory at
//! `CTR_base + ⌊a / (arity·B)⌋·64` (`Role::Counters`).
//!
//! Each write-back increments the line's minor. A minor that would overflow increments the
//! major instead, resets every minor of the block to 0 and re-encrypts every other line the
//! block covers under its new counter — read, deciphered under the old counter and enciphered
//! under the new one through the port and the AES engine, so the overflow costs what it costs
//! (Yan 2006 §4). A line whose counter is 0 and whose bytes are all zero is the initial
//! all-zero memory; after a major increment no counter of the block is 0 again.
//!
//! Reads fetch the line and its counter block together; the pad starts when the counter is
//! known and overlaps the line's transfer. An on-chip counter cache (`split.cache_blocks`,
//! trusted copies, written back when they leave it or at a flush) answers at request time.
//!
//! What it does not do: protect the counters. A counter block rolled back in memory while not
//! cached makes the next write-back reuse a pad (declared: `stale_counters_reuse_pads`) — the reason
//! the counter-tree family puts a tree over the counters. A tree over the data (chash) still
//! notices any read garbled by a changed counter.

use super::{derive_key, xor_counter_pads, Encryption, EncryptionScheme, Seed};
use crate::decl::{param, Component, Coverage, Def, Guarantees, Kind, Role, stat};
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::Aes128;
use secmem_timing::{Cycle, Tags};

/// split's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "split",
    kind: Kind::Encryption,
    summary: "counter mode with split counters: a 64-bit major and a small minor per line in one 64-B block per group of lines; a minor overflow re-encrypts the group",
    source: "Yan et al., ISCA 2006 (SC-64); the counter-tree family",
    params: &[
        param("split.arity", Def::Int(64), "lines", "lines one 64-B counter block covers: 16, 32, 64 or 128 (minors of 28, 14, 7 or 3 bits); 8: monolithic 56-bit counters, as SGX keeps 8 to a line"),
        param("split.cache_blocks", Def::Int(0), "blocks", "on-chip cache of counter blocks (trusted copies, split.cache_ways-way, written back); 0: none, every block read and written with its line"),
        param("split.cache_ways", Def::Int(8), "ways", "associativity of the counter cache (fewer blocks than ways: fully associative)"),
        param("split.cache_latency", Def::Int(1), "cycles", "a hit in the counter cache: when the counter is known and the pad can start"),
    ],
    stats: &[
        stat("split.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("split.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("split.minor_bits", "bits", "bits of each minor counter"),
        stat("split.counter_reads", "blocks", "counter blocks read from memory"),
        stat("split.counter_writes", "blocks", "counter blocks written to memory (each write-back without a counter cache; evictions and flushes with one)"),
        stat("split.cache_hits", "accesses", "counter lookups served by the counter cache"),
        stat("split.cache_hit_rate", "fraction", "split.cache_hits over reads and writes"),
        stat("split.minor_overflows", "events", "minor counters that overflowed (their block re-encrypted)"),
        stat("split.reencrypted_lines", "lines", "lines re-encrypted after overflows"),
        stat("split.pad_exposed_cycles", "cycles", "pad cycles after the data arrived, summed"),
        stat("split.space_overhead", "fraction", "memory the counter blocks take, per byte of data"),
    ],
};

/// split's registration. The pad binds address and counter, so equal lines and rewrites are
/// hidden; flipped ciphertext bits go through; counters in memory are not protected.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |_| {
        Ok(Guarantees { confidential: true, hides_equal_lines: true, hides_rewrites: true, stale_counters_reuse_pads: true, ..Guarantees::NONE })
    },
    coverage: Coverage { lays_out: &[Role::Counters], protects: Role::LINES, guarded: &[Role::Counters] },
    build: |p, m, c, seed| Ok(Box::new(Split::new(p, m, c, seed)?)),
};

/// Bytes of a counter block: one cache line of counters.
const BLOCK: usize = 64;
/// Bits of the major counter at the head of a block.
const MAJOR_BITS: u32 = 64;

/// A counter block: the major and the packed minors, as stored.
#[derive(Clone, Copy)]
struct Counters([u8; BLOCK]);

impl Counters {
    fn major(&self) -> u64 {
        u64::from_le_bytes(self.0[..8].try_into().unwrap())
    }

    fn set_major(&mut self, v: u64) {
        self.0[..8].copy_from_slice(&v.to_le_bytes());
    }

    /// Minor `i` of `bits` bits (little-endian bit order after the major).
    fn minor(&self, i: usize, bits: u32) -> u64 {
        let mut v = 0;
        for b in 0..bits as usize {
            let at = MAJOR_BITS as usize + i * bits as usize + b;
            v |= ((self.0[at / 8] >> (at % 8)) as u64 & 1) << b;
        }
        v
    }

    fn set_minor(&mut self, i: usize, bits: u32, v: u64) {
        for b in 0..bits as usize {
            let at = MAJOR_BITS as usize + i * bits as usize + b;
            let mask = 1u8 << (at % 8);
            if v >> b & 1 == 1 {
                self.0[at / 8] |= mask;
            } else {
                self.0[at / 8] &= !mask;
            }
        }
    }
}

/// On-chip copies of counter blocks, set-associative (8 ways), written back: a write-back of
/// data updates the cached block, which goes to memory when it leaves the cache (or at a flush).
struct CounterCache {
    tags: Tags,
    blocks: Vec<Counters>,
    dirty: Vec<bool>,
}

pub struct Split {
    aes: Aes128,
    /// Lines per counter block and bits per minor.
    arity: u64,
    minor_bits: u32,
    line: u64,
    covered: u64,
    ctr_base: u64,
    cache: Option<CounterCache>,
    /// A hit in the counter cache (`split.cache_latency`).
    latency: Cycle,
    /// When the counter block of the last line read was checked, if something checks it.
    checked: Option<Cycle>,
    /// The counter the last line read or written used.
    last_counter: u64,
    // statistics
    reads: u64,
    writes: u64,
    counter_reads: u64,
    counter_writes: u64,
    cache_hits: u64,
    overflows: u64,
    reencrypted_lines: u64,
    pad_exposed: u64,
}

impl Split {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Split, ConfigError> {
        let arity = p.choice("split.arity", &["8", "16", "32", "64", "128"])?.parse::<u64>().expect("a listed choice");
        let minor_bits = ((BLOCK as u32 * 8 - MAJOR_BITS) as u64 / arity) as u32;
        let line = m.line();
        let ctr_base = m.layout.alloc(Role::Counters, "split counters", covered.div_ceil(arity * line) * BLOCK as u64);
        let blocks = p.u64_min("split.cache_blocks", 0)?;
        let ways = p.u64_min("split.cache_ways", 1)?;
        let cache = if blocks == 0 {
            None
        } else {
            let ways = blocks.min(ways);
            let tags = Tags::new(blocks * BLOCK as u64, ways as usize, BLOCK as u64)
                .map_err(|e| ConfigError(format!("split.cache_blocks: {} blocks in {}-way sets: {}", blocks, ways, e)))?;
            let n = tags.slots();
            Some(CounterCache { tags, blocks: vec![Counters([0; BLOCK]); n], dirty: vec![false; n] })
        };
        Ok(Split {
            aes: Aes128::new(&derive_key(seed, 0x5c64)),
            arity,
            minor_bits,
            line,
            covered,
            ctr_base,
            cache,
            latency: p.u64_min("split.cache_latency", 1)?,
            checked: None,
            last_counter: 0,
            reads: 0,
            writes: 0,
            counter_reads: 0,
            counter_writes: 0,
            cache_hits: 0,
            overflows: 0,
            reencrypted_lines: 0,
            pad_exposed: 0,
        })
    }

    /// The counter block covering `addr`, and the line's index in it.
    fn block_of(&self, addr: u64) -> (u64, usize) {
        let group = addr / (self.arity * self.line);
        (self.ctr_base + group * BLOCK as u64, ((addr / self.line) % self.arity) as usize)
    }

    /// Line `index`'s counter in `c`: major·2^m + minor.
    fn counter(&self, c: &Counters, index: usize) -> u64 {
        (c.major() << self.minor_bits) | c.minor(index, self.minor_bits)
    }

    /// XOR `buf` (line `addr`) with its pads under `counter`.
    fn apply_pad(&self, addr: u64, counter: u64, buf: &mut [u8]) {
        xor_counter_pads(&self.aes, addr, counter, buf);
    }

    /// The cached copy of the block at `ca`, if any.
    fn cached(&mut self, ca: u64) -> Option<Counters> {
        let c = self.cache.as_mut()?;
        let s = c.tags.find(ca)?;
        c.tags.touch(s);
        Some(c.blocks[s as usize])
    }

    /// Put `block` (read and checked, or just updated: `dirty`) in the counter cache at `t`. A
    /// dirty block it displaces goes to memory, bound first by whatever protects counters:
    /// when that write is done (`t` without a cache or a dirty victim).
    fn keep(&mut self, m: &mut Machine, ca: u64, block: Counters, dirty: bool, t: Cycle) -> Result<Cycle, IntegrityError> {
        let Some(c) = &mut self.cache else { return Ok(t) };
        if let Some(s) = c.tags.find(ca) {
            c.tags.touch(s);
            c.blocks[s as usize] = block;
            c.dirty[s as usize] |= dirty;
            return Ok(t);
        }
        let s = c.tags.victim(ca);
        let victim = c.tags.addr_of(s).filter(|_| c.dirty[s as usize]).map(|old| (old, c.blocks[s as usize]));
        let done = match victim {
            Some((old, b)) => self.write_block(m, old, &b, t)?,
            None => t,
        };
        let c = self.cache.as_mut().expect("checked above");
        c.tags.install(s, ca);
        c.blocks[s as usize] = block;
        c.dirty[s as usize] = dirty;
        Ok(done)
    }

    /// Write counter block `b` to `a` at `t`, bound first by whatever protects counters: when
    /// both are done.
    fn write_block(&mut self, m: &mut Machine, a: u64, b: &Counters, t: Cycle) -> Result<Cycle, IntegrityError> {
        let bound = m.update_meta(a, &b.0, t)?;
        self.counter_writes += 1;
        Ok(bound.max(m.port.write(a, &b.0, t)))
    }

    /// The counter block at `ca` for a write-back at `t`: when it is known (and checked, if
    /// something protects counters: a stale block must not pick the next pad).
    fn fetch_block(&mut self, m: &mut Machine, ca: u64, t: Cycle) -> Result<(Counters, Cycle), IntegrityError> {
        if let Some(b) = self.cached(ca) {
            self.cache_hits += 1;
            return Ok((b, t + self.latency));
        }
        let mut b = Counters([0; BLOCK]);
        self.counter_reads += 1;
        let tr = m.port.read(ca, &mut b.0, t);
        let checked = m.check_meta(ca, &b.0, t, tr.last)?;
        self.keep(m, ca, b, false, tr.last)?;
        Ok((b, checked.unwrap_or(tr.last).max(tr.last)))
    }

    /// A minor overflowed in the block at `ca` (old contents `old`): every other line it covers
    /// is read, deciphered under its old counter and enciphered under the new major with minor
    /// 0, through the port and the AES engine, from `t`. Returns when the last is written.
    fn reencrypt_group(&mut self, m: &mut Machine, ca: u64, old: &Counters, except: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        self.overflows += 1;
        let group = (ca - self.ctr_base) / BLOCK as u64 * self.arity * self.line;
        let new_major = old.major() + 1;
        let mut done = t;
        let mut buf = [0u8; MAX_LINE];
        for k in 0..self.arity {
            let a = group + k * self.line;
            if a == except || a >= self.covered {
                continue;
            }
            let line = &mut buf[..self.line as usize];
            let tr = m.port.read(a, line, t);
            let old_ctr = self.counter(old, k as usize);
            // Never-written lines are raw zeros; from now on they are zeros enciphered.
            if !(old_ctr == 0 && all_zero(line)) {
                let t_old = m.aes.run(t, self.line);
                self.apply_pad(a, old_ctr, line);
                done = done.max(t_old);
            }
            let new_ctr = new_major << self.minor_bits;
            done = done.max(m.reenciphered(a, line, old_ctr, new_ctr, tr.last)?);
            let t_new = m.aes.run(tr.last, self.line);
            self.apply_pad(a, new_ctr, line);
            let line = &buf[..self.line as usize];
            done = done.max(m.port.write(a, line, t_new.max(tr.last) + m.xor_latency));
            self.reencrypted_lines += 1;
        }
        Ok(done)
    }
}

impl Encryption for Split {
    fn name(&self) -> &'static str {
        "split"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.block_of(addr).0);
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        self.checked = None;
        let (ca, i) = self.block_of(addr);
        let (block, t_ctr, tr) = match self.cached(ca) {
            // On chip: the pad starts at request time.
            Some(b) => {
                self.cache_hits += 1;
                (b, t + self.latency, m.port.read(addr, out, t))
            }
            None => {
                // The counter block first, the line behind it in one transfer.
                let mut b = Counters([0; BLOCK]);
                self.counter_reads += 1;
                let (tc, tr) = m.port.read_pair(ca, &mut b.0, addr, out, t);
                // Checked before it is kept as a trusted copy; the pad may start meanwhile.
                self.checked = m.check_meta(ca, &b.0, t, tc.last)?;
                self.keep(m, ca, b, false, tc.last)?;
                (b, tc.last, tr)
            }
        };
        let ctr = self.counter(&block, i);
        self.last_counter = ctr;
        let t_pad = m.aes.run(t_ctr, out.len() as u64);
        if !(ctr == 0 && all_zero(out)) {
            self.apply_pad(addr, ctr, out);
        }
        self.pad_exposed += t_pad.saturating_sub(tr.last);
        Ok(tr.last.max(t_pad) + m.xor_latency)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let (ca, i) = self.block_of(addr);
        let (mut block, t_ctr) = self.fetch_block(m, ca, t)?;
        let minor = block.minor(i, self.minor_bits) + 1;
        let mut done = t_ctr;
        if minor >> self.minor_bits != 0 {
            if block.major() >> (MAJOR_BITS - self.minor_bits) != 0 {
                return Err(IntegrityError::exhausted(addr, "split: the major counter is exhausted (a new key would be needed; not modelled)"));
            }
            let old = block;
            done = self.reencrypt_group(m, ca, &old, addr, t_ctr)?;
            block = Counters([0; BLOCK]);
            block.set_major(old.major() + 1);
        } else {
            block.set_minor(i, self.minor_bits, minor);
        }
        let ctr = self.counter(&block, i);
        self.last_counter = ctr;
        let t_pad = m.aes.run(t_ctr, plain.len() as u64);
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.apply_pad(addr, ctr, ct);
        let t_x = t_pad + m.xor_latency;
        if self.cache.is_some() {
            // The block stays on chip, newer than memory, until it leaves the cache.
            done = done.max(self.keep(m, ca, block, true, t_x)?);
        } else {
            done = done.max(self.write_block(m, ca, &block, t_x)?);
        }
        Ok(done.max(m.port.write(addr, ct, t_x)))
    }

    fn take_checked(&mut self) -> Option<Cycle> {
        self.checked.take()
    }

    fn line_counter(&self) -> Option<u64> {
        Some(self.last_counter)
    }

    /// Every dirty counter block goes to memory (a flush). Binding one may fail only on a
    /// tampered node of a tree over counters, which the next read of the block reports.
    fn write_back_cached(&mut self, m: &mut Machine, t: Cycle) -> Cycle {
        let Some(c) = &mut self.cache else { return t };
        let mut done = t;
        let mut out = Vec::new();
        for s in 0..c.tags.slots() {
            if let (Some(a), true) = (c.tags.addr_of(s as u32), c.dirty[s]) {
                out.push((a, c.blocks[s]));
                c.dirty[s] = false;
            }
        }
        for (a, b) in out {
            let bound = m.update_meta(a, &b.0, t).unwrap_or(t);
            done = done.max(bound).max(m.port.write(a, &b.0, t));
            self.counter_writes += 1;
        }
        done
    }

    fn drop_cached(&mut self) {
        if let Some(c) = &mut self.cache {
            for s in 0..c.tags.slots() as u32 {
                c.tags.invalidate(s);
            }
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::Counter("split"), self.block_of(addr).0, BLOCK as u64)]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.counter_reads, self.counter_writes, self.cache_hits) = (0, 0, 0, 0, 0);
        (self.overflows, self.reencrypted_lines, self.pad_exposed) = (0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        BLOCK as f64 / (self.arity * self.line) as f64
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("split.reads", self.reads);
        out.int("split.writes", self.writes);
        out.int("split.arity", self.arity);
        out.int("split.minor_bits", self.minor_bits as u64);
        out.int("split.counter_reads", self.counter_reads);
        out.int("split.counter_writes", self.counter_writes);
        out.int("split.cache_hits", self.cache_hits);
        out.rate("split.cache_hit_rate", self.cache_hits, self.reads + self.writes);
        out.int("split.minor_overflows", self.overflows);
        out.int("split.reencrypted_lines", self.reencrypted_lines);
        out.int("split.pad_exposed_cycles", self.pad_exposed);
        out.float("split.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{lines_in_memory, params, pattern, stat};
    use crate::Engine;

    fn engine(extra: &[&str]) -> Engine {
        Engine::new(&params("chash", "split", extra), 3).unwrap()
    }

    #[test]
    fn minors_pack_into_the_block_without_touching_their_neighbours() {
        for (arity, bits) in [(8u64, 56u32), (16, 28), (32, 14), (64, 7), (128, 3)] {
            assert_eq!((BLOCK as u32 * 8 - MAJOR_BITS) as u64 / arity, bits as u64);
            let mut c = Counters([0; BLOCK]);
            c.set_major(0xDEAD_BEEF);
            for i in 0..arity as usize {
                c.set_minor(i, bits, (i as u64 * 7 + 1) & ((1 << bits) - 1));
            }
            for i in 0..arity as usize {
                assert_eq!(c.minor(i, bits), (i as u64 * 7 + 1) & ((1 << bits) - 1), "arity {} minor {}", arity, i);
            }
            assert_eq!(c.major(), 0xDEAD_BEEF);
        }
    }

    #[test]
    fn lines_round_trip_through_minor_overflows_and_the_group_is_reencrypted() {
        // 128 lines a block: 3-bit minors overflow on the 8th write-back of a line. Under chash
        // the tree's chunks (lines too) overflow as well: counted exactly without it.
        for (integ, cache) in [("none", "0"), ("none", "16"), ("chash", "0"), ("chash", "16")] {
            let p = params(integ, "split", &["split.arity=128", &format!("split.cache_blocks={}", cache)]);
            let mut e = Engine::new(&p, 3).unwrap();
            let group: Vec<u64> = (0..128).map(|k| 0x10_0000 + k * 64).collect();
            for (k, &a) in group.iter().enumerate().step_by(3) {
                e.write(a, &pattern(k as u64, 64), 0).unwrap();
            }
            e.flush(0).unwrap();
            let victim = group[9];
            for round in 0..20u64 {
                e.write(victim, &pattern(1000 + round, 64), 0).unwrap();
                e.flush(0).unwrap();
            }
            // The victim's 21 write-backs with 3-bit minors (1..7 under each major): the 8th and
            // the 16th overflow.
            let overflows = stat(&e, "split.minor_overflows");
            if integ == "none" {
                assert_eq!(overflows, 2.0);
                assert_eq!(stat(&e, "split.reencrypted_lines"), 127.0 * overflows);
            } else {
                assert!(overflows > 2.0 && stat(&e, "split.reencrypted_lines") <= 127.0 * overflows, "{}", overflows);
            }
            let mut buf = vec![0u8; 64];
            for (k, &a) in group.iter().enumerate() {
                e.read(a, &mut buf, 0).unwrap();
                let want = if a == victim { pattern(1019, 64) } else if k % 3 == 0 { pattern(k as u64, 64) } else { vec![0; 64] };
                assert_eq!(buf, want, "{}: line {} (cache {})", integ, k, cache);
            }
        }
    }

    #[test]
    fn monolithic_counters_never_overflow_and_a_block_covers_eight_lines() {
        let mut e = Engine::new(&params("none", "split", &["split.arity=8"]), 3).unwrap();
        let metas = |e: &Engine, a: u64| e.metadata_of(a).into_iter().find(|m| m.kind == MetaKind::Counter("split")).unwrap().addr;
        assert_eq!(metas(&e, 0x1000), metas(&e, 0x1000 + 7 * 64));
        assert_ne!(metas(&e, 0x1000), metas(&e, 0x1000 + 8 * 64));
        for round in 0..300u64 {
            e.write(0x1000, &pattern(round, 64), 0).unwrap();
            e.flush(0).unwrap();
        }
        assert_eq!(stat(&e, "split.minor_overflows"), 0.0);
        assert_eq!(stat(&e, "split.minor_bits"), 56.0);
        let mut buf = [0u8; 64];
        e.read(0x1000, &mut buf, 0).unwrap();
        assert_eq!(buf.to_vec(), pattern(299, 64));
    }

    #[test]
    fn a_counter_changed_in_memory_garbles_the_line_and_the_tree_notices() {
        let mut e = engine(&[]);
        e.write(0x4000, &pattern(5, 64), 0).unwrap();
        e.flush(0).unwrap();
        let ca = e.metadata_of(0x4000).into_iter().find(|m| m.kind == MetaKind::Counter("split")).unwrap().addr;
        let mut b = [0u8; 1];
        e.untrusted().read(ca + 8, &mut b);
        e.untrusted().write(ca + 8, &[b[0] ^ 1]);
        let mut buf = [0u8; 64];
        assert!(e.read(0x4000, &mut buf, 0).unwrap_err().is_tamper());
    }

    #[test]
    fn the_pad_starts_at_request_time_on_a_cached_counter() {
        // Same misses, with and without the counter cache: cached counters hide more of the pad.
        let run = |cache: &str, latency: u64| {
            let p = params("none", "split", &[&format!("split.cache_blocks={}", cache), &format!("split.cache_latency={}", latency), "aes.latency=200"]);
            let mut e = Engine::new(&p, 3).unwrap();
            lines_in_memory(&mut e, 0x20_0000, 64);
            let mut t = 0;
            let mut buf = [0u8; 64];
            for k in 0..64u64 {
                let o = e.access(0x20_0000 + k * 64, crate::AccessKind::Load, t).unwrap();
                e.read_cached(0x20_0000 + k * 64, &mut buf);
                assert_eq!(buf.to_vec(), pattern(k, 64));
                e.settle().unwrap();
                t = o.ready + 1000;
            }
            (stat(&e, "split.pad_exposed_cycles"), stat(&e, "split.counter_reads"), stat(&e, "split.cache_hits"))
        };
        let (exposed_none, reads_none, _) = run("0", 1);
        let (exposed_cached, reads_cached, hits) = run("4", 1);
        assert_eq!(reads_none, 64.0);
        assert!(reads_cached <= 1.0, "{}", reads_cached);
        assert!(exposed_cached < exposed_none, "{} vs {}", exposed_cached, exposed_none);
        // A slower counter cache starts each hit's pad later by the difference.
        let (exposed_slow, _, hits_slow) = run("4", 21);
        assert_eq!((hits_slow, exposed_slow - exposed_cached), (hits, 20.0 * hits), "{} hits", hits);
    }
}
