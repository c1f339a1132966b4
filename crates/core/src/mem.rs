//! Untrusted physical memory: sparse, byte addressable, zero where never written.
//!
//! This is all the adversary sees and all it may change; the engine keeps nothing of the
//! protected state here except what the seeds put off chip (data, tree chunks, time stamps).

use rustc_hash::FxHashMap;
use std::sync::Arc;

pub const PAGE: u64 = 4096;

type Page = Box<[u8; PAGE as usize]>;

#[derive(Clone, Default)]
pub struct UntrustedMemory {
    size: u64,
    pages: FxHashMap<u64, Page>,
}

/// A copy of the whole memory at one instant (for replay attacks).
#[derive(Clone)]
pub struct Snapshot {
    pages: Arc<FxHashMap<u64, Page>>,
    size: u64,
}

impl UntrustedMemory {
    pub fn new(size: u64) -> UntrustedMemory {
        UntrustedMemory { size, pages: FxHashMap::default() }
    }

    /// Addressable bytes (data and metadata regions).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes actually allocated (touched pages).
    pub fn resident_bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE
    }

    pub fn check_range(&self, addr: u64, n: u64) -> Result<(), String> {
        match addr.checked_add(n) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(format!("address range 0x{:x}+{} is outside memory of {} bytes", addr, n, self.size)),
        }
    }

    #[inline]
    pub fn read(&self, addr: u64, out: &mut [u8]) {
        let mut a = addr;
        let mut done = 0;
        while done < out.len() {
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(out.len() - done);
            match self.pages.get(&(a / PAGE)) {
                Some(p) => out[done..done + n].copy_from_slice(&p[off..off + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
            a += n as u64;
        }
    }

    #[inline]
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let mut a = addr;
        let mut done = 0;
        while done < data.len() {
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(data.len() - done);
            let p = self.pages.entry(a / PAGE).or_insert_with(|| Box::new([0u8; PAGE as usize]));
            p[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
            a += n as u64;
        }
    }

    #[inline]
    pub fn read_u32(&self, addr: u64) -> u32 {
        let mut b = [0u8; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }

    #[inline]
    pub fn write_u32(&mut self, addr: u64, v: u32) {
        self.write(addr, &v.to_le_bytes());
    }

    /// Whether any byte of the page holding `addr` was ever written.
    #[inline]
    pub fn page_touched(&self, addr: u64) -> bool {
        self.pages.contains_key(&(addr / PAGE))
    }

    /// Base addresses of touched pages within [lo, hi), ascending.
    pub fn touched_pages(&self, lo: u64, hi: u64) -> Vec<u64> {
        let mut v: Vec<u64> =
            self.pages.keys().map(|p| p * PAGE).filter(|&a| a >= lo && a < hi).collect();
        v.sort_unstable();
        v
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot { pages: Arc::new(self.pages.clone()), size: self.size }
    }

    pub fn restore(&mut self, s: &Snapshot) {
        self.size = s.size;
        self.pages = (*s.pages).clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_memory_reads_zero_and_costs_nothing() {
        let m = UntrustedMemory::new(1 << 40);
        let mut b = [1u8; 16];
        m.read(0xdead_0000, &mut b);
        assert_eq!(b, [0; 16]);
        assert_eq!(m.resident_bytes(), 0);
    }

    #[test]
    fn writes_across_page_boundaries_round_trip() {
        let mut m = UntrustedMemory::new(1 << 32);
        let data: Vec<u8> = (0..100).collect();
        m.write(PAGE - 50, &data);
        let mut out = vec![0u8; 100];
        m.read(PAGE - 50, &mut out);
        assert_eq!(out, data);
        assert_eq!(m.resident_bytes(), 2 * PAGE);
    }

    #[test]
    fn restore_brings_back_old_contents() {
        let mut m = UntrustedMemory::new(1 << 20);
        m.write(64, b"old");
        let s = m.snapshot();
        m.write(64, b"new");
        m.restore(&s);
        let mut b = [0u8; 3];
        m.read(64, &mut b);
        assert_eq!(&b, b"old");
    }

    #[test]
    fn out_of_range_is_reported() {
        let m = UntrustedMemory::new(1024);
        assert!(m.check_range(1000, 24).is_ok());
        assert!(m.check_range(1000, 25).unwrap_err().contains("outside"));
    }
}
