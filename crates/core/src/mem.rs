//! Untrusted physical memory: sparse, byte addressable, zero where never written, or, with a
//! boot image (`memory.boot_encrypted`), what a secure boot left there.
//!
//! This is all the adversary sees and all it may change; the engine keeps nothing of the
//! protected state here except what the seeds put off chip (data, tree chunks, time stamps).

use std::sync::Arc;

pub const PAGE: u64 = 4096;

/// Whether `a` and `b` (equal lengths) hold the same bytes, a word at a time: hashes and
/// tree nodes are compared on every check and loaded values on every load, and for a few
/// dozen bytes a library `memcmp` call
/// costs more than the comparison.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().unwrap());
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (wa.remainder(), wb.remainder());
    wa.zip(wb).fold(0u64, |acc, (x, y)| acc | (word(x) ^ word(y))) == 0 && ra.iter().zip(rb).all(|(x, y)| x == y)
}


/// `dst` = `src` (equal lengths), the sizes loads and stores have (1-8 bytes, most of them)
/// as fixed-size copies the compiler inlines: a library `memcpy` call for a store's few bytes
/// cost more than the copy (callgrind, gzip: every store writes its bytes this way).
#[inline(always)]
pub fn copy_small(dst: &mut [u8], src: &[u8]) {
    match (dst.len(), src.len()) {
        (1, 1) => dst[0] = src[0],
        (2, 2) => dst.copy_from_slice(&<[u8; 2]>::try_from(src).expect("2 bytes")),
        (4, 4) => dst.copy_from_slice(&<[u8; 4]>::try_from(src).expect("4 bytes")),
        (8, 8) => dst.copy_from_slice(&<[u8; 8]>::try_from(src).expect("8 bytes")),
        _ => dst.copy_from_slice(src),
    }
}

/// Untrusted memory is one anonymous mapping reserved for the whole address range and
/// committed by the kernel only where touched, so an access is a plain offset. A bitmap
/// remembers which 4 KiB pages were ever written.
///
/// Huge pages are off unless asked for (`memory.huge_pages`): with them a single byte
/// commits 2 MiB of host memory, so sparse use of a large memory costs 512 times what it
/// touches; with them on, scattered lines miss the host TLB less.
pub struct UntrustedMemory {
    size: u64,
    map: Mapping,
    touched: Vec<u64>,
    resident: u64,
    huge_pages: bool,
    boot: Option<Arc<dyn BootImage>>,
}

/// The contents of never-written memory as a secure boot initialised it (every program line
/// encrypted, with its metadata): computed where read, materialised a page at a time when
/// first written, so memory stays sparse.
pub trait BootImage: Send + Sync {
    /// The boot contents of [addr, addr + out.len()), which lies within one page.
    fn fill(&self, addr: u64, out: &mut [u8]);
}

/// A copy of the whole memory at one instant (for replay attacks).
#[derive(Clone)]
pub struct Snapshot {
    pages: Arc<Vec<(u64, Box<[u8]>)>>,
    size: u64,
}

impl Default for UntrustedMemory {
    fn default() -> Self {
        UntrustedMemory::new(0)
    }
}

impl UntrustedMemory {
    /// `size` bytes, reserved but not committed. The host may refuse the reservation (an
    /// address-space limit, `ulimit -v`): that is an error value, never an abort.
    pub fn try_new(size: u64, huge_pages: bool) -> Result<UntrustedMemory, String> {
        let pages = size.div_ceil(PAGE);
        let words = pages.div_ceil(64) as usize;
        let mut touched = Vec::new();
        touched.try_reserve_exact(words).map_err(|_| reserve_error(size, "its page bitmap"))?;
        touched.resize(words, 0);
        let map = Mapping::new(pages * PAGE, huge_pages).map_err(|e| reserve_error(size, &e.to_string()))?;
        Ok(UntrustedMemory { size, map, touched, resident: 0, huge_pages, boot: None })
    }

    /// Never-written memory reads as `boot`'s image from now on (set before any write).
    pub fn set_boot_image(&mut self, boot: Arc<dyn BootImage>) {
        self.boot = Some(boot);
    }

    /// [`UntrustedMemory::try_new`] without huge pages, for memories known to fit (tests,
    /// small tools); panics if the host refuses.
    pub fn new(size: u64) -> UntrustedMemory {
        UntrustedMemory::try_new(size, false).unwrap_or_else(|e| panic!("{}", e))
    }

    /// Addressable bytes (data and metadata regions).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of pages ever written.
    pub fn resident_bytes(&self) -> u64 {
        self.resident * PAGE
    }

    pub fn check_range(&self, addr: u64, n: u64) -> Result<(), String> {
        match addr.checked_add(n) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(format!("address range 0x{:x}+{} is outside memory of {} bytes", addr, n, self.size)),
        }
    }

    /// Panics on an out-of-range access: every caller checks ranges first (scheme layouts
    /// are inside `size` by construction; raw pokes go through `check_range`).
    #[inline]
    pub fn read(&self, addr: u64, out: &mut [u8]) {
        match &self.boot {
            None => out.copy_from_slice(self.map.slice(addr, out.len())),
            Some(b) => self.read_booted(&**b, addr, out),
        }
    }

    /// A read where never-written pages hold the boot image.
    fn read_booted(&self, b: &dyn BootImage, addr: u64, out: &mut [u8]) {
        let mut pos = 0;
        while pos < out.len() {
            let a = addr + pos as u64;
            let n = ((PAGE - a % PAGE) as usize).min(out.len() - pos);
            if self.page_touched(a) {
                out[pos..pos + n].copy_from_slice(self.map.slice(a, n));
            } else {
                b.fill(a, &mut out[pos..pos + n]);
            }
            pos += n;
        }
    }

    /// Ask the host to start loading the line at `addr` (a hint; out of range is ignored).
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        if addr >= self.size {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults; SSE is part of x86-64.
        unsafe {
            std::arch::x86_64::_mm_prefetch(self.map.slice(addr, 1).as_ptr() as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
    }

    #[inline]
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let first = addr / PAGE;
        let last = (addr + data.len() as u64 - 1) / PAGE;
        for p in first..=last {
            let (w, b) = ((p / 64) as usize, 1u64 << (p % 64));
            if self.touched[w] & b == 0 {
                self.touched[w] |= b;
                self.resident += 1;
                // The rest of the page keeps its boot contents.
                let whole = addr <= p * PAGE && addr + data.len() as u64 >= (p + 1) * PAGE;
                if let (Some(boot), false) = (&self.boot, whole) {
                    boot.fill(p * PAGE, self.map.slice_mut(p * PAGE, PAGE as usize));
                }
            }
        }
        self.map.slice_mut(addr, data.len()).copy_from_slice(data);
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
        let p = addr / PAGE;
        self.touched.get((p / 64) as usize).is_some_and(|w| w & (1 << (p % 64)) != 0)
    }

    /// Base addresses of touched pages within [lo, hi), ascending.
    pub fn touched_pages(&self, lo: u64, hi: u64) -> Vec<u64> {
        let mut v = Vec::new();
        for (i, &w) in self.touched.iter().enumerate() {
            let mut bits = w;
            while bits != 0 {
                let a = (i as u64 * 64 + bits.trailing_zeros() as u64) * PAGE;
                if a >= lo && a < hi {
                    v.push(a);
                }
                bits &= bits - 1;
            }
        }
        v
    }

    pub fn snapshot(&self) -> Snapshot {
        let pages = self
            .touched_pages(0, self.size.div_ceil(PAGE) * PAGE)
            .into_iter()
            .map(|a| (a, self.map.slice(a, PAGE as usize).to_vec().into_boxed_slice()))
            .collect();
        Snapshot { pages: Arc::new(pages), size: self.size }
    }

    /// Put back a snapshot of this same memory; one of another size is refused.
    pub fn restore(&mut self, s: &Snapshot) -> Result<(), String> {
        if s.size != self.size {
            return Err(format!(
                "a snapshot of a {}-byte memory cannot be restored into one of {} bytes",
                s.size, self.size
            ));
        }
        // In place: a second reservation of the same size could exceed an address-space
        // limit that the first one fitted. Touched pages go back to unwritten zeros.
        for (lo, hi) in runs(&self.touched_pages(0, self.size.div_ceil(PAGE) * PAGE)) {
            self.map.discard(lo, hi - lo);
        }
        self.touched.fill(0);
        self.resident = 0;
        for (a, pg) in s.pages.iter() {
            self.write(*a, pg);
        }
        Ok(())
    }
}

impl Clone for UntrustedMemory {
    /// Panics if the host refuses a second reservation of this size.
    fn clone(&self) -> Self {
        let mut m = UntrustedMemory::try_new(self.size, self.huge_pages).unwrap_or_else(|e| panic!("{}", e));
        m.boot = self.boot.clone();
        m.restore(&self.snapshot()).expect("same size");
        m
    }
}

fn reserve_error(size: u64, why: &str) -> String {
    format!(
        "cannot reserve host address space for {} bytes of untrusted memory (program data and its metadata): {}; \
         lower memory.size or raise the address-space limit (ulimit -v)",
        size, why
    )
}

/// Ascending page addresses as maximal [lo, hi) runs of consecutive pages.
fn runs(pages: &[u64]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = Vec::new();
    for &a in pages {
        match v.last_mut() {
            Some(r) if r.1 == a => r.1 = a + PAGE,
            _ => v.push((a, a + PAGE)),
        }
    }
    v
}

/// A private anonymous mapping: reserved, not committed, zero where never written.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// The mapping is owned exclusively like a Vec<u8>.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(len: u64, huge_pages: bool) -> std::io::Result<Mapping> {
        if len == 0 {
            return Ok(Mapping { ptr: std::ptr::NonNull::dangling().as_ptr(), len: 0 });
        }
        let len = usize::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: a fresh private anonymous mapping; checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // Asked for either way: a kernel whose transparent huge pages are "always" would
        // otherwise commit 2 MiB for every byte touched.
        let advice = if huge_pages { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: advice on our own mapping; failure only loses the advice.
        unsafe { libc::madvise(ptr, len, advice) };
        Ok(Mapping { ptr: ptr as *mut u8, len })
    }

    /// Give [addr, addr+n) back to the kernel: it reads as zeros again and costs nothing.
    fn discard(&mut self, addr: u64, n: u64) {
        let s = self.slice_mut(addr, n as usize);
        // SAFETY: a range of our own private anonymous mapping (checked by slice_mut), which
        // MADV_DONTNEED refills with zero pages on the next touch.
        let r = unsafe { libc::madvise(s.as_mut_ptr() as *mut libc::c_void, s.len(), libc::MADV_DONTNEED) };
        if r != 0 {
            s.fill(0);
        }
    }

    #[inline]
    fn slice(&self, addr: u64, n: usize) -> &[u8] {
        let a = addr as usize;
        assert!(a <= self.len && n <= self.len - a, "untrusted memory access 0x{:x}+{} out of range", addr, n);
        // SAFETY: in bounds of a live mapping we own.
        unsafe { std::slice::from_raw_parts(self.ptr.add(a), n) }
    }

    #[inline]
    fn slice_mut(&mut self, addr: u64, n: usize) -> &mut [u8] {
        let a = addr as usize;
        assert!(a <= self.len && n <= self.len - a, "untrusted memory access 0x{:x}+{} out of range", addr, n);
        // SAFETY: in bounds of a live mapping we own exclusively (&mut self).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(a), n) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly what `new` mapped.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_finds_a_difference_in_any_byte_of_words_and_tail() {
        for len in [0usize, 1, 7, 8, 12, 16, 20, 64, 67] {
            let a: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(same_bytes(&a, &a.clone()), "len {}", len);
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 0x10;
                assert!(!same_bytes(&a, &b), "len {} byte {}", len, i);
            }
        }
    }

    #[test]
    fn copy_small_copies_every_length() {
        for len in 0usize..=20 {
            let src: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(53) ^ 0xA5).collect();
            let mut dst = vec![0u8; len];
            copy_small(&mut dst, &src);
            assert_eq!(dst, src, "len {}", len);
        }
    }

    #[test]
    fn a_prefetch_hint_changes_nothing_even_out_of_range() {
        let mut m = UntrustedMemory::new(1 << 20);
        m.write(4096, &[9; 64]);
        for a in [0, 4096, (1 << 20) - 1, 1 << 20, u64::MAX] {
            m.prefetch(a);
        }
        let mut b = [0u8; 64];
        m.read(4096, &mut b);
        assert_eq!(b, [9; 64]);
        assert_eq!(m.resident_bytes(), 4096);
    }

    #[test]
    fn untouched_memory_reads_zero_and_costs_nothing() {
        let m = UntrustedMemory::new(1 << 40);
        let mut b = [1u8; 16];
        m.read(0xdead_0000, &mut b);
        m.read((1 << 40) - 16, &mut b);
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
        assert_eq!(m.touched_pages(0, 1 << 32), vec![0, PAGE]);
        assert!(m.page_touched(PAGE + 7) && !m.page_touched(2 * PAGE));
    }

    #[test]
    fn restore_brings_back_old_contents() {
        let mut m = UntrustedMemory::new(1 << 20);
        m.write(64, b"old");
        let s = m.snapshot();
        m.write(64, b"new");
        m.restore(&s).unwrap();
        assert!(UntrustedMemory::new(1 << 21).restore(&s).unwrap_err().contains("cannot be restored"));
        let mut b = [0u8; 3];
        m.read(64, &mut b);
        assert_eq!(&b, b"old");
    }

    #[test]
    fn a_reservation_the_host_refuses_is_an_error_value() {
        // 2^62 bytes exceed any x86-64 address space.
        let e = UntrustedMemory::try_new(1 << 62, false).err().expect("refused");
        assert!(e.starts_with("cannot reserve host address space for 4611686018427387904 bytes"), "{}", e);
        assert!(e.ends_with("lower memory.size or raise the address-space limit (ulimit -v)"), "{}", e);
    }

    #[test]
    fn restore_in_place_forgets_pages_written_after_the_snapshot() {
        let mut m = UntrustedMemory::try_new(1 << 24, true).unwrap();
        m.write(3 * PAGE, b"kept");
        let s = m.snapshot();
        for p in [0, 1, 2, 3, 4, 9, 10, 4095] {
            m.write(p * PAGE + 5, b"later");
        }
        m.restore(&s).unwrap();
        assert_eq!(m.touched_pages(0, 1 << 24), vec![3 * PAGE]);
        assert_eq!(m.resident_bytes(), PAGE);
        let mut b = [1u8; 9];
        for p in [0, 2, 4, 9, 10, 4095] {
            m.read(p * PAGE + 5, &mut b);
            assert_eq!(b, [0; 9], "page {} reads as never written", p);
        }
        m.read(3 * PAGE, &mut b);
        assert_eq!(&b, b"kept\0\0\0\0\0", "the snapshot's page as it was: the later bytes are gone");
        let c = m.clone();
        assert_eq!(c.touched_pages(0, 1 << 24), vec![3 * PAGE]);
    }

    #[test]
    fn out_of_range_is_reported() {
        let m = UntrustedMemory::new(1024);
        assert!(m.check_range(1000, 24).is_ok());
        assert!(m.check_range(1000, 25).unwrap_err().contains("outside"));
    }
}
