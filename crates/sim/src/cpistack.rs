//! The CPI stack: every cycle of the measured region is given to one cause, so the causes
//! sum to the cycles.
//!
//! Attribution is at commit, as in commit-based CPI stacks (Eyerman et al., "A Performance
//! Counter Architecture for Computing Accurate CPI Components", ASPLOS 2006): the cycles
//! between one commit and the next belong to what the committing instruction was waiting
//! for — the latest of its inputs (its arrival in the window, each source register, each
//! memory access), or the commit width (`base`). A register carries the cause of the value
//! in it, so a chain of instructions behind a DRAM miss is charged to `mem`.

use secmem_core::stats::Stats;
use secmem_timing::Cycle;

pub type Cause = u8;

/// Nothing held the instruction up: it committed as soon as the commit width allowed.
pub const BASE: Cause = 0;
/// Instruction fetch missed in the L1I (served from below).
pub const ICACHE: Cause = 1;
/// A TLB miss: the fixed miss latency, or a page walk.
pub const TLB: Cause = 2;
/// Refetch after a branch misprediction.
pub const BRANCH: Cause = 3;
/// A multi-cycle operation (mul, div, fp).
pub const EXECUTE: Cause = 4;
/// A load waited for an older store (partial overlap, predicted dependence, order violation).
pub const MEMDEP: Cause = 5;
/// Dispatch waited for a free ROB, load/store queue, store queue or register entry.
pub const ROB_FULL: Cause = 6;
pub const LSQ_FULL: Cause = 7;
pub const SQ_FULL: Cause = 8;
pub const REGS_FULL: Cause = 9;
/// A barrier waited for pending integrity checks (003 §4.7).
pub const INTEGRITY: Cause = 10;
/// The front end waited for a scheme's own timed events (MECU suspend/resume, periodic checks).
pub const SCHEME: Cause = 11;
/// Loads served by the data hierarchy: `DATA + depth` (`l1d`, private levels, `l2`, `mem`).
pub const DATA: Cause = 12;

const FIXED: [&str; DATA as usize] = [
    "base",
    "icache",
    "tlb",
    "branch",
    "execute",
    "memdep",
    "rob_full",
    "lsq_full",
    "sq_full",
    "regs_full",
    "integrity",
    "scheme",
];

pub struct CpiStack {
    names: Vec<String>,
    /// Cycles by cause, the first `names.len()` used: one per value of a `Cause`, so that
    /// the commit of every instruction indexes it without a bounds check.
    cycles: Box<[u64; 256]>,
    /// Cycles up to here are attributed.
    last: Cycle,
}

impl CpiStack {
    /// `data_levels`: the data hierarchy's levels by depth (see `Hierarchy::level_names`).
    pub fn new(data_levels: &[String]) -> CpiStack {
        let mut names: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
        names.extend(data_levels.iter().cloned());
        assert!(names.len() <= 256, "more causes than a Cause numbers");
        CpiStack { names, cycles: Box::new([0; 256]), last: 0 }
    }

    /// Start measuring at cycle `t`.
    pub fn start(&mut self, t: Cycle) {
        self.cycles.iter_mut().for_each(|c| *c = 0);
        self.last = t;
    }

    /// An instruction commits at `c`; the cycles since the previous commit were spent on `why`.
    #[inline]
    pub fn commit(&mut self, c: Cycle, why: Cause) {
        // No branch: whether a commit moves time on changes from one to the next.
        debug_assert!((why as usize) < self.names.len(), "cause {} has no name", why);
        let gap = c.saturating_sub(self.last);
        self.cycles[why as usize] += gap;
        self.last += gap;
    }

    pub fn total(&self) -> u64 {
        self.cycles[..self.names.len()].iter().sum()
    }

    /// `cpi.CAUSE`: cycles given to each cause (their sum is `cycles`).
    pub fn stats(&self, out: &mut Stats) {
        for (n, c) in self.names.iter().zip(self.cycles.iter()) {
            out.int(&format!("cpi.{}", n), *c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_between_commits_go_to_the_cause_and_sum_to_the_span() {
        let mut s = CpiStack::new(&["l1d".into(), "l2".into(), "mem".into()]);
        s.start(100);
        s.commit(90, BRANCH); // before the start: nothing
        s.commit(101, BASE);
        s.commit(101, MEMDEP); // same cycle: nothing
        s.commit(300, DATA + 2);
        s.commit(310, BRANCH);
        assert_eq!(s.total(), 210);
        let mut out = Stats::default();
        s.stats(&mut out);
        assert_eq!(out.get_f64("cpi.mem"), Some(199.0));
        assert_eq!(out.get_f64("cpi.branch"), Some(10.0));
        assert_eq!(out.get_f64("cpi.base"), Some(1.0));
    }
}
