//! What the schemes operate on: untrusted memory behind the timed port, the AES and hash
//! engines, the trusted L2 and the buffers between them. A scheme performs an operation by
//! calling these, and the same call returns when it is done: the functional and timing
//! behaviour of every scheme is one code path.

use crate::cache::{LineKind, TrustedCache};
use crate::error::IntegrityError;
use crate::keyid::KeyIds;
use crate::layout::Layout;
use crate::port::Port;
use crate::speculation::Speculation;
use secmem_timing::{Cycle, Pipe, Slots};
use crate::decl::{param, Component, Def, Kind, stat};

/// The parts of the machine the engine reads, declared like the schemes.
pub const MACHINE: &[Component] = &[
    Component {
        name: "schemes",
        kind: Kind::Machine,
        summary: "which protection the machine runs",
        source: "—",
        params: &[
            param("integrity", Def::Preset, "scheme", "the integrity scheme (secmem schemes lists them)"),
            param("encryption", Def::Preset, "scheme", "the encryption scheme"),
            param("codeauth", Def::Str("none"), "scheme", "code authentication of instruction fetches: none, pr-trivium or pr-aes (seed 001)"),
            param("description", Def::Str(""), "text", "what the preset is"),
        ],
        stats: &[
            stat("integrity.space_overhead", "fraction", "untrusted memory the integrity scheme's metadata takes, per byte of protected data"),
            stat("encryption.space_overhead", "fraction", "untrusted memory the encryption scheme's metadata takes, per byte of protected data"),
            stat("integrity.final_check_cycles", "cycles", "the verification a scheme does at the end of the run (lhash's certified execution), after the measured statistics"),
            stat("integrity.final_check_bytes", "B", "bytes that end-of-run verification moved to and from memory"),
        ],
    },
    Component {
        name: "l2",
        kind: Kind::Machine,
        summary: "the trusted last-level cache: data and tree chunks compete for it",
        source: "000/003 Table 1",
        params: &[
            param("l2.size", Def::Preset, "B", "capacity"),
            param("l2.ways", Def::Preset, "ways", "associativity (LRU)"),
            param("l2.line", Def::Preset, "B", "line = tree chunk: a power of two from 16 B to 256 B"),
            param("l2.latency", Def::Preset, "cycles", "hit latency"),
        ],
        stats: &[
            stat("l2.accesses", "accesses", "program-data accesses to the L2 (the protected level: what misses here goes through the schemes)"),
            stat("l2.misses", "misses", "program-data accesses that missed in the L2"),
            stat("l2.miss_rate", "fraction", "l2.misses / l2.accesses"),
            stat("l2.meta_accesses", "accesses", "accesses to metadata lines (tree chunks) cached in the L2"),
            stat("l2.meta_misses", "misses", "metadata accesses that missed in the L2"),
            stat("l2.meta_miss_rate", "fraction", "l2.meta_misses / l2.meta_accesses"),
            stat("l2.fetch_accesses", "accesses", "L2 accesses by instruction fetches"),
            stat("l2.fetch_misses", "misses", "instruction fetches that missed in the L2"),
            stat("l2.load_accesses", "accesses", "L2 accesses by loads"),
            stat("l2.load_misses", "misses", "loads that missed in the L2"),
            stat("l2.store_accesses", "accesses", "L2 accesses by stores"),
            stat("l2.store_misses", "misses", "stores that missed in the L2"),
            stat("l2.walk_accesses", "accesses", "L2 accesses by page-table walks"),
            stat("l2.walk_misses", "misses", "page-table walk reads that missed in the L2"),
            stat("l2.data_writebacks", "lines", "dirty program-data lines written back from the L2 to memory"),
            stat("l2.meta_writebacks", "lines", "dirty metadata lines (tree chunks) written back from the L2"),
            stat("l2.mshr_full_cycles", "cycles", "cycles misses waited for a free L2 miss-status register, summed (misses waiting together each count)"),
        ],
    },
    Component {
        name: "memory",
        kind: Kind::Machine,
        summary: "untrusted memory behind the timed port: a bus with a fixed latency, or DRAM banks and rows",
        source: "000/003 Table 1; 004 Table 2",
        params: &[
            param("memory.size", Def::Preset, "B", "protected physical memory (sparse: only touched pages cost)"),
            param("memory.model", Def::Str("bus"), "bus|dram", "bus: fixed first-chunk latency and one shared data bus; dram: channels, banks and rows (docs/memory.md)"),
            param("memory.latency", Def::Preset, "cycles", "bus model: request to the first chunk"),
            param("memory.bus_clock", Def::Preset, "Hz", "data bus clock (one beat per clock); with dram, also the memory clock"),
            param("memory.bus_width", Def::Preset, "B", "bytes per beat"),
            param("memory.write_delay", Def::Int(0), "cycles", "a posted write waits this long before it may take the bus, so reads go first"),
            param("memory.write_queue", Def::Int(0), "entries", "controller write queue: posted writes drain when reads leave the bus idle or the queue is full (0: none)"),
            param("memory.dma_size", Def::Str("1MiB"), "B", "unprotected region for untrusted I/O (003 §4.6.1)"),
            param("memory.boot_encrypted", Def::Bool(false), "bool", "never-written program memory holds zeros encrypted under counter or stamp 0 with their MACs or tags, as a secure boot would leave it (none, otp, ocb, tdes); false: raw zeros, taken as the initial state"),
            param("memory.huge_pages", Def::Bool(false), "bool", "host huge pages for the simulated memory (not a machine parameter): faster on scattered lines, but one touched byte commits 2 MiB of host memory instead of 4 KiB"),
        ],
        stats: &[
            stat("mem.read_bytes", "B", "bytes read from untrusted memory (data and every scheme's metadata)"),
            stat("mem.write_bytes", "B", "bytes written to untrusted memory"),
            stat("mem.reads", "transfers", "read transfers on the memory bus"),
            stat("mem.writes", "transfers", "write transfers on the memory bus"),
            stat("mem.bus_busy_cycles", "cycles", "cycles the memory bus was moving data"),
            stat("mem.bus_queue_cycles", "cycles", "cycles transfers waited for the bus, summed over transfers"),
            stat("mem.resident_bytes", "B", "host memory the simulated untrusted memory holds (pages touched)"),
            stat("mem.model", "name", "the memory timing model: fixed latency or dram"),
            stat("mem.pages_mapped", "pages", "virtual pages the run mapped to simulated physical memory"),
            stat("mem.write_queue_full_waits", "writes", "write-backs that found the write queue full"),
            stat("mem.write_queue_wait_cycles", "cycles", "cycles write-backs waited for room in the write queue, summed"),
        ],
    },
    Component {
        name: "dram",
        kind: Kind::Machine,
        summary: "DRAM geometry and timings for memory.model = dram (open-page policy)",
        source: "004 Table 2",
        params: &[
            param("dram.channels", Def::Int(1), "channels", "each with its banks and data bus (a power of two)"),
            param("dram.banks", Def::Int(4), "banks", "per channel (a power of two)"),
            param("dram.row_bytes", Def::Str("4KiB"), "B", "one row (page) of a bank"),
            param("dram.interleave", Def::Str("64B"), "B", "bytes mapped to one channel and bank before the next"),
            param("dram.tRP", Def::Int(7), "memory clocks", "precharge"),
            param("dram.tRCD", Def::Int(7), "memory clocks", "activate to column command"),
            param("dram.tCAS", Def::Int(20), "memory clocks", "column command to the first beat"),
            param("dram.tREFI", Def::Int(0), "memory clocks", "every this many clocks all banks are refreshed, closing their rows (0: no refresh)"),
            param("dram.tRFC", Def::Int(0), "memory clocks", "a refresh holds every bank this long"),
            param("dram.write_turnaround", Def::Int(0), "memory clocks", "with a write queue: the data bus idles this long each way when it switches to a batch of writes and back"),
            param("dram.write_batch", Def::Int(1), "writes", "with a write queue: queued writes leave this many at a time, between two turnarounds"),
            param("dram.idle_writes", Def::Int(0), "writes per memory clock", "with a write queue: the bus also turns to writes while no read waits, starting this many queued writes a clock on free banks, and back when a read comes (ChampSim's swap_write_mode; 0: writes wait for the queue to fill)"),
        ],
        stats: &[
            stat("mem.dram_row_hits", "accesses", "DRAM accesses to the open row of their bank"),
            stat("mem.dram_row_misses", "accesses", "DRAM accesses to a bank with no open row"),
            stat("mem.dram_row_conflicts", "accesses", "DRAM accesses that closed another open row first"),
            stat("mem.dram_idle_switches", "reads", "with dram.idle_writes: reads that found no read waiting before them and writes queued, the bus turned to writes"),
            stat("mem.dram_idle_writes", "writes", "with dram.idle_writes: writes that left while no read waited"),
            stat("mem.dram_idle_held_reads", "reads", "with dram.idle_writes: reads held until the write queue fell under its low mark"),
            stat("mem.dram_idle_cancelled_rows", "writes", "with dram.idle_writes: writes started on banks while no read waited and cancelled when the bus turned back, each leaving its bank with its row open or precharged"),
        ],
    },
    Component {
        name: "aes",
        kind: Kind::Machine,
        summary: "the pipelined AES engine",
        source: "000 Table 1",
        params: &[
            param("aes.latency", Def::Preset, "cycles", "one block"),
            param("aes.throughput", Def::Preset, "B/s", "pipelined throughput"),
            param("aes.engines", Def::Int(1), "engines", "replicated AES pipelines: the throughput is this many times aes.throughput (004 §3.2: \"pipelined and replicated\")"),
            param("aes.xor_latency", Def::Preset, "cycles", "XOR of a pad or IV with a chunk"),
        ],
        stats: &[
            stat("aes.units", "units", "pipelined AES units the encryption engine has"),
            stat("aes.wait_cycles", "cycles", "cycles AES operations waited for a free unit, summed"),
        ],
    },
    Component {
        name: "hash",
        kind: Kind::Machine,
        summary: "the pipelined hash engine and its read and write buffers",
        source: "003 Table 1, Fig. 2",
        params: &[
            param("hash.latency", Def::Preset, "cycles", "one 64-B chunk"),
            param("hash.throughput", Def::Preset, "B/s", "pipelined throughput"),
            param("hash.read_buffer", Def::Preset, "entries", "fetched chunks waiting for their check"),
            param("hash.write_buffer", Def::Preset, "entries", "evicted chunks waiting to be hashed and written"),
        ],
        stats: &[
            stat("hash.ops", "operations", "hash operations booked on the hash engine"),
            stat("hash.wait_cycles", "cycles", "cycles hash operations waited for the engine, summed"),
        ],
    },
    Component {
        name: "speculation",
        kind: Kind::Machine,
        summary: "the speculation stage between the cipher and the core",
        source: "003 §4.3; 000 §4.4; 004 §3.2",
        params: &[
            param("speculation.use_before_verify", Def::Bool(true), "bool", "fetched data is used while its check completes (003 §4.3); false: only once verified (001 §4.1, 004 §3)"),
            param("speculation.stamps", Def::Bool(false), "bool", "start otp's pad at request time on a predicted time stamp (000 §4.4, Fig. 7c)"),
            param("speculation.frequent_values", Def::Int(0), "entries", "Frequent Value Table size for ciphertext and MAC speculation of tdes, ocb (with chunk re-ordering) and otp's chunk MACs (004 §3.2–3.3: 8, 16 or 32); 0: off"),
            param("speculation.engines", Def::Int(0), "engines", "dedicated pipelines of the scheme's cipher for frequent value speculation (004 Fig. 2's \"Pipelined Encryption Engines\"), each at the cipher's throughput; 0: speculation shares the scheme's engine with demand work"),
            param("speculation.at_fetch", Def::Bool(true), "bool", "frequent value speculation is posted with the fetch request (004 §3.2 ①-②, Fig. 3): its engine derives the line's whitening (tdes), offsets (ocb) or MAC inputs from the nonce or time stamp at the request, taken as on chip then; false: it starts once the scheme has read the line's counter (tdes, ocb) or time stamp (otp)"),
            param("speculation.match_latency", Def::Int(1), "cycles", "matching an arrived chunk against the speculated ciphertexts (the CAM; assumed, 004 gives none)"),
        ],
        stats: &[
            stat("speculation.fv_entries", "entries", "entries of the frequent-value table (seed 004)"),
            stat("speculation.fv_lines", "lines", "missed data lines speculated on"),
            stat("speculation.fv_chunks", "chunks", "their 64-bit chunks"),
            stat("speculation.fv_frequent_chunks", "chunks", "chunks whose plaintext was in the table when the line was missed (004 Fig. 5)"),
            stat("speculation.fv_frequent_fraction", "fraction", "speculation.fv_frequent_chunks / speculation.fv_chunks"),
            stat("speculation.fv_paired_fraction", "fraction", "of the frequent chunks, those a 128-bit cipher could predict (both chunks of their 16-B block frequent; 004 Fig. 6)"),
            stat("speculation.fv_reordered_fraction", "fraction", "the same once frequent chunks are grouped together (004 §3.2.2)"),
            stat("speculation.fv_hits", "chunks", "chunks whose fetched ciphertext matched a speculated one"),
            stat("speculation.fv_hit_fraction", "fraction", "speculation.fv_hits / speculation.fv_chunks"),
            stat("speculation.fv_early_hits", "chunks", "hit chunks usable before their decryption would have been"),
            stat("speculation.fv_encryptions", "operations", "speculative encryptions booked on the engine"),
            stat("speculation.engine_wait_cycles", "cycles", "cycles speculative encryptions waited for their engine, summed"),
            stat("speculation.fv_saved_cycles", "cycles", "cycles by which lines were usable earlier than without speculation, summed"),
            stat("speculation.fv_saved_per_line", "cycles", "speculation.fv_saved_cycles / speculation.fv_lines"),
        ],
    },
];

/// How an integrity scheme protects what an encryption scheme keeps and moves itself: its
/// counter blocks, and lines it re-enciphers on its own. The encryption scheme calls these
/// through `Machine::check_meta`, `update_meta` and `reenciphered`; it never knows who answers.
pub trait Guard: Send {
    /// Check metadata `bytes` read from `addr` (requested at `t_req`, arrived at `t_data`):
    /// when the check completes.
    fn check(&mut self, m: &mut Machine, addr: u64, bytes: &[u8], t_req: Cycle, t_data: Cycle) -> Result<Cycle, IntegrityError>;
    /// Bind metadata `bytes` about to be written to `addr` at `t`: when that is done.
    fn update(&mut self, m: &mut Machine, addr: u64, bytes: &[u8], t: Cycle) -> Result<Cycle, IntegrityError>;
    /// Line `addr` (plaintext `plain`) was re-enciphered from counter `old` to `new`.
    fn reenciphered(&mut self, m: &mut Machine, addr: u64, plain: &[u8], old: u64, new: u64, t: Cycle) -> Result<Cycle, IntegrityError>;
}

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
    /// 4 KiB pages (by number) holding memory from before the trace that the trace does not
    /// carry (pages a program touched while a tracer's `--skip` fast-forwarded), each named
    /// when it gets its frame: set up untimed on first use like `predating` memory, then
    /// forgotten (`Engine::mark_predating`).
    pub predated: std::collections::HashSet<u64>,
    /// What protects the metadata the encryption scheme keeps itself (its counter blocks),
    /// installed by the integrity scheme that covers it (a tree over counters); none by
    /// default, and then the hooks below cost nothing.
    guard: Option<Box<dyn Guard>>,
    /// The KeyID of each page (on chip: the request carries it); one key unless the
    /// encryption scheme has a key table (xts).
    pub key_ids: KeyIds,
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
            predated: Default::default(),
            guard: None,
            key_ids: KeyIds::single(),
            pending: Vec::new(),
            spare: Vec::new(),
            evicted_data: Vec::new(),
        }
    }

    pub fn line(&self) -> u64 {
        self.l2.line() as u64
    }

    /// Install what protects the encryption's own metadata (an integrity scheme over counters).
    pub fn set_guard(&mut self, g: Box<dyn Guard>) {
        self.guard = Some(g);
    }

    /// Run `f` with the guard taken out of the machine, which `f` gets to use.
    fn guarded<R>(&mut self, f: impl FnOnce(&mut dyn Guard, &mut Machine) -> R) -> Option<R> {
        let mut g = self.guard.take()?;
        let r = f(&mut *g, self);
        self.guard = Some(g);
        Some(r)
    }

    /// The encryption scheme read its metadata `bytes` at `addr` from memory (requested at
    /// `t_req`, arrived at `t_data`). With a guard, they are checked before any use that leaves
    /// the chip: `Some(when)`, or the failure; `None` when nothing protects them.
    pub fn check_meta(&mut self, addr: u64, bytes: &[u8], t_req: Cycle, t_data: Cycle) -> Result<Option<Cycle>, IntegrityError> {
        self.guarded(|g, m| g.check(m, addr, bytes, t_req, t_data)).transpose()
    }

    /// The encryption scheme will write its metadata `bytes` to `addr` at `t`: the guard binds
    /// them (updates the tree above them). When that is done (`t` without a guard).
    pub fn update_meta(&mut self, addr: u64, bytes: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.guarded(|g, m| g.update(m, addr, bytes, t)).unwrap_or(Ok(t))
    }

    /// The encryption scheme re-enciphered line `addr` (plaintext `plain`) on its own, from
    /// counter `old` to `new` (a counter overflow): the guard checks the line under the old
    /// counter and binds it to the new one. When that is done (`t` without a guard).
    pub fn reenciphered(&mut self, addr: u64, plain: &[u8], old: u64, new: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        self.guarded(|g, m| g.reenciphered(m, addr, plain, old, new, t)).unwrap_or(Ok(t))
    }

    /// Run `f` untimed: its memory transfers and crypto operations are performed on the real
    /// bytes but book no time on the bus or the engines (work that happened before the timed
    /// run, such as setting up memory a fast-forwarded program built).
    pub fn untimed<R>(&mut self, f: impl FnOnce(&mut Machine) -> R) -> R {
        // The engines may already be frozen (a sampled run's functional warming), the port
        // untimed (an untimed stretch within another: `Engine::set_up` reaching lhash's
        // set-up of a page): restore.
        let (aes, hash, port) = (self.aes.frozen(), self.hash.frozen(), self.port.untimed());
        self.port.set_untimed(true);
        self.aes.freeze(true);
        self.hash.freeze(true);
        let r = f(self);
        self.port.set_untimed(port);
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

    /// A line waiting in the write buffer, to read or change in place: it is still on chip,
    /// so a scheme keeping its metadata in the L2 uses it there without taking it back (which
    /// would displace another line).
    pub fn pending_mut(&mut self, addr: u64) -> Option<&mut Victim> {
        self.pending.iter_mut().rev().find(|v| v.addr == addr)
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
