//! chash: the hash tree merged with the L2 (seed 003 §4.3; CHTree in seed 000 §3.1).
//!
//! Layout (003 §4.5): chunks are numbered from 0; chunk c's hash sits at slot c mod m of
//! chunk ⌊c/m⌋−1, and chunks 0..m−1 have their hashes in on-chip registers (the roots).
//! Leaves are the highest-numbered chunks and are the data chunks themselves (leaf j is the
//! data chunk at j·B); internal chunks live in a metadata region. A chunk brought into the
//! L2 is checked only up to the first ancestor found in the cache, which is trusted; a dirty
//! chunk leaving the L2 updates its parent in the cache.
//!
//! Gigabytes of memory cost only what is touched: an internal chunk never written reads as
//! zero bytes and is decoded as the node of an all-zero subtree (hashes precomputed per
//! level), exactly what the initialisation of 003 §4.6.2 would have stored there. The
//! decoded node is still checked against its parent, so an adversary gains nothing from it.

use super::tree::{Tree, H};
use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::cache::LineKind;
use crate::encryption::Encryption;
use crate::layout::{Meta, MAX_LINE};
use crate::mem::same_bytes;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{HashAlg, Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};

/// chash's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "chash",
    kind: Kind::Integrity,
    summary: "the hash tree merged with the L2: a chunk brought in is checked up to its first cached ancestor; data is used while the check completes",
    source: "003 §4.3; CHTree in 000 §3.1",
    params: &[
        param("chash.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the tree hash (md5: the seeds' one-block MD5 compression over the 64-B chunk)"),
        param("chash.hash_bytes", Def::Int(16), "B", "bytes of each hash kept in its parent (128-bit hashes)"),
        param("chash.arity", Def::Int(0), "children", "hashes per tree chunk; 0: as many as fit a chunk (64 B / 16 B = 4)"),
    ],
    stats: &[
        stat("chash.levels", "levels", "levels of the tree over the protected memory"),
        stat("chash.hash_loads", "chunks", "tree chunks read from memory to check data"),
        stat("chash.hash_loads_per_miss", "chunks", "chash.hash_loads / l2.misses (the seeds' hash loads per miss)"),
        stat("chash.checks", "checks", "chunks brought in and checked against their parent"),
        stat("chash.space_overhead", "fraction", "memory the tree takes, per byte of data"),
        stat("chash.hash_stores", "chunks", "tree chunks written back to memory"),
        stat("chash.root_updates", "updates", "writes of the on-chip root registers"),
        stat("chash.read_buffer_full_cycles", "cycles", "cycles checks waited for a free read buffer entry, summed (003 §4.7)"),
        stat("chash.write_buffer_full_cycles", "cycles", "cycles write-backs waited for a free write buffer entry, summed"),
    ],
};

/// chash's registration. Every read is checked up to a trusted (cached or root) node: any change, move or replay fails it.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access)),
    coverage: Coverage { lays_out: &[Role::Tree], protects: &[Role::Data], guarded: &[] },
    build: |p, m, _| Ok(Box::new(Chash::new(p, m)?)),
};


/// The tree hash chosen by `{scheme}.hash` / `{scheme}.hash_bytes`.
pub fn hasher_from(p: &Params, scheme: &str) -> Result<Hasher, ConfigError> {
    let key = format!("{}.hash", scheme);
    let alg = HashAlg::parse(&p.choice(&key, &["md5", "md5-rfc1321", "sha1", "sha256"])?).unwrap();
    let hb = p.u64_min(&format!("{}.hash_bytes", scheme), 1)? as usize;
    Hasher::new(alg, hb).map_err(|e| ConfigError(format!("{}.hash_bytes: {}", scheme, e)))
}

pub struct Chash {
    hasher: Hasher,
    pub tree: Tree,
    /// Hashes of chunks 0..m−1: the secure root registers.
    roots: Vec<H>,
    /// zero[l]: hash of a chunk at level l of an all-zero subtree (level 0 = top).
    zero: Vec<H>,
    /// Chunks whose hashes the checks in progress will compare, innermost last. A miss
    /// checks its chunk and every uncached ancestor; each hash is needed only when the climb
    /// returns, so they are computed together then (`Hasher::hash_each`).
    pending: Vec<([u8; MAX_LINE], Option<H>)>,
    // statistics
    hash_loads: u64,
    hash_stores: u64,
    checks: u64,
    root_updates: u64,
}

impl Chash {
    pub fn new(p: &Params, m: &mut Machine) -> Result<Chash, ConfigError> {
        let hasher = hasher_from(p, "chash")?;
        let line = m.line();
        let cover = Tree::data(&m.layout);
        let tree = Tree::new(&mut m.layout, "chash tree", cover, line, hasher.len(), p.u64_min("chash.arity", 0)?, "chash.arity")?;
        let zero = tree.zero_hashes(|b, _| hash(&hasher, b));
        let roots = vec![zero[0]; tree.m as usize];
        Ok(Chash { hasher, tree, roots, zero, pending: Vec::new(), hash_loads: 0, hash_stores: 0, checks: 0, root_updates: 0 })
    }

    /// Bring internal chunk `c` into the L2 (checking it against its ancestors if it comes
    /// from memory). Returns its slot and when its bytes are usable.
    fn obtain(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<(u32, Cycle), IntegrityError> {
        let addr = self.tree.addr_of(c);
        m.counters.meta_accesses += 1;
        if let Some(slot) = m.lookup(addr) {
            return Ok((slot, (t + m.l2_latency).max(m.l2.ready(slot))));
        }
        m.counters.meta_misses += 1;
        self.hash_loads += 1;
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.tree.chunk as usize];
        let t_data = enc.read_line(m, addr, t, plain)?;
        let v = self.verify(m, enc, addr, plain, t, t_data)?;
        let slot = m.insert(addr, plain, LineKind::Meta, false, v.ready);
        Ok((slot, v.ready))
    }

    /// `obtain` for a prewarm that installs (`Integrity::install`): internal chunk `c` into
    /// the L2 unchecked, its bytes memory's, after its own uncached ancestors — the lookups
    /// and insertions of `obtain`'s check, in its order, without a hash. Returns its slot.
    fn install_chunk(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<u32, IntegrityError> {
        let addr = self.tree.addr_of(c);
        m.counters.meta_accesses += 1;
        if let Some(slot) = m.lookup(addr) {
            return Ok(slot);
        }
        m.counters.meta_misses += 1;
        self.hash_loads += 1;
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.tree.chunk as usize];
        let t_data = enc.read_installed(m, addr, t, plain)?;
        self.tree.decode_zero_node(c, plain, &self.zero);
        if let Some((parent, _)) = self.tree.parent(c) {
            self.install_chunk(m, enc, parent, t)?;
        }
        Ok(m.insert(addr, plain, LineKind::Meta, false, t_data))
    }

    /// Stage `bytes` for hashing with the other chunks of the climb.
    fn stage(&mut self, bytes: &[u8]) {
        let mut e = ([0u8; MAX_LINE], None);
        e.0[..bytes.len()].copy_from_slice(bytes);
        self.pending.push(e);
    }

    /// The hash of the innermost staged chunk, unstaged; every staged chunk not hashed yet
    /// is hashed with it.
    fn staged_hash(&mut self) -> H {
        if self.pending.last().is_some_and(|e| e.1.is_none()) {
            let n = self.tree.chunk as usize;
            let first = self.pending.iter().position(|e| e.1.is_none()).unwrap();
            for group in self.pending[first..].chunks_mut(4) {
                let mut inputs: [&[u8]; 4] = [&[]; 4];
                for (i, e) in inputs.iter_mut().zip(group.iter()) {
                    *i = &e.0[..n];
                }
                let k = group.len();
                let mut outs = [[0u8; MAX_HASH_BYTES]; 4];
                self.hasher.hash_each(&inputs[..k], &mut outs[..k]);
                for (e, h) in group.iter_mut().zip(outs) {
                    e.1 = Some(h);
                }
            }
        }
        self.pending.pop().and_then(|e| e.1).expect("a staged chunk")
    }

    /// The hash of chunk `c` held by its parent (or a root register), and when it is known.
    fn expected(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<(H, Cycle), IntegrityError> {
        let Some((parent, idx)) = self.tree.parent(c) else {
            return Ok((self.roots[c as usize], t));
        };
        let (slot, ready) = self.obtain(m, enc, parent, t)?;
        let mut h = [0u8; MAX_HASH_BYTES];
        let hb = self.tree.hb;
        h[..hb].copy_from_slice(&m.l2.bytes(slot)[idx..idx + hb]);
        Ok((h, ready))
    }
}

#[inline]
pub fn hash(hasher: &Hasher, bytes: &[u8]) -> H {
    let mut h = [0u8; MAX_HASH_BYTES];
    hasher.hash(bytes, &mut h);
    h
}

/// The failure message for chunk `c` of `tree`.
pub fn mismatch(tree: &Tree, c: u64) -> String {
    if tree.is_leaf(c) {
        match tree.parent(c) {
            Some((p, _)) => format!("data chunk does not match its hash in tree chunk {}", p),
            None => "data chunk does not match its root hash".to_string(),
        }
    } else {
        format!(
            "tree chunk {} (level {} of {}) does not match the hash held by its parent",
            c,
            tree.level_of(c),
            tree.levels
        )
    }
}

impl Integrity for Chash {
    fn name(&self) -> &'static str {
        "chash"
    }

    /// ReadAndCheckChunk (003 §4.3): the data is returned for speculative use while it is
    /// hashed and its parent's hash is fetched (recursively) in parallel.
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
        self.tree.decode_zero_node(c, plain, &self.zero);
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, self.tree.chunk);
        self.stage(plain);
        let expected = self.expected(m, enc, c, t_req);
        if expected.is_err() {
            self.pending.pop();
        }
        let (want, t_want) = expected?;
        let h = self.staged_hash();
        self.checks += 1;
        let hb = self.tree.hb;
        super::conclude(m, slot, t_start, same_bytes(&h[..hb], &want[..hb]), h_done.max(t_want) + 1, || IntegrityError::tampered(addr, mismatch(&self.tree, c)))
    }

    /// The check climbs to the first cached ancestor, reading each chunk on the way: they
    /// are known now, so the host may load them together.
    fn prefetch(&self, m: &Machine, enc: &dyn Encryption, addr: u64) {
        let Some(mut c) = self.tree.chunk_of(addr) else { return };
        while let Some((p, _)) = self.tree.parent(c) {
            let a = self.tree.addr_of(p);
            if m.l2.tags.find(a).is_some() {
                break;
            }
            enc.prefetch(m, a);
            c = p;
        }
    }

    /// Write-Back (003 §4.3): hash the evicted chunk and store the hash in its parent, which
    /// is brought into the cache (checked) if it is not there.
    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let Some(c) = self.tree.chunk_of(v.addr) else {
            return super::write_back_plain(m, enc, v);
        };
        let (wslot, start) = m.write_buf.acquire(v.t);
        let h_done = m.hash.run(start, self.tree.chunk);
        let h = hash(&self.hasher, &v.bytes);
        match self.tree.parent(c) {
            None => {
                self.roots[c as usize] = h;
                self.root_updates += 1;
            }
            Some((parent, idx)) => {
                let hb = self.tree.hb;
                let (slot, _) = self.obtain(m, enc, parent, start)?;
                m.l2.bytes_mut(slot)[idx..idx + hb].copy_from_slice(&h[..hb]);
                m.l2.set_dirty(slot);
            }
        }
        if !self.tree.is_leaf(c) {
            self.hash_stores += 1;
        }
        let done = enc.write_line(m, v.addr, &v.bytes, h_done)?;
        m.write_buf.hold_until(wslot, done);
        Ok(start)
    }

    /// The tree is cached metadata only: a prewarm installs it by address.
    fn installs(&self) -> bool {
        true
    }

    /// The chunks a check of `addr`'s line would bring in (its uncached ancestors, up to the
    /// first cached one), unchecked, in the order the check inserts them: memory is as the
    /// window's set-up left it, so the tree there is consistent and a chunk read from it is
    /// what the check would have accepted.
    fn install(&mut self, m: &mut Machine, enc: &mut dyn Encryption, addr: u64, plain: &mut [u8], t: Cycle) -> Result<(), IntegrityError> {
        let Some(c) = self.tree.chunk_of(addr) else { return Ok(()) };
        self.tree.decode_zero_node(c, plain, &self.zero);
        if let Some((parent, _)) = self.tree.parent(c) {
            self.install_chunk(m, enc, parent, t)?;
        }
        Ok(())
    }

    /// A dirty chunk's write-back brings its parent in and dirties it (`evict`); here the
    /// parent comes in unchecked and keeps memory's bytes, as the chunk does: its bytes are
    /// memory's (a prewarm writes back only what it read, or a window-start value where the
    /// window reads it).
    fn install_evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let Some(c) = self.tree.chunk_of(v.addr) else { return Ok(v.t) };
        if let Some((parent, _)) = self.tree.parent(c) {
            let slot = self.install_chunk(m, enc, parent, v.t)?;
            m.l2.set_dirty(slot);
        }
        Ok(v.t)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        super::tree_path(&self.tree, addr)
    }

    fn reset_stats(&mut self) {
        (self.hash_loads, self.hash_stores, self.checks, self.root_updates) = (0, 0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        self.tree.space_overhead()
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        out.int("chash.arity", self.tree.m);
        out.int("chash.levels", self.tree.levels as u64);
        out.str("chash.hash", self.hasher.alg().name());
        out.int("chash.hash_bytes", self.tree.hb as u64);
        out.int("chash.hash_loads", self.hash_loads);
        out.rate("chash.hash_loads_per_miss", self.hash_loads, m.counters.data_misses);
        out.int("chash.hash_stores", self.hash_stores);
        out.int("chash.checks", self.checks);
        out.int("chash.root_updates", self.root_updates);
        out.int("chash.read_buffer_full_cycles", m.read_buf.wait_cycles);
        out.int("chash.write_buffer_full_cycles", m.write_buf.wait_cycles);
        out.float("chash.space_overhead", self.space_overhead());
    }
}
