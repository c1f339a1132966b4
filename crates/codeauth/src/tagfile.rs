//! Signing a program (its tags, laid out as §6 says) and the tag file that carries them.
//!
//! Tag file, version 1 (all integers little-endian):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0  | 8  | magic `SMCATAGS` |
//! | 8  | 2  | version (1) |
//! | 10 | 2  | tag width w in bits (64, 80, 128) |
//! | 12 | 2  | block size B in bytes |
//! | 14 | 1  | pad generator (1 = pr-trivium, 2 = pr-aes) |
//! | 15 | 1  | reserved (0) |
//! | 16 | 4  | program id I |
//! | 20 | 4  | segment count S |
//! | 24 | 8  | TP: address of the first tag |
//! | 32 | 8  | fingerprint of the keys that made the tags (`Keys::fingerprint`) |
//! | 40 | 24·S | segments: block-aligned start, blocks, index of the first tag |
//! | .. | slot·T | the tag table exactly as it lies in memory at TP (T = Σ blocks) |
//! | end | 32 | SHA-256 of everything before it |
//!
//! The checksum only catches damage (truncation, flipped bits): the tags protect themselves,
//! being MACs. Files are written atomically (a temporary file renamed over the target).

use crate::error::{Error, Result};
use crate::keys::{hex, Keys};
use crate::layout::{Segment, TagLayout};
use crate::pad::PadKind;
use crate::program::Program;
use crate::tag::{Params, Tag, Tagger, Width};
use sha2::{Digest, Sha256};
use std::path::Path;

const MAGIC: &[u8; 8] = b"SMCATAGS";
pub const VERSION: u16 = 1;
const HEADER: usize = 40;
const SEGMENT: usize = 24;
const CHECKSUM: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagFile {
    pub program_id: u32,
    pub params: Params,
    pub key_fingerprint: [u8; 8],
    pub layout: TagLayout,
    /// The tag table as it lies in memory at TP: `layout.tags()` slots.
    pub table: Vec<u8>,
}

/// What a successful verification covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    pub blocks: u64,
}

/// Tag every block of `program` (001 §4 "Software Preparation"), tags at `tp` (default: after
/// everything loaded, §6).
pub fn sign(keys: &Keys, params: Params, program: &Program, pid: u32, tp: Option<u64>) -> Result<TagFile> {
    if program.block != params.block {
        return Err(Error::Param(format!("program blocked at {} B, parameters say {} B", program.block, params.block)));
    }
    let tagger = Tagger::new(keys, params)?;
    let layout = TagLayout::new(params.block, params.width.slot(), tp.unwrap_or_else(|| program.default_tp()), &program.extents())?;
    let mut table = Vec::with_capacity(layout.table_bytes() as usize);
    for (addr, block) in program.blocks() {
        table.extend_from_slice(&tagger.tag(block, pid, addr)?.to_slot(params.width));
    }
    Ok(TagFile { program_id: pid, params, key_fingerprint: keys.fingerprint(), layout, table })
}

/// Check every block of `program` against `tags`. The first refused block is named; if none
/// verifies, the key (or the program) is the wrong one and the error says so.
pub fn verify(keys: &Keys, program: &Program, tags: &TagFile) -> Result<Verified> {
    if keys.fingerprint() != tags.key_fingerprint {
        return Err(Error::WrongKey { want: hex(&tags.key_fingerprint), have: keys.fingerprint_hex() });
    }
    let tagger = Tagger::new(keys, tags.params)?;
    if program.block != tags.params.block {
        return Err(Error::Param(format!("program blocked at {} B, the tag file at {} B", program.block, tags.params.block)));
    }
    let (mut good, mut first_bad, mut blocks) = (0u64, None, 0u64);
    for (addr, block) in program.blocks() {
        blocks += 1;
        let checked = match tags.tag_for(addr) {
            None => Err(Error::NotSigned { addr }),
            Some((tag, at)) => tagger.verify(block, tags.program_id, addr, tag, Some(at)),
        };
        match checked {
            Ok(()) => good += 1,
            Err(e) => {
                first_bad.get_or_insert(e);
            }
        }
    }
    // Signed blocks the program no longer has are refused too (code removed or moved).
    if let Some(addr) = tags.layout.blocks().find(|&a| program.block_at(a).is_none()) {
        first_bad.get_or_insert(Error::Mismatch { addr, tag_addr: tags.layout.tag_addr(addr) });
    }
    match first_bad {
        None => Ok(Verified { blocks }),
        Some(e) if good == 0 => Err(Error::NothingVerifies { blocks, first: e.addr().unwrap_or(0) }),
        Some(e) => Err(e),
    }
}

/// The code of ELF file `elf` as `tags` signed it: blocked at its block size and, for a
/// position-independent file, placed at the base its tags were made for.
pub fn program_for(elf: &[u8], tags: &TagFile) -> Result<Program> {
    let p = Program::from_elf(elf, tags.params.block, 0)?;
    let (signed, here) = (tags.layout.segments()[0].vaddr, p.segments[0].vaddr);
    if p.pie && signed > here {
        return Program::from_elf(elf, tags.params.block, signed - here);
    }
    Ok(p)
}

impl TagFile {
    /// The tag of the block holding `addr` and where it lies in memory.
    pub fn tag_for(&self, addr: u64) -> Option<(Tag, u64)> {
        let i = self.layout.tag_index(addr)? as usize;
        let slot = self.layout.slot();
        Some((Tag::from_slot(&self.table[i * slot..(i + 1) * slot], self.params.width), self.layout.tp() + (i * slot) as u64))
    }

    /// SHA-256 of the tag table: what the Trusted Software Repository sends instead of the
    /// tags when bandwidth matters (§3); the user regenerates the tags and compares.
    pub fn table_digest(&self) -> [u8; 32] {
        Sha256::digest(&self.table).into()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let segs = self.layout.segments();
        let mut v = Vec::with_capacity(HEADER + SEGMENT * segs.len() + self.table.len() + CHECKSUM);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&(self.params.width.bits() as u16).to_le_bytes());
        v.extend_from_slice(&(self.params.block as u16).to_le_bytes());
        v.push(self.params.pad.code());
        v.push(0);
        v.extend_from_slice(&self.program_id.to_le_bytes());
        v.extend_from_slice(&(segs.len() as u32).to_le_bytes());
        v.extend_from_slice(&self.layout.tp().to_le_bytes());
        v.extend_from_slice(&self.key_fingerprint);
        for s in segs {
            for x in [s.vaddr, s.blocks, s.first_tag] {
                v.extend_from_slice(&x.to_le_bytes());
            }
        }
        v.extend_from_slice(&self.table);
        let sum = Sha256::digest(&v);
        v.extend_from_slice(&sum);
        v
    }

    pub fn from_bytes(b: &[u8]) -> Result<TagFile> {
        let bad = |m: String| Err(Error::TagFile(m));
        if b.len() < 8 || &b[..8] != MAGIC {
            return bad("not a secmem tag file (bad magic)".into());
        }
        if b.len() < HEADER + CHECKSUM {
            return bad(format!("truncated: {} bytes, the header alone needs {}", b.len(), HEADER + CHECKSUM));
        }
        let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let version = u16_at(8);
        if version != VERSION {
            return bad(format!("version {version}, this secmem reads version {VERSION}"));
        }
        let nseg = u32_at(20) as usize;
        let seg_end = nseg.checked_mul(SEGMENT).and_then(|n| n.checked_add(HEADER));
        let Some(seg_end) = seg_end.filter(|&e| e + CHECKSUM <= b.len()) else {
            return bad(format!("truncated: {} bytes cannot hold the {nseg} segments the header announces", b.len()));
        };
        let segments: Vec<Segment> = (0..nseg)
            .map(|i| {
                let o = HEADER + i * SEGMENT;
                Segment { vaddr: u64_at(o), blocks: u64_at(o + 8), first_tag: u64_at(o + 16) }
            })
            .collect();
        let tags = segments.iter().try_fold(0u64, |n, s| n.checked_add(s.blocks));
        let width = Width::from_bits(u16_at(10) as u32).map_err(|e| Error::TagFile(e.to_string()))?;
        let table_len = tags.and_then(|t| t.checked_mul(width.slot() as u64)).and_then(|n| usize::try_from(n).ok());
        let want = table_len.and_then(|t| t.checked_add(seg_end + CHECKSUM));
        match want {
            Some(w) if w == b.len() => {}
            Some(w) if w > b.len() => return bad(format!("truncated: {} bytes, the header announces {w}", b.len())),
            Some(w) => return bad(format!("{} bytes, the header announces {w} (trailing data)", b.len())),
            None => return bad("the header announces an impossible number of tags".into()),
        }
        let body = b.len() - CHECKSUM;
        if Sha256::digest(&b[..body])[..] != b[body..] {
            return bad("checksum mismatch (the file is damaged)".into());
        }
        let pad = PadKind::from_code(b[14]).ok_or_else(|| Error::TagFile(format!("unknown pad generator code {}", b[14])))?;
        let params = Params::new(pad, width, u16_at(12) as u32).map_err(|e| Error::TagFile(e.to_string()))?;
        let layout = TagLayout::from_parts(params.block, width.slot(), u64_at(24), segments).map_err(|e| Error::TagFile(e.to_string()))?;
        Ok(TagFile {
            program_id: u32_at(16),
            params,
            key_fingerprint: b[32..40].try_into().unwrap(),
            layout,
            table: b[seg_end..body].to_vec(),
        })
    }

    pub fn read(path: &Path) -> Result<TagFile> {
        let b = std::fs::read(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        TagFile::from_bytes(&b).map_err(|e| match e {
            Error::TagFile(m) => Error::TagFile(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_bytes(), secmem_files::PUBLIC)
    }
}

/// Write `bytes` to `path` by `secmem_files`' rule (a temporary file created exclusively
/// with `mode`, never through a symlink, renamed over `path`: readers see the old file or the
/// whole new one; a FIFO or device is written in place). Key files pass
/// [`secmem_files::PRIVATE`].
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    secmem_files::write(path, bytes, mode).map_err(|e| Error::Io(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tests::elf64;
    use object::elf;

    fn program() -> Program {
        let text: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let f = elf64(&[(0x40_0000, elf::PF_R.0 | elf::PF_X.0, &text, 300), (0x60_0000, elf::PF_R.0 | elf::PF_W.0, &[1; 8], 64)], elf::ET_EXEC);
        Program::from_elf(&f, 64, 0).unwrap()
    }

    #[test]
    fn sign_write_read_verify() {
        let keys = Keys::derive(b"owner");
        let p = program();
        for pad in PadKind::ALL {
            for width in Width::ALL {
                let tf = sign(&keys, Params::new(pad, width, 64).unwrap(), &p, 42, None).unwrap();
                assert_eq!(tf.layout.tp(), 0x60_0040);
                assert_eq!(tf.layout.tags(), 5);
                assert_eq!(tf.table.len(), 5 * width.slot());
                let back = TagFile::from_bytes(&tf.to_bytes()).unwrap();
                assert_eq!(back, tf);
                assert_eq!(verify(&keys, &p, &back).unwrap(), Verified { blocks: 5 });
            }
        }
        let dir = std::env::temp_dir().join(format!("secmem-tagfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.tags");
        let tf = sign(&keys, Params::default(), &p, 42, Some(0x80_0000)).unwrap();
        tf.write(&path).unwrap();
        assert_eq!(TagFile::read(&path).unwrap(), tf);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn changed_code_names_its_block_and_a_wrong_key_is_named() {
        let keys = Keys::derive(b"owner");
        let p = program();
        let tf = sign(&keys, Params::default(), &p, 42, None).unwrap();
        let mut changed = p.clone();
        changed.segments[0].bytes[0x90] ^= 1; // in block 0x400080
        assert_eq!(verify(&keys, &changed, &tf), Err(Error::Mismatch { addr: 0x40_0080, tag_addr: Some(0x60_0060) }));
        let e = verify(&Keys::derive(b"mallory"), &p, &tf).unwrap_err();
        assert!(matches!(e, Error::WrongKey { .. }), "{e}");
        // A key whose fingerprint was forged into the file still verifies nothing.
        let mut forged = tf.clone();
        forged.key_fingerprint = Keys::derive(b"mallory").fingerprint();
        assert_eq!(verify(&Keys::derive(b"mallory"), &p, &forged), Err(Error::NothingVerifies { blocks: 5, first: 0x40_0000 }));
        // Tags of another program id verify nothing either.
        let other = sign(&keys, Params::default(), &p, 43, None).unwrap();
        let mut swapped = other.clone();
        swapped.program_id = 42;
        assert!(matches!(verify(&keys, &p, &swapped), Err(Error::NothingVerifies { .. })));
    }

    #[test]
    fn damaged_files_give_one_clear_error() {
        let keys = Keys::derive(b"owner");
        let b = sign(&keys, Params::default(), &program(), 42, None).unwrap().to_bytes();
        let msg = |bytes: &[u8]| TagFile::from_bytes(bytes).unwrap_err().to_string();
        assert!(msg(&b[..b.len() - 1]).contains("truncated"));
        assert!(msg(&b[..50]).contains("truncated"));
        assert!(msg(&b[..3]).contains("magic"));
        let mut flip = b.clone();
        flip[HEADER + SEGMENT + 3] ^= 1; // a tag byte
        assert!(msg(&flip).contains("checksum"));
        let mut longer = b.clone();
        longer.push(0);
        assert!(msg(&longer).contains("trailing"));
        let mut huge = b.clone();
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(msg(&huge).contains("truncated"));
        let mut v2 = b.clone();
        v2[8] = 2;
        assert!(msg(&v2).contains("version 2"));
    }
}
