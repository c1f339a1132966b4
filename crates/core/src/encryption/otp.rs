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
//! Memory is all-zero plaintext at power-on; instead of encrypting it all up front, a line
//! whose time stamp is 0 and whose bytes are all zero is that initial state (TIMER starts at
//! 1, so no write-back ever produces time stamp 0).

use super::{derive_key, Encryption};
use crate::integrity::IntegrityError;
use crate::layout::{is_initial, Meta, MetaKind, PerLine, B_TS, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use crate::wordbuf::TsBuffer;
use secmem_crypto::Aes128;
use secmem_timing::{Cycle, Tags};
use crate::decl::{param, Component, Def, Kind};

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
    ],
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

pub struct Otp {
    aes: Aes128,
    seed: u64,
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
    /// Test builds: every (key epoch, address, stamp) a pad was made from for a write, which
    /// must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64, u32)>,
}

impl Otp {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Otp, ConfigError> {
        let ts_bits = p.u64_min("otp.ts_bits", 2)?;
        if ts_bits > 32 {
            return Err(ConfigError(format!("otp.ts_bits: {} exceeds the 32-bit time-stamp field", ts_bits)));
        }
        let ts_buf = TsBuffer::new(p, "otp.ts_buffer_entries")?;
        let ts_cache = TsCache::new(p.u64_min("otp.ts_cache_entries", 0)?)?;
        let line = m.line();
        let stamps = m.layout.per_line("otp time stamps", covered, B_TS);
        let k = derive_key(seed, 0x07b0);
        Ok(Otp {
            aes: Aes128::new(&derive_key(seed, 1)),
            seed,
            key_epoch: 1,
            v: u32::from_le_bytes([k[0], k[1], k[2], k[3]]),
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

    /// XOR `buf` with the pads of line `addr` at time stamp `ts`.
    fn apply_pad(&self, addr: u64, ts: u32, buf: &mut [u8]) {
        let mut pads = [[0u8; 16]; MAX_LINE / 16];
        let n = buf.len() / 16;
        for (i, pad) in pads[..n].iter_mut().enumerate() {
            pad[..4].copy_from_slice(&self.v.to_le_bytes());
            pad[4..12].copy_from_slice(&(addr | i as u64).to_le_bytes());
            pad[12..].copy_from_slice(&ts.to_le_bytes());
        }
        self.aes.encrypt_many(&mut pads[..n]);
        for (chunk, pad) in buf.chunks_exact_mut(16).zip(&pads[..n]) {
            for (b, p) in chunk.iter_mut().zip(pad) {
                *b ^= p;
            }
        }
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
                if is_initial(ts as u64, &buf) {
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
        let (ts, t_ts, tr) = match cached {
            // On chip: no bus read, the pad starts at request time (Fig. 7c).
            Some(v) => {
                self.ts_cache_hits += 1;
                (v, t + 1, m.port.read(addr, out, t))
            }
            None => {
                let (v, tt, tr) = self.ts_buf.read_with_line(&mut m.port, ta, addr, out, t);
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
        if !is_initial(ts as u64, out) {
            self.apply_pad(addr, ts, out);
        }
        let ready = tr.last.max(t_pad) + m.xor_latency;
        let exposed = t_pad.saturating_sub(tr.last);
        let pad_time = t_pad - t_start;
        self.pad_exposed += exposed;
        self.pad_hidden += pad_time.saturating_sub(exposed);
        Ok(ready)
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
        Ok(m.port.write(addr, ct, t_x).max(stamp_done))
    }

    fn drop_cached(&mut self) {
        self.ts_buf.words.clear();
        if let Some(c) = &mut self.ts_cache {
            c.clear();
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::PadStamp, self.ts_addr(addr), B_TS)]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes) = (0, 0);
        self.ts_buf.words.reset_stats();
        (self.pad_hidden, self.pad_exposed, self.reencryptions, self.reencrypted_lines) = (0, 0, 0, 0);
        (self.ts_cache_hits, self.spec_predictions, self.spec_hits) = (0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        self.stamps.overhead()
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
    }
}
