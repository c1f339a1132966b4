//! PR, the NH-polynomial hash with reduction (J.-P. Kaps, K. Yüksel, B. Sunar, *Energy
//! scalable universal hashing*, IEEE Trans. Computers 54(12), 2005), as seed 001 Def. 1 uses it:
//!
//! PR_K(M) = Σ_{l=1}^{n/2} (m_{2l−1} + k_{2l−1})·(m_{2l} + k_{2l})  in GF(2^w),
//!
//! ε-almost-XOR-universal with ε = 2^−w on equal-length messages (001 Theorem 2).
//!
//! The message is read as a bit string (bit j of byte i is bit 8i + j) cut into w-bit words,
//! the first bit of a word being its x^0 coefficient (for w a multiple of 8: little-endian
//! words). The last word is zero-filled and one zero word is appended when the count is odd,
//! so n is even as Def. 1 requires; all messages of one block size then have the same n, the
//! equal-length condition of Theorem 2. The key is read the same way and must hold n words.

use crate::gf2w::Field;

/// Words in the padded message of `msg_bytes` bytes: n, even.
pub fn words(field: &Field, msg_bytes: usize) -> usize {
    let w = field.width() as usize;
    (msg_bytes * 8).div_ceil(2 * w) * 2
}

/// Key bytes PR needs for messages of `msg_bytes` bytes.
pub fn key_bytes(field: &Field, msg_bytes: usize) -> usize {
    (words(field, msg_bytes) * field.width() as usize).div_ceil(8)
}

/// The key is shorter than the message needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTooShort {
    pub need: usize,
    pub have: usize,
}

impl std::fmt::Display for KeyTooShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the PR key has {} bytes, the message needs {}", self.have, self.need)
    }
}

impl std::error::Error for KeyTooShort {}

/// PR_K(M) over `field`.
#[inline]
pub fn pr(field: &Field, msg: &[u8], key: &[u8]) -> Result<u128, KeyTooShort> {
    let n = words(field, msg.len());
    let need = key_bytes(field, msg.len());
    if key.len() < need {
        return Err(KeyTooShort { need, have: key.len() });
    }
    let w = field.width();
    Ok(match w {
        // Whole little-endian words: the common widths read straight from the bytes.
        128 => field.sum_of_products_with(n / 2, |l| {
            let a = word_le::<16>(msg, 2 * l) ^ word_le::<16>(key, 2 * l);
            let b = word_le::<16>(msg, 2 * l + 1) ^ word_le::<16>(key, 2 * l + 1);
            (a, b)
        }),
        64 => field.sum_of_products_with(n / 2, |l| {
            let a = word_le::<8>(msg, 2 * l) ^ word_le::<8>(key, 2 * l);
            let b = word_le::<8>(msg, 2 * l + 1) ^ word_le::<8>(key, 2 * l + 1);
            (a, b)
        }),
        80 => field.sum_of_products_with(n / 2, |l| {
            let a = word_le::<10>(msg, 2 * l) ^ word_le::<10>(key, 2 * l);
            let b = word_le::<10>(msg, 2 * l + 1) ^ word_le::<10>(key, 2 * l + 1);
            (a, b)
        }),
        _ => field.sum_of_products_with(n / 2, |l| {
            let at = |i: usize| bits(msg, i * w as usize, w) ^ bits(key, i * w as usize, w);
            (at(2 * l), at(2 * l + 1))
        }),
    })
}

/// Word `i` of `N` bytes, little-endian, zero past the end of `data`.
#[inline(always)]
fn word_le<const N: usize>(data: &[u8], i: usize) -> u128 {
    let start = i * N;
    if let Some(w) = data.get(start..start + 16) {
        // One 16-byte load, masked: a 10-byte copy is a library call.
        let v = u128::from_le_bytes(w.try_into().unwrap());
        return if N == 16 { v } else { v & ((1u128 << (8 * N)) - 1) };
    }
    let mut b = [0u8; 16];
    if start + N <= data.len() {
        b[..N].copy_from_slice(&data[start..start + N]);
    } else if start < data.len() {
        b[..data.len() - start].copy_from_slice(&data[start..]);
    }
    u128::from_le_bytes(b)
}

/// `w` bits of `data` from bit `off` (bit j of byte i is bit 8i + j), zero past the end.
fn bits(data: &[u8], off: usize, w: u32) -> u128 {
    let (start, sh) = (off / 8, off % 8);
    let mut b = [0u8; 17];
    let end = (start + 17).min(data.len());
    if start < end {
        b[..end - start].copy_from_slice(&data[start..end]);
    }
    let lo = u128::from_le_bytes(b[..16].try_into().unwrap());
    let v = if sh == 0 { lo } else { (lo >> sh) | ((b[16] as u128) << (128 - sh)) };
    if w == 128 {
        v
    } else {
        v & ((1u128 << w) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::TestRng as Rng;

    /// Def. 1 spelled out with the generic bit reader and one multiplication per pair.
    fn pr_ref(f: &Field, msg: &[u8], key: &[u8]) -> u128 {
        let w = f.width();
        let n = words(f, msg.len());
        (0..n / 2).fold(0, |acc, l| {
            let m = |i: usize| bits(msg, i * w as usize, w);
            let k = |i: usize| bits(key, i * w as usize, w);
            acc ^ f.mul(m(2 * l) ^ k(2 * l), m(2 * l + 1) ^ k(2 * l + 1))
        })
    }

    #[test]
    fn word_counts_pad_to_an_even_number() {
        // A 64-B block with a 4-B program id and an 8-B address is 76 B = 608 bits.
        assert_eq!(words(&Field::GF128, 76), 6); // 4.75 words → 5 → 6
        assert_eq!(words(&Field::GF64, 76), 10); // 9.5 → 10
        assert_eq!(words(&Field::GF80, 76), 8); // 7.6 → 8
        assert_eq!(key_bytes(&Field::GF80, 76), 80);
        assert_eq!(key_bytes(&Field::GF128, 268), 288);
    }

    #[test]
    fn fast_word_readers_equal_the_bit_reader() {
        let mut r = Rng(9);
        for f in [Field::GF64, Field::GF80, Field::GF128] {
            for len in [1, 15, 16, 76, 140, 268] {
                let msg = r.bytes(len);
                let key = r.bytes(key_bytes(&f, len));
                assert_eq!(pr(&f, &msg, &key).unwrap(), pr_ref(&f, &msg, &key), "{f:?} len {len}");
            }
        }
    }

    #[test]
    fn bit_reader_handles_offsets_and_ends() {
        let data = [0b1010_1100u8, 0xff, 0x01];
        assert_eq!(bits(&data, 0, 4), 0b1100);
        assert_eq!(bits(&data, 4, 4), 0b1010);
        assert_eq!(bits(&data, 6, 5), 0b11110); // bits 6,7 of byte 0 (0,1... LSB first) then 3 of byte 1
        assert_eq!(bits(&data, 16, 8), 0x01);
        assert_eq!(bits(&data, 20, 8), 0); // past the end
        assert_eq!(bits(&[0xffu8; 20], 3, 128), u128::MAX);
    }

    #[test]
    fn short_key_is_an_error_not_a_panic() {
        assert_eq!(pr(&Field::GF128, &[0u8; 76], &[0u8; 95]), Err(KeyTooShort { need: 96, have: 95 }));
    }

    #[test]
    fn definition_on_a_hand_example() {
        // w = 8 (AES field), M = (m1, m2) = (0x57, 0x83), K = (0, 0): D = 0x57·0x83 = 0xc1.
        let f = Field::new(8, 0x1b).unwrap();
        assert_eq!(pr(&f, &[0x57, 0x83], &[0, 0]).unwrap(), 0xc1);
        // K = (0x57, 0x83) cancels M: (0)(0) = 0.
        assert_eq!(pr(&f, &[0x57, 0x83], &[0x57, 0x83]).unwrap(), 0);
        // Two pairs add: (1+0)(2+0) + (3+1)(4+0) = x·1 + x·x^2 = 2 ^ 8 = 0x0a.
        assert_eq!(pr(&f, &[1, 2, 3, 4], &[0, 0, 1, 0]).unwrap(), 0x0a);
    }

    /// Theorem 2 exactly: for M ≠ M' of equal length and any c, Pr_K[PR(M) ⊕ PR(M') = c] =
    /// 2^−w. Fixing every key word but one that meets a differing word, exactly one value of
    /// that word satisfies the equation: counted exhaustively on GF(2^8).
    #[test]
    fn exactly_one_key_word_value_gives_each_difference() {
        let f = Field::new(8, 0x1b).unwrap();
        let mut r = Rng(21);
        for trial in 0..20 {
            let m = r.bytes(12);
            let mut m2 = m.clone();
            let i = trial % 12;
            m2[i] ^= 1 + (r.u64() % 255) as u8;
            let c = r.u64() as u8 as u128;
            let mut key = r.bytes(12);
            // The partner word of the one that differs: word i pairs with i ^ 1.
            let free = i ^ 1;
            let hits = (0..=255u8)
                .filter(|&v| {
                    key[free] = v;
                    pr(&f, &m, &key).unwrap() ^ pr(&f, &m2, &key).unwrap() == c
                })
                .count();
            assert_eq!(hits, 1, "trial {trial}");
        }
    }

    /// ε-AXU statistically on small fields: over random keys the XOR difference of two
    /// distinct messages' digests is uniform on GF(2^w) (chi-square), and the collision rate
    /// is 2^−w within a few standard deviations.
    #[test]
    fn differences_are_uniform_over_random_keys_on_small_fields() {
        let mut r = Rng(33);
        for (w, tail) in [(4u32, 0x3u64), (8, 0x1b)] {
            let f = Field::new(w, tail).unwrap();
            let cells = 1usize << w;
            let trials = 256 * cells; // 256 expected per cell
            let len = 10;
            // Messages that differ in the last bytes only (an address change, say).
            let m: Vec<u8> = r.bytes(len);
            let mut m2 = m.clone();
            m2[len - 1] ^= 0x40;
            let mut hist = vec![0usize; cells];
            for _ in 0..trials {
                let key = r.bytes(key_bytes(&f, len));
                let d = pr(&f, &m, &key).unwrap() ^ pr(&f, &m2, &key).unwrap();
                hist[d as usize] += 1;
            }
            let expect = trials as f64 / cells as f64;
            let chi2: f64 = hist.iter().map(|&o| (o as f64 - expect).powi(2) / expect).sum();
            // df = cells − 1; mean df, sd sqrt(2 df): allow 5 sd.
            let df = (cells - 1) as f64;
            assert!(chi2 < df + 5.0 * (2.0 * df).sqrt(), "w={w}: chi2 {chi2:.1} for df {df}");
            let coll = hist[0] as f64 / trials as f64;
            let sd = ((1.0 / cells as f64) * (1.0 - 1.0 / cells as f64) / trials as f64).sqrt();
            assert!((coll - 1.0 / cells as f64).abs() < 5.0 * sd, "w={w}: collision rate {coll}");
        }
    }
}
