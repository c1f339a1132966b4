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
use secmem_timing::{Cycle, Transfer};

/// Bytes of a bus word.
pub(crate) const WORD: u64 = 8;

/// A buffer of 8-byte bus words, fully associative with true LRU replacement; 0 entries: no
/// buffer (every read goes to memory).
///
/// The recency order is a doubly linked list over the entries rather than a stamp per entry:
/// most reads miss (bzip2: 6% hits), and a miss searched the stamps of all 32 entries for the
/// least, ~440 host instructions a stamp kept (callgrind, docs/speed.md). The list's oldest
/// end is the victim: the first empty entry by index while there is one (the list starts,
/// and `clear` puts it back, in index order), else the least recently used, as a stamped
/// set's search picks (`tests::replaces_as_a_stamped_set_does`).
pub struct WordBuffer {
    /// Word address / 8 + 1 of each entry; 0: empty.
    tag: Vec<u64>,
    /// The next older and next newer entry of each (`NIL` past the ends), and the ends.
    older: Vec<u32>,
    newer: Vec<u32>,
    oldest: u32,
    newest: u32,
    /// The bytes of each entry's word, little-endian, and which of them are known.
    values: Vec<u64>,
    known: Vec<u8>,
    /// The entries by tag: an open-addressed table (linear probing, at most a quarter full)
    /// of entry numbers, `NIL` where empty. 94% of bzip2's stamp reads miss, and a miss
    /// compared the word with every entry's tag (~80 host instructions on 32 entries); here
    /// it ends at the first empty slot.
    index: Vec<u32>,
    pub reads: u64,
    pub hits: u64,
}

const NIL: u32 = u32::MAX;

/// The index slot a tag's probe starts at, for an index of 2^`bits` slots.
#[inline]
fn home(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// Which bytes of a word `n` bytes at `addr` are, as a mask.
#[inline]
pub(crate) fn mask(addr: u64, n: usize) -> u8 {
    debug_assert!((addr % WORD) as usize + n <= WORD as usize, "a buffered read stays inside one word");
    (((1u16 << n) - 1) << (addr % WORD)) as u8
}

impl WordBuffer {
    pub fn new(entries: u64, key: &str) -> Result<WordBuffer, ConfigError> {
        let n = usize::try_from(entries).ok().filter(|&n| n < NIL as usize).ok_or_else(|| ConfigError(format!("{}: {} entries is too many", key, entries)))?;
        let slots = if n == 0 { 0 } else { (4 * n).next_power_of_two().max(2) };
        let mut b = WordBuffer {
            tag: vec![0; n],
            older: vec![NIL; n],
            newer: vec![NIL; n],
            oldest: NIL,
            newest: NIL,
            values: vec![0; n],
            known: vec![0; n],
            index: vec![NIL; slots],
            reads: 0,
            hits: 0,
        };
        b.clear();
        Ok(b)
    }

    /// The entry holding the word at `wa` (a multiple of [`WORD`]).
    #[inline]
    fn find(&self, wa: u64) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let key = (wa >> 3) + 1;
        let (bits, last) = (self.index.len().trailing_zeros(), self.index.len() - 1);
        let mut i = home(key, bits);
        loop {
            let e = self.index[i];
            if e == NIL {
                return None;
            }
            if self.tag[e as usize] == key {
                return Some(e as usize);
            }
            i = (i + 1) & last;
        }
    }

    /// Entry `s` (holding a word) leaves the index: the entries probed past its slot move
    /// back so that every probe still reaches its entry before an empty slot.
    fn unindex(&mut self, s: usize) {
        let (bits, last) = (self.index.len().trailing_zeros(), self.index.len() - 1);
        let mut i = home(self.tag[s], bits);
        while self.index[i] != s as u32 {
            i = (i + 1) & last;
        }
        let mut j = i;
        loop {
            j = (j + 1) & last;
            let e = self.index[j];
            if e == NIL {
                self.index[i] = NIL;
                return;
            }
            // The entry at j stays if its home lies cyclically in (i, j].
            let k = home(self.tag[e as usize], bits);
            let stays = if i <= j { i < k && k <= j } else { i < k || k <= j };
            if !stays {
                self.index[i] = e;
                i = j;
            }
        }
    }

    /// Entry `s`, just given a tag, into the index.
    fn reindex(&mut self, s: usize) {
        let (bits, last) = (self.index.len().trailing_zeros(), self.index.len() - 1);
        let mut i = home(self.tag[s], bits);
        while self.index[i] != NIL {
            i = (i + 1) & last;
        }
        self.index[i] = s as u32;
    }

    /// Make `s` the most recently used entry.
    #[inline]
    fn touch(&mut self, s: usize) {
        let s32 = s as u32;
        if self.newest == s32 {
            return;
        }
        // Unlink (it has a newer neighbour, as it is not the newest)...
        let (o, n) = (self.older[s], self.newer[s]);
        self.older[n as usize] = o;
        if o == NIL {
            self.oldest = n;
        } else {
            self.newer[o as usize] = n;
        }
        // ... and link it at the newest end.
        self.older[s] = self.newest;
        self.newer[s] = NIL;
        self.newer[self.newest as usize] = s32;
        self.newest = s32;
    }

    /// The buffered copy of `out.len()` bytes at `addr`, if every one of them is on chip:
    /// `Ok`, or `Err` with the word's entry if it holds some other bytes of it.
    #[inline]
    fn lookup(&mut self, addr: u64, out: &mut [u8]) -> Result<(), Option<usize>> {
        self.reads += 1;
        let Some(s) = self.find(addr & !(WORD - 1)) else { return Err(None) };
        let m = mask(addr, out.len());
        if self.known[s] & m != m {
            return Err(Some(s));
        }
        self.touch(s);
        let off = (addr % WORD) as usize;
        out.copy_from_slice(&self.values[s].to_le_bytes()[off..off + out.len()]);
        self.hits += 1;
        Ok(())
    }

    /// Keep `bytes` at `addr` on chip (the whole fetched word, or what was just written).
    #[inline]
    fn keep(&mut self, addr: u64, bytes: &[u8]) {
        if !self.tag.is_empty() {
            let found = self.find(addr & !(WORD - 1));
            self.keep_at(found, addr, bytes);
        }
    }

    /// `keep`, with the word's entry found already (`None`: it has none).
    #[inline]
    fn keep_at(&mut self, found: Option<usize>, addr: u64, bytes: &[u8]) {
        let s = match found {
            Some(s) => s,
            None => {
                let s = self.oldest as usize;
                if self.tag[s] != 0 {
                    self.unindex(s);
                }
                (self.tag[s], self.known[s]) = ((addr >> 3) + 1, 0);
                self.reindex(s);
                s
            }
        };
        self.touch(s);
        let off = (addr % WORD) as usize;
        let mut w = self.values[s].to_le_bytes();
        crate::mem::copy_small(&mut w[off..off + bytes.len()], bytes);
        self.values[s] = u64::from_le_bytes(w);
        self.known[s] |= mask(addr, bytes.len());
    }

    /// Read `out.len()` bytes at `addr` (inside one word), requested at `t`: when they are on
    /// chip. A miss fetches the whole word through the port when there is a buffer to keep it.
    #[inline]
    pub fn read(&mut self, port: &mut Port, addr: u64, out: &mut [u8], t: Cycle) -> Cycle {
        let Err(found) = self.lookup(addr, out) else { return t + 1 };
        if self.tag.is_empty() {
            return port.read(addr, out, t).last;
        }
        let wa = addr & !(WORD - 1);
        let mut w = [0u8; WORD as usize];
        let done = port.read(wa, &mut w, t).last;
        self.keep_at(found, wa, &w);
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
        let Err(found) = self.lookup(addr, out) else { return (t + 1, port.read(line_addr, line, t)) };
        if self.tag.is_empty() {
            let (w, l) = port.read_pair(addr, out, line_addr, line, t);
            return (w.last, l);
        }
        let wa = addr & !(WORD - 1);
        let mut w = [0u8; WORD as usize];
        let (tw, tl) = port.read_pair(wa, &mut w, line_addr, line, t);
        self.keep_at(found, wa, &w);
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

    /// Empty every entry; the recency order back to index order (entry 0 the oldest).
    pub fn clear(&mut self) {
        let n = self.tag.len() as u32;
        for s in 0..n {
            self.older[s as usize] = if s == 0 { NIL } else { s - 1 };
            self.newer[s as usize] = if s + 1 == n { NIL } else { s + 1 };
        }
        (self.oldest, self.newest) = if n == 0 { (NIL, NIL) } else { (0, n - 1) };
        self.tag.fill(0);
        self.known.fill(0);
        self.index.fill(NIL);
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

#[cfg(test)]
mod tests {
    use super::*;
    use secmem_timing::Tags;

    /// The buffer as it was, on a stamped set of `Tags` (one set, every entry a way).
    struct Stamped {
        tags: Tags,
        values: Vec<u64>,
        known: Vec<u8>,
    }

    impl Stamped {
        fn new(n: usize) -> Stamped {
            Stamped { tags: Tags::new(n as u64 * WORD, n, WORD).unwrap(), values: vec![0; n], known: vec![0; n] }
        }

        fn lookup(&mut self, addr: u64, out: &mut [u8]) -> bool {
            let Some(s) = self.tags.find(addr & !(WORD - 1)) else { return false };
            let m = mask(addr, out.len());
            if self.known[s as usize] & m != m {
                return false;
            }
            self.tags.touch(s);
            let off = (addr % WORD) as usize;
            out.copy_from_slice(&self.values[s as usize].to_le_bytes()[off..off + out.len()]);
            true
        }

        fn keep(&mut self, addr: u64, bytes: &[u8]) -> usize {
            let (s, hit) = self.tags.access(addr & !(WORD - 1));
            let s = s as usize;
            if !hit {
                self.known[s] = 0;
            }
            let off = (addr % WORD) as usize;
            let mut w = self.values[s].to_le_bytes();
            w[off..off + bytes.len()].copy_from_slice(bytes);
            self.values[s] = u64::from_le_bytes(w);
            self.known[s] |= mask(addr, bytes.len());
            s
        }

        fn clear(&mut self) {
            for s in 0..self.tags.slots() as u32 {
                self.tags.invalidate(s);
            }
            self.known.fill(0);
        }
    }

    #[test]
    fn replaces_as_a_stamped_set_does() {
        // Reads, partial writes and clears over a few more words than entries, on buffers of
        // 1-33 entries: every read's answer and bytes, and the entry each word is kept in,
        // are the stamped set's.
        let mut z = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            z % n
        };
        for n in [1usize, 2, 3, 4, 5, 7, 8, 31, 32, 33] {
            let (mut b, mut r) = (WordBuffer::new(n as u64, "t").unwrap(), Stamped::new(n));
            let (mut hits, mut kept) = (0, 0);
            for _ in 0..20_000 {
                let addr = rnd(n as u64 + 4) * WORD + rnd(8);
                let len = [1usize, 2, 4, 8][rnd(4) as usize].min((WORD - addr % WORD) as usize);
                match rnd(20) {
                    0 => {
                        b.clear();
                        r.clear();
                    }
                    1..=9 => {
                        let (mut x, mut y) = ([0u8; 8], [0u8; 8]);
                        let got = b.lookup(addr, &mut x[..len]);
                        assert_eq!(got.is_ok(), r.lookup(addr, &mut y[..len]), "{} entries: read at {:#x}", n, addr);
                        assert_eq!(x, y);
                        if got.is_ok() {
                            hits += 1;
                        } else {
                            // A miss fetches the whole word and keeps it.
                            let wa = addr & !(WORD - 1);
                            let w = (wa ^ 0x5a5a).to_le_bytes();
                            b.keep_at(got.unwrap_err(), wa, &w);
                            assert_eq!(b.find(wa), Some(r.keep(wa, &w)));
                        }
                    }
                    _ => {
                        let v = rnd(u64::MAX).to_le_bytes();
                        b.keep(addr, &v[..len]);
                        assert_eq!(b.find(addr & !(WORD - 1)), Some(r.keep(addr, &v[..len])), "{} entries: write at {:#x}", n, addr);
                        kept += 1;
                    }
                }
            }
            assert!(hits > 1000 && kept > 1000, "{} entries: {} hits, {} writes", n, hits, kept);
        }
    }

    #[test]
    fn the_index_finds_every_word_a_scan_of_the_tags_finds() {
        // Words from ranges small and large (few and many probe collisions), kept, replaced
        // and cleared: after every step each word's entry by the index is the scan's.
        let mut z = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: u64| {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            z % n
        };
        for n in [1usize, 2, 3, 7, 8, 32, 33] {
            for range in [n as u64 + 3, 4 * n as u64, 1 << 40] {
                let mut b = WordBuffer::new(n as u64, "t").unwrap();
                let mut seen = Vec::new();
                for step in 0..5_000 {
                    let wa = if !seen.is_empty() && rnd(3) == 0 { seen[rnd(seen.len() as u64) as usize] } else { rnd(range) * WORD };
                    seen.push(wa);
                    if rnd(500) == 0 {
                        b.clear();
                    } else {
                        b.keep(wa, &[7]);
                    }
                    for &w in seen.iter().rev().take(40) {
                        let scan = b.tag.iter().position(|&t| t == (w >> 3) + 1);
                        assert_eq!(b.find(w), scan, "{} entries, range {}, step {}: word {:#x}", n, range, step, w);
                    }
                }
            }
        }
    }

    #[test]
    fn no_entries_no_buffer() {
        let mut b = WordBuffer::new(0, "t").unwrap();
        b.keep(8, &[1, 2]);
        assert_eq!(b.lookup(8, &mut [0u8; 2]), Err(None));
        b.clear();
    }
}
