//! gshare branch predictor: 2-bit counters indexed by pc ⊕ global history. Traces carry the
//! real outcome, so mispredictions (and their refill penalty) come from the program.

pub struct Gshare {
    table: Vec<u8>,
    mask: u64,
    history: u64,
    pub lookups: u64,
    pub misses: u64,
}

impl Gshare {
    pub fn new(bits: u32) -> Gshare {
        Gshare { table: vec![2; 1 << bits], mask: (1 << bits) - 1, history: 0, lookups: 0, misses: 0 }
    }

    /// Predict and train; returns whether the prediction was right.
    #[inline]
    pub fn predict(&mut self, pc: u64, taken: bool) -> bool {
        let i = ((pc >> 1 ^ self.history) & self.mask) as usize;
        let c = self.table[i];
        let right = (c >= 2) == taken;
        self.table[i] = if taken { (c + 1).min(3) } else { c.saturating_sub(1) };
        self.history = (self.history << 1 | taken as u64) & self.mask;
        self.lookups += 1;
        self.misses += !right as u64;
        right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_loop_branch() {
        let mut g = Gshare::new(10);
        for i in 0..1000 {
            g.predict(0x400, i % 50 != 49);
        }
        assert!(g.misses < 60, "a loop exit every 50 iterations: {} misses", g.misses);
    }
}
