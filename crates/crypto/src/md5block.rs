//! MD5's compression function on one block, written out.
//!
//! The seeds' tree hash is one compression per 64-B chunk (`HashAlg::Md5`), on every chunk
//! a check brings in and every dirty chunk that leaves the L2: on a trace whose misses
//! saturate the hash engine, ~700 host instructions each in RustCrypto's `md5`, whose round
//! functions spend an operation more than needed ((x & y) | (!x & z) without an and-not
//! instruction). Here each step is F = d ^ (b & (c ^ d)), G = c ^ (d & (b ^ c)) as in
//! `md5x4`, with the block's words read in place. Tested against RustCrypto's compression.

use crate::md5x4::K;

/// One step: a = b + rotl(a + f + K[i] + m, s).
macro_rules! step {
    ($f:expr, $a:ident, $b:ident, $m:expr, $i:expr, $s:expr) => {
        $a = $b.wrapping_add($a.wrapping_add($f).wrapping_add($m).wrapping_add(K[$i]).rotate_left($s));
    };
}
macro_rules! ff {
    ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
        step!($d ^ ($b & ($c ^ $d)), $a, $b, $m, $i, $s)
    };
}
macro_rules! gg {
    ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
        step!($c ^ ($d & ($b ^ $c)), $a, $b, $m, $i, $s)
    };
}
macro_rules! hh {
    ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
        step!($b ^ $c ^ $d, $a, $b, $m, $i, $s)
    };
}
macro_rules! ii {
    ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $i:expr, $s:expr) => {
        step!($c ^ ($b | !$d), $a, $b, $m, $i, $s)
    };
}

/// Compress `block` into `state`.
#[inline]
pub fn compress(state: &mut [u32; 4], block: &[u8; 64]) {
    let w = |k: usize| u32::from_le_bytes([block[4 * k], block[4 * k + 1], block[4 * k + 2], block[4 * k + 3]]);
    let [mut a, mut b, mut c, mut d] = *state;
    ff!(a, b, c, d, w(0), 0, 7); ff!(d, a, b, c, w(1), 1, 12); ff!(c, d, a, b, w(2), 2, 17); ff!(b, c, d, a, w(3), 3, 22);
    ff!(a, b, c, d, w(4), 4, 7); ff!(d, a, b, c, w(5), 5, 12); ff!(c, d, a, b, w(6), 6, 17); ff!(b, c, d, a, w(7), 7, 22);
    ff!(a, b, c, d, w(8), 8, 7); ff!(d, a, b, c, w(9), 9, 12); ff!(c, d, a, b, w(10), 10, 17); ff!(b, c, d, a, w(11), 11, 22);
    ff!(a, b, c, d, w(12), 12, 7); ff!(d, a, b, c, w(13), 13, 12); ff!(c, d, a, b, w(14), 14, 17); ff!(b, c, d, a, w(15), 15, 22);
    gg!(a, b, c, d, w(1), 16, 5); gg!(d, a, b, c, w(6), 17, 9); gg!(c, d, a, b, w(11), 18, 14); gg!(b, c, d, a, w(0), 19, 20);
    gg!(a, b, c, d, w(5), 20, 5); gg!(d, a, b, c, w(10), 21, 9); gg!(c, d, a, b, w(15), 22, 14); gg!(b, c, d, a, w(4), 23, 20);
    gg!(a, b, c, d, w(9), 24, 5); gg!(d, a, b, c, w(14), 25, 9); gg!(c, d, a, b, w(3), 26, 14); gg!(b, c, d, a, w(8), 27, 20);
    gg!(a, b, c, d, w(13), 28, 5); gg!(d, a, b, c, w(2), 29, 9); gg!(c, d, a, b, w(7), 30, 14); gg!(b, c, d, a, w(12), 31, 20);
    hh!(a, b, c, d, w(5), 32, 4); hh!(d, a, b, c, w(8), 33, 11); hh!(c, d, a, b, w(11), 34, 16); hh!(b, c, d, a, w(14), 35, 23);
    hh!(a, b, c, d, w(1), 36, 4); hh!(d, a, b, c, w(4), 37, 11); hh!(c, d, a, b, w(7), 38, 16); hh!(b, c, d, a, w(10), 39, 23);
    hh!(a, b, c, d, w(13), 40, 4); hh!(d, a, b, c, w(0), 41, 11); hh!(c, d, a, b, w(3), 42, 16); hh!(b, c, d, a, w(6), 43, 23);
    hh!(a, b, c, d, w(9), 44, 4); hh!(d, a, b, c, w(12), 45, 11); hh!(c, d, a, b, w(15), 46, 16); hh!(b, c, d, a, w(2), 47, 23);
    ii!(a, b, c, d, w(0), 48, 6); ii!(d, a, b, c, w(7), 49, 10); ii!(c, d, a, b, w(14), 50, 15); ii!(b, c, d, a, w(5), 51, 21);
    ii!(a, b, c, d, w(12), 52, 6); ii!(d, a, b, c, w(3), 53, 10); ii!(c, d, a, b, w(10), 54, 15); ii!(b, c, d, a, w(1), 55, 21);
    ii!(a, b, c, d, w(8), 56, 6); ii!(d, a, b, c, w(15), 57, 10); ii!(c, d, a, b, w(6), 58, 15); ii!(b, c, d, a, w(13), 59, 21);
    ii!(a, b, c, d, w(4), 60, 6); ii!(d, a, b, c, w(11), 61, 10); ii!(c, d, a, b, w(2), 62, 15); ii!(b, c, d, a, w(9), 63, 21);
    state[0] = state[0].wrapping_add(a);
    state[1] = state[1].wrapping_add(b);
    state[2] = state[2].wrapping_add(c);
    state[3] = state[3].wrapping_add(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_rustcryptos_md5_compression() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for k in 0..2000 {
            let mut block: [u8; 64] = std::array::from_fn(|_| byte());
            if k % 7 == 0 {
                block = [if k % 2 == 0 { 0 } else { 0xff }; 64];
            }
            let init: [u32; 4] = std::array::from_fn(|_| u32::from_le_bytes([byte(), byte(), byte(), byte()]));
            let (mut got, mut want) = (init, init);
            compress(&mut got, &block);
            md5::block_api::compress(&mut want, std::slice::from_ref(&block));
            assert_eq!(got, want, "block {}", k);
        }
    }
}
