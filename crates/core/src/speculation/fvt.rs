//! The Frequent Value Table (seed 004 §3.2, Fig. 2): the top N 64-bit values the program
//! loads and stores, "managed with an LRU policy" (N = 8, 16 or 32), tracked dynamically as
//! in 004's reference [34] (Yang & Gupta's frequent value finder), also during fast-forward
//! (004 §5: "during fast-forwarding, L1 cache, L2 cache, and frequent value tracking are
//! simulated").
//!
//! Tracking: the N table entries and N candidates, each with a use count. A value in the table
//! is counted and made most recently used. A value that is not is counted among the candidates
//! (a new one replaces the least recently used candidate); once a candidate has been used more
//! often than the table's least recently used entry, the two change places. Counts halve every
//! `HALVING` observations, so the table follows working-set changes (004 §3.1: the values
//! "in-between working set changes").

/// Observations between two halvings of every count.
const HALVING: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    value: u64,
    count: u32,
    /// Last use (a logical clock): the smallest is least recently used.
    used: u64,
}

pub struct Fvt {
    table: Vec<Entry>,
    candidates: Vec<Entry>,
    clock: u64,
}

impl Fvt {
    /// A table of `n` values (1 to 64), empty.
    pub fn new(n: usize) -> Fvt {
        assert!((1..=64).contains(&n), "FVT size {} outside 1..=64", n);
        Fvt { table: Vec::with_capacity(n), candidates: Vec::with_capacity(n), clock: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// The values in the table now (in no particular order).
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.table.iter().map(|e| e.value)
    }

    /// Whether `v` is a frequent value now (the CAM's question).
    #[inline]
    pub fn contains(&self, v: u64) -> bool {
        self.table.iter().any(|e| e.value == v)
    }

    /// Bitmap of the 64-bit chunks of `line` that are in the table (bit i: chunk i).
    #[inline]
    pub fn frequent_chunks(&self, line: &[u8]) -> u64 {
        let mut bits = 0u64;
        for (i, c) in line.chunks_exact(8).enumerate() {
            if self.contains(u64::from_le_bytes(c.try_into().unwrap())) {
                bits |= 1 << i;
            }
        }
        bits
    }

    /// The program loaded or stored the 64-bit value `v`.
    #[inline]
    pub fn observe(&mut self, v: u64) {
        self.clock += 1;
        let now = self.clock;
        if now % HALVING == 0 {
            for e in self.table.iter_mut().chain(self.candidates.iter_mut()) {
                e.count /= 2;
            }
        }
        if let Some(e) = self.table.iter_mut().find(|e| e.value == v) {
            e.count = e.count.saturating_add(1);
            e.used = now;
            return;
        }
        let n = self.table.capacity();
        if self.table.len() < n {
            self.table.push(Entry { value: v, count: 1, used: now });
            return;
        }
        let ci = match self.candidates.iter().position(|e| e.value == v) {
            Some(i) => {
                let e = &mut self.candidates[i];
                e.count = e.count.saturating_add(1);
                e.used = now;
                i
            }
            None => {
                let e = Entry { value: v, count: 1, used: now };
                if self.candidates.len() < n {
                    self.candidates.push(e);
                    self.candidates.len() - 1
                } else {
                    let i = lru(&self.candidates);
                    self.candidates[i] = e;
                    i
                }
            }
        };
        let ti = lru(&self.table);
        if self.candidates[ci].count > self.table[ti].count {
            std::mem::swap(&mut self.candidates[ci], &mut self.table[ti]);
        }
    }

    /// Observe every aligned 64-bit word of `bytes` (a whole number of words).
    pub fn observe_words(&mut self, bytes: &[u8]) {
        for c in bytes.chunks_exact(8) {
            self.observe(u64::from_le_bytes(c.try_into().unwrap()));
        }
    }
}

/// Index of the least recently used entry.
fn lru(v: &[Entry]) -> usize {
    let mut best = 0;
    for (i, e) in v.iter().enumerate() {
        if e.used < v[best].used {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_then_keeps_the_most_used_values() {
        let mut f = Fvt::new(4);
        for v in [1, 2, 3, 4] {
            f.observe(v);
        }
        assert_eq!(f.values().count(), 4);
        // 0 and 7 are used often, among a stream of one-off values.
        for i in 0..1000u64 {
            f.observe(0);
            f.observe(1000 + i);
            if i % 2 == 0 {
                f.observe(7);
            }
        }
        assert!(f.contains(0) && f.contains(7), "{:?}", f.values().collect::<Vec<_>>());
        assert_eq!(f.values().count(), 4);
        // One-off values never push a frequent one out.
        assert!(!f.contains(1500));
    }

    #[test]
    fn a_new_frequent_value_replaces_the_least_recently_used_entry() {
        let mut f = Fvt::new(2);
        for _ in 0..3 {
            f.observe(10);
            f.observe(20);
        }
        // 10 used last: 20 is the LRU entry; 30 overtakes it after 4 uses (count 3 → 4).
        f.observe(10);
        for k in 0..4 {
            assert!(!f.contains(30), "promoted after {} uses", k);
            f.observe(30);
        }
        assert!(f.contains(30) && f.contains(10) && !f.contains(20));
    }

    #[test]
    fn counts_decay_so_the_table_follows_phase_changes() {
        let mut f = Fvt::new(2);
        for _ in 0..HALVING {
            f.observe(1);
            f.observe(2);
        }
        for _ in 0..4 * HALVING {
            f.observe(3);
            f.observe(4);
        }
        assert!(f.contains(3) && f.contains(4) && !f.contains(1) && !f.contains(2));
    }

    #[test]
    fn frequent_chunks_marks_each_64_bit_chunk_in_the_table() {
        let mut f = Fvt::new(8);
        f.observe(0);
        f.observe(u64::MAX);
        let mut line = [0u8; 64];
        line[8..16].copy_from_slice(&5u64.to_le_bytes());
        line[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(f.frequent_chunks(&line), 0b1111_1101);
    }

    #[test]
    fn reordering_makes_every_pair_of_frequent_chunks_predictable_under_a_128_bit_cipher() {
        // 004 Fig. 4: chunks 1, 2, 5, 6 frequent: no 16-B block is all frequent in place, two
        // are once they are grouped.
        let mut c = super::super::FvCounts::default();
        c.line(8, 0b0110_0110);
        assert_eq!((c.frequent, c.paired, c.reordered), (4, 0, 4));
        c.line(8, 0b0000_0111);
        assert_eq!((c.frequent, c.paired, c.reordered), (7, 2, 6));
    }
}
