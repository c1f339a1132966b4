//! lhash: log-hash integrity checking (seed 000 §3.2, Fig. 3).
//!
//! The processor keeps T = (READHASH, WRITEHASH, TIMER) on chip. READHASH and WRITEHASH are
//! incremental multiset hashes (Clarke et al.) of (address ‖ chunk ‖ time stamp) triples:
//! - add-chunk(T, a, c): TS = TIMER; WRITEHASH += (a, c, TS); write (c, TS) to memory.
//! - read-chunk (L2 miss): read (c, TS); READHASH += (a, c, TS); TIMER = max(TIMER, TS+1).
//! - write-chunk (any eviction): TS = TIMER; WRITEHASH += (a, c, TS); write (c, TS) if dirty,
//!   only TS if clean.
//! - integrity-check: with NewT = (0, 0, 0), every covered chunk not in the cache is read
//!   (read-chunk into T) and re-added (add-chunk into NewT); READHASH must equal WRITEHASH;
//!   then T = NewT.
//! Chunks are added on demand, a page at a time, when a page is first used; the list of used
//! pages is a bitmap in untrusted memory (the page table of §3.2), walked in address order at
//! check time so each chunk is read once. The adversary may change it: a page added twice or
//! skipped at the check leaves READHASH ≠ WRITEHASH.
//!
//! Pages of memory from before the trace (what a fast-forwarded program or the loader built,
//! handed over as external records: `Machine::predating`; pages a tracer's `--skip` saw the
//! program touch, named without their contents: `Machine::predated`) are added the same way
//! but untimed, as they were when allocated, before the measured window
//! (`lhash.pages_predating`).
//!
//! Checks run every `lhash.check_period` off-chip accesses, or (`end`, the default) once when
//! the run finishes, as in certified execution; a signing barrier checks first (which trace
//! events are barriers is the core's `core.syscall_barriers`).

use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::encryption::{derive_key, Encryption, Seed};
use crate::layout::{Meta, MetaKind, PerLine, B_TS, MAX_LINE};
use crate::machine::{Machine, Victim};
use crate::mem::PAGE;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use crate::wordbuf::{TsBuffer, WordBuffer};
use secmem_crypto::multiset::{Multiset, MultisetHash, MULTISET_HASHES};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};

/// lhash's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "lhash",
    kind: Kind::Integrity,
    summary: "log-hash checking with incremental multiset hashes of (address, chunk, time stamp); memory is checked at the end or every T accesses",
    source: "000 §3.2, Fig. 3",
    params: &[
        param("lhash.multiset", Def::Str("add"), "add|xor|mu", "the multiset hash: MSet-Add-Hash over keyed MD5 (000 §3.2), XOR or Mu"),
        param("lhash.check_period", Def::Str("end"), "accesses|end", "off-chip accesses between integrity checks, or \"end\" (certified execution)"),
        param("lhash.ts_bits", Def::Int(32), "bits", "time-stamp width; TIMER nearing its limit forces a check"),
        param("lhash.ts_buffer_entries", Def::Int(32), "entries", "on-chip buffer of 8-B words of time stamps (000 Table 1)"),
        param("lhash.pt_buffer_entries", Def::Int(16), "entries", "on-chip 8-B words of the untrusted page table (not in 000: a page's entry comes with its translation)"),
    ],
    stats: &[
        stat("lhash.read_chunks", "chunks", "chunks added to the read multiset hash (each read from memory)"),
        stat("lhash.write_chunks", "chunks", "chunks added to the write multiset hash (each written to memory)"),
        stat("lhash.added_chunks", "chunks", "chunks added to the log when their page was first used"),
        stat("lhash.pages_added", "pages", "pages added to the log"),
        stat("lhash.pages_predating", "pages", "of lhash.pages_added, those set up untimed: memory from before the trace"),
        stat("lhash.checks", "checks", "integrity checks (each reads every logged chunk)"),
        stat("lhash.check_cycles", "cycles", "cycles the checks took"),
        stat("lhash.checked_chunks", "chunks", "chunks read by the checks"),
        stat("lhash.timer", "ticks", "the TIMER at the end of the run"),
        stat("lhash.ts_bus_reads", "reads", "time-stamp words read from memory (buffer misses)"),
        stat("lhash.ts_buffer_hit_rate", "fraction", "time-stamp reads served by the on-chip buffer"),
        stat("lhash.space_overhead", "fraction", "memory the time stamps and page table take, per byte of data"),
    ],
};

/// lhash's registration. Reads are not checked one by one: the multiset hashes differ at the next integrity-check (000 §3.2).
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Check, Detection::Check, Detection::Check)),
    coverage: Coverage { lays_out: &[Role::Log], protects: &[Role::Data], guarded: &[] },
    build: |p, m, seed| Ok(Box::new(Lhash::new(p, m, seed)?)),
};

pub struct Lhash {
    read_hash: Multiset,
    write_hash: Multiset,
    timer: u64,
    ts_max: u64,
    stamps: PerLine,
    pt_base: u64,
    line: u64,
    data_size: u64,
    ts_buf: TsBuffer,
    pt_buf: WordBuffer,
    /// Off-chip accesses between checks; `None`: only at the end.
    period: Option<u64>,
    since_check: u64,
    // statistics
    read_chunks: u64,
    write_chunks: u64,
    added_chunks: u64,
    pages_added: u64,
    /// Of `pages_added`, those set up untimed: memory from before the trace.
    pages_predating: u64,
    checks: u64,
    check_cycles: u64,
    checked_chunks: u64,
}

impl Lhash {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Lhash, ConfigError> {
        let name = p.choice("lhash.multiset", MULTISET_HASHES)?;
        let key = derive_key(seed, 0x1a54);
        let hash = Multiset::by_name(&name, key, seed.value()).map_err(|e| ConfigError(format!("lhash.multiset: {}", e)))?;
        let ts_bits = p.u64_min("lhash.ts_bits", 2)?;
        if ts_bits > 32 {
            return Err(ConfigError(format!("lhash.ts_bits: {} exceeds the 32-bit time-stamp field", ts_bits)));
        }
        let period = match p.str("lhash.check_period")?.as_str() {
            "end" => None,
            _ => Some(p.u64_min("lhash.check_period", 1).map_err(|_| {
                ConfigError(format!("lhash.check_period: '{}' is neither 'end' nor a number of accesses", p.str("lhash.check_period").unwrap_or_default()))
            })?),
        };
        let line = m.line();
        let data_size = m.layout.data_size;
        let stamps = m.layout.per_line(Role::Log, "lhash time stamps", data_size, B_TS);
        let pt_base = m.layout.alloc(Role::Log, "lhash page table", (data_size / PAGE).div_ceil(8));
        // Clean evictions are logged too (write-chunk writes their time stamp).
        m.keep_clean_victims = true;
        Ok(Lhash {
            write_hash: hash.empty_like(),
            read_hash: hash,
            timer: 0,
            ts_max: (1 << ts_bits) - 1,
            stamps,
            pt_base,
            line,
            data_size,
            ts_buf: TsBuffer::new(p, "lhash.ts_buffer_entries")?,
            pt_buf: WordBuffer::new(p.u64_min("lhash.pt_buffer_entries", 0)?, "lhash.pt_buffer_entries")?,
            period,
            since_check: 0,
            read_chunks: 0,
            write_chunks: 0,
            added_chunks: 0,
            pages_added: 0,
            pages_predating: 0,
            checks: 0,
            check_cycles: 0,
            checked_chunks: 0,
        })
    }

    fn ts_addr(&self, addr: u64) -> u64 {
        self.stamps.addr(addr)
    }

    fn pt_bit(&self, page: u64) -> (u64, u8) {
        (self.pt_base + page / 8, 1 << (page % 8))
    }

    /// Whether the page table lists `page` (requested at `t`), and when that is known. The
    /// table's words are kept on chip once read (`lhash.pt_buffer_entries`), as a page's entry
    /// comes with its translation.
    fn page_listed(&mut self, m: &mut Machine, page: u64, t: Cycle) -> (bool, Cycle) {
        let (a, bit) = self.pt_bit(page);
        let mut b = [0u8];
        let done = self.pt_buf.read(&mut m.port, a, &mut b, t);
        (b[0] & bit != 0, done)
    }

    /// Add the triple (address ‖ chunk ‖ time stamp) to a log; the bytes hashed.
    fn log(h: &mut Multiset, addr: u64, chunk: &[u8], ts: u32) -> u64 {
        let parts: [&[u8]; 3] = [&addr.to_le_bytes(), chunk, &ts.to_le_bytes()];
        h.add(&parts);
        parts.iter().map(|p| p.len() as u64).sum()
    }

    /// A page used for the first time: add-chunk every chunk of it (their initial value is
    /// zero) and list it in the page table.
    fn add_page(&mut self, m: &mut Machine, enc: &mut dyn Encryption, page: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        let zero = [0u8; MAX_LINE];
        let z = &zero[..self.line as usize];
        let base = page * PAGE;
        let mut done = t;
        for a in (base..base + PAGE).step_by(self.line as usize) {
            let ts = self.timer as u32;
            let hashed = Self::log(&mut self.write_hash, a, z, ts);
            let h = m.hash.run(t, hashed);
            done = done.max(enc.write_line(m, a, z, h)?);
            done = done.max(self.ts_buf.write(&mut m.port, self.ts_addr(a), ts, h));
            self.added_chunks += 1;
        }
        // List it: read-modify-write of the table byte (on chip since the lookup).
        let (pa, bit) = self.pt_bit(page);
        let mut b = [0u8];
        let t_pt = self.pt_buf.read(&mut m.port, pa, &mut b, t);
        self.pt_buf.write(&mut m.port, pa, &[b[0] | bit], t_pt);
        self.pages_added += 1;
        Ok(done)
    }

    /// integrity-check (Fig. 3). Returns when it is done.
    fn integrity_check(&mut self, m: &mut Machine, enc: &mut dyn Encryption, t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut new_write = self.write_hash.empty_like();
        let new_timer = 0u32;
        let mut done = t;
        let mut buf = [0u8; MAX_LINE];
        let n = self.line as usize;
        let pages = (self.data_size / PAGE).div_ceil(8);
        // Walk the untrusted page table in address order: each listed chunk is read once.
        let mut table = vec![0u8; pages as usize];
        let tw = m.port.read(self.pt_base, &mut table, t);
        let mut checked = 0;
        // Chunks are streamed: each read is issued as the previous one arrives (less the bus
        // latency), not all at once, so bookings start near the frontier instead of searching
        // past every earlier one (quadratic in the chunks checked).
        let mut t_rd = tw.last;
        for (i, &byte) in table.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) == 0 {
                    continue;
                }
                let page = i as u64 * 8 + bit;
                for a in (page * PAGE..(page + 1) * PAGE).step_by(n) {
                    if m.l2.tags.find(a).is_some() {
                        continue; // cached chunks are trusted; their next eviction logs them
                    }
                    let plain = &mut buf[..n];
                    let td = enc.read_line(m, a, t_rd, plain)?;
                    let (ts, tt) = self.ts_buf.read(&mut m.port, self.ts_addr(a), t_rd);
                    t_rd = td.saturating_sub(m.port.latency()).max(t_rd);
                    let read = Self::log(&mut self.read_hash, a, plain, ts);
                    self.timer = self.timer.max(ts as u64 + 1);
                    let rewritten = Self::log(&mut new_write, a, plain, new_timer);
                    let h1 = m.hash.run(td.max(tt), read);
                    let h2 = m.hash.run(td.max(tt), rewritten);
                    done = done.max(self.ts_buf.write(&mut m.port, self.ts_addr(a), new_timer, h1.max(h2)));
                    checked += 1;
                }
            }
        }
        self.checks += 1;
        self.checked_chunks += checked;
        self.check_cycles += done - t;
        m.note_check(done);
        if !self.read_hash.same(&self.write_hash) {
            return Err(IntegrityError::tampered(0, format!(
                    "log hash check: READHASH ≠ WRITEHASH after reading {} chunks: some read since the last check did not return the value last written",
                    checked
                )));
        }
        self.write_hash = new_write;
        self.read_hash = self.read_hash.empty_like();
        self.timer = new_timer as u64;
        self.since_check = 0;
        Ok(done)
    }
}

impl Integrity for Lhash {
    fn name(&self) -> &'static str {
        "lhash"
    }

    /// read-chunk: the data is used at once; the log update happens in the background.
    fn verify(
        &mut self,
        m: &mut Machine,
        enc: &mut dyn Encryption,
        addr: u64,
        plain: &mut [u8],
        t_req: Cycle,
        t_data: Cycle,
    ) -> Result<Verified, IntegrityError> {
        if addr >= self.data_size {
            return Ok(Verified { ready: t_data, checked: t_data });
        }
        let page = addr / PAGE;
        let (listed, t_pt) = self.page_listed(m, page, t_req);
        let mut t_data = t_data;
        if !listed {
            // A page used for the first time: add-chunk every chunk of it. What was read
            // before is not this program's data: the chunk is the zero just added. A page of
            // memory from before the trace (a fast-forward's, the loader's) was allocated, and
            // so added, back then: the same work, untimed (000 §3.2 adds at allocation).
            if m.predating || (!m.predated.is_empty() && m.predated.remove(&page)) {
                m.untimed(|m| self.add_page(m, enc, page, t_pt))?;
                self.pages_predating += 1;
            } else {
                self.add_page(m, enc, page, t_pt)?;
            }
            plain.fill(0);
            t_data = t_data.max(t_pt);
        }
        let (ts, t_ts) = self.ts_buf.read(&mut m.port, self.ts_addr(addr), t_req);
        let hashed = Self::log(&mut self.read_hash, addr, plain, ts);
        self.timer = self.timer.max(ts as u64 + 1);
        let (slot, t_start) = m.read_buf.acquire(t_data.max(t_ts));
        let done = m.hash.run(t_start, hashed);
        m.read_buf.hold_until(slot, done);
        self.read_chunks += 1;
        self.since_check += 1;
        Ok(Verified { ready: t_data, checked: done })
    }

    /// write-chunk, for every eviction.
    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if v.addr >= self.data_size {
            return super::write_back_plain(m, enc, v);
        }
        let ts = self.timer as u32;
        let hashed = Self::log(&mut self.write_hash, v.addr, &v.bytes, ts);
        let (slot, start) = m.write_buf.acquire(v.t);
        let h = m.hash.run(start, hashed);
        let mut done = self.ts_buf.write(&mut m.port, self.ts_addr(v.addr), ts, h);
        if v.dirty {
            done = done.max(enc.write_line(m, v.addr, &v.bytes, h)?);
        }
        m.write_buf.hold_until(slot, done);
        self.write_chunks += 1;
        self.since_check += 1;
        Ok(start)
    }

    fn poll(&mut self, m: &mut Machine, enc: &mut dyn Encryption, now: Cycle, _instructions: u64) -> Result<Cycle, IntegrityError> {
        let due = self.period.is_some_and(|p| self.since_check >= p) || self.timer + 2 >= self.ts_max;
        if due {
            return self.integrity_check(m, enc, now);
        }
        Ok(now)
    }

    fn barrier(&mut self, m: &mut Machine, enc: &mut dyn Encryption, now: Cycle) -> Result<Cycle, IntegrityError> {
        self.integrity_check(m, enc, now)
    }

    fn check(&mut self, m: &mut Machine, enc: &mut dyn Encryption, now: Cycle) -> Result<Option<Cycle>, IntegrityError> {
        self.integrity_check(m, enc, now).map(Some)
    }

    fn finish(&mut self, m: &mut Machine, enc: &mut dyn Encryption, now: Cycle) -> Result<Cycle, IntegrityError> {
        if self.period.is_some() {
            return Ok(now);
        }
        self.integrity_check(m, enc, now)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::LogStamp, self.ts_addr(addr), B_TS), Meta::new(MetaKind::PageTable, self.pt_bit(addr / PAGE).0, 1)]
    }

    fn drop_cached(&mut self) {
        self.ts_buf.words.clear();
        self.pt_buf.clear();
    }

    fn space_overhead(&self) -> f64 {
        self.stamps.overhead()
    }

    fn reset_stats(&mut self) {
        (self.read_chunks, self.write_chunks, self.added_chunks, self.pages_added, self.pages_predating) = (0, 0, 0, 0, 0);
        (self.checks, self.check_cycles, self.checked_chunks) = (0, 0, 0);
        self.ts_buf.words.reset_stats();
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.str("lhash.multiset", self.read_hash.name());
        out.str("lhash.check_period", &self.period.map_or("end".to_string(), |p| p.to_string()));
        out.int("lhash.read_chunks", self.read_chunks);
        out.int("lhash.write_chunks", self.write_chunks);
        out.int("lhash.added_chunks", self.added_chunks);
        out.int("lhash.pages_added", self.pages_added);
        out.int("lhash.pages_predating", self.pages_predating);
        out.int("lhash.checks", self.checks);
        out.int("lhash.check_cycles", self.check_cycles);
        out.int("lhash.checked_chunks", self.checked_chunks);
        out.int("lhash.timer", self.timer);
        out.int("lhash.ts_bus_reads", self.ts_buf.words.bus_reads());
        let (hits, reads) = self.ts_buf.words.hits();
        out.rate("lhash.ts_buffer_hit_rate", hits, reads);
        out.float("lhash.space_overhead", self.space_overhead());
    }
}
