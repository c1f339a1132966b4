//! The pad R_T = SC(K_T, A, I) of 001 §4: keystream of a cipher keyed with K_T whose IV is
//! the block address A and the program id I, so every (program, block) has its own pad and
//! the processor can make it during the memory latency, before the block arrives (§4.1).
//!
//! Two generators (§8.2, Table 4):
//! - `pr-trivium`: Trivium with K_T's first 80 bits and the 80-bit IV A[0..48] ‖ I (the
//!   address's low 48 bits, little-endian, then the id): distinct for every block of every
//!   program as long as addresses stay below 2^48 (x86-64 and MIPS32 user space do).
//! - `pr-aes`: AES-128 in counter mode (RustCrypto `aes` + `ctr`) with the initial counter
//!   block I ‖ A ‖ 0^32 (big-endian), the low 32 bits counting 16-byte keystream blocks.

use crate::error::{Error, Result};
use crate::keys::Keys;
use aes::cipher::{InnerIvInit, KeyInit, StreamCipher};
use ctr::cipher::StreamCipherCoreWrapper;
use secmem_crypto::Trivium;

/// Which cipher makes the pad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PadKind {
    Trivium,
    Aes,
}

impl PadKind {
    pub const ALL: [PadKind; 2] = [PadKind::Trivium, PadKind::Aes];

    /// The scheme names: PR hashing with this pad.
    pub fn name(self) -> &'static str {
        match self {
            PadKind::Trivium => "pr-trivium",
            PadKind::Aes => "pr-aes",
        }
    }

    pub fn from_name(s: &str) -> Result<PadKind> {
        PadKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            Error::Param(format!("unknown pad generator {s:?} (choose pr-trivium or pr-aes)"))
        })
    }

    /// The byte a tag file stores.
    pub fn code(self) -> u8 {
        match self {
            PadKind::Trivium => 1,
            PadKind::Aes => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<PadKind> {
        PadKind::ALL.into_iter().find(|k| k.code() == c)
    }
}

/// Addresses a Trivium IV can hold.
pub const MAX_ADDR: u64 = 1 << 48;

#[derive(Clone)]
pub enum Pad {
    Trivium([u8; 10]),
    /// The expanded AES key, kept so a pad costs no key schedule.
    Aes(Box<aes::Aes128>),
}

type AesCtr = ctr::Ctr32BE<aes::Aes128>;

/// AES-CTR from an already expanded key (no key schedule per pad).
fn aes_ctr(cipher: &aes::Aes128, iv: [u8; 16]) -> AesCtr {
    StreamCipherCoreWrapper::from_core(ctr::CtrCore::inner_iv_init(cipher.clone(), &iv.into()))
}

impl Pad {
    pub fn new(kind: PadKind, keys: &Keys) -> Pad {
        match kind {
            PadKind::Trivium => Pad::Trivium(keys.kt[..10].try_into().unwrap()),
            PadKind::Aes => Pad::Aes(Box::new(aes::Aes128::new(&keys.kt.into()))),
        }
    }

    pub fn kind(&self) -> PadKind {
        match self {
            Pad::Trivium(_) => PadKind::Trivium,
            Pad::Aes(_) => PadKind::Aes,
        }
    }

    /// Fill `out` with the keystream for block address `addr` of program `pid`.
    pub fn fill(&self, pid: u32, addr: u64, out: &mut [u8]) -> Result<()> {
        match self {
            Pad::Trivium(key) => {
                if addr >= MAX_ADDR {
                    return Err(Error::Param(format!("block {addr:#x}: addresses must be below 2^48 for the Trivium IV")));
                }
                let mut iv = [0u8; 10];
                iv[..6].copy_from_slice(&addr.to_le_bytes()[..6]);
                iv[6..].copy_from_slice(&pid.to_le_bytes());
                Trivium::new(key, &iv).fill(out);
            }
            Pad::Aes(cipher) => {
                let mut iv = [0u8; 16];
                iv[..4].copy_from_slice(&pid.to_be_bytes());
                iv[4..12].copy_from_slice(&addr.to_be_bytes());
                out.fill(0);
                aes_ctr(cipher, iv).apply_keystream(out);
            }
        }
        Ok(())
    }

    /// The first `bytes` (≤ 16) keystream bytes as a little-endian integer: R_T.
    #[inline]
    pub fn pad(&self, pid: u32, addr: u64, bytes: usize) -> Result<u128> {
        let mut b = [0u8; 16];
        self.fill(pid, addr, &mut b[..bytes])?;
        Ok(u128::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn aes_ctr_is_sp800_38a_f5_1() {
        // NIST SP 800-38A F.5.1 CTR-AES128.Encrypt: the counter block f0f1…fcfdfeff is
        // I = f0f1f2f3, A = f4f5f6f7f8f9fafb, low word fcfdfeff; the keystream is the ciphertext
        // XOR the plaintext. (The low word starts at fcfdfeff there, so the vector is checked
        // through `ctr` directly, and `Pad::fill` for its zero low word below.)
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let mut data = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
        let iv: [u8; 16] = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff").try_into().unwrap();
        aes_ctr(&aes::Aes128::new(&key.into()), iv).apply_keystream(&mut data);
        assert_eq!(data, hex("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"));
    }

    #[test]
    fn aes_pad_is_aes_of_the_counter_block() {
        let keys = Keys::derive(b"k");
        let pad = Pad::new(PadKind::Aes, &keys);
        let mut out = [0u8; 32];
        pad.fill(7, 0x40_1000, &mut out).unwrap();
        let aes = secmem_crypto::Aes128::new(&keys.kt);
        let mut b0 = [0u8; 16];
        b0[..4].copy_from_slice(&7u32.to_be_bytes());
        b0[4..12].copy_from_slice(&0x40_1000u64.to_be_bytes());
        let mut b1 = b0;
        b1[15] = 1;
        aes.encrypt(&mut b0);
        aes.encrypt(&mut b1);
        assert_eq!(out[..16], b0);
        assert_eq!(out[16..], b1);
    }

    #[test]
    fn trivium_pad_is_the_keystream_for_address_and_id() {
        let keys = Keys::derive(b"k");
        let pad = Pad::new(PadKind::Trivium, &keys);
        let mut iv = [0u8; 10];
        iv[..6].copy_from_slice(&0x40_1040u64.to_le_bytes()[..6]);
        iv[6..].copy_from_slice(&9u32.to_le_bytes());
        let mut want = [0u8; 16];
        Trivium::new(&keys.kt[..10].try_into().unwrap(), &iv).fill(&mut want);
        assert_eq!(pad.pad(9, 0x40_1040, 16).unwrap(), u128::from_le_bytes(want));
        // Every input moves the pad.
        let p = |pid, a| pad.pad(pid, a, 16).unwrap();
        assert_ne!(p(9, 0x40_1040), p(10, 0x40_1040));
        assert_ne!(p(9, 0x40_1040), p(9, 0x40_1080));
        assert!(pad.pad(9, MAX_ADDR, 16).is_err());
    }

    #[test]
    fn names_round_trip() {
        for k in PadKind::ALL {
            assert_eq!(PadKind::from_name(k.name()).unwrap(), k);
            assert_eq!(PadKind::from_code(k.code()), Some(k));
        }
        assert!(PadKind::from_name("pr-rc4").is_err());
    }
}
