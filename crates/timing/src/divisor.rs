//! Division by a number fixed when a resource is built (a pipe's slot length, a bus's beat
//! and width), without a division instruction.
//!
//! Every engine operation and bus transfer divides a cycle or a byte count by one of these:
//! half a division per simulated instruction on a trace whose L2 misses saturate the hash
//! engine, each 25-90 cycles of latency on the host against a few for a multiplication. A
//! power of two is a shift; anything else is the exact quotient by a 128-bit reciprocal
//! (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019: with
//! c = ⌈2^128 / d⌉, ⌊x / d⌋ = ⌊c·x / 2^128⌋ for every 64-bit x and d).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divisor {
    d: u64,
    /// log2(d) when d is a power of two (then `c` is unused).
    shift: u32,
    /// ⌈2^128 / d⌉ for any other d; 0 for a power of two.
    c: u128,
}

impl Divisor {
    pub fn new(d: u64) -> Divisor {
        assert!(d > 0, "division by zero");
        if d.is_power_of_two() {
            Divisor { d, shift: d.trailing_zeros(), c: 0 }
        } else {
            // d does not divide 2^128, so ⌊(2^128 − 1) / d⌋ + 1 = ⌈2^128 / d⌉.
            Divisor { d, shift: 0, c: u128::MAX / d as u128 + 1 }
        }
    }

    pub fn get(self) -> u64 {
        self.d
    }

    /// ⌊x / d⌋.
    #[inline]
    pub fn div(self, x: u64) -> u64 {
        if self.c == 0 {
            return x >> self.shift;
        }
        // The top 64 bits of the 192-bit c·x: c = hi·2^64 + lo.
        let lo = (self.c as u64 as u128 * x as u128) >> 64;
        let hi = (self.c >> 64) * x as u128;
        ((hi + lo) >> 64) as u64
    }

    /// ⌈x / d⌉.
    #[inline]
    pub fn div_ceil(self, x: u64) -> u64 {
        let q = self.div(x);
        // q·d ≤ x: no overflow.
        q + (q * self.d != x) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift;

    #[test]
    fn quotients_are_the_division_instructions_for_every_size_of_divisor_and_dividend() {
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        let mut ds: Vec<u64> = (1..=70).chain([3 << 20, 5120, 1 << 40, (1 << 40) + 1, u64::MAX / 3, u64::MAX - 1, u64::MAX]).collect();
        ds.extend((0..200).map(|_| rnd(u64::MAX) >> rnd(64)).filter(|&d| d > 0));
        for d in ds {
            let v = Divisor::new(d);
            let mut xs: Vec<u64> = vec![0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1, u64::MAX / d * d, (u64::MAX / d * d).wrapping_sub(1)];
            xs.extend((0..300).map(|_| rnd(u64::MAX) >> rnd(64)));
            for x in xs {
                assert_eq!(v.div(x), x / d, "{} / {}", x, d);
                assert_eq!(v.div_ceil(x), x.div_ceil(d), "⌈{} / {}⌉", x, d);
            }
        }
    }
}
