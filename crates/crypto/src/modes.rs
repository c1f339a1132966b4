//! Block-cipher modes the encryption schemes use, from RustCrypto: AES-CBC (direct, 000
//! §4.2) and OCB3 (ocb, 004 §2.1; RFC 7253), in the shapes the schemes need.

use aes::cipher::array::Array;
use aes::cipher::consts::{U12, U16, U8};
use aes::cipher::{BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyInit};
use ocb3::aead::AeadInOut;
use ocb3::Ocb3;

type Block = Array<u8, U16>;

/// CBC-encrypt `buf` (a whole number of 16-B blocks) in place under `aes` with `iv`.
pub fn cbc_encrypt(aes: &aes::Aes128, iv: &[u8; 16], buf: &mut [u8]) {
    let (blocks, rest) = Block::slice_as_chunks_mut(buf);
    debug_assert!(rest.is_empty());
    cbc::Encryptor::<aes::Aes128>::inner_iv_init(aes.clone(), iv.into()).encrypt_blocks(blocks);
}

/// CBC-decrypt `buf` in place.
pub fn cbc_decrypt(aes: &aes::Aes128, iv: &[u8; 16], buf: &mut [u8]) {
    let (blocks, rest) = Block::slice_as_chunks_mut(buf);
    debug_assert!(rest.is_empty());
    cbc::Decryptor::<aes::Aes128>::inner_iv_init(aes.clone(), iv.into()).decrypt_blocks(blocks);
}

/// OCB3-AES128 with a 96-bit nonce and a 64- or 128-bit tag (the tag length is part of
/// OCB3's nonce formatting, so the two are different functions, not one truncated).
#[derive(Clone)]
pub enum OcbAes {
    Tag8(Ocb3<aes::Aes128, U12, U8>),
    Tag16(Ocb3<aes::Aes128, U12, U16>),
}

impl OcbAes {
    pub fn new(key: &[u8; 16], tag_bytes: usize) -> Option<OcbAes> {
        match tag_bytes {
            8 => Some(OcbAes::Tag8(Ocb3::new(key.into()))),
            16 => Some(OcbAes::Tag16(Ocb3::new(key.into()))),
            _ => None,
        }
    }

    pub fn tag_bytes(&self) -> usize {
        match self {
            OcbAes::Tag8(_) => 8,
            OcbAes::Tag16(_) => 16,
        }
    }

    /// Encrypt `buf` in place with associated data `ad`; the tag goes to `tag`.
    pub fn encrypt(&self, nonce: &[u8; 12], ad: &[u8], buf: &mut [u8], tag: &mut [u8]) {
        match self {
            OcbAes::Tag8(c) => tag.copy_from_slice(&c.encrypt_inout_detached(nonce.into(), ad, buf.into()).expect("line fits")),
            OcbAes::Tag16(c) => tag.copy_from_slice(&c.encrypt_inout_detached(nonce.into(), ad, buf.into()).expect("line fits")),
        }
    }

    /// Decrypt `buf` in place; false (and `buf` zeroed) if the tag does not match.
    pub fn decrypt(&self, nonce: &[u8; 12], ad: &[u8], buf: &mut [u8], tag: &[u8]) -> bool {
        let ok = match self {
            OcbAes::Tag8(c) => c.decrypt_inout_detached(nonce.into(), ad, (&mut *buf).into(), tag.try_into().unwrap()).is_ok(),
            OcbAes::Tag16(c) => c.decrypt_inout_detached(nonce.into(), ad, (&mut *buf).into(), tag.try_into().unwrap()).is_ok(),
        };
        if !ok {
            buf.fill(0);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;


    /// NIST SP 800-38A, F.2.1/F.2.2 CBC-AES128.
    #[test]
    fn sp800_38a_cbc_aes128_vectors() {
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let iv: [u8; 16] = hex("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
        let plain = hex(
            "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710",
        );
        let cipher = hex(
            "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2
             73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7",
        );
        let aes = aes::Aes128::new(&key.into());
        let mut buf = plain.clone();
        cbc_encrypt(&aes, &iv, &mut buf);
        assert_eq!(buf, cipher);
        cbc_decrypt(&aes, &iv, &mut buf);
        assert_eq!(buf, plain);
    }

    /// RFC 7253 Appendix A, the sample results for K = 000102…0F (TAGLEN 128).
    #[test]
    fn rfc7253_sample_vectors() {
        let key: [u8; 16] = hex("000102030405060708090A0B0C0D0E0F").try_into().unwrap();
        let c = OcbAes::new(&key, 16).unwrap();
        let cases = [
            ("BBAA99887766554433221100", "", "", "785407BFFFC8AD9EDCC5520AC9111EE6"),
            ("BBAA99887766554433221101", "0001020304050607", "0001020304050607", "6820B3657B6F615A5725BDA0D3B4EB3A257C9AF1F8F03009"),
            ("BBAA99887766554433221102", "0001020304050607", "", "81017F8203F081277152FADE694A0A00"),
            ("BBAA99887766554433221103", "", "0001020304050607", "45DD69F8F5AAE72414054CD1F35D82760B2CD00D2F99BFA9"),
            (
                "BBAA99887766554433221104",
                "000102030405060708090A0B0C0D0E0F",
                "000102030405060708090A0B0C0D0E0F",
                "571D535B60B277188BE5147170A9A22C3AD7A4FF3835B8C5701C1CCEC8FC3358",
            ),
            (
                "BBAA9988776655443322110D",
                "000102030405060708090A0B0C0D0E0F1011121314151617 18191A1B1C1D1E1F2021222324252627",
                "000102030405060708090A0B0C0D0E0F1011121314151617 18191A1B1C1D1E1F2021222324252627",
                "D5CA91748410C1751FF8A2F618255B68A0A12E093FF454606E59F9C1D0DDC54B65E8628E568BAD7A ED07BA06A4A69483A7035490C5769E60",
            ),
        ];
        for (n, a, p, want) in cases {
            let nonce: [u8; 12] = hex(n).try_into().unwrap();
            let (ad, plain, want) = (hex(a), hex(p), hex(want));
            let mut buf = plain.clone();
            let mut tag = [0u8; 16];
            c.encrypt(&nonce, &ad, &mut buf, &mut tag);
            let mut got = buf.clone();
            got.extend_from_slice(&tag);
            assert_eq!(got, want, "nonce {}", n);
            assert!(c.decrypt(&nonce, &ad, &mut buf, &tag));
            assert_eq!(buf, plain);
            tag[3] ^= 1;
            assert!(!c.decrypt(&nonce, &ad, &mut got[..plain.len()], &tag), "forged tag accepted");
        }
    }

    /// RFC 7253 Appendix A, "wider variety" (page 18), AES-128 with 128- and 64-bit tags.
    #[test]
    fn rfc7253_wider_variety() {
        for (tag_bytes, want) in [(16usize, "67E944D23256C5E0B6C61FA22FDF1EA2"), (8, "192C9B7BD90BA06A")] {
            let mut key = [0u8; 16];
            key[15] = 8 * tag_bytes as u8;
            let ocb = OcbAes::new(&key, tag_bytes).unwrap();
            let mut c = Vec::new();
            let num = |i: u32| {
                let mut n = [0u8; 12];
                n[8..].copy_from_slice(&i.to_be_bytes());
                n
            };
            let mut tag = vec![0u8; tag_bytes];
            for i in 0..128usize {
                let s = vec![0u8; i];
                let mut buf = s.clone();
                ocb.encrypt(&num(3 * i as u32 + 1), &s, &mut buf, &mut tag);
                c.extend_from_slice(&buf);
                c.extend_from_slice(&tag);
                let mut buf = s.clone();
                ocb.encrypt(&num(3 * i as u32 + 2), &[], &mut buf, &mut tag);
                c.extend_from_slice(&buf);
                c.extend_from_slice(&tag);
                ocb.encrypt(&num(3 * i as u32 + 3), &s, &mut [], &mut tag);
                c.extend_from_slice(&tag);
            }
            ocb.encrypt(&num(385), &c, &mut [], &mut tag);
            assert_eq!(tag, hex(want), "TAGLEN {}", 8 * tag_bytes);
        }
    }
}
