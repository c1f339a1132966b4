//! naive: the hash tree placed between the L2 and memory with no caching of tree chunks
//! (seed 003 §4.2, scheme 1). Every L2 miss reads the whole path to the root from memory and
//! checks it; every dirty write-back reads and checks the path, recomputes every hash on it
//! and writes the path back. Same tree layout as chash.

use super::chash::{hash, hasher_from, mismatch};
use super::tree::{Tree, H};
use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::encryption::Encryption;
use crate::layout::{Meta, MAX_LINE};
use crate::mem::same_bytes;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::Hasher;
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};

/// naive's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "naive",
    kind: Kind::Integrity,
    summary: "a hash tree between the L2 and memory: every miss reads and checks the whole path to the root, every dirty write-back rewrites it",
    source: "003 §4.2",
    params: &[
        param("naive.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the tree hash (md5: the seeds' one-block MD5 compression)"),
        param("naive.hash_bytes", Def::Int(16), "B", "bytes of each hash kept in its parent"),
        param("naive.arity", Def::Int(0), "children", "hashes per tree chunk; 0: as many as fit a chunk"),
    ],
    stats: &[
        stat("naive.levels", "levels", "levels of the tree over the protected memory"),
        stat("naive.hash_loads", "chunks", "tree chunks read from memory to check data"),
        stat("naive.hash_loads_per_miss", "chunks", "naive.hash_loads / l2.misses (the seeds' hash loads per miss)"),
        stat("naive.checks", "checks", "chunks brought in and checked against their parent"),
        stat("naive.space_overhead", "fraction", "memory the tree takes, per byte of data"),
        stat("naive.hash_stores", "chunks", "tree chunks written to memory (every write-back updates its path to the root)"),
    ],
};

/// naive's registration. Every read is checked up to the on-chip root: any change, move or replay fails it.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access)),
    coverage: Coverage { lays_out: &[Role::Tree], protects: &[Role::Data], guarded: &[] },
    build: |p, m, _| Ok(Box::new(Naive::new(p, m)?)),
};

const MEMO: usize = 4096;

pub struct Naive {
    hasher: Hasher,
    tree: Tree,
    roots: Vec<H>,
    zero: Vec<H>,
    path: Vec<[u8; MAX_LINE]>,
    memo: Memo,
    /// The ancestors `read_path` read, their addresses, when each arrived and its hash
    /// (reused buffers).
    anc: Vec<u64>,
    addrs: Vec<u64>,
    arrive: Vec<Cycle>,
    hashes: Vec<H>,
    hash_loads: u64,
    hash_stores: u64,
    checks: u64,
}

/// Hashes of recently checked tree chunks with the exact bytes they were computed from:
/// naive re-hashes the same upper nodes on every miss, and a hash is a pure function of the
/// bytes, so an entry is used only on a byte-for-byte match (the hash engine is still
/// charged: this saves the simulator's host time, not simulated time). Direct mapped; an
/// entry is one 64-byte header (chunk number, hash) followed by the chunk's bytes, so a
/// lookup touches adjacent host cache lines and nothing is padded to the largest chunk.
struct Memo {
    entries: Vec<u8>,
    stride: usize,
}

const HEADER: usize = 64;

impl Memo {
    fn new(chunk: usize) -> Memo {
        let stride = HEADER + chunk;
        let mut entries = vec![0; MEMO * stride];
        for e in entries.chunks_exact_mut(stride) {
            e[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        }
        Memo { entries, stride }
    }

    /// The entry for tree chunk `c`: hashed, not c mod MEMO, since arrays a power of two
    /// apart have tree nodes a power of two apart at every level, which would all fight for
    /// the same entries.
    #[inline]
    fn entry(&mut self, c: u64) -> &mut [u8] {
        let i = (c.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - MEMO.trailing_zeros())) as usize;
        &mut self.entries[i * self.stride..(i + 1) * self.stride]
    }

    /// The remembered hash of chunk `c` if `bytes` are exactly the bytes it was computed from.
    #[inline]
    fn hit(&mut self, c: u64, bytes: &[u8]) -> Option<H> {
        let e = self.entry(c);
        let key = u64::from_le_bytes(e[..8].try_into().unwrap());
        (key == c && same_bytes(&e[HEADER..], bytes)).then(|| e[8..8 + secmem_crypto::MAX_HASH_BYTES].try_into().unwrap())
    }

    /// Hash `bytes` of chunk `c` and remember the result.
    #[inline]
    fn hash(&mut self, hasher: &Hasher, c: u64, bytes: &[u8]) -> H {
        let h = hash(hasher, bytes);
        let e = self.entry(c);
        e[..8].copy_from_slice(&c.to_le_bytes());
        e[8..8 + h.len()].copy_from_slice(&h);
        e[HEADER..].copy_from_slice(bytes);
        h
    }
}

impl Naive {
    pub fn new(p: &Params, m: &mut Machine) -> Result<Naive, ConfigError> {
        let hasher = hasher_from(p, "naive")?;
        let line = m.line();
        let cover = Tree::data(&m.layout);
        let tree = Tree::new(&mut m.layout, "naive tree", cover, line, hasher.len(), p.u64_min("naive.arity", 0)?, "naive.arity")?;
        let zero = tree.zero_hashes(|b, _| hash(&hasher, b));
        let roots = vec![zero[0]; tree.m as usize];
        let path = vec![[0u8; MAX_LINE]; tree.levels as usize];
        let memo = Memo::new(line as usize);
        let (anc, arrive, hashes) = (Vec::with_capacity(path.len()), Vec::with_capacity(path.len()), Vec::with_capacity(path.len()));
        Ok(Naive { hasher, tree, roots, zero, path, memo, anc, addrs: Vec::new(), arrive, hashes, hash_loads: 0, hash_stores: 0, checks: 0 })
    }

    /// Read every ancestor of `c` from memory (all requested at `t`, the addresses being
    /// known) into `self.path` (their numbers into `self.anc`), and check the chain from the
    /// first ancestor up to the roots. Returns when the last check is done.
    fn read_path(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        self.anc.clear();
        let mut a = c;
        while let Some((p, _)) = self.tree.parent(a) {
            self.anc.push(p);
            a = p;
        }
        let n = self.tree.chunk as usize;
        self.arrive.clear();
        self.hashes.clear();
        self.addrs.clear();
        self.addrs.extend(self.anc.iter().map(|&a| self.tree.addr_of(a)));
        enc.read_lines(m, &self.addrs, t, &mut self.path, n, &mut self.arrive)?;
        for (i, &a) in self.anc.iter().enumerate() {
            let bytes = &mut self.path[i][..n];
            // A remembered node is never all zero (zero nodes are remembered decoded), so a
            // hit needs no zero test.
            let h = match self.memo.hit(a, bytes) {
                Some(h) => h,
                None => {
                    self.tree.decode_zero_node(a, bytes, &self.zero);
                    self.memo.hit(a, bytes).unwrap_or_else(|| self.memo.hash(&self.hasher, a, bytes))
                }
            };
            self.hashes.push(h);
        }
        self.hash_loads += self.anc.len() as u64;
        // Check each ancestor against the next one up (the top one against its root).
        let hb = self.tree.hb;
        // The path arrives in order: its checks are booked on the hash engine in one pass.
        let done = t.max(m.hash.run_in_order(&self.arrive, self.tree.chunk));
        for i in 0..self.anc.len() {
            let a = self.anc[i];
            self.checks += 1;
            let want: &[u8] = match self.tree.parent(a) {
                Some((_, idx)) => &self.path[i + 1][idx..idx + hb],
                None => &self.roots[a as usize][..hb],
            };
            if !same_bytes(&self.hashes[i][..hb], want) {
                return Err(IntegrityError::tampered(self.tree.addr_of(a), mismatch(&self.tree, a)));
            }
        }
        Ok(done + 1)
    }

    /// The hash of `c` stored one level up: in the first ancestor read, or a root register.
    fn stored_hash(&self, c: u64) -> H {
        let mut h = [0u8; secmem_crypto::MAX_HASH_BYTES];
        match self.tree.parent(c) {
            Some((_, idx)) => h[..self.tree.hb].copy_from_slice(&self.path[0][idx..idx + self.tree.hb]),
            None => h = self.roots[c as usize],
        }
        h
    }
}

impl Integrity for Naive {
    fn name(&self) -> &'static str {
        "naive"
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
        // Level l has l ancestors (the top level's hashes are in root registers).
        m.counters.meta_accesses += self.tree.level_of(c) as u64;
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let path_done = self.read_path(m, enc, c, t_req)?;
        let h_done = m.hash.run(t_start, self.tree.chunk);
        let h = hash(&self.hasher, plain);
        self.checks += 1;
        let matched = same_bytes(&h[..self.tree.hb], &self.stored_hash(c)[..self.tree.hb]);
        super::conclude(m, slot, t_start, matched, h_done.max(path_done) + 1, || IntegrityError::tampered(addr, mismatch(&self.tree, c)))
    }

    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let Some(c) = self.tree.chunk_of(v.addr) else {
            return super::write_back_plain(m, enc, v);
        };
        let (wslot, start) = m.write_buf.acquire(v.t);
        let mut t = self.read_path(m, enc, c, start)?;
        // Recompute the path bottom-up, then write it all back.
        let n = self.tree.chunk as usize;
        let hb = self.tree.hb;
        let mut h = hash(&self.hasher, &v.bytes);
        t = m.hash.run(t, self.tree.chunk);
        let mut child = c;
        for i in 0..self.anc.len() {
            let a = self.anc[i];
            let idx = self.tree.parent(child).unwrap().1;
            self.path[i][idx..idx + hb].copy_from_slice(&h[..hb]);
            // The node just changed: its memo entry cannot match.
            h = self.memo.hash(&self.hasher, a, &self.path[i][..n]);
            t = m.hash.run(t, self.tree.chunk);
            child = a;
        }
        self.roots[child as usize] = h;
        let done = enc.write_line(m, v.addr, &v.bytes, t)?;
        // `addrs` still holds the path's addresses from `read_path`.
        let done = done.max(enc.write_lines(m, &self.addrs, &self.path, n, t)?);
        self.hash_stores += self.anc.len() as u64;
        m.counters.meta_writebacks += self.anc.len() as u64;
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
        (self.hash_loads, self.hash_stores, self.checks) = (0, 0, 0);
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        out.int("naive.arity", self.tree.m);
        out.int("naive.levels", self.tree.levels as u64);
        out.int("naive.hash_loads", self.hash_loads);
        out.rate("naive.hash_loads_per_miss", self.hash_loads, m.counters.data_misses);
        out.int("naive.hash_stores", self.hash_stores);
        out.int("naive.checks", self.checks);
        out.float("naive.space_overhead", self.space_overhead());
    }
}
