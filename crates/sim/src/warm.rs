//! What functional warming (`Core::warm`) remembers of its last data access, so that the
//! next access to the same line is not looked up again (the data TLB remembers its own last
//! page, `mmu::Tlb`).
//!
//! Exactness: the L1D replaces by least recent use (time stamps, `Tags`), FIFO or at random.
//! Touching again the line touched last changes no order: it is already the most recent of
//! its set, and FIFO and random never touch. So an access to the line of the last L1D access,
//! still in the L1D, is a hit that changes nothing but the access count. The memo is right
//! only while nothing else touches the L1D: detailed execution (`Core::start_warming` forgets
//! it) and page walks, which read through the L1D (`Core::warm` forgets the line after a TLB
//! miss). Evictions and invalidations are caught by checking the slot still holds the line.

use secmem_timing::tags::NO_SLOT;

pub(crate) struct Recent {
    line_bytes: u64,
    /// Physical address of the last L1D line accessed, and its slot if known.
    line: u64,
    pub slot: u32,
}

impl Recent {
    /// For an L1D of `line_bytes`-byte lines.
    pub fn new(line_bytes: u64) -> Recent {
        Recent { line_bytes, line: u64::MAX, slot: NO_SLOT }
    }

    /// Something else touched the L1D.
    pub fn forget_line(&mut self) {
        (self.line, self.slot) = (u64::MAX, NO_SLOT);
    }

    /// Whether `pa` is in the line accessed last.
    #[inline]
    pub fn same_line(&self, pa: u64) -> bool {
        pa & !(self.line_bytes - 1) == self.line
    }

    /// The L1D was accessed for `pa` (its line touched or installed); its slot is found when
    /// it is needed.
    #[inline]
    pub fn set_line(&mut self, pa: u64) {
        (self.line, self.slot) = (pa & !(self.line_bytes - 1), NO_SLOT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_knows_only_the_last_line() {
        let mut r = Recent::new(64);
        assert!(!r.same_line(0x5_2234));
        r.set_line(0x5_2234);
        assert!(r.same_line(0x5_2200) && r.same_line(0x5_223f) && !r.same_line(0x5_2240));
        r.forget_line();
        assert!(!r.same_line(0x5_2234));
    }
}
