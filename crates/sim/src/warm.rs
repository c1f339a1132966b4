//! What functional warming (`Core::warm`) remembers of its last data access, so that the
//! next access to the same page or line is not looked up again.
//!
//! Exactness: the D-TLB and the L1D replace by least recent use (time stamps, `Tags`), FIFO
//! or at random. Touching again the entry touched last changes no order: it is already the
//! most recent of its set, and FIFO and random never touch. So an access to the page of the
//! last data translation is a D-TLB hit that changes nothing (the page map's translation of a
//! page never changes), and an access to the line of the last L1D access, still in the L1D,
//! is a hit that changes nothing but the access count. The memo is right only while nothing
//! else touches those structures: detailed execution (`Core::start_warming` forgets it) and a
//! page walk for an instruction fetch, which reads through the L1D (`Core::warm` forgets the
//! line). Evictions and invalidations are caught by checking the slot still holds the line.

use secmem_timing::tags::NO_SLOT;

pub(crate) struct Recent {
    page_shift: u32,
    line_bytes: u64,
    /// Virtual page number of the last data translation and its frame's address.
    vpage: u64,
    frame: u64,
    /// Physical address of the last L1D line accessed, and its slot if known.
    line: u64,
    pub slot: u32,
}

impl Recent {
    /// For `page`-byte pages and an L1D of `line_bytes`-byte lines.
    pub fn new(page: u64, line_bytes: u64) -> Recent {
        Recent { page_shift: page.trailing_zeros(), line_bytes, vpage: u64::MAX, frame: 0, line: u64::MAX, slot: NO_SLOT }
    }

    /// Something else touched the TLBs or the L1D.
    pub fn forget(&mut self) {
        self.vpage = u64::MAX;
        self.forget_line();
    }

    pub fn forget_line(&mut self) {
        (self.line, self.slot) = (u64::MAX, NO_SLOT);
    }

    /// The physical address of `va` if it is on the page translated last.
    #[inline]
    pub fn page(&self, va: u64) -> Option<u64> {
        (va >> self.page_shift == self.vpage).then(|| self.frame | (va & ((1 << self.page_shift) - 1)))
    }

    /// `va` was translated to `pa` (its TLB entry touched).
    #[inline]
    pub fn set_page(&mut self, va: u64, pa: u64) {
        self.vpage = va >> self.page_shift;
        self.frame = pa & !((1 << self.page_shift) - 1);
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
    fn the_memo_knows_only_the_last_page_and_line() {
        let mut r = Recent::new(4096, 64);
        assert_eq!(r.page(0x1234), None);
        r.set_page(0x7000_1234, 0x5_2234);
        assert_eq!(r.page(0x7000_1ff8), Some(0x5_2ff8));
        assert_eq!(r.page(0x7000_2000), None, "the next page");
        r.set_line(0x5_2234);
        assert!(r.same_line(0x5_2200) && r.same_line(0x5_223f) && !r.same_line(0x5_2240));
        r.forget();
        assert_eq!(r.page(0x7000_1ff8), None);
        assert!(!r.same_line(0x5_2234));
    }
}
