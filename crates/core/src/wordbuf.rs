//! On-chip buffers of recently fetched bus words of a metadata region (time stamps, random
//! vectors, counters): a hit saves the bus read. They hold trusted copies of the words' bytes:
//! once a word is on chip, what the adversary changes in memory is not seen until the word
//! leaves the buffer (as in hardware; 000 Table 1's 32-entry time-stamp buffer).
//!
//! A word may be only partly known on chip (a 4-B stamp written into an 8-B word whose other
//! half was never fetched): each entry keeps a mask of the bytes it holds, and a read of bytes
//! it does not hold fetches the word.

use crate::params::{ConfigError, Params};
use crate::port::Port;
use secmem_timing::{Cycle, Tags, Transfer};

/// Bytes of a bus word.
pub(crate) const WORD: u64 = 8;

/// A buffer of 8-byte bus words; 0 entries: no buffer (every read goes to memory).
pub struct WordBuffer {
    tags: Option<Tags>,
    /// The bytes of each entry's word, little-endian, and which of them are known.
    values: Vec<u64>,
    known: Vec<u8>,
    pub reads: u64,
    pub hits: u64,
}

/// Which bytes of a word `n` bytes at `addr` are, as a mask.
#[inline]
pub(crate) fn mask(addr: u64, n: usize) -> u8 {
    debug_assert!((addr % WORD) as usize + n <= WORD as usize, "a buffered read stays inside one word");
    (((1u16 << n) - 1) << (addr % WORD)) as u8
}

impl WordBuffer {
    pub fn new(entries: u64, key: &str) -> Result<WordBuffer, ConfigError> {
        let tags = if entries == 0 {
            None
        } else {
            Some(Tags::new(entries * WORD, entries as usize, WORD).map_err(|e| ConfigError(format!("{}: {}", key, e)))?)
        };
        let n = tags.as_ref().map_or(0, |t| t.slots());
        Ok(WordBuffer { tags, values: vec![0; n], known: vec![0; n], reads: 0, hits: 0 })
    }

    /// The buffered copy of `out.len()` bytes at `addr`, if every one of them is on chip.
    #[inline]
    fn lookup(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.reads += 1;
        let Some(tags) = &mut self.tags else { return false };
        let Some(s) = tags.find_wide(addr & !(WORD - 1)) else { return false };
        let m = mask(addr, out.len());
        if self.known[s as usize] & m != m {
            return false;
        }
        tags.touch(s);
        let off = (addr % WORD) as usize;
        out.copy_from_slice(&self.values[s as usize].to_le_bytes()[off..off + out.len()]);
        self.hits += 1;
        true
    }

    /// Keep `bytes` at `addr` on chip (the whole fetched word, or what was just written).
    #[inline]
    fn keep(&mut self, addr: u64, bytes: &[u8]) {
        let Some(tags) = &mut self.tags else { return };
        let (s, hit) = tags.access_wide(addr & !(WORD - 1));
        let s = s as usize;
        if !hit {
            self.known[s] = 0;
        }
        let off = (addr % WORD) as usize;
        let mut w = self.values[s].to_le_bytes();
        w[off..off + bytes.len()].copy_from_slice(bytes);
        self.values[s] = u64::from_le_bytes(w);
        self.known[s] |= mask(addr, bytes.len());
    }

    /// Read `out.len()` bytes at `addr` (inside one word), requested at `t`: when they are on
    /// chip. A miss fetches the whole word through the port when there is a buffer to keep it.
    #[inline]
    pub fn read(&mut self, port: &mut Port, addr: u64, out: &mut [u8], t: Cycle) -> Cycle {
        if self.lookup(addr, out) {
            return t + 1;
        }
        if self.tags.is_none() {
            return port.read(addr, out, t).last;
        }
        let wa = addr & !(WORD - 1);
        let mut w = [0u8; WORD as usize];
        let done = port.read(wa, &mut w, t).last;
        self.keep(wa, &w);
        let off = (addr - wa) as usize;
        out.copy_from_slice(&w[off..off + out.len()]);
        done
    }

    /// Read the bytes at `addr` and the line at `line_addr` after them (000 Fig. 7b): a
    /// buffered word costs no bus time; otherwise word and line go back to back in one
    /// transfer, so the word's beat never splits the gap the line needs. Returns when the
    /// bytes are on chip and the line's transfer.
    #[inline]
    pub fn read_with_line(&mut self, port: &mut Port, addr: u64, out: &mut [u8], line_addr: u64, line: &mut [u8], t: Cycle) -> (Cycle, Transfer) {
        if self.lookup(addr, out) {
            return (t + 1, port.read(line_addr, line, t));
        }
        if self.tags.is_none() {
            let (w, l) = port.read_pair(addr, out, line_addr, line, t);
            return (w.last, l);
        }
        let wa = addr & !(WORD - 1);
        let mut w = [0u8; WORD as usize];
        let (tw, tl) = port.read_pair(wa, &mut w, line_addr, line, t);
        self.keep(wa, &w);
        let off = (addr - wa) as usize;
        out.copy_from_slice(&w[off..off + out.len()]);
        (tw.last, tl)
    }

    /// Write `data` at `addr` through the port, posted at `t`; the bytes stay on chip.
    #[inline]
    pub fn write(&mut self, port: &mut Port, addr: u64, data: &[u8], t: Cycle) -> Cycle {
        self.keep(addr, data);
        port.write(addr, data, t)
    }

    /// `data` at `addr` was written to memory by the scheme itself (with its line): it stays
    /// on chip.
    #[inline]
    pub fn wrote(&mut self, addr: u64, data: &[u8]) {
        self.keep(addr, data);
    }

    pub fn bus_reads(&self) -> u64 {
        self.reads - self.hits
    }

    /// (hits, reads): the buffer's hit rate with its parts.
    pub fn hits(&self) -> (u64, u64) {
        (self.hits, self.reads)
    }

    pub fn clear(&mut self) {
        if let Some(tags) = &mut self.tags {
            for s in 0..tags.slots() as u32 {
                tags.invalidate(s);
            }
        }
        self.known.fill(0);
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
        Ok(TsBuffer { words: WordBuffer::new(p.u64_min(key, 1)?, key)? })
    }

    /// Read the 4-byte stamp at `ts_addr` requested at `t`: its value and arrival.
    #[inline]
    pub fn read(&mut self, port: &mut Port, ts_addr: u64, t: Cycle) -> (u32, Cycle) {
        let mut b = [0u8; 4];
        let done = self.words.read(port, ts_addr, &mut b, t);
        (u32::from_le_bytes(b), done)
    }

    /// Read the stamp at `ts_addr` and the line at `line_addr` into `line` (see
    /// `WordBuffer::read_with_line`). Returns (stamp, its arrival, line transfer).
    #[inline]
    pub fn read_with_line(&mut self, port: &mut Port, ts_addr: u64, line_addr: u64, line: &mut [u8], t: Cycle) -> (u32, Cycle, Transfer) {
        let mut b = [0u8; 4];
        let (tt, tr) = self.words.read_with_line(port, ts_addr, &mut b, line_addr, line, t);
        (u32::from_le_bytes(b), tt, tr)
    }

    /// Write a stamp (one bus beat); it stays buffered.
    #[inline]
    pub fn write(&mut self, port: &mut Port, ts_addr: u64, ts: u32, t: Cycle) -> Cycle {
        self.words.write(port, ts_addr, &ts.to_le_bytes(), t)
    }
}
