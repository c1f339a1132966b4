//! MD5's compression function on four independent blocks at once.
//!
//! One MD5 compression is a chain of 64 dependent steps, so a single stream runs at the
//! latency of that chain (about 4.7 cycles per byte here) with most of the core idle. Four
//! independent messages in the lanes of 32-bit vectors fill it: the lane loops below are
//! written so that the compiler turns each step into a handful of vector instructions.
//! No maintained crate offers multi-buffer MD5; the lanes are tested against RustCrypto's
//! `md5` compression function.

const LANES: usize = 4;

/// MD5's additive constants (RFC 1321 §3.4), step by step.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8, 0x8b44f7af,
    0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
    0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8,
    0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97,
    0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
    0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// Compress one block per lane into that lane's state (`states[l]` with `blocks[l]`).
pub fn compress4(states: &mut [[u32; 4]; LANES], blocks: [&[u8; 64]; LANES]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { sse2::compress4(states, blocks) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (s, b) in states.iter_mut().zip(blocks) {
        md5::block_api::compress(s, std::slice::from_ref(b));
    }
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use super::{K, LANES};
    use std::arch::x86_64::*;

    /// One step: a = b + rotl(a + f + K[i] + m, s), on four lanes.
    macro_rules! step {
        ($f:expr, $a:ident, $b:ident, $m:expr, $i:expr, $s:expr) => {
            let t = _mm_add_epi32(_mm_add_epi32($a, $f), _mm_add_epi32($m, _mm_set1_epi32(K[$i] as i32)));
            $a = _mm_add_epi32($b, _mm_or_si128(_mm_slli_epi32::<$s>(t), _mm_srli_epi32::<{ 32 - $s }>(t)));
        };
    }
    macro_rules! ff {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
            // (b & c) | (!b & d) as d ^ (b & (c ^ d)): one operation fewer on b's path.
            step!(_mm_xor_si128($d, _mm_and_si128($b, _mm_xor_si128($c, $d))), $a, $b, $m, $i, $s)
        };
    }
    macro_rules! gg {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
            // (b & d) | (c & !d) as c ^ (d & (b ^ c)).
            step!(_mm_xor_si128($c, _mm_and_si128($d, _mm_xor_si128($b, $c))), $a, $b, $m, $i, $s)
        };
    }
    macro_rules! hh {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
            step!(_mm_xor_si128(_mm_xor_si128($b, $c), $d), $a, $b, $m, $i, $s)
        };
    }
    macro_rules! ii {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
            // c ^ (b | !d)
            step!(_mm_xor_si128($c, _mm_or_si128($b, _mm_xor_si128($d, _mm_set1_epi32(-1)))), $a, $b, $m, $i, $s)
        };
    }

    #[inline]
    pub unsafe fn compress4(states: &mut [[u32; 4]; LANES], blocks: [&[u8; 64]; LANES]) {
        let w = |k: usize| -> __m128i {
            let word = |l: usize| u32::from_le_bytes(blocks[l][4 * k..4 * k + 4].try_into().unwrap()) as i32;
            _mm_setr_epi32(word(0), word(1), word(2), word(3))
        };
        let m: [__m128i; 16] = std::array::from_fn(w);
        let col = |j: usize| _mm_setr_epi32(states[0][j] as i32, states[1][j] as i32, states[2][j] as i32, states[3][j] as i32);
        let (a0, b0, c0, d0) = (col(0), col(1), col(2), col(3));
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        ff!(a, b, c, d, m[0], 0, 7); ff!(d, a, b, c, m[1], 1, 12); ff!(c, d, a, b, m[2], 2, 17); ff!(b, c, d, a, m[3], 3, 22);
        ff!(a, b, c, d, m[4], 4, 7); ff!(d, a, b, c, m[5], 5, 12); ff!(c, d, a, b, m[6], 6, 17); ff!(b, c, d, a, m[7], 7, 22);
        ff!(a, b, c, d, m[8], 8, 7); ff!(d, a, b, c, m[9], 9, 12); ff!(c, d, a, b, m[10], 10, 17); ff!(b, c, d, a, m[11], 11, 22);
        ff!(a, b, c, d, m[12], 12, 7); ff!(d, a, b, c, m[13], 13, 12); ff!(c, d, a, b, m[14], 14, 17); ff!(b, c, d, a, m[15], 15, 22);
        gg!(a, b, c, d, m[1], 16, 5); gg!(d, a, b, c, m[6], 17, 9); gg!(c, d, a, b, m[11], 18, 14); gg!(b, c, d, a, m[0], 19, 20);
        gg!(a, b, c, d, m[5], 20, 5); gg!(d, a, b, c, m[10], 21, 9); gg!(c, d, a, b, m[15], 22, 14); gg!(b, c, d, a, m[4], 23, 20);
        gg!(a, b, c, d, m[9], 24, 5); gg!(d, a, b, c, m[14], 25, 9); gg!(c, d, a, b, m[3], 26, 14); gg!(b, c, d, a, m[8], 27, 20);
        gg!(a, b, c, d, m[13], 28, 5); gg!(d, a, b, c, m[2], 29, 9); gg!(c, d, a, b, m[7], 30, 14); gg!(b, c, d, a, m[12], 31, 20);
        hh!(a, b, c, d, m[5], 32, 4); hh!(d, a, b, c, m[8], 33, 11); hh!(c, d, a, b, m[11], 34, 16); hh!(b, c, d, a, m[14], 35, 23);
        hh!(a, b, c, d, m[1], 36, 4); hh!(d, a, b, c, m[4], 37, 11); hh!(c, d, a, b, m[7], 38, 16); hh!(b, c, d, a, m[10], 39, 23);
        hh!(a, b, c, d, m[13], 40, 4); hh!(d, a, b, c, m[0], 41, 11); hh!(c, d, a, b, m[3], 42, 16); hh!(b, c, d, a, m[6], 43, 23);
        hh!(a, b, c, d, m[9], 44, 4); hh!(d, a, b, c, m[12], 45, 11); hh!(c, d, a, b, m[15], 46, 16); hh!(b, c, d, a, m[2], 47, 23);
        ii!(a, b, c, d, m[0], 48, 6); ii!(d, a, b, c, m[7], 49, 10); ii!(c, d, a, b, m[14], 50, 15); ii!(b, c, d, a, m[5], 51, 21);
        ii!(a, b, c, d, m[12], 52, 6); ii!(d, a, b, c, m[3], 53, 10); ii!(c, d, a, b, m[10], 54, 15); ii!(b, c, d, a, m[1], 55, 21);
        ii!(a, b, c, d, m[8], 56, 6); ii!(d, a, b, c, m[15], 57, 10); ii!(c, d, a, b, m[6], 58, 15); ii!(b, c, d, a, m[13], 59, 21);
        ii!(a, b, c, d, m[4], 60, 6); ii!(d, a, b, c, m[11], 61, 10); ii!(c, d, a, b, m[2], 62, 15); ii!(b, c, d, a, m[9], 63, 21);
        let out = [_mm_add_epi32(a, a0), _mm_add_epi32(b, b0), _mm_add_epi32(c, c0), _mm_add_epi32(d, d0)];
        for (j, v) in out.iter().enumerate() {
            let mut lanes = [0u32; 4];
            _mm_storeu_si128(lanes.as_mut_ptr() as *mut __m128i, *v);
            for l in 0..LANES {
                states[l][j] = lanes[l];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lane_is_rustcryptos_md5_compression() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for _ in 0..200 {
            let blocks: [[u8; 64]; LANES] = std::array::from_fn(|_| std::array::from_fn(|_| byte()));
            let init: [[u32; 4]; LANES] = std::array::from_fn(|_| std::array::from_fn(|_| u32::from_le_bytes([byte(), byte(), byte(), byte()])));
            let mut got = init;
            compress4(&mut got, [&blocks[0], &blocks[1], &blocks[2], &blocks[3]]);
            for l in 0..LANES {
                let mut want = init[l];
                md5::block_api::compress(&mut want, std::slice::from_ref(&blocks[l]));
                assert_eq!(got[l], want, "lane {}", l);
            }
        }
    }
}
