//! Data chunk re-ordering for 128-bit ciphertext speculation (seed 004 §3.2.2, Fig. 4).
//!
//! AES enciphers 128 bits, two 64-bit chunks, so a speculated ciphertext needs both chunks of
//! its block to be frequent values. Before a line is encrypted its frequent chunks are moved
//! to the front (in their order), the others after them (in theirs): ⌊f/2⌋ whole blocks then
//! hold two frequent chunks each. An 8-bit bitmap per 64-byte line (bit i: chunk i was a
//! frequent value when the line was written) restores the order after decryption (§3.2.2: "a
//! bitmap of frequent values … 8 bits to encode whether any of the eight 64-bit chunks is a
//! frequent value").
//!
//! The bitmaps live in untrusted memory, one per line at a linear layout (`BMP_base +
//! addr/B·bytes`, as every per-line metadata, 000 §5.1), several lines' to a bus word (§3.2.2:
//! "bitmaps of several memory blocks can be encrypted and stored together"), each encrypted
//! with a pad AES_Kb(line address ‖ line counter), fresh at each write-back because the
//! counter is. They are reached only through the timed port; a write-back bitmap cache on chip
//! keeps recently used words (§3.2.2's "small cache", 8 KB for a 128-entry TLB of 4-KB pages)
//! with the plaintext of the bitmaps it has opened or written, and a miss prefetches the
//! following words ("bitmaps can be prefetched using simple hardware prefetch technique"). A
//! bitmap not yet opened needs its pad, one AES once the line's counter is here (which the
//! scheme fetches first anyway, for the nonce).
//!
//! The scheme binds the bitmap to the line's authentication (ocb passes it as associated
//! data): a changed or replayed bitmap makes the line fail its check, it cannot silently
//! re-order the data.

use crate::layout::{PerLine, MAX_LINE};
use crate::port::Port;
use crate::wordbuf::{mask, WORD};
use secmem_crypto::Aes128;
use secmem_timing::{Cycle, Pipe, Tags};

/// Bytes of a chunk (one Frequent Value Table value) and of a cipher block (AES).
const CHUNK: usize = 8;
const BLOCK: usize = 16;
/// The bitmap cache's associativity (004 gives none; a fully associative 1024-entry lookup would
/// also be slow to simulate).
const WAYS: u64 = 8;

/// Store `line`'s chunks in re-ordered position into `out`: the chunks whose bit is set in
/// `bitmap` first, in order, then the others, in order.
pub fn permute(bitmap: u32, line: &[u8], out: &mut [u8]) {
    let mut k = 0;
    for pass in [true, false] {
        for (i, c) in line.chunks_exact(CHUNK).enumerate() {
            if (bitmap >> i & 1 == 1) == pass {
                out[k * CHUNK..(k + 1) * CHUNK].copy_from_slice(c);
                k += 1;
            }
        }
    }
}

/// The inverse of [`permute`]: the line in program order from its re-ordered chunks.
pub fn unpermute(bitmap: u32, stored: &[u8], out: &mut [u8]) {
    let mut k = 0;
    for pass in [true, false] {
        for i in 0..out.len() / CHUNK {
            if (bitmap >> i & 1 == 1) == pass {
                out[i * CHUNK..(i + 1) * CHUNK].copy_from_slice(&stored[k * CHUNK..(k + 1) * CHUNK]);
                k += 1;
            }
        }
    }
}

/// Cipher blocks of a re-ordered line that hold two chunks marked frequent: the first ⌊f/2⌋.
#[inline]
pub fn pair_blocks(bitmap: u32) -> usize {
    bitmap.count_ones() as usize / 2
}

/// The even bit of each pair of chunks (2j, 2j+1) that are both frequent (`frequent`: bit i
/// for chunk i): the 16-B blocks speculable in place.
#[inline]
pub fn pair_mask(frequent: u64) -> u64 {
    frequent & (frequent >> 1) & 0x5555_5555_5555_5555
}

/// Bit j set when block j of `line` (16-B blocks) is two values of the table `frequent` says
/// are frequent (`frequent`: bit i for chunk i, as `Fvt::frequent_chunks`).
#[inline]
pub fn frequent_blocks(frequent: u64, blocks: usize) -> u64 {
    let pairs = pair_mask(frequent);
    let mut bits = 0;
    for j in 0..blocks {
        bits |= (pairs >> (2 * j) & 1) << j;
    }
    bits
}

/// What the bitmaps cost: their own traffic, apart from lines, counters and tags.
#[derive(Clone, Copy, Default, Debug)]
pub struct BitmapCounts {
    /// Bitmaps read (one per line read) and written (one per line written back).
    pub reads: u64,
    pub writes: u64,
    /// Reads whose bitmap was on chip in plaintext (no memory access, no pad).
    pub hits: u64,
    /// Bus words fetched on misses, fetched ahead by the prefetcher, and written back.
    pub bus_reads: u64,
    pub prefetches: u64,
    pub bus_writes: u64,
    /// Cycles reads waited for their bitmap beyond the nonce's offset (the order unknown).
    pub wait_cycles: u64,
}

/// The bitmaps' encryption: a pad AES_Kb(line address ‖ counter) per line and write-back.
#[derive(Clone)]
pub struct BitmapSeal {
    key: Aes128,
}

impl BitmapSeal {
    fn pad(&self, addr: u64, ctr: u32) -> u32 {
        let mut b = [0u8; BLOCK];
        b[..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&ctr.to_le_bytes());
        self.key.encrypt(&mut b);
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The stored bytes (`out.len()` of them) of `bitmap` for the line at `addr`, counter `ctr`.
    pub fn seal(&self, addr: u64, ctr: u32, bitmap: u32, out: &mut [u8]) {
        out.copy_from_slice(&(bitmap ^ self.pad(addr, ctr)).to_le_bytes()[..out.len()]);
    }

    /// The bitmap whose stored bytes are `stored`.
    pub fn open(&self, addr: u64, ctr: u32, stored: &[u8]) -> u32 {
        let mut b = [0u8; 4];
        b[..stored.len()].copy_from_slice(stored);
        let mask = if stored.len() == 4 { u32::MAX } else { (1u32 << (8 * stored.len())) - 1 };
        (u32::from_le_bytes(b) ^ self.pad(addr, ctr)) & mask
    }
}

/// One bus word of bitmaps on chip: its stored (sealed) bytes, all known once it is here, and
/// which lines' bitmaps are also known in plaintext (opened on a read, or written) or are
/// newer than memory's copy (written back when the word leaves, or at a flush).
#[derive(Clone, Copy, Default)]
struct Word {
    stored: [u8; WORD as usize],
    plain: [u8; WORD as usize],
    open: u8,
    dirty: u8,
}

/// The per-line bitmaps in untrusted memory and their write-back cache on chip (§3.2.2's
/// "small cache"; trusted copies: what the adversary writes to a cached word is not seen).
pub struct Bitmaps {
    pub store: PerLine,
    /// First byte after the store (the prefetcher stays inside it).
    end: u64,
    pub seal: BitmapSeal,
    tags: Option<Tags>,
    words: Vec<Word>,
    /// Words fetched after a missed one.
    prefetch: u64,
    pub counts: BitmapCounts,
}

impl Bitmaps {
    /// The bitmaps of the lines of [0, `covered`) in `store`, sealed under `key`, a cache of
    /// `entries` bus words (0: none), `prefetch` words fetched after each missed one.
    pub fn new(store: PerLine, covered: u64, key: &[u8; 16], entries: u64, prefetch: u64) -> Result<Bitmaps, String> {
        let end = store.addr(covered.saturating_sub(1)) + store.bytes;
        if entries > WAYS && !(entries % WAYS == 0 && (entries / WAYS).is_power_of_two()) {
            return Err(format!("{} entries are not {}-way sets of a power of two", entries, WAYS));
        }
        let ways = entries.min(WAYS) as usize;
        let tags = if entries == 0 { None } else { Some(Tags::new(entries * WORD, ways, WORD)?) };
        let words = vec![Word::default(); tags.as_ref().map_or(0, |t| t.slots())];
        Ok(Bitmaps { store, end, seal: BitmapSeal { key: Aes128::new(key) }, tags, words, prefetch, counts: BitmapCounts::default() })
    }

    /// Bytes of one line's bitmap (a bit per 64-bit chunk).
    pub fn bytes(&self) -> usize {
        self.store.bytes as usize
    }

    /// The slot holding the word at `w`, fetching it at `t` if absent (`fetched`: when it is
    /// here), after writing back the dirty word it replaces. None without a cache.
    fn slot(&mut self, port: &mut Port, w: u64, t: Cycle, fetched: &mut Cycle) -> Option<usize> {
        let tags = self.tags.as_mut()?;
        if let Some(s) = tags.find(w) {
            tags.touch(s);
            return Some(s as usize);
        }
        let s = tags.victim(w);
        if let Some(old) = tags.addr_of(s) {
            let v = self.words[s as usize];
            if v.dirty != 0 {
                self.counts.bus_writes += 1;
                port.write(old, &v.stored, t);
            }
        }
        tags.install(s, w);
        let mut word = Word::default();
        *fetched = port.read(w, &mut word.stored, t).last;
        self.words[s as usize] = word;
        Some(s as usize)
    }

    /// Read the bitmap of the line at `addr` (counter `ctr`, on chip at `t_ctr`), requested at
    /// `t`: the bitmap and when it is known. A bitmap on chip in plaintext is known at once;
    /// otherwise it is the stored bytes XOR its pad, one AES on `aes` from the counter.
    pub fn read(&mut self, port: &mut Port, aes: &mut Pipe, addr: u64, ctr: u32, t_ctr: Cycle, t: Cycle) -> (u32, Cycle) {
        self.counts.reads += 1;
        let (a, n) = (self.store.addr(addr), self.bytes());
        let (w, off, m) = (a & !(WORD - 1), (a % WORD) as usize, mask(a, n));
        let mut fetched = 0;
        let Some(s) = self.slot(port, w, t, &mut fetched) else {
            // No cache: the line's bitmap bytes alone, every time.
            self.counts.bus_reads += 1;
            let mut b = [0u8; 4];
            let t_raw = port.read(a, &mut b[..n], t).last;
            return (self.seal.open(addr, ctr, &b[..n]), aes.run(t_ctr, BLOCK as u64).max(t_raw) + 1);
        };
        let word = &mut self.words[s];
        let got = if word.open & m == m {
            self.counts.hits += 1;
            let mut b = [0u8; 4];
            b[..n].copy_from_slice(&word.plain[off..off + n]);
            (u32::from_le_bytes(b), t + 1)
        } else {
            let bitmap = self.seal.open(addr, ctr, &word.stored[off..off + n]);
            word.plain[off..off + n].copy_from_slice(&bitmap.to_le_bytes()[..n]);
            word.open |= m;
            (bitmap, aes.run(t_ctr, BLOCK as u64).max(fetched) + 1)
        };
        if fetched > 0 {
            self.counts.bus_reads += 1;
            let end = self.end;
            for k in (1..=self.prefetch).take_while(|k| w + k * WORD < end) {
                if self.tags.as_ref().is_some_and(|tags| tags.find(w + k * WORD).is_none()) {
                    self.counts.prefetches += 1;
                    self.slot(port, w + k * WORD, t, &mut 0);
                }
            }
        }
        got
    }

    /// Write `bitmap` for the line at `addr` (counter `ctr`), its pad on `aes` from `t`: into
    /// the cache (fetching its word if absent), or straight to memory without one. When it is
    /// on chip (or in memory).
    pub fn write(&mut self, port: &mut Port, aes: &mut Pipe, addr: u64, ctr: u32, bitmap: u32, t: Cycle) -> Cycle {
        self.counts.writes += 1;
        let (a, n) = (self.store.addr(addr), self.bytes());
        let (w, off, m) = (a & !(WORD - 1), (a % WORD) as usize, mask(a, n));
        let mut b = [0u8; 4];
        self.seal.seal(addr, ctr, bitmap, &mut b[..n]);
        let t_pad = aes.run(t, BLOCK as u64);
        let mut fetched = 0;
        let Some(s) = self.slot(port, w, t, &mut fetched) else {
            self.counts.bus_writes += 1;
            return port.write(a, &b[..n], t_pad);
        };
        self.counts.bus_reads += (fetched > 0) as u64;
        let word = &mut self.words[s];
        word.stored[off..off + n].copy_from_slice(&b[..n]);
        word.plain[off..off + n].copy_from_slice(&bitmap.to_le_bytes()[..n]);
        word.open |= m;
        word.dirty |= m;
        t_pad
    }

    /// Write every dirty word back to memory from `t`: when the last is there.
    pub fn write_back(&mut self, port: &mut Port, t: Cycle) -> Cycle {
        let mut done = t;
        let Some(tags) = &self.tags else { return t };
        for (s, word) in self.words.iter_mut().enumerate() {
            if word.dirty != 0 {
                let w = tags.addr_of(s as u32).expect("a dirty word is cached");
                self.counts.bus_writes += 1;
                done = done.max(port.write(w, &word.stored, t));
                word.dirty = 0;
            }
        }
        done
    }

    /// Forget the cached words (written back first: see `write_back`).
    pub fn clear(&mut self) {
        if let Some(tags) = &mut self.tags {
            for (s, word) in self.words.iter_mut().enumerate() {
                debug_assert_eq!(word.dirty, 0, "dirty bitmaps dropped");
                tags.invalidate(s as u32);
                *word = Word::default();
            }
        }
    }

    pub fn reset_stats(&mut self) {
        self.counts = BitmapCounts::default();
    }
}

/// Bytes of the bitmap of a `line`-byte line: a bit per 64-bit chunk, at least a byte.
pub fn bitmap_bytes(line: u64) -> u64 {
    (line / CHUNK as u64).div_ceil(8).max(1)
}

const _: () = assert!(MAX_LINE / CHUNK <= 32, "a bitmap fits a u32");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fig4_groups_the_frequent_chunks_and_unpermute_restores_the_line() {
        // 004 Fig. 4: chunks 1, 2, 5, 6 frequent; in place no block holds two of them ...
        let line: Vec<u8> = (0..64).collect();
        let bitmap = 0b0110_0110;
        assert_eq!(frequent_blocks(bitmap as u64, 4), 0b0000);
        // ... re-ordered, the first two blocks do, in order, and nothing is lost.
        let mut st = [0u8; 64];
        permute(bitmap, &line, &mut st);
        let order: Vec<u8> = st.chunks(8).map(|c| c[0] / 8).collect();
        assert_eq!(order, [1, 2, 5, 6, 0, 3, 4, 7]);
        assert_eq!(pair_blocks(bitmap), 2);
        let mut back = [0u8; 64];
        unpermute(bitmap, &st, &mut back);
        assert_eq!(&back[..], &line[..]);
        // Every bitmap of a 128-B line round trips.
        let line: Vec<u8> = (0..128).map(|x| x as u8 ^ 0x5a).collect();
        for bitmap in [0u32, 1, 0xffff, 0x8001, 0x1234, 0xfedc] {
            let (mut st, mut back) = ([0u8; 128], [0u8; 128]);
            permute(bitmap, &line, &mut st);
            unpermute(bitmap, &st, &mut back);
            assert_eq!(&back[..], &line[..], "{:#x}", bitmap);
        }
    }
}
