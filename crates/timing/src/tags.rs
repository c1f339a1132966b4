//! Set-associative tag store with true LRU: the bookkeeping half of every cache.
//! Payload (data bytes, times) is kept by the owner in arrays indexed by slot.

pub const NO_SLOT: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct Tags {
    sets: u64,
    ways: usize,
    line_shift: u32,
    /// line address (addr >> line_shift) + 1 per slot; 0 = invalid.
    tag: Vec<u64>,
    stamp: Vec<u64>,
    clock: u64,
}

impl Tags {
    /// `size` and `line` in bytes; sets must come out a power of two.
    pub fn new(size: u64, ways: usize, line: u64) -> Result<Tags, String> {
        if !line.is_power_of_two() || line < 8 {
            return Err(format!("line size {} B must be a power of two ≥ 8", line));
        }
        if ways == 0 || size % (line * ways as u64) != 0 {
            return Err(format!("size {} B is not a multiple of {} ways × {} B lines", size, ways, line));
        }
        let sets = size / (line * ways as u64);
        if !sets.is_power_of_two() {
            return Err(format!("{} B / ({} ways × {} B) = {} sets, not a power of two", size, ways, line, sets));
        }
        let n = (sets as usize) * ways;
        Ok(Tags { sets, ways, line_shift: line.trailing_zeros(), tag: vec![0; n], stamp: vec![0; n], clock: 0 })
    }

    pub fn slots(&self) -> usize {
        self.tag.len()
    }

    /// Every valid slot, in slot order: one pass over the tags (a flush asks once a round,
    /// a round per tree level, over 16,384 slots mostly empty after the first).
    pub fn valid_slots(&self) -> Vec<u32> {
        self.tag.iter().enumerate().filter(|(_, &t)| t != 0).map(|(s, _)| s as u32).collect()
    }

    pub fn line_bytes(&self) -> u64 {
        1 << self.line_shift
    }

    #[inline]
    fn set_base(&self, line: u64) -> usize {
        ((line & (self.sets - 1)) as usize) * self.ways
    }

    /// Slot holding `addr`'s line, without touching LRU.
    #[inline]
    pub fn find(&self, addr: u64) -> Option<u32> {
        let line = addr >> self.line_shift;
        let base = self.set_base(line);
        let key = line + 1;
        // Over the set's slice: one bounds check for the set rather than one per way.
        self.tag[base..base + self.ways].iter().position(|&t| t == key).map(|w| (base + w) as u32)
    }

    #[inline]
    pub fn touch(&mut self, slot: u32) {
        self.clock += 1;
        self.stamp[slot as usize] = self.clock;
    }

    /// The slot to fill for `addr`: an invalid one, else the least recently used.
    #[inline]
    pub fn victim(&self, addr: u64) -> u32 {
        let base = self.set_base(addr >> self.line_shift);
        let mut best = base;
        for s in base..base + self.ways {
            if self.tag[s] == 0 {
                return s as u32;
            }
            if self.stamp[s] < self.stamp[best] {
                best = s;
            }
        }
        best as u32
    }

    /// Look `addr` up, touching it on a hit; on a miss install it in place of `victim(addr)`.
    /// One pass over the set: small fully associative buffers (TLBs, stamp buffers) mostly
    /// miss, and a lookup followed by a victim search walked every way twice. Returns the
    /// slot and whether it was a hit.
    #[inline]
    pub fn access(&mut self, addr: u64) -> (u32, bool) {
        let line = addr >> self.line_shift;
        let base = self.set_base(line);
        let key = line + 1;
        // Invalid slots have stamp 0 and valid ones ≥ 1, so the first least stamp is the
        // first invalid slot if any, else the least recently used: `victim`'s choice.
        let (mut best, mut least) = (base, u64::MAX);
        for s in base..base + self.ways {
            if self.tag[s] == key {
                self.touch(s as u32);
                return (s as u32, true);
            }
            if self.stamp[s] < least {
                (best, least) = (s, self.stamp[s]);
            }
        }
        self.install(best as u32, addr);
        (best as u32, false)
    }

    /// Whether `slot` (any number) holds `addr`'s line: one comparison where `find` searches
    /// the set.
    #[inline]
    pub fn holds(&self, slot: u32, addr: u64) -> bool {
        self.tag.get(slot as usize) == Some(&((addr >> self.line_shift) + 1))
    }

    /// Line address (byte address of the line) held in `slot`, if valid.
    #[inline]
    pub fn addr_of(&self, slot: u32) -> Option<u64> {
        match self.tag[slot as usize] {
            0 => None,
            k => Some((k - 1) << self.line_shift),
        }
    }

    /// When `slot` was last touched (a count of touches, 0 if empty): what orders a set's
    /// lines by recency.
    pub fn last_touch(&self, slot: u32) -> u64 {
        self.stamp[slot as usize]
    }

    #[inline]
    pub fn install(&mut self, slot: u32, addr: u64) {
        self.tag[slot as usize] = (addr >> self.line_shift) + 1;
        self.touch(slot);
    }

    #[inline]
    pub fn invalidate(&mut self, slot: u32) {
        self.tag[slot as usize] = 0;
        self.stamp[slot as usize] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_victim_is_least_recently_touched() {
        let mut t = Tags::new(4 * 64, 4, 64).unwrap(); // one set
        for i in 0..4u64 {
            let s = t.victim(i * 64);
            t.install(s, i * 64);
        }
        let s0 = t.find(0).unwrap();
        t.touch(s0);
        let v = t.victim(4 * 64);
        assert_eq!(t.addr_of(v), Some(64), "line 1 is now the LRU");
    }

    #[test]
    fn access_behaves_as_find_touch_or_victim_install() {
        // `access` agrees with `find` and `touch` or `victim` and `install`, on sets of any width.
        for ways in [3usize, 8, 13, 32] {
            let slots = 2 * ways as u64;
            let (mut a, mut b) = (Tags::new(slots * 8, ways, 8).unwrap(), Tags::new(slots * 8, ways, 8).unwrap());
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for i in 0..100_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let addr = (x % (3 * slots)) * 8;
                if x % 97 == 0 {
                    // Invalidations leave holes that must be refilled first.
                    let s = (x % slots) as u32;
                    a.invalidate(s);
                    b.invalidate(s);
                    continue;
                }
                let found = a.find(addr);
                assert_eq!(found, (0..slots as u32).find(|&s| a.addr_of(s) == Some(addr)), "find {} ({} ways)", i, ways);
                let want = match found {
                    Some(s) => {
                        a.touch(s);
                        (s, true)
                    }
                    None => {
                        let v = a.victim(addr);
                        a.install(v, addr);
                        (v, false)
                    }
                };
                let got = b.access(addr);
                assert_eq!(got, want, "access {} ({} ways)", i, ways);
            }
        }
    }

    #[test]
    fn bad_geometry_is_refused_with_reason() {
        assert!(Tags::new(1000, 4, 64).unwrap_err().contains("multiple"));
        assert!(Tags::new(3 * 4 * 64, 4, 64).unwrap_err().contains("power of two"));
        assert!(Tags::new(1 << 20, 4, 48).is_err());
    }
}
