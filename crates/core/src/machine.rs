//! What the schemes operate on: untrusted memory behind the timed port, the AES and hash
//! engines, the trusted L2 and the buffers between them. A scheme performs an operation by
//! calling these, and the same call returns when it is done: the functional and timing
//! behaviour of every scheme is one code path.

use crate::cache::{LineKind, TrustedCache};
use crate::layout::Layout;
use crate::port::Port;
use crate::speculation::Speculation;
use secmem_timing::{Cycle, Pipe, Slots};

/// A line leaving the L2, held in the write buffer until its scheme has written it back.
pub struct Victim {
    pub addr: u64,
    pub bytes: Vec<u8>,
    pub dirty: bool,
    pub kind: LineKind,
    pub t: Cycle,
}

#[derive(Default, Clone, Debug)]
pub struct L2Counters {
    pub data_accesses: u64,
    pub data_misses: u64,
    /// (accesses, misses) per `AccessKind`.
    pub kinds: [(u64, u64); 4],
    pub meta_accesses: u64,
    pub meta_misses: u64,
    pub data_writebacks: u64,
    pub meta_writebacks: u64,
    pub evictions: u64,
}

pub struct Machine {
    /// Untrusted memory, reachable only through transfers that are timed.
    pub port: Port,
    /// The speculation stage: on-chip predictors and whether data is used before its check.
    pub spec: Speculation,
    pub aes: Pipe,
    pub hash: Pipe,
    pub l2: TrustedCache,
    pub l2_latency: Cycle,
    pub xor_latency: Cycle,
    pub layout: Layout,
    /// Hash read buffer: a fetched chunk waits here until its check completes (003 Fig. 2a).
    pub read_buf: Slots,
    /// Hash write buffer: an evicted chunk waits here until hashed and written (003 Fig. 2b).
    pub write_buf: Slots,
    /// Latest completion of any integrity check issued so far (barriers wait for it).
    pub checks_done: Cycle,
    /// Whether clean victims are handed to the integrity scheme (lhash logs them).
    pub keep_clean_victims: bool,
    pub counters: L2Counters,
    /// The memory being written predates the trace (what a fast-forwarded program or the
    /// loader built, handed over as external records): a scheme's one-time set-up of it
    /// belongs before the run and is done untimed (`untimed`). Set by `Engine::set_predating`.
    pub predating: bool,
    pending: Vec<Victim>,
    spare: Vec<Vec<u8>>,
    evicted_data: Vec<u64>,
}

impl Machine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        port: Port,
        aes: Pipe,
        hash: Pipe,
        l2: TrustedCache,
        l2_latency: Cycle,
        xor_latency: Cycle,
        layout: Layout,
        read_buf: usize,
        write_buf: usize,
    ) -> Machine {
        Machine {
            port,
            spec: Speculation::none(),
            aes,
            hash,
            l2,
            l2_latency,
            xor_latency,
            layout,
            read_buf: Slots::new(read_buf),
            write_buf: Slots::new(write_buf),
            checks_done: 0,
            keep_clean_victims: false,
            counters: L2Counters::default(),
            predating: false,
            pending: Vec::new(),
            spare: Vec::new(),
            evicted_data: Vec::new(),
        }
    }

    pub fn line(&self) -> u64 {
        self.l2.line() as u64
    }

    /// Run `f` untimed: its memory transfers and crypto operations are performed on the real
    /// bytes but book no time on the bus or the engines (work that happened before the timed
    /// run, such as setting up memory a fast-forwarded program built).
    pub fn untimed<R>(&mut self, f: impl FnOnce(&mut Machine) -> R) -> R {
        // The engines may already be frozen (a sampled run's functional warming): restore.
        let (aes, hash) = (self.aes.frozen(), self.hash.frozen());
        self.port.set_untimed(true);
        self.aes.freeze(true);
        self.hash.freeze(true);
        let r = f(self);
        self.port.set_untimed(false);
        self.aes.freeze(aes);
        self.hash.freeze(hash);
        r
    }

    #[inline]
    pub fn note_check(&mut self, done: Cycle) {
        self.checks_done = self.checks_done.max(done);
    }

    /// The L2 slot holding `addr`'s line: a cache hit, or a line taken back from the write
    /// buffer before it reached memory (memory would be stale). Touches LRU.
    pub fn lookup(&mut self, addr: u64) -> Option<u32> {
        if let Some(s) = self.l2.tags.find(addr) {
            self.l2.tags.touch(s);
            return Some(s);
        }
        let i = self.pending.iter().rposition(|v| v.addr == addr)?;
        let v = self.pending.swap_remove(i);
        let slot = self.insert(v.addr, &v.bytes, v.kind, v.dirty, v.t);
        self.spare.push(v.bytes);
        Some(slot)
    }

    /// Put a line into the L2; whatever it displaces goes to the write buffer.
    pub fn insert(&mut self, addr: u64, bytes: &[u8], kind: LineKind, dirty: bool, ready: Cycle) -> u32 {
        let slot = self.l2.victim(addr);
        if let Some(old) = self.l2.tags.addr_of(slot) {
            self.evict_slot(slot, old, ready);
        }
        self.l2.fill(slot, addr, bytes, kind, dirty, ready);
        slot
    }

    fn evict_slot(&mut self, slot: u32, old: u64, t: Cycle) {
        let kind = self.l2.kind(slot);
        let dirty = self.l2.is_dirty(slot);
        self.counters.evictions += 1;
        if kind == LineKind::Data {
            self.evicted_data.push(old);
        }
        if dirty || self.keep_clean_victims {
            let mut bytes = self.spare.pop().unwrap_or_default();
            bytes.clear();
            bytes.extend_from_slice(self.l2.bytes(slot));
            self.pending.push(Victim { addr: old, bytes, dirty, kind, t });
        }
        self.l2.invalidate(slot);
    }

    /// Evict every line (used by flush).
    pub fn evict_all(&mut self, t: Cycle) -> usize {
        let slots = self.l2.valid_slots();
        for &s in &slots {
            let a = self.l2.tags.addr_of(s).unwrap();
            self.evict_slot(s, a, t);
        }
        slots.len()
    }

    /// The next line to leave for memory. Counted here, not at eviction: a line taken back
    /// from the write buffer never reaches memory.
    pub fn pop_victim(&mut self) -> Option<Victim> {
        let v = self.pending.pop()?;
        if v.dirty {
            match v.kind {
                LineKind::Data => self.counters.data_writebacks += 1,
                LineKind::Meta => self.counters.meta_writebacks += 1,
            }
        }
        Some(v)
    }

    pub fn recycle(&mut self, v: Victim) {
        self.spare.push(v.bytes);
    }

    /// Whether a line waits in the write buffer (its memory copy is stale).
    pub fn is_pending(&self, addr: u64) -> bool {
        self.pending.iter().any(|v| v.addr == addr)
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Data lines that left the L2 since the last call (the core invalidates its L1 copies).
    pub fn take_evicted_data(&mut self, mut f: impl FnMut(u64)) {
        for a in self.evicted_data.drain(..) {
            f(a);
        }
    }
}
