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

use super::{Integrity, IntegrityError, Verified};
use crate::cache::LineKind;
use crate::encryption::Encryption;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use secmem_crypto::{HashAlg, Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;

/// Largest L2 line (chunk) supported; scratch buffers live on the stack.
pub const MAX_LINE: usize = 256;

type H = [u8; MAX_HASH_BYTES];

pub struct Chash {
    hasher: Hasher,
    hb: usize,
    m: u64,
    line: u64,
    /// Number of internal chunks (numbered 0..internal).
    internal: u64,
    levels: u32,
    tree_base: u64,
    data_size: u64,
    /// Hashes of chunks 0..m−1: the secure root registers.
    roots: Vec<H>,
    /// zero[l]: hash of a chunk at level l of an all-zero subtree (level 0 = top).
    zero: Vec<H>,
    level_start: Vec<u64>,
    // statistics
    hash_loads: u64,
    hash_stores: u64,
    checks: u64,
    root_updates: u64,
}

impl Chash {
    pub fn new(p: &Params, m: &mut Machine) -> Result<Chash, ConfigError> {
        let alg_name = p.choice("chash.hash", &["md5", "md5-rfc1321", "sha1", "sha256"])?;
        let alg = HashAlg::parse(&alg_name).unwrap();
        let hb = p.u64_min("chash.hash_bytes", 1)? as usize;
        let hasher = Hasher::new(alg, hb).map_err(|e| ConfigError(format!("chash.hash_bytes: {}", e)))?;
        let line = m.line();
        if line as usize > MAX_LINE {
            return Err(ConfigError(format!("l2.line: {} B exceeds the {} B supported", line, MAX_LINE)));
        }
        let fit = line / hb as u64;
        let arity = match p.u64_min("chash.arity", 0)? {
            0 => fit,
            a => a,
        };
        if arity < 2 || arity > fit {
            return Err(ConfigError(format!(
                "chash.arity: {} hashes of {} B do not fit a {} B chunk (2..={})",
                arity, hb, line, fit
            )));
        }
        let data_size = m.layout.data_size;
        let leaves_needed = data_size.div_ceil(line);
        // Balanced m-ary tree: m^levels ≥ leaves; level l holds m^(l+1) chunks.
        let mut levels = 1u32;
        let mut width = arity;
        let mut level_start = vec![0u64];
        let mut internal = 0u64;
        while width < leaves_needed {
            internal += width;
            level_start.push(internal);
            width = width
                .checked_mul(arity)
                .ok_or_else(|| ConfigError("memory.size too large for the tree".into()))?;
            levels += 1;
        }
        let tree_base = m.layout.alloc("chash tree", internal * line);
        // Zero-subtree hashes, bottom-up.
        let mut zero = vec![[0u8; MAX_HASH_BYTES]; levels as usize];
        let mut chunk = vec![0u8; line as usize];
        hasher.hash(&chunk, &mut zero[levels as usize - 1]);
        for l in (0..levels as usize - 1).rev() {
            for i in 0..arity as usize {
                chunk[i * hb..(i + 1) * hb].copy_from_slice(&zero[l + 1][..hb]);
            }
            hasher.hash(&chunk, &mut zero[l]);
        }
        let roots = vec![zero[0]; arity as usize];
        Ok(Chash {
            hasher,
            hb,
            m: arity,
            line,
            internal,
            levels,
            tree_base,
            data_size,
            roots,
            zero,
            level_start,
            hash_loads: 0,
            hash_stores: 0,
            checks: 0,
            root_updates: 0,
        })
    }

    pub fn arity(&self) -> u64 {
        self.m
    }

    pub fn levels(&self) -> u32 {
        self.levels
    }

    pub fn tree_base(&self) -> u64 {
        self.tree_base
    }

    /// Address of internal chunk `c` (for tests and the adversary).
    pub fn node_addr(&self, c: u64) -> u64 {
        self.addr_of(c)
    }

    /// Chunk number of the chunk at `addr`, if it is part of the tree.
    pub fn chunk_of(&self, addr: u64) -> Option<u64> {
        if addr < self.data_size {
            Some(self.internal + addr / self.line)
        } else if addr >= self.tree_base && addr < self.tree_base + self.internal * self.line {
            Some((addr - self.tree_base) / self.line)
        } else {
            None
        }
    }

    fn addr_of(&self, c: u64) -> u64 {
        if c >= self.internal {
            (c - self.internal) * self.line
        } else {
            self.tree_base + c * self.line
        }
    }

    pub fn level_of(&self, c: u64) -> u32 {
        if c >= self.internal {
            return self.levels - 1;
        }
        (self.level_start.partition_point(|&s| s <= c) - 1) as u32
    }

    /// Chain of ancestors of `c` from its parent up (what a naive walk would read).
    pub fn ancestors(&self, mut c: u64) -> Vec<u64> {
        let mut v = Vec::new();
        while c >= self.m {
            c = c / self.m - 1;
            v.push(c);
        }
        v
    }

    #[inline]
    fn hash_of(&self, bytes: &[u8]) -> H {
        let mut h = [0u8; MAX_HASH_BYTES];
        self.hasher.hash(bytes, &mut h);
        h
    }

    /// Bring internal chunk `c` into the L2 (checking it against its ancestors if it comes
    /// from memory). Returns its slot and when its bytes are usable.
    fn obtain(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<(u32, Cycle), IntegrityError> {
        let addr = self.addr_of(c);
        m.counters.meta_accesses += 1;
        if let Some(slot) = m.lookup(addr) {
            return Ok((slot, (t + m.l2_latency).max(m.l2.ready(slot))));
        }
        m.counters.meta_misses += 1;
        self.hash_loads += 1;
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.line as usize];
        let t_data = enc.read_line(m, addr, t, plain);
        let v = self.verify(m, enc, addr, plain, t, t_data)?;
        let slot = m.insert(addr, plain, LineKind::Meta, false, v.ready);
        Ok((slot, v.ready))
    }

    /// The hash of chunk `c` held by its parent (or a root register), and when it is known.
    fn expected(&mut self, m: &mut Machine, enc: &mut dyn Encryption, c: u64, t: Cycle) -> Result<(H, Cycle), IntegrityError> {
        if c < self.m {
            return Ok((self.roots[c as usize], t));
        }
        let parent = c / self.m - 1;
        let idx = (c % self.m) as usize * self.hb;
        let (slot, ready) = self.obtain(m, enc, parent, t)?;
        let mut h = [0u8; MAX_HASH_BYTES];
        h[..self.hb].copy_from_slice(&m.l2.bytes(slot)[idx..idx + self.hb]);
        Ok((h, ready))
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
        let c = match self.chunk_of(addr) {
            Some(c) => c,
            None => return Ok(Verified { ready: t_data, checked: t_data }),
        };
        let level = self.level_of(c);
        if c < self.internal && plain.iter().all(|&b| b == 0) {
            // Never-written internal chunk: the node of an all-zero subtree.
            for i in 0..self.m as usize {
                plain[i * self.hb..(i + 1) * self.hb].copy_from_slice(&self.zero[level as usize + 1][..self.hb]);
            }
        }
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, self.line);
        let h = self.hash_of(plain);
        let (want, t_want) = self.expected(m, enc, c, t_req)?;
        self.checks += 1;
        if h[..self.hb] != want[..self.hb] {
            m.read_buf.hold_until(slot, t_start);
            let what = if c < self.internal {
                format!("tree chunk {} (level {} of {}) does not match the hash held by its parent", c, level, self.levels)
            } else {
                format!("data chunk does not match its hash in tree chunk {}", if c < self.m { -1 } else { (c / self.m) as i64 - 1 })
            };
            return Err(IntegrityError { addr, what });
        }
        let checked = h_done.max(t_want) + 1;
        m.read_buf.hold_until(slot, checked);
        m.note_check(checked);
        Ok(Verified { ready: t_start, checked })
    }

    /// Write-Back (003 §4.3): hash the evicted chunk and store the hash in its parent, which
    /// is brought into the cache (checked) if it is not there.
    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let c = match self.chunk_of(v.addr) {
            Some(c) => c,
            None => {
                let (slot, start) = m.write_buf.acquire(v.t);
                let done = enc.write_line(m, v.addr, &v.bytes, start);
                m.write_buf.hold_until(slot, done);
                return Ok(start);
            }
        };
        let (wslot, start) = m.write_buf.acquire(v.t);
        let h_done = m.hash.run(start, self.line);
        let h = self.hash_of(&v.bytes);
        if c < self.m {
            self.roots[c as usize] = h;
            self.root_updates += 1;
        } else {
            let parent = c / self.m - 1;
            let idx = (c % self.m) as usize * self.hb;
            let (slot, _) = self.obtain(m, enc, parent, start)?;
            m.l2.bytes_mut(slot)[idx..idx + self.hb].copy_from_slice(&h[..self.hb]);
            m.l2.set_dirty(slot);
        }
        if c < self.internal {
            self.hash_stores += 1;
        }
        let done = enc.write_line(m, v.addr, &v.bytes, h_done);
        m.write_buf.hold_until(wslot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        let Some(c) = self.chunk_of(addr & !(self.line - 1)) else { return Vec::new() };
        self.ancestors(c)
            .into_iter()
            .map(|a| (format!("chash tree level {}", self.level_of(a)), self.addr_of(a)))
            .collect()
    }

    fn reset_stats(&mut self) {
        (self.hash_loads, self.hash_stores, self.checks, self.root_updates) = (0, 0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        (self.internal * self.line) as f64 / self.data_size as f64
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        out.int("chash.arity", self.m);
        out.int("chash.levels", self.levels as u64);
        out.str("chash.hash", self.hasher.alg().name());
        out.int("chash.hash_bytes", self.hb as u64);
        out.int("chash.hash_loads", self.hash_loads);
        out.float("chash.hash_loads_per_miss", ratio(self.hash_loads, m.counters.data_misses));
        out.int("chash.hash_stores", self.hash_stores);
        out.int("chash.checks", self.checks);
        out.int("chash.root_updates", self.root_updates);
        out.int("chash.read_buffer_full_cycles", m.read_buf.wait_cycles);
        out.int("chash.write_buffer_full_cycles", m.write_buf.wait_cycles);
        out.float("chash.space_overhead", self.space_overhead());
    }
}
