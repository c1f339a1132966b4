//! Triple-DES EDE with three keys (FIPS 46-3), table-driven.
//!
//! RustCrypto's `des::TdesEde3` is the reference; it takes ~800 ns per 64-bit block here, and a
//! line needs nine, which would make the simulator several times slower than its speed target.
//! `FastTdes` is the classic table-driven form of the same cipher (S-boxes fused with P into SP
//! tables, E folded into two rotations, inner IP/FP pairs cancelled), checked bit for bit
//! against `des::TdesEde3` by the tests and by `agrees_with_rustcrypto` at every key set-up.

use des::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use des::TdesEde3;
use std::sync::OnceLock;

/// FIPS 46-3 tables (bit 1 is the most significant).
const IP: [u8; 64] = [
    58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
    57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3, 61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
];
const P: [u8; 32] = [16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10, 2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25];
const PC1: [u8; 56] = [
    57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36, 63, 55, 47, 39,
    31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
];
const PC2: [u8; 48] = [
    14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2, 41, 52, 31, 37, 47, 55, 30, 40, 51,
    45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
];
const SHIFTS: [u32; 16] = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1];
/// The eight S-boxes indexed directly by their 6-bit input (as laid out in RustCrypto `des`).
#[rustfmt::skip]
const SBOXES: [[u8; 64]; 8] = [
    [14, 0, 4, 15, 13, 7, 1, 4, 2, 14, 15, 2, 11, 13, 8, 1, 3, 10, 10, 6, 6, 12, 12, 11, 5, 9, 9, 5, 0, 3, 7, 8,
     4, 15, 1, 12, 14, 8, 8, 2, 13, 4, 6, 9, 2, 1, 11, 7, 15, 5, 12, 11, 9, 3, 7, 14, 3, 10, 10, 0, 5, 6, 0, 13],
    [15, 3, 1, 13, 8, 4, 14, 7, 6, 15, 11, 2, 3, 8, 4, 14, 9, 12, 7, 0, 2, 1, 13, 10, 12, 6, 0, 9, 5, 11, 10, 5,
     0, 13, 14, 8, 7, 10, 11, 1, 10, 3, 4, 15, 13, 4, 1, 2, 5, 11, 8, 6, 12, 7, 6, 12, 9, 0, 3, 5, 2, 14, 15, 9],
    [10, 13, 0, 7, 9, 0, 14, 9, 6, 3, 3, 4, 15, 6, 5, 10, 1, 2, 13, 8, 12, 5, 7, 14, 11, 12, 4, 11, 2, 15, 8, 1,
     13, 1, 6, 10, 4, 13, 9, 0, 8, 6, 15, 9, 3, 8, 0, 7, 11, 4, 1, 15, 2, 14, 12, 3, 5, 11, 10, 5, 14, 2, 7, 12],
    [7, 13, 13, 8, 14, 11, 3, 5, 0, 6, 6, 15, 9, 0, 10, 3, 1, 4, 2, 7, 8, 2, 5, 12, 11, 1, 12, 10, 4, 14, 15, 9,
     10, 3, 6, 15, 9, 0, 0, 6, 12, 10, 11, 1, 7, 13, 13, 8, 15, 9, 1, 4, 3, 5, 14, 11, 5, 12, 2, 7, 8, 2, 4, 14],
    [2, 14, 12, 11, 4, 2, 1, 12, 7, 4, 10, 7, 11, 13, 6, 1, 8, 5, 5, 0, 3, 15, 15, 10, 13, 3, 0, 9, 14, 8, 9, 6,
     4, 11, 2, 8, 1, 12, 11, 7, 10, 1, 13, 14, 7, 2, 8, 13, 15, 6, 9, 15, 12, 0, 5, 9, 6, 10, 3, 4, 0, 5, 14, 3],
    [12, 10, 1, 15, 10, 4, 15, 2, 9, 7, 2, 12, 6, 9, 8, 5, 0, 6, 13, 1, 3, 13, 4, 14, 14, 0, 7, 11, 5, 3, 11, 8,
     9, 4, 14, 3, 15, 2, 5, 12, 2, 9, 8, 5, 12, 15, 3, 10, 7, 11, 0, 14, 4, 1, 10, 7, 1, 6, 13, 0, 11, 8, 6, 13],
    [4, 13, 11, 0, 2, 11, 14, 7, 15, 4, 0, 9, 8, 1, 13, 10, 3, 14, 12, 3, 9, 5, 7, 12, 5, 2, 10, 15, 6, 8, 1, 6,
     1, 6, 4, 11, 11, 13, 13, 8, 12, 1, 3, 4, 7, 10, 14, 7, 10, 9, 15, 5, 6, 0, 8, 15, 0, 14, 5, 2, 9, 3, 2, 12],
    [13, 1, 2, 15, 8, 13, 4, 8, 6, 10, 15, 3, 11, 7, 1, 4, 10, 12, 9, 5, 3, 6, 14, 11, 5, 0, 0, 14, 12, 9, 7, 2,
     7, 2, 11, 1, 4, 14, 1, 7, 9, 4, 12, 10, 14, 8, 2, 13, 0, 15, 6, 12, 10, 9, 13, 0, 15, 3, 3, 5, 5, 6, 8, 11],
];

/// Output bit j (from the top) is input bit `table[j]` of an `in_bits`-wide value.
fn permute(x: u64, in_bits: u32, table: &[u8]) -> u64 {
    table.iter().fold(0u64, |out, &b| (out << 1) | ((x >> (in_bits - b as u32)) & 1))
}

struct Tables {
    ip: [[u64; 256]; 8],
    fp: [[u64; 256]; 8],
    /// S-box i fused with P, indexed by the 6-bit input (256 entries: a byte index needs no bounds check).
    sp: [[u32; 256]; 8],
}

fn tables() -> &'static Tables {
    static T: OnceLock<Box<Tables>> = OnceLock::new();
    T.get_or_init(|| {
        let mut fp_table = [0u8; 64];
        for (j, &b) in IP.iter().enumerate() {
            fp_table[b as usize - 1] = j as u8 + 1;
        }
        let mut t = Box::new(Tables { ip: [[0; 256]; 8], fp: [[0; 256]; 8], sp: [[0; 256]; 8] });
        for byte in 0..8 {
            for v in 0..256u64 {
                let x = v << (56 - 8 * byte);
                t.ip[byte][v as usize] = permute(x, 64, &IP);
                t.fp[byte][v as usize] = permute(x, 64, &fp_table);
            }
        }
        for (i, sbox) in SBOXES.iter().enumerate() {
            for v in 0..64 {
                t.sp[i][v] = permute((sbox[v] as u64) << (28 - 4 * i), 32, &P) as u32;
            }
        }
        t
    })
}

/// Blocks enciphered side by side (a 64-B line is eight).
const LANES: usize = 8;

/// One DES key's 16 round keys, each split for the rotated halves: (groups 1,3,5,7; 0,2,4,6).
type RoundKeys = [(u32, u32); 16];

fn round_keys(key: u64) -> RoundKeys {
    let cd = permute(key, 64, &PC1);
    let (mut c, mut d) = ((cd >> 28) as u32, (cd & 0x0FFF_FFFF) as u32);
    let mut ks = [(0, 0); 16];
    for (r, k) in ks.iter_mut().enumerate() {
        let rot = |x: u32| ((x << SHIFTS[r]) | (x >> (28 - SHIFTS[r]))) & 0x0FFF_FFFF;
        (c, d) = (rot(c), rot(d));
        let k48 = permute(((c as u64) << 28) | d as u64, 56, &PC2);
        let g = |i: u32| ((k48 >> (42 - 6 * i)) & 63) as u32;
        *k = ((g(1) << 24) | (g(3) << 16) | (g(5) << 8) | g(7), (g(0) << 24) | (g(2) << 16) | (g(4) << 8) | g(6));
    }
    ks
}

/// Triple-DES EDE3, bit-identical to `des::TdesEde3`.
#[derive(Clone)]
pub struct FastTdes {
    t: &'static Tables,
    k: [RoundKeys; 3],
}

impl FastTdes {
    pub fn new(key: &[u8; 24]) -> FastTdes {
        let k = |i: usize| round_keys(u64::from_be_bytes(key[8 * i..8 * i + 8].try_into().unwrap()));
        FastTdes { t: tables(), k: [k(0), k(1), k(2)] }
    }

    #[inline(always)]
    fn f(&self, r: u32, k: (u32, u32)) -> u32 {
        let sp = &self.t.sp;
        // Round keys keep each 6-bit group in its own byte: mask once, index by bytes.
        let x = (r.rotate_left(1) ^ k.0) & 0x3F3F_3F3F;
        let y = (r.rotate_right(3) ^ k.1) & 0x3F3F_3F3F;
        let (x, y) = (x.to_le_bytes(), y.to_le_bytes());
        sp[0][y[3] as usize]
            ^ sp[2][y[2] as usize]
            ^ sp[4][y[1] as usize]
            ^ sp[6][y[0] as usize]
            ^ sp[1][x[3] as usize]
            ^ sp[3][x[2] as usize]
            ^ sp[5][x[1] as usize]
            ^ sp[7][x[0] as usize]
    }

    /// Sixteen rounds on an IP-permuted block; returns the swapped pre-output.
    #[inline(always)]
    fn rounds(&self, v: u64, ks: &RoundKeys, decrypt: bool) -> u64 {
        let (mut l, mut r) = ((v >> 32) as u32, v as u32);
        for i in 0..16 {
            let k = ks[if decrypt { 15 - i } else { i }];
            (l, r) = (r, l ^ self.f(r, k));
        }
        ((r as u64) << 32) | l as u64
    }

    #[inline(always)]
    fn perm(tab: &[[u64; 256]; 8], x: u64) -> u64 {
        let b = x.to_be_bytes();
        (0..8).fold(0, |acc, i| acc ^ tab[i][b[i] as usize])
    }

    #[inline]
    pub fn encrypt_u64(&self, x: u64) -> u64 {
        let v = Self::perm(&self.t.ip, x);
        let v = self.rounds(v, &self.k[0], false);
        let v = self.rounds(v, &self.k[1], true);
        let v = self.rounds(v, &self.k[2], false);
        Self::perm(&self.t.fp, v)
    }

    #[inline]
    pub fn decrypt_u64(&self, x: u64) -> u64 {
        let v = Self::perm(&self.t.ip, x);
        let v = self.rounds(v, &self.k[2], true);
        let v = self.rounds(v, &self.k[1], false);
        let v = self.rounds(v, &self.k[0], true);
        Self::perm(&self.t.fp, v)
    }

    /// Sixteen rounds on LANES independent blocks at once (lets the CPU overlap them).
    #[inline(always)]
    fn rounds_lanes(&self, v: &mut [u64; LANES], ks: &RoundKeys, decrypt: bool) {
        let mut l = [0u32; LANES];
        let mut r = [0u32; LANES];
        for j in 0..LANES {
            (l[j], r[j]) = ((v[j] >> 32) as u32, v[j] as u32);
        }
        for i in 0..16 {
            let k = ks[if decrypt { 15 - i } else { i }];
            for j in 0..LANES {
                let f = self.f(r[j], k);
                (l[j], r[j]) = (r[j], l[j] ^ f);
            }
        }
        for j in 0..LANES {
            v[j] = ((r[j] as u64) << 32) | l[j] as u64;
        }
    }

    fn crypt(&self, buf: &mut [u8], decrypt: bool) {
        for group in buf.chunks_mut(8 * LANES) {
            let n = group.len() / 8;
            let mut v = [0u64; LANES];
            for (j, c) in group.chunks_exact(8).enumerate() {
                v[j] = Self::perm(&self.t.ip, u64::from_be_bytes(c.try_into().unwrap()));
            }
            let order: [(usize, bool); 3] =
                if decrypt { [(2, true), (1, false), (0, true)] } else { [(0, false), (1, true), (2, false)] };
            for (k, d) in order {
                self.rounds_lanes(&mut v, &self.k[k], d);
            }
            for (j, c) in group.chunks_exact_mut(8).enumerate().take(n) {
                c.copy_from_slice(&Self::perm(&self.t.fp, v[j]).to_be_bytes());
            }
        }
    }

    /// Encrypt whole 8-B blocks in place (big-endian, as `des::TdesEde3`).
    pub fn encrypt_blocks(&self, buf: &mut [u8]) {
        self.crypt(buf, false)
    }

    pub fn decrypt_blocks(&self, buf: &mut [u8]) {
        self.crypt(buf, true)
    }
}

/// `FastTdes` and RustCrypto's `TdesEde3` agree on this key (both directions, a few blocks).
pub fn agrees_with_rustcrypto(key: &[u8; 24]) -> bool {
    let (fast, rc) = (FastTdes::new(key), TdesEde3::new(key.into()));
    (0..4u64).all(|i| {
        let x = 0x0123_4567_89AB_CDEFu64.wrapping_mul(i + 1) ^ i;
        let mut b = x.to_be_bytes();
        rc.encrypt_block((&mut b).into());
        let mut d = b;
        rc.decrypt_block((&mut d).into());
        fast.encrypt_u64(x) == u64::from_be_bytes(b) && fast.decrypt_u64(u64::from_be_bytes(b)) == u64::from_be_bytes(d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;


    fn blocks(buf: &mut [u8]) -> &mut [des::cipher::array::Array<u8, des::cipher::consts::U8>] {
        des::cipher::array::Array::slice_as_chunks_mut(buf).0
    }

    /// NIST SP 800-67 Rev. 1 Appendix B (three distinct keys), SP 800-20 Table A.1 (variable
    /// plaintext, first entry) and the classic DES example (K1 = K2 = K3 is single DES).
    #[test]
    fn nist_tdes_vectors() {
        let cases = [
            (
                "0123456789ABCDEF 23456789ABCDEF01 456789ABCDEF0123",
                "5468652071756663 6B2062726F776E20 666F78206A756D70",
                "A826FD8CE53B855F CCE21C8112256FE6 68D5C05DD9B6B900",
            ),
            ("0101010101010101 0101010101010101 0101010101010101", "8000000000000000", "95F8A5E5DD31D900"),
            ("133457799BBCDFF1 133457799BBCDFF1 133457799BBCDFF1", "0123456789ABCDEF", "85E813540F0AB405"),
        ];
        for (k, p, want) in cases {
            let key: [u8; 24] = hex(k).try_into().unwrap();
            // RustCrypto's reference...
            let rc = TdesEde3::new(&key.into());
            let mut got = hex(p);
            rc.encrypt_blocks(blocks(&mut got));
            assert_eq!(got, hex(want), "des::TdesEde3, key {}", k);
            rc.decrypt_blocks(blocks(&mut got));
            assert_eq!(got, hex(p));
            // ...and the table-driven cipher the scheme uses.
            let fast = FastTdes::new(&key);
            let mut got = hex(p);
            fast.encrypt_blocks(&mut got);
            assert_eq!(got, hex(want), "FastTdes, key {}", k);
            fast.decrypt_blocks(&mut got);
            assert_eq!(got, hex(p));
        }
    }

    #[test]
    fn table_driven_tdes_matches_rustcrypto_on_random_keys_and_blocks() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let mut key = [0u8; 24];
            for c in key.chunks_mut(8) {
                c.copy_from_slice(&next().to_be_bytes());
            }
            let (fast, rc) = (FastTdes::new(&key), TdesEde3::new(&key.into()));
            let mut a: Vec<u8> = (0..8).flat_map(|_| next().to_be_bytes()).collect();
            let mut b = a.clone();
            fast.encrypt_blocks(&mut a);
            rc.encrypt_blocks(blocks(&mut b));
            assert_eq!(a, b, "encrypt, key {:x?}", key);
            fast.decrypt_blocks(&mut a);
            rc.decrypt_blocks(blocks(&mut b));
            assert_eq!(a, b, "decrypt");
        }
    }
}
