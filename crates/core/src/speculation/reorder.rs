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
//! counter is. They are reached only through the timed port; a bitmap cache on chip keeps
//! recently used words (§3.2.2's "small cache", 8 KB for a 128-entry TLB of 4-KB pages), and a
//! miss prefetches the following words ("bitmaps can be prefetched using simple hardware
//! prefetch technique"). The pad needs only the line's counter, which the scheme fetches first
//! anyway, so a cached bitmap is known when the nonce's offsets are.
//!
//! The scheme binds the bitmap to the line's authentication (ocb passes it as associated
//! data): a changed or replayed bitmap makes the line fail its check, it cannot silently
//! re-order the data.

use crate::layout::{PerLine, MAX_LINE};
use crate::port::Port;
use crate::wordbuf::WordBuffer;
use secmem_crypto::Aes128;
use secmem_timing::{Cycle, Pipe};

/// Bytes of a chunk (one Frequent Value Table value) and of a cipher block (AES).
const CHUNK: usize = 8;
const BLOCK: usize = 16;
/// Bytes of a bus word (the bitmap cache's entries).
const WORD: u64 = 8;

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

/// Bit j set when block j of `line` (16-B blocks) is two values of the table `frequent` says
/// are frequent (`frequent`: bit i for chunk i, as `Fvt::frequent_chunks`).
#[inline]
pub fn frequent_blocks(frequent: u64, blocks: usize) -> u64 {
    let pairs = frequent & (frequent >> 1) & 0x5555_5555_5555_5555;
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
    /// Bus words fetched on bitmap cache misses, and fetched ahead by the prefetcher.
    pub bus_reads: u64,
    pub prefetches: u64,
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

/// The per-line bitmaps in untrusted memory and their cache on chip.
pub struct Bitmaps {
    pub store: PerLine,
    /// First byte after the store (the prefetcher stays inside it).
    end: u64,
    pub seal: BitmapSeal,
    cache: WordBuffer,
    /// Words fetched after a missed one.
    prefetch: u64,
    pub counts: BitmapCounts,
}

impl Bitmaps {
    /// The bitmaps of the lines of [0, `covered`) in `store`, padded under `key`, kept in
    /// `cache`, `prefetch` words fetched after each missed one.
    pub fn new(store: PerLine, covered: u64, key: &[u8; 16], cache: WordBuffer, prefetch: u64) -> Bitmaps {
        let end = store.addr(covered.saturating_sub(1)) + store.bytes;
        Bitmaps { store, end, seal: BitmapSeal { key: Aes128::new(key) }, cache, prefetch, counts: BitmapCounts::default() }
    }

    /// Bytes of one line's bitmap (a bit per 64-bit chunk).
    pub fn bytes(&self) -> usize {
        self.store.bytes as usize
    }

    /// Read the bitmap of the line at `addr` (counter `ctr`, on chip at `t_ctr`), requested at
    /// `t`: the bitmap and when it is known. The pad is one AES on `aes` once the counter and
    /// the stored bitmap are both on chip.
    pub fn read(&mut self, port: &mut Port, aes: &mut Pipe, addr: u64, ctr: u32, t_ctr: Cycle, t: Cycle) -> (u32, Cycle) {
        self.counts.reads += 1;
        let a = self.store.addr(addr);
        let mut b = [0u8; 4];
        let n = self.bytes();
        let hits = self.cache.hits;
        let t_raw = self.cache.read(port, a, &mut b[..n], t);
        if self.cache.hits == hits {
            self.counts.bus_reads += 1;
            let w = a & !(WORD - 1);
            for k in (1..=self.prefetch).take_while(|k| w + k * WORD < self.end) {
                self.counts.prefetches += self.cache.prefetch(port, w + k * WORD, t) as u64;
            }
        }
        (self.seal.open(addr, ctr, &b[..n]), aes.run(t_raw.max(t_ctr), BLOCK as u64))
    }

    /// Write `bitmap` for the line at `addr` (counter `ctr`) through the cache, its pad on
    /// `aes` from `t`: when memory has it.
    pub fn write(&mut self, port: &mut Port, aes: &mut Pipe, addr: u64, ctr: u32, bitmap: u32, t: Cycle) -> Cycle {
        self.counts.writes += 1;
        let mut b = [0u8; 4];
        let n = self.bytes();
        self.seal.seal(addr, ctr, bitmap, &mut b[..n]);
        let t_pad = aes.run(t, BLOCK as u64);
        self.cache.write(port, self.store.addr(addr), &b[..n], t_pad)
    }

    /// (hits, lookups) of the bitmap cache.
    pub fn cache_hits(&self) -> (u64, u64) {
        self.cache.hits()
    }

    pub fn clear(&mut self) {
        self.cache.clear();
    }

    pub fn reset_stats(&mut self) {
        self.counts = BitmapCounts::default();
        self.cache.reset_stats();
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
