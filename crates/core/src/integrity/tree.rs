//! Hash-tree geometry shared by chash, naive and mhash (seed 003 §4.5).
//!
//! Chunks are numbered from 0; chunk c's hash sits at slot c mod m of chunk ⌊c/m⌋−1, and
//! chunks 0..m−1 have their hashes in on-chip root registers. The tree is balanced: level l
//! holds m^(l+1) chunks, the last level holds the leaves, which are the chunks of the region
//! the tree covers (leaf j is the chunk at lo + j·B: program data for the seeds' trees, counter
//! blocks for a tree over counters); internal chunks live in a metadata region.

use crate::decl::Role;
use crate::layout::{all_zero, Layout};
use crate::params::ConfigError;
use secmem_crypto::MAX_HASH_BYTES;

pub type H = [u8; MAX_HASH_BYTES];

#[derive(Clone, Debug)]
pub struct Tree {
    /// Arity.
    pub m: u64,
    /// Bytes per chunk.
    pub chunk: u64,
    /// Bytes per hash.
    pub hb: usize,
    /// Number of internal chunks (numbered 0..internal).
    pub internal: u64,
    pub levels: u32,
    pub base: u64,
    /// The region the leaves cover: [lo, lo + data_size).
    pub lo: u64,
    pub data_size: u64,
    level_start: Vec<u64>,
    /// log2 of the arity and of the chunk size when they are powers of two (the usual case):
    /// `parent` and `chunk_of` run on every tree level of every miss, and a 64-bit division
    /// by a run-time value costs tens of cycles.
    m_log: Option<u32>,
    chunk_log: Option<u32>,
}

impl Tree {
    /// Lay out a tree over the region `cover` = (lo, size) (`Tree::data` for program data);
    /// `arity` 0 means as many hashes as fit.
    pub fn new(layout: &mut Layout, name: &str, cover: (u64, u64), chunk: u64, hb: usize, arity: u64, key: &str) -> Result<Tree, ConfigError> {
        let fit = chunk / hb as u64;
        let m = if arity == 0 { fit } else { arity };
        if m < 2 || m > fit {
            return Err(ConfigError(format!(
                "{}: {} hashes of {} B do not fit a {} B chunk (2..={})",
                key, m, hb, chunk, fit
            )));
        }
        let (lo, data_size) = cover;
        let leaves = data_size.div_ceil(chunk);
        let mut levels = 1u32;
        let mut width = m;
        let mut level_start = vec![0u64];
        let mut internal = 0u64;
        while width < leaves {
            internal += width;
            level_start.push(internal);
            width = width.checked_mul(m).ok_or_else(|| ConfigError("memory.size too large for the tree".into()))?;
            levels += 1;
        }
        let base = layout.alloc(Role::Tree, name, internal * chunk);
        let log = |x: u64| x.is_power_of_two().then(|| x.trailing_zeros());
        Ok(Tree { m, chunk, hb, internal, levels, base, lo, data_size, level_start, m_log: log(m), chunk_log: log(chunk) })
    }

    /// The cover of a tree over program data: [0, data_size).
    pub fn data(layout: &Layout) -> (u64, u64) {
        (0, layout.data_size)
    }

    /// Chunk number of the chunk holding `addr`, if the tree covers it.
    #[inline]
    pub fn chunk_of(&self, addr: u64) -> Option<u64> {
        // One comparison for the region: below `lo` the difference wraps past any size.
        if addr.wrapping_sub(self.lo) < self.data_size {
            Some(self.internal + self.chunks_in(addr - self.lo))
        } else if addr >= self.base && addr < self.base + self.internal * self.chunk {
            Some(self.chunks_in(addr - self.base))
        } else {
            None
        }
    }

    /// ⌊bytes / chunk⌋.
    #[inline]
    fn chunks_in(&self, bytes: u64) -> u64 {
        match self.chunk_log {
            Some(k) => bytes >> k,
            None => bytes / self.chunk,
        }
    }

    /// Address of chunk `c`.
    #[inline]
    pub fn addr_of(&self, c: u64) -> u64 {
        if c >= self.internal {
            self.lo + (c - self.internal) * self.chunk
        } else {
            self.base + c * self.chunk
        }
    }

    #[inline]
    pub fn is_leaf(&self, c: u64) -> bool {
        c >= self.internal
    }

    pub fn level_of(&self, c: u64) -> u32 {
        if c >= self.internal {
            return self.levels - 1;
        }
        (self.level_start.partition_point(|&s| s <= c) - 1) as u32
    }

    /// Parent chunk and the byte offset of `c`'s hash in it; `None` for a root-register chunk.
    #[inline]
    pub fn parent(&self, c: u64) -> Option<(u64, usize)> {
        if c < self.m {
            return None;
        }
        let (q, r) = match self.m_log {
            Some(k) => (c >> k, c & (self.m - 1)),
            None => (c / self.m, c % self.m),
        };
        Some((q - 1, r as usize * self.hb))
    }

    /// Ancestors of `c`, parent first.
    pub fn ancestors(&self, mut c: u64) -> Vec<u64> {
        let mut v = Vec::new();
        while let Some((p, _)) = self.parent(c) {
            v.push(p);
            c = p;
        }
        v
    }

    /// Metadata bytes over data bytes (≈ 1/(m−1)). Counts the chunks that cover real data:
    /// the balanced numbering reserves more (leaves rounded up to a power of m), but chunks
    /// over non-existent data are never touched and cost nothing.
    pub fn space_overhead(&self) -> f64 {
        let mut cover = self.data_size.div_ceil(self.chunk);
        let mut nodes = 0;
        for _ in 1..self.levels {
            cover = cover.div_ceil(self.m);
            nodes += cover;
        }
        (nodes * self.chunk) as f64 / self.data_size as f64
    }

    /// Hashes of all-zero subtrees per level (0 = top), given how a chunk is hashed.
    pub fn zero_hashes(&self, mut hash: impl FnMut(&[u8], u32) -> H) -> Vec<H> {
        let mut zero = vec![[0u8; MAX_HASH_BYTES]; self.levels as usize];
        let mut chunk = vec![0u8; self.chunk as usize];
        zero[self.levels as usize - 1] = hash(&chunk, self.levels - 1);
        for l in (0..self.levels as usize - 1).rev() {
            for i in 0..self.m as usize {
                chunk[i * self.hb..(i + 1) * self.hb].copy_from_slice(&zero[l + 1][..self.hb]);
            }
            zero[l] = hash(&chunk, l as u32);
        }
        zero
    }

    /// Decode a never-written internal chunk (all zero bytes) as the node of an all-zero
    /// subtree, which is what initialisation (003 §4.6.2) would have stored there.
    pub fn decode_zero_node(&self, c: u64, bytes: &mut [u8], zero: &[H]) {
        self.decode_zero_block(c, 0, bytes, zero)
    }

    /// The same for the part of chunk `c` starting `offset` bytes in (one cache block of a
    /// multi-block chunk: blocks of a chunk are written independently).
    pub fn decode_zero_block(&self, c: u64, offset: usize, bytes: &mut [u8], zero: &[H]) {
        if c < self.internal && all_zero(bytes) {
            let child = &zero[self.level_of(c) as usize + 1][..self.hb];
            let used = self.m as usize * self.hb;
            let mut pos = offset.div_ceil(self.hb) * self.hb;
            while pos + self.hb <= (offset + bytes.len()).min(used) {
                bytes[pos - offset..pos - offset + self.hb].copy_from_slice(child);
                pos += self.hb;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_and_chunk_of_agree_with_the_division_formulas_for_every_arity() {
        for m in [2u64, 3, 4, 5, 8] {
            let mut l = Layout::new(64 * 4096, 64);
            let cover = Tree::data(&l);
            let t = Tree::new(&mut l, "t", cover, 64, 8, m, "k").unwrap();
            assert_eq!(t.m_log.is_some(), m.is_power_of_two());
            for c in 0..t.internal + 4096 {
                let want = (c >= m).then(|| (c / m - 1, (c % m) as usize * 8));
                assert_eq!(t.parent(c), want, "m = {} c = {}", m, c);
                assert_eq!(t.chunk_of(t.addr_of(c)), Some(c));
            }
        }
    }

    #[test]
    fn numbering_follows_003_section_4_5() {
        let mut l = Layout::new(64 * 64, 64); // 64 data chunks
        let cover = Tree::data(&l);
        let t = Tree::new(&mut l, "t", cover, 64, 16, 4, "k").unwrap();
        // 4 roots + 16 = 20 internal chunks, 64 leaves: levels 0, 1 internal, 2 leaves.
        assert_eq!((t.internal, t.levels), (20, 3));
        assert_eq!(t.parent(3), None, "chunks 0..m-1 hang off root registers");
        assert_eq!(t.parent(4), Some((0, 0)));
        assert_eq!(t.parent(7), Some((0, 48)));
        assert_eq!(t.parent(8), Some((1, 0)));
        // Leaves are the highest-numbered chunks and are the data chunks.
        assert_eq!(t.chunk_of(0), Some(20));
        assert_eq!(t.addr_of(83), 63 * 64);
        assert_eq!(t.level_of(20), 2);
        assert_eq!(t.level_of(19), 1);
        assert_eq!(t.ancestors(83), vec![19, 3]);
        assert!((t.space_overhead() - 20.0 / 64.0).abs() < 1e-12);
        // 8-ary over 512 chunks: 64 + 8 nodes cover them, though 8^3 leaves are numbered.
        let mut l = Layout::new(512 * 128, 128);
        let cover = Tree::data(&l);
        let t = Tree::new(&mut l, "t", cover, 128, 16, 0, "k").unwrap();
        assert_eq!((t.m, t.levels), (8, 3));
        assert!((t.space_overhead() - 72.0 / 512.0).abs() < 1e-12);
    }

    #[test]
    fn a_tree_over_another_region_numbers_its_leaves_from_that_region() {
        // A tree over counter blocks (the counter-tree family): leaves are the region's chunks.
        let mut l = Layout::new(64 * 64, 64);
        let ctrs = l.alloc(crate::decl::Role::Counters, "counters", 16 * 64);
        let t = Tree::new(&mut l, "t", (ctrs, 16 * 64), 64, 16, 4, "k").unwrap();
        assert_eq!((t.internal, t.levels), (4, 2));
        assert_eq!(t.chunk_of(ctrs), Some(4));
        assert_eq!(t.addr_of(19), ctrs + 15 * 64);
        assert_eq!(t.chunk_of(0), None, "program data is not under this tree");
        assert_eq!(t.chunk_of(ctrs + 16 * 64), None);
        assert_eq!(t.chunk_of(t.base), Some(0));
        for c in 0..t.internal + 16 {
            assert_eq!(t.chunk_of(t.addr_of(c)), Some(c));
        }
    }
}
