//! [`Consistent`]: makes a trace's load values agree with the memory the trace itself built.
//!
//! A traced program loads memory the trace never saw being written: the loader's image,
//! mmap'd files, the vDSO, anything written while `--skip` was fast-forwarding. A simulator
//! that holds real bytes (crates/sim compares every load with its simulated memory and
//! counts `trace.value_mismatches`) would see those loads return something else. The adapter
//! keeps a sparse shadow of every byte the trace has stored or loaded, and before an
//! instruction whose load differs from the shadow (or reads bytes never seen) it emits an
//! external record storing the loaded value — exactly what the environment did behind the
//! program's back.

use std::collections::HashMap;

use crate::{Access, Instr, TraceError, TraceSource};

const PAGE: u64 = 4096;

struct Page {
    data: [u8; PAGE as usize],
    /// One bit per byte: seen.
    known: [u64; (PAGE / 64) as usize],
}

/// Calls `f(word, mask)` for the known-bit words covering bytes [at, at + n) of a page.
#[inline]
fn for_words(at: usize, n: usize, mut f: impl FnMut(usize, u64)) {
    let (mut b, end) = (at, at + n);
    while b < end {
        let span = (64 - b % 64).min(end - b);
        let m = if span == 64 { u64::MAX } else { ((1u64 << span) - 1) << (b % 64) };
        f(b / 64, m);
        b += span;
    }
}

/// The 8 bytes of a page at `po`, little-endian.
#[inline(always)]
fn word_at(data: &[u8; PAGE as usize], po: usize) -> u64 {
    u64::from_le_bytes(data[po..po + 8].try_into().unwrap())
}

/// An access of 1, 2, 4 or 8 bytes whose 8-byte window lies in one page and whose bytes in
/// one known-bit word (nearly all of them) is handled as words: (offset in the page,
/// known-bit mask, value word, byte mask of the value in the window). Else None.
#[inline(always)]
fn small(addr: u64, v: &[u8]) -> Option<(usize, u64, u64, u64)> {
    let vw = match v.len() {
        1 => v[0] as u64,
        2 => u16::from_le_bytes(v.try_into().unwrap()) as u64,
        4 => u32::from_le_bytes(v.try_into().unwrap()) as u64,
        8 => u64::from_le_bytes(v.try_into().unwrap()),
        _ => return None,
    };
    let (po, n) = ((addr % PAGE) as usize, v.len());
    if po + 8 > PAGE as usize || po % 64 + n > 64 {
        return None;
    }
    let bm = if n == 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
    Some((po, ((1u64 << n) - 1) << (po % 64), vw, bm))
}

/// Whether every byte of [at, at + n) is known.
#[inline]
fn known_range(known: &[u64], at: usize, n: usize) -> bool {
    let mut all = true;
    for_words(at, n, |w, m| all &= known[w] & m == m);
    all
}

/// Sparse shadow memory (4 KiB pages allocated on first touch).
pub struct Shadow {
    index: HashMap<u64, usize, BuildPageHasher>,
    pages: Vec<Box<Page>>,
    /// Page number of each entry of `pages`, in order of first touch.
    numbers: Vec<u64>,
    /// Recently used pages, direct-mapped by page number: accesses keep returning to a few
    /// pages (the stack, the arrays being worked on), and the hash map is the slow path.
    recent: [(u64, u32); RECENT],
}

const RECENT: usize = 16;
/// No page has this number (addresses are 64-bit, pages 4 KiB).
const NO_PAGE: u64 = u64::MAX;

impl Default for Shadow {
    fn default() -> Shadow {
        Shadow { index: HashMap::default(), pages: Vec::new(), numbers: Vec::new(), recent: [(NO_PAGE, 0); RECENT] }
    }
}

/// Page numbers are already well spread in their low bits: a multiplicative hash is enough
/// (std's SipHash guards against adversarial keys, which a trace's addresses are not, and
/// costs several times more). The native reader's table of packed shapes uses it too.
#[derive(Default, Clone, Copy)]
pub(crate) struct BuildPageHasher;

#[derive(Default)]
pub(crate) struct PageHasher(u64);

impl std::hash::BuildHasher for BuildPageHasher {
    type Hasher = PageHasher;
    fn build_hasher(&self) -> PageHasher {
        PageHasher(0)
    }
}

impl std::hash::Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

impl Shadow {
    #[inline]
    fn page(&mut self, pn: u64) -> &mut Page {
        let slot = pn as usize % RECENT;
        let (p, i) = self.recent[slot];
        let i = if p == pn { i as usize } else { self.lookup(pn, slot) };
        &mut self.pages[i]
    }

    #[cold]
    fn lookup(&mut self, pn: u64, slot: usize) -> usize {
        let next = self.pages.len();
        let i = *self.index.entry(pn).or_insert(next);
        if i == next {
            self.pages.push(Box::new(Page { data: [0; PAGE as usize], known: [0; (PAGE / 64) as usize] }));
            self.numbers.push(pn);
        }
        self.recent[slot] = (pn, i as u32);
        i
    }

    /// Whether `v` equals the known shadow bytes at `addr` (false if any byte is unknown).
    #[inline]
    pub fn matches(&mut self, addr: u64, v: &[u8]) -> bool {
        if let Some((po, m, vw, bm)) = small(addr, v) {
            let p = self.page(addr / PAGE);
            return p.known[po / 64] & m == m && (word_at(&p.data, po) ^ vw) & bm == 0;
        }
        self.matches_slow(addr, v)
    }

    fn matches_slow(&mut self, addr: u64, v: &[u8]) -> bool {
        for (page, po, off, n) in page_spans(addr, v.len()) {
            let p = self.page(page);
            if !known_range(&p.known, po, n) || p.data[po..po + n] != v[off..off + n] {
                return false;
            }
        }
        true
    }

    /// Set the shadow bytes at `addr` to `v`.
    #[inline]
    pub fn store(&mut self, addr: u64, v: &[u8]) {
        if let Some((po, m, vw, bm)) = small(addr, v) {
            let p = self.page(addr / PAGE);
            p.known[po / 64] |= m;
            let w = (word_at(&p.data, po) & !bm) | (vw & bm);
            p.data[po..po + 8].copy_from_slice(&w.to_le_bytes());
            return;
        }
        self.store_slow(addr, v)
    }

    fn store_slow(&mut self, addr: u64, v: &[u8]) {
        for (page, po, off, n) in page_spans(addr, v.len()) {
            let p = self.page(page);
            p.data[po..po + n].copy_from_slice(&v[off..off + n]);
            for_words(po, n, |w, m| p.known[w] |= m);
        }
    }

    /// Bring the shadow up to date with the accesses of an executed instruction (values in
    /// `data`, as in [`Instr`]), in program order: its own earlier stores count for its later
    /// loads. Loads that disagree with the shadow, or read bytes never seen, are appended to
    /// `supply` as stores of the loaded value: what the environment wrote behind the
    /// program's back. Returns the bytes appended.
    ///
    /// Cheapest when `data` holds 8 bytes from each value's offset on (the tracer lays
    /// values out so): a value of 1, 2, 4 or 8 bytes is then handled as a masked word, with
    /// no branch on its size.
    #[inline]
    pub fn reconcile(&mut self, accesses: &[Access], data: &[u8], supply: &mut Instr) -> u64 {
        let mut n = 0;
        for a in accesses {
            if let Some(w) = data.get(a.off as usize..a.off as usize + 8) {
                let (po, size) = ((a.addr % PAGE) as usize, a.size as usize);
                if size.is_power_of_two() && size <= 8 && po + 8 <= PAGE as usize && po % 64 + size <= 64 {
                    let bm = u64::MAX >> (64 - 8 * size);
                    let vw = u64::from_le_bytes(w.try_into().unwrap()) & bm;
                    let m = (u64::MAX >> (64 - size)) << (po % 64);
                    let p = self.page(a.addr / PAGE);
                    if !a.store {
                        if p.known[po / 64] & m == m && (word_at(&p.data, po) ^ vw) & bm == 0 {
                            continue;
                        }
                        supply.add_access(true, a.addr, &w[..size]);
                        n += a.size as u64;
                    }
                    p.known[po / 64] |= m;
                    let nw = (word_at(&p.data, po) & !bm) | vw;
                    p.data[po..po + 8].copy_from_slice(&nw.to_le_bytes());
                    continue;
                }
            }
            let v = &data[a.off as usize..(a.off + a.size) as usize];
            if !a.store {
                // A load that matches leaves the shadow as it is: nothing to store.
                if self.matches(a.addr, v) {
                    continue;
                }
                supply.add_access(true, a.addr, v);
                n += a.size as u64;
            }
            self.store(a.addr, v);
        }
        n
    }

    /// The first run of known bytes at or after byte `from` of the `k`-th page touched:
    /// (address, bytes), or None when the page has no more.
    pub fn run_in_page(&self, k: usize, from: usize) -> Option<(u64, &[u8])> {
        let p = self.pages.get(k)?;
        let bit = |b: usize| p.known[b / 64] >> (b % 64) & 1 == 1;
        let start = (from..PAGE as usize).find(|&b| bit(b))?;
        let end = (start..PAGE as usize).find(|&b| !bit(b)).unwrap_or(PAGE as usize);
        Some((self.numbers[k] * PAGE + start as u64, &p.data[start..end]))
    }

    /// The known bytes of the 64-byte line holding `addr`, as runs (address, bytes) in
    /// address order; nothing for a line never seen (no page is allocated to say so). A
    /// page's known-bits word covers exactly one such line.
    pub fn line_runs(&self, addr: u64, mut f: impl FnMut(u64, &[u8])) {
        let Some(&i) = self.index.get(&(addr / PAGE)) else { return };
        let (p, po) = (&self.pages[i], (addr % PAGE) as usize & !63);
        let mut k = p.known[po / 64];
        while k != 0 {
            let s = k.trailing_zeros() as usize;
            let len = (!(k >> s)).trailing_zeros() as usize;
            f(addr & !63 | s as u64, &p.data[po + s..po + s + len]);
            k &= if len == 64 { 0 } else { !(((1u64 << len) - 1) << s) };
        }
    }

    /// Pages touched so far.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Bytes of shadow memory allocated.
    pub fn footprint(&self) -> usize {
        self.pages.len() * std::mem::size_of::<Page>()
    }
}

/// `len` bytes at `addr` split at page boundaries: (page number, offset in the page, offset
/// in the bytes, length).
fn page_spans(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        (off < len).then(|| {
            let a = addr.wrapping_add(off as u64);
            let po = (a % PAGE) as usize;
            let n = (PAGE as usize - po).min(len - off);
            off += n;
            (a / PAGE, po, off - n, n)
        })
    })
}

/// A [`TraceSource`] adapter; see the module documentation.
pub struct Consistent<S> {
    inner: S,
    shadow: Shadow,
    /// An instruction held back while the external record it needed is handed out.
    held: Instr,
    has_held: bool,
    supplied_bytes: u64,
    supplied_records: u64,
}

impl<S: TraceSource> Consistent<S> {
    pub fn new(inner: S) -> Consistent<S> {
        Consistent { inner, shadow: Shadow::default(), held: Instr::default(), has_held: false, supplied_bytes: 0, supplied_records: 0 }
    }

    /// Bytes of memory the adapter supplied through external records.
    pub fn supplied_bytes(&self) -> u64 {
        self.supplied_bytes
    }

    /// External records the adapter emitted.
    pub fn supplied_records(&self) -> u64 {
        self.supplied_records
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: TraceSource> TraceSource for Consistent<S> {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.has_held {
            std::mem::swap(out, &mut self.held);
            self.has_held = false;
            return Ok(true);
        }
        if !self.inner.next_into(out)? {
            return Ok(false);
        }
        if out.external {
            for a in &out.accesses {
                self.shadow.store(a.addr, out.value(a));
            }
            return Ok(true);
        }
        if out.accesses.is_empty() {
            return Ok(true);
        }
        let held = &mut self.held;
        held.clear();
        held.external = true;
        held.thread = out.thread;
        let n = self.shadow.reconcile(&out.accesses, &out.data, held);
        if !held.accesses.is_empty() {
            // Hand out the external record now and the instruction next time.
            std::mem::swap(out, held);
            self.has_held = true;
            self.supplied_records += 1;
            self.supplied_bytes += n;
        }
        Ok(true)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
    fn show_progress(&mut self, on: bool) {
        self.inner.show_progress(on);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vec0(Vec<Instr>, usize);
    impl TraceSource for Vec0 {
        fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
            if self.1 == self.0.len() {
                return Ok(false);
            }
            *out = self.0[self.1].clone();
            self.1 += 1;
            Ok(true)
        }
        fn name(&self) -> &str {
            "vec"
        }
    }

    fn access(store: bool, addr: u64, v: &[u8]) -> Instr {
        let mut i = Instr { pc: 0x1000, len: 3, ..Instr::default() };
        i.add_access(store, addr, v);
        i
    }

    #[test]
    fn the_shadow_agrees_with_a_byte_map() {
        // Word-sized fast paths and the byte path, at page and known-bit word boundaries.
        let mut sh = Shadow::default();
        let mut model = HashMap::<u64, u8>::new();
        let mut rng = crate::workloads::Rng::new(7, 9);
        let sizes = [1usize, 2, 4, 8, 3, 16, 5];
        let (mut hits, mut misses) = (0, 0);
        for i in 0..200_000u64 {
            let base = [0x1000u64, 0x1fc0, 0x2ff8, 0x7_0000_0038][rng.below(4) as usize];
            let addr = base + rng.below(80);
            let n = sizes[rng.below(sizes.len() as u64) as usize];
            let v: Vec<u8> = (0..n).map(|k| (rng.below(3) as u8).wrapping_add(k as u8)).collect();
            let want = (0..n).all(|k| model.get(&(addr + k as u64)) == Some(&v[k]));
            assert_eq!(sh.matches(addr, &v), want, "access {i}: {n} bytes at {addr:#x}");
            if want {
                hits += 1;
            } else {
                misses += 1;
            }
            if rng.below(2) == 0 {
                sh.store(addr, &v);
                for (k, b) in v.iter().enumerate() {
                    model.insert(addr + k as u64, *b);
                }
            }
        }
        assert!(hits > 1000 && misses > 1000, "{hits} matching, {misses} not");
    }

    #[test]
    fn word_padded_values_reconcile_as_packed_ones() {
        // The tracer's layout (each value of up to 8 bytes in an 8-byte slot, the word path)
        // against values packed end to end (the byte path): the same supplies, the same shadow.
        let (mut packed, mut padded) = (Shadow::default(), Shadow::default());
        let mut rng = crate::workloads::Rng::new(3, 5);
        let sizes = [1usize, 2, 4, 8, 3, 16];
        let (mut p, mut q, mut sp, mut sq) = (Instr::default(), Instr::default(), Instr::default(), Instr::default());
        let mut supplied = 0;
        for i in 0..50_000 {
            (p.accesses.clear(), p.data.clear(), q.accesses.clear(), q.data.clear());
            for _ in 0..1 + rng.below(3) {
                let addr = [0x1000u64, 0x1fc0, 0x2ff8][rng.below(3) as usize] + rng.below(80);
                let n = sizes[rng.below(sizes.len() as u64) as usize];
                let v: Vec<u8> = (0..n).map(|_| rng.below(3) as u8).collect();
                let store = rng.below(3) == 0;
                p.add_access(store, addr, &v);
                let off = q.data.len() as u32;
                q.data.extend_from_slice(&v);
                q.data.resize(off as usize + n.max(8), 0xee);
                q.accesses.push(Access { store, addr, size: n as u32, off });
            }
            (sp.clear(), sq.clear());
            let (a, b) = (packed.reconcile(&p.accesses, &p.data, &mut sp), padded.reconcile(&q.accesses, &q.data, &mut sq));
            assert!(a == b && sp == sq, "instruction {i}: {sp:?} / {sq:?}");
            supplied += a;
        }
        assert!(supplied > 1000, "{supplied} bytes supplied");
        for addr in 0xfc0..0x3100 {
            assert_eq!(packed.matches(addr, &[0]), padded.matches(addr, &[0]), "{addr:#x}");
        }
    }

    #[test]
    fn unseen_and_changed_loads_get_an_external_record_first() {
        let recs = vec![
            access(false, 0x2ffe, &[1, 2, 3, 4]), // never seen, crosses a page
            access(false, 0x2ffe, &[1, 2, 3, 4]), // now known: nothing supplied
            access(true, 0x3000, &[9]),
            access(false, 0x2fff, &[2, 9]), // consistent with the store
            access(false, 0x3000, &[7]),    // changed behind the trace's back
        ];
        let mut c = Consistent::new(Vec0(recs, 0));
        let mut out = Instr::default();
        let mut got = vec![];
        while c.next_into(&mut out).unwrap() {
            got.push(out.clone());
        }
        assert_eq!(got.len(), 7);
        assert!(got[0].external && got[0].accesses[0].addr == 0x2ffe && got[0].data == [1, 2, 3, 4]);
        assert!(!got[1].external);
        assert!(!got[2].external && !got[3].external && !got[4].external);
        assert!(got[5].external && got[5].data == [7] && got[5].accesses[0].store);
        assert!(!got[6].external);
        assert_eq!(c.supplied_bytes(), 5);
        assert_eq!(c.supplied_records(), 2);
    }
}
