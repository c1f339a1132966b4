//! Arithmetic in the binary field GF(2^w) for 1 ≤ w ≤ 128, the field of the PR hash (seed 001
//! §4, Def. 1).
//!
//! An element is a `u128` whose bit i is the coefficient of x^i (no bit reflection); the field
//! is GF(2)[x] / p(x) with p(x) = x^w + tail(x). The widths code authentication uses:
//!
//! | w   | p(x)                          | source                                              |
//! |-----|-------------------------------|-----------------------------------------------------|
//! | 128 | x^128 + x^7 + x^2 + x + 1     | G. Seroussi, *Table of Low-Weight Binary Irreducible Polynomials*, HP Labs HPL-98-135 (1998); also GCM's field, NIST SP 800-38D §6.3 |
//! | 80  | x^80 + x^9 + x^4 + x^2 + 1    | Seroussi HPL-98-135 (no trinomial exists: 8 divides 80, Swan's theorem) |
//! | 64  | x^64 + x^4 + x^3 + x + 1      | Seroussi HPL-98-135                                 |
//!
//! Each is the table's entry: minimum weight, then lowest middle degrees. The tests re-prove
//! irreducibility with Rabin's test rather than trusting the table.
//!
//! Why not RustCrypto's `polyval`/`ghash` for w = 128: they expose GF(2^128) only as a
//! streaming universal hash with a fixed key H (`Y ← (Y + X)·H`), whose constructor expands H
//! into four powers (three multiplications) — PR multiplies two *different* key-dependent
//! operands per pair, so each pair would pay a key expansion; `polyval`'s `hazmat::FieldElement`
//! multiply is the software path only and returns the Montgomery product a·b·x^-128 in
//! POLYVAL's bit-reflected field. Neither covers w = 64 or 80. So the multiply is written here
//! (carry-less multiplication with the CPU's `pclmulqdq` when present, a table-driven software
//! fallback otherwise), and `ghash` serves as the independent oracle for w = 128 in the tests.
//!
//! PR only needs sums of products, so [`Field::sum_of_products`] accumulates the unreduced
//! 256-bit products and reduces once: reduction is linear.

// `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
#![allow(clippy::manual_is_multiple_of)]

use std::fmt;

/// A carry-less product: up to 255 bits, `hi:lo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wide {
    pub lo: u128,
    pub hi: u128,
}

impl std::ops::BitXorAssign for Wide {
    #[inline(always)]
    fn bitxor_assign(&mut self, o: Wide) {
        self.lo ^= o.lo;
        self.hi ^= o.hi;
    }
}

impl Wide {
    #[inline(always)]
    fn shr(self, s: u32) -> u128 {
        match s {
            0 => self.lo,
            128 => self.hi,
            s if s < 128 => (self.lo >> s) | (self.hi << (128 - s)),
            s => self.hi >> (s - 128),
        }
    }
}

/// Why a polynomial cannot define a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldError {
    Width(u32),
    TailDegree { w: u32, tail: u64 },
    Reducible { w: u32, tail: u64 },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Width(w) => write!(f, "field width {w} is outside 1..=128"),
            FieldError::TailDegree { w, tail } => {
                write!(f, "p(x) = x^{w} + {tail:#x}: the tail must have degree below min(w, 64)")
            }
            FieldError::Reducible { w, tail } => write!(f, "p(x) = x^{w} + {tail:#x} is reducible over GF(2)"),
        }
    }
}

impl std::error::Error for FieldError {}

/// GF(2^w) defined by p(x) = x^w + tail(x).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    w: u32,
    tail: u64,
}

impl Field {
    /// x^128 + x^7 + x^2 + x + 1.
    pub const GF128: Field = Field { w: 128, tail: 0x87 };
    /// x^80 + x^9 + x^4 + x^2 + 1.
    pub const GF80: Field = Field { w: 80, tail: (1 << 9) | (1 << 4) | (1 << 2) | 1 };
    /// x^64 + x^4 + x^3 + x + 1.
    pub const GF64: Field = Field { w: 64, tail: 0x1b };

    /// The field for `w` ∈ {64, 80, 128} (the tag widths of §5).
    pub fn for_width(w: u32) -> Option<Field> {
        match w {
            64 => Some(Self::GF64),
            80 => Some(Self::GF80),
            128 => Some(Self::GF128),
            _ => None,
        }
    }

    /// Any width, for experiments on small fields; refuses a reducible p(x) (Rabin's test).
    pub fn new(w: u32, tail: u64) -> Result<Field, FieldError> {
        if !(1..=128).contains(&w) {
            return Err(FieldError::Width(w));
        }
        if w < 64 && tail >> w != 0 {
            return Err(FieldError::TailDegree { w, tail });
        }
        let f = Field { w, tail };
        if !f.is_irreducible() {
            return Err(FieldError::Reducible { w, tail });
        }
        Ok(f)
    }

    pub fn width(&self) -> u32 {
        self.w
    }

    /// p(x) − x^w.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// The elements are the integers below 2^w.
    #[inline(always)]
    pub fn mask(&self) -> u128 {
        if self.w == 128 {
            u128::MAX
        } else {
            (1u128 << self.w) - 1
        }
    }

    /// a·b mod p.
    pub fn mul(&self, a: u128, b: u128) -> u128 {
        self.sum_of_products(&[(a, b)])
    }

    /// Σ aᵢ·bᵢ mod p, reduced once.
    pub fn sum_of_products(&self, pairs: &[(u128, u128)]) -> u128 {
        self.sum_of_products_with(pairs.len(), |i| pairs[i])
    }

    /// Σ_{i<n} aᵢ·bᵢ mod p where `pair(i)` = (aᵢ, bᵢ): the operands can be formed on the fly
    /// (PR adds message and key words) without a buffer.
    #[inline]
    pub fn sum_of_products_with(&self, n: usize, pair: impl Fn(usize) -> (u128, u128)) -> u128 {
        #[cfg(target_arch = "x86_64")]
        if clmul_available() {
            // SAFETY: the CPU has PCLMULQDQ (checked just above).
            return unsafe { self.sum_hw(n, pair) };
        }
        self.sum_generic::<false>(n, pair)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "pclmulqdq,sse2")]
    unsafe fn sum_hw(&self, n: usize, pair: impl Fn(usize) -> (u128, u128)) -> u128 {
        self.sum_generic::<true>(n, pair)
    }

    #[inline(always)]
    fn sum_generic<const HW: bool>(&self, n: usize, pair: impl Fn(usize) -> (u128, u128)) -> u128 {
        let mask = self.mask();
        let mut acc = Wide::default();
        if self.w <= 64 {
            for i in 0..n {
                let (a, b) = pair(i);
                acc.lo ^= clmul64::<HW>((a & mask) as u64, (b & mask) as u64);
            }
        } else {
            for i in 0..n {
                let (a, b) = pair(i);
                acc ^= clmul128::<HW>(a & mask, b & mask);
            }
        }
        self.reduce::<HW>(acc)
    }

    /// x mod p for x < 2^(2w−1) (any sum of products).
    #[inline(always)]
    fn reduce<const HW: bool>(&self, mut x: Wide) -> u128 {
        let mask = self.mask();
        // Fold the part at and above x^w down with x^w ≡ tail: each fold lowers the top degree
        // by w − deg(tail) ≥ 1; for the sparse tails above, two folds finish.
        loop {
            let high = x.shr(self.w);
            if high == 0 {
                return x.lo & mask;
            }
            let low = Wide { lo: x.lo & mask, hi: 0 };
            let mut f = Wide { lo: clmul64::<HW>(high as u64, self.tail), hi: 0 };
            let up = clmul64::<HW>((high >> 64) as u64, self.tail);
            f.lo ^= up << 64;
            f.hi ^= up >> 64;
            f ^= low;
            x = f;
        }
    }

    /// a^(2^w − 2), the inverse of a ≠ 0 (Fermat); 0 for 0.
    pub fn inv(&self, a: u128) -> u128 {
        // a^(2^w − 2) = Π_{i=1}^{w−1} a^(2^i).
        let mut sq = a;
        let mut r = 1u128;
        for _ in 1..self.w {
            sq = self.mul(sq, sq);
            r = self.mul(r, sq);
        }
        r
    }

    /// Rabin's test: p of degree w is irreducible iff x^(2^w) ≡ x (mod p) and, for each prime
    /// q dividing w, gcd(x^(2^(w/q)) − x, p) = 1.
    pub fn is_irreducible(&self) -> bool {
        if self.w == 1 {
            return true; // x + tail, degree 1
        }
        if self.tail & 1 == 0 {
            return false; // x divides p
        }
        let x = 2u128;
        let frob = |k: u32| (0..k).fold(x, |v, _| self.mul(v, v));
        if frob(self.w) != x {
            return false;
        }
        (2..=self.w).filter(|&q| self.w % q == 0 && is_prime(q)).all(|q| self.gcd_with_p(frob(self.w / q) ^ x) == 1)
    }

    /// gcd(g, p) for g of degree below w.
    fn gcd_with_p(&self, g: u128) -> u128 {
        if g == 0 {
            return 0; // gcd(0, p) = p ≠ 1
        }
        // p mod g: x^w mod g by doubling, plus tail mod g.
        let modg = |mut v: u128, g: u128| {
            let dg = 127 - g.leading_zeros();
            while v != 0 && 127 - v.leading_zeros() >= dg {
                v ^= g << (127 - v.leading_zeros() - dg);
            }
            v
        };
        let mut xw = 1u128;
        for _ in 0..self.w {
            xw = modg(xw << 1, g) // deg(xw) < deg(g) ≤ 127, so the shift cannot overflow
        }
        let (mut a, mut b) = (g, xw ^ modg(self.tail as u128, g));
        while b != 0 {
            (a, b) = (b, modg(a, b));
        }
        a
    }
}

fn is_prime(q: u32) -> bool {
    q >= 2 && (2..q).take_while(|d| d * d <= q).all(|d| q % d != 0)
}

/// Whether the CPU multiplies carry-less in hardware (std caches the CPUID answer).
#[inline(always)]
pub fn clmul_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The 128-bit carry-less product of two 64-bit polynomials, in hardware or software.
#[inline(always)]
fn clmul64<const HW: bool>(a: u64, b: u64) -> u128 {
    #[cfg(target_arch = "x86_64")]
    if HW {
        use std::arch::x86_64::*;
        // SAFETY: HW is only true inside `sum_hw`, which has the pclmulqdq feature.
        unsafe {
            let r = _mm_clmulepi64_si128(_mm_cvtsi64_si128(a as i64), _mm_cvtsi64_si128(b as i64), 0x00);
            let mut out = 0u128;
            _mm_storeu_si128(&mut out as *mut u128 as *mut __m128i, r);
            return u128::from_le(out);
        }
    }
    clmul64_soft(a, b)
}

/// 256-bit product of 128-bit polynomials: Karatsuba over 64-bit halves (three multiplies).
#[inline(always)]
fn clmul128<const HW: bool>(a: u128, b: u128) -> Wide {
    let (a0, a1) = (a as u64, (a >> 64) as u64);
    let (b0, b1) = (b as u64, (b >> 64) as u64);
    let lo = clmul64::<HW>(a0, b0);
    let hi = clmul64::<HW>(a1, b1);
    let mid = clmul64::<HW>(a0 ^ a1, b0 ^ b1) ^ lo ^ hi;
    Wide { lo: lo ^ (mid << 64), hi: hi ^ (mid >> 64) }
}

/// Software carry-less multiply: a 16-entry table of a·t, consumed four bits of b at a time.
pub fn clmul64_soft(a: u64, b: u64) -> u128 {
    let mut t = [0u128; 16];
    t[1] = a as u128;
    for i in 2..16 {
        t[i] = if i % 2 == 0 { t[i / 2] << 1 } else { t[i - 1] ^ a as u128 };
    }
    let mut r = 0u128;
    for i in (0..16).rev() {
        r = (r << 4) ^ t[((b >> (4 * i)) & 15) as usize];
    }
    r
}

/// The hardware carry-less multiply alone (for tests comparing it with the software one).
pub fn clmul64_hw(a: u64, b: u64) -> Option<u128> {
    #[cfg(target_arch = "x86_64")]
    if clmul_available() {
        #[target_feature(enable = "pclmulqdq,sse2")]
        unsafe fn hw(a: u64, b: u64) -> u128 {
            clmul64::<true>(a, b)
        }
        // SAFETY: checked above.
        return Some(unsafe { hw(a, b) });
    }
    let _ = (a, b);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::TestRng as Rng;

    impl Rng {
        fn elem(&mut self, f: &Field) -> u128 {
            (((self.u64() as u128) << 64) | self.u64() as u128) & f.mask()
        }
    }

    /// Shift-and-add multiplication, one bit of b at a time, reducing a·x^i as it goes:
    /// shares nothing with the carry-less path.
    fn mul_ref(f: &Field, mut a: u128, b: u128) -> u128 {
        let mut r = 0u128;
        for i in 0..f.width() {
            if (b >> i) & 1 == 1 {
                r ^= a;
            }
            let top = (a >> (f.width() - 1)) & 1;
            a = (a << 1) & f.mask();
            if top == 1 {
                a ^= f.tail() as u128;
            }
        }
        r
    }

    const FIELDS: [Field; 3] = [Field::GF64, Field::GF80, Field::GF128];

    #[test]
    fn chosen_polynomials_are_irreducible_and_neighbours_are_refused() {
        for f in FIELDS {
            assert!(f.is_irreducible(), "{f:?}");
        }
        // x^80 + x^9 + 1 is reducible (no irreducible trinomial of degree 80), as is any p
        // without a constant term, and x^4 + x^2 + 1 = (x^2 + x + 1)^2.
        assert_eq!(Field::new(80, (1 << 9) | 1), Err(FieldError::Reducible { w: 80, tail: 0x201 }));
        assert!(Field::new(64, 0x1a).is_err());
        assert!(Field::new(4, 0b101).is_err());
        assert!(Field::new(4, 0b11).is_ok());
        assert!(Field::new(8, 0x1b).is_ok()); // AES's field
        assert!(Field::new(129, 1).is_err());
        assert!(Field::new(8, 0x1ff).is_err());
    }

    #[test]
    fn software_and_hardware_carryless_multiply_agree() {
        let mut r = Rng(7);
        for _ in 0..2000 {
            let (a, b) = (r.u64(), r.u64());
            let slow = (0..64).filter(|i| (b >> i) & 1 == 1).fold(0u128, |acc, i| acc ^ ((a as u128) << i));
            assert_eq!(clmul64_soft(a, b), slow);
            if let Some(h) = clmul64_hw(a, b) {
                assert_eq!(h, slow);
            }
        }
    }

    #[test]
    fn multiply_matches_the_bit_by_bit_reference_on_every_width() {
        let mut r = Rng(1);
        for f in FIELDS.into_iter().chain([Field::new(8, 0x1b).unwrap(), Field::new(13, 0x1b).unwrap()]) {
            for _ in 0..500 {
                let (a, b) = (r.elem(&f), r.elem(&f));
                assert_eq!(f.mul(a, b), mul_ref(&f, a, b), "{f:?} {a:#x}·{b:#x}");
                // The generic software path too, whatever the CPU.
                assert_eq!(f.sum_generic::<false>(1, |_| (a, b)), mul_ref(&f, a, b));
            }
            // Extremes: all-ones operands give the largest unreduced product.
            let m = f.mask();
            assert_eq!(f.mul(m, m), mul_ref(&f, m, m));
        }
    }

    #[test]
    fn known_products() {
        // FIPS-197 §4.2: {57}·{83} = {c1} in AES's GF(2^8).
        let aes = Field::new(8, 0x1b).unwrap();
        assert_eq!(aes.mul(0x57, 0x83), 0xc1);
        // x^(w−1)·x = x^w ≡ tail, and x^(w−1)·x^(w−1) = x^(2w−2) ≡ tail·x^(w−2) reduced again.
        for f in FIELDS {
            let top = 1u128 << (f.width() - 1);
            assert_eq!(f.mul(top, 2), f.tail() as u128);
        }
        assert_eq!(Field::GF128.mul(1 << 127, 1 << 127), mul_ref(&Field::GF128, 1 << 127, 1 << 127));
        // x^126 · x^2 = x^128 ≡ x^7 + x^2 + x + 1 in GF(2^128).
        assert_eq!(Field::GF128.mul(1 << 126, 4), 0x87);
    }

    #[test]
    fn gf128_agrees_with_rustcrypto_ghash() {
        // GHASH of one block X under key H is X·H in GF(2^128) mod x^128 + x^7 + x^2 + x + 1,
        // with the block's first bit (the MSB of byte 0) as the coefficient of x^0: bit
        // reflection of this module's representation.
        use ghash::universal_hash::UniversalHash;
        let to_block = |v: u128| v.reverse_bits().to_be_bytes();
        let from_block = |b: [u8; 16]| u128::from_be_bytes(b).reverse_bits();
        let mut r = Rng(3);
        for _ in 0..200 {
            let (a, b) = (r.elem(&Field::GF128), r.elem(&Field::GF128));
            let mut g = ghash::GHash::new(&to_block(b).into());
            g.update(&[to_block(a).into()]);
            let out: [u8; 16] = g.finalize().into();
            assert_eq!(Field::GF128.mul(a, b), from_block(out));
        }
    }

    #[test]
    fn field_axioms_on_random_elements() {
        let mut r = Rng(11);
        for f in FIELDS {
            for _ in 0..200 {
                let (a, b, c) = (r.elem(&f), r.elem(&f), r.elem(&f));
                assert_eq!(f.mul(a, b), f.mul(b, a));
                assert_eq!(f.mul(f.mul(a, b), c), f.mul(a, f.mul(b, c)));
                assert_eq!(f.mul(a, b ^ c), f.mul(a, b) ^ f.mul(a, c));
                assert_eq!(f.mul(a, 1), a);
                assert_eq!(f.mul(a, 0), 0);
                if a != 0 {
                    assert_eq!(f.mul(a, f.inv(a)), 1, "{f:?} inverse of {a:#x}");
                }
                // Frobenius: a^(2^w) = a in a field of 2^w elements.
                assert_eq!((0..f.width()).fold(a, |v, _| f.mul(v, v)), a);
            }
        }
    }

    #[test]
    fn sum_of_products_reduces_once_to_the_same_value() {
        let mut r = Rng(5);
        for f in FIELDS {
            let pairs: Vec<(u128, u128)> = (0..9).map(|_| (r.elem(&f), r.elem(&f))).collect();
            let each = pairs.iter().fold(0, |acc, &(a, b)| acc ^ mul_ref(&f, a, b));
            assert_eq!(f.sum_of_products(&pairs), each);
        }
    }
}
