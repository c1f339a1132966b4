//! The authentication tag of 001 §4: T = PR_{K_U}(M) ⊕ R_T with M = L ‖ I ‖ A and
//! R_T = SC(K_T, A, I).
//!
//! M is the block's bytes L, then the program id I as 4 little-endian bytes, then the block's
//! (virtual) address A as 8 little-endian bytes; PR pads it to an even number of w-bit words
//! (`secmem_crypto::pr`). Binding I and A into the hashed message is what refuses splicing (a
//! block moved to another address) and cross-program replay (a block of program I run as
//! program I'); the pad depends on them too.

use crate::error::{Error, Result};
use crate::keys::{Keys, KU_BYTES};
use crate::pad::{Pad, PadKind};
use secmem_crypto::{pr, Field};

/// Tag width w: 128 bits by default (§7), 80 the §5 minimum, 64 for comparison with GCM-style
/// schemes (§9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W64,
    W80,
    W128,
}

impl Width {
    pub const ALL: [Width; 3] = [Width::W64, Width::W80, Width::W128];

    pub fn bits(self) -> u32 {
        match self {
            Width::W64 => 64,
            Width::W80 => 80,
            Width::W128 => 128,
        }
    }

    pub fn from_bits(b: u32) -> Result<Width> {
        Width::ALL.into_iter().find(|w| w.bits() == b).ok_or_else(|| Error::Param(format!("tag width {b} bits: choose 64, 80 or 128")))
    }

    /// Bytes of the tag value.
    pub fn bytes(self) -> usize {
        self.bits() as usize / 8
    }

    /// Bytes a tag occupies in memory: the next power of two, so a memory block holds a whole
    /// number n_T of tags (§6) — an 80-bit tag takes a 16-byte slot.
    pub fn slot(self) -> usize {
        self.bytes().next_power_of_two()
    }

    pub fn field(self) -> Field {
        Field::for_width(self.bits()).unwrap()
    }
}

/// Block sizes a program can be signed for: the cache block sizes of §8 (Table 3).
pub const BLOCK_SIZES: [u32; 5] = [16, 32, 64, 128, 256];
/// Bytes the program id and the address add to a block in M.
pub const ID_BYTES: usize = 4;
pub const ADDR_BYTES: usize = 8;

/// What a program is signed with, besides the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Params {
    pub pad: PadKind,
    pub width: Width,
    /// The block (cache line) size in bytes: one tag per block.
    pub block: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { pad: PadKind::Trivium, width: Width::W128, block: 64 }
    }
}

impl Params {
    pub fn new(pad: PadKind, width: Width, block: u32) -> Result<Params> {
        if !BLOCK_SIZES.contains(&block) {
            return Err(Error::Param(format!("block size {block} B: choose one of 16, 32, 64, 128, 256")));
        }
        Ok(Params { pad, width, block })
    }

    /// Tags per memory block, n_T of §6.
    pub fn tags_per_block(&self) -> u32 {
        self.block / self.width.slot() as u32
    }
}

/// One tag: the low `w` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tag(pub u128);

impl Tag {
    /// The tag as it sits in memory: `width.slot()` bytes, little-endian, zero-filled.
    pub fn to_slot(self, width: Width) -> Vec<u8> {
        self.0.to_le_bytes()[..width.slot()].to_vec()
    }

    /// Read a tag from its memory slot (bytes past the tag value are ignored).
    pub fn from_slot(b: &[u8], width: Width) -> Tag {
        let mut v = [0u8; 16];
        let n = width.bytes().min(b.len());
        v[..n].copy_from_slice(&b[..n]);
        Tag(u128::from_le_bytes(v))
    }
}

/// Makes and checks tags: the processor's authentication unit (and the signer's).
#[derive(Clone)]
pub struct Tagger {
    params: Params,
    field: Field,
    pad: Pad,
    ku: [u8; KU_BYTES],
}

impl Tagger {
    pub fn new(keys: &Keys, params: Params) -> Result<Tagger> {
        let params = Params::new(params.pad, params.width, params.block)?;
        Ok(Tagger { field: params.width.field(), pad: Pad::new(params.pad, keys), ku: keys.ku, params })
    }

    pub fn params(&self) -> Params {
        self.params
    }

    fn check(&self, block: &[u8], addr: u64) -> Result<()> {
        let b = self.params.block as u64;
        if block.len() as u64 != b {
            return Err(Error::Param(format!("block {addr:#x}: {} bytes given, blocks are {b} B", block.len())));
        }
        if addr % b != 0 {
            return Err(Error::Param(format!("block address {addr:#x} is not a multiple of the {b}-B block size")));
        }
        Ok(())
    }

    /// D = PR_{K_U}(L ‖ I ‖ A): the part computed as the block's words arrive (§4.1).
    pub fn digest(&self, block: &[u8], pid: u32, addr: u64) -> Result<u128> {
        self.check(block, addr)?;
        let mut m = [0u8; 256 + ID_BYTES + ADDR_BYTES];
        let n = block.len();
        m[..n].copy_from_slice(block);
        m[n..n + ID_BYTES].copy_from_slice(&pid.to_le_bytes());
        m[n + ID_BYTES..n + ID_BYTES + ADDR_BYTES].copy_from_slice(&addr.to_le_bytes());
        pr::pr(&self.field, &m[..n + ID_BYTES + ADDR_BYTES], &self.ku).map_err(|e| Error::Param(e.to_string()))
    }

    /// R_T = SC(K_T, A, I): the part computed during the memory latency (§4.1).
    pub fn pad(&self, pid: u32, addr: u64) -> Result<u128> {
        self.pad.pad(pid, addr, self.params.width.bytes())
    }

    /// T = D ⊕ R_T.
    pub fn tag(&self, block: &[u8], pid: u32, addr: u64) -> Result<Tag> {
        Ok(Tag(self.digest(block, pid, addr)? ^ self.pad(pid, addr)?))
    }

    /// Check a block against the tag read for it (`tag_addr`: where it was read, for the
    /// error). The comparison is plain: a simulator has no timing side channel to close.
    pub fn verify(&self, block: &[u8], pid: u32, addr: u64, tag: Tag, tag_addr: Option<u64>) -> Result<()> {
        if self.tag(block, pid, addr)? == tag {
            Ok(())
        } else {
            Err(Error::Mismatch { addr, tag_addr })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(seed: u8, n: usize) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn tag_is_digest_xor_pad_and_verifies() {
        let keys = Keys::derive(b"t");
        for pad in PadKind::ALL {
            for width in Width::ALL {
                for bs in BLOCK_SIZES {
                    let t = Tagger::new(&keys, Params::new(pad, width, bs).unwrap()).unwrap();
                    let b = block(1, bs as usize);
                    let addr = 0x40_0000 + 3 * bs as u64;
                    let tag = t.tag(&b, 5, addr).unwrap();
                    assert_eq!(tag.0, t.digest(&b, 5, addr).unwrap() ^ t.pad(5, addr).unwrap());
                    assert!(width.bits() == 128 || tag.0 >> width.bits() == 0);
                    t.verify(&b, 5, addr, tag, None).unwrap();
                    assert_eq!(Tag::from_slot(&tag.to_slot(width), width), tag);
                    assert_eq!(tag.to_slot(width).len(), width.slot());
                }
            }
        }
    }

    #[test]
    fn every_input_is_bound() {
        let keys = Keys::derive(b"t");
        let t = Tagger::new(&keys, Params::default()).unwrap();
        let b = block(2, 64);
        let tag = t.tag(&b, 1, 0x1000).unwrap();
        let mut changed = b.clone();
        changed[63] ^= 0x80;
        assert_eq!(t.verify(&changed, 1, 0x1000, tag, Some(0x9000)), Err(Error::Mismatch { addr: 0x1000, tag_addr: Some(0x9000) }));
        assert!(t.verify(&b, 2, 0x1000, tag, None).is_err()); // another program
        assert!(t.verify(&b, 1, 0x1040, tag, None).is_err()); // another address
        let other = Tagger::new(&Keys::derive(b"u"), Params::default()).unwrap();
        assert!(other.verify(&b, 1, 0x1000, tag, None).is_err()); // another key
        let aes = Tagger::new(&keys, Params { pad: PadKind::Aes, ..Params::default() }).unwrap();
        assert_ne!(aes.tag(&b, 1, 0x1000).unwrap(), tag);
        // The digest alone (no pad) already differs: PR binds the address and id, not only R_T.
        assert_ne!(t.digest(&b, 1, 0x1000).unwrap(), t.digest(&b, 1, 0x1040).unwrap());
        assert_ne!(t.digest(&b, 1, 0x1000).unwrap(), t.digest(&b, 2, 0x1000).unwrap());
    }

    #[test]
    fn bad_shapes_are_errors() {
        let t = Tagger::new(&Keys::derive(b"t"), Params::default()).unwrap();
        assert!(matches!(t.tag(&[0; 63], 1, 0x1000), Err(Error::Param(m)) if m.contains("63 bytes")));
        assert!(matches!(t.tag(&[0; 64], 1, 0x1001), Err(Error::Param(m)) if m.contains("multiple")));
        assert!(Params::new(PadKind::Aes, Width::W128, 48).is_err());
        assert!(Width::from_bits(96).is_err());
        assert_eq!(Width::W80.slot(), 16);
        assert_eq!(Params::new(PadKind::Aes, Width::W64, 64).unwrap().tags_per_block(), 8);
    }
}
