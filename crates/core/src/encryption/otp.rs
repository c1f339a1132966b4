//! otp: one-time-pad (counter-mode) encryption with time stamps (seed 000 §4.3, Fig. 5–7b).
//!
//! A line of B bytes is B/16 chunks; chunk i is XORed with pad_i = AES_K(V ‖ addr|i ‖ TS),
//! where V is a per-run random vector, addr the line address (its low bits are zero, so
//! addr|i names the chunk uniquely) and TS the line's time stamp, the value of TIMER when it
//! was last written back. TIMER is on chip and incremented on every dirty write-back; time
//! stamps live in untrusted memory at TS_base + addr/B·B_TS (seed 000 §5.1). On a read the
//! pad is computed as soon as the time stamp arrives, overlapping the line's transfer
//! (Fig. 7b). When TIMER would wrap, a new key is chosen and memory re-encrypted.
//!
//! On-chip time stamps (000 §4.4, Fig. 7c): "when overlapping the AES computation with data bus
//! accesses is not sufficient to hide the entire latency, the time stamp can be cached on-chip
//! or speculated based on recent accesses". Both are options, off by default:
//! - `otp.ts_cache_entries` > 0: a set-associative on-chip cache of stamp values (trusted
//!   copies, written through on every write-back). A hit needs no bus read and the pad starts
//!   at request time.
//! - `speculation.stamps`: on a cache miss the pad is started at request time for the stamp
//!   the speculation stage predicts (`speculation::stamp`). The stamp is still fetched to
//!   confirm the guess; a wrong guess costs a second pad computation (AES bandwidth) from the
//!   stamp's arrival.
//!
//! Per-chunk MACs and MAC speculation (seed 004 §3.3, Fig. 8; `otp.chunk_mac_bytes`): a MAC
//! per 64-bit chunk (the Frequent Value Table's granularity; 004 does not size counter mode's
//! chunks), T_i = AES_Km(P_i ‖ chunk number ‖ TS) truncated, stored in untrusted memory after
//! the time stamps and checked on every read: the access is verified once every chunk's MAC
//! is computed (one AES each, after the chunk is deciphered) and compared with the fetched
//! one. The pad is precomputed, so counter mode gains nothing from ciphertext speculation
//! (004 §6.2: "pre-computation of decryption pads is the dominating factor"), but with
//! `speculation.frequent_values` the AES engine (or the speculation's own, `speculation.engines`)
//! also computes the MAC of every table value at every chunk position, posted with the fetch
//! request (004 §3.2, `speculation.at_fetch`; else once the stamp is known): a chunk that deciphers to a table value
//! whose speculated MAC equals the fetched one is verified when it and its MAC are in, with no
//! MAC computation. Like tdes's, the MACs bind address and stamp, not freshness.
//!
//! Memory is all-zero plaintext at power-on; instead of encrypting it all up front, a line
//! whose time stamp is 0 and whose bytes are all zero is that initial state (TIMER starts at
//! 1, so no write-back ever produces time stamp 0).

use super::{Boot, BootLines, ChunkMacCounts, Encryption, EncryptionScheme, chunk_macs, derive_key, Seed};
use crate::mem::BootImage;
use std::sync::Arc;
use crate::error::IntegrityError;
use crate::layout::{all_zero, is_initial, Meta, MetaKind, PerLine, B_TS, MAX_LINE};
use crate::port::chunk_arrivals;
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use crate::wordbuf::TsBuffer;
use secmem_crypto::Aes128;
use secmem_timing::{Cycle, Tags, Transfer};
use crate::decl::{Component, Coverage, Def, Guarantees, Kind, Role, param, stat};

/// otp's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "otp",
    kind: Kind::Encryption,
    summary: "one-time-pad (counter-mode) encryption with per-line time stamps: the pad is computed while the line is on the bus",
    source: "000 §4.3, Figs. 5–7",
    params: &[
        param("otp.ts_bits", Def::Int(32), "bits", "time-stamp width; TIMER wrapping re-keys and re-encrypts memory"),
        param("otp.ts_buffer_entries", Def::Int(32), "entries", "time-stamp buffer of 8-B words (000 Table 1: 32 entries)"),
        param("otp.ts_cache_entries", Def::Int(0), "entries", "on-chip cache of time-stamp values (000 §4.4, Fig. 7c); 0: none"),
        param("otp.chunk_mac_bytes", Def::Int(0), "B", "a MAC of this many bytes (1 to 8) per 64-bit chunk, checked on every read and speculated with speculation.frequent_values (004 §3.3, Fig. 8); 0: none"),
    ],
    stats: &[
        stat("otp.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("otp.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("otp.timer", "ticks", "the time-stamp counter at the end of the run"),
        stat("otp.ts_reads", "reads", "time-stamp reads"),
        stat("otp.ts_bus_reads", "reads", "time-stamp words read from memory (buffer misses)"),
        stat("otp.ts_buffer_hit_rate", "fraction", "time-stamp reads served by the on-chip buffer"),
        stat("otp.pad_hidden_cycles", "cycles", "pad-generation cycles hidden under the data's memory access, summed"),
        stat("otp.pad_exposed_cycles", "cycles", "pad-generation cycles after the data arrived, summed"),
        stat("otp.pad_hidden_fraction", "fraction", "otp.pad_hidden_cycles over all pad cycles"),
        stat("otp.reencryptions", "events", "whole-memory re-encryptions (the time stamp wrapped)"),
        stat("otp.reencrypted_lines", "lines", "lines re-encrypted by them"),
        stat("otp.space_overhead", "fraction", "memory the time stamps take, per byte of data"),
        stat("otp.ts_cache_hits", "reads", "reads whose time stamp was in the on-chip time-stamp cache (pad started at once)"),
        stat("otp.ts_cache_hit_rate", "fraction", "otp.ts_cache_hits / otp.reads"),
        stat("otp.spec_predictions", "reads", "reads whose time stamp was predicted (speculation.stamps)"),
        stat("otp.spec_hits", "reads", "predictions that were right"),
        stat("otp.spec_hit_rate", "fraction", "otp.spec_hits / otp.spec_predictions"),
        stat("otp.pad_early_fraction", "fraction", "reads whose pad could start before their time stamp arrived (cache hits and right predictions)"),
    ],
};

/// otp's registration. The pad binds address and time stamp; a flipped ciphertext bit flips the plaintext bit unless per-chunk MACs (bound to address and stamp, not freshness) are on.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |p| Ok(Guarantees { confidential: true, hides_equal_lines: true, hides_rewrites: true, ..chunk_macs(p.u64_min("otp.chunk_mac_bytes", 0)? > 0) }),
    coverage: Coverage { lays_out: &[Role::Counters, Role::Macs], protects: Role::LINES, guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Otp::new(p, m, c, seed)?)),
};

/// On-chip copies of time stamps, one per entry, set-associative (8 ways).
struct TsCache {
    tags: Tags,
    values: Vec<u32>,
}

impl TsCache {
    fn new(entries: u64) -> Result<Option<TsCache>, ConfigError> {
        if entries == 0 {
            return Ok(None);
        }
        let ways = entries.min(8);
        // One 4-B stamp per 8-B tag "line" (keyed by stamp address × 2).
        let tags = Tags::new(entries * 8, ways as usize, 8)
            .map_err(|e| ConfigError(format!("otp.ts_cache_entries: {} entries in {}-way sets: {}", entries, ways, e)))?;
        let n = tags.slots();
        Ok(Some(TsCache { tags, values: vec![0; n] }))
    }

    #[inline]
    fn get(&mut self, ts_addr: u64) -> Option<u32> {
        let s = self.tags.find(ts_addr * 2)?;
        self.tags.touch(s);
        Some(self.values[s as usize])
    }

    #[inline]
    fn put(&mut self, ts_addr: u64, v: u32) {
        let s = self.tags.access(ts_addr * 2).0;
        self.values[s as usize] = v;
    }

    fn clear(&mut self) {
        for s in 0..self.tags.slots() as u32 {
            self.tags.invalidate(s);
        }
    }
}

/// Bytes of a chunk with its own MAC: one Frequent Value Table value.
const CHUNK: usize = 8;

/// XOR `buf` with the pads AES_K(V ‖ addr|i ‖ TS) of line `addr` at time stamp `ts`.
fn pad(aes: &Aes128, v: u32, addr: u64, ts: u32, buf: &mut [u8]) {
    let mut pads = [[0u8; 16]; MAX_LINE / 16];
    let n = buf.len() / 16;
    for (i, pad) in pads[..n].iter_mut().enumerate() {
        pad[..4].copy_from_slice(&v.to_le_bytes());
        pad[4..12].copy_from_slice(&(addr | i as u64).to_le_bytes());
        pad[12..].copy_from_slice(&ts.to_le_bytes());
    }
    aes.encrypt_many(&mut pads[..n]);
    for (chunk, pad) in buf.chunks_exact_mut(16).zip(&pads[..n]) {
        for (b, p) in chunk.iter_mut().zip(pad) {
            *b ^= p;
        }
    }
}

/// The boot image (`memory.boot_encrypted`): zeros under stamp 0 and the first key, and their
/// MACs. Stamp 0 never comes from TIMER, so those pads are used for nothing else.
#[derive(Clone)]
struct BootKeys {
    aes: Aes128,
    v: u32,
    mac: Option<ChunkMacs>,
}

impl BootLines for BootKeys {
    fn line(&self, addr: u64, out: &mut [u8]) {
        out.fill(0);
        pad(&self.aes, self.v, addr, 0, out);
    }

    fn stores(&self) -> Vec<PerLine> {
        self.mac.iter().map(|c| c.store).collect()
    }

    fn entry(&self, _: usize, addr: u64, out: &mut [u8]) {
        let c = self.mac.as_ref().expect("only the MAC store");
        let n = out.len() / c.bytes * CHUNK;
        c.compute(addr, 0, &[0u8; MAX_LINE][..n], out);
    }
}

/// Per-chunk MACs: their key, size and where they live.
#[derive(Clone)]
struct ChunkMacs {
    key: Aes128,
    bytes: usize,
    store: PerLine,
}

impl ChunkMacs {
    /// T_i = AES_Km(P_i ‖ chunk number ‖ TS) of each 64-bit chunk P_i of `plain` (line `addr`,
    /// stamp `ts`), truncated into `out`.
    fn compute(&self, addr: u64, ts: u32, plain: &[u8], out: &mut [u8]) {
        let mut blocks = [[0u8; 16]; MAX_LINE / CHUNK];
        let n = plain.len() / CHUNK;
        for (i, (b, c)) in blocks[..n].iter_mut().zip(plain.chunks_exact(CHUNK)).enumerate() {
            b[..8].copy_from_slice(c);
            b[8..12].copy_from_slice(&((addr / CHUNK as u64) as u32 + i as u32).to_le_bytes());
            b[12..].copy_from_slice(&ts.to_le_bytes());
        }
        self.key.encrypt_many(&mut blocks[..n]);
        for (o, b) in out.chunks_exact_mut(self.bytes).zip(&blocks[..n]) {
            o.copy_from_slice(&b[..self.bytes]);
        }
    }

    /// What the speculation finds (004 §3.3): bit i is set when the fetched MAC of chunk i
    /// equals the real speculated MAC of one of `values` at that position.
    #[cfg(test)]
    fn speculated_hits(&self, addr: u64, ts: u32, values: &[u64], fetched: &[u8]) -> u64 {
        let mut bits = 0;
        let mut want = [0u8; MAX_LINE];
        let n = fetched.len() / self.bytes;
        for &v in values {
            let line: Vec<u8> = (0..n).flat_map(|_| v.to_le_bytes()).collect();
            self.compute(addr, ts, &line, &mut want[..fetched.len()]);
            for (i, (w, f)) in want.chunks_exact(self.bytes).zip(fetched.chunks_exact(self.bytes)).enumerate() {
                if w == f {
                    bits |= 1 << i;
                }
            }
        }
        bits
    }
}

pub struct Otp {
    aes: Aes128,
    boot: BootKeys,
    /// Never-written program memory, [0, boot_end), holds the boot image (`boot_encrypted`).
    boot_end: u64,
    mac: Option<ChunkMacs>,
    /// When the last line read was verified (its chunk MACs), for `take_checked`.
    checked: Option<Cycle>,
    seed: Seed,
    key_epoch: u64,
    v: u32,
    timer: u64,
    ts_max: u64,
    ts_bits: u32,
    stamps: PerLine,
    covered: u64,
    line: u64,
    ts_buf: TsBuffer,
    ts_cache: Option<TsCache>,
    // statistics
    ts_cache_hits: u64,
    spec_predictions: u64,
    spec_hits: u64,
    reads: u64,
    writes: u64,
    pad_hidden: u64,
    pad_exposed: u64,
    reencryptions: u64,
    reencrypted_lines: u64,
    macs: ChunkMacCounts,
    /// Test builds: every (key epoch, address, stamp) a pad was made from for a write, which
    /// must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64, u32)>,
}

impl Otp {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Otp, ConfigError> {
        let ts_bits = p.u64_min("otp.ts_bits", 2)?;
        if ts_bits > 32 {
            return Err(ConfigError(format!("otp.ts_bits: {} exceeds the 32-bit time-stamp field", ts_bits)));
        }
        let ts_buf = TsBuffer::new(p, "otp.ts_buffer_entries")?;
        let ts_cache = TsCache::new(p.u64_min("otp.ts_cache_entries", 0)?)?;
        let line = m.line();
        let stamps = m.layout.per_line(Role::Counters, "otp time stamps", covered, B_TS);
        let k = derive_key(seed, 0x07b0);
        let mac_bytes = p.u64_min("otp.chunk_mac_bytes", 0)?;
        if mac_bytes > 8 {
            return Err(ConfigError(format!("otp.chunk_mac_bytes: {} exceeds the 8-B chunk it authenticates", mac_bytes)));
        }
        if mac_bytes > 0 && covered / CHUNK as u64 > u32::MAX as u64 {
            return Err(ConfigError(format!("otp.chunk_mac_bytes: {} B of memory exceed the MAC's 32-bit chunk number", covered)));
        }
        let mac = (mac_bytes > 0).then(|| ChunkMacs {
            key: Aes128::new(&derive_key(seed, 0x07b1)),
            bytes: mac_bytes as usize,
            store: m.layout.per_line(Role::Macs, "otp chunk MACs", covered, line / CHUNK as u64 * mac_bytes),
        });
        if let Some(fv) = m.spec.fv.as_mut() {
            fv.dedicate(p.u64_min("aes.latency", 1)?, p.rate("aes.throughput")? / p.freq("core.clock")?, 16);
        }
        let aes = Aes128::new(&derive_key(seed, 1));
        let v = u32::from_le_bytes([k[0], k[1], k[2], k[3]]);
        Ok(Otp {
            boot: BootKeys { aes: aes.clone(), v, mac: mac.clone() },
            boot_end: 0,
            aes,
            mac,
            checked: None,
            seed,
            key_epoch: 1,
            v,
            timer: 1,
            ts_max: (1u64 << ts_bits) - 1,
            ts_bits: ts_bits as u32,
            stamps,
            covered,
            line,
            ts_buf,
            ts_cache,
            ts_cache_hits: 0,
            spec_predictions: 0,
            spec_hits: 0,
            reads: 0,
            writes: 0,
            pad_hidden: 0,
            pad_exposed: 0,
            reencryptions: 0,
            reencrypted_lines: 0,
            macs: ChunkMacCounts::default(),
            #[cfg(test)]
            nonces_used: Default::default(),
        })
    }

    pub fn ts_addr(&self, addr: u64) -> u64 {
        self.stamps.addr(addr)
    }

    pub fn timer(&self) -> u64 {
        self.timer
    }

    pub fn reencryptions(&self) -> u64 {
        self.reencryptions
    }

    /// XOR `buf` with the pads of line `addr` at time stamp `ts`: stamp 0 is the boot
    /// image's, under the first key whatever the key now is.
    fn apply_pad(&self, addr: u64, ts: u32, buf: &mut [u8]) {
        let aes = if ts == 0 { &self.boot.aes } else { &self.aes };
        pad(aes, self.v, addr, ts, buf);
    }

    /// Check the chunk MACs `fetched` (arrived at `t_macs`) of the line just deciphered into
    /// `plain`, with MAC speculation when the Frequent Value Table is on (004 §3.3, Fig. 8).
    /// `times` are the fetch request, when the stamp was known (the pad's start) and when the
    /// pad was ready; `tr`
    /// is the line's transfer and `ready` when it was usable. Returns when the access is verified.
    #[allow(clippy::too_many_arguments)]
    fn check_chunks(
        &mut self,
        m: &mut Machine,
        addr: u64,
        ts: u32,
        initial: bool,
        times: (Cycle, Cycle, Cycle),
        tr: Transfer,
        (fetched, t_macs): (&[u8], Cycle),
        ready: Cycle,
        plain: &[u8],
    ) -> Result<Cycle, IntegrityError> {
        let (t_request, t_stamp, t_pad) = times;
        let c = self.mac.as_ref().expect("chunk MACs on");
        let n = plain.len() / CHUNK;
        let len = n * c.bytes;
        if !(initial && all_zero(&fetched[..len])) {
            let mut want = [0u8; MAX_LINE];
            c.compute(addr, ts, plain, &mut want[..len]);
            if want[..len] != fetched[..len] {
                self.macs.failures += 1;
                return Err(IntegrityError::tampered(addr, format!("otp chunk MAC mismatch (time stamp {}): line, stamp or MACs were changed", ts)));
            }
        }
        // Each chunk is plaintext once in and XORed with its (precomputed) pad.
        let mut arrive = [0; MAX_LINE / CHUNK];
        chunk_arrivals(m.port.beat(), tr, CHUNK as u64, &mut arrive[..n]);
        let mut plain_at = [0; MAX_LINE / CHUNK];
        for (p, &a) in plain_at.iter_mut().zip(&arrive[..n]) {
            *p = a.max(t_pad) + m.xor_latency;
        }
        // Which chunks the speculation matches: decided on the deciphered chunk (the CAM
        // compares it, or its ciphertext, with the table; the fetched MAC must then equal the
        // speculated one, as it does whenever the functional check above passed).
        let (mut vals, mut k) = ([0u64; 64], 0);
        let mut hits = 0u64;
        let mut frequent = 0u64;
        if let Some(fv) = &m.spec.fv {
            for v in fv.table.values() {
                vals[k] = v;
                k += 1;
            }
            frequent = fv.table.frequent_chunks(plain);
            // The never-written line has no MACs to match.
            hits = if initial { 0 } else { frequent };
            #[cfg(test)]
            if !initial {
                assert_eq!(hits, c.speculated_hits(addr, ts, &vals[..k], &fetched[..len]), "plaintext and MAC matching disagree");
            }
        }
        // Demand MACs (one AES per chunk once it is plaintext) first, then this miss's
        // speculation: the MAC of every table value at every position, posted with the fetch
        // request (004 §3.2 ①-②, `speculation.at_fetch`) or else from when the stamp is known,
        // each not started unless it beats the chunk's demand MAC.
        let lat = m.aes.latency();
        let mut done_at = [0; MAX_LINE / CHUNK];
        for i in 0..n {
            if hits >> i & 1 == 0 {
                done_at[i] = m.aes.run(plain_at[i], 16).max(t_macs) + 1;
            }
        }
        let mut done = ready;
        if let Some(fv) = m.spec.fv.as_mut() {
            let mut launched = 0u64;
            let mut spec = [0; MAX_LINE / CHUNK];
            let engine = fv.engine.as_mut().unwrap_or(&mut m.aes);
            let post = if fv.at_fetch { t_request } else { t_stamp };
            for i in 0..if k > 0 { n } else { 0 } {
                if let Some(d) = engine.run_by(post, k as u64 * 16, plain_at[i] + lat) {
                    spec[i] = d;
                    launched |= 1 << i;
                }
            }
            let (mut early, mut slow) = (0, ready);
            for i in 0..n {
                let mut ordinary = done_at[i];
                if hits >> i & 1 == 1 {
                    if launched >> i & 1 == 1 {
                        done_at[i] = plain_at[i].max(spec[i]).max(t_macs) + fv.match_latency;
                        // Without speculation: a MAC computation once plaintext (uncontended).
                        ordinary = (plain_at[i] + lat).max(t_macs) + 1;
                        early += (done_at[i] < ordinary) as u64;
                        self.macs.speculated += 1;
                    } else {
                        done_at[i] = m.aes.run(plain_at[i], 16).max(t_macs) + 1;
                        ordinary = done_at[i];
                    }
                }
                slow = slow.max(ordinary);
                done = done.max(done_at[i]);
            }
            hits &= launched;
            let counts = &mut fv.counts;
            counts.line(n, frequent);
            counts.hits += hits.count_ones() as u64;
            counts.early += early;
            counts.encryptions += k as u64 * launched.count_ones() as u64;
            counts.saved_cycles += slow.saturating_sub(done);
        } else {
            done = done_at[..n].iter().fold(done, |d, &x| d.max(x));
        }
        self.macs.checks += n as u64;
        self.macs.check_exposed += done - ready;
        m.note_check(done);
        Ok(done)
    }

    /// TIMER is exhausted: new key, every written line re-encrypted under it with time
    /// stamp 1; pads stay unique because the address is part of the pad input.
    fn rekey(&mut self, m: &mut Machine, t: Cycle) -> Cycle {
        let old = self.aes.clone();
        self.key_epoch += 1;
        self.aes = Aes128::new(&derive_key(self.seed, self.key_epoch));
        let mut done = t;
        let mut buf = vec![0u8; self.line as usize];
        // Streamed line after line (each read issued when the previous one got the bus), not
        // all at `t`: bookings then start near the frontier instead of searching past every
        // earlier one.
        let (mut t_rd, mut t_aes) = (t, t);
        for page in m.port.touched_pages(0, self.covered) {
            for addr in (page..page + crate::mem::PAGE).step_by(self.line as usize) {
                let ta = self.ts_addr(addr);
                let mut tsb = [0u8; B_TS as usize];
                let (_, tr) = m.port.read_pair(ta, &mut tsb, addr, &mut buf, t_rd);
                let ts = u32::from_le_bytes(tsb);
                if addr >= self.boot_end && is_initial(ts as u64, &buf) {
                    continue;
                }
                // Decrypt under the old key...
                let new = std::mem::replace(&mut self.aes, old.clone());
                self.apply_pad(addr, ts, &mut buf);
                self.aes = new;
                // ...and encrypt under the new one.
                self.apply_pad(addr, 1, &mut buf);
                t_rd = tr.first.saturating_sub(m.port.latency()).max(t);
                let p = m.aes.run(tr.last.max(t_aes), 2 * self.line);
                t_aes = p.saturating_sub(m.aes.latency());
                done = m.port.write_pair(addr, &buf, ta, &1u32.to_le_bytes(), p);
                if let Some(c) = &self.mac {
                    // The MACs bind the stamp: recomputed for stamp 1 from the plaintext.
                    let mut plain = buf.clone();
                    self.apply_pad(addr, 1, &mut plain);
                    let mut macs = [0u8; MAX_LINE];
                    let k = plain.len() / CHUNK * c.bytes;
                    c.compute(addr, 1, &plain, &mut macs[..k]);
                    let t_m = m.aes.run(p, (plain.len() / CHUNK * 16) as u64);
                    done = done.max(m.port.write(c.store.addr(addr), &macs[..k], t_m));
                }
                self.reencrypted_lines += 1;
            }
        }
        // Every stamp was rewritten behind the buffer's back.
        self.ts_buf.words.clear();
        self.reencryptions += 1;
        self.timer = 1;
        if let Some(c) = &mut self.ts_cache {
            c.clear();
        }
        done
    }
}

impl Encryption for Otp {
    fn name(&self) -> &'static str {
        "otp"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.ts_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let ta = self.ts_addr(addr);
        // The stamp is read first and the line after it: let the host load both at once.
        m.port.prefetch(addr);
        let cached = self.ts_cache.as_mut().and_then(|c| c.get(ta));
        // Chunk MACs come with the line, in its burst (004 §2.2); the stamp is then read on its own.
        let mut macs = [0u8; MAX_LINE];
        let mac_len = self.mac.as_ref().map_or(0, |c| out.len() / CHUNK * c.bytes);
        let mac_addr = self.mac.as_ref().map_or(0, |c| c.store.addr(addr));
        let mut t_macs = 0;
        let (ts, t_ts, tr) = match cached {
            // On chip: no bus read, the pad starts at request time (Fig. 7c).
            Some(v) => {
                self.ts_cache_hits += 1;
                if mac_len > 0 {
                    let (tr, tm) = m.port.read_beside(addr, out, mac_addr, &mut macs[..mac_len], t);
                    t_macs = tm.last;
                    (v, t + 1, tr)
                } else {
                    (v, t + 1, m.port.read(addr, out, t))
                }
            }
            None => {
                let (v, tt, tr) = if mac_len > 0 {
                    let (v, tt) = self.ts_buf.read(&mut m.port, ta, t);
                    let (tr, tm) = m.port.read_beside(addr, out, mac_addr, &mut macs[..mac_len], t);
                    t_macs = tm.last;
                    (v, tt, tr)
                } else {
                    self.ts_buf.read_with_line(&mut m.port, ta, addr, out, t)
                };
                if let Some(c) = &mut self.ts_cache {
                    c.put(ta, v);
                }
                (v, tt, tr)
            }
        };
        // The pad depends only on the time stamp: start it as soon as the stamp is here, or
        // at request time on a guess that the stamp then confirms.
        let mut t_pad = None;
        if cached.is_none() {
            if let Some(pr) = &mut m.spec.meta {
                if let Some(guess) = pr.predict(addr) {
                    self.spec_predictions += 1;
                    let t_guess = m.aes.run(t + 1, out.len() as u64);
                    if guess == ts as u64 {
                        self.spec_hits += 1;
                        t_pad = Some(t_guess);
                    }
                }
                pr.observe(addr, ts as u64);
            }
        }
        let (t_pad, t_start) = match t_pad {
            Some(tp) => (tp, t + 1),
            None => (m.aes.run(t_ts, out.len() as u64), t_ts),
        };
        // Never-written memory is raw zeros unless it starts encrypted (the boot image).
        let initial = addr >= self.boot_end && is_initial(ts as u64, out);
        if !initial {
            self.apply_pad(addr, ts, out);
        }
        let ready = tr.last.max(t_pad) + m.xor_latency;
        let exposed = t_pad.saturating_sub(tr.last);
        let pad_time = t_pad - t_start;
        self.pad_exposed += exposed;
        self.pad_hidden += pad_time.saturating_sub(exposed);
        self.checked = None;
        if self.mac.is_some() {
            let done = self.check_chunks(m, addr, ts, initial, (t, t_start, t_pad), tr, (&macs[..mac_len], t_macs), ready, out)?;
            self.checked = Some(done);
        }
        Ok(ready)
    }

    /// Memory's stamp and line read straight from the port (stamps are written through the
    /// buffer to memory, so memory's is current), without the stamp buffer's bookkeeping,
    /// which cost as much as the rest of the read. With chunk MACs or a stamp cache: `read_line`.
    fn read_installed(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        if self.mac.is_some() || self.ts_cache.is_some() {
            return self.read_line(m, addr, t, out);
        }
        let mut b = [0u8; 4];
        let (_, tr) = m.port.read_pair(self.ts_addr(addr), &mut b, addr, out, t);
        let ts = u32::from_le_bytes(b);
        if !(addr >= self.boot_end && is_initial(ts as u64, out)) {
            self.apply_pad(addr, ts, out);
        }
        Ok(tr.last + m.xor_latency)
    }

    fn take_checked(&mut self) -> Option<Cycle> {
        self.checked.take()
    }

    fn boot_encrypted(&mut self, end: u64) -> Result<Option<Arc<dyn BootImage>>, String> {
        self.boot_end = end;
        Ok(Some(Boot::image(self.boot.clone(), end, self.line)))
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let mut t = t;
        if self.timer >= self.ts_max {
            t = self.rekey(m, t);
        }
        self.timer += 1;
        let ts = self.timer as u32;
        #[cfg(test)]
        assert!(self.nonces_used.insert((self.key_epoch, addr, ts)), "otp reused the pad of stamp {} at {:#x}", ts, addr);
        let t_pad = m.aes.run(t, plain.len() as u64);
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.apply_pad(addr, ts, ct);
        let t_x = t_pad + m.xor_latency;
        let ta = self.ts_addr(addr);
        if let Some(c) = &mut self.ts_cache {
            c.put(ta, ts);
        }
        let stamp_done = self.ts_buf.write(&mut m.port, ta, ts, t_x);
        let done = match &self.mac {
            // The MACs go with the line, in its burst (004 §2.2).
            Some(c) => {
                let mut macs = [0u8; MAX_LINE];
                let k = plain.len() / CHUNK * c.bytes;
                c.compute(addr, ts, plain, &mut macs[..k]);
                let t_m = m.aes.run(t, (plain.len() / CHUNK * 16) as u64);
                m.port.write_beside(addr, ct, c.store.addr(addr), &macs[..k], t_x.max(t_m))
            }
            None => m.port.write(addr, ct, t_x),
        };
        Ok(done.max(stamp_done))
    }

    fn drop_cached(&mut self) {
        self.ts_buf.words.clear();
        if let Some(c) = &mut self.ts_cache {
            c.clear();
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        let mut v = vec![Meta::new(MetaKind::PadStamp, self.ts_addr(addr), B_TS)];
        if let Some(c) = &self.mac {
            v.push(Meta::new(MetaKind::ChunkMacs("otp"), c.store.addr(addr), c.store.bytes));
        }
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes) = (0, 0);
        self.macs = ChunkMacCounts::default();
        self.ts_buf.words.reset_stats();
        (self.pad_hidden, self.pad_exposed, self.reencryptions, self.reencrypted_lines) = (0, 0, 0, 0);
        (self.ts_cache_hits, self.spec_predictions, self.spec_hits) = (0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        self.stamps.overhead() + self.mac.as_ref().map_or(0.0, |c| c.store.overhead())
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("otp.reads", self.reads);
        out.int("otp.writes", self.writes);
        out.int("otp.timer", self.timer);
        out.int("otp.ts_bits", self.ts_bits as u64);
        out.int("otp.ts_reads", self.ts_buf.words.reads);
        out.int("otp.ts_bus_reads", self.ts_buf.words.bus_reads());
        let (hits, reads) = self.ts_buf.words.hits();
        out.rate("otp.ts_buffer_hit_rate", hits, reads);
        out.int("otp.pad_hidden_cycles", self.pad_hidden);
        out.int("otp.pad_exposed_cycles", self.pad_exposed);
        out.rate("otp.pad_hidden_fraction", self.pad_hidden, self.pad_hidden + self.pad_exposed);
        out.int("otp.reencryptions", self.reencryptions);
        out.int("otp.reencrypted_lines", self.reencrypted_lines);
        out.float("otp.space_overhead", self.space_overhead());
        out.int("otp.ts_cache_entries", self.ts_cache.as_ref().map_or(0, |c| c.values.len() as u64));
        out.int("otp.ts_cache_hits", self.ts_cache_hits);
        out.rate("otp.ts_cache_hit_rate", self.ts_cache_hits, self.reads);
        out.int("otp.spec_predictions", self.spec_predictions);
        out.int("otp.spec_hits", self.spec_hits);
        out.rate("otp.spec_hit_rate", self.spec_hits, self.spec_predictions);
        out.rate("otp.pad_early_fraction", self.ts_cache_hits + self.spec_hits, self.reads);
        if self.mac.is_some() {
            self.macs.stats("otp", self.reads, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{frequent_line_miss, frequent_lines, params, speculated_reads, stat};
    use crate::Engine;

    #[test]
    fn mac_speculation_decides_as_the_real_speculated_macs_do() {
        // Every miss below also computes the real MAC of every table value at every position
        // and asserts the matches equal the plaintext decision (check_chunks).
        for n in [8, 16, 32] {
            let fv = format!("speculation.frequent_values={}", n);
            let e = speculated_reads("otp", &["otp.chunk_mac_bytes=4", "aes.engines=4", &fv]);
            let (chunks, freq) = (stat(&e, "speculation.fv_chunks"), stat(&e, "speculation.fv_frequent_chunks"));
            let spec = stat(&e, "otp.mac_speculated");
            assert!(spec > 0.0 && spec <= freq, "{} speculated of {} frequent", spec, freq);
            assert_eq!(stat(&e, "otp.mac_checks"), chunks);
        }
    }

    /// When the access to a line of zeros (a frequent value) at 0x2000 is verified, cycles
    /// after its request, with data used only once verified (004 §2.2).
    fn verified_after(extra: &[&str]) -> (u64, Engine) {
        let mut p = params("none", "otp", extra);
        for kv in ["otp.chunk_mac_bytes=4", "aes.engines=4", "aes.latency=65", "memory.latency=250", "speculation.use_before_verify=false"] {
            p.set_str(kv).unwrap();
        }
        let mut e = Engine::new(&p, 3).unwrap();
        let o = frequent_line_miss(&mut e);
        assert_eq!(o.ready, o.verified);
        (o.verified, e)
    }

    #[test]
    fn mac_speculation_hides_the_mac_computation_of_a_line_of_frequent_values() {
        // 004 Fig. 8: the pad is precomputed either way; without speculation the last chunk's
        // MAC takes one AES latency (65 cycles) after it arrives, with it the line is verified
        // when its MACs are in: 32 B, four 5-cycle beats after the line.
        let (off, _) = verified_after(&[]);
        let (on, e) = verified_after(&["speculation.frequent_values=8"]);
        assert!(on + 65 - 4 * 5 <= off, "verified after {} cycles with speculation, {} without", on, off);
        // Both lines' chunks (zeros, and 0x0101…01) are table values, and even 0x2040's
        // speculation, started once its stamp came from memory, beat its MAC computations.
        assert_eq!(stat(&e, "otp.mac_speculated"), 16.0);
    }

    #[test]
    fn mac_speculation_posted_with_the_fetch_is_booked_from_the_request() {
        // 004 §3.2 ①-②: on a speculation engine of its own the speculated MACs start at the
        // request, not once the stamp is in; with a slow stamp (from memory, before the line)
        // they are ready no later, and the engine takes them earlier.
        let mut r = Vec::new();
        for at_fetch in ["true", "false"] {
            let at = format!("speculation.at_fetch={}", at_fetch);
            let (v, e) = verified_after(&["speculation.frequent_values=8", "speculation.engines=1", "otp.ts_buffer_entries=1", &at]);
            r.push((v, stat(&e, "speculation.engine_wait_cycles"), stat(&e, "otp.mac_speculated")));
        }
        assert!(r[0].0 <= r[1].0, "verified after {:?} (at the fetch, after the stamp)", r);
        assert!(r[0].2 >= r[1].2 && r[0].2 > 0.0, "{:?}", r);
    }

    #[test]
    fn chunk_macs_catch_every_change_to_line_stamp_or_macs_with_and_without_speculation() {
        for spec in ["speculation.frequent_values=0", "speculation.frequent_values=8"] {
            for what in 0..4 {
                let mut e = Engine::new(&params("none", "otp", &["otp.chunk_mac_bytes=4", spec]), 5).unwrap();
                e.write(0x8000, &[0u8; 64], 0).unwrap();
                e.write(0x8000, &[7u8; 8], 0).unwrap();
                e.flush(0).unwrap();
                let md = e.metadata_of(0x8000);
                let macs = md.iter().find(|m| m.kind == MetaKind::ChunkMacs("otp")).expect("chunk MACs listed");
                assert_eq!(macs.len, 32);
                let ts = md.iter().find(|m| m.kind == MetaKind::PadStamp).unwrap();
                let flip = |e: &mut Engine, a: u64| {
                    let mut b = [0u8; 1];
                    e.untrusted().read(a, &mut b);
                    e.untrusted().write(a, &[b[0] ^ 1]);
                };
                match what {
                    // a bit of a zero chunk: counter mode is malleable, the MAC is not
                    0 => flip(&mut e, 0x8000 + 20),
                    1 => flip(&mut e, macs.addr + 9),
                    2 => flip(&mut e, ts.addr),
                    _ => {}
                }
                let mut back = vec![0u8; 64];
                let r = e.read(0x8000, &mut back, 0);
                if what == 3 {
                    r.unwrap();
                    assert_eq!(back[..8], [7u8; 8]);
                    assert_eq!(back[8..], [0u8; 56]);
                } else {
                    let err = r.expect_err("a change went unnoticed");
                    assert!(err.what.contains("otp chunk MAC"), "{}", err);
                    assert_eq!(stat(&e, "otp.mac_failures"), 1.0);
                }
            }
        }
    }

    #[test]
    fn a_timer_wrap_recomputes_the_macs_under_the_new_stamp() {
        // 3-bit stamps: TIMER wraps after 6 write-backs and re-encrypts every written line.
        let mut e = Engine::new(&params("none", "otp", &["otp.chunk_mac_bytes=4", "otp.ts_bits=3", "speculation.frequent_values=8"]), 5).unwrap();
        let want = frequent_lines(&mut e, 20);
        assert!(stat(&e, "otp.reencryptions") > 0.0);
        for (k, w) in want.iter().enumerate() {
            let mut got = vec![0u8; 64];
            e.read(0x10_0000 + k as u64 * 64, &mut got, 0).unwrap();
            assert_eq!(&got, w, "line {}", k);
        }
        assert_eq!(stat(&e, "otp.mac_failures"), 0.0);
    }
}
