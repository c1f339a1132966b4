//! The store queue: stores wait here from dispatch until they are written to the L1 at
//! commit, and younger loads to their bytes are served from here.
//!
//! Forwarding follows gem5's LSQ (and SimpleScalar's): a load whose bytes are all held by the
//! youngest older store overlapping it takes them from that store; a load that overlaps a
//! store only partly cannot be assembled from the queue and reads the cache once that store
//! has been written there. ChampSim (no access sizes) forwards on equal addresses, which is
//! the full-overlap case.
//!
//! When may a load go before older stores whose addresses or data are not known yet? That is
//! `core.memory_dependence`:
//! - `none`: loads never wait and nothing is forwarded (secmem before this module);
//! - `conservative`: a load waits until every older store has executed (SimpleScalar's
//!   sim-outorder: loads issue once all earlier store addresses are known);
//! - `store_sets`: the store-set predictor of Chrysos & Emer (ISCA 1998): loads go early
//!   unless a store they once conflicted with is in flight; a wrong guess (the load read
//!   the cache before an older store to its bytes executed) squashes it and the younger
//!   instructions, and puts load and store in one set;
//! - `oracle`: a load waits for exactly the stores it depends on (ChampSim, which reads
//!   every address from the trace at dispatch).
//!
//! Two of ChampSim's rules (src/ooo_cpu.cc, 2ff25011) are declared apart, off in the seeds'
//! machines: `core.sq_lookup = dispatch` looks the queue up when the load is dispatched
//! (`do_memory_scheduling`), so a store still queued then forwards even if it has left by
//! the time the load issues; `core.stores_in_order` lets a store finish (its data forwarded,
//! its instruction complete) only once every older store has (`operate_lsq` finishes stores
//! from the oldest unfinished one, `get_span_p`, and stops at the first not executed).

use secmem_core::stats::Stats;
use secmem_core::{ConfigError, Params};
use secmem_timing::Cycle;

pub const POLICIES: &[&str] = &["none", "conservative", "store_sets", "oracle"];
pub const LOOKUPS: &[&str] = &["issue", "dispatch"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    None,
    Conservative,
    StoreSets,
    Oracle,
}

/// What a load's bytes depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadDep {
    /// No older store in flight overlaps: read the cache from `at` (after any predicted wait).
    Cache { at: Cycle, waited: bool },
    /// An older store holds every byte: forwarded, usable at `ready`.
    Forward { ready: Cycle, waited: bool },
    /// An older store holds some of the bytes: read the cache once it is written, at `at`.
    Partial { at: Cycle },
    /// The load read the cache before an older store to its bytes executed at `store_done`:
    /// it and every younger instruction are squashed; its data is forwarded at `ready`.
    Violation { ready: Cycle, store_done: Cycle },
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    pc: u64,
    addr: u64,
    end: u64,
    /// When the store has executed (address and data known).
    done: Cycle,
    /// When it leaves the queue (written to the L1 at commit); MAX until it commits.
    leave: Cycle,
}

/// Counting filter over 8-byte words: how many stores in the ring touch each hash bucket. A
/// zero for every word of a load proves no store overlaps it, without a scan.
const FILTER: usize = 1 << 12;
const SSIT: usize = 1 << 10;
const LFST: usize = 1 << 7;

#[inline]
fn bucket(word: u64) -> usize {
    (word ^ (word >> 12)) as usize & (FILTER - 1)
}

pub struct StoreQueue {
    policy: Policy,
    fwd_latency: Cycle,
    /// `core.sq_lookup = dispatch`: a load finds the stores queued when it was dispatched.
    at_dispatch: bool,
    /// `core.stores_in_order`: a store finishes no earlier than the store before it.
    in_order: bool,
    ring: Vec<Entry>,
    /// Stores pushed so far; the ring holds the last `ring.len()`.
    pushed: u64,
    /// Stores pushed that have not committed yet.
    uncommitted: u64,
    filter: Vec<u16>,
    /// Latest execution time of any store (conservative; with `in_order`, the last store's).
    last_done: Cycle,
    /// Store-set id of a pc (0: none), and the last store of each set (its `pushed` index + 1).
    ssit: Vec<u16>,
    lfst: Vec<u64>,
    next_set: u16,
    pub forwarded: u64,
    pub partial: u64,
    pub waited: u64,
    pub violations: u64,
}

impl StoreQueue {
    /// A queue remembering the last `entries` stores (the store queue, or the unified LSQ).
    pub fn new(p: &Params, entries: usize) -> Result<StoreQueue, ConfigError> {
        let policy = match p.choice("core.memory_dependence", POLICIES)?.as_str() {
            "none" => Policy::None,
            "conservative" => Policy::Conservative,
            "store_sets" => Policy::StoreSets,
            _ => Policy::Oracle,
        };
        Ok(StoreQueue {
            policy,
            fwd_latency: p.u64_min("core.forward_latency", 0)?,
            at_dispatch: p.choice("core.sq_lookup", LOOKUPS)? == "dispatch",
            in_order: p.bool("core.stores_in_order")?,
            ring: vec![Entry { pc: 0, addr: 0, end: 0, done: 0, leave: 0 }; entries.max(1)],
            pushed: 0,
            uncommitted: 0,
            filter: vec![0; FILTER],
            last_done: 0,
            ssit: vec![0; SSIT],
            lfst: vec![0; LFST],
            next_set: 0,
            forwarded: 0,
            partial: 0,
            waited: 0,
            violations: 0,
        })
    }

    /// Whether stores finish in program order (`core.stores_in_order`).
    #[inline]
    pub fn in_order(&self) -> bool {
        self.in_order
    }

    /// Whether stores are tracked at all.
    #[inline]
    pub fn active(&self) -> bool {
        self.policy != Policy::None
    }

    #[inline]
    fn words(addr: u64, end: u64) -> std::ops::Range<u64> {
        addr >> 3..(end + 7) >> 3
    }

    /// When a store that could finish at `t` does: with `core.stores_in_order` not before the
    /// store before it (ChampSim's `operate_lsq`). Its store port is taken from then on.
    #[inline]
    pub fn finish_at(&self, t: Cycle) -> Cycle {
        if self.in_order {
            t.max(self.last_done)
        } else {
            t
        }
    }

    /// A store of `[addr, addr + n)` by the instruction at `pc`, executed at `done`.
    #[inline]
    pub fn store(&mut self, pc: u64, addr: u64, n: u64, done: Cycle) {
        self.last_done = self.last_done.max(done);
        if self.policy == Policy::None {
            return;
        }
        let cap = self.ring.len() as u64;
        let i = (self.pushed % cap) as usize;
        if self.pushed >= cap {
            let old = self.ring[i];
            for w in Self::words(old.addr, old.end) {
                self.filter[bucket(w)] -= 1;
            }
        }
        let end = addr + n;
        for w in Self::words(addr, end) {
            self.filter[bucket(w)] += 1;
        }
        self.ring[i] = Entry { pc, addr, end, done, leave: Cycle::MAX };
        self.pushed += 1;
        self.uncommitted += 1;
        if self.policy == Policy::StoreSets {
            let set = self.ssit[Self::pc_slot(pc)];
            if set != 0 {
                self.lfst[set as usize % LFST] = self.pushed;
            }
        }
    }

    /// The stores pushed since the last call belong to an instruction that commits at `c`:
    /// they are written to the L1 and leave the queue then.
    #[inline]
    pub fn commit(&mut self, c: Cycle) {
        let cap = self.ring.len() as u64;
        while self.uncommitted > 0 {
            let k = self.pushed - self.uncommitted;
            self.uncommitted -= 1;
            if self.pushed - k <= cap {
                self.ring[(k % cap) as usize].leave = c;
            }
        }
    }

    #[inline]
    fn pc_slot(pc: u64) -> usize {
        ((pc >> 2) ^ (pc >> 12)) as usize & (SSIT - 1)
    }

    /// The youngest store still queued at `t` that overlaps `[addr, end)`.
    #[inline]
    fn youngest_overlapping(&self, addr: u64, end: u64, t: Cycle) -> Option<Entry> {
        if Self::words(addr, end).all(|w| self.filter[bucket(w)] == 0) {
            return None;
        }
        let cap = self.ring.len() as u64;
        let oldest = self.pushed.saturating_sub(cap);
        // The instruction's own stores come after its loads.
        let mut k = self.pushed - self.uncommitted;
        while k > oldest {
            k -= 1;
            let e = self.ring[(k % cap) as usize];
            if e.leave <= t {
                // Stores leave in order: every older one has left too.
                return None;
            }
            if e.addr < end && addr < e.end {
                return Some(e);
            }
        }
        None
    }

    /// A load of `[addr, addr + n)` by the instruction at `pc`, dispatched at `dispatched`
    /// and ready to go at `t`.
    #[inline]
    pub fn load(&mut self, pc: u64, addr: u64, n: u64, dispatched: Cycle, t: Cycle) -> LoadDep {
        let end = addr + n;
        let mut at = t;
        if self.policy == Policy::None {
            return LoadDep::Cache { at, waited: false };
        }
        if self.policy == Policy::Conservative && self.last_done > at {
            at = self.last_done;
        }
        let mut predicted = None;
        if self.policy == Policy::StoreSets {
            let set = self.ssit[Self::pc_slot(pc)];
            if set != 0 {
                let last = self.lfst[set as usize % LFST];
                let cap = self.ring.len() as u64;
                if last > 0 && last + cap > self.pushed {
                    let e = self.ring[((last - 1) % cap) as usize];
                    if e.leave > at && e.done > at {
                        predicted = Some(e.done);
                    }
                }
            }
        }
        let dep = self.youngest_overlapping(addr, end, if self.at_dispatch { dispatched } else { at });
        let r = match dep {
            None => {
                let waited = predicted.is_some() || at > t;
                LoadDep::Cache { at: predicted.unwrap_or(at).max(at), waited }
            }
            Some(s) => {
                let go = match predicted {
                    Some(w) => at.max(w),
                    None => at,
                };
                if self.policy == Policy::StoreSets && s.done > go {
                    self.violations += 1;
                    self.train(pc, s.pc);
                    return LoadDep::Violation { ready: s.done + self.fwd_latency, store_done: s.done };
                }
                let full = s.addr <= addr && end <= s.end;
                let waited = s.done > t || at > t;
                if full {
                    self.forwarded += 1;
                    LoadDep::Forward { ready: go.max(s.done) + self.fwd_latency, waited }
                } else {
                    self.partial += 1;
                    LoadDep::Partial { at: go.max(s.leave) }
                }
            }
        };
        if matches!(r, LoadDep::Cache { waited: true, .. } | LoadDep::Forward { waited: true, .. }) {
            self.waited += 1;
        }
        r
    }

    /// The load at `load` ran before the store at `store` it depends on: from now on they
    /// are in one set, so the load waits for that store (Chrysos & Emer's merge rule: a pc
    /// without a set joins the other's; two sets become the smaller id).
    fn train(&mut self, load: u64, store: u64) {
        let (l, s) = (Self::pc_slot(load), Self::pc_slot(store));
        let set = match (self.ssit[l], self.ssit[s]) {
            (0, 0) => {
                self.next_set = self.next_set % (u16::MAX - 1) + 1;
                self.next_set
            }
            (0, b) => b,
            (a, 0) => a,
            (a, b) => a.min(b),
        };
        self.ssit[l] = set;
        self.ssit[s] = set;
    }
}

impl StoreQueue {
    pub fn reset_stats(&mut self) {
        (self.forwarded, self.partial, self.waited, self.violations) = (0, 0, 0, 0);
    }

    pub fn stats(&self, out: &mut Stats) {
        out.int("lsq.forwarded_loads", self.forwarded);
        out.int("lsq.partial_overlap_loads", self.partial);
        out.int("lsq.dependence_waits", self.waited);
        out.int("lsq.order_violations", self.violations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configure;

    fn queue(policy: &str) -> StoreQueue {
        let p = configure("suh2003", None, None, &[format!("core.memory_dependence={}", policy), "core.forward_latency=1".into()]).unwrap();
        StoreQueue::new(&p, 8).unwrap()
    }

    /// One instruction storing `[addr, addr + n)`, executed at `done`, committing at `c`.
    fn st(q: &mut StoreQueue, pc: u64, addr: u64, n: u64, done: Cycle, c: Cycle) {
        q.store(pc, addr, n, done);
        q.commit(c);
    }

    #[test]
    fn a_load_inside_an_older_store_takes_its_bytes() {
        let mut q = queue("oracle");
        st(&mut q, 0x10, 0x1000, 8, 5, 50);
        // Whole word, and a part of it: both held by the store.
        assert_eq!(q.load(0x20, 0x1000, 8, 10, 10), LoadDep::Forward { ready: 11, waited: false });
        assert_eq!(q.load(0x20, 0x1004, 2, 10, 10), LoadDep::Forward { ready: 11, waited: false });
        assert_eq!(q.forwarded, 2);
        // Next to it, or after it was written to the L1 (its commit): the cache.
        assert_eq!(q.load(0x20, 0x1008, 8, 10, 10), LoadDep::Cache { at: 10, waited: false });
        assert_eq!(q.load(0x20, 0x1000, 8, 50, 50), LoadDep::Cache { at: 50, waited: false });
    }

    #[test]
    fn the_youngest_overlapping_store_wins_and_a_partial_overlap_waits_for_the_cache() {
        let mut q = queue("oracle");
        st(&mut q, 0x10, 0x1000, 8, 5, 50);
        st(&mut q, 0x14, 0x1004, 4, 7, 60);
        // Bytes 0..4 come from the first store, 4..8 from the second: no single store has
        // them all, so the load reads the cache once the youngest overlapping one is written.
        assert_eq!(q.load(0x20, 0x1000, 8, 10, 10), LoadDep::Partial { at: 60 });
        assert_eq!(q.load(0x20, 0x1004, 4, 10, 10), LoadDep::Forward { ready: 11, waited: false });
        // A 16-byte load over one 8-byte store: partial too.
        assert_eq!(q.load(0x20, 0x0ff8, 16, 10, 10), LoadDep::Partial { at: 60 });
        assert_eq!(q.partial, 2);
    }

    #[test]
    fn an_oracle_load_waits_for_the_stores_data_and_conservative_for_every_older_store() {
        let mut q = queue("oracle");
        st(&mut q, 0x10, 0x1000, 8, 40, 90);
        st(&mut q, 0x14, 0x2000, 8, 70, 95);
        assert_eq!(q.load(0x20, 0x1000, 8, 10, 10), LoadDep::Forward { ready: 41, waited: true });
        assert_eq!(q.load(0x20, 0x3000, 8, 10, 10), LoadDep::Cache { at: 10, waited: false });
        let mut c = queue("conservative");
        st(&mut c, 0x10, 0x1000, 8, 40, 90);
        st(&mut c, 0x14, 0x2000, 8, 70, 95);
        // Unrelated to either store, but it cannot know that until both have executed.
        assert_eq!(c.load(0x20, 0x3000, 8, 10, 10), LoadDep::Cache { at: 70, waited: true });
        assert_eq!(c.load(0x20, 0x1000, 8, 10, 10), LoadDep::Forward { ready: 71, waited: true });
        // none: no forwarding, no waiting.
        let mut n = queue("none");
        st(&mut n, 0x10, 0x1000, 8, 40, 90);
        assert_eq!(n.load(0x20, 0x1000, 8, 10, 10), LoadDep::Cache { at: 10, waited: false });
    }

    #[test]
    fn looked_up_at_dispatch_a_store_that_left_before_the_load_issued_still_forwards() {
        // The store executes at 5 and leaves the queue at 50; the load is dispatched at 40
        // and issues at 60 (ChampSim's do_memory_scheduling matches it at dispatch).
        let mut at_issue = queue("oracle");
        st(&mut at_issue, 0x10, 0x1000, 8, 5, 50);
        assert_eq!(at_issue.load(0x20, 0x1000, 8, 40, 60), LoadDep::Cache { at: 60, waited: false });
        let p = configure("suh2003", None, None, &["core.memory_dependence=oracle".into(), "core.forward_latency=1".into(), "core.sq_lookup=dispatch".into()]).unwrap();
        let mut q = StoreQueue::new(&p, 8).unwrap();
        st(&mut q, 0x10, 0x1000, 8, 5, 50);
        assert_eq!(q.load(0x20, 0x1000, 8, 40, 60), LoadDep::Forward { ready: 61, waited: false });
        // Dispatched after it left: the cache.
        assert_eq!(q.load(0x20, 0x1000, 8, 50, 60), LoadDep::Cache { at: 60, waited: false });
    }

    #[test]
    fn in_program_order_a_store_finishes_after_every_older_one() {
        let p = configure("suh2003", None, None, &["core.memory_dependence=oracle".into(), "core.stores_in_order=true".into()]).unwrap();
        let mut q = StoreQueue::new(&p, 8).unwrap();
        assert_eq!(q.finish_at(3), 3);
        // An older store waits for its data until 40: a younger one ready at 10 finishes then.
        let t = q.finish_at(40);
        st(&mut q, 0x10, 0x1000, 8, t, 90);
        let t = q.finish_at(10);
        assert_eq!(t, 40);
        st(&mut q, 0x14, 0x2000, 8, t, 95);
        // A load of the younger store's bytes gets them when it finished.
        assert_eq!(q.load(0x20, 0x2000, 8, 12, 12), LoadDep::Forward { ready: 41, waited: true });
        assert_eq!(q.finish_at(50), 50);
        // Not in order (the default): each at its own time.
        let mut free = queue("oracle");
        free.store(0x10, 0x1000, 8, 40);
        assert_eq!(free.finish_at(10), 10);
    }

    #[test]
    fn store_sets_learn_from_a_violation_and_make_the_load_wait_next_time() {
        let mut q = queue("store_sets");
        st(&mut q, 0x10, 0x1000, 8, 40, 90);
        // The load goes early, before the store executed: squashed and replayed.
        assert_eq!(q.load(0x20, 0x1000, 8, 10, 10), LoadDep::Violation { ready: 41, store_done: 40 });
        assert_eq!(q.violations, 1);
        // Same pair again: now predicted, the load waits for the store and takes its data.
        st(&mut q, 0x10, 0x1000, 8, 140, 190);
        assert_eq!(q.load(0x20, 0x1000, 8, 110, 110), LoadDep::Forward { ready: 141, waited: true });
        // The predictor waits for the set's last store even when the address differs.
        st(&mut q, 0x10, 0x5000, 8, 240, 290);
        assert_eq!(q.load(0x20, 0x6000, 8, 210, 210), LoadDep::Cache { at: 240, waited: true });
        // Another load pc is not in the set: it goes early (no conflict, no violation).
        assert_eq!(q.load(0x30, 0x6000, 8, 210, 210), LoadDep::Cache { at: 210, waited: false });
        assert_eq!(q.violations, 1);
    }

    #[test]
    fn stores_beyond_the_queue_are_forgotten_and_an_instructions_own_store_is_not_seen() {
        let mut q = queue("oracle");
        st(&mut q, 0x10, 0x1000, 8, 5, 500);
        for k in 0..8 {
            st(&mut q, 0x14, 0x2000 + 64 * k, 8, 5, 500);
        }
        // Nine stores into eight entries: the first has left the queue.
        assert_eq!(q.load(0x20, 0x1000, 8, 10, 10), LoadDep::Cache { at: 10, waited: false });
        // A store of the instruction doing the load (not committed yet) does not forward.
        q.store(0x30, 0x3000, 8, 5);
        assert_eq!(q.load(0x30, 0x3000, 8, 10, 10), LoadDep::Cache { at: 10, waited: false });
        q.commit(20);
        assert_eq!(q.load(0x40, 0x3000, 8, 10, 10), LoadDep::Forward { ready: 11, waited: false });
    }
}
