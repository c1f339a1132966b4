//! Per-window checkpoints (issue 35, `secmem run --sample --checkpointed B`): one pass over
//! an input writes, for each window of a sampled run, a native trace holding what that window
//! reads — the memory image at the window's start, then its records — so a run of the windows
//! never reads the instructions between them.
//!
//! A window is `len` instructions from instruction `start` of the input (external records
//! are not counted, and those just before `start` belong to the window, as [`Skip`] hands
//! them on). Its file holds, in order:
//! - the pages named by the records of [`Instr::set_pages`] seen so far (as [`Skip`] does);
//! - the pages the input touched before the window, in the order it first touched them, given
//!   their frames without being written ([`Instr::set_mapped`]: see `Order`);
//! - the image: for every 64-byte line the window's records touch, the bytes of that line
//!   known at the window's start (stored or loaded by any earlier record), as external
//!   records — taken lazily, when a record of the window first touches the line, before that
//!   record's own accesses change it, so they are exactly the bytes there at the start;
//! - the prewarm: a load of each of the `prewarm` lines touched (fetched, loaded or stored)
//!   most recently before the window's start (distinct lines, the least recent first), as the instructions that begin
//!   the window's functional warming. They bring the caches, TLBs and the protection's
//!   metadata caches to about what the whole run held there — the most recent lines of a
//!   cache of up to that many lines, whatever its size or scheme — after the memory-timestamp
//!   record of Barr, Falsafi and Asanović (ISCA 2005). Without them a window starts from an
//!   empty L2 (the image is written back before the first instruction), and on gzip 100 k
//!   instructions of warming alone left the IPC 28% low; without the instruction lines, gcc's
//!   windows missed in the L2 three times as often as the full run (IPC 33% low). A line the history stored to is
//!   stored again (its first known bytes, with the value they have at the window's start, so
//!   memory is unchanged), to be dirty in the caches as in the whole run — clean, stream ran
//!   32% fast, its misses evicting nothing to write back; the others are loaded (zeros as
//!   values: they run only in functional warming, which checks no value);
//! - the window's records, unchanged.
//!
//! So every load of the window finds the bytes a run of the whole input would find
//! (`trace.value_mismatches` counts any that does not), and nothing else is carried: the
//! memory the window never touches, and the instructions between windows, are not read
//! again. The state that warms over the instructions before a window (caches, trees,
//! counters, predictors) is not saved: a window run warms it from cold over its first
//! instructions (B of them), which is where a checkpointed run's warm-up error comes from.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::consistent::Shadow;
use crate::native::{write_atomically, NativeWriter, MAX_ACCESSES};
use crate::{Instr, TraceError, TraceSource};

/// Accesses per external record of the image (a record may hold up to [`MAX_ACCESSES`]).
const IMAGE_ACCESSES: usize = 64;

/// Lines of memory-access history kept to find the most recent distinct lines at a window's
/// start (2 M: 16 MiB; a window finds fewer than it asks for when they lie further back).
const HISTORY: usize = 1 << 21;
/// Prewarm lines by default: 1 MiB of lines, suh2003's L2 (twice as many cost twice the
/// time, each a miss through the protection, for no better estimate on gzip).
pub const DEFAULT_PREWARM: usize = 1 << 14;

/// What one pass wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Instructions each written window holds (the last may be short if the input ended in
    /// it; windows past the end are not written), the prewarm loads not counted.
    pub instructions: Vec<u64>,
    /// The prewarm loads that begin each window's file (instructions run before its B).
    pub prewarm: Vec<u64>,
    /// Bytes of memory image over all windows.
    pub image_bytes: u64,
    /// Instructions the pass read from the input.
    pub read: u64,
}

/// Whether `starts` (ascending, each window `len` instructions) can be cut in one pass: one
/// line naming the problem if not.
pub fn check_cuts(starts: &[u64], len: u64) -> Result<(), String> {
    if len == 0 {
        return Err("a checkpointed window holds at least one instruction".into());
    }
    for w in starts.windows(2) {
        if w[0].saturating_add(len) > w[1] {
            return Err(format!("windows overlap: one starts at instruction {} and holds {}, the next starts at {}", w[0], len, w[1]));
        }
    }
    Ok(())
}

/// The most recent distinct lines of memory-access history: a ring of line numbers, each
/// with a bit saying it was a store.
struct Recent {
    ring: Vec<u64>,
    next: usize,
    last: u64,
    /// The instruction line last fetched.
    code: u64,
}

impl Recent {
    fn new() -> Recent {
        Recent { ring: Vec::new(), next: 0, last: u64::MAX, code: u64::MAX }
    }

    /// An instruction's fetch: its line is history too (the L2 holds code as well as data).
    #[inline]
    fn fetch(&mut self, pc: u64) {
        if pc >> 6 != self.code {
            self.code = pc >> 6;
            self.touch(pc, false);
        }
    }

    #[inline]
    fn touch(&mut self, addr: u64, store: bool) {
        let e = (addr >> 6) << 1 | store as u64;
        // A repeat of the last line adds nothing, unless it stores where that one loaded.
        if e == self.last || e == self.last & !1 && self.last & 1 == 1 {
            return;
        }
        self.last = e;
        if self.ring.len() < HISTORY {
            self.ring.push(e);
        } else {
            self.ring[self.next] = e;
        }
        self.next = (self.next + 1) % HISTORY;
    }

    /// Up to `k` distinct lines (addresses), the least recent first, each with whether it was
    /// stored to since the history (as far as it was searched) saw it first: a line a cache
    /// would hold dirty.
    fn lines(&self, k: usize) -> Vec<(u64, bool)> {
        let mut seen: HashMap<u64, usize, crate::consistent::BuildPageHasher> = HashMap::default();
        let mut out: Vec<(u64, bool)> = Vec::with_capacity(k);
        let n = self.ring.len();
        for i in 0..n {
            let e = self.ring[(self.next + n - 1 - i) % n];
            match seen.get(&(e >> 1)) {
                Some(&at) => out[at].1 |= e & 1 == 1,
                None if out.len() < k => {
                    seen.insert(e >> 1, out.len());
                    out.push(((e >> 1) << 6, e & 1 == 1));
                }
                // Searched back as far as k lines reach: older stores are not looked for.
                None => break,
            }
        }
        out.reverse();
        out
    }
}

/// The pages the input touched, in the order it first touched them (an instruction's fetch,
/// then its accesses; external records' too), as a run of the whole input gives them frames
/// (`pages.order`). Every window's file maps the ones touched before it first
/// ([`Instr::set_mapped`]), so its pages keep the whole run's frames and physical addresses:
/// with only the window's own lines in its image, its run would map them in the window's
/// order, and stream's three arrays, laid out by a run in touch order so that they thrash
/// the L1D's sets (miss rate 1.0), missed a quarter as often.
struct Order {
    pages: Vec<u64>,
    seen: HashSet<u64, crate::consistent::BuildPageHasher>,
    last: u64,
}

impl Order {
    fn new() -> Order {
        Order { pages: Vec::new(), seen: HashSet::default(), last: u64::MAX }
    }

    #[inline]
    fn touch(&mut self, addr: u64, size: u32) {
        let (first, last) = (addr >> 12, addr.saturating_add(size.max(1) as u64 - 1) >> 12);
        for p in first..=last {
            if p != self.last {
                self.last = p;
                if self.seen.insert(p) {
                    self.pages.push(p);
                }
            }
        }
    }
}

/// One pass over `src`: write window `j` (instructions `starts[j]` to `starts[j] + len`),
/// after loads of the `prewarm` lines touched last before it, to `path(j)`, each file
/// atomically. A stop request (SIGINT/SIGTERM) ends the pass within a few thousand
/// instructions with [`crate::stop::interrupted`].
pub fn write_windows(src: &mut dyn TraceSource, starts: &[u64], len: u64, prewarm: usize, path: &dyn Fn(usize) -> PathBuf, progress: bool) -> Result<Written, TraceError> {
    check_cuts(starts, len).map_err(TraceError::Other)?;
    let total = starts.last().map_or(0, |s| s + len);
    let mut bar = crate::progress::Progress::new(progress, total, format!("{} checkpoints", src.name()));
    let mut shadow = Shadow::default();
    let mut pages: Vec<u64> = Vec::new();
    let mut ins = Instr::default();
    let mut out = Written::default();
    // The window's records (buffers reused from window to window) and the lines it touched.
    let mut buf: Vec<Instr> = Vec::new();
    let mut lines: HashSet<u64> = HashSet::new();
    let mut image: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut n = 0u64; // instructions read
    let mut ended = false;
    let mut recent = Recent::new();
    let mut order = Order::new();
    // Bring the shadow up to date with one record (Skip's rule: every byte stored or loaded).
    let apply = |ins: &Instr, shadow: &mut Shadow, pages: &mut Vec<u64>, recent: &mut Recent, order: &mut Order| {
        if !ins.external {
            recent.fetch(ins.pc);
            order.touch(ins.pc, ins.len.max(1) as u32);
        }
        if ins.is_pages() {
            pages.extend(ins.accesses.iter().map(|a| a.addr >> 12));
        } else {
            for a in &ins.accesses {
                shadow.store(a.addr, ins.value(a));
                order.touch(a.addr, a.size);
                if !ins.external {
                    recent.touch(a.addr, a.store);
                }
            }
        }
    };
    let poll = |n: u64, bar: &mut crate::progress::Progress| -> Result<(), TraceError> {
        if n & 0xFFF == 0 {
            if let Some(sig) = crate::stop::stop_requested() {
                return Err(crate::stop::interrupted(sig));
            }
            if n & 0xFFFF == 0 {
                bar.update(n);
            }
        }
        Ok(())
    };
    for (j, &start) in starts.iter().enumerate() {
        // Up to the window: only the shadow is kept.
        while n < start {
            if !src.next_into(&mut ins)? {
                ended = true;
                break;
            }
            apply(&ins, &mut shadow, &mut pages, &mut recent, &mut order);
            if !ins.external {
                n += 1;
                poll(n, &mut bar)?;
            }
        }
        if ended {
            break;
        }
        // The pages touched before the window (those it touches first get frames as it runs).
        let mapped = order.pages.len();
        let (mut used, mut held) = (0usize, 0u64);
        lines.clear();
        image.clear();
        // The prewarm, with the values at the window's start: a line the history stored to
        // is stored to again (its first known bytes, unchanged), so a cache holds it dirty
        // as the whole run's would; the others are loaded.
        let mut warm: Vec<(u64, Vec<u8>, bool)> = Vec::new();
        for (line, dirty) in if prewarm > 0 { recent.lines(prewarm) } else { Vec::new() } {
            let mut v = None;
            if dirty {
                shadow.line_runs(line, |at, b| {
                    if v.is_none() {
                        let size = [8usize, 4, 2, 1].into_iter().find(|&z| z <= b.len() && at % z as u64 == 0).unwrap_or(1);
                        v = Some((at, b[..size].to_vec()));
                    }
                });
            }
            warm.push(match v {
                Some((at, b)) => (at, b, true),
                None => (line, vec![0; 8], false),
            });
        }
        while held < len {
            if !src.next_into(&mut ins)? {
                ended = true;
                break;
            }
            if !ins.external {
                recent.fetch(ins.pc);
                order.touch(ins.pc, ins.len.max(1) as u32);
            }
            if !ins.is_pages() {
                for a in &ins.accesses {
                    order.touch(a.addr, a.size);
                    let (first, last) = (a.addr & !63, a.addr.saturating_add(a.size.max(1) as u64 - 1) & !63);
                    let mut line = first;
                    loop {
                        if lines.insert(line) {
                            shadow.line_runs(line, |at, b| image.push((at, b.to_vec())));
                        }
                        if line >= last {
                            break;
                        }
                        line += 64;
                    }
                    // Later accesses of the same record see this one's bytes, as in a run.
                    shadow.store(a.addr, ins.value(a));
                    if !ins.external {
                        recent.touch(a.addr, a.store);
                    }
                }
            } else {
                apply(&ins, &mut shadow, &mut pages, &mut recent, &mut order);
            }
            if used == buf.len() {
                buf.push(Instr::default());
            }
            buf[used].clone_from(&ins);
            used += 1;
            if !ins.external {
                held += 1;
                n += 1;
                poll(n, &mut bar)?;
            }
        }
        if held == 0 {
            break;
        }
        write_atomically(&path(j), |tmp| {
            let mut w = NativeWriter::create(tmp)?;
            let mut rec = Instr::default();
            for chunk in pages.chunks(MAX_ACCESSES) {
                rec.set_pages(chunk.iter().copied());
                w.write(&rec)?;
            }
            for chunk in order.pages[..mapped].chunks(MAX_ACCESSES) {
                rec.set_mapped(chunk.iter().copied());
                w.write(&rec)?;
            }
            for chunk in image.chunks(IMAGE_ACCESSES) {
                rec.clear();
                rec.external = true;
                for (at, b) in chunk {
                    rec.add_access(true, *at, b);
                }
                w.write(&rec)?;
            }
            // The prewarm: plain loads at the first instruction's address (one fetch line).
            let pc = buf[..used].iter().find(|r| !r.external).map_or(0, |r| r.pc);
            for (at, v, store) in &warm {
                rec.clear();
                (rec.pc, rec.len, rec.op) = (pc, 4, crate::OpClass::Mem);
                rec.add_access(*store, *at, v);
                w.write(&rec)?;
            }
            for r in &buf[..used] {
                w.write(r)?;
            }
            w.finish()
        })?;
        out.image_bytes += image.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        out.instructions.push(held);
        out.prewarm.push(warm.len() as u64);
        if ended {
            break;
        }
    }
    bar.finish();
    out.read = n;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workloads, Consistent, NativeReader};

    fn read_all(p: &std::path::Path) -> Vec<Instr> {
        let mut r = NativeReader::open(p).unwrap();
        let (mut v, mut ins) = (Vec::new(), Instr::default());
        while r.next_into(&mut ins).unwrap() {
            v.push(ins.clone());
        }
        v
    }

    /// A record as what it says (a file's reader may lay out the value bytes differently).
    fn same(r: &Instr) -> (u64, u8, bool, u32, Vec<(bool, u64, Vec<u8>)>, String) {
        let acc = r.accesses.iter().map(|a| (a.store, a.addr, r.value(a).to_vec())).collect();
        (r.pc, r.len, r.external, r.thread, acc, format!("{:?} {:?} {:?} {:?}", r.op, r.srcs(), r.dsts(), r.branch))
    }

    /// Each window's file: an image whose every byte is the byte the whole input had
    /// written there by the window's start, then exactly the input's records of the window;
    /// and every load of the window finds, in memory built from the file alone, the bytes
    /// the whole input's run finds (the load's value in the input).
    #[test]
    fn a_window_holds_its_records_and_the_bytes_its_loads_read() {
        let dir = std::env::temp_dir().join(format!("secmem-checkpoint-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for w in ["mix", "stream", "chase"] {
            let (starts, len) = ([5_000u64, 40_000, 90_000], 20_000u64);
            let path = |j: usize| dir.join(format!("{w}-{j}.smt"));
            let mut src = Consistent::new(workloads::builtin(w, 3).unwrap());
            let done = write_windows(&mut src, &starts, len, 100, &path, false).unwrap();
            assert_eq!(done.instructions, vec![len; 3]);
            assert!(done.image_bytes > 0);
            // The whole input, and the memory it built, once.
            let mut all = Consistent::new(workloads::builtin(w, 3).unwrap());
            // (A shadow, not a map of bytes: mix's loader image alone is 31 MiB.)
            let mut full = Shadow::default();
            let (mut ins, mut n, mut last_line) = (Instr::default(), 0u64, 0u64);
            // Pages in the order the input first touches them (a fetch, then the accesses).
            let (mut order, mut seen) = (Vec::<u64>::new(), HashSet::<u64>::new());
            fn first_touch(r: &Instr, order: &mut Vec<u64>, seen: &mut HashSet<u64>) {
                let spans = (!r.external).then(|| (r.pc, r.len.max(1) as u64)).into_iter().chain(r.accesses.iter().map(|a| (a.addr, a.size.max(1) as u64)));
                for (at, size) in spans {
                    for p in at >> 12..=(at + size - 1) >> 12 {
                        if seen.insert(p) {
                            order.push(p);
                        }
                    }
                }
            }
            for (j, &s) in starts.iter().enumerate() {
                let recs = read_all(&path(j));
                // Up to the window's start: memory only.
                while n < s {
                    assert!(all.next_into(&mut ins).unwrap());
                    first_touch(&ins, &mut order, &mut seen);
                    for a in &ins.accesses {
                        full.store(a.addr, ins.value(a));
                        if !ins.external {
                            last_line = a.addr;
                        }
                    }
                    n += !ins.external as u64;
                }
                // The input's records from the window's start: external ones first (they may
                // sit at the image's end in the file), then the instructions.
                // The file starts by mapping those pages in that order, writing nothing.
                let mapped: Vec<u64> = recs
                    .iter()
                    .take_while(|r| r.external && r.accesses.iter().all(|a| a.size == 0))
                    .filter(|r| !r.is_pages())
                    .flat_map(|r| r.accesses.iter().map(|a| a.addr >> 12).collect::<Vec<_>>())
                    .collect();
                assert_eq!(mapped, order, "{w} window {j}: pages mapped in first-touch order");
                let mut window = Vec::new();
                let mut held = 0;
                while held < len {
                    assert!(all.next_into(&mut ins).unwrap());
                    first_touch(&ins, &mut order, &mut seen);
                    held += !ins.external as u64;
                    n += !ins.external as u64;
                    window.push(ins.clone());
                }
                // The file ends with them; before them the prewarm: loads of the lines
                // touched last, distinct, the last one the window's start's latest; before
                // that the image.
                let pw = done.prewarm[j] as usize;
                assert_eq!(pw, 100, "{w} window {j}: the history holds 100 lines");
                let image_end = recs.len() - window.len() - pw;
                let warm = &recs[image_end..image_end + pw];
                assert!(warm.iter().all(|r| !r.external && r.accesses.len() == 1));
                // A prewarm store writes the bytes memory holds at the start: nothing changes.
                for r in warm.iter().filter(|r| r.accesses[0].store) {
                    let a = &r.accesses[0];
                    assert!(full.matches(a.addr, r.value(a)), "{w} window {j}: prewarm store at {:#x}", a.addr);
                }
                let lines: std::collections::HashSet<u64> = warm.iter().map(|r| r.accesses[0].addr & !63).collect();
                assert_eq!(lines.len(), pw, "{w} window {j}: distinct lines");
                assert!(lines.contains(&(last_line & !63)), "{w} window {j}: the last line touched is prewarmed");
                for (k, (a, b)) in recs[image_end + pw..].iter().zip(&window).enumerate() {
                    assert_eq!(same(a), same(b), "{w} window {j}: record {k}");
                }
                let mut mem = std::collections::HashMap::<u64, u8>::new();
                for r in &recs[..image_end] {
                    assert!(r.external && r.accesses.iter().all(|a| a.store), "{w} window {j}: the image is external stores");
                    for a in &r.accesses {
                        assert!(full.matches(a.addr, r.value(a)), "{w} window {j}: image bytes at {:#x}", a.addr);
                        for (i, b) in r.value(a).iter().enumerate() {
                            mem.insert(a.addr + i as u64, *b);
                        }
                    }
                }
                let mut loads = 0u64;
                for r in &window {
                    for a in &r.accesses {
                        let v = r.value(a);
                        if !a.store {
                            loads += 1;
                            for (i, b) in v.iter().enumerate() {
                                assert_eq!(mem.get(&(a.addr + i as u64)), Some(b), "{w} window {j}: load at {:#x}", a.addr);
                            }
                        }
                        for (i, b) in v.iter().enumerate() {
                            mem.insert(a.addr + i as u64, *b);
                        }
                        full.store(a.addr, v);
                    }
                }
                assert!(loads > 1000, "{w}: {loads} loads");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn overlapping_windows_are_refused_with_one_line() {
        let e = check_cuts(&[0, 100], 200).unwrap_err();
        assert!(e.contains("overlap") && !e.contains('\n'), "{e}");
        assert!(check_cuts(&[0, 200], 200).is_ok());
        assert!(check_cuts(&[0], 0).is_err());
    }
}
