//! Cryptographic primitives used by the protection schemes.
//!
//! Everything standard comes from RustCrypto; this crate only fixes the shapes the schemes
//! need (a truncated hash of a configured function, an AES-128 block function) so that a
//! scheme never depends on a concrete algorithm. What no maintained crate offers is written
//! here and tested against published vectors: multiset hashes, Trivium, GF(2^w) and the PR hash.
//! MD5's compression is also written out four lanes at once (`md5x4`, which no crate offers),
//! tested against RustCrypto's.

pub mod aes128;
pub mod gf2w;
pub mod hash;
pub mod md5x4;
pub mod modes;
pub mod multiset;
pub mod pr;
pub mod tdes;
#[cfg(test)]
mod testutil;
pub mod trivium;

pub use aes128::Aes128;
pub use hash::{HashAlg, Hasher, MAX_HASH_BYTES};
pub use gf2w::Field;
pub use multiset::{AddHash, MuHash, Multiset, MultisetHash, XorHash, MULTISET_HASHES};
pub use trivium::Trivium;
