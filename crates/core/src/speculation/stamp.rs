//! Stamp speculation (seed 000 §4.4, Fig. 7c): "when overlapping the AES computation with
//! data bus accesses is not sufficient to hide the entire latency, the time stamp can be ...
//! speculated based on recent accesses". The guess for a line's stamp is the last stamp a read
//! found in the same page, advanced by the line distance when the page's stamps have been
//! rising one per line (written back in a sweep); a page with no history is not guessed.

/// Guesses of a line's encryption metadata word (a time stamp, a counter) before it arrives.
pub trait MetaPredictor: Send {
    fn name(&self) -> &'static str;
    /// A guess for the metadata of the line at `addr`, if the predictor has one.
    fn predict(&mut self, addr: u64) -> Option<u64>;
    /// The real metadata of the line at `addr` arrived (training).
    fn observe(&mut self, addr: u64, meta: u64);
}

/// Pages tracked by the stamp predictor.
const PREDICTOR_PAGES: usize = 4096;

/// Per page: the last (line index, stamp) read and whether stamps rose one per line.
#[derive(Clone, Copy, Default)]
struct PageHistory {
    page: u64,
    line: u64,
    ts: u32,
    sweep: bool,
}

/// The stamp predictor: pages hashed into a table, trained on the stamps reads find.
pub struct StampPredictor {
    line: u64,
    pages: Vec<PageHistory>,
}

impl StampPredictor {
    pub fn new(line: u64) -> StampPredictor {
        StampPredictor { line, pages: vec![PageHistory { page: u64::MAX, ..Default::default() }; PREDICTOR_PAGES] }
    }

    #[inline]
    fn split(&self, addr: u64) -> (u64, u64, usize) {
        let line = self.line;
        let page = addr / crate::mem::PAGE;
        // Hashed: arrays a power-of-two apart must not share entries.
        let i = (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % PREDICTOR_PAGES;
        (page, (addr % crate::mem::PAGE) / line, i)
    }

}

impl MetaPredictor for StampPredictor {
    fn name(&self) -> &'static str {
        "stamps"
    }

    /// A guess for the stamp of the line at `addr`, if its page was seen.
    #[inline]
    fn predict(&mut self, addr: u64) -> Option<u64> {
        let (page, idx, i) = self.split(addr);
        let h = &self.pages[i];
        if h.page != page {
            return None;
        }
        Some(if h.sweep { h.ts.wrapping_add((idx as i64 - h.line as i64) as u32) } else { h.ts } as u64)
    }

    #[inline]
    fn observe(&mut self, addr: u64, meta: u64) {
        let ts = meta as u32;
        let (page, idx, i) = self.split(addr);
        let h = &mut self.pages[i];
        if h.page == page {
            let dl = idx as i64 - h.line as i64;
            h.sweep = dl != 0 && ts.wrapping_sub(h.ts) as i32 as i64 == dl;
        } else {
            *h = PageHistory { page, line: idx, ts, sweep: false };
        }
        (h.line, h.ts) = (idx, ts);
    }
}

