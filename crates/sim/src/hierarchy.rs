//! The cache levels above the protected boundary, as data: the L1s (`l1i`, `l1d`), then the
//! private levels a preset names in `caches.private` (e.g. ChampSim's L2C), then the
//! engine's trusted cache — always the LAST level, where metadata lives and lines are
//! encrypted and verified (its keys are `l2.*` for the seeds' two-level machines). Each level
//! has size, ways, line, latency, fill latency, MSHRs and replacement.
//!
//! Levels here hold tags and fill times only: the bytes of every line live in the protected
//! level, which therefore includes all of them (its evictions invalidate copies up here). The
//! private levels are otherwise non-inclusive of each other, as ChampSim's are.

use rustc_hash::FxHashMap;
use secmem_core::stats::Stats;
use secmem_core::{AccessKind, ConfigError, Engine, IntegrityError, Params};
use secmem_timing::{Cycle, Slots, Tags};

/// Which L1 an access starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Inst,
    Data,
}

/// Where an access was served and when its data is usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub ready: Cycle,
    /// 0: the L1; 1..=k: the private levels; k + 1: the protected level; k + 2: memory.
    pub depth: u8,
    /// Whether the protected level was accessed (the caller settles the engine after its
    /// byte operation, see `Engine::settle`).
    pub engine: bool,
    /// The L1 slot now holding the line.
    pub slot: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repl {
    Lru,
    Fifo,
    Random,
}

pub const REPLACEMENTS: &[&str] = &["lru", "fifo", "random"];

/// A level's tag checks a cycle (`LEVEL.tag_checks`; ChampSim's `max_tag_check`, src/cache.cc
/// `CACHE::operate`): a lookup waits for the first cycle with one left. A lookup of the line
/// another is waiting to look up, arriving while it waits, shares that one's check: ChampSim
/// merges requests for one line that meet in a queue (src/channel.cc `check_collision`).
/// With `LEVEL.tags_in_flight` at most that many lookups start in any `latency` consecutive
/// cycles (ChampSim starts no tag check while max_tag_check x its hit latency are under way,
/// counting each until the cycle after its check: at 1 a cycle and a hit latency of 5, five
/// checks every six cycles; here `latency` includes that cycle, the channel's; an L1's
/// latency does not, so there it is `latency` + 1).
///
/// At the L1D, retired stores (`core.store_at_retire`) reach ChampSim's tag checks through
/// the core's write queue, which has a share of its own (`width` a cycle, as the read queue)
/// and goes first (src/cache.cc `CACHE::operate` serves each upper level's WQ, then RQ):
/// `take_write` books them in their own count, and against `tags_in_flight` with the loads.
pub(crate) struct TagPort {
    width: u64,
    /// Lookups of the write queue by cycle, as `counts` (empty until the first).
    writes: Vec<u64>,
    /// With `tags_in_flight`: at most this many lookups in any `hold` consecutive cycles.
    in_flight: Option<(u64, Cycle)>,
    /// Lookups by cycle for the last `TAG_CAL` cycles (`cycle << 8 | lookups`), booked in
    /// any order of cycles as an out-of-order core books them.
    counts: Vec<u64>,
    /// The last lookup booked: its line, when it arrived and its cycle.
    line: u64,
    arrived: Cycle,
    at: Cycle,
    /// Cycles lookups waited for a tag check.
    wait_cycles: u64,
}

const TAG_CAL: usize = 1 << 12;

impl TagPort {
    /// Level `name`'s port, whose lookups take `latency`; None without `name.tag_checks`.
    pub(crate) fn new(p: &Params, name: &str, hold: Cycle) -> Result<Option<TagPort>, ConfigError> {
        let key = |k: &str| format!("{}.{}", name, k);
        let get = |k: &str| if p.contains(&key(k)) { p.u64_min(&key(k), 0) } else { Ok(0) };
        let (n, in_flight) = (get("tag_checks")?, get("tags_in_flight")?);
        if n > 255 {
            return Err(ConfigError(format!("{}: {} is more than 255", key("tag_checks"), n)));
        }
        if in_flight > 0 && n == 0 {
            return Err(ConfigError(format!("{}: needs {} (tag checks a cycle)", key("tags_in_flight"), key("tag_checks"))));
        }
        let in_flight = (in_flight > 0).then_some((in_flight, hold.max(1)));
        Ok((n > 0).then(|| TagPort { width: n, writes: Vec::new(), in_flight, counts: vec![u64::MAX; TAG_CAL], line: u64::MAX, arrived: 0, at: 0, wait_cycles: 0 }))
    }

    #[inline]
    fn count_in(counts: &[u64], c: Cycle) -> u64 {
        match counts.get(c as usize & (TAG_CAL - 1)) {
            Some(&e) if e >> 8 == c => e & 0xFF,
            _ => 0,
        }
    }

    /// Lookups (reads and writes) booked at `c`.
    #[inline]
    fn count(&self, c: Cycle) -> u64 {
        Self::count_in(&self.counts, c)
    }

    /// One more lookup in `counts` at `c`.
    fn book(counts: &mut [u64], c: Cycle) {
        let n = Self::count_in(counts, c);
        counts[c as usize & (TAG_CAL - 1)] = c << 8 | (n + 1);
    }

    /// Whether a lookup at `c` keeps every `hold` consecutive cycles around it under `n`.
    fn fits(&self, c: Cycle, (n, hold): (u64, Cycle)) -> bool {
        self.fits_with(c, (n, hold), |x| self.count(x))
    }

    fn fits_with(&self, c: Cycle, (n, hold): (u64, Cycle), count: impl Fn(Cycle) -> u64) -> bool {
        let lo = c.saturating_sub(hold - 1);
        let mut sum: u64 = (lo..lo + hold).map(&count).sum();
        for s in lo..=c {
            if sum >= n {
                return false;
            }
            sum = sum + count(s + hold) - count(s);
        }
        true
    }

    /// With `tlb.restart`, a D-TLB lookup asked for at `t`: as `take`, except that the
    /// lookups `later(c)` says were booked at cycle `c` though asked for after `t` do not
    /// count. ChampSim's DTLB serves its queue in the order asked; here lookups are booked in
    /// program order (a retired store's at its commit, before the younger loads that may ask
    /// earlier), so one asked earlier goes first, and those it passes keep their times.
    pub(crate) fn take_in_order(&mut self, t: Cycle, later: impl Fn(Cycle) -> u64) -> Cycle {
        // (Saturating: a lookup booked more than the calendar's span away may have left it.)
        let count = |x: Cycle| self.count(x).saturating_sub(later(x));
        let mut c = t;
        while count(c) >= self.width || self.in_flight.is_some_and(|w| !self.fits_with(c, w, count)) {
            c += 1;
        }
        Self::book(&mut self.counts, c);
        self.wait_cycles += c - t;
        c
    }

    /// The cycle line `line`, arriving at `t`, is looked up.
    #[inline]
    pub(crate) fn take(&mut self, line: u64, t: Cycle) -> Cycle {
        if line == self.line && (self.arrived..=self.at).contains(&t) {
            self.wait_cycles += self.at - t;
            return self.at;
        }
        let mut c = t;
        while self.count(c) - Self::count_in(&self.writes, c) >= self.width || self.in_flight.is_some_and(|w| !self.fits(c, w)) {
            c += 1;
        }
        Self::book(&mut self.counts, c);
        self.wait_cycles += c - t;
        (self.line, self.arrived, self.at) = (line, t, c);
        c
    }

    /// The cycle a tag check restarted at `t` after a late translation is looked up: it has
    /// no queue's share (ChampSim's stash goes first, on the whole `max_tag_check`, here twice
    /// a queue's share), within `tags_in_flight`.
    fn take_restart(&mut self, t: Cycle) -> Cycle {
        let mut c = t;
        while self.count(c) >= 2 * self.width || self.in_flight.is_some_and(|w| !self.fits(c, w)) {
            c += 1;
        }
        Self::book(&mut self.counts, c);
        self.wait_cycles += c - t;
        c
    }

    /// The cycle a retired store's write, arriving at `t`, is looked up (the L1D's write queue).
    fn take_write(&mut self, t: Cycle) -> Cycle {
        if self.writes.is_empty() {
            self.writes = vec![u64::MAX; TAG_CAL];
        }
        let mut c = t;
        while Self::count_in(&self.writes, c) >= self.width || self.in_flight.is_some_and(|w| !self.fits(c, w)) {
            c += 1;
        }
        Self::book(&mut self.counts, c);
        Self::book(&mut self.writes, c);
        self.wait_cycles += c - t;
        c
    }
}

/// One private level: tags, when each line's fill completes, MSHRs.
pub struct Level {
    pub name: String,
    tags: Tags,
    ready: Vec<Cycle>,
    /// Per slot, where the line's bytes are in the protected level: a guess, checked on use
    /// (`Engine::cached_at`), so an L1D hit's byte operation skips that level's tag search.
    pub below: Vec<u32>,
    ways: usize,
    sets: u64,
    /// Cycles to look a line up (and, on a hit, deliver it).
    pub latency: Cycle,
    /// Cycles a miss's data takes to be written in on its way back up.
    fill: Cycle,
    /// Misses in flight at once (None: unlimited).
    mshr: Option<Slots>,
    /// Tag checks a cycle (None: unlimited): at an L1 for its loads and fetches only (stores
    /// and page-walk reads reach ChampSim's L1D through queues of their own, each with its
    /// own share), below the L1s for every lookup.
    tag: Option<TagPort>,
    repl: Repl,
    rng: u64,
    /// Per slot, whether the line was written since it came in (with `caches.writebacks`;
    /// empty otherwise), and the dirty line the last `install` displaced.
    dirty: Vec<bool>,
    dirty_victim: Option<u64>,
    pub accesses: u64,
    pub misses: u64,
}

/// Keys every level has, read by [`Level::new`] (and by the protected level's checks).
pub const LEVEL_KEYS: &[&str] = &["size", "ways", "line", "latency", "fill_latency", "mshrs", "tag_checks", "tags_in_flight", "replacement"];

impl Level {
    /// Level `name`; `l1`: one of the L1s, whose `latency` leaves out the cycle from the core.
    pub fn new(p: &Params, name: &str, l1: bool) -> Result<Level, ConfigError> {
        let k = |s: &str| format!("{}.{}", name, s);
        let ways = p.u64_min(&k("ways"), 1)? as usize;
        let tags = Tags::new(p.size(&k("size"))?, ways, p.size(&k("line"))?).map_err(|e| ConfigError(format!("{}: {}", name, e)))?;
        let n = tags.slots();
        let mshrs = p.u64_min(&k("mshrs"), 0)? as usize;
        let latency = p.u64_min(&k("latency"), 1)?;
        let repl = match p.choice(&k("replacement"), REPLACEMENTS)?.as_str() {
            "lru" => Repl::Lru,
            "fifo" => Repl::Fifo,
            _ => Repl::Random,
        };
        Ok(Level {
            name: name.to_string(),
            tags,
            ready: vec![0; n],
            below: vec![secmem_timing::NO_SLOT; n],
            ways,
            sets: (n / ways) as u64,
            latency,
            fill: p.u64_min(&k("fill_latency"), 0)?,
            mshr: (mshrs > 0).then(|| Slots::new(mshrs)),
            tag: TagPort::new(p, name, latency + l1 as Cycle)?,
            repl,
            rng: 0x9E37_79B9_7F4A_7C15,
            dirty: if p.bool("caches.writebacks")? { vec![false; n] } else { Vec::new() },
            dirty_victim: None,
            accesses: 0,
            misses: 0,
        })
    }

    pub fn line_bytes(&self) -> u64 {
        self.tags.line_bytes()
    }

    /// The slot holding `pa`'s line, updating the replacement state on a hit.
    #[inline]
    fn lookup(&mut self, pa: u64) -> Option<u32> {
        let s = self.tags.find(pa)?;
        if self.repl == Repl::Lru {
            self.tags.touch(s);
        }
        Some(s)
    }

    /// Install `pa`'s line, filled at `ready`; returns its slot.
    #[inline]
    fn install(&mut self, pa: u64, ready: Cycle) -> u32 {
        let v = match self.repl {
            // FIFO: hits never touch, so the least recently touched is the oldest filled.
            Repl::Lru | Repl::Fifo => self.tags.victim(pa),
            Repl::Random => {
                let base = ((pa / self.tags.line_bytes()) & (self.sets - 1)) as u32 * self.ways as u32;
                match (base..base + self.ways as u32).find(|&s| self.tags.addr_of(s).is_none()) {
                    Some(s) => s,
                    None => {
                        // xorshift64: deterministic across runs.
                        self.rng ^= self.rng << 13;
                        self.rng ^= self.rng >> 7;
                        self.rng ^= self.rng << 17;
                        base + (self.rng % self.ways as u64) as u32
                    }
                }
            }
        };
        if !self.dirty.is_empty() {
            if let (Some(a), true) = (self.tags.addr_of(v), self.dirty[v as usize]) {
                self.dirty_victim = Some(a);
            }
            self.dirty[v as usize] = false;
        }
        self.tags.install(v, pa);
        self.ready[v as usize] = ready;
        v
    }

    /// A store wrote the line in `slot` (with `caches.writebacks`).
    #[inline]
    fn set_dirty(&mut self, slot: u32) {
        if let Some(d) = self.dirty.get_mut(slot as usize) {
            *d = true;
        }
    }

    fn invalidate_range(&mut self, base: u64, len: u64) {
        let step = self.tags.line_bytes();
        let mut a = base;
        while a < base + len {
            if let Some(s) = self.tags.find(a) {
                self.tags.invalidate(s);
            }
            a += step;
        }
    }

    fn reset_stats(&mut self) {
        (self.accesses, self.misses) = (0, 0);
        if let Some(m) = &mut self.mshr {
            m.reset_stats();
        }
        if let Some(g) = &mut self.tag {
            g.wait_cycles = 0;
        }
    }

    fn stats(&self, out: &mut Stats) {
        out.int(&format!("{}.accesses", self.name), self.accesses);
        out.rate(&format!("{}.miss_rate", self.name), self.misses, self.accesses);
        if let Some(m) = &self.mshr {
            out.int(&format!("{}.mshr_full_cycles", self.name), m.wait_cycles);
        }
        if let Some(g) = &self.tag {
            out.int(&format!("{}.tag_wait_cycles", self.name), g.wait_cycles);
        }
    }
}

/// Lines of the protected level brought in by external records and not read since, each
/// with whether the statistics still count its write: a built-in workload's image leaves
/// half a million of them. Kept as two bit masks per 64 consecutive lines, so the map has
/// one entry per 64 lines (it stays in the host's caches; a map per line missed them on
/// every eviction and first touch it was asked about).
struct FreshLines {
    line_shift: u32,
    /// Group of 64 lines -> (lines present, lines whose write is still counted).
    groups: FxHashMap<u64, (u64, u64)>,
    len: usize,
}

impl FreshLines {
    fn new(line: u64) -> FreshLines {
        FreshLines { line_shift: line.trailing_zeros(), groups: FxHashMap::default(), len: 0 }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn at(&self, pa: u64) -> (u64, u64) {
        let n = pa >> self.line_shift;
        (n >> 6, 1 << (n & 63))
    }

    /// `pa`'s line, its write counted.
    fn insert(&mut self, pa: u64) {
        let (g, bit) = self.at(pa);
        let e = self.groups.entry(g).or_insert((0, 0));
        if e.0 & bit == 0 {
            self.len += 1;
        }
        e.0 |= bit;
        e.1 |= bit;
    }

    /// Forget `pa`'s line; whether its write was counted, if it was there.
    #[inline]
    fn remove(&mut self, pa: u64) -> Option<bool> {
        let (g, bit) = self.at(pa);
        let e = self.groups.get_mut(&g)?;
        if e.0 & bit == 0 {
            return None;
        }
        let counted = e.1 & bit != 0;
        e.0 &= !bit;
        e.1 &= !bit;
        if e.0 == 0 {
            self.groups.remove(&g);
        }
        self.len -= 1;
        Some(counted)
    }

    /// The statistics were reset: no write is counted any more.
    fn uncount(&mut self) {
        self.groups.values_mut().for_each(|e| e.1 = 0);
    }
}

/// The L1s and the private levels below them, in front of the engine.
pub struct Hierarchy {
    pub l1i: Level,
    pub l1d: Level,
    /// Private levels shared by both L1s, nearest first.
    pub private: Vec<Level>,
    /// The protected level's own fill latency and MSHRs (its tags and bytes are the engine's).
    last_fill: Cycle,
    last_mshr: Option<Slots>,
    /// The protected level's tag checks a cycle (`l2.tag_checks`, None: unlimited).
    last_tag: Option<TagPort>,
    line: u64,
    /// Lines of the protected level not read since an external record brought them in, and
    /// whether the statistics still count that write (not if they were reset since).
    fresh: FreshLines,
    /// With several cores (`multi`): the protected level's evictions seen here, which the
    /// run loop passes on to the other cores' levels (None: one core, nothing to pass on).
    pub evictions: Option<Vec<u64>>,
    /// When the last L1 miss left its L1 (its lookup done and an MSHR taken): where a store
    /// written after commit frees its place in the write queue (`write`).
    l1_left: Cycle,
}

impl Hierarchy {
    pub fn new(p: &Params, engine: &Engine) -> Result<Hierarchy, ConfigError> {
        let l1i = Level::new(p, "l1i", true)?;
        let l1d = Level::new(p, "l1d", true)?;
        let names = p.str("caches.private")?;
        let mut private = Vec::new();
        for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if ["l1i", "l1d", "l2"].contains(&n) || private.iter().any(|l: &Level| l.name == n) {
                return Err(ConfigError(format!("caches.private: '{}' is named twice (l1i, l1d and l2 are always levels)", n)));
            }
            if !p.contains(&format!("{}.size", n)) {
                return Err(ConfigError(format!("caches.private: level '{}' has no [{}] section (size, ways, line, …)", n, n)));
            }
            private.push(Level::new(p, n, false)?);
        }
        let mut above = vec![&l1i, &l1d];
        above.extend(private.iter());
        for l in &above {
            if l.line_bytes() > engine.line() {
                return Err(ConfigError(format!(
                    "{}.line: {} B lines are longer than the protected level's {} B (it must include every level above)",
                    l.name,
                    l.line_bytes(),
                    engine.line()
                )));
            }
        }
        // The protected level is the engine's trusted cache: it replaces LRU, nothing else.
        p.choice("l2.replacement", &["lru"])
            .map_err(|e| ConfigError(format!("{} (the protected level is the engine's trusted cache, which replaces LRU)", e.0)))?;
        let mshrs = p.u64_min("l2.mshrs", 0)? as usize;
        Ok(Hierarchy {
            l1i,
            l1d,
            private,
            last_fill: p.u64_min("l2.fill_latency", 0)?,
            last_mshr: (mshrs > 0).then(|| Slots::new(mshrs)),
            last_tag: TagPort::new(p, "l2", p.u64_min("l2.latency", 1)?)?,
            line: engine.line(),
            fresh: FreshLines::new(engine.line()),
            evictions: None,
            l1_left: 0,
        })
    }

    #[inline]
    fn l1(&mut self, side: Side) -> &mut Level {
        match side {
            Side::Inst => &mut self.l1i,
            Side::Data => &mut self.l1d,
        }
    }

    /// Number of private levels (between the L1s and the protected level).
    pub fn depth(&self) -> usize {
        self.private.len()
    }

    /// Access physical address `pa` for a `kind` access (from the L1I for fetches, the L1D
    /// otherwise) at cycle `t`; the protected level counts it by kind. A miss at a level waits
    /// for a free MSHR there, goes one level down after the lookup latency, and comes back
    /// through each level's fill latency; every level it missed in then holds the line.
    #[inline(always)]
    pub fn access(&mut self, kind: AccessKind, pa: u64, t: Cycle, eng: &mut Engine) -> Result<Served, IntegrityError> {
        let side = if kind == AccessKind::Fetch { Side::Inst } else { Side::Data };
        let l1 = self.l1(side);
        let t = match &mut l1.tag {
            Some(g) if matches!(kind, AccessKind::Load | AccessKind::Fetch) => g.take(pa >> l1.tags.line_bytes().trailing_zeros(), t),
            _ => t,
        };
        self.access_started(kind, pa, t, eng)
    }

    /// With `tlb.restart`: the L1D starts the tag check of a load (`write`: of a retired
    /// store) arriving at `t` before it is translated, as ChampSim's does (src/cache.cc
    /// `initiate_tag_check` takes untranslated entries, which then ask the DTLB,
    /// `issue_translation`): the cycle it starts. Untranslated entries of one virtual line
    /// merge (src/channel.cc `check_collision` compares the addresses they have).
    pub fn l1d_start(&mut self, va: u64, t: Cycle, write: bool) -> Cycle {
        let line = va >> self.l1d.tags.line_bytes().trailing_zeros();
        match &mut self.l1d.tag {
            Some(g) if write => g.take_write(t),
            Some(g) => g.take(line, t),
            None => t,
        }
    }

    /// With `tlb.restart`: a tag check started again at `t`, once its late translation came
    /// back (ChampSim's `translation_stash`, which takes the L1D's tag bandwidth before its
    /// queues do): the cycle it starts.
    pub fn l1d_restart(&mut self, t: Cycle) -> Cycle {
        match &mut self.l1d.tag {
            Some(g) => g.take_restart(t),
            None => t,
        }
    }

    /// `access`, for a lookup whose tag check starts at `t` (taken already, `l1d_start`).
    #[inline(always)]
    pub fn access_started(&mut self, kind: AccessKind, pa: u64, t: Cycle, eng: &mut Engine) -> Result<Served, IntegrityError> {
        let side = if kind == AccessKind::Fetch { Side::Inst } else { Side::Data };
        let l1 = self.l1(side);
        l1.accesses += 1;
        if let Some(s) = l1.lookup(pa) {
            if kind == AccessKind::Store {
                l1.set_dirty(s);
            }
            // Inclusion: the protected level holds this line, so byte operations find it there.
            return Ok(Served { ready: (t + l1.latency).max(l1.ready[s as usize]), depth: 0, engine: false, slot: s });
        }
        l1.misses += 1;
        let s = self.miss(kind, side, pa, t, eng)?;
        if kind == AccessKind::Store {
            self.l1d.set_dirty(s.slot);
        }
        Ok(s)
    }

    /// With `caches.writebacks`: level `i`'s fill at `t` displaced a dirty line (0: an L1,
    /// 1..=k the private levels), which goes to the level below, as ChampSim's write-backs do
    /// (src/cache.cc `handle_fill` sends it to the lower level's write queue): a tag check
    /// there, and a private level without the line takes it in, dirty, as a fill
    /// (`handle_write`), which may displace one of its own. The protected level already holds
    /// every line's bytes: there only the tag check.
    #[cold]
    fn write_back(&mut self, i: usize, t: Cycle) {
        let from = if i == 0 { &mut self.l1d } else { &mut self.private[i - 1] };
        let Some(addr) = from.dirty_victim.take() else { return };
        if i == self.private.len() {
            if let Some(g) = &mut self.last_tag {
                g.take(addr >> self.line.trailing_zeros(), t);
            }
            return;
        }
        let l = &mut self.private[i];
        let t = match &mut l.tag {
            Some(g) => g.take(addr >> l.tags.line_bytes().trailing_zeros(), t),
            None => t,
        };
        match l.tags.find(addr) {
            Some(s) => l.set_dirty(s),
            None => {
                let ready = t + l.latency + l.fill;
                let s = l.install(addr, ready);
                l.set_dirty(s);
                self.write_back(i + 1, ready);
            }
        }
    }

    /// A retired store's write of `pa`, arriving at the L1D at `t` (`core.store_at_retire`):
    /// the access, and when the L1D took it out of its write queue — at its lookup, or for a
    /// miss once it holds an MSHR (ChampSim's L1D starts no tag check while its checks wait
    /// for MSHRs, src/cache.cc `CACHE::operate`, so its write queue waits with them).
    pub fn write(&mut self, pa: u64, t: Cycle, eng: &mut Engine) -> Result<(Served, Cycle), IntegrityError> {
        let lat = self.l1d.latency;
        let t = match &mut self.l1d.tag {
            Some(g) => g.take_write(t),
            None => t,
        };
        self.l1_left = t + lat;
        let s = self.access(AccessKind::Store, pa, t, eng)?;
        Ok((s, self.l1_left - lat))
    }

    /// `write` with `tlb.restart`: the store's tag check started at `first` (`l1d_start`) and,
    /// its translation late, again at `t`. It left the write queue at `first` (a restarted
    /// check waits in the translation stash), or for a miss once it holds an MSHR.
    pub fn write_started(&mut self, pa: u64, first: Cycle, t: Cycle, eng: &mut Engine) -> Result<(Served, Cycle), IntegrityError> {
        let lat = self.l1d.latency;
        self.l1_left = t + lat;
        let s = self.access_started(AccessKind::Store, pa, t, eng)?;
        Ok((s, if s.depth == 0 { first } else { self.l1_left - lat }))
    }

    /// An L1 miss (kept out of `access`, so its hit path stays small enough to inline).
    fn miss(&mut self, kind: AccessKind, side: Side, pa: u64, t: Cycle, eng: &mut Engine) -> Result<Served, IntegrityError> {
        if !self.private.is_empty() || self.last_mshr.is_some() || self.last_tag.is_some() || self.l1(side).mshr.is_some() {
            return self.access_below(kind, side, pa, t, eng);
        }
        // The seeds' two-level machines: straight to the protected level.
        let o = eng.access(pa, kind, t + self.l1(side).latency)?;
        let hit = o.hit && !self.first_touch(kind, pa, eng);
        let mut ready = o.ready;
        if !hit {
            ready += self.last_fill;
        }
        let l1 = self.l1(side);
        ready += l1.fill;
        let slot = l1.install(pa, ready);
        if l1.dirty_victim.is_some() {
            self.write_back(0, ready);
        }
        Ok(Served { ready, depth: if hit { 1 } else { 2 }, engine: true, slot })
    }

    /// Functional warming's access to the L1D line it accessed last (`Core::warm`, see
    /// `warm::Recent`), with nothing else in the L1D touched since: if the line is still in,
    /// a hit on its set's most recent line, which changes no replacement order — the access is
    /// counted and its data ready time returned. `slot` remembers where the line is.
    #[inline]
    pub fn l1d_again(&mut self, kind: AccessKind, pa: u64, slot: &mut u32, t: Cycle) -> Option<Cycle> {
        let l1 = &mut self.l1d;
        if *slot == secmem_timing::tags::NO_SLOT || l1.tags.addr_of(*slot) != Some(pa & !(l1.line_bytes() - 1)) {
            *slot = l1.tags.find(pa)?;
        }
        if kind == AccessKind::Store {
            l1.set_dirty(*slot);
        }
        l1.accesses += 1;
        Some((t + l1.latency).max(l1.ready[*slot as usize]))
    }

    #[cold]
    fn access_below(&mut self, kind: AccessKind, side: Side, pa: u64, t: Cycle, eng: &mut Engine) -> Result<Served, IntegrityError> {
        let k = self.private.len();
        // Down: each missed level's lookup and MSHR; `held[i]` is the MSHR taken at level i.
        let mut held: [(usize, usize); 8] = [(usize::MAX, 0); 8];
        let mut t = t;
        let mut served = None;
        for i in 0..=k {
            let l = if i == 0 {
                self.l1(side)
            } else {
                let l = &mut self.private[i - 1];
                if let Some(g) = &mut l.tag {
                    t = g.take(pa >> l.tags.line_bytes().trailing_zeros(), t);
                }
                l.accesses += 1;
                if let Some(s) = l.lookup(pa) {
                    served = Some(Served { ready: (t + l.latency).max(l.ready[s as usize]), depth: i as u8, engine: false, slot: 0 });
                    break;
                }
                l.misses += 1;
                l
            };
            t += l.latency;
            if let Some(m) = &mut l.mshr {
                let (idx, start) = m.acquire(t);
                if i < held.len() {
                    held[i] = (idx, 1);
                }
                t = start;
            }
            if i == 0 {
                self.l1_left = t;
            }
        }
        let mut s = match served {
            Some(s) => s,
            None => {
                if let Some(g) = &mut self.last_tag {
                    t = g.take(pa >> self.line.trailing_zeros(), t);
                }
                let mut tm = t;
                let mut slot = None;
                if let Some(m) = &mut self.last_mshr {
                    // Held only by misses: a hit needs none, and which it is shows only after.
                    let (idx, start) = m.acquire(t);
                    slot = Some(idx);
                    tm = start;
                }
                let o = eng.access(pa, kind, tm)?;
                let hit = o.hit && !self.first_touch(kind, pa, eng);
                let mut ready = o.ready;
                if !hit {
                    ready += self.last_fill;
                }
                match (slot, &mut self.last_mshr) {
                    (Some(idx), Some(m)) if !hit => m.hold_until(idx, ready),
                    (Some(idx), Some(m)) => m.hold_until(idx, t),
                    _ => {}
                }
                Served { ready, depth: k as u8 + 1 + !hit as u8, engine: true, slot: 0 }
            }
        };
        // Up: fill every level that missed, nearest the data first.
        for i in (0..s.depth.min(k as u8 + 1) as usize).rev() {
            let l = if i == 0 {
                self.l1(side)
            } else {
                &mut self.private[i - 1]
            };
            s.ready += l.fill;
            let slot = l.install(pa, s.ready);
            if i == 0 {
                s.slot = slot; // every access served below the L1 fills it
            }
            if let (Some(m), true) = (&mut l.mshr, i < held.len() && held[i].1 == 1) {
                m.hold_until(held[i].0, s.ready);
            }
            if l.dirty_victim.is_some() {
                self.write_back(i, s.ready);
            }
        }
        Ok(s)
    }

    /// Keep every level inside the protected one: drop copies of lines it let go.
    #[inline]
    pub fn back_invalidate(&mut self, eng: &mut Engine) {
        if let Some(mut log) = self.evictions.take() {
            eng.take_evicted_data(|a| {
                self.evicted(a);
                log.push(a);
            });
            self.evictions = Some(log);
            return;
        }
        eng.take_evicted_data(|a| self.evicted(a));
    }

    /// Let the engine write back what its last access displaced (keeping the levels inside
    /// it); returns when the write buffer took it all.
    #[inline]
    pub fn settle(&mut self, eng: &mut Engine) -> Result<Cycle, IntegrityError> {
        let accepted = eng.settle()?;
        self.back_invalidate(eng);
        Ok(accepted)
    }

    /// The protected level's line holding `pa` was brought in by the environment (an
    /// external record) for the instruction about to read it: to that first access it is
    /// still in memory, a miss, as it would be had nobody written it for the simulator.
    pub fn brought_in(&mut self, pa: u64) {
        self.fresh.insert(pa);
    }

    /// Whether this `kind` access is the first to a line `brought_in` (then forgotten, and
    /// the miss counted as this access's: `Engine::count_first_touch`).
    #[inline]
    fn first_touch(&mut self, kind: AccessKind, pa: u64, eng: &mut Engine) -> bool {
        if self.fresh.is_empty() {
            return false;
        }
        match self.fresh.remove(pa) {
            Some(write_counted) => {
                eng.count_first_touch(kind, write_counted);
                true
            }
            None => false,
        }
    }

    /// Cycles from an access at the L1 to its request reaching the protected level, when
    /// every level above misses without waiting.
    pub fn lookups(&self, side: Side) -> Cycle {
        let l1 = if side == Side::Data { &self.l1d } else { &self.l1i };
        l1.latency + self.private.iter().map(|l| l.latency).sum::<Cycle>()
    }

    /// Whether any level here holds `pa`'s line (tests of inclusion).
    #[cfg(test)]
    pub(crate) fn holds(&self, pa: u64) -> bool {
        [&self.l1i, &self.l1d].into_iter().chain(self.private.iter()).any(|l| l.tags.find(pa).is_some())
    }

    /// Drop every copy of the protected level's line at `addr` (it left the protected level).
    #[inline]
    pub fn evicted(&mut self, addr: u64) {
        if !self.fresh.is_empty() {
            self.fresh.remove(addr);
        }
        let line = self.line;
        self.l1d.invalidate_range(addr, line);
        self.l1i.invalidate_range(addr, line);
        for l in &mut self.private {
            l.invalidate_range(addr, line);
        }
    }

    pub fn reset_stats(&mut self) {
        self.fresh.uncount();
        self.l1i.reset_stats();
        self.l1d.reset_stats();
        for l in &mut self.private {
            l.reset_stats();
        }
        if let Some(m) = &mut self.last_mshr {
            m.reset_stats();
        }
        if let Some(g) = &mut self.last_tag {
            g.wait_cycles = 0;
        }
    }

    pub fn stats(&self, out: &mut Stats) {
        self.l1i.stats(out);
        self.l1d.stats(out);
        for l in &self.private {
            l.stats(out);
        }
        if let Some(m) = &self.last_mshr {
            out.int("l2.mshr_full_cycles", m.wait_cycles);
        }
        if let Some(g) = &self.last_tag {
            out.int("l2.tag_wait_cycles", g.wait_cycles);
        }
    }

    /// Names of the levels by depth (see [`Served::depth`]): L1 (`l1d` for data), the private
    /// levels, the protected level (`l2`) and `mem`.
    pub fn level_names(&self, side: Side) -> Vec<String> {
        let mut v = vec![if side == Side::Data { "l1d".to_string() } else { "l1i".to_string() }];
        v.extend(self.private.iter().map(|l| l.name.clone()));
        v.push("l2".into());
        v.push("mem".into());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configure;

    /// The grouped fresh-line set answers as a map per line does, over inserts, removes and
    /// resets of the count on lines that share and straddle groups.
    #[test]
    fn fresh_lines_answer_as_a_map_per_line() {
        let mut set = FreshLines::new(64);
        let mut model: FxHashMap<u64, bool> = FxHashMap::default();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Lines within 300 of each other (groups of 64 shared and crossed), bytes within a line.
            let pa = (x % 300) * 64 + (x >> 40) % 64;
            let line = pa & !63;
            match x >> 61 {
                0..=2 => {
                    set.insert(pa);
                    model.insert(line, true);
                }
                3..=6 => assert_eq!(set.remove(pa), model.remove(&line), "remove {} at step {}", pa, i),
                _ => {
                    set.uncount();
                    model.values_mut().for_each(|c| *c = false);
                }
            }
            assert_eq!(set.is_empty(), model.is_empty());
            assert_eq!(set.len, model.len());
        }
        assert!(set.groups.values().all(|e| e.0 != 0 && e.1 & !e.0 == 0), "no empty group kept, no count without a line");
    }

    fn machine(sets: &[&str]) -> (Hierarchy, Engine) {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = configure("champsim", Some("none"), Some("none"), &sets).unwrap();
        let eng = Engine::new(&p, 1).unwrap();
        (Hierarchy::new(&p, &eng).unwrap(), eng)
    }

    #[test]
    fn a_miss_goes_down_level_by_level_and_comes_back_through_every_fill() {
        let (mut h, mut eng) = machine(&[]);
        let a = 0x12_3440;
        let m = h.access(AccessKind::Load, a, 100, &mut eng).unwrap();
        eng.settle().unwrap();
        assert_eq!(m.depth, 3, "cold: from memory");
        let l2c = &h.private[0];
        // Down: L1D and L2C lookups, the protected level's (l2.latency) and memory; up: fills.
        let fills = h.l1d.fill + l2c.fill + h.last_fill;
        assert!(m.ready > 100 + h.l1d.latency + l2c.latency + fills, "{:?}", m);
        let hit = h.access(AccessKind::Load, a + 8, m.ready + 1, &mut eng).unwrap();
        assert_eq!((hit.depth, hit.ready), (0, m.ready + 1 + h.l1d.latency));
        // The same line from the other L1: the shared private level has it.
        let i = h.access(AccessKind::Fetch, a, m.ready + 10, &mut eng).unwrap();
        assert_eq!(i.depth, 1);
        assert_eq!(i.ready, m.ready + 10 + h.l1i.latency + h.private[0].latency + h.l1i.fill);
    }

    #[test]
    fn a_dirty_line_displaced_from_the_l1d_goes_to_the_l2c_and_a_clean_one_does_not() {
        // One L1D set filled, then one line more: the first is displaced. `gone`: the L2C has
        // lost its copy meanwhile, so the write-back must bring it in.
        for (kind, gone, dirty) in [(AccessKind::Store, false, true), (AccessKind::Store, true, true), (AccessKind::Load, false, false)] {
            let (mut h, mut eng) = machine(&[]);
            let first = 0x10_0000;
            let stride = h.l1d.sets * h.l1d.line_bytes();
            let mut t = 0;
            for k in 0..=h.l1d.ways as u64 {
                if gone && k == h.l1d.ways as u64 {
                    h.private[0].invalidate_range(first, 64);
                }
                t = h.access(kind, first + k * stride, t, &mut eng).unwrap().ready + 1;
                h.settle(&mut eng).unwrap();
            }
            assert!(h.l1d.tags.find(first).is_none(), "displaced from the L1D");
            let l2c = &h.private[0];
            let in_l2c = l2c.tags.find(first).map(|s| l2c.dirty[s as usize]);
            assert_eq!(in_l2c, if dirty || !gone { Some(dirty) } else { None }, "{kind:?}, gone {gone}");
        }
        // Without write-backs no level keeps dirty bits.
        let (h, _) = machine(&["caches.writebacks=false"]);
        assert!(h.l1d.dirty.is_empty() && h.private[0].dirty.is_empty());
    }

    #[test]
    fn a_full_mshr_file_delays_the_next_miss_until_one_returns() {
        let (mut h, mut eng) = machine(&["l1d.mshrs=2"]);
        let r: Vec<Served> = (0..3u64)
            .map(|k| {
                let s = h.access(AccessKind::Load, 0x10_0000 + k * 4096, 0, &mut eng).unwrap();
                eng.settle().unwrap();
                s
            })
            .collect();
        let first = r[0].ready.min(r[1].ready);
        assert!(r[2].ready >= first + h.l1d.latency, "{:?}", r);
        assert!(h.l1d.mshr.as_ref().unwrap().wait_cycles > 0);
    }

    #[test]
    fn loads_wait_for_a_tag_check_and_one_line_waiting_shares_it() {
        let (mut h, mut eng) = machine(&["l1d.tag_checks=1", "l2c.tag_checks=0", "l2c.tags_in_flight=0", "l2.tag_checks=0", "l2.tags_in_flight=0"]);
        let lat = h.l1d.latency;
        // Warm four lines into the L1D, far apart in time.
        for k in 0..4u64 {
            h.access(AccessKind::Load, 0x20_0000 + 64 * k, 10_000 * k, &mut eng).unwrap();
            eng.settle().unwrap();
        }
        let t = 100_000;
        let at = |h: &mut Hierarchy, eng: &mut Engine, a: u64, t: Cycle| h.access(AccessKind::Load, a, t, eng).unwrap().ready;
        // Three hits to three lines at once: one a cycle.
        assert_eq!(at(&mut h, &mut eng, 0x20_0000, t), t + lat);
        assert_eq!(at(&mut h, &mut eng, 0x20_0040, t), t + 1 + lat);
        assert_eq!(at(&mut h, &mut eng, 0x20_0080, t), t + 2 + lat);
        // A load of the line still waiting (arrived at t, looked up at t + 2) shares its check.
        assert_eq!(at(&mut h, &mut eng, 0x20_0088, t + 1), t + 2 + lat);
        // One arriving after it was looked up takes a check of its own.
        assert_eq!(at(&mut h, &mut eng, 0x20_0090, t + 3), t + 3 + lat);
        // Stores come through a queue of their own.
        assert_eq!(h.access(AccessKind::Store, 0x20_00C0, t + 3, &mut eng).unwrap().ready, t + 3 + lat);
        assert_eq!(h.l1d.tag.as_ref().unwrap().wait_cycles, 1 + 2 + 1);
    }

    #[test]
    fn a_private_level_takes_its_tag_checks_for_every_lookup_that_reaches_it() {
        let (mut h, mut eng) = machine(&["l1d.tag_checks=0", "l1d.tags_in_flight=0", "l2c.tag_checks=1", "l2.tag_checks=0", "l2.tags_in_flight=0"]);
        // Two lines in the L2C and not in the L1D: bring them in, then evict them from the L1D
        // by filling its set (64 sets x 12 ways of 64 B: 4 KiB apart share a set).
        for a in [0x40_0000u64, 0x40_0040] {
            h.access(AccessKind::Load, a, 0, &mut eng).unwrap();
            eng.settle().unwrap();
        }
        for k in 1..=12u64 {
            for a in [0x40_0000u64, 0x40_0040] {
                h.access(AccessKind::Load, a + 4096 * k, 1_000 * k, &mut eng).unwrap();
                eng.settle().unwrap();
            }
        }
        let t = 100_000;
        let (l1, l2c) = (h.l1d.latency, h.private[0].latency);
        let a = h.access(AccessKind::Load, 0x40_0000, t, &mut eng).unwrap();
        let b = h.access(AccessKind::Walk, 0x40_0040, t, &mut eng).unwrap();
        assert_eq!((a.depth, b.depth), (1, 1));
        assert_eq!(a.ready, t + l1 + l2c + h.l1d.fill);
        assert_eq!(b.ready, a.ready + 1, "the second L2C lookup waits a cycle");
    }

    #[test]
    fn tags_in_flight_hold_a_lookup_for_the_levels_latency() {
        // The L1D at one load a cycle and at most two lookups under way, each for its
        // latency (2) and the cycle from the core: two every three cycles, then one a cycle
        // once the latency is 1, two every four at 3.
        let hits = |sets: &[&str]| {
            let (mut h, mut eng) = machine(sets);
            for k in 0..6u64 {
                h.access(AccessKind::Load, 0x20_0000 + 64 * k, 10_000 * k, &mut eng).unwrap();
                eng.settle().unwrap();
            }
            let t = 100_000;
            (0..6u64).map(|k| h.access(AccessKind::Load, 0x20_0000 + 64 * k, t, &mut eng).unwrap().ready - t - h.l1d.latency).collect::<Vec<_>>()
        };
        assert_eq!(hits(&["l1d.tag_checks=2", "l1d.tags_in_flight=2"]), vec![0, 0, 3, 3, 6, 6]);
        assert_eq!(hits(&["l1d.tag_checks=1", "l1d.tags_in_flight=2", "l1d.latency=1"]), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(hits(&["l1d.tag_checks=1", "l1d.tags_in_flight=2", "l1d.latency=3"]), vec![0, 1, 4, 5, 8, 9]);
        let p = configure("champsim", Some("none"), Some("none"), &["l1d.tag_checks=0".into(), "l1d.tags_in_flight=2".into()]).unwrap();
        let eng = Engine::new(&p, 1).unwrap();
        match Hierarchy::new(&p, &eng) {
            Err(e) => assert_eq!(e.0, "l1d.tags_in_flight: needs l1d.tag_checks (tag checks a cycle)"),
            Ok(_) => panic!("tags_in_flight without tag_checks was taken"),
        }
    }

    #[test]
    fn a_retired_stores_lookup_has_the_write_queues_share_and_counts_in_flight_with_the_loads() {
        // The L1D at one lookup a cycle per queue, at most 4 under way for 3 cycles (the
        // champsim preset's): four loads take t..t+3; a write beside the first still fits
        // (3 in t..t+2 before it), a second write waits for its queue, then for the window
        // t..t+2 to hold fewer than 4, so goes at t + 3 beside the fourth load.
        let (mut h, mut eng) = machine(&["l1d.tag_checks=1", "l1d.tags_in_flight=4"]);
        let lines: Vec<u64> = (0..6u64).map(|k| 0x30_0000 + 64 * k).collect();
        for (k, &a) in lines.iter().enumerate() {
            h.access(AccessKind::Load, a, 10_000 * k as u64, &mut eng).unwrap();
            eng.settle().unwrap();
        }
        let t = 100_000;
        let lat = h.l1d.latency;
        let loads: Vec<u64> = lines[..4].iter().map(|&a| h.access(AccessKind::Load, a, t, &mut eng).unwrap().ready - lat - t).collect();
        assert_eq!(loads, vec![0, 1, 2, 3]);
        let writes: Vec<u64> = lines[4..].iter().map(|&a| h.write(a, t, &mut eng).unwrap().1 - t).collect();
        assert_eq!(writes, vec![0, 3]);
        // Without the in-flight limit each queue only has its own share: the writes go at t, t + 1.
        let (mut h, mut eng) = machine(&["l1d.tag_checks=1", "l1d.tags_in_flight=0"]);
        for (k, &a) in lines.iter().enumerate() {
            h.access(AccessKind::Load, a, 10_000 * k as u64, &mut eng).unwrap();
            eng.settle().unwrap();
        }
        for &a in &lines[..4] {
            h.access(AccessKind::Load, a, t, &mut eng).unwrap();
        }
        let writes: Vec<u64> = lines[4..].iter().map(|&a| h.write(a, t, &mut eng).unwrap().1 - t).collect();
        assert_eq!(writes, vec![0, 1]);
    }

    #[test]
    fn replacement_policies_choose_different_victims() {
        // One set of 2 ways: a, b, touch a, c. LRU evicts b; FIFO evicts a.
        let keep_a = |repl: &str| {
            let (mut h, mut eng) = machine(&["l1d.size=128B", "l1d.ways=2", &format!("l1d.replacement={}", repl)]);
            for a in [0u64, 64, 0, 128] {
                h.access(AccessKind::Load, a, 0, &mut eng).unwrap();
                eng.settle().unwrap();
            }
            h.l1d.tags.find(0).is_some()
        };
        assert!(keep_a("lru"));
        assert!(!keep_a("fifo"));
    }

    #[test]
    fn bad_levels_are_refused_by_name() {
        let p = configure("champsim", None, None, &["caches.private=l3".into()]).unwrap();
        let eng = Engine::new(&p, 1).unwrap();
        let e = Hierarchy::new(&p, &eng).err().unwrap().0;
        assert_eq!(e, "caches.private: level 'l3' has no [l3] section (size, ways, line, …)");
        let p = configure("champsim", None, None, &["l2.replacement=fifo".into()]).unwrap();
        let e = Hierarchy::new(&p, &eng).err().unwrap().0;
        assert!(e.contains("replaces LRU"), "{}", e);
    }
}
