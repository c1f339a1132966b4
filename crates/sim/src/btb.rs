//! Branch targets (`[btb]`): ChampSim's default `basic_btb` (btb/basic_btb in its
//! repository, master 2ff2501) — a set-associative BTB for every branch but returns, a return
//! stack, and an indirect-target predictor indexed by pc ⊕ the recent conditional outcomes.
//! With it a branch is mispredicted the way ChampSim's `O3_CPU::do_predict_branch` decides:
//! the predicted target (none when predicted not taken or when the BTB misses) differs from
//! the real one (none when not taken), or a conditional branch went the other way.
//!
//! A taken branch's target is the next instruction's pc, so a branch is resolved when the
//! next instruction arrives (`Pending`), as ChampSim's trace reader sets `branch_target`.
//! `btb.sets = 0` (the seeds' machines, which had no BTB): no targets are predicted and a
//! branch is mispredicted only when its direction is.

use secmem_core::stats::Stats;
use secmem_core::{ConfigError, Params};
use secmem_trace::champsim::{BranchType, NumberingGuess};
use secmem_trace::{Branch, Record};
use std::collections::VecDeque;

/// ChampSim's `direct_predictor::branch_info`: how a hit's target is predicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Info {
    Indirect,
    Return,
    AlwaysTaken,
    Conditional,
}

impl Info {
    fn of(ty: BranchType) -> Info {
        match ty {
            BranchType::Indirect | BranchType::IndirectCall => Info::Indirect,
            BranchType::Return => Info::Return,
            BranchType::Conditional => Info::Conditional,
            BranchType::DirectJump | BranchType::DirectCall => Info::AlwaysTaken,
        }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    /// pc >> 2 (ChampSim's index and tag alike).
    tag: u64,
    target: u64,
    info: Info,
    /// 0: invalid; otherwise the access count when last used (`msl::lru_table`).
    used: u64,
}

/// A branch waiting for the next instruction, which says where it went.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub pc: u64,
    pub ty: BranchType,
    pub taken: bool,
    /// The direction predictor's guess (taken), made when the branch was fetched.
    pub predicted_taken: bool,
    /// Cycles (detailed timing): when it was fetched and when it executed.
    pub fetched: u64,
    pub done: u64,
}

/// Where a mispredicted branch is found out: ChampSim resumes fetch after decode for direct
/// jumps and calls and for conditional branches whose direction was right (their target is
/// known there), after execution for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Decode,
    Execute,
}

/// Return stack: ChampSim's `return_stack` (64 calls; a return's target is its call's pc
/// plus that call's size, learned per pc modulo 1024 from earlier returns, 4 until then).
struct ReturnStack {
    stack: VecDeque<u64>,
    max: usize,
    call_size: Vec<u64>,
}

impl ReturnStack {
    const SIZE_TRACKERS: usize = 1024;

    fn prediction(&self) -> u64 {
        match self.stack.back() {
            None => 0,
            Some(&ip) => ip.wrapping_add(self.call_size[ip as usize % Self::SIZE_TRACKERS]),
        }
    }

    fn push(&mut self, ip: u64) {
        self.stack.push_back(ip);
        if self.stack.len() > self.max {
            self.stack.pop_front();
        }
    }

    fn calibrate(&mut self, target: u64) {
        if let Some(ip) = self.stack.pop_back() {
            let size = ip.abs_diff(target);
            if size <= 10 {
                self.call_size[ip as usize % Self::SIZE_TRACKERS] = size;
            }
        }
    }
}

pub struct Btb {
    sets: usize,
    ways: usize,
    table: Vec<Entry>,
    clock: u64,
    ras: ReturnStack,
    /// Indirect targets by (pc >> 2) ⊕ history, modulo their number.
    indirect: Vec<u64>,
    /// The last log2(indirect entries) conditional outcomes (ChampSim's bitset).
    history: u64,
    history_mask: u64,
    /// Traces number registers as x86 (secmem's) or as ChampSim (its traces).
    numbering: NumberingGuess,
    pub pending: Option<Pending>,
    // statistics: by ChampSim branch type
    branches: [u64; 6],
    mispredicts: [u64; 6],
    /// Taken branches whose pc the BTB did not hold.
    btb_misses: u64,
}

impl Btb {
    /// The `[btb]` of `p`: None with `btb.sets = 0`.
    pub fn new(p: &Params) -> Result<Option<Btb>, ConfigError> {
        // Every key is checked even with no BTB: a bad --set is refused, never ignored.
        let sets = p.u64_min("btb.sets", 0)? as usize;
        let ways = p.u64_min("btb.ways", 1)? as usize;
        let ras = p.u64_min("btb.ras_entries", 1)? as usize;
        let indirect = p.u64_min("btb.indirect_entries", 1)? as usize;
        if !indirect.is_power_of_two() {
            return Err(ConfigError(format!("btb.indirect_entries: {} is not a power of two", indirect)));
        }
        if sets == 0 {
            return Ok(None);
        }
        if !sets.is_power_of_two() {
            return Err(ConfigError(format!("btb.sets: {} is not a power of two", sets)));
        }
        Ok(Some(Btb {
            sets,
            ways,
            table: vec![Entry { tag: 0, target: 0, info: Info::AlwaysTaken, used: 0 }; sets * ways],
            clock: 0,
            ras: ReturnStack { stack: VecDeque::with_capacity(ras + 1), max: ras, call_size: vec![4; ReturnStack::SIZE_TRACKERS] },
            indirect: vec![0; indirect],
            history: 0,
            history_mask: indirect as u64 - 1,
            numbering: NumberingGuess::default(),
            pending: None,
            branches: [0; 6],
            mispredicts: [0; 6],
            btb_misses: 0,
        }))
    }

    /// The branch type of `ins` (None: not a branch).
    #[inline]
    pub fn branch_type<R: Record>(&mut self, ins: &R) -> Option<BranchType> {
        if ins.branch() == Branch::None {
            return None;
        }
        BranchType::of(ins, self.numbering.update(ins))
    }

    fn set(&self, pc: u64) -> std::ops::Range<usize> {
        let s = ((pc >> 2) as usize & (self.sets - 1)) * self.ways;
        s..s + self.ways
    }

    /// The entry holding `pc`, its use recorded (`lru_table::check_hit`).
    fn hit(&mut self, pc: u64) -> Option<usize> {
        let tag = pc >> 2;
        let i = self.set(pc).find(|&i| self.table[i].used > 0 && self.table[i].tag == tag)?;
        self.clock += 1;
        self.table[i].used = self.clock;
        Some(i)
    }

    fn indirect_index(&self, pc: u64) -> usize {
        (((pc >> 2) ^ self.history) as usize) & (self.indirect.len() - 1)
    }

    /// The predicted target of the branch at `pc` (0: none) and whether it is taken
    /// regardless of the direction predictor (`basic_btb::btb_prediction`).
    fn predict(&mut self, pc: u64) -> (u64, bool) {
        let Some(i) = self.hit(pc) else { return (0, false) };
        let e = self.table[i];
        match e.info {
            Info::Return => (self.ras.prediction(), true),
            Info::Indirect => (self.indirect[self.indirect_index(pc)], true),
            Info::Conditional => (e.target, false),
            Info::AlwaysTaken => (e.target, true),
        }
    }

    /// Train on the branch at `pc` that went to `target` (0: not taken)
    /// (`basic_btb::update_btb`, `direct_predictor::update`).
    fn update(&mut self, pc: u64, target: u64, taken: bool, ty: BranchType) {
        if matches!(ty, BranchType::DirectCall | BranchType::IndirectCall) {
            self.ras.push(pc);
        }
        if matches!(ty, BranchType::Indirect | BranchType::IndirectCall) {
            let i = self.indirect_index(pc);
            self.indirect[i] = target;
        }
        if ty == BranchType::Conditional {
            self.history = (self.history << 1 | taken as u64) & self.history_mask;
        }
        if ty == BranchType::Return {
            self.ras.calibrate(target);
        }
        let info = Info::of(ty);
        let hit = self.hit(pc);
        if target == 0 {
            return; // a branch not taken is not written (nor its type changed)
        }
        let e = Entry { tag: pc >> 2, target, info, used: 0 };
        let way = hit.unwrap_or_else(|| {
            // An invalid way, else the least recently used.
            self.set(pc).min_by_key(|&i| self.table[i].used).unwrap()
        });
        self.clock += 1;
        self.table[way] = Entry { used: self.clock, ..e };
    }

    /// Resolve the pending branch now that the next instruction is at `next_pc`: whether it
    /// was mispredicted and where that is found out. Trains the BTB, return stack and
    /// indirect predictor; counts (`count`: detailed timing, not warming).
    #[inline]
    pub fn resolve(&mut self, next_pc: u64, count: bool) -> Option<(Pending, Found)> {
        let b = self.pending.take()?;
        let (mut predicted, always) = self.predict(b.pc);
        let predicted_taken = b.predicted_taken || always;
        if !predicted_taken {
            predicted = 0;
        }
        let target = if b.taken { next_pc } else { 0 };
        let conditional = b.ty == BranchType::Conditional;
        let wrong = predicted != target || (conditional && b.taken != predicted_taken);
        if count {
            self.branches[b.ty as usize] += 1;
            self.mispredicts[b.ty as usize] += wrong as u64;
            self.btb_misses += (b.taken && self.set_holds(b.pc).is_none()) as u64;
        }
        self.update(b.pc, target, b.taken, b.ty);
        if !wrong {
            return None;
        }
        let decode = matches!(b.ty, BranchType::DirectJump | BranchType::DirectCall) || (conditional && b.taken == predicted_taken);
        Some((b, if decode { Found::Decode } else { Found::Execute }))
    }

    fn set_holds(&self, pc: u64) -> Option<usize> {
        let tag = pc >> 2;
        self.set(pc).find(|&i| self.table[i].used > 0 && self.table[i].tag == tag)
    }

    /// (branches, mispredicted) over every type.
    pub fn counts(&self) -> (u64, u64) {
        (self.branches.iter().sum(), self.mispredicts.iter().sum())
    }

    pub fn reset_stats(&mut self) {
        (self.branches, self.mispredicts, self.btb_misses) = ([0; 6], [0; 6], 0);
    }

    pub fn stats(&self, out: &mut Stats) {
        for (k, name) in BranchType::NAMES.iter().enumerate() {
            let ty = name.trim_start_matches("BRANCH_").to_lowercase();
            out.int(&format!("branch.{}", ty), self.branches[k]);
            out.int(&format!("branch.{}_mispredicts", ty), self.mispredicts[k]);
        }
        out.int("btb.misses", self.btb_misses);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secmem_trace::{Instr, OpClass};

    fn btb() -> Btb {
        let mut p = crate::presets::load("champsim").unwrap();
        p.set_str("btb.ras_entries=4").unwrap();
        Btb::new(&p).unwrap().expect("the champsim preset has a BTB")
    }

    /// x86 registers as the tracer numbers them: rax 0, rsp 4, flags 16.
    fn branch(pc: u64, taken: bool, srcs: &[u8], dsts: &[u8], load: bool, store: bool) -> Instr {
        let mut i = Instr { pc, len: 2, op: OpClass::Branch, branch: if taken { Branch::Taken } else { Branch::NotTaken }, ..Default::default() };
        srcs.iter().for_each(|&r| i.add_src(r));
        dsts.iter().for_each(|&r| i.add_dst(r));
        if load {
            i.add_access(false, 0x7ff0, &[0; 8]);
        }
        if store {
            i.add_access(true, 0x7ff0, &[0; 8]);
        }
        i
    }

    /// Run `ins` to `next_pc`, the direction predicted as `dir`: the misprediction, if any.
    fn run(b: &mut Btb, ins: &Instr, dir: bool, next_pc: u64) -> Option<Found> {
        let ty = b.branch_type(ins).unwrap();
        b.pending = Some(Pending { pc: ins.pc, ty, taken: ins.branch == Branch::Taken, predicted_taken: dir, fetched: 0, done: 0 });
        b.resolve(next_pc, true).map(|(_, f)| f)
    }

    #[test]
    fn a_first_jump_misses_the_btb_and_is_found_at_decode_then_hits() {
        let mut b = btb();
        let jmp = branch(0x401000, true, &[], &[], false, false);
        assert_eq!(run(&mut b, &jmp, false, 0x402000), Some(Found::Decode));
        assert_eq!(run(&mut b, &jmp, false, 0x402000), None, "the BTB now holds the target");
        assert_eq!(b.btb_misses, 1);
        let mut st = Stats::default();
        b.stats(&mut st);
        assert_eq!(st.get_f64("branch.direct_jump"), Some(2.0));
        assert_eq!(st.get_f64("branch.direct_jump_mispredicts"), Some(1.0));
    }

    #[test]
    fn a_first_indirect_jump_misses_and_a_trained_indirect_predictor_hits() {
        let mut b = btb();
        let jmp = branch(0x401000, true, &[0], &[], false, false); // jmp *%rax
        assert_eq!(b.branch_type(&jmp), Some(BranchType::Indirect));
        assert_eq!(run(&mut b, &jmp, true, 0x405000), Some(Found::Execute), "no BTB entry: no target");
        assert_eq!(run(&mut b, &jmp, true, 0x405000), None, "same history, same target");
        // Another target under the same history: mispredicted once, then learned.
        assert_eq!(run(&mut b, &jmp, true, 0x406000), Some(Found::Execute));
        assert_eq!(run(&mut b, &jmp, true, 0x406000), None);
    }

    #[test]
    fn the_indirect_predictor_tells_targets_apart_by_conditional_history() {
        let mut b = btb();
        let jmp = branch(0x401000, true, &[0], &[], false, false);
        let cond = |taken| branch(0x400f00, taken, &[16], &[], false, false);
        // The target follows the last conditional outcome. Once the 12 bits of history have
        // filled, alternating outcomes leave two histories, each with its own target.
        let mut wrong = 0;
        for k in 0..60 {
            let taken = k % 2 == 0;
            run(&mut b, &cond(taken), taken, if taken { 0x400f80 } else { 0x400f02 });
            let miss = run(&mut b, &jmp, true, if taken { 0x405000 } else { 0x406000 }).is_some();
            wrong += (k >= 20 && miss) as u32;
        }
        assert_eq!(wrong, 0, "indirect jumps mispredicted once trained");
    }

    #[test]
    fn returns_go_to_their_calls_through_the_return_stack() {
        let mut b = btb();
        let call = |pc| branch(pc, true, &[4], &[4], false, true);
        let ret = branch(0x409000, true, &[4], &[4], true, false);
        assert_eq!(b.branch_type(&call(0)), Some(BranchType::DirectCall));
        assert_eq!(b.branch_type(&ret), Some(BranchType::Return));
        // First time: neither call nor return is in the BTB.
        assert_eq!(run(&mut b, &call(0x401000), true, 0x409000), Some(Found::Decode));
        assert_eq!(run(&mut b, &ret, true, 0x401005), Some(Found::Execute));
        // The return's entry predicts from the stack: calls from two sites, each returns right
        // (the call size, 5, learned from the first return).
        for site in [0x402000u64, 0x403000] {
            run(&mut b, &call(site), true, 0x409000);
            assert_eq!(run(&mut b, &ret, true, site + 5), None, "return to {:#x}", site);
        }
    }

    #[test]
    fn a_conditional_branch_is_mispredicted_by_direction_or_by_a_missing_target() {
        let mut b = btb();
        let c = |taken| branch(0x401000, taken, &[16], &[], false, false);
        // Not taken, predicted not taken: right, even with no BTB entry.
        assert_eq!(run(&mut b, &c(false), false, 0x401002), None);
        // Taken, direction right but no target yet: found at decode.
        assert_eq!(run(&mut b, &c(true), true, 0x401100), Some(Found::Decode));
        assert_eq!(run(&mut b, &c(true), true, 0x401100), None);
        // The direction wrong: found when it executes.
        assert_eq!(run(&mut b, &c(false), true, 0x401002), Some(Found::Execute));
        assert_eq!(run(&mut b, &c(true), false, 0x401100), Some(Found::Execute));
    }

    #[test]
    fn lru_replacement_within_a_set() {
        let mut b = btb();
        // Nine jumps in one set of eight ways (pcs 4 KiB apart share pc/4 modulo 1024 sets).
        let pcs: Vec<u64> = (0..9).map(|k| 0x400000 + k * 4096).collect();
        for &pc in &pcs[..8] {
            run(&mut b, &branch(pc, true, &[], &[], false, false), false, pc + 64);
        }
        for &pc in &pcs[1..9] {
            run(&mut b, &branch(pc, true, &[], &[], false, false), false, pc + 64);
        }
        // pcs[0] was the least recently used when pcs[8] came: it is gone, the rest hit.
        assert!(run(&mut b, &branch(pcs[0], true, &[], &[], false, false), false, pcs[0] + 64).is_some());
        assert!(run(&mut b, &branch(pcs[8], true, &[], &[], false, false), false, pcs[8] + 64).is_none());
    }

    #[test]
    fn champsim_numbered_records_are_typed_alike() {
        let mut b = btb();
        // ChampSim's ids (the reader drops the instruction pointer): flags 25, stack pointer 6.
        let cond = branch(0x401000, true, &[25], &[], false, false);
        assert_eq!(b.branch_type(&cond), Some(BranchType::Conditional));
        let call = branch(0x401000, true, &[6], &[6], false, true);
        assert_eq!(b.branch_type(&call), Some(BranchType::DirectCall));
        let ret = branch(0x401000, true, &[6], &[6], true, false);
        assert_eq!(b.branch_type(&ret), Some(BranchType::Return));
    }

    #[test]
    fn no_btb_without_sets() {
        let p = crate::presets::load("suh2003").unwrap();
        assert!(Btb::new(&p).unwrap().is_none());
    }
}
