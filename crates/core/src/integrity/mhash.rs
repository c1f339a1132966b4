//! mhash: several cache blocks per chunk, with an incremental MAC (seed 003 §4.4).
//!
//! A chunk is `mhash.blocks_per_chunk` L2 blocks; the tree (003 §4.5 layout) is over chunks,
//! each holding m = chunk/16 MACs of its children. A chunk's MAC is
//!     M = E_k'(h_k(1, m_1) ⊕ … ⊕ h_k(n, m_n))
//! with h_k a keyed hash of one block and E_k' AES-128. On a miss the whole chunk is checked
//! (blocks clean in the cache are taken from it, the rest read from memory) and its blocks are
//! cached, except those cached dirty. A dirty block's write-back updates its parent's MAC
//! without the rest of the chunk: M' = E(D(M) ⊕ h(i, old) ⊕ h(i, new)), the old value being
//! read from memory unchecked (a tampered old value leaves M' inconsistent, caught later).

use super::chash::hasher_from;
use super::tree::{Tree, H};
use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::cache::LineKind;
use crate::encryption::{derive_key, Encryption, Seed};
use crate::layout::{Meta, MAX_LINE};
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{Aes128, Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};

/// mhash's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "mhash",
    kind: Kind::Integrity,
    summary: "several cache blocks per tree chunk under an incremental MAC; a dirty block updates its parent MAC alone",
    source: "003 §4.4",
    params: &[
        param("mhash.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the keyed hash of one block inside the MAC"),
        param("mhash.hash_bytes", Def::Int(16), "B", "bytes of each MAC: one AES block, 16"),
        param("mhash.blocks_per_chunk", Def::Int(2), "blocks", "L2 blocks per tree chunk (003 Fig. 8: two 64-B blocks per 128-B chunk)"),
        param("mhash.arity", Def::Int(0), "children", "MACs per tree chunk; 0: as many as fit a chunk"),
    ],
    stats: &[
        stat("mhash.levels", "levels", "levels of the tree over the protected memory"),
        stat("mhash.hash_loads", "chunks", "tree chunks read from memory to check data"),
        stat("mhash.hash_loads_per_miss", "chunks", "mhash.hash_loads / l2.misses (the seeds' hash loads per miss)"),
        stat("mhash.checks", "checks", "chunks brought in and checked against their parent"),
        stat("mhash.space_overhead", "fraction", "memory the tree takes, per byte of data"),
        stat("mhash.block_reads", "blocks", "sibling blocks read to recompute a chunk's MAC"),
        stat("mhash.old_block_reads", "blocks", "old contents read back to update a MAC incrementally"),
        stat("mhash.mac_updates", "updates", "MACs updated in a parent chunk"),
    ],
};

/// mhash's registration. Every read is checked up to a trusted node: any change, move or replay fails it.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access)),
    coverage: Coverage { lays_out: &[Role::Tree], protects: &[Role::Data], guarded: &[] },
    build: |p, m, seed| Ok(Box::new(Mhash::new(p, m, seed)?)),
};

/// Largest chunk (blocks_per_chunk × line).
pub const MAX_CHUNK: usize = 2048;

pub struct Mhash {
    hasher: Hasher,
    key: [u8; 16],
    e: Aes128,
    tree: Tree,
    n: usize,
    line: usize,
    roots: Vec<H>,
    zero: Vec<H>,
    hash_loads: u64,
    sibling_reads: u64,
    old_block_reads: u64,
    checks: u64,
    mac_updates: u64,
}

impl Mhash {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Mhash, ConfigError> {
        let hasher = hasher_from(p, "mhash")?;
        if hasher.len() != 16 {
            return Err(ConfigError(format!(
                "mhash.hash_bytes: {} — the incremental MAC is one AES block, 16 bytes",
                hasher.len()
            )));
        }
        let n = p.u64_min("mhash.blocks_per_chunk", 1)? as usize;
        let line = m.line() as usize;
        if n * line > MAX_CHUNK {
            return Err(ConfigError(format!("mhash.blocks_per_chunk: {} × {} B exceeds {} B chunks", n, line, MAX_CHUNK)));
        }
        let cover = Tree::data(&m.layout);
        let tree = Tree::new(&mut m.layout, "mhash tree", cover, (n * line) as u64, 16, p.u64_min("mhash.arity", 0)?, "mhash.arity")?;
        let mut s = Mhash {
            hasher,
            key: derive_key(seed, 0x3a5),
            e: Aes128::new(&derive_key(seed, 0x3a6)),
            tree,
            n,
            line,
            roots: Vec::new(),
            zero: Vec::new(),
            hash_loads: 0,
            sibling_reads: 0,
            old_block_reads: 0,
            checks: 0,
            mac_updates: 0,
        };
        let zero = s.tree.zero_hashes(|chunk, _| s.mac(chunk));
        s.roots = vec![zero[0]; s.tree.m as usize];
        s.zero = zero;
        Ok(s)
    }

    /// h_k(i, block) as a 128-bit value.
    fn h(&self, i: usize, block: &[u8]) -> u128 {
        let mut out = [0u8; MAX_HASH_BYTES];
        self.hasher.hash_parts(&[&self.key, &(i as u32).to_le_bytes(), block], &mut out);
        u128::from_le_bytes(out[..16].try_into().unwrap())
    }

    fn seal(&self, x: u128) -> H {
        let mut b = x.to_le_bytes();
        self.e.encrypt(&mut b);
        let mut h = [0u8; MAX_HASH_BYTES];
        h[..16].copy_from_slice(&b);
        h
    }

    fn open(&self, mac: &[u8]) -> u128 {
        let mut b: [u8; 16] = mac[..16].try_into().unwrap();
        self.e.decrypt(&mut b);
        u128::from_le_bytes(b)
    }

    /// The MAC of a whole chunk.
    fn mac(&self, chunk: &[u8]) -> H {
        let x = chunk.chunks(self.line).enumerate().fold(0u128, |x, (i, b)| x ^ self.h(i, b));
        self.seal(x)
    }

    /// ReadAndCheckChunk for chunk `c` (§4.4): `known` is block j already read from memory by
    /// the caller with its arrival time. Fills `buf` with the chunk as memory holds it, checks
    /// it against its parent's MAC and caches its blocks (except `known`'s and dirty ones).
    fn read_and_check_chunk(
        &mut self,
        m: &mut Machine,
        enc: &mut dyn Encryption,
        c: u64,
        t: Cycle,
        known: Option<(usize, &[u8], Cycle)>,
        buf: &mut [u8],
    ) -> Result<Cycle, IntegrityError> {
        let base = self.tree.addr_of(c);
        let kind = if self.tree.is_leaf(c) { LineKind::Data } else { LineKind::Meta };
        let mut t_data = t;
        let mut cache_it = [false; MAX_CHUNK / 16];
        for j in 0..self.n {
            let a = base + (j * self.line) as u64;
            let blk = &mut buf[j * self.line..(j + 1) * self.line];
            if let Some((kj, bytes, tk)) = known {
                if kj == j {
                    blk.copy_from_slice(bytes);
                    t_data = t_data.max(tk);
                    continue;
                }
            }
            match m.l2.tags.find(a) {
                Some(s) if !m.l2.is_dirty(s) => blk.copy_from_slice(m.l2.bytes(s)),
                cached => {
                    // Absent, or cached dirty (memory holds what the MAC covers).
                    t_data = t_data.max(enc.read_line(m, a, t, blk)?);
                    self.tree.decode_zero_block(c, j * self.line, blk, &self.zero);
                    self.sibling_reads += 1;
                    cache_it[j] = cached.is_none() && !m.is_pending(a);
                }
            }
        }
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, buf.len() as u64);
        let mac = self.mac(buf);
        let t_mac = m.aes.run(h_done, 16);
        let (want, t_want) = self.expected(m, enc, c, t)?;
        self.checks += 1;
        super::conclude(m, slot, t_start, mac[..16] == want[..16], t_mac.max(t_want) + 1, || IntegrityError::tampered(base, super::chash::mismatch(&self.tree, c).replace("hash", "MAC")))?;
        for j in 0..self.n {
            if cache_it[j] {
                let a = base + (j * self.line) as u64;
                m.insert(a, &buf[j * self.line..(j + 1) * self.line], kind, false, t_start);
            }
        }
        Ok(t_start)
    }

    /// Make block j of internal chunk `c` present; its slot and when it is usable.
    fn obtain_block(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, j: usize, t: Cycle) -> Result<(u32, Cycle), IntegrityError> {
        let a = self.tree.addr_of(c) + (j * self.line) as u64;
        m.counters.meta_accesses += 1;
        if let Some(s) = m.lookup(a) {
            return Ok((s, (t + m.l2_latency).max(m.l2.ready(s))));
        }
        m.counters.meta_misses += 1;
        self.hash_loads += 1;
        let mut buf = [0u8; MAX_CHUNK];
        let chunk = &mut buf[..self.n * self.line];
        let ready = self.read_and_check_chunk(m, enc, c, t, None, chunk)?;
        let slot = match m.l2.tags.find(a) {
            Some(s) => s,
            // A tiny cache may already have displaced it: put it back.
            None => m.insert(a, &chunk[j * self.line..(j + 1) * self.line], LineKind::Meta, false, ready),
        };
        Ok((slot, ready))
    }

    /// Where chunk c's MAC lives: (parent chunk, block in it, offset in the block).
    fn mac_slot(&self, c: u64) -> Option<(u64, usize, usize)> {
        self.tree.parent(c).map(|(p, idx)| (p, idx / self.line, idx % self.line))
    }

    fn expected(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<(H, Cycle), IntegrityError> {
        let Some((p, j, off)) = self.mac_slot(c) else {
            return Ok((self.roots[c as usize], t));
        };
        let (slot, ready) = self.obtain_block(m, enc, p, j, t)?;
        let mut h = [0u8; MAX_HASH_BYTES];
        h[..16].copy_from_slice(&m.l2.bytes(slot)[off..off + 16]);
        Ok((h, ready))
    }
}

impl Integrity for Mhash {
    fn name(&self) -> &'static str {
        "mhash"
    }

    /// The check reads the chunk's other blocks, then each ancestor chunk up to the first
    /// whose MAC block is cached: they are known now, so the host may load them together.
    fn prefetch(&self, m: &Machine, enc: &dyn Encryption, addr: u64) {
        let Some(mut c) = self.tree.chunk_of(addr) else { return };
        let line = self.line as u64;
        let blocks = |c: u64| (0..self.n as u64).map(move |j| self.tree.addr_of(c) + j * line);
        for a in blocks(c).filter(|&a| a != addr && m.l2.tags.find(a).is_none()) {
            enc.prefetch(m, a);
        }
        while let Some((p, j, _)) = self.mac_slot(c) {
            if m.l2.tags.find(self.tree.addr_of(p) + j as u64 * line).is_some() {
                break;
            }
            for a in blocks(p).filter(|&a| m.l2.tags.find(a).is_none()) {
                enc.prefetch(m, a);
            }
            c = p;
        }
    }

    fn verify(
        &mut self,
        m: &mut Machine,
        enc: &mut dyn Encryption,
        addr: u64,
        plain: &mut [u8],
        t_req: Cycle,
        t_data: Cycle,
    ) -> Result<Verified, IntegrityError> {
        let Some(c) = self.tree.chunk_of(addr) else {
            return Ok(Verified { ready: t_data, checked: t_data });
        };
        let j = ((addr - self.tree.addr_of(c)) / self.line as u64) as usize;
        self.tree.decode_zero_block(c, j * self.line, plain, &self.zero);
        let mut buf = [0u8; MAX_CHUNK];
        let chunk = &mut buf[..self.n * self.line];
        let ready = self.read_and_check_chunk(m, enc, c, t_req, Some((j, plain, t_data)), chunk)?;
        Ok(Verified { ready: ready.max(t_data), checked: m.checks_done })
    }

    /// Incremental Write-Back (§4.4): parent MAC, old block from memory, update, write.
    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let Some(c) = self.tree.chunk_of(v.addr) else {
            return super::write_back_plain(m, enc, v);
        };
        let j = ((v.addr - self.tree.addr_of(c)) / self.line as u64) as usize;
        let (wslot, start) = m.write_buf.acquire(v.t);
        let mut old = [0u8; MAX_LINE];
        let old = &mut old[..self.line];
        let t_old = enc.read_line(m, v.addr, start, old)?;
        self.tree.decode_zero_block(c, j * self.line, old, &self.zero);
        self.old_block_reads += 1;
        let delta = self.h(j, old) ^ self.h(j, &v.bytes);
        let t_h = m.hash.run(t_old, 2 * self.line as u64);
        let t_upd = m.aes.run(t_h, 32);
        match self.mac_slot(c) {
            None => {
                let x = self.open(&self.roots[c as usize]) ^ delta;
                self.roots[c as usize] = self.seal(x);
            }
            Some((p, pj, off)) => {
                let (slot, _) = self.obtain_block(m, enc, p, pj, start)?;
                let x = self.open(&m.l2.bytes(slot)[off..off + 16]) ^ delta;
                let mac = self.seal(x);
                m.l2.bytes_mut(slot)[off..off + 16].copy_from_slice(&mac[..16]);
                m.l2.set_dirty(slot);
            }
        }
        self.mac_updates += 1;
        let done = enc.write_line(m, v.addr, &v.bytes, t_upd)?;
        m.write_buf.hold_until(wslot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        super::tree_path(&self.tree, addr)
    }

    fn space_overhead(&self) -> f64 {
        self.tree.space_overhead()
    }

    fn reset_stats(&mut self) {
        (self.hash_loads, self.sibling_reads, self.old_block_reads, self.checks, self.mac_updates) = (0, 0, 0, 0, 0);
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        out.int("mhash.blocks_per_chunk", self.n as u64);
        out.int("mhash.arity", self.tree.m);
        out.int("mhash.levels", self.tree.levels as u64);
        out.int("mhash.hash_loads", self.hash_loads);
        out.rate("mhash.hash_loads_per_miss", self.hash_loads, m.counters.data_misses);
        out.int("mhash.block_reads", self.sibling_reads);
        out.int("mhash.old_block_reads", self.old_block_reads);
        out.int("mhash.checks", self.checks);
        out.int("mhash.mac_updates", self.mac_updates);
        out.float("mhash.space_overhead", self.space_overhead());
    }
}
