//! The out-of-order core: a dependence-driven window model in the spirit of interval
//! simulation. Each instruction, in program order, is fetched (fetch width, L1I, I-TLB,
//! branch mispredictions), dispatched when a ROB entry (for memory ops a load/store queue
//! entry, for results a physical register) frees, issued when its source registers are ready
//! and an issue slot is free, executed (loads are forwarded from older stores or go through
//! the D-TLB, the cache levels and the secure engine, see `storeq` and `hierarchy`), and
//! committed in order at the commit width. Misses overlap as far as the window and
//! dependencies allow. A barrier (crypto/sign) instruction commits only when every pending
//! integrity check has passed (`core.syscall_barriers`: the tracer's barriers are system
//! calls). Every cycle between commits is given to a cause (`cpistack`).

use crate::bpred::Predictor;
use crate::btb::{Btb, Found, Pending};
// Re-exported: the run loop and sampling name it through the core.
pub use crate::error::StepError;
use crate::cpistack::{self, Cause, CpiStack};
use crate::hierarchy::{Hierarchy, Served, Side};
use crate::mmu::Mmu;
use crate::pagemap::PageMap;
use crate::storeq::{LoadDep, StoreQueue};
use secmem_core::stats::Stats;
use secmem_core::{AccessKind, ConfigError, Engine, IntegrityError, Params};
use secmem_timing::Cycle;
use secmem_trace::champsim::{folded_stack_pointer, BranchType, NumberingGuess};
use secmem_trace::packed::View;
use secmem_trace::{Branch, Instr, One, OpClass, Record, Recs, Reg};

/// Cycles between fetch and dispatch (decode/rename).
const FRONTEND_DEPTH: Cycle = 3;
/// With `tlb.restart`: cycles from a D-TLB lookup to the L1D's restarting a tag check with its
/// translation. ChampSim's DTLB hit leaves the cycle after its lookup (hit latency 1), and
/// the L1D, which operates before the DTLB in a cycle, takes it the cycle after that.
const TRANSLATION_BACK: Cycle = 2;
const CAL: usize = 1 << 12;
/// External bytes held for the next instruction before they are applied at once.
const PENDING_BYTES: usize = 64 << 10;

/// A resource with `width` uses per cycle (issue slots, load and store ports): the first
/// cycle ≥ `t` with one left. The last `CAL` cycles are remembered, each as its cycle and
/// its uses in one word (`cycle << 8 | uses`): one host cache line a take, not two (every
/// instruction takes from several, and a mix's cores take turns with them).
struct PerCycle {
    width: u8,
    /// A fixed-size array: indexed by a masked cycle, it needs no bounds check.
    slot: Box<[u64; CAL]>,
}

impl PerCycle {
    fn new(width: u8) -> PerCycle {
        PerCycle { width, slot: Box::new([u64::MAX; CAL]) }
    }

    #[inline]
    fn take(&mut self, t: Cycle) -> Cycle {
        debug_assert!(t < 1 << 56, "cycle {} beyond what a slot holds", t);
        let mut c = t;
        loop {
            let i = (c as usize) & (CAL - 1);
            let e = self.slot[i];
            if e >> 8 != c {
                self.slot[i] = c << 8 | 1;
                return c;
            }
            if ((e & 0xFF) as u8) < self.width {
                self.slot[i] = e + 1;
                return c;
            }
            c += 1;
        }
    }

    /// One more use at `c`, even beyond `width`: a use that had the resource first.
    fn add(&mut self, c: Cycle) {
        let i = (c as usize) & (CAL - 1);
        let e = self.slot[i];
        self.slot[i] = if e >> 8 != c { c << 8 | 1 } else { e + ((e & 0xFF) < 0xFF) as u64 };
    }
}

/// The later of `(t, why)` and `(u, because)`, the first on a tie. Both values are taken
/// before the comparison, so this compiles to selects rather than a branch: which input of an
/// instruction is the latest changes from one instruction to the next, and branches on it
/// mispredicted (`hot` ran 10% slower with them, `secmem bench`).
#[inline(always)]
fn later((t, why): (Cycle, Cause), u: Cycle, because: Cause) -> (Cycle, Cause) {
    let l = u > t;
    (if l { u } else { t }, if l { because } else { why })
}

/// A `core.*_ports` key: uses per cycle, 0 for no limit.
fn ports(p: &Params, key: &str) -> Result<Option<PerCycle>, ConfigError> {
    let n = p.u64_min(key, 0)?;
    if n > 255 {
        return Err(ConfigError(format!("{}: {} is more than 255", key, n)));
    }
    Ok((n > 0).then(|| PerCycle::new(n as u8)))
}

/// Entries of a queue held from dispatch until commit: the cycle each frees.
struct Window {
    free: Vec<Cycle>,
    i: usize,
}

impl Window {
    fn new(n: usize) -> Window {
        Window { free: vec![0; n.max(1)], i: 0 }
    }

    /// When the entry the next instruction would take frees.
    #[inline]
    fn next_free(&self) -> Cycle {
        self.free[self.i]
    }

    #[inline]
    fn take(&mut self, until: Cycle) {
        self.free[self.i] = until;
        self.i = if self.i + 1 == self.free.len() { 0 } else { self.i + 1 };
    }
}

/// Physical registers (`core.phys_regs`, ChampSim's register file): each result in flight
/// holds one from rename until it commits, beyond one per architectural register in use.
struct Registers {
    size: usize,
    /// Commit cycle of each allocation, by allocation number modulo `size`.
    commits: Vec<Cycle>,
    allocated: u64,
    seen: [bool; 256],
    architectural: usize,
}

impl Registers {
    /// When rename can give `ins` its destination registers.
    #[inline]
    fn available<R: Record>(&mut self, ins: &R, ndst: u8) -> Cycle {
        for &r in ins.srcs().iter().chain(ins.dsts()) {
            if !self.seen[r as usize] {
                self.seen[r as usize] = true;
                self.architectural += 1;
            }
        }
        let spare = self.size.saturating_sub(self.architectural).max(1) as u64;
        let last = self.allocated + ndst as u64;
        if ndst == 0 || last <= spare {
            return 0;
        }
        self.commits[((last - 1 - spare) % self.size as u64) as usize]
    }

    #[inline]
    fn commit(&mut self, ndst: u8, c: Cycle) {
        for _ in 0..ndst {
            self.commits[(self.allocated % self.size as u64) as usize] = c;
            self.allocated += 1;
        }
    }
}

/// How a window takes its checkpoint's prewarm (`sampling.prewarm`, `Core::prewarm`): read
/// through the checks, or installed as state at the protected level (docs/sampling.md).
pub const PREWARMS: &[&str] = &["replay", "install"];

pub struct Core {
    fetch_width: u32,
    commit_width: u32,
    penalty: Cycle,
    /// Whether the trace's barrier instructions (the tracer's system calls) are signing
    /// barriers (`core.syscall_barriers`).
    syscall_barriers: bool,
    /// The last instruction was a system call: external records now are its writes, not
    /// memory from before the trace. Pending records are applied before the next
    /// instruction changes it, so one value holds for all of them.
    after_syscall: bool,
    lat: [Cycle; 8],
    /// Cycles from the L1 delivering a load's data to its dependents' issue.
    load_result: Cycle,
    pub(crate) hier: Hierarchy,
    mmu: Mmu,
    bp: Predictor,
    /// Branch targets (`[btb]`); None: only directions are predicted (the seeds' machines).
    btb: Option<Btb>,
    /// A taken branch ends its fetch cycle (`core.taken_ends_fetch`).
    taken_ends_fetch: bool,
    /// Stack-pointer folding (`core.sp_folding`, ChampSim's): the trace's register numbering
    /// as learned so far; None: off.
    sp_folding: Option<NumberingGuess>,
    /// The instruction pointer as a register (`core.ip_register`, ChampSim's): every branch
    /// writes it, conditional branches and calls read it; when its last writer finished and
    /// what it waited for.
    ip_register: bool,
    ip_ready: (Cycle, Cause),
    /// Stores access the L1D after commit (`core.store_at_retire`), through its write queue
    /// (`core.store_write_queue`; None: no limit). ChampSim's, src/ooo_cpu.cc `operate_lsq`:
    /// a store leaves the store queue once it retired and the L1D's write queue took it.
    store_at_retire: bool,
    /// With `tlb.restart` (`Mmu::restarts`, one of the `queues`) the L1D starts a data
    /// access's tag check before its translation, and again if that comes late
    /// (`start_lookup`): how often it started again.
    tag_restarts: u64,
    l1d_wq: Option<Window>,
    sq: StoreQueue,
    reg_ready: [Cycle; 256],
    reg_cause: [Cause; 256],
    rob: Window,
    /// The load/store queue (loads only when there is a separate store queue).
    lsq: Window,
    /// The store queue (`core.sq_size` > 0); otherwise stores share `lsq`.
    sqw: Option<Window>,
    regs: Option<Registers>,
    /// Whether any of the optional queues, limits and dependence tracking is on (a store
    /// queue, physical registers, load or store ports, `core.memory_dependence`): without
    /// them `step` runs a copy compiled with none of their checks.
    queues: bool,
    fetch_t: Cycle,
    fetch_n: u32,
    /// The instruction line last fetched (`iline`), MAX before the first.
    fetch_line: u64,
    /// With `core.fetch_buffer` (one of the `queues`): instructions enter the front end ahead
    /// of their delivery, and each new line is looked up when its first instruction enters.
    ahead: Option<FetchAhead>,
    /// Why the next instruction fetched arrives when it does (after a redirect).
    fetch_cause: Cause,
    issue: PerCycle,
    load_ports: Option<PerCycle>,
    store_ports: Option<PerCycle>,
    /// The same ports as the retired stores' writes see them: the executing stores' uses
    /// and theirs, the executing stores first (ChampSim's operate_lsq spends sq_width on
    /// finishing stores, then on retired ones).
    write_ports: Option<PerCycle>,
    commit_t: Cycle,
    commit_n: u32,
    pub pm: PageMap,
    /// `pages.image=lazy`: the external records before the first instruction (the loader's
    /// image) are set up page by page as the run first uses each page, untimed
    /// (`hold_image`); false: applied through the engine like any external record.
    lazy_image: bool,
    /// An instruction was stepped or warmed: external records are no longer the image.
    started: bool,
    /// The last prewarm record was a branch: the next is where it went (`prewarm`).
    prewarm_target: bool,
    /// `sampling.prewarm=install`: the prewarm's lines are installed as state (`prewarm`).
    prewarm_install: bool,
    /// External records waiting for the next instruction (see `external`).
    pending: Vec<Instr>,
    pending_n: usize,
    pending_bytes: usize,
    cpi: CpiStack,
    // statistics
    pub instructions: u64,
    loads: u64,
    stores: u64,
    branches: u64,
    barriers: u64,
    barrier_stall: u64,
    rob_stall: u64,
    pub value_mismatches: u64,
    external_bytes: u64,
    /// Functional warming's clock step: cycles per instruction in 1/1024 (see `warm`), and
    /// the fraction carried to the next instruction.
    warm_cpi_fx: u64,
    warm_fx: u64,
    /// Functional warming's last data page and line (`warm_data`).
    recent: crate::warm::Recent,
}

impl Core {
    pub fn new(p: &Params, engine: &Engine) -> Result<Core, ConfigError> {
        let w = |k: &str| p.u64_min(k, 1);
        let rob = w("core.rob_size")? as usize;
        let lsq = w("core.lsq_size")? as usize;
        let sq = p.u64_min("core.sq_size", 0)? as usize;
        let issue = w("core.issue_width")?;
        if issue > 255 {
            return Err(ConfigError(format!("core.issue_width: {} is more than 255", issue)));
        }
        let page = p.size("tlb.page")?;
        // Checked with the rest of the core; the run applies it with the seed (`PageMap::set_order`).
        p.choice("pages.order", crate::pagemap::ORDERS)?;
        let lazy_image = p.choice("pages.image", crate::pagemap::IMAGES)? == "lazy";
        if lazy_image && 4096 / engine.line() > 128 {
            return Err(ConfigError(format!("pages.image: lazy needs lines of at least 32 B (l2.line is {} B)", engine.line())));
        }
        let mut lat = [1; 8];
        lat[OpClass::Mul as usize] = w("core.mul_latency")?;
        lat[OpClass::Div as usize] = w("core.div_latency")?;
        lat[OpClass::Fp as usize] = w("core.fp_latency")?;
        lat[OpClass::FpDiv as usize] = w("core.fpdiv_latency")?;
        let hier = Hierarchy::new(p, engine)?;
        let l1d_line = hier.l1d.line_bytes();
        let cpi = CpiStack::new(&hier.level_names(Side::Data));
        let phys = p.u64_min("core.phys_regs", 0)? as usize;
        let load_ports = ports(p, "core.load_ports")?;
        let store_ports = ports(p, "core.store_ports")?;
        // Stores are remembered as long as they can be queued.
        let sq_mem = StoreQueue::new(p, if sq > 0 { sq } else { lsq })?;
        let btb = Btb::new(p)?;
        let ip_register = p.bool("core.ip_register")?;
        if ip_register && btb.is_none() {
            return Err(ConfigError("core.ip_register: needs a BTB (btb.sets), whose branch kinds say which branches read it".into()));
        }
        let store_at_retire = p.bool("core.store_at_retire")?;
        if store_at_retire && sq == 0 {
            return Err(ConfigError("core.store_at_retire: needs a store queue (core.sq_size), where stores wait to be written".into()));
        }
        let wq = p.u64_min("core.store_write_queue", 0)? as usize;
        let mmu = Mmu::new(p, page)?;
        let fetch_buffer = p.u64_min("core.fetch_buffer", 0)? as usize;
        let ahead = (fetch_buffer > 0).then(|| FetchAhead::new(fetch_buffer));
        let queues = store_at_retire || sq > 0 || phys > 0 || load_ports.is_some() || store_ports.is_some() || sq_mem.active() || ip_register || mmu.restarts() || ahead.is_some();
        Ok(Core {
            fetch_width: w("core.fetch_width")? as u32,
            commit_width: w("core.commit_width")? as u32,
            penalty: p.u64_min("core.mispredict_penalty", 0)?,
            syscall_barriers: p.bool("core.syscall_barriers")?,
            after_syscall: false,
            lat,
            load_result: p.u64_min("core.load_result_latency", 0)?,
            hier,
            mmu,
            bp: Predictor::new(p)?,
            btb,
            taken_ends_fetch: p.bool("core.taken_ends_fetch")?,
            sp_folding: p.bool("core.sp_folding")?.then(NumberingGuess::default),
            ip_register,
            ip_ready: (0, cpistack::BASE),
            store_at_retire,
            tag_restarts: 0,
            l1d_wq: (store_at_retire && wq > 0).then(|| Window::new(wq)),
            sq: sq_mem,
            reg_ready: [0; 256],
            reg_cause: [cpistack::BASE; 256],
            rob: Window::new(rob),
            lsq: Window::new(lsq),
            sqw: (sq > 0).then(|| Window::new(sq)),
            regs: (phys > 0).then(|| Registers {
                size: phys,
                commits: vec![0; phys],
                allocated: 0,
                seen: [false; 256],
                // The instruction pointer is in use from the start.
                architectural: ip_register as usize,
            }),
            queues,
            fetch_t: 0,
            fetch_n: 0,
            fetch_line: u64::MAX,
            ahead,
            fetch_cause: cpistack::BASE,
            issue: PerCycle::new(issue as u8),
            load_ports,
            write_ports: store_ports.as_ref().map(|p| PerCycle::new(p.width)),
            store_ports,
            commit_t: 0,
            commit_n: 0,
            pm: PageMap::new(engine.data_size(), page),
            lazy_image,
            started: false,
            prewarm_target: false,
            prewarm_install: p.choice("sampling.prewarm", PREWARMS)? == "install",
            pending: Vec::new(),
            pending_n: 0,
            pending_bytes: 0,
            cpi,
            instructions: 0,
            loads: 0,
            stores: 0,
            branches: 0,
            barriers: 0,
            barrier_stall: 0,
            rob_stall: 0,
            value_mismatches: 0,
            external_bytes: 0,
            warm_cpi_fx: 1 << 10,
            warm_fx: 0,
            recent: crate::warm::Recent::new(l1d_line),
        })
    }

    /// The current cycle: everything fetched or committed so far.
    pub fn now(&self) -> Cycle {
        self.fetch_t.max(self.commit_t)
    }

    /// Cycle of the last commit.
    pub fn last_commit(&self) -> Cycle {
        self.commit_t
    }

    /// Zero the statistics: measuring starts now (`now()`), and so does the CPI stack.
    pub fn reset_stats(&mut self) {
        self.reset_stats_from(self.now());
    }

    /// Zero the statistics; the CPI stack counts cycles from `t` (a sampled window counts
    /// from the last commit before it, so consecutive windows tile the commit timeline).
    pub fn reset_stats_from(&mut self, t: Cycle) {
        self.instructions = 0;
        (self.loads, self.stores, self.branches, self.barriers) = (0, 0, 0, 0);
        self.tag_restarts = 0;
        (self.barrier_stall, self.rob_stall) = (0, 0);
        (self.value_mismatches, self.external_bytes) = (0, 0);
        self.hier.reset_stats();
        self.mmu.reset_stats();
        self.bp.reset_stats();
        if let Some(b) = &mut self.btb {
            b.reset_stats();
        }
        self.sq.reset_stats();
        self.cpi.start(t);
    }

    #[inline]
    fn redirect(&mut self, t: Cycle, why: Cause) {
        if let Some(a) = &mut self.ahead {
            a.restart(t);
        }
        if t > self.fetch_t {
            self.fetch_t = t;
            self.fetch_n = 0;
            self.fetch_cause = why;
        }
    }

    /// A mix's start (`multi`): the memory image this core's trace handed out before its
    /// first instruction is written now, as memory that was there before the run; returns
    /// when this core could start.
    pub(crate) fn load_image(&mut self, eng: &mut Engine) -> Result<Cycle, StepError> {
        if self.pending_n > 0 {
            self.apply_external(self.fetch_t, false, eng)?;
        }
        Ok(self.now().max(eng.busy_until()))
    }

    /// Fetch waits until `t` (a mix's cores start together, once every image is in).
    pub(crate) fn start_at(&mut self, t: Cycle) {
        self.redirect(t, cpistack::BASE);
    }

    /// Give the engine's schemes their timed events; the front end waits for those that
    /// take time (a MECU re-encryption, a periodic check). A poll with nothing to do holds
    /// nothing: waiting for `now()` would drain the window every few hundred instructions.
    pub fn poll(&mut self, eng: &mut Engine, instructions: u64) -> Result<(), IntegrityError> {
        let now = self.now();
        let until = eng.poll(now, instructions)?;
        self.hier.back_invalidate(eng);
        if until > now {
            self.redirect(until, cpistack::SCHEME);
        }
        Ok(())
    }

    /// The physical address of `va` for the environment's writes, its page given a frame if
    /// it has none (a page from before the trace is set up as such when it gets it, at `t`).
    fn frame(pm: &mut PageMap, va: u64, eng: &mut Engine, t: Cycle) -> Result<u64, StepError> {
        let pa = pm.translate(va).ok_or(StepError::OutOfMemory(va))?;
        if pm.has_predated() {
            crate::mmu::predated(pm, eng, t)?;
        }
        Ok(pa)
    }

    /// Memory written by the environment (loader, kernel, or memory a trace never saw
    /// written). It was there before the instruction after it reads it, so nothing waits for
    /// it: the writes are applied through the engine (their traffic and checks are real) when
    /// that instruction issues, just before its own accesses — so a line they bring in
    /// arrives when a demand miss would have. A trace and a copy of it without these records
    /// (ChampSim's format) time alike. Long runs of them (a fast-forward's memory image) are
    /// applied as they come, from the current fetch cycle.
    pub fn external(&mut self, ins: &Instr, eng: &mut Engine) -> Result<(), StepError> {
        if ins.is_pages() {
            // Pages the program touched before the trace, contents not carried: each is set up
            // as memory from before the trace when it gets its frame (`mmu::predated`).
            for a in &ins.accesses {
                self.pm.add_predating(a.addr);
            }
            if self.pm.has_predated() && crate::mmu::predated(&mut self.pm, eng, self.fetch_t)? {
                self.hier.back_invalidate(eng);
            }
            return Ok(());
        }
        if self.pending.len() == self.pending_n {
            self.pending.push(Instr::default());
        }
        self.pending[self.pending_n].copy_from(ins); // in its buffers
        self.pending_n += 1;
        self.pending_bytes += ins.data.len();
        if self.pending_bytes > PENDING_BYTES {
            self.apply_external(self.fetch_t, false, eng)?;
        }
        Ok(())
    }

    /// Bytes `val` of the image at `addr` (`pages.image=lazy`, before the first instruction):
    /// each page they write takes its frame now, in the records' order, as a timed image's
    /// pages do (`PageMap::reserve`), but the bytes are kept until the run first uses the page
    /// and then set up untimed (`mmu::predated`), so a run pays only for the pages it uses. A
    /// page in use already (mapped by a zero-byte store, `Instr::set_mapped`, or the first
    /// instruction's own fetch) has them set up now.
    fn hold_image(pm: &mut PageMap, addr: u64, val: &[u8], t: Cycle, eng: &mut Engine) -> Result<(), StepError> {
        // Page by page (one lookup each), then line by line where set up at once.
        for (va, r) in line_pieces(addr, val.len() as u32, 4096) {
            pm.reserve(va).ok_or(StepError::OutOfMemory(va))?;
            if let Some(pa) = pm.add_image(va, &val[r.clone()], eng.line()) {
                for (p, q) in line_pieces(pa, r.len() as u32, eng.line()) {
                    eng.set_up(p, &val[r.start + q.start..r.start + q.end], t)?;
                }
            }
        }
        Ok(())
    }

    /// A checkpoint's memory image (`checkpointed`) is in: apply what is pending of it, then
    /// write back and drop every cached line, so that a window does not find the lines its
    /// image wrote waiting in the L2 (a run of the whole input finds them in memory). Fetch
    /// starts once that traffic is over, as a mix's cores start once their images are in
    /// (`load_image`): the image was there before the window.
    pub(crate) fn settle_image(&mut self, eng: &mut Engine) -> Result<(), StepError> {
        let done = self.load_image(eng)?;
        let done = eng.flush(done)?;
        self.hier.back_invalidate(eng);
        self.start_at(done.max(eng.busy_until()));
        Ok(())
    }

    /// Apply the pending external records at `t`; `demand`: for the instruction about to
    /// read them, to which the lines they bring in are still misses (`Hierarchy::brought_in`).
    #[cold]
    fn apply_external(&mut self, t: Cycle, demand: bool, eng: &mut Engine) -> Result<(), StepError> {
        // With `pages.image=lazy` the records before the first instruction are the image.
        let image = self.lazy_image && !self.started;
        if !image {
            eng.set_predating(!self.after_syscall);
        }
        for ins in &self.pending[..self.pending_n] {
            for a in &ins.accesses {
                if a.size == 0 {
                    // A zero-byte store (`Instr::set_mapped`): the page gets its frame now, in
                    // the order the records give, and nothing is written.
                    Self::frame(&mut self.pm, a.addr, eng, t)?;
                    continue;
                }
                let val = ins.value(a);
                self.external_bytes += a.size as u64;
                if image {
                    Self::hold_image(&mut self.pm, a.addr, val, t, eng)?;
                    continue;
                }
                // Line by line (lines never cross pages): each may be brought in.
                for (va, r) in line_pieces(a.addr, a.size, eng.line()) {
                    let pa = Self::frame(&mut self.pm, va, eng, t)?;
                    let cached = eng.machine().l2.tags.find(pa).is_some();
                    eng.write(pa, &val[r], t)?;
                    if demand && !cached {
                        self.hier.brought_in(pa);
                    }
                }
            }
        }
        eng.set_predating(false);
        (self.pending_n, self.pending_bytes) = (0, 0);
        self.hier.back_invalidate(eng);
        Ok(())
    }

    /// Translate and access the instruction line of `pc` at `t` (detailed and warming make
    /// the same calls): when translated, when the line is in, when the engine work the
    /// access started has settled (the line's time if it started none).
    #[inline]
    fn fetch_line_at(&mut self, pc: u64, t: Cycle, eng: &mut Engine) -> Result<(Cycle, Cycle, Cycle), StepError> {
        let (pa, tt) = self.mmu.translate(Side::Inst, pc, t, &mut self.pm, &mut self.hier, eng)?;
        let s = self.hier.access(AccessKind::Fetch, pa, tt, eng)?;
        let settled = if s.engine { self.hier.settle(eng)? } else { s.ready };
        Ok((tt, s.ready, settled))
    }

    /// The instruction line of `pc` (detailed and warming fetch compare it with
    /// `fetch_line`): a shift, not a division, as it runs for every instruction.
    #[inline]
    fn iline(&self, pc: u64) -> u64 {
        pc >> self.hier.l1i.line_bytes().trailing_zeros()
    }

    /// Fetch `ins`: returns the cycle it is fetched and why it came then.
    #[inline]
    fn fetch<const Q: bool, R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(Cycle, Cause), StepError> {
        if Q && self.ahead.is_some() {
            return self.fetch_ahead(ins, eng);
        }
        let iline = self.iline(ins.pc());
        if iline != self.fetch_line {
            self.fetch_line = iline;
            let t = self.fetch_t;
            let (tt, line_ready, settled) = self.fetch_line_at(ins.pc(), t, eng)?;
            let ready = line_ready.max(settled);
            // The L1 hit latency is pipelined away; only misses (and TLB misses) hold fetch.
            let hit_time = t + self.hier.l1i.latency;
            if ready > hit_time {
                let why = if tt > t { cpistack::TLB } else { cpistack::ICACHE };
                self.redirect(ready - self.hier.l1i.latency, why);
            }
        }
        if self.fetch_n >= self.fetch_width {
            self.fetch_t += 1;
            self.fetch_n = 0;
        }
        self.fetch_n += 1;
        let why = std::mem::replace(&mut self.fetch_cause, cpistack::BASE);
        Ok((self.fetch_t, why))
    }

    /// `fetch` with `core.fetch_buffer` (ChampSim's front end, src/ooo_cpu.cc): `ins` enters
    /// the buffer (`initialize_instruction`: fetch width a cycle, once the instruction
    /// `fetch_buffer` before it has left), a new line is looked up then (`fetch_instruction`
    /// sends every line in the buffer to the L1I), and it is delivered in order once its line
    /// is in — so misses of the lines in the buffer overlap rather than follow each other.
    fn fetch_ahead<R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(Cycle, Cause), StepError> {
        let width = self.fetch_width;
        let a = self.ahead.as_mut().expect("fetch_ahead with a fetch buffer");
        let entered = a.enter(width);
        let iline = self.iline(ins.pc());
        if iline != self.fetch_line {
            self.fetch_line = iline;
            let (tt, line_ready, settled) = self.fetch_line_at(ins.pc(), entered, eng)?;
            let ready = line_ready.max(settled);
            let lat = self.hier.l1i.latency;
            let a = self.ahead.as_mut().expect("fetch_ahead with a fetch buffer");
            // The L1 hit latency is pipelined away, as without the buffer.
            a.line = (ready - lat).max(entered);
            a.why = if ready > entered + lat { if tt > entered { cpistack::TLB } else { cpistack::ICACHE } } else { cpistack::BASE };
        }
        let a = self.ahead.as_mut().expect("fetch_ahead with a fetch buffer");
        let (line, why) = (a.line.max(entered), a.why);
        if line > self.fetch_t {
            (self.fetch_t, self.fetch_n, self.fetch_cause) = (line, 0, why);
        }
        if self.fetch_n >= self.fetch_width {
            self.fetch_t += 1;
            self.fetch_n = 0;
        }
        self.fetch_n += 1;
        a.left(self.fetch_t);
        let why = std::mem::replace(&mut self.fetch_cause, cpistack::BASE);
        Ok((self.fetch_t, why))
    }

    /// The branch before the instruction at `next_pc` went there (or fell through): if its
    /// target or direction was mispredicted, fetch resumes after it is found out — at decode
    /// (ChampSim's `decode_instruction`: a cycle before dispatch) or once it executed — and
    /// the front end's refill (`core.mispredict_penalty`).
    fn resolve_branch(&mut self, next_pc: u64) {
        let Some((b, found)) = self.btb.as_mut().and_then(|b| b.resolve(next_pc, true)) else { return };
        let at = match found {
            Found::Decode => b.fetched + FRONTEND_DEPTH - 1,
            Found::Execute => b.done,
        };
        self.redirect(at + self.penalty, cpistack::BRANCH);
    }

    /// The stack pointer `ins` writes without a register dependence (`core.sp_folding`).
    #[inline]
    fn folded<R: Record>(&mut self, ins: &R) -> Option<Reg> {
        let g = self.sp_folding.as_mut()?;
        let numbering = g.update(ins);
        folded_stack_pointer(ins, numbering)
    }

    /// Time one instruction, performing its loads and stores on the engine.
    pub fn step<R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(), StepError> {
        if self.queues {
            self.step_as::<true, R>(ins, eng)
        } else {
            self.step_as::<false, R>(ins, eng)
        }
    }

    /// `step` of a record a packed batch keeps whole (`step_all`), out of line.
    #[inline(never)]
    fn step_spilled(&mut self, ins: &Instr, eng: &mut Engine) -> Result<(), StepError> {
        self.step(ins, eng)
    }

    /// `step` of each of `recs` in turn (none of them external), up to the first error: how
    /// many were stepped (the failed one counted), and the error. One call for a run of
    /// instructions rather than one each (the call cost ~30 host instructions a step, gzip).
    pub fn step_all(&mut self, recs: Recs, eng: &mut Engine) -> (usize, Result<(), StepError>) {
        if self.queues {
            self.step_all_as::<true>(recs, eng)
        } else {
            self.step_all_as::<false>(recs, eng)
        }
    }

    fn step_all_as<const Q: bool>(&mut self, recs: Recs, eng: &mut Engine) -> (usize, Result<(), StepError>) {
        match recs {
            Recs::Plain(recs) => {
                for (k, ins) in recs.iter().enumerate() {
                    if let Err(e) = self.step_as::<Q, Instr>(ins, eng) {
                        return (k + 1, Err(e));
                    }
                }
            }
            Recs::Packed { .. } => {
                for k in 0..recs.len() {
                    // A record kept whole (0.5-4% of a tracer's: external records, more
                    // accesses or bytes than a packed slot holds) through the plain step, not
                    // a second copy of it inlined here.
                    let r = match recs.get(k) {
                        One::View(v) => self.step_as::<Q, View>(&v, eng),
                        One::Plain(ins) => self.step_spilled(ins, eng),
                    };
                    if let Err(e) = r {
                        return (k + 1, Err(e));
                    }
                }
            }
        }
        (recs.len(), Ok(()))
    }

    /// `step`, with (`Q`) or without the optional queues, limits and dependence tracking
    /// (`queues`): the seeds' machines have none, and their checks were 45 of the 510 host
    /// instructions per instruction on `hot` (callgrind).
    #[inline(always)]
    fn step_as<const Q: bool, R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(), StepError> {
        self.instructions += 1;
        if self.btb.is_some() {
            self.resolve_branch(ins.pc());
        }
        let (fetched, arrived) = self.fetch::<Q, R>(ins, eng)?;
        let folded = self.folded(ins);
        // With `core.ip_register` (one of the `queues`) a branch's kind, and it takes a register
        // for the instruction pointer.
        let ip_ty = match &mut self.btb {
            Some(b) if Q && self.ip_register => b.branch_type(ins),
            _ => None,
        };
        let ndst = ins.ndst() - folded.is_some() as u8 + ip_ty.is_some() as u8;

        // Dispatch: needs a ROB entry, queue entries for memory operations, registers.
        // Stores matter only to the store queue, its ports and the dependence tracking.
        let has_store = Q && ins.has_store();
        // With a store queue the LSQ holds loads only; without, every memory operation.
        let has_load = if Q && self.sqw.is_some() { ins.has_load() } else { ins.naccesses() > 0 };
        let earliest = fetched + FRONTEND_DEPTH;
        let (mut dispatch, mut why) = (earliest, arrived);
        let mut wait = |free: Cycle, cause: Cause| (dispatch, why) = later((dispatch, why), free, cause);
        wait(self.rob.next_free(), cpistack::ROB_FULL);
        if has_load {
            wait(self.lsq.next_free(), cpistack::LSQ_FULL);
        }
        if let (true, Some(sqw)) = (has_store, &self.sqw) {
            wait(sqw.next_free(), cpistack::SQ_FULL);
        }
        if let (true, Some(regs)) = (Q, &mut self.regs) {
            wait(regs.available(ins, ndst), cpistack::REGS_FULL);
        }
        if dispatch > earliest {
            // Window full: the front end stalls with it.
            self.rob_stall += dispatch - earliest;
            self.fetch_t = dispatch - FRONTEND_DEPTH;
            self.fetch_n = 1;
            if let Some(a) = &mut self.ahead {
                a.held(self.fetch_t);
            }
        }

        let (mut ready, mut cause) = (dispatch, why);
        for &r in ins.srcs() {
            (ready, cause) = later((ready, cause), self.reg_ready[r as usize], self.reg_cause[r as usize]);
        }
        if matches!(ip_ty, Some(BranchType::Conditional | BranchType::DirectCall | BranchType::IndirectCall)) {
            (ready, cause) = later((ready, cause), self.ip_ready.0, self.ip_ready.1);
        }
        let issue = self.issue.take(ready);
        if self.pending_n > 0 {
            // When a demand miss of this instruction would reach the protected level.
            self.apply_external(issue + 1 + self.hier.lookups(Side::Data), true, eng)?;
        }
        let lat = self.lat[ins.op() as usize];
        let mut done = issue + lat;
        if lat > 1 {
            cause = cpistack::EXECUTE;
        }

        // Memory accesses.
        for k in 0..ins.naccesses() {
            let (store, addr, val) = ins.access(k);
            // Split at L1-line (hence page and protected-line) boundaries.
            for (va, r) in line_pieces(addr, val.len() as u32, self.hier.l1d.line_bytes()) {
                let bytes = &val[r];
                let (t, why) = if store {
                    let finished = if Q && self.store_at_retire {
                        // Its translation, the L1D and the bytes at commit, below.
                        self.store_finish(ins.pc(), va, bytes.len() as u64, issue + 1)
                    } else {
                        self.store::<Q>(ins.pc(), va, bytes, issue + 1, eng)?
                    };
                    // With `core.stores_in_order` the instruction completes when its store
                    // finishes, after the older ones (ChampSim: its mem op is then complete).
                    (if Q && self.sq.in_order() { finished } else { 0 }, cpistack::MEMDEP)
                } else {
                    self.load::<Q>(ins.pc(), va, bytes, dispatch, issue + 1, eng)?
                };
                (done, cause) = later((done, cause), t, why);
            }
            if store {
                self.stores += 1;
            } else {
                self.loads += 1;
            }
        }

        if ins.branch() != Branch::None {
            self.branches += 1;
            let taken = ins.branch() == Branch::Taken;
            let right = self.bp.predict(ins.pc(), taken);
            match &mut self.btb {
                None if !right => self.redirect(done + self.penalty, cpistack::BRANCH),
                None => {}
                // Resolved when the next instruction shows the target (`resolve_branch`).
                Some(b) => {
                    let ty = ip_ty.or_else(|| b.branch_type(ins)).expect("a branch has a type");
                    b.pending = Some(Pending { pc: ins.pc(), ty, taken, predicted_taken: right == taken, fetched, done });
                }
            }
            if taken && self.taken_ends_fetch {
                match &mut self.ahead {
                    // ChampSim stops putting instructions into its buffer for the cycle.
                    Some(a) => a.enter_n = self.fetch_width,
                    None => self.fetch_n = self.fetch_width,
                }
            }
        }
        // A folded stack pointer keeps the time its last unfolded writer gave it.
        let kept = folded.map(|r| (r, self.reg_ready[r as usize], self.reg_cause[r as usize]));
        for &r in ins.dsts() {
            self.reg_ready[r as usize] = done;
            self.reg_cause[r as usize] = cause;
        }
        if let Some((r, t, why)) = kept {
            (self.reg_ready[r as usize], self.reg_cause[r as usize]) = (t, why);
        }
        if ip_ty.is_some() {
            self.ip_ready = (done, cause);
        }

        // Commit in order, commit_width per cycle.
        let mut c = done.max(self.commit_t);
        self.after_syscall = ins.op() == OpClass::Barrier;
        self.started = true;
        if ins.op() == OpClass::Barrier && self.syscall_barriers {
            self.barriers += 1;
            let checks = eng.barrier(c)?;
            self.hier.back_invalidate(eng);
            if checks > c {
                self.barrier_stall += checks - c;
                self.cpi.commit(c, cause);
                c = checks;
                cause = cpistack::INTEGRITY;
            }
        }
        if c == self.commit_t {
            if self.commit_n >= self.commit_width {
                c += 1;
                self.commit_t = c;
                self.commit_n = 0;
                cause = cpistack::BASE;
            }
        } else {
            self.commit_t = c;
            self.commit_n = 0;
        }
        self.commit_n += 1;
        self.cpi.commit(c, cause);
        self.rob.take(c);
        if has_load {
            self.lsq.take(c);
        }
        if let (true, Some(regs)) = (Q, &mut self.regs) {
            regs.commit(ndst, c);
        }
        if has_store {
            // Stores are written to the L1 at commit, through a store port if ports are few.
            let mut written = match &mut self.write_ports {
                Some(p) => p.take(c),
                None => c,
            };
            if self.store_at_retire {
                written = self.write_retired(ins, written, eng)?;
            }
            if let Some(sqw) = &mut self.sqw {
                sqw.take(written);
            }
            self.sq.commit(written);
        }
        Ok(())
    }

    /// Functional warming (SMARTS, Wunderlich et al. ISCA 2003 §4): `ins` updates every
    /// structure that holds state from one instruction to the next — TLBs and page tables,
    /// every cache level, the branch predictor and, through the engine's own calls, the
    /// protected level, the integrity tree, counters, time stamps and untrusted memory — in
    /// the order `step` makes the same calls, without the out-of-order timing. Time moves on
    /// by the CPI given to `start_warming` per instruction, and never gets more than a ROB
    /// ahead of a load still waiting for memory (as the window would stall); the engine books
    /// its transfers and crypto at that clock, so its queues hold what that pace makes them
    /// hold, and the clock waits where the core would stall (an instruction miss, a barrier's
    /// checks, a scheme's timed event). Loads are not compared with the trace and the store
    /// queue is left alone: a load served by an older store (a `core.memory_dependence`
    /// other than none) reads the caches here.
    pub fn warm<R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(), StepError> {
        self.warm_fx += self.warm_cpi_fx;
        self.fetch_t = (self.fetch_t + (self.warm_fx >> 10)).max(self.rob.next_free());
        self.warm_fx &= (1 << 10) - 1;
        if let Some(b) = &mut self.btb {
            b.resolve(ins.pc(), false); // trains; warming times no redirects
        }
        let iline = self.iline(ins.pc());
        if iline != self.fetch_line {
            self.fetch_line = iline;
            let itlb_misses = self.mmu.itlb_misses;
            let (_, line_ready, _) = self.fetch_line_at(ins.pc(), self.fetch_t, eng)?;
            self.fetch_t = self.fetch_t.max(line_ready);
            if self.mmu.itlb_misses != itlb_misses {
                self.recent.forget_line(); // a page walk may have read through the L1D
            }
        }
        let t = self.fetch_t;
        let mut done = t;
        if let Some(regs) = &mut self.regs {
            regs.available(ins, ins.ndst()); // registers the program uses
        }
        if self.pending_n > 0 {
            self.apply_external(t, false, eng)?;
        }
        let l1b = self.hier.l1d.line_bytes();
        for k in 0..ins.naccesses() {
            let (store, addr, val) = ins.access(k);
            let mut off = 0u64;
            while off < val.len() as u64 {
                let va = addr + off;
                let n = (l1b - (va & (l1b - 1))).min(val.len() as u64 - off);
                let kind = if store { AccessKind::Store } else { AccessKind::Load };
                let (pa, s) = self.warm_data(kind, va, t, eng)?;
                if store {
                    eng.write_cached(pa, &val[off as usize..(off + n) as usize]);
                } else {
                    done = done.max(s.ready);
                }
                eng.track_values(pa, n as usize);
                if s.engine {
                    self.hier.settle(eng)?;
                }
                off += n;
            }
        }
        if ins.branch() != Branch::None {
            self.warm_branch(ins, t);
        }
        self.after_syscall = ins.op() == OpClass::Barrier;
        self.started = true;
        if ins.op() == OpClass::Barrier && self.syscall_barriers {
            let checks = eng.barrier(t)?;
            self.hier.back_invalidate(eng);
            self.fetch_t = self.fetch_t.max(checks);
        }
        self.rob.take(done);
        Ok(())
    }

    /// A branch while warming trains the direction predictor now and the BTB (its target,
    /// return stack, indirect predictor) when the next instruction shows where it went.
    #[inline]
    fn warm_branch<R: Record>(&mut self, ins: &R, t: Cycle) {
        let taken = ins.branch() == Branch::Taken;
        let right = self.bp.predict(ins.pc(), taken);
        if let Some(b) = &mut self.btb {
            let ty = b.branch_type(ins).expect("a branch has a type");
            b.pending = Some(Pending { pc: ins.pc(), ty, taken, predicted_taken: right == taken, fetched: t, done: t });
        }
    }

    /// A record of a checkpoint's prewarm (`secmem_trace::checkpoint`: branches, each followed
    /// by a record where it went, then the lines the caches held). A branch and the record
    /// after it only train the predictors, as `warm` trains them, without fetching either:
    /// their code lines are among the prewarm's lines, fetched after them in the L2's order,
    /// which a fetch here would only disturb. The lines are warmed as any instruction is,
    /// but their transfers book no bus time (docs/sampling.md: what this saves).
    pub fn prewarm<R: Record>(&mut self, ins: &R, eng: &mut Engine) -> Result<(), StepError> {
        if std::mem::take(&mut self.prewarm_target) {
            if let Some(b) = &mut self.btb {
                b.resolve(ins.pc(), false);
            }
            return Ok(());
        }
        if ins.branch() != Branch::None {
            self.warm_branch(ins, self.fetch_t);
            (self.prewarm_target, self.started) = (true, true);
            return Ok(());
        }
        // What the caches held is read in without booking the bus: the window's detailed
        // warming (B) starts from an idle memory system, as it would after any prewarm.
        // With `sampling.prewarm=install` the protected level takes its lines as state
        // (`Engine::set_installing`): the same lines, order and dirtiness, no checks.
        eng.set_transfers_untimed(true);
        if self.prewarm_install {
            eng.set_installing(true);
        }
        let r = self.warm(ins, eng);
        eng.set_installing(false);
        eng.set_transfers_untimed(false);
        r
    }

    /// A data access while warming, as `step`'s (translation, then the cache levels), except
    /// that the line of the last access is not looked up again: a hit on what was touched
    /// last changes no replacement state (`warm::Recent`; the TLB keeps its own last page).
    #[inline]
    fn warm_data(&mut self, kind: AccessKind, va: u64, t: Cycle, eng: &mut Engine) -> Result<(u64, Served), StepError> {
        let misses = self.mmu.dtlb_misses;
        let (pa, t0) = self.mmu.translate(Side::Data, va, t, &mut self.pm, &mut self.hier, eng)?;
        if self.mmu.dtlb_misses != misses {
            self.recent.forget_line(); // a page walk may have read through the L1D
        } else if self.recent.same_line(pa) {
            if let Some(ready) = self.hier.l1d_again(kind, pa, &mut self.recent.slot, t) {
                return Ok((pa, Served { ready, depth: 0, engine: false, slot: self.recent.slot }));
            }
        }
        let s = self.hier.access(kind, pa, t0, eng)?;
        self.recent.set_line(pa);
        Ok((pa, s))
    }

    /// Functional warming starts: from `now()`, at `cycles / instructions` per instruction
    /// (the last measured window's CPI).
    pub fn start_warming(&mut self, cycles: u64, instructions: u64) {
        self.warm_cpi_fx = ((cycles << 10) / instructions.max(1)).max(1);
        self.warm_fx = 0;
        (self.fetch_t, self.fetch_n) = (self.now(), 0);
        self.recent.forget_line(); // detailed execution used the L1D
    }

    /// Detailed timing resumes after functional warming, at the warming clock: the window,
    /// queues and ports are empty (every entry freed before it).
    pub fn resume(&mut self) {
        (self.commit_t, self.commit_n, self.fetch_n) = (self.now(), 0, 0);
    }

    /// A store of `bytes` at `va`, executed at `t`: its line is fetched now (write-allocate)
    /// and its bytes written to the protected level; it waits in the store queue until
    /// commit. Returns when it finished (`StoreQueue::finish_at`, its store port).
    #[inline]
    fn store<const Q: bool>(&mut self, pc: u64, va: u64, bytes: &[u8], t: Cycle, eng: &mut Engine) -> Result<Cycle, StepError> {
        let t = if Q { self.sq.finish_at(t) } else { t };
        let t = match (Q, &mut self.store_ports, &mut self.write_ports) {
            (true, Some(p), Some(w)) => {
                let c = p.take(t);
                w.add(c);
                c
            }
            _ => t,
        };
        let (pa, t0) = self.mmu.translate(Side::Data, va, t, &mut self.pm, &mut self.hier, eng)?;
        let s = self.hier.access(AccessKind::Store, pa, t0, eng)?;
        eng.write_cached_at(pa, bytes, &mut self.hier.l1d.below[s.slot as usize]);
        eng.track_values(pa, bytes.len());
        if s.engine {
            self.hier.settle(eng)?;
        }
        if Q {
            self.sq.store(pc, va, bytes.len() as u64, t);
        }
        Ok(t)
    }

    /// A store of `len` bytes at `va` executed at `t` with `core.store_at_retire`: known to
    /// the store queue; `write_retired` translates it and writes it to the L1D after commit,
    /// as ChampSim's L1D translates a retired store (src/ooo_cpu.cc `issue_write` sends it
    /// untranslated). Returns when it finished.
    fn store_finish(&mut self, pc: u64, va: u64, len: u64, t: Cycle) -> Cycle {
        let t = self.sq.finish_at(t);
        let t = match (&mut self.store_ports, &mut self.write_ports) {
            (Some(p), Some(w)) => {
                let c = p.take(t);
                w.add(c);
                c
            }
            _ => t,
        };
        self.sq.store(pc, va, len, t);
        t
    }

    /// The stores of `ins`, committed and sent to the L1D at `t`: each waits for a place in
    /// the L1D's write queue, is translated (the D-TLB, a walk if it misses), then accesses
    /// the L1D (write-allocate: a miss fetches its line and holds an MSHR), and its bytes are
    /// written. Returns when the write queue took the
    /// last, which is when its store-queue entry frees. The bytes are written in this step,
    /// before any younger instruction runs, so values and forwarding are as at execute.
    fn write_retired<R: Record>(&mut self, ins: &R, t: Cycle, eng: &mut Engine) -> Result<Cycle, StepError> {
        let mut left = t;
        for k in 0..ins.naccesses() {
            let (store, addr, val) = ins.access(k);
            if !store {
                continue;
            }
            for (va, r) in line_pieces(addr, val.len() as u32, self.hier.l1d.line_bytes()) {
                let bytes = &val[r];
                let arrive = match &self.l1d_wq {
                    Some(w) => t.max(w.next_free()),
                    None => t,
                };
                let (pa, s, taken) = if self.mmu.restarts() {
                    let (pa, first, t0) = self.start_lookup(va, arrive, true, eng)?;
                    let (s, taken) = self.hier.write_started(pa, first, t0, eng)?;
                    (pa, s, taken)
                } else {
                    let (pa, t0) = self.mmu.translate(Side::Data, va, arrive, &mut self.pm, &mut self.hier, eng)?;
                    let (s, taken) = self.hier.write(pa, t0, eng)?;
                    (pa, s, taken)
                };
                if let Some(w) = &mut self.l1d_wq {
                    w.take(taken);
                }
                eng.write_cached_at(pa, bytes, &mut self.hier.l1d.below[s.slot as usize]);
                eng.track_values(pa, bytes.len());
                if s.engine {
                    self.hier.settle(eng)?;
                }
                left = left.max(arrive);
            }
        }
        Ok(left)
    }

    /// With `tlb.restart` (ChampSim's L1D and DTLB, src/cache.cc `CACHE::operate`): the L1D
    /// starts the tag check of a data access (`write`: a retired store's) arriving at `t`
    /// untranslated and asks the D-TLB then (`issue_translation`). A translation known by
    /// that cycle serves the check; a later one sends it to the translation stash, and it
    /// starts again once the translation is back, `TRANSLATION_BACK` cycles after it was
    /// known (`finish_translation`). Returns the physical address, when the check first
    /// started, and when it started for good.
    fn start_lookup(&mut self, va: u64, t: Cycle, write: bool, eng: &mut Engine) -> Result<(u64, Cycle, Cycle), StepError> {
        let first = self.hier.l1d_start(va, t, write);
        let (pa, known) = self.mmu.translate(Side::Data, va, first, &mut self.pm, &mut self.hier, eng)?;
        if known <= first {
            return Ok((pa, first, first));
        }
        self.tag_restarts += 1;
        Ok((pa, first, self.hier.l1d_restart(known + TRANSLATION_BACK)))
    }

    /// A load of `bytes` (the trace's value) at `va`, dispatched at `dispatched`, ready to go
    /// at `t`: returns when its data is usable and what it waited for.
    #[inline]
    fn load<const Q: bool>(&mut self, pc: u64, va: u64, bytes: &[u8], dispatched: Cycle, t: Cycle, eng: &mut Engine) -> Result<(Cycle, Cause), StepError> {
        let n = bytes.len() as u64;
        let (mut at, mut why) = (t, cpistack::BASE);
        // Without dependence tracking every load reads the cache at `t` (`StoreQueue::load`).
        let dep = if Q { self.sq.load(pc, va, n, dispatched, t) } else { LoadDep::Cache { at: t, waited: false } };
        match dep {
            LoadDep::Cache { at: a, waited } => {
                at = a;
                if waited {
                    why = cpistack::MEMDEP;
                }
            }
            LoadDep::Partial { at: a } => (at, why) = (a, cpistack::MEMDEP),
            dep @ (LoadDep::Forward { .. } | LoadDep::Violation { .. }) => {
                let pa = self.pm.translate(va).ok_or(StepError::OutOfMemory(va))?;
                // The bytes come from the store, which left them in the protected level; if
                // that line has gone meanwhile, the load is timed as a cache access.
                if eng.machine().l2.tags.find(pa).is_some() {
                    self.check_value(pa, bytes, None, eng);
                    eng.track_values(pa, bytes.len());
                    return Ok(match dep {
                        LoadDep::Forward { ready, waited } => (ready, if waited { cpistack::MEMDEP } else { cpistack::BASE }),
                        LoadDep::Violation { ready, store_done } => {
                            // Squashed with every younger instruction: refetch after the store.
                            self.redirect(store_done + self.penalty, cpistack::MEMDEP);
                            (ready, cpistack::MEMDEP)
                        }
                        _ => unreachable!(),
                    });
                }
            }
        }
        if let (true, Some(p)) = (Q, &mut self.load_ports) {
            at = p.take(at);
        }
        let (pa, t0, s) = if Q && self.mmu.restarts() {
            let (pa, _, t0) = self.start_lookup(va, at, false, eng)?;
            (pa, t0, self.hier.access_started(AccessKind::Load, pa, t0, eng)?)
        } else {
            let (pa, t0) = self.mmu.translate(Side::Data, va, at, &mut self.pm, &mut self.hier, eng)?;
            (pa, t0, self.hier.access(AccessKind::Load, pa, t0, eng)?)
        };
        self.check_value(pa, bytes, Some(s.slot), eng);
        eng.track_values(pa, bytes.len());
        let mut ready = s.ready;
        if s.engine {
            ready = ready.max(self.hier.settle(eng)?);
        }
        ready += self.load_result;
        if why == cpistack::BASE {
            // What took longest: the translation or the access (by the level that served it).
            why = if t0 - at > ready - t0 { cpistack::TLB } else { cpistack::DATA + s.depth };
        }
        Ok((ready, why))
    }

    /// Compare a load's bytes in the protected level with the trace's. `l1d`: the L1D slot
    /// holding the line, whose guess of the line's place in the protected level is used and
    /// kept (`Level::below`); None for a load served by the store queue.
    // Always inlined (into `load`): the call cost ~25 host instructions a load (callgrind,
    // gzip and xz: 6 an instruction); `load` and `store` inlined as well cost more.
    #[inline(always)]
    fn check_value(&mut self, pa: u64, bytes: &[u8], l1d: Option<u32>, eng: &Engine) {
        let there = match l1d {
            Some(s) => eng.cached_at(pa, bytes.len(), &mut self.hier.l1d.below[s as usize]),
            None => eng.cached(pa, bytes.len()),
        };
        if !secmem_core::mem::same_bytes(there, bytes) {
            self.value_mismatches += 1;
        }
    }

    /// The CPI stack's total: the cycles attributed so far (equal to the measured cycles).
    pub fn cpi_total(&self) -> u64 {
        self.cpi.total()
    }

    pub fn stats(&self, out: &mut Stats) {
        out.int("core.loads", self.loads);
        if self.mmu.restarts() {
            out.int("l1d.tag_restarts", self.tag_restarts);
        }
        out.int("core.stores", self.stores);
        out.int("core.branches", self.branches);
        // With a BTB, a branch is mispredicted by its target too (ChampSim's count).
        let (lookups, misses) = self.btb.as_ref().map_or(self.bp.counts(), Btb::counts);
        out.rate("core.branch_mispredict_rate", misses, lookups);
        if let Some(b) = &self.btb {
            b.stats(out);
        }
        out.int("core.rob_full_stall_cycles", self.rob_stall);
        out.int("core.barriers", self.barriers);
        out.int("core.barrier_stall_cycles", self.barrier_stall);
        self.hier.stats(out);
        self.mmu.stats(out, &self.hier.level_names(Side::Data));
        self.sq.stats(out);
        self.cpi.stats(out);
        out.int("trace.value_mismatches", self.value_mismatches);
        out.int("trace.external_bytes", self.external_bytes);
        out.int("mem.pages_mapped", self.pm.pages());
    }
}


/// The pieces of an access of `size` bytes at `addr` cut at `line`-byte boundaries (a power
/// of two): each piece's address and the range of the access's value it holds.
#[inline]
fn line_pieces(addr: u64, size: u32, line: u64) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
    let (size, mut off) = (size as u64, 0u64);
    std::iter::from_fn(move || {
        (off < size).then(|| {
            let va = addr + off;
            let n = (line - (va & (line - 1))).min(size - off);
            off += n;
            (va, (off - n) as usize..off as usize)
        })
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_pieces_cover_an_access_in_order_each_within_one_line() {
        for (addr, size, line) in [(0x1000u64, 8u32, 64u64), (0x103c, 8, 64), (0x0fff, 4098, 64), (0x20, 1, 32), (0x7, 200, 128), (0x40, 0, 64)] {
            let mut next = (addr, 0usize);
            for (va, r) in line_pieces(addr, size, line) {
                assert_eq!((va, r.start), next, "contiguous");
                assert!(r.end > r.start && va / line == (va + (r.end - r.start) as u64 - 1) / line, "one line");
                assert!(r.end == size as usize || (va + (r.end - r.start) as u64) % line == 0, "cut at a boundary only");
                next = (va + (r.end - r.start) as u64, r.end);
            }
            assert_eq!(next.1, size as usize, "covered");
        }
    }

    /// A checkpoint's prewarm (`Core::prewarm`) against functional warming (`Core::warm`) of
    /// the same records: its branches leave the direction predictor and the BTB as warming
    /// leaves them (the same predictions of the same branches after), without a fetch; its
    /// lines come into the L2 through the schemes as warming brings them (as many misses,
    /// the same bytes), without booking the bus.
    #[test]
    fn the_prewarm_trains_the_predictors_as_warming_does_and_books_no_bus_time() {
        let p = crate::configure("champsim", Some("chash"), Some("otp"), &[]).unwrap();
        let fresh = || {
            let mut eng = Engine::new(&p, 1).unwrap();
            let mut core = Core::new(&p, &eng).unwrap();
            core.pm.set_order(&p, 1).unwrap();
            eng.set_untimed(true); // functional warming, as a window's warm-up
            (core, eng)
        };
        let ((mut a, mut ea), (mut b, mut eb)) = (fresh(), fresh());
        // Branches, each followed by a record where it went: conditional and taken or not,
        // some pcs often, their targets far apart (the BTB must learn each).
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut pairs = Vec::new();
        for _ in 0..3_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pc = 0x40_0000 + (x % 97) * 36;
            let taken = (x % 97) % 3 != 0; // each branch always goes the same way
            let mut br = Instr::default();
            (br.pc, br.len, br.branch) = (pc, 4, if taken { Branch::Taken } else { Branch::NotTaken });
            let mut to = Instr::default();
            (to.pc, to.len) = (if taken { 0x80_0000 + (pc % 4096) * 64 } else { pc + 4 }, 1);
            pairs.push((br, to));
        }
        for (br, to) in &pairs {
            for r in [br, to] {
                a.warm(r, &mut ea).unwrap();
                b.prewarm(r, &mut eb).unwrap();
            }
        }
        let stat = |c: &Core, e: &Engine, k: &str| {
            let mut s = Stats::default();
            c.stats(&mut s);
            e.stats(&mut s);
            s.get_f64(k).unwrap_or_else(|| panic!("{k}"))
        };
        assert!(stat(&a, &ea, "l1i.accesses") > 0.0);
        assert_eq!(stat(&b, &eb, "l1i.accesses"), 0.0, "the prewarm's branches fetch nothing");
        // The same branches again, predicted and counted by both: the same mispredictions,
        // branch by branch, so the same state after training; and they have learnt.
        let (ba, bb) = (a.btb.as_ref().unwrap().counts(), b.btb.as_ref().unwrap().counts());
        for (br, to) in &pairs {
            for c in [&mut a, &mut b] {
                c.warm_branch(br, 0);
                c.btb.as_mut().unwrap().resolve(to.pc, true);
            }
            assert_eq!(a.btb.as_ref().unwrap().counts(), b.btb.as_ref().unwrap().counts());
        }
        assert_eq!(ba, bb);
        let (la, ma) = a.btb.as_ref().unwrap().counts();
        assert_eq!(la - ba.0, pairs.len() as u64);
        assert!(((ma - ba.1) as f64) < 0.25 * pairs.len() as f64, "trained: {} of {} mispredicted", ma - ba.1, pairs.len());
        // Lines: loads and stores of data pieces, with their bytes, on fresh machines (the
        // branches' fetches gave warming's pages their frames in another order).
        let ((mut a, mut ea), (mut b, mut eb)) = (fresh(), fresh());
        let busy = |e: &Engine| e.machine().port.counters().busy_cycles;
        let (busy_a, busy_b) = (busy(&ea), busy(&eb));
        let (miss_a, miss_b) = (stat(&a, &ea, "l2.misses"), stat(&b, &eb, "l2.misses"));
        for k in 0..200u64 {
            let mut r = Instr::default();
            (r.pc, r.len, r.op) = (0x40_0000, 4, OpClass::Mem);
            r.add_access(k % 3 == 0, 0x1000_0000 + k * 4096 + (k % 7) * 64, &k.to_le_bytes());
            a.warm(&r, &mut ea).unwrap();
            b.prewarm(&r, &mut eb).unwrap();
        }
        // The data's lines and the page walks': about as many either way (measured 428
        // warmed, 430 prewarmed: timing moves what the buffers in front of memory catch).
        let (da, db) = (stat(&a, &ea, "l2.misses") - miss_a, stat(&b, &eb, "l2.misses") - miss_b);
        assert!(db >= 200.0 && (da - db).abs() <= 0.02 * da, "{da} warmed, {db} prewarmed");
        assert!(busy(&ea) > busy_a, "warming books the bus");
        assert_eq!(busy(&eb), busy_b, "the prewarm books none");
        for (c, e) in [(&mut a, &mut ea), (&mut b, &mut eb)] {
            let pa = c.pm.translate(0x1000_0000 + 3 * 4096 + 3 * 64).unwrap();
            let mut v = [0u8; 8];
            e.read(pa, &mut v, 0).unwrap();
            assert_eq!(u64::from_le_bytes(v), 3, "the stored bytes");
        }
    }

    /// A port's packed slots give every take the cycle a plain count per cycle gives, while
    /// the takes stay within the remembered window (times go back and forth, as an
    /// out-of-order core's do, and pile up past the width).
    #[test]
    fn per_cycle_takes_as_a_count_per_cycle_does() {
        for width in [1u8, 2, 3, 6] {
            let mut ports = PerCycle::new(width);
            let mut used: std::collections::HashMap<Cycle, u8> = std::collections::HashMap::new();
            let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ width as u64;
            let mut base: Cycle = 1_000;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                base += x % 3;
                let t = base + (x >> 20) % 40;
                let mut want = t;
                while used.get(&want).copied().unwrap_or(0) >= width {
                    want += 1;
                }
                *used.entry(want).or_insert(0) += 1;
                assert_eq!(ports.take(t), want, "width {} at {}", width, t);
            }
        }
    }
}

/// The front end's instruction buffer (`core.fetch_buffer`): when instructions enter it, and
/// when the last ones left it.
struct FetchAhead {
    /// Cycles the last `len` instructions were delivered (left the buffer), a ring.
    gone: Vec<Cycle>,
    k: usize,
    enter_t: Cycle,
    enter_n: u32,
    /// The current line's delivery floor (its miss, the L1 hit latency pipelined away), and
    /// what it waited for.
    line: Cycle,
    why: Cause,
}

impl FetchAhead {
    fn new(len: usize) -> FetchAhead {
        FetchAhead { gone: vec![0; len], k: 0, enter_t: 0, enter_n: 0, line: 0, why: cpistack::BASE }
    }

    /// The cycle the next instruction enters: `width` a cycle, once the one `len` before it
    /// has left.
    fn enter(&mut self, width: u32) -> Cycle {
        if self.enter_n >= width {
            self.enter_t += 1;
            self.enter_n = 0;
        }
        let free = self.gone[self.k];
        if free > self.enter_t {
            (self.enter_t, self.enter_n) = (free, 0);
        }
        self.enter_n += 1;
        self.enter_t
    }

    /// The instruction that entered last leaves at `t`.
    fn left(&mut self, t: Cycle) {
        self.gone[self.k] = t;
        self.k = (self.k + 1) % self.gone.len();
    }

    /// The instruction that left last was held until `t` (the window was full).
    fn held(&mut self, t: Cycle) {
        let n = self.gone.len();
        let last = &mut self.gone[(self.k + n - 1) % n];
        *last = (*last).max(t);
    }

    /// Fetch restarts at `t` (a redirect): nothing enters before.
    fn restart(&mut self, t: Cycle) {
        if t > self.enter_t {
            (self.enter_t, self.enter_n) = (t, 0);
        }
    }
}
