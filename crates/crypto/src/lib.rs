//! Cryptographic primitives used by the protection schemes.
//!
//! Everything standard comes from RustCrypto; this crate only fixes the shapes the schemes
//! need (a truncated hash of a configured function, an AES-128 block function) so that a
//! scheme never depends on a concrete algorithm. What no maintained crate offers is written
//! here and tested against published vectors: multiset hashes, Trivium, GF(2^w) and the PR hash.

pub mod aes128;
pub mod gf2w;
pub mod hash;
pub mod md5x4;
pub mod multiset;
pub mod pr;
pub mod trivium;

pub use aes128::Aes128;
pub use hash::{HashAlg, Hasher, MAX_HASH_BYTES};
pub use gf2w::Field;
pub use multiset::{AddHash, MuHash, Multiset, MultisetHash, XorHash, MULTISET_HASHES};
pub use trivium::Trivium;

/// Test inputs without a dependency: xorshift64*.
#[cfg(test)]
pub(crate) struct TestRng(pub u64);

#[cfg(test)]
impl TestRng {
    pub fn u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u64() as u8).collect()
    }
}
