//! A signed program in untrusted memory, fetched the way the processor does (001 §4.1, §6):
//! on an instruction-cache miss the block is read from memory, its tag is read from the
//! table TP points at, the tag is recomputed from the block, the program id and the address,
//! and the block is usable only if the two match. This is the functional model the attack
//! tests run against; the timed model calls [`authenticate`] with its own memory reader.

use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::layout::TagLayout;
use crate::program::Program;
use crate::tag::{Params, Tag, Tagger};
use crate::tagfile::TagFile;
use std::collections::HashMap;

const PAGE: u64 = 4096;

/// Sparse, byte-addressed untrusted memory: the adversary may read and write any of it.
#[derive(Clone, Default)]
pub struct Memory {
    pages: HashMap<u64, Box<[u8; PAGE as usize]>>,
}

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// Bytes never written read as zero.
    pub fn read(&self, addr: u64, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            let a = addr + i as u64;
            *b = self.pages.get(&(a / PAGE)).map_or(0, |p| p[(a % PAGE) as usize]);
        }
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let a = addr + i as u64;
            self.pages.entry(a / PAGE).or_insert_with(|| Box::new([0; PAGE as usize]))[(a % PAGE) as usize] = b;
        }
    }

    /// The loader: the code at its addresses and the tag table at the tag file's TP (Fig. 4).
    pub fn load(&mut self, program: &Program, tags: &TagFile) {
        for s in &program.segments {
            self.write(s.vaddr, &s.bytes);
        }
        self.write(tags.layout.tp(), &tags.table);
    }
}

/// The authentication unit's check of one block (what an instruction-cache miss triggers):
/// read the block holding `addr` and its tag through `read`, and return the block only if
/// the tag matches. `read(addr, buf)` reads untrusted memory.
pub fn authenticate(tagger: &Tagger, layout: &TagLayout, pid: u32, addr: u64, mut read: impl FnMut(u64, &mut [u8])) -> Result<Vec<u8>> {
    let b = tagger.params().block as u64;
    let base = addr - addr % b;
    let tag_addr = layout.tag_addr(base).ok_or(Error::NotSigned { addr: base })?;
    let mut block = vec![0u8; b as usize];
    read(base, &mut block);
    let width = tagger.params().width;
    let mut slot = vec![0u8; width.slot()];
    read(tag_addr, &mut slot);
    tagger.verify(&block, pid, base, Tag::from_slot(&slot, width), Some(tag_addr))?;
    Ok(block)
}

/// The processor's trusted state while one program runs: the keys (inside the tagger), the
/// program id I and the tag pointer TP (set by the loader when the program starts).
#[derive(Clone)]
pub struct Processor {
    tagger: Tagger,
    pid: u32,
    layout: TagLayout,
}

impl Processor {
    /// Start the program a tag file describes (its id, parameters and TP).
    pub fn start(keys: &Keys, tags: &TagFile) -> Result<Processor> {
        Processor::with(keys, tags.params, tags.program_id, tags.layout.clone())
    }

    pub fn with(keys: &Keys, params: Params, pid: u32, layout: TagLayout) -> Result<Processor> {
        Ok(Processor { tagger: Tagger::new(keys, params)?, pid, layout })
    }

    /// The loader sets TP (it may be lied to).
    pub fn set_tp(&mut self, tp: u64) {
        self.layout = self.layout.with_tp(tp);
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// An instruction fetch that misses the cache: the block, if it authenticates.
    pub fn fetch(&self, mem: &Memory, addr: u64) -> Result<Vec<u8>> {
        authenticate(&self.tagger, &self.layout, self.pid, addr, |a, buf| mem.read(a, buf))
    }
}
