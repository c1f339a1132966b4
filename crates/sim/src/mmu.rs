//! Address translation: an instruction and a data TLB, optionally a second-level TLB
//! (`stlb.entries` > 0), and behind them either a fixed miss latency (`tlb.miss_latency`,
//! the seeds' machines) or a page-table walker (`tlb.walk = true`).
//!
//! The walker reads a radix page table of `ptw.levels` levels (x86-64: 4, with LA57: 5) whose
//! tables are pages of the protected memory itself, allocated by the page map as the program
//! touches memory. Each entry is written there (8 bytes: the next table's or the page's
//! physical address, present|writable|user) when it is first needed, and each step of a
//! walk is a real read of that entry through the data caches and the secure engine — so the
//! integrity scheme verifies page-table lines like any other (page-table entries are data an
//! adversary would like to change, 000 §5.3). Page-structure caches (one per level above the
//! leaf, ChampSim's PSCL) let a walk start below the root. Walk reads are counted apart
//! (`ptw.*`); the value each read returns is checked against the page map
//! (`ptw.pte_mismatches`, 0 unless memory was tampered with).
//!
//! `ptw.layout = "champsim"` lays the tables out as ChampSim's `VirtualMemory::get_pte_pa`
//! does (master 2ff2501, src/vmem.cc, src/ptw.cc), for comparisons on the same instructions:
//! the entry a walk reads at level l lives in a table of its own, keyed by every virtual
//! address bit above that level's shift (so each virtual page's leaf entry has its own
//! table and neighbouring pages never share a page-table line), and a page-structure-cache
//! hit restarts the walk with one read at the level it hit, in the table of the walk that
//! filled the entry but at this address's index, before reading this address's own entries.

use crate::hierarchy::{Hierarchy, Side, TagPort};
use crate::error::StepError;
use crate::pagemap::PageMap;
use rustc_hash::FxHashMap;
use secmem_core::stats::Stats;
use secmem_core::{AccessKind, ConfigError, Engine, Params};
use secmem_timing::{Cycle, Slots, Tags};

/// Index bits per page-table level (4 KiB tables of 8-byte entries).
const LEVEL_BITS: u32 = 9;
const PAGE_SHIFT: u32 = 12;
/// present | writable | user
const PTE_FLAGS: u64 = 0x7;
/// Fills remembered per page-structure-cache entry (ChampSim layout): more than the walks
/// that can start while one is in flight.
const FILLS: usize = 8;

/// How page tables are laid out (`ptw.layout`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// x86-64: 512-entry tables, a level's table selected by the bits above it.
    Radix,
    /// ChampSim's model (see the module comment).
    ChampSim,
}

/// A first-level TLB: its tags, the frame each slot maps to (a hit needs no page-map
/// lookup), and its last translation.
struct Tlb {
    tags: Tags,
    frames: Vec<u64>,
    /// (virtual page, slot) of the last translation. The slot still holds that page: the
    /// tags change only on a miss, which sets this.
    last: (u64, u32),
}

impl Tlb {
    fn new(tags: Tags) -> Tlb {
        Tlb { frames: vec![0; tags.slots()], tags, last: (u64::MAX, 0) }
    }

    /// `va` (in virtual page `vpage`): its frame on a hit, touched as `Tags::access` does
    /// (the last page again skips the set search); on a miss, the slot it now has, whose
    /// frame the caller sets.
    #[inline(always)]
    fn access(&mut self, va: u64, vpage: u64) -> Result<u64, u32> {
        let slot = if self.last.0 == vpage {
            self.tags.touch(self.last.1);
            self.last.1
        } else if let Some(slot) = self.tags.find(va) {
            // A hit on another page (most data accesses: loads alternate between the stack's
            // and the heap's pages) found inline, as `Tags::access` finds and touches it: the
            // call, and its victim search alongside, cost ~50 host instructions a lookup (gzip).
            self.tags.touch(slot);
            self.last = (vpage, slot);
            slot
        } else {
            // A miss: the page goes in the victim's slot, as `Tags::access` would put it
            // (its set was searched just above).
            let slot = self.tags.victim(va);
            self.tags.install(slot, va);
            self.last = (vpage, slot);
            return Err(slot);
        };
        Ok(self.frames[slot as usize])
    }
}

pub struct Mmu {
    itlb: Tlb,
    dtlb: Tlb,
    /// The D-TLB's lookups a cycle and in flight (`tlb.tag_checks`, `tlb.tags_in_flight`;
    /// None: unlimited): ChampSim's DTLB is a cache with a tag bandwidth of its own (2, and
    /// max_tag_check x its hit latency of 1 under way, each until the cycle after it: two in
    /// any two cycles), which every L1D load and retired store looks up when the L1D starts
    /// its tag check (src/cache.cc `issue_translation`); lookups of one page waiting together
    /// share one (the channel merges them, `check_collision`).
    dtlb_port: Option<TagPort>,
    /// With `tlb.restart`: the last lookups, which later ones of their page share.
    recent: Option<Recent>,
    /// log2 of the page size (the TLBs' tags check it is a power of two).
    page_shift: u32,
    stlb: Option<Tags>,
    stlb_latency: Cycle,
    miss_latency: Cycle,
    walker: Option<Walker>,
    pub itlb_misses: u64,
    pub dtlb_misses: u64,
    stlb_misses: u64,
}

impl Mmu {
    pub fn new(p: &Params, page: u64) -> Result<Mmu, ConfigError> {
        let tlb = |entries: u64, ways: &str| {
            Tags::new(entries * page, p.u64_min(ways, 1)? as usize, page).map_err(|e| ConfigError(format!("tlb: {}", e)))
        };
        let entries = p.u64_min("tlb.entries", 1)?;
        let stlb_entries = p.u64_min("stlb.entries", 0)?;
        let stlb = if stlb_entries > 0 {
            Some(tlb(stlb_entries, "stlb.ways").map_err(|e| ConfigError(e.0.replacen("tlb:", "stlb:", 1)))?)
        } else {
            p.u64_min("stlb.ways", 1)?;
            None
        };
        let walker = Walker::new(p, page)?;
        let (itlb, dtlb) = (tlb(entries, "tlb.ways")?, tlb(entries, "tlb.ways")?);
        Ok(Mmu {
            itlb: Tlb::new(itlb),
            dtlb: Tlb::new(dtlb),
            dtlb_port: TagPort::new(p, "tlb", 2)?,
            recent: p.bool("tlb.restart")?.then(Recent::default),
            page_shift: page.trailing_zeros(),
            stlb,
            stlb_latency: p.u64_min("stlb.latency", 0)?,
            miss_latency: p.u64_min("tlb.miss_latency", 0)?,
            walker: if p.bool("tlb.walk")? { Some(walker) } else { None },
            itlb_misses: 0,
            dtlb_misses: 0,
            stlb_misses: 0,
        })
    }

    /// Translate `va` needed at cycle `t` by the `side` TLB: the physical address, and when
    /// it is known (`t` on a hit).
    /// (Always inlined: the core calls it for every fetch line and every access, and the
    /// call itself cost as much as a TLB hit.)
    #[inline(always)]
    pub fn translate(
        &mut self,
        side: Side,
        va: u64,
        t: Cycle,
        pm: &mut PageMap,
        hier: &mut Hierarchy,
        eng: &mut Engine,
    ) -> Result<(u64, Cycle), StepError> {
        let (tlb, misses) = match side {
            Side::Inst => (&mut self.itlb, &mut self.itlb_misses),
            Side::Data => (&mut self.dtlb, &mut self.dtlb_misses),
        };
        let off = va & ((1 << self.page_shift) - 1);
        let t = match (side, &mut self.dtlb_port) {
            (Side::Data, Some(g)) => match &mut self.recent {
                None => g.take(va >> self.page_shift, t),
                Some(r) => r.take(g, va >> self.page_shift, t),
            },
            _ => t,
        };
        let slot = match tlb.access(va, va >> self.page_shift) {
            Ok(frame) => return Ok((frame | off, t)),
            Err(slot) => slot,
        };
        let Some(pa) = pm.translate(va) else {
            // Nothing to map it to: the slot must not keep the page.
            tlb.tags.invalidate(slot);
            tlb.last = (u64::MAX, 0);
            return Err(StepError::OutOfMemory(va));
        };
        if pm.has_predated() && predated(pm, eng, t)? {
            hier.back_invalidate(eng);
        }
        tlb.frames[slot as usize] = pa - off;
        *misses += 1;
        if self.stlb.is_none() && self.walker.is_none() {
            return Ok((pa, t + self.miss_latency));
        }
        self.miss(va, pa, t, pm, hier, eng).map(|r| (pa, r))
    }

    /// Whether a late translation restarts the L1D's tag check (`tlb.restart`).
    #[inline]
    pub fn restarts(&self) -> bool {
        self.recent.is_some()
    }

    #[cold]
    fn miss(&mut self, va: u64, pa: u64, t: Cycle, pm: &mut PageMap, hier: &mut Hierarchy, eng: &mut Engine) -> Result<Cycle, StepError> {
        let mut t = t;
        if let Some(stlb) = &mut self.stlb {
            t += self.stlb_latency;
            if stlb.access(va).1 {
                return Ok(t);
            }
            self.stlb_misses += 1;
        }
        match &mut self.walker {
            Some(w) => w.walk(va, pa, t, pm, hier, eng),
            None => Ok(t + self.miss_latency),
        }
    }

    pub fn reset_stats(&mut self) {
        (self.itlb_misses, self.dtlb_misses, self.stlb_misses) = (0, 0, 0);
        if let Some(w) = &mut self.walker {
            w.reset_stats();
        }
    }

    pub fn stats(&self, out: &mut Stats, level_names: &[String]) {
        out.int("tlb.itlb_misses", self.itlb_misses);
        out.int("tlb.dtlb_misses", self.dtlb_misses);
        if self.stlb.is_some() {
            out.int("stlb.misses", self.stlb_misses);
        }
        if let Some(w) = &self.walker {
            w.stats(out, level_names);
        }
    }
}

/// D-TLB lookups remembered for `tlb.restart`: as many as ChampSim's DTLB read queue holds
/// (`rq_size` 16).
const RECENT: usize = 16;

/// With `tlb.restart`, the D-TLB as ChampSim's L1D meets it (src/cache.cc, src/channel.cc): a
/// lookup asked for at `x` (when the L1D starts its tag check, `issue_translation`) is merged
/// with one of its page still waiting in the DTLB's read queue then (`check_collision`), and
/// is translated by any lookup of its page that returns while its tag check is under way
/// (`finish_translation` marks every waiting entry of the page), the one of the cycle before
/// included.
struct Recent {
    /// (virtual page, when it was asked for, when it was looked up), in the order booked
    /// (an out-of-order core books them in any order of cycles).
    lookups: [(u64, Cycle, Cycle); RECENT],
    next: usize,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent { lookups: [(u64::MAX, 0, 0); RECENT], next: 0 }
    }
}

impl Recent {
    /// When page `page`'s translation, asked for at `x`, is known (at least `x`).
    fn take(&mut self, port: &mut TagPort, page: u64, x: Cycle) -> Cycle {
        let (mut waiting, mut known) = (false, Cycle::MAX);
        for &(p, asked, c) in &self.lookups {
            if p == page && c + 1 >= x {
                known = known.min(c);
                waiting |= (asked..=c).contains(&x);
            }
        }
        if !waiting {
            let lookups = &self.lookups;
            let c = port.take_in_order(x, |c| lookups.iter().filter(|l| l.2 == c && l.1 > x).count() as u64);
            self.lookups[self.next] = (page, x, c);
            self.next = (self.next + 1) % RECENT;
            known = known.min(c);
        }
        known.max(x)
    }
}

struct Table {
    pa: u64,
    /// Entries already written to memory (one bit each of 512).
    written: [u64; 8],
}

/// The page-table walker with its page-structure caches.
pub struct Walker {
    levels: u32,
    /// psc[j] caches pointers to level (levels − 1 − j) tables, keyed by the virtual address
    /// bits that select them; None where the preset has no cache for that level.
    psc: Vec<Option<Tags>>,
    /// ChampSim layout: per page-structure cache and slot, the last walks that filled it
    /// (virtual address, when the read that filled it returned), newest first. A hit reads
    /// first in the table of the newest filled by the time the walk starts: ChampSim fills
    /// when a read returns, so walks started together all find an older walk's entry.
    psc_filler: Vec<Vec<[(u64, Cycle); FILLS]>>,
    layout: Layout,
    tables: FxHashMap<u64, Table>,
    mshr: Slots,
    fault: Cycle,
    page: u64,
    walks: u64,
    psc_hits: u64,
    reads: u64,
    /// Walk reads by where they were served (depth as in `hierarchy::Served`).
    served: Vec<u64>,
    cycles: u64,
    faults: u64,
    mismatches: u64,
}

fn list(p: &Params, key: &str, n: usize) -> Result<Vec<u64>, ConfigError> {
    let text = p.str(key)?;
    let v: Vec<u64> = text.split(',').map(|s| s.trim().parse::<u64>()).collect::<Result<_, _>>().map_err(|_| {
        ConfigError(format!("{}: '{}' is not a comma-separated list of whole numbers", key, text))
    })?;
    if v.len() != n {
        return Err(ConfigError(format!("{}: {} values for {} page-structure caches (ptw.levels − 1)", key, v.len(), n)));
    }
    Ok(v)
}

impl Walker {
    fn new(p: &Params, page: u64) -> Result<Walker, ConfigError> {
        let levels = p.u64_min("ptw.levels", 2)?;
        if levels > 5 {
            return Err(ConfigError(format!("ptw.levels: {} (at most 5, x86-64 with LA57)", levels)));
        }
        let levels = levels as u32;
        let sets = list(p, "ptw.psc_sets", levels as usize - 1)?;
        let ways = list(p, "ptw.psc_ways", levels as usize - 1)?;
        let mut psc = Vec::new();
        for (s, w) in sets.iter().zip(&ways) {
            psc.push(if s * w == 0 {
                None
            } else {
                Some(Tags::new(s * w * 8, *w as usize, 8).map_err(|e| ConfigError(format!("ptw.psc_sets/psc_ways: {}", e)))?)
            });
        }
        let layout = match p.choice("ptw.layout", &["radix", "champsim"])?.as_str() {
            "champsim" => Layout::ChampSim,
            _ => Layout::Radix,
        };
        let psc_filler = psc.iter().map(|c| vec![[(0, Cycle::MAX); FILLS]; c.as_ref().map_or(0, |c| c.slots())]).collect();
        Ok(Walker {
            levels,
            psc,
            psc_filler,
            layout,
            tables: FxHashMap::default(),
            mshr: Slots::new(p.u64_min("ptw.mshrs", 1)? as usize),
            fault: p.u64_min("ptw.fault_latency", 0)?,
            page,
            walks: 0,
            psc_hits: 0,
            reads: 0,
            served: vec![0; 8],
            cycles: 0,
            faults: 0,
            mismatches: 0,
        })
    }

    /// Virtual address bits selecting the table at `level` (1 = the leaf table).
    #[inline]
    fn prefix(va: u64, level: u32) -> u64 {
        va >> (PAGE_SHIFT + LEVEL_BITS * level)
    }

    /// Walk for `va` (mapped to `pa`) from cycle `t`; returns when the translation is known.
    fn walk(&mut self, va: u64, pa: u64, t: Cycle, pm: &mut PageMap, hier: &mut Hierarchy, eng: &mut Engine) -> Result<Cycle, StepError> {
        self.walks += 1;
        let (slot, start) = self.mshr.acquire(t);
        // The deepest page-structure cache that knows the way: psc[j] skips levels
        // levels .. levels − j (it points at the table of level levels − 1 − j).
        let mut first = self.levels;
        // ChampSim: the first read after a hit, in the filling walk's table.
        let mut head = None;
        for j in (0..self.psc.len()).rev() {
            let below = self.levels - 1 - j as u32;
            if let Some(c) = &mut self.psc[j] {
                if let Some(s) = c.find(Self::prefix(va, below) << 3) {
                    let filler = match self.layout {
                        Layout::Radix => None,
                        // Filled by no walk whose read had returned by now: not there yet.
                        Layout::ChampSim => match self.psc_filler[j][s as usize].iter().find(|f| f.1 <= start) {
                            Some(f) => Some(f.0),
                            None => continue,
                        },
                    };
                    c.touch(s);
                    self.psc_hits += 1;
                    first = below;
                    if let Some(filler) = filler {
                        head = Some(self.table(filler, below, pm)? + Self::index(va, below) * 8);
                        first = below + 1;
                    }
                    break;
                }
            }
        }
        let mut now = start;
        let mut buf = [0u8; 8];
        let mut new_page = false;
        for level in (1..=first).rev() {
            let (entry, value, fresh) = match head.take() {
                // Not an entry of this address's path: read, never written or checked.
                Some(entry) => (entry, None, false),
                None => {
                    let (entry, value, fresh) = self.entry(va, pa, level, pm)?;
                    (entry, Some(value), fresh)
                }
            };
            if let (true, Some(value)) = (fresh, value) {
                // The OS fills the entry (a minor fault): written through the engine.
                self.faults += 1;
                now += self.fault;
                new_page |= level == 1;
                // The OS's write brings the entry's line in for this read, whose miss it is
                // (ChampSim's walker misses there; the OS's stores are no program's).
                let cached = eng.machine().l2.tags.find(entry).is_some();
                eng.write(entry, &value.to_le_bytes(), now)?;
                if !cached {
                    hier.brought_in(entry);
                }
                hier.back_invalidate(eng);
            }
            let s = hier.access(AccessKind::Walk, entry, now, eng)?;
            eng.read_cached(entry, &mut buf);
            // ChampSim's upper-level slots are shared by addresses that need different
            // values (its walker takes them from the page map, not memory): only leaf
            // entries, one per page, have a value to check there.
            let checked = self.layout == Layout::Radix || level == 1;
            if checked && value.is_some_and(|v| u64::from_le_bytes(buf) != v) {
                self.mismatches += 1;
            }
            now = if s.engine { s.ready.max(hier.settle(eng)?) } else { s.ready };
            self.reads += 1;
            self.served[(s.depth as usize).min(7)] += 1;
            if level > 1 {
                let j = (self.levels - level) as usize;
                if let Some(c) = &mut self.psc[j] {
                    let (slot, _) = c.access(Self::prefix(va, level - 1) << 3);
                    if self.layout == Layout::ChampSim {
                        let fills = &mut self.psc_filler[j][slot as usize];
                        fills.copy_within(0..FILLS - 1, 1);
                        fills[0] = (va, now);
                    }
                }
            }
        }
        if new_page && self.layout == Layout::ChampSim {
            // ChampSim faults once more for the page itself, after the walk's last read:
            // `VirtualMemory::va_to_pa` maps a new page with minor_fault_penalty (src/ptw.cc
            // finish_last_step), beside the penalty of each new page-table entry.
            self.faults += 1;
            now += self.fault;
        }
        self.mshr.hold_until(slot, now);
        self.cycles += now - t;
        Ok(now)
    }

    /// The entry for `va` at `level`: its physical address, the value it must hold, and
    /// whether it is written for the first time now (tables are allocated on demand).
    /// (ChampSim: the value is the next entry's address, or the page's for the leaf.)
    fn entry(&mut self, va: u64, pa: u64, level: u32, pm: &mut PageMap) -> Result<(u64, u64, bool), StepError> {
        let table = self.table(va, level, pm)?;
        // ChampSim reads the root at the index of the level below it.
        let idx = Self::index(va, if self.layout == Layout::ChampSim && level == self.levels { level - 1 } else { level });
        let value = match (level, self.layout) {
            (1, _) => pa & !(self.page - 1) | PTE_FLAGS,
            (_, Layout::Radix) => self.table(va, level - 1, pm)? | PTE_FLAGS,
            (_, Layout::ChampSim) => self.table(va, level - 1, pm)? + Self::index(va, level - 1) * 8,
        };
        let t = self.tables.get_mut(&self.key(va, level)).expect("allocated above");
        let (w, b) = ((idx / 64) as usize, idx % 64);
        let fresh = t.written[w] >> b & 1 == 0;
        t.written[w] |= 1 << b;
        Ok((table + idx * 8, value, fresh))
    }

    /// `va`'s index into a table of `level`.
    #[inline]
    fn index(va: u64, level: u32) -> u64 {
        (va >> (PAGE_SHIFT + LEVEL_BITS * (level - 1))) & ((1 << LEVEL_BITS) - 1)
    }

    /// Which table of `level` holds `va`'s entry: radix, the bits above the level's index;
    /// ChampSim, the bits from the level's index up (one root).
    #[inline]
    fn key(&self, va: u64, level: u32) -> u64 {
        let selector = match self.layout {
            Layout::Radix => Self::prefix(va, level),
            Layout::ChampSim if level == self.levels => 0,
            Layout::ChampSim => Self::prefix(va, level - 1),
        };
        selector << 3 | level as u64
    }

    /// Physical address of the table at `level` on `va`'s path, allocated on first use.
    fn table(&mut self, va: u64, level: u32, pm: &mut PageMap) -> Result<u64, StepError> {
        let key = self.key(va, level);
        if let Some(t) = self.tables.get(&key) {
            return Ok(t.pa);
        }
        let pa = pm.alloc_frame().ok_or(StepError::OutOfMemory(va))?;
        self.tables.insert(key, Table { pa, written: [0; 8] });
        Ok(pa)
    }

    fn reset_stats(&mut self) {
        (self.walks, self.psc_hits, self.reads, self.cycles, self.faults, self.mismatches) = (0, 0, 0, 0, 0, 0);
        self.served.iter_mut().for_each(|c| *c = 0);
        self.mshr.reset_stats();
    }

    fn stats(&self, out: &mut Stats, level_names: &[String]) {
        out.int("ptw.walks", self.walks);
        out.int("ptw.psc_hits", self.psc_hits);
        out.int("ptw.reads", self.reads);
        for (d, name) in level_names.iter().enumerate() {
            out.int(&format!("ptw.reads_from_{}", name), self.served[d.min(7)]);
        }
        out.int("ptw.cycles", self.cycles);
        out.int("ptw.mshr_full_cycles", self.mshr.wait_cycles);
        out.int("ptw.faults", self.faults);
        out.int("ptw.pte_mismatches", self.mismatches);
    }
}

/// Pages that predate the trace just came into use: those a tracer's `--skip` named
/// (`Instr::set_pages`) the engine sets up as memory from before the trace when first used;
/// those of a lazily set-up loader image (`pages.image=lazy`) have their lines written now,
/// untimed (`Engine::set_up`), `t` being the cycle the run is at. Returns whether any was:
/// lines the set-up displaced from the L2 must then leave the core's caches
/// (`Hierarchy::back_invalidate`).
#[cold]
pub(crate) fn predated(pm: &mut PageMap, eng: &mut Engine, t: Cycle) -> Result<bool, StepError> {
    for pa in pm.drain_predated() {
        eng.mark_predating(pa);
    }
    let line = eng.line() as usize;
    let pages: Vec<_> = pm.drain_image().collect();
    for (pa, page) in &pages {
        for l in (0..4096 / line).filter(|&l| page.lines >> l & 1 == 1) {
            eng.set_up(pa + (l * line) as u64, &page.bytes[l * line..(l + 1) * line], t)?;
        }
    }
    Ok(!pages.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TLB's shortcuts (the last page, a hit found inline) give every lookup the slot and
    /// the hit or miss `Tags::access` gives, and leave the same replacement order: pages
    /// drawn from a few more than the TLB holds, in runs and jumps, on 1, 2, 4 and 8 ways.
    #[test]
    fn tlb_lookups_hit_miss_and_replace_as_tags_access_does() {
        for ways in [1usize, 2, 4, 8] {
            let page = 4096u64;
            let tags = || Tags::new(16 * page, ways, page).unwrap();
            let (mut tlb, mut plain) = (Tlb::new(tags()), tags());
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut vpage = 0u64;
            let mut hits = 0;
            for k in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly the same or a neighbouring page, sometimes one of 40.
                vpage = match x % 8 {
                    0..=3 => vpage,
                    4 | 5 => (vpage + 1) % 40,
                    _ => (x >> 8) % 40,
                };
                let va = vpage * page + (x >> 20) % page;
                let (slot, hit) = plain.access(va);
                match tlb.access(va, vpage) {
                    Ok(_) => {
                        assert!(hit, "lookup {k}: a hit where Tags::access misses ({ways} ways)");
                        hits += 1;
                    }
                    Err(s) => assert!(!hit && s == slot, "lookup {k}: miss in slot {s}, Tags::access: {slot} hit {hit}"),
                }
                assert_eq!(tlb.tags.find(va), Some(slot), "lookup {k}");
                for probe in 0..40 {
                    assert_eq!(tlb.tags.victim(probe * page), plain.victim(probe * page), "lookup {k}: victims differ");
                }
            }
            assert!(hits > 10_000 && hits < 19_000, "{hits} hits: the test should hit and miss");
        }
    }

    #[test]
    fn champsim_walks_started_together_do_not_wait_for_each_others_reads() {
        let p = crate::configure("champsim", Some("none"), Some("none"), &["ptw.layout=champsim".into()]).unwrap();
        let mut eng = Engine::new(&p, 1).unwrap();
        let mut hier = Hierarchy::new(&p, &eng).unwrap();
        let mut pm = PageMap::new(eng.data_size(), 4096);
        let mut w = Walker::new(&p, 4096).unwrap();
        let mut walk = |va: u64, t: Cycle| {
            let pa = pm.translate(va).unwrap();
            w.walk(va, pa, t, &mut pm, &mut hier, &mut eng).unwrap() - t
        };
        // Page 0 of a 2 MiB region walked long before; then pages 1 and 2 at the same cycle.
        // Both find page 0's walk in the page-structure cache (the line holding their
        // index in its leaf table is in the L1D), so each needs one read from memory; had
        // page 2's walk read in page 1's table, it would wait for page 1's leaf read first
        // (813 cycles against 408 when fills were visible at once).
        let base = 0x4000_0000;
        walk(base, 0);
        let (one, two) = (walk(base + 4096, 100_000), walk(base + 2 * 4096, 100_000));
        assert!(two < one + one / 4, "page 2's walk took {} cycles, page 1's {}", two, one);
        // A walk that starts after page 2's fill returned reads in page 2's table: that line
        // is in the L1D too, so it is as quick.
        assert!(walk(base + 3 * 4096, 200_000) < one + one / 4);
    }

    #[test]
    fn the_dtlb_looks_up_two_pages_in_any_two_cycles_and_shares_a_waiting_lookup() {
        // champsim: tlb.tag_checks 2, tlb.tags_in_flight 2. Six pages, each mapped and in the
        // D-TLB long before, looked up at one cycle: two a cycle, then none the next.
        let lookups = |sets: &[&str], pages: &[u64]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            let p = crate::configure("champsim", Some("none"), Some("none"), &sets).unwrap();
            let mut eng = Engine::new(&p, 1).unwrap();
            let mut hier = Hierarchy::new(&p, &eng).unwrap();
            let mut pm = PageMap::new(eng.data_size(), 4096);
            let mut m = Mmu::new(&p, 4096).unwrap();
            let va = |k: u64| 0x4000_0000 + 4096 * k;
            for k in 0..6 {
                m.translate(Side::Data, va(k), 10_000 * k, &mut pm, &mut hier, &mut eng).unwrap();
            }
            let t = 100_000;
            pages.iter().map(|&k| m.translate(Side::Data, va(k), t, &mut pm, &mut hier, &mut eng).unwrap().1 - t).collect::<Vec<_>>()
        };
        assert_eq!(lookups(&[], &[0, 1, 2, 3, 4, 5]), vec![0, 0, 2, 2, 4, 4]);
        // A lookup of the page the one before waits for shares it (ChampSim's queue merges them).
        assert_eq!(lookups(&[], &[0, 1, 2, 2, 3]), vec![0, 0, 2, 2, 2]);
        // Without it nothing waits.
        assert_eq!(lookups(&["tlb.tag_checks=0", "tlb.tags_in_flight=0"], &[0, 1, 2, 3, 4, 5]), vec![0; 6]);
    }

    #[test]
    fn with_restarts_lookups_go_in_the_order_asked_and_share_any_waiting_one_of_their_page() {
        // champsim (tlb.restart on): pages looked up at the cycles given, each mapped and in
        // the D-TLB long before; returns when each translation is known, from its cycle.
        let lookups = |restart: bool, asks: &[(u64, Cycle)]| {
            let p = crate::configure("champsim", Some("none"), Some("none"), &[format!("tlb.restart={}", restart)]).unwrap();
            let mut eng = Engine::new(&p, 1).unwrap();
            let mut hier = Hierarchy::new(&p, &eng).unwrap();
            let mut pm = PageMap::new(eng.data_size(), 4096);
            let mut m = Mmu::new(&p, 4096).unwrap();
            let va = |k: u64| 0x4000_0000 + 4096 * k;
            for k in 0..8 {
                m.translate(Side::Data, va(k), 10_000 * k, &mut pm, &mut hier, &mut eng).unwrap();
            }
            let t = 100_000;
            asks.iter().map(|&(k, at)| m.translate(Side::Data, va(k), t + at, &mut pm, &mut hier, &mut eng).unwrap().1 - t - at).collect::<Vec<_>>()
        };
        // Page 2's second lookup finds its first still waiting in the queue, behind page 3's:
        // merged (src/channel.cc check_collision). Without, only the lookup just before is shared.
        let asks = [(0, 0), (1, 0), (2, 0), (3, 0), (2, 0)];
        assert_eq!(lookups(true, &asks), vec![0, 0, 2, 2, 2]);
        assert_eq!(lookups(false, &asks), vec![0, 0, 2, 2, 4]);
        // A lookup booked first but asked for later (a retired store's, booked at its commit) is
        // not waiting when an earlier one of its page is asked for: that one looks up itself.
        assert_eq!(lookups(true, &[(5, 10), (5, 0)]), vec![0, 0]);
        // Pages 1 and 2 booked first but asked for a cycle later than page 3: ChampSim's queue
        // serves page 3 first (in the order asked); booked in program order it waited 3.
        let asks = [(1, 1), (2, 1), (3, 0)];
        assert_eq!(lookups(true, &asks), vec![0, 0, 0]);
        assert_eq!(lookups(false, &asks), vec![0, 0, 3]);
        // Page 6 looked up the cycle before, with page 7 filling the two cycles: its
        // translation comes back while the new lookup's tag check is under way and serves it
        // (finish_translation marks every waiting entry of its page); without, it waits.
        let asks = [(6, 0), (7, 0), (6, 1)];
        assert_eq!(lookups(true, &asks), vec![0, 0, 0]);
        assert_eq!(lookups(false, &asks), vec![0, 0, 1]);
    }

    #[test]
    fn champsim_faults_once_more_for_a_new_page_itself() {
        // Two first touches of neighbouring pages, one walk well after the other: the second
        // makes only its leaf entry. ChampSim charges that entry's fault and the page's own
        // (va_to_pa), so the walk carries two faults; x86 tables charge the entry only.
        for (layout, page_faults) in [("champsim", 1u64), ("radix", 0)] {
            let p = crate::configure("champsim", Some("none"), Some("none"), &[format!("ptw.layout={}", layout)]).unwrap();
            let mut eng = Engine::new(&p, 1).unwrap();
            let mut hier = Hierarchy::new(&p, &eng).unwrap();
            let mut pm = PageMap::new(eng.data_size(), 4096);
            let mut w = Walker::new(&p, 4096).unwrap();
            let base = 0x4000_0000;
            for (k, t) in [(0u64, 0u64), (1, 100_000)] {
                let pa = pm.translate(base + k * 4096).unwrap();
                w.walk(base + k * 4096, pa, t, &mut pm, &mut hier, &mut eng).unwrap();
            }
            let first = w.faults;
            let pa = pm.translate(base + 2 * 4096).unwrap();
            w.walk(base + 2 * 4096, pa, 200_000, &mut pm, &mut hier, &mut eng).unwrap();
            assert_eq!(w.faults - first, 1 + page_faults, "{}", layout);
            // Walked again (its translation forgotten): no fault at all.
            w.walk(base + 2 * 4096, pa, 300_000, &mut pm, &mut hier, &mut eng).unwrap();
            assert_eq!(w.faults - first, 1 + page_faults, "{}", layout);
        }
    }
}
