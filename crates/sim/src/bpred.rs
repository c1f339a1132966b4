//! Branch direction predictors (`core.branch_predictor`): gshare, 2-bit counters indexed by
//! pc ⊕ global history (the seeds' machines), or bimodal, 2-bit counters indexed by pc alone
//! (ChampSim's default, `branch/bimodal`). Traces carry the real outcome, so mispredictions
//! (and their refill penalty) come from the program.

use secmem_core::{ConfigError, Params};

pub const PREDICTORS: &[&str] = &["gshare", "bimodal"];

pub enum Predictor {
    Gshare(Gshare),
    Bimodal(Bimodal),
}

impl Predictor {
    pub fn new(p: &Params) -> Result<Predictor, ConfigError> {
        let bits = p.u64_min("core.branch_predictor_bits", 1)?;
        if bits > 24 {
            return Err(ConfigError(format!("core.branch_predictor_bits: {} is more than 24", bits)));
        }
        Ok(match p.choice("core.branch_predictor", PREDICTORS)?.as_str() {
            "gshare" => Predictor::Gshare(Gshare::new(bits as u32)),
            _ => Predictor::Bimodal(Bimodal::new(bits as u32)),
        })
    }

    /// Predict and train; returns whether the prediction was right.
    #[inline]
    pub fn predict(&mut self, pc: u64, taken: bool) -> bool {
        match self {
            Predictor::Gshare(g) => g.predict(pc, taken),
            Predictor::Bimodal(b) => b.predict(pc, taken),
        }
    }

    /// (lookups, mispredictions)
    pub fn counts(&self) -> (u64, u64) {
        match self {
            Predictor::Gshare(g) => (g.lookups, g.misses),
            Predictor::Bimodal(b) => (b.lookups, b.misses),
        }
    }

    pub fn reset_stats(&mut self) {
        match self {
            Predictor::Gshare(g) => (g.lookups, g.misses) = (0, 0),
            Predictor::Bimodal(b) => (b.lookups, b.misses) = (0, 0),
        }
    }
}

/// 2^bits counters, indexed by pc modulo the largest prime below 2^bits (ChampSim: 16384
/// counters, pc mod 16381), starting at strongly not-taken.
pub struct Bimodal {
    table: Vec<u8>,
    modulus: u64,
    pub lookups: u64,
    pub misses: u64,
}

impl Bimodal {
    pub fn new(bits: u32) -> Bimodal {
        let n = 1u64 << bits;
        let prime = |m: u64| m >= 2 && (2..).take_while(|d| d * d <= m).all(|d| m % d != 0);
        let modulus = (2..=n).rev().find(|&m| prime(m)).unwrap_or(1);
        Bimodal { table: vec![0; n as usize], modulus, lookups: 0, misses: 0 }
    }

    #[inline]
    pub fn predict(&mut self, pc: u64, taken: bool) -> bool {
        let i = (pc % self.modulus) as usize;
        let c = self.table[i];
        let right = (c >= 2) == taken;
        self.table[i] = if taken { (c + 1).min(3) } else { c.saturating_sub(1) };
        self.lookups += 1;
        self.misses += !right as u64;
        right
    }
}

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
    fn bimodal_uses_champsims_modulus_and_learns_a_biased_branch() {
        let mut b = Bimodal::new(14);
        assert_eq!(b.modulus, 16381);
        // pc and pc + 16381 share a counter: the second sees the first's training.
        for _ in 0..3 {
            b.predict(0x400, true);
        }
        assert!(b.predict(0x400 + 16381, true));
        let mut g = Bimodal::new(10);
        for i in 0..1000 {
            g.predict(0x400, i % 50 != 49);
        }
        assert!(g.misses < 40, "{}", g.misses);
    }

    #[test]
    fn learns_a_loop_branch() {
        let mut g = Gshare::new(10);
        for i in 0..1000 {
            g.predict(0x400, i % 50 != 49);
        }
        assert!(g.misses < 60, "a loop exit every 50 iterations: {} misses", g.misses);
    }
}
