//! A buffer of N entries each held until some cycle (hash read/write buffers, write buffer).
//! Acquiring when all are held waits for the earliest release: that wait is the stall the
//! seeds charge when "buffers are full".

use crate::Cycle;

#[derive(Clone, Debug)]
pub struct Slots {
    free_at: Vec<Cycle>,
    pub acquisitions: u64,
    pub full_waits: u64,
    pub wait_cycles: u64,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        assert!(n > 0);
        Slots { free_at: vec![0; n], acquisitions: 0, full_waits: 0, wait_cycles: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.free_at.len()
    }

    /// Earliest cycle ≥ `t` at which an entry is free; returns (index, start).
    #[inline]
    pub fn acquire(&mut self, t: Cycle) -> (usize, Cycle) {
        let mut best = 0;
        for (i, &f) in self.free_at.iter().enumerate() {
            if f <= t {
                best = i;
                break;
            }
            if f < self.free_at[best] {
                best = i;
            }
        }
        let start = t.max(self.free_at[best]);
        self.acquisitions += 1;
        if start > t {
            self.full_waits += 1;
            self.wait_cycles += start - t;
        }
        (best, start)
    }

    #[inline]
    pub fn hold_until(&mut self, idx: usize, until: Cycle) {
        self.free_at[idx] = until;
    }

    pub fn reset_stats(&mut self) {
        (self.acquisitions, self.full_waits, self.wait_cycles) = (0, 0, 0);
    }

    /// The cycle at which every entry is free (a barrier waits for this).
    pub fn drained_at(&self) -> Cycle {
        self.free_at.iter().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_buffer_waits_for_earliest_release() {
        let mut s = Slots::new(2);
        let (a, t0) = s.acquire(0);
        s.hold_until(a, 100);
        let (b, t1) = s.acquire(0);
        s.hold_until(b, 50);
        assert_eq!((t0, t1), (0, 0));
        let (c, t2) = s.acquire(10);
        assert_eq!((c, t2), (b, 50));
        assert_eq!(s.wait_cycles, 40);
        assert_eq!(s.drained_at(), 100);
    }
}
