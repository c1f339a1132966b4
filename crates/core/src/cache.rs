//! The trusted cache (the L2): tags plus the plaintext bytes of every line.
//!
//! Data lines and metadata lines (tree chunks) share it, so they compete for space exactly as
//! in seeds 000/003. Lines here are trusted; only what leaves it goes through the schemes.

use secmem_timing::{Cycle, Tags};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    Data,
    Meta,
}

pub struct TrustedCache {
    pub tags: Tags,
    line: usize,
    data: Vec<u8>,
    dirty: Vec<bool>,
    kind: Vec<LineKind>,
    /// When the line's bytes are usable (a fill still in flight makes later hits wait).
    ready: Vec<Cycle>,
    /// When the check of the fetch that brought the line in completes.
    verified: Vec<Cycle>,
    /// Whether code authentication checked the line's bytes (001: a line brought in by a
    /// load is checked at its first fetch).
    authenticated: Vec<bool>,
}

impl TrustedCache {
    pub fn new(size: u64, ways: usize, line: u64) -> Result<TrustedCache, String> {
        let tags = Tags::new(size, ways, line)?;
        let n = tags.slots();
        Ok(TrustedCache {
            tags,
            line: line as usize,
            data: vec![0; n * line as usize],
            dirty: vec![false; n],
            kind: vec![LineKind::Data; n],
            ready: vec![0; n],
            verified: vec![0; n],
            authenticated: vec![false; n],
        })
    }

    pub fn line(&self) -> usize {
        self.line
    }

    #[inline]
    pub fn bytes(&self, slot: u32) -> &[u8] {
        let s = slot as usize * self.line;
        &self.data[s..s + self.line]
    }

    #[inline]
    pub fn bytes_mut(&mut self, slot: u32) -> &mut [u8] {
        let s = slot as usize * self.line;
        &mut self.data[s..s + self.line]
    }

    #[inline]
    pub fn is_dirty(&self, slot: u32) -> bool {
        self.dirty[slot as usize]
    }

    #[inline]
    pub fn set_dirty(&mut self, slot: u32) {
        self.dirty[slot as usize] = true;
    }

    /// The line now matches memory (its scheme wrote it out while keeping it).
    #[inline]
    pub fn set_clean(&mut self, slot: u32) {
        self.dirty[slot as usize] = false;
    }

    #[inline]
    pub fn kind(&self, slot: u32) -> LineKind {
        self.kind[slot as usize]
    }

    #[inline]
    pub fn ready(&self, slot: u32) -> Cycle {
        self.ready[slot as usize]
    }

    #[inline]
    pub fn verified(&self, slot: u32) -> Cycle {
        self.verified[slot as usize]
    }

    #[inline]
    pub fn set_verified(&mut self, slot: u32, t: Cycle) {
        self.verified[slot as usize] = t;
    }

    #[inline]
    pub fn authenticated(&self, slot: u32) -> bool {
        self.authenticated[slot as usize]
    }

    #[inline]
    pub fn set_authenticated(&mut self, slot: u32) {
        self.authenticated[slot as usize] = true;
    }

    #[inline]
    pub fn victim(&self, addr: u64) -> u32 {
        self.tags.victim(addr)
    }

    /// Fill `slot` (previous content already taken care of by the caller).
    #[inline]
    pub fn fill(&mut self, slot: u32, addr: u64, bytes: &[u8], kind: LineKind, dirty: bool, ready: Cycle) {
        self.tags.install(slot, addr);
        self.bytes_mut(slot).copy_from_slice(bytes);
        let i = slot as usize;
        self.dirty[i] = dirty;
        self.kind[i] = kind;
        self.ready[i] = ready;
        self.verified[i] = ready;
        self.authenticated[i] = false;
    }

    pub fn invalidate(&mut self, slot: u32) {
        self.tags.invalidate(slot);
        self.dirty[slot as usize] = false;
    }

    /// Every valid slot.
    pub fn valid_slots(&self) -> Vec<u32> {
        self.tags.valid_slots()
    }

    /// Every valid line in recency order (least recent first): its address, whether it is
    /// metadata, whether it is dirty. What two ways of filling the cache are compared by
    /// (a checkpoint's prewarm installed as state against the same lines read through checks).
    pub fn lines_by_recency(&self) -> Vec<(u64, bool, bool)> {
        let mut v: Vec<_> = self
            .valid_slots()
            .into_iter()
            .map(|s| (self.tags.last_touch(s), self.tags.addr_of(s).unwrap_or(0), self.kind(s) == LineKind::Meta, self.is_dirty(s)))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, a, m, d)| (a, m, d)).collect()
    }
}
