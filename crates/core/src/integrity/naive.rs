//! naive: the hash tree placed between the L2 and memory with no caching of tree chunks
//! (seed 003 §4.2, scheme 1). Every L2 miss reads the whole path to the root from memory and
//! checks it; every dirty write-back reads and checks the path, recomputes every hash on it
//! and writes the path back. Same tree layout as chash.

use super::chash::{hash, hasher_from, mismatch, MAX_LINE};
use super::tree::{Tree, H};
use super::{Integrity, IntegrityError, Verified};
use crate::encryption::Encryption;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use secmem_crypto::Hasher;
use secmem_timing::Cycle;

const MEMO: usize = 4096;

pub struct Naive {
    hasher: Hasher,
    tree: Tree,
    roots: Vec<H>,
    zero: Vec<H>,
    path: Vec<[u8; MAX_LINE]>,
    /// Hashes of recently checked tree chunks with the exact bytes they were computed from:
    /// naive re-hashes the same upper nodes on every miss, and a hash is a pure function of
    /// the bytes, so an entry is used only on a byte-for-byte match (the hash engine is still
    /// charged: this saves the simulator's host time, not simulated time).
    memo: Vec<(u64, [u8; MAX_LINE], H)>,
    /// The ancestors `read_path` read, and when each arrived (reused buffers).
    anc: Vec<u64>,
    arrive: Vec<Cycle>,
    hash_loads: u64,
    hash_stores: u64,
    checks: u64,
}

/// The hash of tree chunk `c` whose bytes are `bytes`, through the memo.
#[inline]
fn node_hash(hasher: &Hasher, memo: &mut [(u64, [u8; MAX_LINE], H)], c: u64, bytes: &[u8]) -> H {
    let e = &mut memo[(c % MEMO as u64) as usize];
    if e.0 == c && e.1[..bytes.len()] == *bytes {
        return e.2;
    }
    let h = hash(hasher, bytes);
    e.0 = c;
    e.1[..bytes.len()].copy_from_slice(bytes);
    e.2 = h;
    h
}

impl Naive {
    pub fn new(p: &Params, m: &mut Machine) -> Result<Naive, ConfigError> {
        let hasher = hasher_from(p, "naive")?;
        let line = m.line();
        let tree = Tree::new(&mut m.layout, "naive tree", line, hasher.len(), p.u64_min("naive.arity", 0)?, "naive.arity")?;
        let zero = tree.zero_hashes(|b, _| hash(&hasher, b));
        let roots = vec![zero[0]; tree.m as usize];
        let path = vec![[0u8; MAX_LINE]; tree.levels as usize];
        let memo = vec![(u64::MAX, [0u8; MAX_LINE], [0u8; secmem_crypto::MAX_HASH_BYTES]); MEMO];
        let (anc, arrive) = (Vec::with_capacity(path.len()), Vec::with_capacity(path.len()));
        Ok(Naive { hasher, tree, roots, zero, path, memo, anc, arrive, hash_loads: 0, hash_stores: 0, checks: 0 })
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
        for (i, &a) in self.anc.iter().enumerate() {
            let addr = self.tree.addr_of(a);
            let ta = enc.read_line(m, addr, t, &mut self.path[i][..n]);
            self.tree.decode_zero_node(a, &mut self.path[i][..n], &self.zero);
            self.arrive.push(ta);
        }
        self.hash_loads += self.anc.len() as u64;
        // Check each ancestor against the next one up (the top one against its root).
        let hb = self.tree.hb;
        let mut done = t;
        for i in 0..self.anc.len() {
            let a = self.anc[i];
            let h = node_hash(&self.hasher, &mut self.memo, a, &self.path[i][..n]);
            done = done.max(m.hash.run(self.arrive[i], self.tree.chunk));
            self.checks += 1;
            let want: &[u8] = match self.tree.parent(a) {
                Some((_, idx)) => &self.path[i + 1][idx..idx + hb],
                None => &self.roots[a as usize][..hb],
            };
            if h[..hb] != *want {
                return Err(IntegrityError { addr: self.tree.addr_of(a), what: mismatch(&self.tree, a) });
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
        let matched = h[..self.tree.hb] == self.stored_hash(c)[..self.tree.hb];
        super::conclude(m, slot, t_start, matched, h_done.max(path_done) + 1, || IntegrityError {
            addr,
            what: mismatch(&self.tree, c),
        })
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
            h = node_hash(&self.hasher, &mut self.memo, a, &self.path[i][..n]);
            t = m.hash.run(t, self.tree.chunk);
            child = a;
        }
        self.roots[child as usize] = h;
        let mut done = enc.write_line(m, v.addr, &v.bytes, t);
        for (i, &a) in self.anc.iter().enumerate() {
            done = done.max(enc.write_line(m, self.tree.addr_of(a), &self.path[i][..n], t));
        }
        self.hash_stores += self.anc.len() as u64;
        m.counters.meta_writebacks += self.anc.len() as u64;
        m.write_buf.hold_until(wslot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
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
        out.float("naive.hash_loads_per_miss", ratio(self.hash_loads, m.counters.data_misses));
        out.int("naive.hash_stores", self.hash_stores);
        out.int("naive.checks", self.checks);
        out.float("naive.space_overhead", self.space_overhead());
    }
}
