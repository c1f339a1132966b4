//! The secure memory engine: the trusted L2 in front of an integrity scheme and an encryption
//! scheme, over untrusted memory. Used the same way by the timing model (with real cycle
//! numbers) and by the functional API (where the cycles are simply ignored).

use crate::decl::Role;
use crate::cache::{LineKind, TrustedCache};
use crate::codeauth::CodeAuth;
use crate::encryption::{Encryption, Seed};
use crate::integrity::Integrity;
use crate::error::IntegrityError;
use crate::layout::{Layout, Meta, MAX_LINE, MIN_LINE};
use crate::machine::{Machine, Victim};
use crate::mem::{UntrustedMemory, PAGE};
use crate::params::{ConfigError, Params};
use crate::registry;
use crate::port::{Adversary, Port};
use crate::speculation::Speculation;
use crate::stats::Stats;
use secmem_timing::dram::{Dram, DramParams};
use secmem_timing::tags::NO_SLOT;
use secmem_timing::{Bus, BusParams, Cycle, MemoryModel, Pipe};

/// What an access to the L2 is for. Counted apart (`l2.<kind>_accesses`), and a scheme may
/// treat kinds differently (code authentication checks instruction fetches, seed 001).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// An instruction fetch (an L1I miss).
    Fetch,
    Load,
    Store,
    /// A page-table walk's read.
    Walk,
}

impl AccessKind {
    pub const ALL: [AccessKind; 4] = [AccessKind::Fetch, AccessKind::Load, AccessKind::Store, AccessKind::Walk];

    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Fetch => "fetch",
            AccessKind::Load => "load",
            AccessKind::Store => "store",
            AccessKind::Walk => "walk",
        }
    }
}

/// Result of one L2 access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub hit: bool,
    /// When the requested data can be used (speculatively, where the machine allows it:
    /// `speculation.use_before_verify`).
    pub ready: Cycle,
    /// When the check of the data is complete (integrity, authentication).
    pub verified: Cycle,
}

pub struct Engine {
    pub(crate) m: Machine,
    pub(crate) integ: Box<dyn Integrity>,
    pub(crate) enc: Box<dyn Encryption>,
    /// Code authentication of instruction fetches (seed 001), if configured.
    pub(crate) auth: Option<CodeAuth>,
    /// What the integrity scheme protects (`Coverage::protects`).
    integ_protects: &'static [Role],
    pub(crate) line: u64,
    pub(crate) data_size: u64,
    /// The unprotected region for untrusted I/O (003 §4.6.1, 000 §5.3): base and size.
    pub(crate) dma: (u64, u64),
    /// A checkpoint's prewarm installs what it reads as state (`set_installing`).
    installing: bool,
}

/// The memory model behind the port, as the parameters choose it.
fn memory_model(p: &Params, hz: f64) -> Result<Box<dyn MemoryModel>, ConfigError> {
    let bus_hz = p.freq("memory.bus_clock")?;
    let beat = (hz / bus_hz).round().max(1.0) as Cycle;
    let width = p.size("memory.bus_width")?;
    let write_delay = p.u64_min("memory.write_delay", 0)?;
    let queue = p.u64_min("memory.write_queue", 0)? as usize;
    Ok(match p.choice("memory.model", &["bus", "dram"])?.as_str() {
        "dram" => {
            let d = Dram::new(DramParams {
                channels: p.u64_min("dram.channels", 1)?,
                banks: p.u64_min("dram.banks", 1)?,
                row_bytes: p.size("dram.row_bytes")?,
                interleave: p.size("dram.interleave")?,
                t_rp: p.u64_min("dram.tRP", 0)?,
                t_rcd: p.u64_min("dram.tRCD", 0)?,
                t_cas: p.u64_min("dram.tCAS", 0)?,
                clock: beat,
                width,
                write_delay,
            })
            .map_err(ConfigError)?
            .with_refresh(p.u64_min("dram.tREFI", 0)?, p.u64_min("dram.tRFC", 0)?)
            .with_write_mode(p.u64_min("dram.write_turnaround", 0)?, p.u64_min("dram.write_batch", 1)? as usize)
            .with_idle_writes(p.u64_min("dram.idle_writes", 0)?);
            Box::new(d.with_write_queue(queue))
        }
        _ => Box::new(
            Bus::new(BusParams { latency: p.u64_min("memory.latency", 1)?, width, beat_cycles: beat, write_delay })
                .with_write_queue(queue),
        ),
    })
}

/// Processor cycles per second from `core.clock`.
pub fn clock_hz(p: &Params) -> Result<f64, ConfigError> {
    p.freq("core.clock")
}

impl Engine {
    /// Build from parameters; `seed` fixes keys and random vectors (a simulation's seed).
    pub fn new(p: &Params, seed: u64) -> Result<Engine, ConfigError> {
        Engine::with_keys(p, Seed::fixed(seed))
    }

    /// Build from parameters with keys from `seed`: a fixed seed or secret key material.
    pub fn with_keys(p: &Params, seed: Seed) -> Result<Engine, ConfigError> {
        let hz = clock_hz(p)?;
        let data_size = p.size("memory.size")?;
        let line = p.size("l2.line")?;
        let l2_size = p.size("l2.size")?;
        let ways = p.u64_min("l2.ways", 1)? as usize;
        if line as usize > MAX_LINE || (line as usize) < MIN_LINE || !line.is_power_of_two() {
            return Err(ConfigError(format!("l2.line: {} B is not a power of two from {} B to {} B", line, MIN_LINE, MAX_LINE)));
        }
        if data_size % PAGE != 0 {
            return Err(ConfigError(format!("memory.size: {} B is not a whole number of 4 KiB pages", data_size)));
        }
        let l2 = TrustedCache::new(l2_size, ways, line).map_err(|e| ConfigError(format!("l2: {}", e)))?;
        let aes_engines = p.u64_min("aes.engines", 1)? as f64;
        let aes = Pipe::new(p.u64_min("aes.latency", 1)?, aes_engines * p.rate("aes.throughput")? / hz, 16);
        let hash = Pipe::new(p.u64_min("hash.latency", 1)?, p.rate("hash.throughput")? / hz, 64);
        let spec = Speculation::new(p, line)?;
        let mut m = Machine::new(
            Port::new(UntrustedMemory::new(0), memory_model(p, hz)?),
            aes,
            hash,
            l2,
            p.u64_min("l2.latency", 1)?,
            p.u64_min("aes.xor_latency", 0)?,
            Layout::new(data_size, line),
            p.u64_min("hash.read_buffer", 1)? as usize,
            p.u64_min("hash.write_buffer", 1)? as usize,
        );
        m.spec = spec;
        // The schemes in the order their coverage needs: the one that lays out what the other
        // protects first. An encryption scheme built second carries every line laid out so far.
        let is = registry::integrity(&p.str("integrity")?)?;
        let es = registry::encryption(&p.str("encryption")?)?;
        registry::compatible(is, es)?;
        let (integ, mut enc) = if registry::integrity_first(is, es) {
            let integ = (is.build)(p, &mut m, seed)?;
            let covered = m.layout.end();
            (integ, (es.build)(p, &mut m, covered, seed)?)
        } else {
            let data = m.layout.data_size;
            let enc = (es.build)(p, &mut m, data, seed)?;
            ((is.build)(p, &mut m, seed)?, enc)
        };
        let auth = CodeAuth::build(p, &mut m, data_size, seed)?;
        let dma_size = p.size("memory.dma_size")?;
        let dma = (m.layout.alloc(Role::Unprotected, "dma (unprotected)", dma_size), dma_size);
        // Every region is placed: memory spans them all. A host that cannot reserve it is an
        // error, not an abort.
        let mut mem = UntrustedMemory::try_new(m.layout.end(), p.bool("memory.huge_pages")?)
            .map_err(|e| ConfigError(format!("memory.size: {}", e)))?;
        if p.bool("memory.boot_encrypted")? {
            if let Some(image) = enc.boot_encrypted(data_size).map_err(ConfigError)? {
                mem.set_boot_image(image);
            }
        }
        m.port.allocate(mem);
        Ok(Engine { m, integ, enc, auth, integ_protects: is.coverage.protects, line, data_size, dma, installing: false })
    }

    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes of protected program memory.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    pub fn machine(&self) -> &Machine {
        &self.m
    }

    pub fn integrity(&self) -> &dyn Integrity {
        &*self.integ
    }

    pub fn encryption(&self) -> &dyn Encryption {
        &*self.enc
    }

    pub fn codeauth(&self) -> Option<&CodeAuth> {
        self.auth.as_ref()
    }

    /// The loader's signing of code (001 §3): tags for the program bytes `code` at `addr`
    /// (whole lines of program memory), made with the processor's keys and written to the tag
    /// table, before the code runs. An error without code authentication or outside memory.
    pub fn sign_code(&mut self, addr: u64, code: &[u8]) -> Result<(), IntegrityError> {
        let b = self.line;
        let err = |what: String| IntegrityError::refused(addr, what);
        let Some(auth) = self.auth.as_mut() else { return Err(err("code authentication is off (codeauth = none)".into())) };
        if addr % b != 0 || code.len() as u64 % b != 0 {
            return Err(err(format!("code to sign must be whole {}-B lines", b)));
        }
        if addr.checked_add(code.len() as u64).is_none_or(|e| e > self.data_size) {
            return Err(err("code to sign lies outside program memory".into()));
        }
        for (k, block) in code.chunks(b as usize).enumerate() {
            auth.sign(&mut self.m, addr + k as u64 * b, block)?;
        }
        Ok(())
    }

    /// The adversary's handle on raw memory.
    pub fn untrusted(&mut self) -> &mut UntrustedMemory {
        self.m.port.untrusted(Adversary(()))
    }

    /// The adversary's read-only view of raw memory.
    pub fn untrusted_ref(&self) -> &UntrustedMemory {
        self.m.port.untrusted_ref(&Adversary(()))
    }

    pub fn layout(&self) -> &Layout {
        &self.m.layout
    }

    /// The unprotected DMA region as (base, size): devices write it directly; the processor
    /// reads it only with `read_without_checking`.
    pub fn dma_region(&self) -> (u64, u64) {
        self.dma
    }

    /// ReadWithoutChecking (003 §4.6.1): read the unprotected region straight from memory,
    /// neither decrypted nor verified. Anything outside that region is refused, so a program
    /// cannot be tricked into taking unchecked data for checked data.
    pub fn read_without_checking(&mut self, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, String> {
        let (base, size) = self.dma;
        if addr < base || addr.checked_add(out.len() as u64).is_none_or(|end| end > base + size) {
            return Err(format!(
                "ReadWithoutChecking of 0x{:x}+{} outside the unprotected region 0x{:x}+{}",
                addr,
                out.len(),
                base,
                size
            ));
        }
        Ok(self.m.port.read(addr, out, t).last)
    }

    /// Every piece of metadata protecting `addr`'s line, integrity first, as (what, address);
    /// none outside program memory, which nothing protects.
    pub fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        if addr >= self.data_size {
            return Vec::new();
        }
        let mut v = self.integ.metadata_of(addr);
        let enc = self.enc.metadata_of(addr);
        // The encryption's metadata that the integrity scheme protects (counter blocks under a
        // tree over counters) is protected in turn by what the integrity scheme keeps for it.
        for e in &enc {
            let role = self.m.layout.region_of(e.addr).map(|r| r.role);
            if role.is_some_and(|r| !Role::LINES.contains(&r) && self.integ_protects.contains(&r)) {
                v.extend(self.integ.metadata_of(e.addr));
            }
        }
        v.extend(enc);
        if let Some(a) = &self.auth {
            v.extend(a.metadata_of(addr));
        }
        v
    }

    /// Cycle by which every integrity check issued so far has completed (a barrier waits).
    pub fn checks_done(&self) -> Cycle {
        self.m.checks_done
    }

    /// Make the data line holding `addr` present in the L2 (ReadAndCheck / write-allocate).
    /// It is there for `read_cached`/`write_cached` until `settle` runs: lines displaced meanwhile
    /// wait in the write buffer, and writing them back may in turn displace this one.
    pub fn access(&mut self, addr: u64, kind: AccessKind, t: Cycle) -> Result<Outcome, IntegrityError> {
        let line = addr & !(self.line - 1);
        self.m.counters.data_accesses += 1;
        self.m.counters.kinds[kind as usize].0 += 1;
        if let Some(slot) = self.m.lookup(line) {
            let ready = (t + self.m.l2_latency).max(self.m.l2.ready(slot));
            if kind == AccessKind::Fetch && self.auth.is_some() && !self.m.l2.authenticated(slot) {
                return self.authenticate_cached(slot, line, t, ready);
            }
            return Ok(self.outcome(true, ready, self.m.l2.verified(slot)));
        }
        self.m.counters.data_misses += 1;
        self.m.counters.kinds[kind as usize].1 += 1;
        let t_req = t + self.m.l2_latency;
        if self.installing {
            return self.install(line, t_req);
        }
        self.integ.prefetch(&self.m, &*self.enc, line);
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.line as usize];
        let t_data = self.enc.read_line(&mut self.m, line, t_req, plain)?;
        let enc_checked = self.enc.take_checked();
        let mut v = self.integ.verify(&mut self.m, &mut *self.enc, line, plain, t_req, t_data)?;
        v.checked = enc_checked.map_or(v.checked, |c| c.max(v.checked));
        let fetch_checked = kind == AccessKind::Fetch && self.auth.is_some();
        if fetch_checked {
            self.check_code(line, plain, t_req, t_data, &mut v.ready, &mut v.checked)?;
        }
        let slot = self.m.insert(line, plain, LineKind::Data, false, v.ready);
        self.m.l2.set_verified(slot, v.checked.max(v.ready));
        if fetch_checked {
            self.m.l2.set_authenticated(slot);
        }
        Ok(self.outcome(false, v.ready, v.checked))
    }

    /// A miss while a prewarm installs (`set_installing`): the line's bytes deciphered from
    /// memory, the metadata a check would leave cached brought in by the integrity scheme
    /// (`Integrity::install`), unchecked and untimed beyond the read itself.
    #[cold]
    fn install(&mut self, line: u64, t_req: Cycle) -> Result<Outcome, IntegrityError> {
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.line as usize];
        let t_data = self.enc.read_installed(&mut self.m, line, t_req, plain)?;
        self.enc.take_checked();
        self.integ.install(&mut self.m, &mut *self.enc, line, plain, t_req)?;
        let slot = self.m.insert(line, plain, LineKind::Data, false, t_data);
        self.m.l2.set_verified(slot, t_data);
        Ok(self.outcome(false, t_data, t_data))
    }

    /// While `on`, misses install their lines as state rather than reading them through the
    /// checks, and lines they displace leave without a write-back (a checkpoint's prewarm,
    /// `Core::prewarm`; docs/sampling.md). Memory right after a window's set-up is
    /// consistent with the schemes' metadata, and every line the prewarm reads or writes
    /// holds memory's bytes there (or, where it stores, the window's starting value, which
    /// the set-up put in memory if the window reads it), so the state is what checked reads
    /// would leave, and memory stays as set up. Only with an integrity scheme that declares
    /// it (`Integrity::installs`) and without code authentication; otherwise the prewarm
    /// reads through the checks. Returns whether it is on.
    pub fn set_installing(&mut self, on: bool) -> bool {
        self.installing = on && self.integ.installs() && self.auth.is_none();
        self.installing
    }

    /// Code authentication of a fetched block (001 §4.1): the block may execute only once its
    /// tag matched (late start), unless the machine starts early.
    fn check_code(&mut self, line: u64, plain: &[u8], t_req: Cycle, t_data: Cycle, ready: &mut Cycle, checked: &mut Cycle) -> Result<(), IntegrityError> {
        let auth = self.auth.as_mut().expect("code authentication on");
        let done = auth.check(&mut self.m, line, plain, t_req, t_data)?;
        self.m.note_check(done);
        *checked = (*checked).max(done);
        if !auth.early_start() {
            *ready = (*ready).max(done);
        }
        Ok(())
    }

    /// The first fetch from a line a load brought into the cache: its bytes were never
    /// authenticated, so they are now (the tag through the authentication cache).
    fn authenticate_cached(&mut self, slot: u32, line: u64, t: Cycle, ready: Cycle) -> Result<Outcome, IntegrityError> {
        let mut buf = [0u8; MAX_LINE];
        let plain = &mut buf[..self.line as usize];
        plain.copy_from_slice(self.m.l2.bytes(slot));
        let (mut r, mut checked) = (ready, self.m.l2.verified(slot));
        self.check_code(line, plain, t + self.m.l2_latency, ready, &mut r, &mut checked)?;
        self.m.l2.set_authenticated(slot);
        self.m.l2.set_verified(slot, checked.max(r));
        Ok(self.outcome(true, r, checked))
    }

    /// An access's outcome: data usable at `ready`, checked at `verified`; the core waits for
    /// the check unless the machine lets it use data before (003 §4.3).
    #[inline]
    fn outcome(&self, hit: bool, ready: Cycle, verified: Cycle) -> Outcome {
        let verified = verified.max(ready);
        Outcome { hit, ready: if self.m.spec.use_before_verify { ready } else { verified }, verified }
    }

    /// Write back whatever the last access displaced; returns when the write buffer accepted
    /// it all (a full buffer delays the access that displaced it).
    pub fn settle(&mut self) -> Result<Cycle, IntegrityError> {
        self.drain()
    }

    #[inline]
    fn slot_of(&self, addr: u64) -> u32 {
        self.m
            .l2
            .tags
            .find(addr & !(self.line - 1))
            .expect("read_cached/write_cached without a preceding access() of that line")
    }

    /// Copy bytes of a line made present by `access` (must not cross the line).
    #[inline]
    pub fn read_cached(&self, addr: u64, out: &mut [u8]) {
        out.copy_from_slice(self.cached(addr, out.len()));
    }

    /// The `len` bytes at `addr` of a line made present by `access` (must not cross the
    /// line), in place: the core compares every load with the trace without a copy.
    #[inline]
    pub fn cached(&self, addr: u64, len: usize) -> &[u8] {
        let mut slot = NO_SLOT;
        self.cached_at(addr, len, &mut slot)
    }

    /// `cached`, where `slot` is a guess of the line's slot in the L2 (the core's L1 lines
    /// remember it): used if that slot holds the line, else the line is looked up and `slot`
    /// set. The guess is checked against the slot's tag, so a stale one (its line evicted,
    /// another in its place) costs a lookup and never gives another line's bytes.
    // Always inlined: the core calls it for every load, and the call cost about as much as
    // the slot check (callgrind, gzip).
    #[inline(always)]
    pub fn cached_at(&self, addr: u64, len: usize, slot: &mut u32) -> &[u8] {
        self.find_slot(addr, slot);
        let off = (addr & (self.line - 1)) as usize;
        &self.m.l2.bytes(*slot)[off..off + len]
    }

    #[inline]
    pub fn write_cached(&mut self, addr: u64, data: &[u8]) {
        let mut slot = NO_SLOT;
        self.write_cached_at(addr, data, &mut slot)
    }

    /// `write_cached` with a guess of the line's slot, as `cached_at`.
    /// (Always inlined, as `cached_at`: every store.)
    #[inline(always)]
    pub fn write_cached_at(&mut self, addr: u64, data: &[u8], slot: &mut u32) {
        self.find_slot(addr, slot);
        let off = (addr & (self.line - 1)) as usize;
        crate::mem::copy_small(&mut self.m.l2.bytes_mut(*slot)[off..off + data.len()], data);
        self.m.l2.set_dirty(*slot);
    }

    /// Make `slot` the slot of `addr`'s line (present since `access`) unless it is already.
    #[inline]
    fn find_slot(&self, addr: u64, slot: &mut u32) {
        if !self.m.l2.tags.holds(*slot, addr) {
            *slot = self.slot_of(addr);
        }
    }

    /// The program loaded or stored `len` bytes at `addr` of a line made present by `access`:
    /// the frequent value table (if any) sees each aligned 64-bit word they touch (004 §3.1).
    #[inline]
    pub fn track_values(&mut self, addr: u64, len: usize) {
        // Every load and store comes here: without a table the call must cost nothing.
        if self.m.spec.fv.is_some() && len > 0 {
            self.track_words(addr, len);
        }
    }

    fn track_words(&mut self, addr: u64, len: usize) {
        let slot = self.slot_of(addr);
        let off = (addr & (self.line - 1)) as usize;
        let (lo, hi) = (off & !7, (off + len).div_ceil(8) * 8);
        let line = self.m.l2.bytes(slot);
        for w in line[lo..hi.min(line.len())].chunks_exact(8) {
            self.m.spec.track(u64::from_le_bytes(w.try_into().unwrap()));
        }
    }

    /// Functional read of any range (split into lines).
    pub fn read(&mut self, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut done = t;
        let mut pos = 0usize;
        while pos < out.len() {
            let a = addr + pos as u64;
            let n = ((self.line - (a & (self.line - 1))) as usize).min(out.len() - pos);
            done = done.max(self.access(a, AccessKind::Load, t)?.ready);
            self.read_cached(a, &mut out[pos..pos + n]);
            self.track_values(a, n);
            done = done.max(self.settle()?);
            pos += n;
        }
        Ok(done)
    }

    /// The `kind` access just made found its line because an external write (memory the
    /// environment wrote, see the core's external records) brought it in for this access:
    /// that write's store miss is counted as this access's miss, as a simulator without
    /// external records counts it (ChampSim: a LOAD or RFO miss at the LLC). Only when the
    /// statistics count that write (`write_counted`: not reset since): a miss whose memory
    /// read lies before them stays out of them, as its bytes do (`mem.read_bytes`).
    pub fn count_first_touch(&mut self, kind: AccessKind, write_counted: bool) {
        if !write_counted {
            return;
        }
        let c = &mut self.m.counters;
        let store = &mut c.kinds[AccessKind::Store as usize];
        (store.0, store.1) = (store.0.saturating_sub(1), store.1.saturating_sub(1));
        c.data_accesses = c.data_accesses.saturating_sub(1);
        c.kinds[kind as usize].1 += 1;
    }

    /// Functional write of any range (split into lines).
    pub fn write(&mut self, addr: u64, data: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut done = t;
        let mut pos = 0usize;
        while pos < data.len() {
            let a = addr + pos as u64;
            let n = ((self.line - (a & (self.line - 1))) as usize).min(data.len() - pos);
            done = done.max(self.access(a, AccessKind::Store, t)?.ready);
            self.write_cached(a, &data[pos..pos + n]);
            self.track_values(a, n);
            done = done.max(self.settle()?);
            pos += n;
        }
        Ok(done)
    }

    /// Hand every line waiting in the write buffer to the integrity scheme (which writes it
    /// back through the encryption scheme). Write-backs may pull parents in and push others
    /// out, so this runs until the buffer is empty. Returns the latest acceptance time.
    /// While a prewarm installs, each line leaves as its write-back would leave the caches
    /// (`Integrity::install_evict`), writing nothing.
    fn drain(&mut self) -> Result<Cycle, IntegrityError> {
        drain(&mut self.m, &mut *self.integ, &mut *self.enc, self.installing)
    }

    /// Memory from before the run that never passed through the L2 (a loader's image set up
    /// page by page as the run first uses it, the core's `pages.image=lazy`): `data` (within
    /// one line) is written at `addr` as an eviction writes a line back — read and checked
    /// first, as a store's write-allocate would (a scheme may set memory up on its first use),
    /// then enciphered and written with its MAC, hash or counters brought up to date — but
    /// untimed and uncounted: no bus, engine or buffer time is booked and the L2's, the
    /// memory's and the engines' counters are left as they were. The data line itself is not
    /// cached (if it already is, the cached copy is written); metadata the schemes read on the
    /// way (and lines a scheme checks together with it: mhash's chunk) stays cached as if the
    /// run had read it, and is counted by the scheme's own statistics (`chash.hash_loads`,
    /// ...), as lhash counts the pages it sets up untimed.
    pub fn set_up(&mut self, addr: u64, data: &[u8], t: Cycle) -> Result<(), IntegrityError> {
        let line = addr & !(self.line - 1);
        let off = (addr - line) as usize;
        debug_assert!(off + data.len() <= self.line as usize, "set_up crosses a line");
        if let Some(slot) = self.m.lookup(line) {
            self.m.l2.bytes_mut(slot)[off..off + data.len()].copy_from_slice(data);
            self.m.l2.set_dirty(slot);
            return Ok(());
        }
        // Lines an earlier access displaced go back at their own times first.
        self.drain()?;
        let m = &mut self.m;
        let saved = (m.counters.clone(), m.read_buf.clone(), m.write_buf.clone(), m.checks_done, m.predating);
        let pipes = [(m.aes.units, m.aes.ops, m.aes.wait_cycles), (m.hash.units, m.hash.ops, m.hash.wait_cycles)];
        m.predating = true;
        // Engines of a scheme's own (tdes's) and of ciphertext speculation book nothing either.
        let own = self.freeze_own(true);
        let m = &mut self.m;
        let n = self.line as usize;
        let (integ, enc) = (&mut *self.integ, &mut *self.enc);
        let r = m.untimed(|m| {
            let mut buf = [0u8; MAX_LINE];
            let plain = &mut buf[..n];
            let t_data = enc.read_line(m, line, t, plain)?;
            enc.take_checked();
            integ.verify(m, enc, line, plain, t, t_data)?;
            plain[off..off + data.len()].copy_from_slice(data);
            // A scheme that checks several lines together may have cached this one (mhash
            // caches a chunk's blocks): then the cached copy is the line.
            if let Some(slot) = m.l2.tags.find(line) {
                m.l2.bytes_mut(slot)[off..off + data.len()].copy_from_slice(data);
                m.l2.set_dirty(slot);
            } else {
                let v = Victim { addr: line, bytes: plain.to_vec(), dirty: true, kind: LineKind::Data, t };
                integ.evict(m, enc, &v)?;
            }
            drain(m, integ, enc, false)
        });
        self.thaw_own(own);
        let m = &mut self.m;
        (m.counters, m.read_buf, m.write_buf, m.checks_done, m.predating) = saved;
        (m.aes.units, m.aes.ops, m.aes.wait_cycles) = pipes[0];
        (m.hash.units, m.hash.ops, m.hash.wait_cycles) = pipes[1];
        r.map(|_| ())
    }

    /// Write back and drop every cached line (data and metadata) so the next access comes
    /// from untrusted memory. Returns when the last write-back is done on the bus.
    pub fn flush(&mut self, t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut done = self.drain()?.max(t);
        // Write-backs dirty their parents, which must then be flushed in turn: one round per
        // tree level at most.
        for _ in 0..256 {
            let n = self.m.evict_all(t);
            done = done.max(self.drain()?);
            if n == 0 {
                break;
            }
        }
        done = done.max(self.enc.write_back_cached(&mut self.m, done));
        // Binding what the encryption wrote back may have dirtied what protects it in the L2 (a
        // tree over counters): flush that too, and whatever it dirties in turn.
        for _ in 0..256 {
            if self.m.evict_all(t) == 0 {
                break;
            }
            done = done.max(self.drain()?);
            done = done.max(self.enc.write_back_cached(&mut self.m, done));
        }
        self.enc.drop_cached();
        self.integ.drop_cached();
        if let Some(a) = self.auth.as_mut() {
            a.drop_cached();
        }
        Ok(done)
    }

    /// Give the pages of [addr, addr + size) key ID `id` (the page tables' KeyID, MKTME): what
    /// the software owning them does, not the adversary of memory. Every cached line is
    /// written back first, under the key ID it was written with, as MKTME requires of software
    /// that changes a page's KeyID. An error names an ID beyond the key table or a range that
    /// is not whole pages of program memory.
    pub fn set_key_id(&mut self, addr: u64, size: u64, id: u32) -> Result<(), IntegrityError> {
        let refused = |what: String| IntegrityError::refused(addr, what);
        if addr.checked_add(size).is_none_or(|end| end > self.data_size) {
            return Err(refused(format!("key IDs are set within program memory (0x{:x} B)", self.data_size)));
        }
        if self.m.key_ids.count() == 1 {
            return Err(refused(format!("encryption {} has one key: no key IDs to set", self.enc.name())));
        }
        self.flush(0)?;
        self.m.key_ids.set(addr, size, id).map_err(refused)
    }

    /// The key ID of the page holding `addr` (0 without a key table).
    pub fn key_id(&self, addr: u64) -> u32 {
        self.m.key_ids.of(addr)
    }

    /// Verify every chunk of touched program memory against the trusted state. Returns the
    /// number of chunks checked.
    pub fn check(&mut self, t: Cycle) -> Result<u64, IntegrityError> {
        self.drain()?;
        if self.integ.check(&mut self.m, &mut *self.enc, t)?.is_some() {
            return Ok(self.m.port.touched_pages(0, self.data_size).len() as u64 * (PAGE / self.line));
        }
        self.flush(t)?;
        let mut n = 0;
        for page in self.m.port.touched_pages(0, self.data_size) {
            for a in (page..page + PAGE).step_by(self.line as usize) {
                self.access(a, AccessKind::Load, t)?;
                self.settle()?;
                n += 1;
            }
        }
        self.flush(t)?;
        Ok(n)
    }

    /// Cycle from which every memory-side resource is idle.
    pub fn busy_until(&self) -> Cycle {
        let m = &self.m;
        m.port.free_at().max(m.aes.free_at()).max(m.hash.free_at()).max(m.write_buf.drained_at()).max(m.checks_done)
    }

    /// Zero every statistics counter (end of warm-up). Caches, keys, TIMER and trees stay.
    pub fn reset_stats(&mut self) {
        self.m.counters = Default::default();
        self.m.port.reset_stats();
        self.m.aes.reset_stats();
        self.m.hash.reset_stats();
        self.m.read_buf.reset_stats();
        self.m.write_buf.reset_stats();
        self.integ.reset_stats();
        self.enc.reset_stats();
        self.m.spec.reset_stats();
        if let Some(a) = self.auth.as_mut() {
            a.reset_stats();
        }
    }

    /// Crypto untimed while `on` (a sampled run's functional warming): every operation is
    /// performed on the real bytes as ever, but the AES and hash engines (and a scheme's own:
    /// tdes's; ciphertext speculation's) book nothing and answer as if idle (detailed warming refills them before a measured window). The memory
    /// bus stays timed: freezing its calendar too left every later window slow (mix, IPC
    /// −75%; not understood yet, see docs/sampling.md).
    pub fn set_untimed(&mut self, on: bool) {
        self.m.aes.freeze(on);
        self.m.hash.freeze(on);
        self.freeze_own(on);
    }

    /// Memory transfers untimed while `on` (a checkpoint's prewarm, `Core::prewarm`, which
    /// installs what the caches held before a window by reading it in through the schemes):
    /// the bytes move through the port as ever, decrypted and verified, but book no bus
    /// time, as in `Machine::untimed`. The crypto engines are frozen by functional warming
    /// (`set_untimed`) around it.
    pub fn set_transfers_untimed(&mut self, on: bool) {
        self.m.port.set_untimed(on);
    }

    /// Freeze (or thaw) the engines beside the machine's shared AES and hash pipes: the
    /// encryption scheme's own (tdes's) and ciphertext speculation's. Returns whether each
    /// was frozen already, to be put back with `thaw_own`.
    fn freeze_own(&mut self, on: bool) -> [bool; 2] {
        let enc = self.enc.freeze(on);
        let spec = self.m.spec.fv.as_mut().and_then(|f| f.engine.as_mut()).map_or(false, |e| {
            let was = e.frozen();
            e.freeze(on);
            was
        });
        [enc, spec]
    }

    /// Put the engines `freeze_own` froze back as they were.
    fn thaw_own(&mut self, was: [bool; 2]) {
        self.enc.freeze(was[0]);
        if let Some(e) = self.m.spec.fv.as_mut().and_then(|f| f.engine.as_mut()) {
            e.freeze(was[1]);
        }
    }

    /// While `on`, what is written predates the trace (a fast-forward's memory image, the
    /// loader's): schemes set up the pages it first touches untimed (`Machine::predating`).
    pub fn set_predating(&mut self, on: bool) {
        self.m.predating = on;
    }

    /// The 4 KiB page at `addr` holds memory from before the trace that the trace does not
    /// carry (`Instr::set_pages`: a tracer's `--skip`): a scheme that sets a page up on its
    /// first use (lhash) does so for it untimed, as for the rest of a memory image.
    pub fn mark_predating(&mut self, addr: u64) {
        self.m.predated.insert(addr / PAGE);
    }

    /// A crypto/sign instruction at `now` may commit from the returned cycle on (003 §4.7).
    pub fn barrier(&mut self, now: Cycle) -> Result<Cycle, IntegrityError> {
        let t = self.integ.barrier(&mut self.m, &mut *self.enc, now)?;
        Ok(self.drain()?.max(t))
    }

    /// The run is over: schemes that verify at the end do so. Returns when done.
    pub fn finish(&mut self, now: Cycle) -> Result<Cycle, IntegrityError> {
        self.drain()?;
        let t = self.integ.finish(&mut self.m, &mut *self.enc, now)?;
        Ok(self.drain()?.max(t))
    }

    /// Called by the run loop every few hundred instructions with the current cycle and the
    /// instructions committed so far: schemes with timed events of their own (a suspend/resume
    /// schedule, a periodic check) act here. Returns the cycle the core must wait for.
    pub fn poll(&mut self, now: Cycle, instructions: u64) -> Result<Cycle, IntegrityError> {
        let t = self.enc.poll(&mut self.m, now, instructions);
        let t = self.integ.poll(&mut self.m, &mut *self.enc, t, instructions)?;
        Ok(self.drain()?.max(t))
    }

    /// Data lines that left the L2 since the last call.
    pub fn take_evicted_data(&mut self, f: impl FnMut(u64)) {
        self.m.take_evicted_data(f)
    }

    pub fn stats(&self, out: &mut Stats) {
        let c = &self.m.counters;
        out.str("integrity", self.integ.name());
        out.str("encryption", self.enc.name());
        out.int("l2.accesses", c.data_accesses);
        out.int("l2.misses", c.data_misses);
        out.rate("l2.miss_rate", c.data_misses, c.data_accesses);
        out.int("l2.meta_accesses", c.meta_accesses);
        out.int("l2.meta_misses", c.meta_misses);
        out.rate("l2.meta_miss_rate", c.meta_misses, c.meta_accesses);
        for k in AccessKind::ALL {
            let (a, miss) = c.kinds[k as usize];
            out.int(&format!("l2.{}_accesses", k.name()), a);
            out.int(&format!("l2.{}_misses", k.name()), miss);
        }
        out.int("l2.data_writebacks", c.data_writebacks);
        out.int("l2.meta_writebacks", c.meta_writebacks);
        let c = *self.m.port.counters();
        out.int("mem.read_bytes", c.read_bytes);
        out.int("mem.write_bytes", c.write_bytes);
        out.int("mem.reads", c.reads);
        out.int("mem.writes", c.writes);
        out.int("mem.bus_busy_cycles", c.busy_cycles);
        out.int("mem.bus_queue_cycles", c.queue_cycles);
        out.int("mem.resident_bytes", self.m.port.resident_bytes());
        out.str("mem.model", self.m.port.model().name());
        self.m.port.model().extra_stats(&mut |k, v| out.int(&format!("mem.{}", k), v));
        out.int("aes.units", self.m.aes.units);
        out.int("aes.wait_cycles", self.m.aes.wait_cycles);
        out.int("hash.ops", self.m.hash.ops);
        out.int("hash.wait_cycles", self.m.hash.wait_cycles);
        out.float("integrity.space_overhead", self.integ.space_overhead());
        out.float("encryption.space_overhead", self.enc.space_overhead());
        self.integ.stats(&self.m, out);
        self.enc.stats(&self.m, out);
        self.m.spec.stats(out);
        // Only when on: a run without code authentication reports exactly what it did before.
        if let Some(a) = &self.auth {
            a.stats(out);
        }
    }
}

/// `Engine::drain` on the engine's parts (`Engine::set_up` drains inside an untimed stretch);
/// `installing`: a prewarm's evictions (`Integrity::install_evict`).
fn drain(m: &mut Machine, integ: &mut dyn Integrity, enc: &mut dyn Encryption, installing: bool) -> Result<Cycle, IntegrityError> {
    let mut accepted = 0;
    while let Some(v) = m.pop_victim() {
        // Metadata the encryption keeps in the L2 itself is its own to write back.
        let own = if v.kind == LineKind::Meta { enc.evict_meta(m, &v) } else { None };
        let r = own.unwrap_or_else(|| if installing { integ.install_evict(m, enc, &v) } else { integ.evict(m, enc, &v) });
        m.recycle(v);
        accepted = accepted.max(r?);
    }
    Ok(accepted)
}
