//! A resource used at most `width` times a cycle (issue slots, load and store ports, a cache
//! level's tag checks), booked in any order of cycles, as an out-of-order core books them.

use crate::Cycle;

const CAL: usize = 1 << 12;

/// A resource with `width` uses per cycle (issue slots, load and store ports): the first
/// cycle ≥ `t` with one left. The last `CAL` cycles are remembered, each as its cycle and
/// its uses in one word (`cycle << 8 | uses`): one host cache line a take, not two (every
/// instruction takes from several, and a mix's cores take turns with them).
pub struct PerCycle {
    width: u8,
    slot: Vec<u64>,
}

impl PerCycle {
    pub fn new(width: u8) -> PerCycle {
        PerCycle { width, slot: vec![u64::MAX; CAL] }
    }

    #[inline]
    pub fn take(&mut self, t: Cycle) -> Cycle {
        debug_assert!(t < 1 << 56, "cycle {} beyond what a slot holds", t);
        let mut c = t;
        loop {
            let i = (c as usize) & (CAL - 1);
            let e = self.slot[i];
            if e >> 8 != c {
                self.slot[i] = c << 8 | 1;
                return c;
            }
            if ((e & 0xFF) as u8) < self.width {
                self.slot[i] = e + 1;
                return c;
            }
            c += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's packed slots give every take the cycle a plain count per cycle gives, while
    /// the takes stay within the remembered window (times go back and forth, as an
    /// out-of-order core's do, and pile up past the width).
    #[test]
    fn per_cycle_takes_as_a_count_per_cycle_does() {
        for width in [1u8, 2, 3, 6] {
            let mut ports = PerCycle::new(width);
            let mut used: std::collections::HashMap<Cycle, u8> = std::collections::HashMap::new();
            let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ width as u64;
            let mut base: Cycle = 1_000;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                base += x % 3;
                let t = base + (x >> 20) % 40;
                let mut want = t;
                while used.get(&want).copied().unwrap_or(0) >= width {
                    want += 1;
                }
                *used.entry(want).or_insert(0) += 1;
                assert_eq!(ports.take(t), want, "width {} at {}", width, t);
            }
        }
    }
}
