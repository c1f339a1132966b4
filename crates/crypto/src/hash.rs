//! The tree/MAC hash: MD5, SHA-1 or SHA-256, truncated to the configured size.
//!
//! The seeds use 128-bit hashes (MD5 length); a longer function truncated to `bytes` keeps
//! the tree layout independent of the algorithm.
//!
//! `md5` is the hash unit of seeds 000/003: MD5's compression function applied to the
//! input's 512-bit blocks from MD5's initial value, with no length padding, since every
//! input a scheme hashes has one fixed length (003 §5.2, footnote 10). A 64-byte chunk costs
//! one compression, as in their hardware. `md5-rfc1321` is the padded standard MD5.

use md5::Digest;

pub const MAX_HASH_BYTES: usize = 32;

const MD5_IV: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlg {
    Md5,
    Md5Rfc1321,
    Sha1,
    Sha256,
}

impl HashAlg {
    pub fn parse(s: &str) -> Option<HashAlg> {
        match s.to_ascii_lowercase().as_str() {
            "md5" => Some(HashAlg::Md5),
            "md5-rfc1321" => Some(HashAlg::Md5Rfc1321),
            "sha1" | "sha-1" => Some(HashAlg::Sha1),
            "sha256" | "sha-256" => Some(HashAlg::Sha256),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Md5 => "md5",
            HashAlg::Md5Rfc1321 => "md5-rfc1321",
            HashAlg::Sha1 => "sha1",
            HashAlg::Sha256 => "sha256",
        }
    }

    /// Full digest length of the function.
    pub fn digest_bytes(self) -> usize {
        match self {
            HashAlg::Md5 | HashAlg::Md5Rfc1321 => 16,
            HashAlg::Sha1 => 20,
            HashAlg::Sha256 => 32,
        }
    }
}

/// An MD5 state's first `out.len()` digest bytes.
#[inline]
fn md5_out(state: &[u32; 4], out: &mut [u8]) {
    let mut d = [0u8; 16];
    for (i, w) in state.iter().enumerate() {
        d[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out.copy_from_slice(&d[..out.len()]);
}

/// A hash function truncated to `bytes` (1..=digest length).
#[derive(Clone, Copy, Debug)]
pub struct Hasher {
    alg: HashAlg,
    bytes: usize,
}

impl Hasher {
    pub fn new(alg: HashAlg, bytes: usize) -> Result<Hasher, String> {
        if bytes == 0 || bytes > alg.digest_bytes() {
            return Err(format!(
                "hash size {} bytes is not possible with {} (1..={} bytes)",
                bytes,
                alg.name(),
                alg.digest_bytes()
            ));
        }
        Ok(Hasher { alg, bytes })
    }

    pub fn alg(&self) -> HashAlg {
        self.alg
    }

    /// Output length in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Hash the concatenation of `parts` into `out[..len()]`.
    pub fn hash_parts(&self, parts: &[&[u8]], out: &mut [u8]) {
        let n = self.bytes;
        match self.alg {
            HashAlg::Md5 => {
                let mut state = MD5_IV;
                if let [one] = parts {
                    if let Ok(block) = <&[u8; 64]>::try_from(*one) {
                        // One chunk, one compression: every tree node and data chunk.
                        md5::block_api::compress(&mut state, std::slice::from_ref(block));
                        md5_out(&state, &mut out[..n]);
                        return;
                    }
                }
                let mut block = [0u8; 64];
                let mut fill = 0;
                for p in parts {
                    let mut p: &[u8] = p;
                    if fill == 0 {
                        // Whole blocks straight from the input.
                        let whole = p.len() / 64 * 64;
                        let (blocks, rest) = p[..whole].as_chunks::<64>();
                        debug_assert!(rest.is_empty());
                        md5::block_api::compress(&mut state, blocks);
                        p = &p[whole..];
                    }
                    while !p.is_empty() {
                        let n = (64 - fill).min(p.len());
                        block[fill..fill + n].copy_from_slice(&p[..n]);
                        fill += n;
                        p = &p[n..];
                        if fill == 64 {
                            md5::block_api::compress(&mut state, std::slice::from_ref(&block));
                            fill = 0;
                        }
                    }
                }
                if fill > 0 {
                    // A short last block is zero-filled (fixed-length inputs need no length).
                    block[fill..].fill(0);
                    md5::block_api::compress(&mut state, std::slice::from_ref(&block));
                }
                md5_out(&state, &mut out[..n]);
            }
            HashAlg::Md5Rfc1321 => {
                let mut h = md5::Md5::new();
                for p in parts {
                    h.update(p);
                }
                out[..n].copy_from_slice(&h.finalize()[..n]);
            }
            HashAlg::Sha1 => {
                let mut h = sha1::Sha1::new();
                for p in parts {
                    h.update(p);
                }
                out[..n].copy_from_slice(&h.finalize()[..n]);
            }
            HashAlg::Sha256 => {
                let mut h = sha2::Sha256::new();
                for p in parts {
                    h.update(p);
                }
                out[..n].copy_from_slice(&h.finalize()[..n]);
            }
        }
    }

    #[inline]
    pub fn hash(&self, data: &[u8], out: &mut [u8]) {
        self.hash_parts(&[data], out)
    }

    /// Hash each of `inputs` into the matching `outs[i][..len()]`: the same as `hash` each.
    /// One-block MD5 inputs (64-byte chunks) go four at a time through `md5x4`, which a
    /// single chain of compressions leaves mostly idle.
    pub fn hash_each(&self, inputs: &[&[u8]], outs: &mut [[u8; MAX_HASH_BYTES]]) {
        debug_assert_eq!(inputs.len(), outs.len());
        if self.alg != HashAlg::Md5 || inputs.len() < 2 || inputs.iter().any(|i| i.len() != 64) {
            for (i, o) in inputs.iter().zip(outs.iter_mut()) {
                self.hash(i, o);
            }
            return;
        }
        for (group, outs) in inputs.chunks(4).zip(outs.chunks_mut(4)) {
            // A short last group repeats its first block in the idle lanes.
            let block = |l: usize| -> &[u8; 64] { group[if l < group.len() { l } else { 0 }].try_into().unwrap() };
            let mut states = [MD5_IV; 4];
            crate::md5x4::compress4(&mut states, [block(0), block(1), block(2), block(3)]);
            for (o, st) in outs.iter_mut().zip(states) {
                for (i, w) in st.iter().enumerate() {
                    let b = w.to_le_bytes();
                    let n = self.bytes.saturating_sub(i * 4).min(4);
                    o[i * 4..i * 4 + n].copy_from_slice(&b[..n]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn rfc1321_md5_abc() {
        let mut out = [0u8; 16];
        Hasher::new(HashAlg::Md5Rfc1321, 16).unwrap().hash(b"abc", &mut out);
        assert_eq!(out.to_vec(), hex("900150983cd24fb0d6963f7d28e17f72"));
    }

    #[test]
    fn md5_block_hash_is_the_real_md5_compression_function() {
        // One compression of RFC 1321's padded block for "abc" is MD5("abc").
        let mut block = [0u8; 64];
        block[..3].copy_from_slice(b"abc");
        block[3] = 0x80;
        block[56] = 24; // bit length, little endian
        let mut out = [0u8; 16];
        Hasher::new(HashAlg::Md5, 16).unwrap().hash_parts(&[&block[..40], &block[40..]], &mut out);
        assert_eq!(out.to_vec(), hex("900150983cd24fb0d6963f7d28e17f72"));
    }

    #[test]
    fn md5_block_hash_chains_blocks_and_zero_fills_the_last() {
        let h = Hasher::new(HashAlg::Md5, 16).unwrap();
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        h.hash(&[7u8; 100], &mut a);
        let mut padded = [7u8; 128];
        padded[100..].fill(0);
        h.hash(&padded, &mut b);
        assert_eq!(a, b);
        h.hash(&[7u8; 64], &mut b);
        assert_ne!(a, b, "the second block is chained in");
    }

    #[test]
    fn hashing_each_of_a_batch_is_hashing_them_one_by_one() {
        let blocks: Vec<[u8; 64]> = (0..9u8).map(|k| std::array::from_fn(|i| (i as u8).wrapping_mul(31) ^ k)).collect();
        for (alg, bytes) in [(HashAlg::Md5, 16), (HashAlg::Md5, 8), (HashAlg::Md5, 5), (HashAlg::Sha256, 32), (HashAlg::Md5Rfc1321, 16)] {
            let h = Hasher::new(alg, bytes).unwrap();
            for n in 0..=blocks.len() {
                for len in [64usize, 40] {
                    let inputs: Vec<&[u8]> = blocks[..n].iter().map(|b| &b[..len]).collect();
                    let mut got = vec![[0xaau8; MAX_HASH_BYTES]; n];
                    h.hash_each(&inputs, &mut got);
                    for (i, g) in got.iter().enumerate() {
                        let mut want = [0xaau8; MAX_HASH_BYTES];
                        h.hash(inputs[i], &mut want);
                        assert_eq!(g[..bytes], want[..bytes], "{:?}/{} input {} of {} ({} B)", alg, bytes, i, n, len);
                    }
                }
            }
        }
    }

    #[test]
    fn fips180_sha1_and_sha256_abc_truncated() {
        let mut out = [0u8; 32];
        Hasher::new(HashAlg::Sha1, 20).unwrap().hash(b"abc", &mut out);
        assert_eq!(out[..20].to_vec(), hex("a9993e364706816aba3e25717850c26c9cd0d89d"));
        let mut out = [0u8; 32];
        Hasher::new(HashAlg::Sha256, 16).unwrap().hash_parts(&[b"a", b"bc"], &mut out);
        assert_eq!(out[..16].to_vec(), hex("ba7816bf8f01cfea414140de5dae2223"));
        assert_eq!(out[16..], [0u8; 16], "truncation must not write past the size");
    }

    #[test]
    fn oversized_truncation_is_refused() {
        assert!(Hasher::new(HashAlg::Md5, 20).is_err());
        assert!(Hasher::new(HashAlg::Sha1, 0).is_err());
    }
}
