//! AES-128 as a keyed block function (FIPS-197).

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};

#[derive(Clone)]
pub struct Aes128 {
    cipher: aes::Aes128,
}

impl Aes128 {
    pub fn new(key: &[u8; 16]) -> Self {
        Aes128 { cipher: aes::Aes128::new(key.into()) }
    }

    #[inline]
    pub fn encrypt(&self, block: &mut [u8; 16]) {
        self.cipher.encrypt_block(block.into());
    }

    #[inline]
    pub fn decrypt(&self, block: &mut [u8; 16]) {
        self.cipher.decrypt_block(block.into());
    }

    /// Encrypt several independent blocks (lets AES-NI pipeline them).
    #[inline]
    pub fn encrypt_many(&self, blocks: &mut [[u8; 16]]) {
        // The slice form reaches the backend's parallel path (8 blocks in flight on AES-NI);
        // a loop of single-block calls does not.
        self.cipher.encrypt_blocks(aes::Block::cast_slice_from_core_mut(blocks));
    }

    #[inline]
    pub fn decrypt_many(&self, blocks: &mut [[u8; 16]]) {
        self.cipher.decrypt_blocks(aes::Block::cast_slice_from_core_mut(blocks));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn fips197_appendix_c1_vector() {
        let key: [u8; 16] = hex("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
        let mut b: [u8; 16] = hex("00112233445566778899aabbccddeeff").try_into().unwrap();
        let aes = Aes128::new(&key);
        aes.encrypt(&mut b);
        assert_eq!(b.to_vec(), hex("69c4e0d86a7b0430d8cdb78070b4c55a"));
        aes.decrypt(&mut b);
        assert_eq!(b.to_vec(), hex("00112233445566778899aabbccddeeff"));
    }

    #[test]
    fn sp800_38a_ecb_vector() {
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let mut b = [hex("6bc1bee22e409f96e93d7e117393172a").try_into().unwrap()];
        Aes128::new(&key).encrypt_many(&mut b);
        assert_eq!(b[0].to_vec(), hex("3ad77bb40d7a3660a89ecaf32466ef97"));
    }

    #[test]
    fn many_blocks_at_once_equal_one_at_a_time_across_the_parallel_width() {
        let a = Aes128::new(&[7u8; 16]);
        let mut many: Vec<[u8; 16]> = (0..11u8).map(|i| [i.wrapping_mul(37); 16]).collect();
        let single: Vec<[u8; 16]> = many
            .iter()
            .map(|b| {
                let mut b = *b;
                a.encrypt(&mut b);
                b
            })
            .collect();
        let plain = many.clone();
        a.encrypt_many(&mut many);
        assert_eq!(many, single);
        a.decrypt_many(&mut many);
        assert_eq!(many, plain);
    }
}
