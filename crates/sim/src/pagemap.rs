//! Virtual → physical pages, first touch first served: the program's addresses (48-bit
//! virtual in real traces) are placed in the protected physical memory as an OS would.
//! The system's own frames (page tables) are taken from the top down, so that the
//! program's pages stay contiguous however many tables a walk layout needs: ChampSim's
//! layout takes a table per page, and interleaved with the data they would leave the
//! program's lines half the last level's sets.
//!
//! Several cores (`multi`) each have their own map but draw frames from one pool
//! (`PageMap::sharing`), first touch first served across them as ChampSim's
//! `VirtualMemory` does: copies of one program get distinct frames, and the order frames
//! are given out follows the deterministic order the cores run in.

use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::rc::Rc;

/// Physical frames not given out yet: the program's from the bottom, the system's from the top.
pub struct Frames {
    next: u64,
    /// Frames from here up are the system's.
    top: u64,
    frames: u64,
    /// `pages.order = "random"`: the n-th frame given out is `order(n)`, not n.
    order: Option<Order>,
    /// Maps drawing from the pool (the cores of a mix).
    maps: u8,
    /// Which map each frame went to, recorded once a second map shares the pool (a frame
    /// without an entry went to map 0 before that): a line leaving the shared last level
    /// can then only be in its owner's private levels. Indexed by frame (allocated zeroed,
    /// so the OS maps only the pages frames were given from): asked on every eviction of
    /// the shared level, where a hash map's probe was a host cache miss.
    owners: Vec<u8>,
}

impl Frames {
    #[inline]
    fn frame(&self, n: u64) -> u64 {
        match &self.order {
            None => n,
            Some(o) => o.frame(n, self.frames),
        }
    }
}

/// A permutation of the frame numbers drawn from the seed: a four-round Feistel network on
/// an even number of bits, walked until it lands inside the pool (cycle walking keeps it a
/// permutation of [0, frames)). Frames scattered so, one program's pages (and copies of it
/// on several cores) fall on the last level's sets as an OS's free list would place them,
/// not all at the same offsets.
struct Order {
    half: u32,
    keys: [u64; 4],
}

impl Order {
    fn new(frames: u64, seed: u64) -> Order {
        let bits = (64 - frames.max(4).saturating_sub(1).leading_zeros()).max(2);
        let mut k = seed ^ 0x5EC0_FA9E_5EC0_FA9E;
        let keys = [(); 4].map(|_| {
            k = mix(k);
            k
        });
        Order { half: bits.div_ceil(2), keys }
    }

    fn frame(&self, n: u64, frames: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let mut y = n;
        loop {
            let (mut l, mut r) = (y >> self.half, y & mask);
            for key in &self.keys {
                (l, r) = (r, l ^ (mix(r ^ key) & mask));
            }
            y = l << self.half | r;
            if y < frames {
                return y;
            }
        }
    }
}

/// splitmix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `pages.order`'s choices.
pub const ORDERS: &[&str] = &["first_touch", "random"];

/// `pages.image`'s choices: how a trace's memory image (its external records before the first
/// instruction, the loader's) enters memory.
pub const IMAGES: &[&str] = &["timed", "lazy"];

/// A 4 KiB page of a loader image held until the run first uses the page (`pages.image=lazy`;
/// `PageMap::translate` takes its reserved frame into use): its bytes (zero where the image
/// wrote nothing, as never-written memory reads) and which of its lines (of `line` bytes, at
/// most 128 a page) the image wrote.
pub struct ImagePage {
    pub bytes: Box<[u8; 4096]>,
    pub lines: u128,
}

pub struct PageMap {
    map: FxHashMap<u64, u64>,
    /// Touched only when a page is first seen (shared by the cores of a mix).
    pool: Rc<RefCell<Frames>>,
    shift: u32,
    /// Recent translations, direct mapped by virtual page: a program streams through a few
    /// arrays at once, and each lookup in `map` is a host cache miss.
    recent: Box<[(u64, u64); RECENT]>,
    /// This map's number among those sharing the pool (0: the first).
    id: u8,
    /// Virtual 4 KiB pages (by number) the program touched before the trace
    /// (`Instr::set_pages`) that have no frame yet, and the physical pages (by address)
    /// that got one since the last `drain_predated`.
    predating: FxHashSet<u64>,
    predated: Vec<u64>,
    /// A lazily set-up loader image (`pages.image=lazy`): its 4 KiB pages without a frame yet,
    /// by virtual page number, and those that got one since the last `drain_image`, by
    /// physical address.
    image: FxHashMap<u64, ImagePage>,
    image_ready: Vec<(u64, ImagePage)>,
    /// Frames held for pages of a lazy image not in use yet (`reserve`), by virtual page.
    reserved: FxHashMap<u64, u64>,
}

const RECENT: usize = 256;

impl PageMap {
    pub fn new(phys_bytes: u64, page: u64) -> PageMap {
        let shift = page.trailing_zeros();
        let pool = Frames { next: 0, top: phys_bytes >> shift, frames: phys_bytes >> shift, order: None, maps: 1, owners: Vec::new() };
        PageMap {
            map: FxHashMap::default(),
            pool: Rc::new(RefCell::new(pool)),
            shift,
            recent: Box::new([(u64::MAX, 0); RECENT]),
            id: 0,
            predating: FxHashSet::default(),
            predated: Vec::new(),
            image: FxHashMap::default(),
            image_ready: Vec::new(),
            reserved: FxHashMap::default(),
        }
    }

    /// Frames in the order `pages.order` says (random: drawn from `seed`); before any is given out.
    pub fn set_order(&mut self, p: &secmem_core::Params, seed: u64) -> Result<(), secmem_core::ConfigError> {
        if p.choice("pages.order", ORDERS)? == "random" {
            let mut pool = self.pool.borrow_mut();
            pool.order = Some(Order::new(pool.frames, seed));
        }
        Ok(())
    }

    /// A map of its own (another core's) drawing frames from the same pool as `self`; it is
    /// the pool's next map (`owner` names it by that number).
    pub fn sharing(&self) -> PageMap {
        let id = {
            let mut pool = self.pool.borrow_mut();
            let id = pool.maps;
            pool.maps = pool.maps.checked_add(1).expect("at most 255 maps share a pool");
            if pool.owners.is_empty() {
                pool.owners = vec![0; pool.frames as usize];
            }
            id
        };
        PageMap { map: FxHashMap::default(), pool: Rc::clone(&self.pool), shift: self.shift, recent: Box::new([(u64::MAX, 0); RECENT]), id, predating: FxHashSet::default(), predated: Vec::new(), image: FxHashMap::default(), image_ready: Vec::new(), reserved: FxHashMap::default() }
    }

    /// The number of the map (core) whose program or page tables physical address `pa` was
    /// given to (0 for a frame nobody took).
    #[inline]
    pub fn owner(&self, pa: u64) -> usize {
        self.pool.borrow().owners.get((pa >> self.shift) as usize).map_or(0, |&o| o as usize)
    }

    /// Physical address of `va`; `None` when physical memory is exhausted.
    #[inline]
    pub fn translate(&mut self, va: u64) -> Option<u64> {
        let vp = va >> self.shift;
        let off = va & ((1 << self.shift) - 1);
        let r = &mut self.recent[vp as usize % RECENT];
        if r.0 == vp {
            return Some(r.1 << self.shift | off);
        }
        let pf = match self.map.get(&vp) {
            Some(&f) => f,
            None => {
                let f = match (!self.reserved.is_empty()).then(|| self.reserved.remove(&vp)).flatten() {
                    Some(f) => f,
                    None => self.new_frame()?,
                };
                self.map.insert(vp, f);
                if !self.predating.is_empty() || !self.image.is_empty() {
                    self.got_frame(vp, f);
                }
                f
            }
        };
        self.recent[vp as usize % RECENT] = (vp, pf);
        Some(pf << self.shift | off)
    }

    /// The next frame of the pool for this map's program; `None` when memory is exhausted.
    fn new_frame(&mut self) -> Option<u64> {
        let mut pool = self.pool.borrow_mut();
        if pool.next >= pool.top {
            return None;
        }
        let f = pool.frame(pool.next);
        pool.next += 1;
        if pool.maps > 1 {
            pool.owners[f as usize] = self.id;
        }
        Some(f)
    }

    /// A frame for the page of `va`, held for it but not in use (`pages.image=lazy`): a lazy
    /// image's pages take their frames in the order the image gives them, as a timed image's
    /// do, so the physical layout (which cache sets the program's lines fall in) is the same;
    /// the page is in use, and its image set up, once the run first translates it. `None`
    /// when memory is exhausted.
    pub fn reserve(&mut self, va: u64) -> Option<()> {
        let vp = va >> self.shift;
        if !self.map.contains_key(&vp) && !self.reserved.contains_key(&vp) {
            let f = self.new_frame()?;
            self.reserved.insert(vp, f);
        }
        Some(())
    }

    /// The 4 KiB pages of virtual page `vp`, just given frame `f`, that predate the trace or
    /// hold a lazily set-up image.
    #[cold]
    fn got_frame(&mut self, vp: u64, f: u64) {
        let sub = self.shift.saturating_sub(12);
        for k in 0..1u64 << sub {
            let pa = (f << self.shift) + (k << 12);
            if self.predating.remove(&((vp << sub) + k)) {
                self.predated.push(pa);
            }
            if let Some(page) = self.image.remove(&((vp << sub) + k)) {
                self.image_ready.push((pa, page));
            }
        }
    }

    /// Bytes of a loader image at `va` (within one 4 KiB page, not empty; lines of `line`
    /// bytes) to be set up lazily (`pages.image=lazy`): held until the page is first in use
    /// (`translate`). A page in use already gives its physical address instead: the caller
    /// sets the bytes up now.
    pub fn add_image(&mut self, va: u64, bytes: &[u8], line: u64) -> Option<u64> {
        if let Some(&f) = self.map.get(&(va >> self.shift)) {
            return Some(f << self.shift | va & ((1 << self.shift) - 1));
        }
        let page = self.image.entry(va >> 12).or_insert_with(|| ImagePage { bytes: Box::new([0; 4096]), lines: 0 });
        let off = (va & 4095) as usize;
        page.bytes[off..off + bytes.len()].copy_from_slice(bytes);
        let (first, last) = (off as u64 / line, (off + bytes.len() - 1) as u64 / line);
        page.lines |= (u128::MAX >> (127 - last)) & (u128::MAX << first);
        None
    }

    /// The image pages (`add_image`) that came into use since the last call, by physical address.
    pub fn drain_image(&mut self) -> std::vec::Drain<'_, (u64, ImagePage)> {
        self.image_ready.drain(..)
    }

    /// The 4 KiB page at `va` was touched before the trace (`Instr::set_pages`): when it
    /// gets its frame, [`PageMap::drain_predated`] names that frame.
    pub fn add_predating(&mut self, va: u64) {
        let vp = va >> self.shift;
        match self.map.get(&vp) {
            Some(&f) => self.predated.push((f << self.shift) + (va & ((1 << self.shift) - 1) & !4095)),
            None => {
                self.predating.insert(va >> 12);
            }
        }
    }

    /// Whether pages that predate the trace, or hold a lazily set-up image, got frames since
    /// the last drain.
    #[inline(always)]
    pub fn has_predated(&self) -> bool {
        !self.predated.is_empty() || !self.image_ready.is_empty()
    }

    /// The physical pages (by address) that predate the trace and got frames since the last
    /// call.
    pub fn drain_predated(&mut self) -> std::vec::Drain<'_, u64> {
        self.predated.drain(..)
    }

    /// A frame for the system's own use (page tables), from the top of the same pool;
    /// `None` when physical memory is exhausted.
    pub fn alloc_frame(&mut self) -> Option<u64> {
        let mut pool = self.pool.borrow_mut();
        if pool.next >= pool.top {
            return None;
        }
        pool.top -= 1;
        let f = pool.frame(pool.top);
        if pool.maps > 1 {
            pool.owners[f as usize] = self.id;
        }
        Some(f << self.shift)
    }

    /// Frames given out from the pool, the program's and the system's (every core's).
    pub fn pages(&self) -> u64 {
        let pool = self.pool.borrow();
        pool.next + (pool.frames - pool.top)
    }

    /// Pages of this map's own program.
    pub fn own_pages(&self) -> u64 {
        self.map.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_get_frames_in_first_touch_order_and_keep_them() {
        let mut pm = PageMap::new(4 * 4096, 4096);
        // Pages 256 apart share a recent-translation entry: each must still keep its frame.
        let vas = [0x10_0000u64, 0x10_0000 + 256 * 4096, 0x7fff_0000_0000, 0x10_0000 + 512 * 4096];
        for (f, &va) in vas.iter().enumerate() {
            assert_eq!(pm.translate(va + 12), Some(f as u64 * 4096 + 12));
        }
        for _ in 0..3 {
            for (f, &va) in vas.iter().enumerate().rev() {
                assert_eq!(pm.translate(va + 4095), Some(f as u64 * 4096 + 4095));
            }
        }
        assert_eq!(pm.pages(), 4);
        assert_eq!(pm.translate(0x30_1000), None, "physical memory is exhausted");
        assert_eq!(pm.alloc_frame(), None);
    }

    #[test]
    fn system_frames_come_from_the_top_and_leave_the_programs_contiguous() {
        let mut pm = PageMap::new(8 * 4096, 4096);
        assert_eq!(pm.translate(0x1000), Some(0));
        assert_eq!(pm.alloc_frame(), Some(7 * 4096));
        assert_eq!(pm.translate(0x9000), Some(4096));
        assert_eq!(pm.alloc_frame(), Some(6 * 4096));
        assert_eq!(pm.pages(), 4);
        for k in 2..6 {
            assert_eq!(pm.translate(0x100_0000 + k * 4096), Some(k * 4096));
        }
        assert_eq!(pm.alloc_frame(), None);
        assert_eq!(pm.translate(0x200_0000), None);
    }

    #[test]
    fn a_random_order_is_a_permutation_of_the_frames_drawn_from_the_seed() {
        for frames in [5u64, 64, 1000] {
            let o = Order::new(frames, 7);
            let mut seen: Vec<u64> = (0..frames).map(|n| o.frame(n, frames)).collect();
            let first: Vec<u64> = seen.iter().take(4).copied().collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..frames).collect::<Vec<_>>(), "{} frames", frames);
            assert_ne!(first, [0, 1, 2, 3], "scattered");
            let other: Vec<u64> = (0..4).map(|n| Order::new(frames, 8).frame(n, frames)).collect();
            assert_ne!(first, other, "another seed, another order");
        }
    }

    #[test]
    fn maps_sharing_a_pool_give_the_same_virtual_page_distinct_frames() {
        let mut a = PageMap::new(4 * 4096, 4096);
        let mut b = a.sharing();
        assert_eq!(a.translate(0x1000), Some(0));
        assert_eq!(b.translate(0x1008), Some(4096 + 8), "another program's page 1 is another frame");
        assert_eq!(b.alloc_frame(), Some(3 * 4096));
        assert_eq!(a.translate(0x1010), Some(16), "each keeps its own");
        assert_eq!(a.translate(0x5000), Some(2 * 4096));
        assert_eq!((a.pages(), b.pages(), a.own_pages(), b.own_pages()), (4, 4, 2, 1));
        let owners: Vec<usize> = (0..4).map(|f| a.owner(f * 4096 + 100)).collect();
        assert_eq!(owners, [0, 1, 0, 1], "each frame names the map it went to, page tables too");
        assert_eq!(b.owner(4096), 1, "every map sees the same owners");
        assert_eq!(b.translate(0x9000), None, "the pool is exhausted for both");
    }
}
