//! A program's code as the processor fetches it: the executable segments of an ELF file
//! (PT_LOAD with PF_X), cut into blocks.
//!
//! A segment covers the blocks from its start rounded down to its end rounded up; bytes of
//! those edge blocks outside the segment are signed as zeros (the loader places the segment
//! in zero-filled blocks — with `ld -z separate-code`, the default on x86-64 Linux, the
//! executable segment is page-aligned anyway). Bytes between p_filesz and p_memsz are zeros,
//! as the loader makes them. Addresses are virtual (001 §4, footnote 4): a position-
//! independent executable is signed for one load base (`base`), since the address is part of
//! every tag — ASLR would move it.

use crate::error::{Error, Result};
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, FileKind};

/// The largest executable segment accepted (a guard against absurd sizes in damaged files).
pub const MAX_SEGMENT: u64 = 1 << 30;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSegment {
    /// Block-aligned start.
    pub vaddr: u64,
    /// A whole number of blocks.
    pub bytes: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub segments: Vec<CodeSegment>,
    /// End of the highest loadable segment (data and bss included): the tags go after it.
    pub load_end: u64,
    pub entry: u64,
    pub block: u32,
    /// Position-independent (ET_DYN): its addresses depend on the load base.
    pub pie: bool,
}

fn align_down(a: u64, b: u64) -> u64 {
    a - a % b
}

fn align_up(a: u64, b: u64) -> Option<u64> {
    a.checked_add(b - 1).map(|x| align_down(x, b))
}

impl Program {
    /// The code of an ELF executable or shared object (32- or 64-bit, either byte order),
    /// placed at `base` if it is position-independent (ET_DYN).
    pub fn from_elf(data: &[u8], block: u32, base: u64) -> Result<Program> {
        match FileKind::parse(data) {
            Ok(FileKind::Elf32) => parse::<elf::FileHeader32<Endianness>>(data, block, base),
            Ok(FileKind::Elf64) => parse::<elf::FileHeader64<Endianness>>(data, block, base),
            Ok(k) => Err(Error::Elf(format!("not an ELF file (a {k:?} object)"))),
            Err(_) => Err(Error::Elf("not an ELF file (unrecognised header)".into())),
        }
    }

    /// Raw code regions `(vaddr, bytes)` (a built-in workload's code, a test's blocks).
    pub fn from_code(regions: &[(u64, &[u8])], block: u32, entry: u64) -> Result<Program> {
        let ranges = regions.iter().map(|&(v, b)| (v, b.to_vec(), b.len() as u64)).collect();
        let end = regions.iter().map(|(v, b)| v + b.len() as u64).max().unwrap_or(0);
        build(ranges, block, end, entry, false)
    }

    /// TP's default: the first block after everything loaded (§6: tags next to the data
    /// segment). The heap usually starts there too; `--tp` moves the table elsewhere.
    pub fn default_tp(&self) -> u64 {
        align_up(self.load_end, self.block as u64).unwrap_or(self.load_end)
    }

    /// Every block `(address, bytes)`, in address order.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let b = self.block as usize;
        self.segments.iter().flat_map(move |s| s.bytes.chunks(b).enumerate().map(move |(i, c)| (s.vaddr + (i * b) as u64, c)))
    }

    /// The block holding `addr`, if it is code.
    pub fn block_at(&self, addr: u64) -> Option<&[u8]> {
        let b = self.block as u64;
        let s = self.segments.iter().find(|s| s.vaddr <= addr && addr < s.vaddr + s.bytes.len() as u64)?;
        let off = (align_down(addr, b) - s.vaddr) as usize;
        Some(&s.bytes[off..off + b as usize])
    }

    /// `(vaddr, blocks)` of each segment, for `TagLayout::new`.
    pub fn extents(&self) -> Vec<(u64, u64)> {
        self.segments.iter().map(|s| (s.vaddr, s.bytes.len() as u64 / self.block as u64)).collect()
    }
}

fn parse<H: FileHeader<Endian = Endianness>>(data: &[u8], block: u32, base: u64) -> Result<Program> {
    let err = |e: object::read::Error| Error::Elf(e.to_string());
    let h = H::parse(data).map_err(err)?;
    let e = h.endian().map_err(err)?;
    let pie = h.e_type(e) == elf::ET_DYN;
    let base = match h.e_type(e) {
        elf::ET_DYN => base,
        elf::ET_EXEC if base == 0 => 0,
        elf::ET_EXEC => return Err(Error::Param("a load base applies to position-independent (ET_DYN) files only".into())),
        t => return Err(Error::Elf(format!("not an executable or shared object (e_type {})", t.0))),
    };
    let mut code = Vec::new();
    let mut load_end = 0u64;
    for ph in h.program_headers(e, data).map_err(err)? {
        if ph.p_type(e) != elf::PT_LOAD {
            continue;
        }
        let vaddr: u64 = ph.p_vaddr(e).into();
        let (filesz, memsz): (u64, u64) = (ph.p_filesz(e).into(), ph.p_memsz(e).into());
        if filesz > memsz {
            return Err(Error::Elf(format!("segment at {vaddr:#x}: file size {filesz} exceeds memory size {memsz}")));
        }
        let start = vaddr.checked_add(base).ok_or_else(|| Error::Elf(format!("segment at {vaddr:#x} overflows the address space")))?;
        let end = start.checked_add(memsz).ok_or_else(|| Error::Elf(format!("segment at {vaddr:#x} overflows the address space")))?;
        load_end = load_end.max(end);
        if ph.p_flags(e).0 & elf::PF_X.0 == 0 {
            continue;
        }
        if memsz > MAX_SEGMENT {
            return Err(Error::Elf(format!("executable segment at {vaddr:#x} is {memsz} bytes (more than 1 GiB)")));
        }
        let bytes = ph.data(e, data).map_err(|_| Error::Elf(format!("segment at {vaddr:#x} lies outside the file (truncated?)")))?;
        code.push((start, bytes.to_vec(), memsz));
    }
    build(code, block, load_end, Into::<u64>::into(h.e_entry(e)).wrapping_add(base), pie)
}

/// Block the `(start, file bytes, memory size)` ranges, merging ranges that share a block.
fn build(mut ranges: Vec<(u64, Vec<u8>, u64)>, block: u32, load_end: u64, entry: u64, pie: bool) -> Result<Program> {
    let b = block as u64;
    if !crate::tag::BLOCK_SIZES.contains(&block) {
        return Err(Error::Param(format!("block size {block} B: choose one of 16, 32, 64, 128, 256")));
    }
    ranges.retain(|r| r.2 > 0);
    if ranges.is_empty() {
        return Err(Error::Elf("no executable segment (PT_LOAD with PF_X) to sign".into()));
    }
    ranges.sort_by_key(|r| r.0);
    for w in ranges.windows(2) {
        if w[0].0 + w[0].2 > w[1].0 {
            return Err(Error::Elf(format!("executable segments at {:#x} and {:#x} overlap", w[0].0, w[1].0)));
        }
    }
    let mut segments: Vec<CodeSegment> = Vec::new();
    for (start, bytes, memsz) in ranges {
        let lo = align_down(start, b);
        let hi = align_up(start + memsz, b).ok_or_else(|| Error::Elf(format!("segment at {start:#x} overflows the address space")))?;
        let seg = match segments.last_mut() {
            Some(s) if s.vaddr + s.bytes.len() as u64 > lo => s, // shares a block with the previous one
            _ => {
                segments.push(CodeSegment { vaddr: lo, bytes: Vec::new() });
                segments.last_mut().unwrap()
            }
        };
        seg.bytes.resize((hi - seg.vaddr) as usize, 0);
        let off = (start - seg.vaddr) as usize;
        seg.bytes[off..off + bytes.len()].copy_from_slice(&bytes);
    }
    Ok(Program { segments, load_end, entry, block, pie })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal little-endian ELF64 executable: one PT_LOAD per `(vaddr, flags, bytes,
    /// memsz)`, its bytes after the headers.
    pub fn elf64(segs: &[(u64, u32, &[u8], u64)], e_type: elf::FileType) -> Vec<u8> {
        let phoff = 64u64;
        let mut off = phoff + 56 * segs.len() as u64;
        let mut v = Vec::new();
        v.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        v.extend_from_slice(&e_type.0.to_le_bytes());
        v.extend_from_slice(&62u16.to_le_bytes()); // x86-64
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&segs.first().map_or(0, |s| s.0).to_le_bytes()); // entry
        v.extend_from_slice(&phoff.to_le_bytes());
        v.extend_from_slice(&0u64.to_le_bytes()); // shoff
        v.extend_from_slice(&0u32.to_le_bytes());
        for x in [64u16, 56, segs.len() as u16, 64, 0, 0] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for &(vaddr, flags, bytes, memsz) in segs {
            v.extend_from_slice(&elf::PT_LOAD.0.to_le_bytes());
            v.extend_from_slice(&flags.to_le_bytes());
            for x in [off, vaddr, vaddr, bytes.len() as u64, memsz, 0x1000] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            off += bytes.len() as u64;
        }
        for s in segs {
            v.extend_from_slice(s.2);
        }
        v
    }

    #[test]
    fn executable_segments_are_blocked_and_the_rest_ignored() {
        let text: Vec<u8> = (1..=100u8).collect();
        let data = [9u8; 40];
        let f = elf64(&[(0x40_0010, elf::PF_R.0 | elf::PF_X.0, &text, 100), (0x60_0000, elf::PF_R.0 | elf::PF_W.0, &data, 0x1000)], elf::ET_EXEC);
        let p = Program::from_elf(&f, 64, 0).unwrap();
        assert_eq!(p.segments.len(), 1);
        assert_eq!(p.segments[0].vaddr, 0x40_0000);
        assert_eq!(p.segments[0].bytes.len(), 128); // [0x400000, 0x400080)
        assert_eq!(&p.segments[0].bytes[..16], &[0u8; 16]);
        assert_eq!(&p.segments[0].bytes[16..116], &text[..]);
        assert_eq!(p.load_end, 0x60_1000);
        assert_eq!(p.default_tp(), 0x60_1000);
        assert_eq!(p.block_at(0x40_0050).unwrap()[0], text[0x40 - 16]);
        assert_eq!(p.blocks().count(), 2);
        assert_eq!(p.entry, 0x40_0010);
    }

    #[test]
    fn pie_takes_a_base_and_bss_in_code_is_zero() {
        let text = [0xc3u8; 20];
        let f = elf64(&[(0x1000, elf::PF_R.0 | elf::PF_X.0, &text, 40)], elf::ET_DYN);
        let p = Program::from_elf(&f, 16, 0x5555_0000).unwrap();
        assert_eq!(p.segments[0].vaddr, 0x5555_1000);
        assert_eq!(p.segments[0].bytes.len(), 48);
        assert_eq!(&p.segments[0].bytes[20..40], &[0u8; 20]);
        let exec = elf64(&[(0x1000, elf::PF_R.0 | elf::PF_X.0, &text, 20)], elf::ET_EXEC);
        assert!(matches!(Program::from_elf(&exec, 16, 0x1000), Err(Error::Param(_))));
    }

    #[test]
    fn segments_sharing_a_block_merge() {
        let a = [1u8; 10];
        let b = [2u8; 10];
        let f = elf64(&[(0x1000, elf::PF_X.0, &a, 10), (0x1020, elf::PF_X.0, &b, 10)], elf::ET_EXEC);
        let p = Program::from_elf(&f, 64, 0).unwrap();
        assert_eq!(p.segments.len(), 1);
        assert_eq!(&p.segments[0].bytes[0x20..0x2a], &b);
        let f = elf64(&[(0x1000, elf::PF_X.0, &a, 10), (0x1005, elf::PF_X.0, &b, 10)], elf::ET_EXEC);
        assert!(matches!(Program::from_elf(&f, 64, 0), Err(Error::Elf(m)) if m.contains("overlap")));
    }

    #[test]
    fn malformed_files_give_one_clear_error() {
        let text = [0x90u8; 64];
        let good = elf64(&[(0x1000, elf::PF_X.0, &text, 64)], elf::ET_EXEC);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"#!/bin/sh\necho hi\n".to_vec(), "not an ELF"),
            (good[..40].to_vec(), "malformed ELF"),
            (good[..good.len() - 10].to_vec(), "outside the file"),
            (elf64(&[(0x1000, elf::PF_R.0, &text, 64)], elf::ET_EXEC), "no executable segment"),
            (elf64(&[(0x1000, elf::PF_X.0, &text, 10)], elf::ET_EXEC), "exceeds memory size"),
            (elf64(&[(0x1000, elf::PF_X.0, &text, 64)], elf::ET_REL), "e_type"),
        ];
        for (bytes, want) in cases {
            let e = Program::from_elf(&bytes, 64, 0).unwrap_err();
            assert!(e.to_string().contains(want), "{e} should mention {want:?}");
            assert!(!e.to_string().contains('\n'));
        }
    }
}
