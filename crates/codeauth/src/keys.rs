//! The two secret keys of 001 §4 ("Key Distribution"): K_U selects the PR hash function and
//! K_T keys the stream cipher that makes the pad R_T. They live in the processor (and at the
//! Trusted Software Repository, or with the software owner in the shared-key variant of §3).
//!
//! K_U is as long as the longest message needs: PR takes one key word per message word, and a
//! 256-B block with its 4-B program id and 8-B address is 268 B, i.e. 288 key bytes at w = 128
//! (272 at w = 64, 280 at w = 80). K_T is 128 bits: AES-128 uses all of it, Trivium its first
//! 80 (10 bytes).
//!
//! Key file: `SMCAKEY1` ‖ K_U ‖ K_T ‖ the first 8 bytes of SHA-256 over what precedes (a
//! damaged or truncated file is refused instead of silently giving wrong tags).

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};

pub const KU_BYTES: usize = 288;
pub const KT_BYTES: usize = 16;
/// Random bytes `Keys::from_random` takes.
pub const KEY_BYTES: usize = KU_BYTES + KT_BYTES;
const MAGIC: &[u8; 8] = b"SMCAKEY1";
const FILE_BYTES: usize = 8 + KEY_BYTES + 8;

#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    pub(crate) ku: [u8; KU_BYTES],
    pub(crate) kt: [u8; KT_BYTES],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({})", self.fingerprint_hex()) // never the key itself
    }
}

impl Keys {
    /// Keys from `KEY_BYTES` bytes of a good random source (K_U first, then K_T).
    pub fn from_random(bytes: &[u8]) -> Result<Keys> {
        if bytes.len() != KEY_BYTES {
            return Err(Error::Keys(format!("need {KEY_BYTES} random bytes, got {}", bytes.len())));
        }
        Ok(Keys { ku: bytes[..KU_BYTES].try_into().unwrap(), kt: bytes[KU_BYTES..].try_into().unwrap() })
    }

    /// Keys expanded from a seed (SHA-256 in counter mode): the same seed gives the same keys,
    /// which deterministic simulations and tests need. Not for real secrets unless the seed is.
    pub fn derive(seed: &[u8]) -> Keys {
        let mut out = [0u8; KEY_BYTES];
        for (i, chunk) in out.chunks_mut(32).enumerate() {
            let d = Sha256::new().chain_update(b"secmem-codeauth-derive").chain_update((i as u32).to_le_bytes()).chain_update(seed).finalize();
            chunk.copy_from_slice(&d[..chunk.len()]);
        }
        Keys::from_random(&out).unwrap()
    }

    /// 8 bytes that identify the keys without revealing them: a tag file records the
    /// fingerprint of the keys that made it, so a wrong key is named as such.
    pub fn fingerprint(&self) -> [u8; 8] {
        let d = Sha256::new().chain_update(b"secmem-codeauth-fingerprint").chain_update(self.ku).chain_update(self.kt).finalize();
        d[..8].try_into().unwrap()
    }

    pub fn fingerprint_hex(&self) -> String {
        hex(&self.fingerprint())
    }

    pub fn to_file_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FILE_BYTES);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&self.ku);
        v.extend_from_slice(&self.kt);
        let sum = Sha256::digest(&v);
        v.extend_from_slice(&sum[..8]);
        v
    }

    pub fn from_file_bytes(b: &[u8]) -> Result<Keys> {
        if b.len() < 8 || &b[..8] != MAGIC {
            return Err(Error::Keys("not a secmem code-authentication key file (bad magic)".into()));
        }
        if b.len() != FILE_BYTES {
            return Err(Error::Keys(format!("{} bytes, a key file has {FILE_BYTES} (truncated or padded)", b.len())));
        }
        if Sha256::digest(&b[..FILE_BYTES - 8])[..8] != b[FILE_BYTES - 8..] {
            return Err(Error::Keys("checksum mismatch (the file is damaged)".into()));
        }
        Keys::from_random(&b[8..8 + KEY_BYTES])
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secmem_crypto::{pr, Field};

    #[test]
    fn ku_covers_the_longest_message_at_every_width() {
        let longest = 256 + 4 + 8;
        let need = [Field::GF64, Field::GF80, Field::GF128].map(|f| pr::key_bytes(&f, longest));
        assert_eq!(need, [272, 280, 288]);
        assert_eq!(need.into_iter().max(), Some(KU_BYTES));
    }

    #[test]
    fn key_file_round_trip_and_damage() {
        let k = Keys::derive(b"alice");
        assert_eq!(Keys::derive(b"alice"), k);
        assert_ne!(Keys::derive(b"bob"), k);
        let f = k.to_file_bytes();
        assert_eq!(Keys::from_file_bytes(&f).unwrap(), k);
        assert!(matches!(Keys::from_file_bytes(&f[..100]), Err(Error::Keys(m)) if m.contains("truncated")));
        let mut bad = f.clone();
        bad[50] ^= 1;
        assert!(matches!(Keys::from_file_bytes(&bad), Err(Error::Keys(m)) if m.contains("checksum")));
        assert!(matches!(Keys::from_file_bytes(b"ELF..."), Err(Error::Keys(m)) if m.contains("magic")));
        assert!(!format!("{k:?}").contains(&hex(&k.kt)));
    }
}
