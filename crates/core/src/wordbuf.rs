//! On-chip buffers of recently fetched bus words of a metadata region (time stamps, random
//! vectors, counters): a hit saves the bus read. They hold word addresses only: values are
//! always read from untrusted memory, so what the adversary changed is what the scheme sees.

use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::ratio;
use secmem_timing::{Cycle, Tags, Transfer};

/// A buffer of `word`-byte bus words; 0 entries: no buffer.
pub struct WordBuffer {
    tags: Option<Tags>,
    word: u64,
    pub reads: u64,
    pub hits: u64,
}

impl WordBuffer {
    pub fn new(entries: u64, word: u64, key: &str) -> Result<WordBuffer, ConfigError> {
        let tags = if entries == 0 {
            None
        } else {
            Some(Tags::new(entries * word, entries as usize, word).map_err(|e| ConfigError(format!("{}: {}", key, e)))?)
        };
        Ok(WordBuffer { tags, word, reads: 0, hits: 0 })
    }

    /// A read of the word holding `addr`: whether it was buffered (it is now).
    #[inline]
    pub fn lookup(&mut self, addr: u64) -> bool {
        self.reads += 1;
        let hit = self.tags.as_mut().is_some_and(|tags| tags.access(addr & !(self.word - 1)).1);
        self.hits += hit as u64;
        hit
    }

    /// Fetch `bytes` at `addr` (inside one word) requested at `t`: when they are on chip.
    #[inline]
    pub fn read(&mut self, m: &mut Machine, addr: u64, bytes: u64, t: Cycle) -> Cycle {
        if self.lookup(addr) {
            return t + 1;
        }
        m.bus.read(t, bytes).last
    }

    /// The word at `addr` was just written: it stays buffered.
    #[inline]
    pub fn wrote(&mut self, addr: u64) {
        if let Some(tags) = &mut self.tags {
            tags.access(addr & !(self.word - 1));
        }
    }

    pub fn bus_reads(&self) -> u64 {
        self.reads - self.hits
    }

    pub fn hit_rate(&self) -> f64 {
        ratio(self.hits, self.reads)
    }

    pub fn clear(&mut self) {
        if let Some(tags) = &mut self.tags {
            for s in 0..tags.slots() as u32 {
                tags.invalidate(s);
            }
        }
    }

    pub fn reset_stats(&mut self) {
        (self.reads, self.hits) = (0, 0);
    }
}

/// The time-stamp buffer (000 Table 1: 32 entries of 8 bytes): time stamps are 4 B on an 8-B
/// bus, so a fetched bus word carries a neighbour's stamp along.
pub struct TsBuffer {
    pub words: WordBuffer,
}

impl TsBuffer {
    pub fn new(p: &Params, key: &str) -> Result<TsBuffer, ConfigError> {
        Ok(TsBuffer { words: WordBuffer::new(p.u64_min(key, 1)?, 8, key)? })
    }

    /// Read the 4-byte stamp at `ts_addr` requested at `t`: its value and arrival.
    #[inline]
    pub fn read(&mut self, m: &mut Machine, ts_addr: u64, t: Cycle) -> (u32, Cycle) {
        (m.mem.read_u32(ts_addr), self.words.read(m, ts_addr, 4, t))
    }

    /// Read the stamp at `ts_addr` and the line after it (000 Fig. 7b): a buffered stamp costs
    /// no bus time; otherwise stamp and line go back to back in one transfer, so the stamp's
    /// beat never splits the gap the line needs. Returns (stamp, its arrival, line transfer).
    #[inline]
    pub fn read_with_line(&mut self, m: &mut Machine, ts_addr: u64, line: u64, t: Cycle) -> (u32, Cycle, Transfer) {
        let ts = m.mem.read_u32(ts_addr);
        if self.words.lookup(ts_addr) {
            return (ts, t + 1, m.bus.read(t, line));
        }
        let bp = m.bus.params();
        let tr = m.bus.read(t, bp.width + line);
        (ts, tr.first, Transfer { first: tr.first + bp.beat_cycles, last: tr.last })
    }

    /// Write a stamp (one bus beat); the word stays buffered.
    #[inline]
    pub fn write(&mut self, m: &mut Machine, ts_addr: u64, ts: u32, t: Cycle) -> Cycle {
        m.mem.write_u32(ts_addr, ts);
        self.words.wrote(ts_addr);
        m.bus.write(t, 4)
    }
}
