//! Where the tags live (001 §6, Fig. 4): in untrusted memory next to the data segment, one
//! tag per code block, in program order; the tag pointer register TP holds the address of the
//! first tag.
//!
//! §6 writes the update as TP := TP + ⌊PC / (n_I·n_T)⌋ (n_I instructions and n_T tags per
//! line), i.e. the tag line follows from the PC's block number. Here the same mapping is
//! explicit and covers several executable segments: a segment's blocks have consecutive
//! tags starting at its `first_tag`, and block A's tag is at
//!
//!   TP + (first_tag + (A − segment start) / B) · slot,
//!
//! slot being the bytes a tag occupies (`Width::slot`), so a B-byte memory block holds
//! n_T = B / slot tags and the tag line of block A is that address rounded down to B.

use crate::error::{Error, Result};

/// One signed code segment: `blocks` blocks from `vaddr` (block-aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub blocks: u64,
    /// Index of its first block's tag in the table.
    pub first_tag: u64,
}

impl Segment {
    fn end(&self, block: u64) -> u64 {
        self.vaddr + self.blocks * block
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagLayout {
    block: u64,
    slot: u64,
    tp: u64,
    segments: Vec<Segment>,
}

impl TagLayout {
    /// Lay out the tags of code segments `(vaddr, blocks)` at `tp`, in address order.
    pub fn new(block: u32, slot: usize, tp: u64, code: &[(u64, u64)]) -> Result<TagLayout> {
        let mut code = code.to_vec();
        code.sort_unstable();
        let mut next = 0u64;
        let segments = code
            .into_iter()
            .map(|(vaddr, blocks)| {
                let s = Segment { vaddr, blocks, first_tag: next };
                next += blocks;
                s
            })
            .collect();
        TagLayout::from_parts(block, slot, tp, segments)
    }

    /// A layout read back (from a tag file): checked, not trusted.
    pub fn from_parts(block: u32, slot: usize, tp: u64, segments: Vec<Segment>) -> Result<TagLayout> {
        let (b, slot) = (block as u64, slot as u64);
        let bad = |m: String| Err(Error::Param(m));
        if segments.is_empty() {
            return bad("no code segment to lay tags out for".into());
        }
        if tp % b != 0 {
            return bad(format!("TP {tp:#x} is not aligned to the {b}-B block (tag lines must be blocks)"));
        }
        let mut next = 0u64;
        let mut prev_end = 0u64;
        for s in &segments {
            let end = s.blocks.checked_mul(b).and_then(|n| s.vaddr.checked_add(n));
            match end {
                _ if s.vaddr % b != 0 => return bad(format!("segment {:#x} is not block-aligned", s.vaddr)),
                _ if s.blocks == 0 => return bad(format!("segment {:#x} has no blocks", s.vaddr)),
                None => return bad(format!("segment {:#x} runs past the end of the address space", s.vaddr)),
                _ if s.vaddr < prev_end => return bad(format!("segment {:#x} overlaps the one before it", s.vaddr)),
                _ if s.first_tag != next => return bad(format!("segment {:#x}: tags not in program order", s.vaddr)),
                Some(e) => prev_end = e,
            }
            next += s.blocks;
        }
        let table_end = next.checked_mul(slot).and_then(|n| tp.checked_add(n));
        let Some(table_end) = table_end else {
            return bad(format!("the tag table at TP {tp:#x} runs past the end of the address space"));
        };
        if let Some(s) = segments.iter().find(|s| tp < s.end(b) && s.vaddr < table_end) {
            return bad(format!("the tag table [{tp:#x}, {table_end:#x}) overlaps code at {:#x}", s.vaddr));
        }
        Ok(TagLayout { block: b, slot, tp, segments })
    }

    pub fn tp(&self) -> u64 {
        self.tp
    }

    /// The same tags looked for at another TP (the loader sets TP; §6).
    pub fn with_tp(&self, tp: u64) -> TagLayout {
        TagLayout { tp, ..self.clone() }
    }

    pub fn block(&self) -> u32 {
        self.block as u32
    }

    pub fn slot(&self) -> usize {
        self.slot as usize
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Tags in the table (= signed blocks).
    pub fn tags(&self) -> u64 {
        self.segments.iter().map(|s| s.blocks).sum()
    }

    /// Bytes of the tag table at TP.
    pub fn table_bytes(&self) -> u64 {
        self.tags() * self.slot
    }

    /// n_T: tags per memory block.
    pub fn tags_per_block(&self) -> u32 {
        (self.block / self.slot) as u32
    }

    /// The tag index of the block holding `addr`, if it is signed code.
    #[inline]
    pub fn tag_index(&self, addr: u64) -> Option<u64> {
        // Few segments (usually one): the last one starting at or below addr.
        let i = self.segments.partition_point(|s| s.vaddr <= addr).checked_sub(1)?;
        let s = &self.segments[i];
        let k = (addr - s.vaddr) / self.block;
        (k < s.blocks).then_some(s.first_tag + k)
    }

    /// Where the tag of the block holding `addr` is in memory.
    #[inline]
    pub fn tag_addr(&self, addr: u64) -> Option<u64> {
        self.tag_index(addr).map(|i| self.tp + i * self.slot)
    }

    /// The memory block (tag line) holding that tag: what the authentication cache fetches.
    #[inline]
    pub fn tag_line(&self, addr: u64) -> Option<u64> {
        self.tag_addr(addr).map(|a| a - a % self.block)
    }

    /// Every signed block's address, in program (= tag) order.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.segments.iter().flat_map(move |s| (0..s.blocks).map(move |k| s.vaddr + k * self.block))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fig4_mapping_over_two_segments() {
        // .text at 0x400000 (4 blocks of 64 B) and .init at 0x300000 (2 blocks); tags at
        // 0x600000, 16-B slots: n_T = 4.
        let l = TagLayout::new(64, 16, 0x60_0000, &[(0x40_0000, 4), (0x30_0000, 2)]).unwrap();
        assert_eq!(l.tags_per_block(), 4);
        assert_eq!(l.tag_addr(0x30_0000), Some(0x60_0000)); // lowest address first
        assert_eq!(l.tag_addr(0x30_007f), Some(0x60_0010));
        assert_eq!(l.tag_addr(0x40_0000), Some(0x60_0020));
        assert_eq!(l.tag_addr(0x40_00c4), Some(0x60_0050));
        assert_eq!(l.tag_line(0x40_00c4), Some(0x60_0040)); // the second tag line
        assert_eq!(l.tag_addr(0x40_0100), None); // past .text
        assert_eq!(l.tag_addr(0x2f_ffff), None);
        assert_eq!(l.table_bytes(), 96);
        let blocks: Vec<u64> = l.blocks().collect();
        assert_eq!(blocks, [0x30_0000, 0x30_0040, 0x40_0000, 0x40_0040, 0x40_0080, 0x40_00c0]);
        // Every block's tag has its own slot.
        let mut addrs: Vec<u64> = l.blocks().map(|a| l.tag_addr(a).unwrap()).collect();
        addrs.dedup();
        assert_eq!(addrs.len(), 6);
        assert_eq!(l.with_tp(0x70_0000).tag_addr(0x30_0000), Some(0x70_0000));
    }

    #[test]
    fn inconsistent_layouts_are_refused() {
        assert!(TagLayout::new(64, 16, 0x60_0008, &[(0x40_0000, 4)]).is_err()); // TP unaligned
        assert!(TagLayout::new(64, 16, 0x40_0040, &[(0x40_0000, 4)]).is_err()); // table over code
        assert!(TagLayout::new(64, 16, 0x60_0000, &[(0x40_0010, 4)]).is_err()); // unaligned code
        assert!(TagLayout::new(64, 16, 0x60_0000, &[(0x40_0000, 4), (0x40_0040, 1)]).is_err()); // overlap
        assert!(TagLayout::new(64, 16, 0x60_0000, &[]).is_err());
        assert!(TagLayout::new(64, 16, u64::MAX - 63, &[(0x40_0000, 4)]).is_err());
        let seg = |v, b, f| Segment { vaddr: v, blocks: b, first_tag: f };
        assert!(TagLayout::from_parts(64, 16, 0x60_0000, vec![seg(0x40_0000, 4, 1)]).is_err());
        assert!(TagLayout::from_parts(64, 16, 0x60_0000, vec![seg(0x40_0000, 4, 0), seg(0x50_0000, 1, 4)]).is_ok());
    }
}
