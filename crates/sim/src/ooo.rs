//! The out-of-order core: a dependence-driven window model in the spirit of interval
//! simulation. Each instruction, in program order, is fetched (fetch width, L1I, I-TLB,
//! branch mispredictions), dispatched when a ROB (and for memory ops an LSQ) entry frees,
//! issued when its source registers are ready and an issue slot is free, executed (memory
//! accesses go through the L1D, D-TLB and the secure engine's L2), and committed in order at
//! the commit width. Misses overlap as far as the window and dependencies allow. A barrier
//! (crypto/sign) instruction commits only when every pending integrity check has passed.

use crate::bpred::Gshare;
use crate::pagemap::PageMap;
use secmem_core::stats::{ratio, Stats};
use secmem_core::{AccessKind, ConfigError, Engine, IntegrityError, Params};
use secmem_timing::{Cycle, Tags};
use secmem_trace::{Branch, Instr, OpClass};

/// Cycles between fetch and dispatch (decode/rename).
const FRONTEND_DEPTH: Cycle = 3;
const CAL: usize = 1 << 12;

#[derive(Debug)]
pub enum StepError {
    Integrity(IntegrityError),
    OutOfMemory(u64),
}

impl From<IntegrityError> for StepError {
    fn from(e: IntegrityError) -> Self {
        StepError::Integrity(e)
    }
}

struct L1 {
    tags: Tags,
    ready: Vec<Cycle>,
    latency: Cycle,
    accesses: u64,
    misses: u64,
}

impl L1 {
    fn new(p: &Params, name: &str) -> Result<L1, ConfigError> {
        let tags = Tags::new(
            p.size(&format!("{}.size", name))?,
            p.u64_min(&format!("{}.ways", name), 1)? as usize,
            p.size(&format!("{}.line", name))?,
        )
        .map_err(|e| ConfigError(format!("{}: {}", name, e)))?;
        let n = tags.slots();
        Ok(L1 { tags, ready: vec![0; n], latency: p.u64_min(&format!("{}.latency", name), 1)?, accesses: 0, misses: 0 })
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
}

pub struct Core {
    fetch_width: u32,
    issue_width: u8,
    commit_width: u32,
    penalty: Cycle,
    lat: [Cycle; 8],
    tlb_miss: Cycle,
    l1i: L1,
    l1d: L1,
    itlb: Tags,
    dtlb: Tags,
    bp: Gshare,
    reg_ready: [Cycle; 256],
    rob: Vec<Cycle>,
    rob_i: usize,
    lsq: Vec<Cycle>,
    lsq_i: usize,
    fetch_t: Cycle,
    fetch_n: u32,
    fetch_line: u64,
    cal_cycle: Vec<Cycle>,
    cal_count: Vec<u8>,
    commit_t: Cycle,
    commit_n: u32,
    pub pm: PageMap,
    line: u64,
    buf: Vec<u8>,
    // statistics
    pub instructions: u64,
    loads: u64,
    stores: u64,
    branches: u64,
    itlb_misses: u64,
    dtlb_misses: u64,
    barriers: u64,
    barrier_stall: u64,
    rob_stall: u64,
    pub value_mismatches: u64,
    external_bytes: u64,
}

impl Core {
    pub fn new(p: &Params, engine: &Engine) -> Result<Core, ConfigError> {
        let w = |k: &str| p.u64_min(k, 1);
        let rob = w("core.rob_size")? as usize;
        let lsq = w("core.lsq_size")? as usize;
        let issue = w("core.issue_width")?;
        if issue > 255 {
            return Err(ConfigError(format!("core.issue_width: {} is more than 255", issue)));
        }
        let page = p.size("tlb.page")?;
        let entries = w("tlb.entries")?;
        let tlb = || {
            Tags::new(entries * page, p.u64_min("tlb.ways", 1)? as usize, page)
                .map_err(|e| ConfigError(format!("tlb: {}", e)))
        };
        let bits = p.u64_min("core.branch_predictor_bits", 1)?;
        if bits > 24 {
            return Err(ConfigError(format!("core.branch_predictor_bits: {} is more than 24", bits)));
        }
        let mut lat = [1; 8];
        lat[OpClass::Mul as usize] = w("core.mul_latency")?;
        lat[OpClass::Div as usize] = w("core.div_latency")?;
        lat[OpClass::Fp as usize] = w("core.fp_latency")?;
        lat[OpClass::FpDiv as usize] = w("core.fpdiv_latency")?;
        let l1i = L1::new(p, "l1i")?;
        let l1d = L1::new(p, "l1d")?;
        if l1d.tags.line_bytes() > engine.line() || l1i.tags.line_bytes() > engine.line() {
            return Err(ConfigError("l1 line size must not exceed the l2 line size (inclusion)".into()));
        }
        Ok(Core {
            fetch_width: w("core.fetch_width")? as u32,
            issue_width: issue as u8,
            commit_width: w("core.commit_width")? as u32,
            penalty: p.u64_min("core.mispredict_penalty", 0)?,
            lat,
            tlb_miss: p.u64_min("tlb.miss_latency", 0)?,
            l1i,
            l1d,
            itlb: tlb()?,
            dtlb: tlb()?,
            bp: Gshare::new(bits as u32),
            reg_ready: [0; 256],
            rob: vec![0; rob],
            rob_i: 0,
            lsq: vec![0; lsq],
            lsq_i: 0,
            fetch_t: 0,
            fetch_n: 0,
            fetch_line: u64::MAX,
            cal_cycle: vec![u64::MAX; CAL],
            cal_count: vec![0; CAL],
            commit_t: 0,
            commit_n: 0,
            pm: PageMap::new(engine.data_size(), page),
            line: engine.line(),
            buf: Vec::new(),
            instructions: 0,
            loads: 0,
            stores: 0,
            branches: 0,
            itlb_misses: 0,
            dtlb_misses: 0,
            barriers: 0,
            barrier_stall: 0,
            rob_stall: 0,
            value_mismatches: 0,
            external_bytes: 0,
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

    pub fn reset_stats(&mut self) {
        self.instructions = 0;
        (self.loads, self.stores, self.branches, self.barriers) = (0, 0, 0, 0);
        (self.itlb_misses, self.dtlb_misses, self.barrier_stall, self.rob_stall) = (0, 0, 0, 0);
        (self.value_mismatches, self.external_bytes) = (0, 0);
        (self.l1i.accesses, self.l1i.misses, self.l1d.accesses, self.l1d.misses) = (0, 0, 0, 0);
        (self.bp.lookups, self.bp.misses) = (0, 0);
    }

    #[inline]
    fn translate(&mut self, va: u64) -> Result<u64, StepError> {
        self.pm.translate(va).ok_or(StepError::OutOfMemory(va))
    }

    /// Keep the L1s inside the L2 (inclusion): drop copies of lines the L2 let go.
    #[inline]
    fn back_invalidate(&mut self, eng: &mut Engine) {
        let line = self.line;
        let (l1i, l1d) = (&mut self.l1i, &mut self.l1d);
        eng.take_evicted_data(|a| {
            l1d.invalidate_range(a, line);
            l1i.invalidate_range(a, line);
        });
    }

    #[inline]
    fn tlb(tlb: &mut Tags, va: u64, misses: &mut u64, penalty: Cycle) -> Cycle {
        if tlb.access(va).1 {
            0
        } else {
            *misses += 1;
            penalty
        }
    }

    /// An access to physical line `pa` through an L1 at cycle `t`; returns when data is ready
    /// and whether the L2 was involved (then the caller settles the engine after its byte
    /// operation, see `Engine::settle`).
    #[inline]
    fn l1_access(&mut self, kind: AccessKind, pa: u64, t: Cycle, eng: &mut Engine) -> Result<(Cycle, bool), StepError> {
        let data = kind != AccessKind::Fetch;
        let l1 = if data { &mut self.l1d } else { &mut self.l1i };
        l1.accesses += 1;
        if let Some(s) = l1.tags.find(pa) {
            l1.tags.touch(s);
            // Inclusion: the L2 holds this line, so the byte operation finds it there.
            return Ok(((t + l1.latency).max(l1.ready[s as usize]), false));
        }
        l1.misses += 1;
        let lat = l1.latency;
        let o = eng.access(pa, kind, t + lat)?;
        let l1 = if data { &mut self.l1d } else { &mut self.l1i };
        let v = l1.tags.victim(pa);
        l1.tags.install(v, pa);
        l1.ready[v as usize] = o.ready;
        Ok((o.ready, true))
    }

    /// Let the engine write back what the last L2 access displaced, keeping the L1s inside
    /// the L2; returns when the write buffer took it all.
    #[inline]
    fn settle(&mut self, eng: &mut Engine) -> Result<Cycle, StepError> {
        let accepted = eng.settle()?;
        self.back_invalidate(eng);
        Ok(accepted)
    }

    #[inline]
    fn issue_at(&mut self, ready: Cycle) -> Cycle {
        let mut c = ready;
        loop {
            let i = (c as usize) & (CAL - 1);
            if self.cal_cycle[i] != c {
                self.cal_cycle[i] = c;
                self.cal_count[i] = 1;
                return c;
            }
            if self.cal_count[i] < self.issue_width {
                self.cal_count[i] += 1;
                return c;
            }
            c += 1;
        }
    }

    /// Give the engine's schemes their timed events; the front end waits for them.
    pub fn poll(&mut self, eng: &mut Engine, instructions: u64) -> Result<(), IntegrityError> {
        let now = self.now();
        let until = eng.poll(now, instructions)?;
        self.back_invalidate(eng);
        if until > self.fetch_t {
            self.fetch_t = until;
            self.fetch_n = 0;
        }
        Ok(())
    }

    /// Memory written by the environment (loader, kernel, or memory a trace never saw
    /// written): applied through the engine at the current time, and the front end waits
    /// until these writes are done (as for a blocking store miss), not for every other
    /// resource to go idle — memory that was simply there before must not serialize the
    /// program behind unrelated write-backs.
    pub fn external(&mut self, ins: &Instr, eng: &mut Engine) -> Result<(), StepError> {
        let t = self.now();
        let mut done = t;
        for a in &ins.accesses {
            let val = ins.value(a);
            let mut off = 0u64;
            while off < a.size as u64 {
                let va = a.addr + off;
                let n = (4096 - (va & 4095)).min(a.size as u64 - off);
                let pa = self.translate(va)?;
                done = done.max(eng.write(pa, &val[off as usize..(off + n) as usize], t)?);
                off += n;
            }
            self.external_bytes += a.size as u64;
        }
        self.back_invalidate(eng);
        self.fetch_t = self.fetch_t.max(done);
        Ok(())
    }

    /// Time one instruction, performing its loads and stores on the engine.
    pub fn step(&mut self, ins: &Instr, eng: &mut Engine) -> Result<(), StepError> {
        self.instructions += 1;
        // Fetch.
        let iline = ins.pc / self.l1i.tags.line_bytes();
        if iline != self.fetch_line {
            self.fetch_line = iline;
            let mut t = self.fetch_t;
            t += Self::tlb(&mut self.itlb, ins.pc, &mut self.itlb_misses, self.tlb_miss);
            let pa = self.translate(ins.pc)?;
            let (mut ready, l2) = self.l1_access(AccessKind::Fetch, pa, t, eng)?;
            if l2 {
                ready = ready.max(self.settle(eng)?);
            }
            // The L1 hit latency is pipelined away; only misses hold fetch.
            let hit_time = t + self.l1i.latency;
            if ready > hit_time {
                self.fetch_t = ready - self.l1i.latency;
                self.fetch_n = 0;
            }
        }
        if self.fetch_n >= self.fetch_width {
            self.fetch_t += 1;
            self.fetch_n = 0;
        }
        self.fetch_n += 1;
        let fetched = self.fetch_t;

        // Dispatch: needs a ROB entry (and an LSQ entry for memory operations).
        let is_mem = !ins.accesses.is_empty();
        let mut dispatch = (fetched + FRONTEND_DEPTH).max(self.rob[self.rob_i]);
        if is_mem {
            dispatch = dispatch.max(self.lsq[self.lsq_i]);
        }
        if dispatch > fetched + FRONTEND_DEPTH {
            // Window full: the front end stalls with it.
            self.rob_stall += dispatch - fetched - FRONTEND_DEPTH;
            self.fetch_t = dispatch - FRONTEND_DEPTH;
            self.fetch_n = 1;
        }

        let mut ready = dispatch;
        for &r in ins.srcs() {
            ready = ready.max(self.reg_ready[r as usize]);
        }
        let issue = self.issue_at(ready);
        let mut done = issue + self.lat[ins.op as usize];

        // Memory accesses.
        for a in &ins.accesses {
            let val = ins.value(a);
            let mut off = 0u64;
            while off < a.size as u64 {
                let va = a.addr + off;
                // Split at L1-line (hence page and L2-line) boundaries.
                let l1b = self.l1d.tags.line_bytes();
                let n = (l1b - (va & (l1b - 1))).min(a.size as u64 - off);
                let t0 = issue + 1 + Self::tlb(&mut self.dtlb, va, &mut self.dtlb_misses, self.tlb_miss);
                let pa = self.translate(va)?;
                let kind = if a.store { AccessKind::Store } else { AccessKind::Load };
                let (mut t, l2) = self.l1_access(kind, pa, t0, eng)?;
                let bytes = &val[off as usize..(off + n) as usize];
                if a.store {
                    eng.write_cached(pa, bytes);
                } else {
                    self.buf.resize(n as usize, 0);
                    eng.read_cached(pa, &mut self.buf);
                    if !secmem_core::mem::same_bytes(&self.buf, bytes) {
                        self.value_mismatches += 1;
                    }
                }
                eng.track_values(pa, n as usize);
                if l2 {
                    t = t.max(self.settle(eng)?);
                }
                if !a.store {
                    // Loads wait for their data; stores retire from the store buffer.
                    done = done.max(t);
                }
                off += n;
            }
            if a.store {
                self.stores += 1;
            } else {
                self.loads += 1;
            }
        }

        if ins.branch != Branch::None {
            self.branches += 1;
            if !self.bp.predict(ins.pc, ins.branch == Branch::Taken) {
                let resume = done + self.penalty;
                if resume > self.fetch_t {
                    self.fetch_t = resume;
                    self.fetch_n = 0;
                }
            }
        }
        for &r in ins.dsts() {
            self.reg_ready[r as usize] = done;
        }

        // Commit in order, commit_width per cycle.
        let mut c = done.max(self.commit_t);
        if ins.op == OpClass::Barrier {
            self.barriers += 1;
            let checks = eng.barrier(c)?;
            self.back_invalidate(eng);
            if checks > c {
                self.barrier_stall += checks - c;
                c = checks;
            }
        }
        if c == self.commit_t {
            if self.commit_n >= self.commit_width {
                c += 1;
                self.commit_t = c;
                self.commit_n = 0;
            }
        } else {
            self.commit_t = c;
            self.commit_n = 0;
        }
        self.commit_n += 1;
        self.rob[self.rob_i] = c;
        self.rob_i = if self.rob_i + 1 == self.rob.len() { 0 } else { self.rob_i + 1 };
        if is_mem {
            self.lsq[self.lsq_i] = c;
            self.lsq_i = if self.lsq_i + 1 == self.lsq.len() { 0 } else { self.lsq_i + 1 };
        }
        Ok(())
    }

    pub fn stats(&self, out: &mut Stats) {
        out.int("core.loads", self.loads);
        out.int("core.stores", self.stores);
        out.int("core.branches", self.branches);
        out.float("core.branch_mispredict_rate", ratio(self.bp.misses, self.bp.lookups));
        out.int("core.rob_full_stall_cycles", self.rob_stall);
        out.int("core.barriers", self.barriers);
        out.int("core.barrier_stall_cycles", self.barrier_stall);
        out.int("l1i.accesses", self.l1i.accesses);
        out.float("l1i.miss_rate", ratio(self.l1i.misses, self.l1i.accesses));
        out.int("l1d.accesses", self.l1d.accesses);
        out.float("l1d.miss_rate", ratio(self.l1d.misses, self.l1d.accesses));
        out.int("tlb.itlb_misses", self.itlb_misses);
        out.int("tlb.dtlb_misses", self.dtlb_misses);
        out.int("trace.value_mismatches", self.value_mismatches);
        out.int("trace.external_bytes", self.external_bytes);
        out.int("mem.pages_mapped", self.pm.pages());
    }
}
