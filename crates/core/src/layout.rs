//! Where everything lives in untrusted physical memory.
//!
//! Program data occupies [0, data_size) (seed 003 §4.5: protected memory starts at 0); each
//! scheme then asks for a metadata region placed after it: the hash tree's internal chunks,
//! the time stamps at `TS_base + addr/B_chunk·B_TS` (seed 000 §5.1), and so on.
//!
//! The sizes and formulas every scheme shares live here: the largest line, the widths of
//! time stamps and counters, the linear per-line layout and the test for never-written memory.

use crate::decl::Role;
use std::fmt;

/// Largest L2 line (chunk) supported; scratch buffers live on the stack.
pub const MAX_LINE: usize = 256;
/// Smallest L2 line: one AES block.
pub const MIN_LINE: usize = 16;
/// Bytes of a time stamp (000 §5.1: 32-bit stamps).
pub const B_TS: u64 = 4;
/// Bytes of a per-line counter (ocb's and tdes's nonce counters).
pub const B_CTR: u64 = 4;
/// Check bits an ECC DIMM carries per data byte (8 per 64-bit beat, 72-bit DIMMs): the budget
/// of side bits that travel with a line (`Port::attach_side`).
pub const ECC_BITS_PER_BYTE: u64 = 1;

/// Memory is all-zero plaintext at power-on. Instead of encrypting (or hashing) it all up
/// front, a line whose metadata word is zero and whose bytes are all zero *is* that initial
/// state: no write-back ever produces a zero stamp, counter or vector.
#[inline]
pub fn is_initial(meta: u64, bytes: &[u8]) -> bool {
    meta == 0 && all_zero(bytes)
}

/// Whether every byte is zero (a word at a time: asked of every node on every path).
#[inline]
pub fn all_zero(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    let acc = words.by_ref().fold(0u64, |a, w| a | u64::from_ne_bytes(w.try_into().unwrap()));
    acc == 0 && words.remainder().iter().all(|&b| b == 0)
}

/// A metadata region holding `bytes` per line of the range it covers, in the linear layout of
/// 000 §5.1: the metadata of line `a` lives at `base + a/B · bytes`.
#[derive(Clone, Copy, Debug)]
pub struct PerLine {
    pub base: u64,
    /// log2 of the line size (lines are powers of two).
    line_log: u32,
    pub bytes: u64,
}

impl PerLine {
    /// Address of the metadata of the line holding `addr`.
    #[inline]
    pub fn addr(&self, addr: u64) -> u64 {
        self.base + (addr >> self.line_log) * self.bytes
    }

    /// Metadata bytes over the bytes they cover.
    pub fn overhead(&self) -> f64 {
        self.bytes as f64 / (1u64 << self.line_log) as f64
    }
}

/// What a piece of metadata is (`Engine::metadata_of`): what an adversary would tamper with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaKind {
    /// A hash-tree node at this level (0 = top) of chash, naive or mhash.
    TreeLevel(u32),
    /// mac's per-block MAC.
    Mac,
    /// lhash's time stamp.
    LogStamp,
    /// lhash's page table of pages in use.
    PageTable,
    /// otp's time stamp.
    PadStamp,
    /// direct's random vector.
    RandomVector,
    /// The nonce counter of ocb or tdes.
    Counter(&'static str),
    /// ocb's tag.
    Tag,
    /// A code authentication tag (seed 001 §6).
    CodeTag,
    /// The per-chunk MACs of a line of tdes or otp (004 §3.3).
    ChunkMacs(&'static str),
    /// The frequent value bitmap of a re-ordered line (004 §3.2.2).
    FvBitmap,
}

/// One piece of metadata: what it is, where, and how many bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: MetaKind,
    pub addr: u64,
    pub len: u64,
}

impl Meta {
    pub fn new(kind: MetaKind, addr: u64, len: u64) -> Meta {
        Meta { kind, addr, len }
    }
}

impl fmt::Display for MetaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaKind::TreeLevel(l) => write!(f, "tree level {}", l),
            MetaKind::Mac => write!(f, "mac"),
            MetaKind::LogStamp => write!(f, "time stamp"),
            MetaKind::PageTable => write!(f, "page table"),
            MetaKind::PadStamp => write!(f, "otp time stamp"),
            MetaKind::RandomVector => write!(f, "direct random vector"),
            MetaKind::Counter(scheme) => write!(f, "{} counter", scheme),
            MetaKind::Tag => write!(f, "ocb tag"),
            MetaKind::CodeTag => write!(f, "code authentication tag"),
            MetaKind::ChunkMacs(scheme) => write!(f, "{} chunk MACs", scheme),
            MetaKind::FvBitmap => write!(f, "frequent value bitmap"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Region {
    pub name: String,
    /// What it holds: a scheme that protects this role finds its regions by it.
    pub role: Role,
    pub base: u64,
    pub size: u64,
}

#[derive(Clone, Debug)]
pub struct Layout {
    pub data_size: u64,
    pub line: u64,
    regions: Vec<Region>,
}

const ALIGN: u64 = 1 << 20;

impl Layout {
    pub fn new(data_size: u64, line: u64) -> Layout {
        Layout { data_size, line, regions: vec![Region { name: "data".into(), role: Role::Data, base: 0, size: data_size }] }
    }

    /// Place a region of `size` bytes holding `role` after everything allocated so far.
    pub fn alloc(&mut self, role: Role, name: &str, size: u64) -> u64 {
        let base = self.end().div_ceil(ALIGN) * ALIGN;
        self.regions.push(Region { name: name.into(), role, base, size });
        base
    }

    /// First byte after the last region.
    pub fn end(&self) -> u64 {
        self.regions.iter().map(|r| r.base + r.size).max().unwrap_or(0)
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// A linear per-line region of `bytes` per line of [0, `covered`) (000 §5.1).
    pub fn per_line(&mut self, role: Role, name: &str, covered: u64, bytes: u64) -> PerLine {
        debug_assert!(self.line.is_power_of_two());
        let base = self.alloc(role, name, covered.div_ceil(self.line) * bytes);
        PerLine { base, line_log: self.line.trailing_zeros(), bytes }
    }

    /// Side bits of `bits` per line of [0, `covered`), kept in the ECC lanes (`Port::attach_side`):
    /// a per-line store of whole bytes, refused if the bits exceed a line's ECC budget.
    pub fn ecc_per_line(&mut self, role: Role, name: &str, covered: u64, bits: u64) -> Result<PerLine, String> {
        let budget = self.line * ECC_BITS_PER_BYTE;
        if bits > budget {
            return Err(format!("{} bits per line exceed the {} ECC bits of a {}-B line", bits, budget, self.line));
        }
        Ok(self.per_line(role, &format!("{} (ECC bits)", name), covered, bits.div_ceil(8)))
    }

    /// The regions that hold `role`, in the order they were placed.
    pub fn regions_of(&self, role: Role) -> impl Iterator<Item = &Region> {
        self.regions.iter().filter(move |r| r.role == role)
    }

    pub fn region_of(&self, addr: u64) -> Option<&Region> {
        self.regions.iter().find(|r| addr >= r.base && addr < r.base + r.size)
    }
}
