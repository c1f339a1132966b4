//! Where everything lives in untrusted physical memory.
//!
//! Program data occupies [0, data_size) (seed 003 §4.5: protected memory starts at 0); each
//! scheme then asks for a metadata region placed after it: the hash tree's internal chunks,
//! the time stamps at `TS_base + addr/B_chunk·B_TS` (seed 000 §5.1), and so on.

#[derive(Clone, Debug)]
pub struct Region {
    pub name: String,
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
        Layout { data_size, line, regions: vec![Region { name: "data".into(), base: 0, size: data_size }] }
    }

    /// Place a region of `size` bytes after everything allocated so far.
    pub fn alloc(&mut self, name: &str, size: u64) -> u64 {
        let base = self.end().div_ceil(ALIGN) * ALIGN;
        self.regions.push(Region { name: name.into(), base, size });
        base
    }

    /// First byte after the last region.
    pub fn end(&self) -> u64 {
        self.regions.iter().map(|r| r.base + r.size).max().unwrap_or(0)
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    pub fn region_of(&self, addr: u64) -> Option<&Region> {
        self.regions.iter().find(|r| addr >= r.base && addr < r.base + r.size)
    }
}
