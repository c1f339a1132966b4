//! Per-window checkpoints (issue 35, `secmem run --sample --checkpointed B`): one pass over
//! an input writes, for each window of a sampled run, a native trace holding what that window
//! reads — the memory image at the window's start, then its records — so a run of the windows
//! never reads the instructions between them.
//!
//! A window is `len` instructions from instruction `start` of the input (external records
//! are not counted, and those just before `start` belong to the window, as [`Skip`] hands
//! them on). Its file holds the prewarm below packed into one PREWARM record, first
//! ([`Prewarm`]: it stands for the instruction records listed in its place, which a window
//! runs before its first instruction), then, in order:
//! - the pages named by the records of [`Instr::set_pages`] seen so far (as [`Skip`] does);
//! - the pages the input touched before the window, in the order it first touched them, given
//!   their frames without being written ([`Instr::set_mapped`]: see `Order`);
//! - the image: for every 64-byte line the window's records touch, the bytes of that line
//!   known at the window's start (stored or loaded by any earlier record), as external
//!   records — taken lazily, when a record of the window first touches the line, before that
//!   record's own accesses change it, so they are exactly the bytes there at the start;
//! - the prewarm, the instructions that begin the window's functional warming: first the
//!   last [`BRANCHES`] branches before the window, each followed by an instruction where it
//!   went (no accesses), which train the branch predictor (and a BTB) over a longer history
//!   than B; then the 32-byte pieces of the `prewarm` lines the L2 saw last before the
//!   window, the least recent first — ordered by the misses and write-backs of a model of
//!   the L1s (`L1`), as an L2's recency is, not by every access — code fetched, data loaded
//!   or (dirty) stored; then what that L1 model holds. They bring the caches, TLBs and the
//!   protection's metadata caches to about what the whole run held there, after the
//!   memory-timestamp record of Barr, Falsafi and Asanović (ISCA 2005). Without them a
//!   window starts from an empty L2 (the image is written back before the first
//!   instruction), and on gzip 100 k instructions of warming alone left the IPC 28% low;
//!   without the instruction lines, gcc's windows missed in the L2 three times as often as
//!   the full run (IPC 33% low). A piece written back to since its line last came in is
//!   stored again (its first known bytes, with the value they have at the window's start,
//!   so memory is unchanged), to be dirty in the caches as in the whole run — clean, stream
//!   ran 32% fast, its misses evicting nothing to write back; the others are loaded (zeros
//!   as values: they run only in functional warming, which checks no value). What each part
//!   did, window by window against full warming: docs/sampling.md;
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
use crate::native::{put_varint, unzigzag, varint_at, write_atomically, zigzag, NativeWriter, KIND_PREWARM, MAX_ACCESSES};
use crate::record::{MAX_DST, MAX_SRC};
use crate::{Instr, TraceError, TraceSource};

/// Accesses per external record of the image (a record may hold up to [`MAX_ACCESSES`]).
const IMAGE_ACCESSES: usize = 64;

/// Prewarm lines by default: 1 MiB of lines, suh2003's L2 (twice as many cost twice the
/// time, each a miss through the protection, for no better estimate on gzip).
pub const DEFAULT_PREWARM: usize = 1 << 14;
/// Branches replayed before the prewarm (4 times suh2003's gshare table of 4,096 counters).
const BRANCHES: usize = 1 << 14;

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

/// The most recently touched lines of memory (64 bytes), each with when it was last touched
/// and, for each of its two 32-byte pieces (the smallest L1 line a preset uses: suh2003's
/// L1s have 32-byte lines, its L2 64-byte ones, so a load of each piece brings both halves
/// of a line into the L1, where one load a line left the L1s half empty), whether it was
/// touched, fetched (code: the prewarm fetches it, into the L1I and the I-TLB) and stored
/// to (dirty). A map, not a ring of the last accesses: a ring of 2 M accesses reached about
/// a million instructions back, and lines a program keeps in the L2 for longer (gzip's)
/// missed in every window.
struct Recent {
    /// Line → (last touch, `fresh` at the last touch, piece bits).
    map: HashMap<u64, (u64, u64, u8), crate::consistent::BuildPageHasher>,
    stamp: u64,
    /// Lines the map took in (new to it): at least as many distinct lines as were touched
    /// since, so a line touched again after more than `keep` of them had left a cache of
    /// `keep` lines.
    fresh: u64,
    /// The last piece pushed, with its kind (a repeat changes nothing).
    last: u64,
    /// The instruction piece last fetched.
    code: u64,
    /// Lines asked for at a window's start: the map keeps at least twice as many.
    keep: usize,
    /// Models of the L1s, whose misses and write-backs are what the L2 sees.
    l1i: L1,
    l1d: L1,
}

/// A set-associative LRU cache of 32-byte pieces with suh2003's L1 geometry (64 KiB, 2
/// ways), indexed by virtual address: a filter, so that the history the prewarm replays is
/// ordered as the L2 sees it — by the L1s' misses and write-backs — not by every access
/// (lines that live in an L1 are old in the L2's order and may have left it; gcc's windows
/// missed in the L2 on instruction fetch 84% more often than with full warming when the
/// prewarm ordered every access). Its contents at a window's start end the prewarm.
struct L1 {
    /// `L1_WAYS` a set, the most recent first; `EMPTY` where nothing is.
    tags: Vec<u64>,
    dirty: Vec<bool>,
}

const L1_WAYS: usize = 2;
const L1_SETS: usize = 64 * 1024 / 32 / L1_WAYS;
const EMPTY: u64 = u64::MAX;

impl L1 {
    fn new() -> L1 {
        L1 { tags: vec![EMPTY; L1_SETS * L1_WAYS], dirty: vec![false; L1_SETS * L1_WAYS] }
    }

    /// Access `piece`: None on a hit, else Some of the piece it evicted (with whether it
    /// was dirty), if any.
    #[inline]
    fn access(&mut self, piece: u64, store: bool) -> Option<Option<(u64, bool)>> {
        let s = (piece as usize % L1_SETS) * L1_WAYS;
        let (tags, dirty) = (&mut self.tags[s..s + L1_WAYS], &mut self.dirty[s..s + L1_WAYS]);
        if let Some(i) = tags.iter().position(|&t| t == piece) {
            tags[..=i].rotate_right(1);
            dirty[..=i].rotate_right(1);
            dirty[0] |= store;
            return None;
        }
        let victim = (tags[L1_WAYS - 1] != EMPTY).then(|| (tags[L1_WAYS - 1], dirty[L1_WAYS - 1]));
        tags.rotate_right(1);
        dirty.rotate_right(1);
        (tags[0], dirty[0]) = (piece, store);
        Some(victim)
    }

    /// What it holds, the least recent of each set first.
    fn contents(&self, code: bool, out: &mut Vec<Piece>) {
        for w in (0..L1_WAYS).rev() {
            for set in 0..L1_SETS {
                let i = set * L1_WAYS + w;
                if self.tags[i] != EMPTY {
                    out.push(Piece { addr: self.tags[i] << 5, dirty: !code && self.dirty[i], code });
                }
            }
        }
    }
}

/// One piece of the prewarm: its address, whether the history stored to it (dirty), and
/// whether it was fetched (code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    addr: u64,
    dirty: bool,
    code: bool,
}

impl Recent {
    fn new(keep: usize) -> Recent {
        Recent { map: HashMap::default(), stamp: 0, fresh: 0, last: u64::MAX, code: u64::MAX, keep, l1i: L1::new(), l1d: L1::new() }
    }

    /// An instruction's fetch: its piece is history too (the L2 holds code as well as data).
    #[inline]
    fn fetch(&mut self, pc: u64) {
        if pc >> 5 != self.code {
            self.code = pc >> 5;
            self.push(pc, false, true);
        }
    }

    /// A data access of `size` bytes: every piece it touches. The environment's writes
    /// (external records: a `read()`'s buffer) count too: a run writes them through the L2.
    #[inline]
    fn touch(&mut self, addr: u64, size: u32, store: bool) {
        self.push(addr, store, false);
        let end = addr.saturating_add(size.max(1) as u64 - 1);
        for p in (addr >> 5) + 1..=end >> 5 {
            self.push(p << 5, store, false);
        }
    }

    #[inline]
    fn push(&mut self, addr: u64, store: bool, code: bool) {
        if self.keep == 0 {
            return;
        }
        let piece = addr >> 5;
        let key = piece << 2 | (code as u64) << 1 | store as u64;
        if key == self.last {
            return;
        }
        self.last = key;
        // The L2 sees the L1s' misses and write-backs, not their hits.
        let l1 = if code { &mut self.l1i } else { &mut self.l1d };
        if let Some(victim) = l1.access(piece, store) {
            if let Some((v, true)) = victim {
                self.l2(v, true, false);
            }
            self.l2(piece, false, code);
        }
    }

    /// A piece the L2 sees: fetched or loaded into an L1, or written back from one (store).
    fn l2(&mut self, piece: u64, store: bool, code: bool) {
        self.stamp += 1;
        let h = piece & 1;
        let fresh = self.fresh;
        let e = self.map.entry(piece >> 1).or_insert_with(|| (0, fresh + 1, 0));
        if e.1 > fresh {
            self.fresh += 1;
        } else if fresh - e.1 > self.keep as u64 {
            // More new lines came since it was last touched than a cache of `keep` lines
            // holds: it was written back, and comes in clean.
            e.2 &= !(16 | 32);
        }
        e.0 = self.stamp;
        e.1 = self.fresh;
        e.2 = e.2 & !(4 << h) | 1 << h | (code as u8) << (2 + h) | (store as u8) << (4 + h);
        if self.map.len() > 4 * self.keep {
            self.prune();
        }
    }

    /// Forget all but the 2·keep lines touched last (a line forgotten and touched again is
    /// clean: by then a cache of `keep` lines would have written it back).
    #[cold]
    fn prune(&mut self) {
        let mut stamps: Vec<u64> = self.map.values().map(|v| v.0).collect();
        let at = stamps.len() - 2 * self.keep;
        let (_, &mut oldest_kept, _) = stamps.select_nth_unstable(at);
        self.map.retain(|_, v| v.0 >= oldest_kept);
    }

    /// The pieces of the `k` lines the L2 saw last, the least recent line first, each dirty
    /// if written back to since the map last took its line in; then what the L1s hold.
    fn lines(&self, k: usize) -> Vec<Piece> {
        let mut v: Vec<(u64, u64, u8)> = self.map.iter().map(|(&l, &(t, _, b))| (t, l, b)).collect();
        if v.len() > k {
            let at = v.len() - k;
            v.select_nth_unstable(at);
            v.drain(..at);
        }
        v.sort_unstable();
        let mut out = Vec::with_capacity(2 * v.len());
        for (_, line, b) in v {
            for h in 0..2u64 {
                if b & (1 << h) != 0 {
                    let code = b & (4 << h) != 0;
                    out.push(Piece { addr: (line << 6) | (h << 5), dirty: !code && b & (16 << h) != 0, code });
                }
            }
        }
        self.l1i.contents(true, &mut out);
        self.l1d.contents(false, &mut out);
        out
    }
}

/// The last [`BRANCHES`] branches before the window, each with the address of the
/// instruction after it (where it went): replayed before the prewarm so that the branch
/// predictor (and a BTB, by the branch's target) is trained over a longer history than B.
/// Each is the branch's record without its accesses (the prewarm must change no memory).
struct Branches {
    ring: Vec<(Instr, u64)>,
    next: usize,
    /// The slot of the last branch, waiting for the instruction after it.
    open: Option<usize>,
}

impl Branches {
    fn new() -> Branches {
        Branches { ring: Vec::new(), next: 0, open: None }
    }

    /// An instruction of the input (not an external record).
    #[inline]
    fn note(&mut self, ins: &Instr) {
        if let Some(i) = self.open.take() {
            self.ring[i].1 = ins.pc;
        }
        if ins.branch != crate::Branch::None {
            if self.ring.len() < BRANCHES {
                self.ring.push((Instr::default(), 0));
            }
            let slot = self.next;
            let r = &mut self.ring[slot].0;
            r.clear();
            (r.pc, r.len, r.op, r.branch, r.thread) = (ins.pc, ins.len, ins.op, ins.branch, ins.thread);
            (r.nsrc, r.src, r.ndst, r.dst) = (ins.nsrc, ins.src, ins.ndst, ins.dst);
            self.open = Some(slot);
            self.next = (self.next + 1) % BRANCHES;
        }
    }

    /// The branches whose next instruction is known, the oldest first.
    fn history(&self) -> Vec<(Instr, u64)> {
        let n = self.ring.len();
        (0..n).map(|i| (self.next + i) % n).filter(|&i| Some(i) != self.open).map(|i| self.ring[i].clone()).collect()
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
    write_windows_as(src, starts, len, prewarm, path, progress, true)
}

/// `write_windows`, the prewarm `packed` into one PREWARM record ([`Prewarm`]: what every
/// checkpoint holds since 2026-11-28, session 11) or, if not, written as the instruction
/// records it stands for (as before; kept so that tests can check both give the same
/// windows).
pub fn write_windows_as(src: &mut dyn TraceSource, starts: &[u64], len: u64, prewarm: usize, path: &dyn Fn(usize) -> PathBuf, progress: bool, packed: bool) -> Result<Written, TraceError> {
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
    let mut recent = Recent::new(prewarm);
    let mut order = Order::new();
    // Bring the shadow up to date with one record (Skip's rule: every byte stored or loaded).
    let mut branches = Branches::new();
    let apply = |ins: &Instr, shadow: &mut Shadow, pages: &mut Vec<u64>, recent: &mut Recent, order: &mut Order, branches: &mut Branches| {
        if !ins.external {
            recent.fetch(ins.pc);
            order.touch(ins.pc, ins.len.max(1) as u32);
            branches.note(ins);
        }
        if ins.is_pages() {
            pages.extend(ins.accesses.iter().map(|a| a.addr >> 12));
        } else {
            for a in &ins.accesses {
                shadow.store(a.addr, ins.value(a));
                order.touch(a.addr, a.size);
                if a.size > 0 {
                    recent.touch(a.addr, a.size, a.store);
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
            apply(&ins, &mut shadow, &mut pages, &mut recent, &mut order, &mut branches);
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
        // A fetched piece is fetched again (an instruction there, no accesses).
        let mut warm: Vec<(u64, Vec<u8>, bool, bool)> = Vec::new();
        for pc in if prewarm > 0 { recent.lines(prewarm) } else { Vec::new() } {
            if pc.code {
                warm.push((pc.addr, Vec::new(), false, true));
                continue;
            }
            let mut v = None;
            if pc.dirty {
                shadow.line_runs(pc.addr, |at, b| {
                    // The first known bytes inside the piece.
                    let from = at.max(pc.addr);
                    let end = (at + b.len() as u64).min(pc.addr + 32);
                    if v.is_none() && from < end {
                        let b = &b[(from - at) as usize..(end - at) as usize];
                        let size = [8usize, 4, 2, 1].into_iter().find(|&z| z <= b.len() && from % z as u64 == 0).unwrap_or(1);
                        v = Some((from, b[..size].to_vec()));
                    }
                });
            }
            warm.push(match v {
                Some((at, b)) => (at, b, true, false),
                None => (pc.addr, vec![0; 8], false, false),
            });
        }
        let taken = if prewarm > 0 { branches.history() } else { Vec::new() };
        while held < len {
            if !src.next_into(&mut ins)? {
                ended = true;
                break;
            }
            if !ins.external {
                recent.fetch(ins.pc);
                order.touch(ins.pc, ins.len.max(1) as u32);
                branches.note(&ins);
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
                    if a.size > 0 {
                        recent.touch(a.addr, a.size, a.store);
                    }
                }
            } else {
                apply(&ins, &mut shadow, &mut pages, &mut recent, &mut order, &mut branches);
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
            // Uncompressed: a window's file is read once per scheme point, and zstd took 6%
            // of a window's host instructions on gzip, 8% on gcc (docs/sampling.md,
            // session 11), for files 2-3 times smaller.
            let mut w = NativeWriter::uncompressed(tmp)?;
            let mut rec = Instr::default();
            // The prewarm: the branches, each followed by an instruction where it went (no
            // accesses); then code fetched, data loaded or stored at the first instruction's
            // address (one fetch line). Packed, it comes first, so that a reader has it
            // before the window's first instruction whatever it reads ahead.
            let pc = buf[..used].iter().find(|r| !r.external).map_or(0, |r| r.pc);
            if packed && (!taken.is_empty() || !warm.is_empty()) {
                w.write_skippable(KIND_PREWARM, &pack(&taken, &warm, pc))?;
            }
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
            // Or as records, after the image, written here as they were before the packed
            // form (not through `Prewarm`, which tests check against them).
            if !packed {
                for (b, to) in &taken {
                    w.write(b)?;
                    rec.clear();
                    (rec.pc, rec.len, rec.thread) = (*to, 1, b.thread);
                    w.write(&rec)?;
                }
                for (at, v, store, code) in &warm {
                    rec.clear();
                    if *code {
                        (rec.pc, rec.len) = (*at, 1);
                    } else {
                        (rec.pc, rec.len, rec.op) = (pc, 4, crate::OpClass::Mem);
                        rec.add_access(*store, *at, v);
                    }
                    w.write(&rec)?;
                }
            }
            for r in &buf[..used] {
                w.write(r)?;
            }
            w.finish()
        })?;
        out.image_bytes += image.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        out.instructions.push(held);
        out.prewarm.push((warm.len() + 2 * taken.len()) as u64);
        if ended {
            break;
        }
    }
    bar.finish();
    out.read = n;
    Ok(out)
}

/// A window's prewarm packed (the payload of its file's PREWARM record,
/// docs/trace-format.md): the branches with where each went, then the pieces of the lines,
/// read back as the instruction records they stand for — what the file held as records
/// before (`write_windows_as`) — without the general parser's work on each new static
/// instruction (every code piece and branch target is one), without the run loop's per
/// record, and without copying a record: each is handed out from the reader's own few.
///
/// Layout, all varints (`svarint`: zigzag): the counts of static branches, branches and
/// pieces, the data pieces' pc; each static branch (`varint` pc, `u8` len, op, source
/// count and sources, destination count and destinations); each branch (`varint` static
/// index << 2 | taken << 1 | thread given, then the thread if given; `svarint` where it
/// went from the instruction after it); each piece (`svarint` address from the last
/// piece's << 2 | kind: 0 code fetched, 1 a load of 8 bytes of 0, 2 a store, then its
/// size (1–8) and bytes).
pub struct Prewarm {
    b: Vec<u8>,
    at: usize,
    /// The static branches, as records (their outcome and thread set as each is handed out).
    statics: Vec<Instr>,
    branches: u64,
    pieces: u64,
    last: u64,
    /// The record handed out last: a static branch, the record where a branch went, a
    /// code piece, a data piece (load or store).
    out: Out,
    target: Instr,
    code: Instr,
    load: Instr,
    store: Instr,
    /// A branch was handed out: where it went comes next.
    target_due: bool,
}

#[derive(Clone, Copy)]
enum Out {
    Static(usize),
    Target,
    Code,
    Load,
    Store,
}

/// The packed prewarm of `taken` (branch, where it went) and `warm` (address, bytes,
/// store, code), the data pieces at `pc`.
fn pack(taken: &[(Instr, u64)], warm: &[(u64, Vec<u8>, bool, bool)], pc: u64) -> Vec<u8> {
    type Static = (u64, u8, u8, u8, [crate::Reg; MAX_SRC], u8, [crate::Reg; MAX_DST]);
    let mut statics: HashMap<Static, usize> = HashMap::new();
    let mut table: Vec<&Instr> = Vec::new();
    let mut body = Vec::with_capacity(4 * taken.len() + 3 * warm.len());
    for (r, to) in taken {
        let key = (r.pc, r.len, r.op as u8, r.nsrc, r.src, r.ndst, r.dst);
        let i = *statics.entry(key).or_insert_with(|| {
            table.push(r);
            table.len() - 1
        });
        let taken = (r.branch == crate::Branch::Taken) as u64;
        put_varint(&mut body, (i as u64) << 2 | taken << 1 | (r.thread != 0) as u64);
        if r.thread != 0 {
            put_varint(&mut body, r.thread as u64);
        }
        put_varint(&mut body, zigzag(to.wrapping_sub(r.pc.wrapping_add(r.len as u64)) as i64));
    }
    let mut last = 0u64;
    for (at, v, store, code) in warm {
        let kind = if *code { 0 } else if *store { 2 } else { 1 };
        put_varint(&mut body, zigzag(at.wrapping_sub(last) as i64) << 2 | kind);
        if kind == 2 {
            body.push(v.len() as u8);
            body.extend_from_slice(v);
        }
        last = *at;
    }
    let mut b = Vec::with_capacity(body.len() + 12 * table.len() + 32);
    for v in [table.len() as u64, taken.len() as u64, warm.len() as u64, pc] {
        put_varint(&mut b, v);
    }
    for r in &table {
        put_varint(&mut b, r.pc);
        b.extend_from_slice(&[r.len, r.op as u8, r.nsrc]);
        b.extend_from_slice(&r.src[..r.nsrc as usize]);
        b.push(r.ndst);
        b.extend_from_slice(&r.dst[..r.ndst as usize]);
    }
    b.extend_from_slice(&body);
    b
}

impl Prewarm {
    /// A packed prewarm (a PREWARM record's payload, `TraceSource::take_prewarm`): its
    /// header and static branches read, refused with one line if damaged.
    pub fn new(b: Vec<u8>) -> Result<Prewarm, String> {
        let mut p = Prewarm {
            b,
            at: 0,
            statics: Vec::new(),
            branches: 0,
            pieces: 0,
            last: 0,
            out: Out::Code,
            target: Instr { len: 1, ..Instr::default() },
            code: Instr { len: 1, ..Instr::default() },
            load: Instr::default(),
            store: Instr::default(),
            target_due: false,
        };
        let (statics, branches, pieces, pc) = (p.varint()?, p.varint()?, p.varint()?, p.varint()?);
        // Each static branch takes at least 5 bytes, each branch and piece 2 (counts the
        // payload cannot hold are damage, refused before anything is allocated or run).
        if statics.saturating_mul(5).saturating_add(branches.saturating_mul(2)).saturating_add(pieces.saturating_mul(2)) > p.b.len() as u64 {
            return Err(format!("prewarm record: {statics} static branches, {branches} branches and {pieces} pieces in {} bytes", p.b.len()));
        }
        (p.branches, p.pieces) = (branches, pieces);
        for _ in 0..statics {
            let mut r = Instr { pc: p.varint()?, len: p.byte()?, ..Instr::default() };
            let op = p.byte()?;
            r.op = crate::OpClass::from_u8(op).ok_or_else(|| format!("prewarm record: op class {op}"))?;
            r.nsrc = p.byte()?;
            if r.nsrc as usize > MAX_SRC {
                return Err(format!("prewarm record: {} sources", r.nsrc));
            }
            r.src[..r.nsrc as usize].copy_from_slice(p.bytes(r.nsrc as usize)?);
            r.ndst = p.byte()?;
            if r.ndst as usize > MAX_DST {
                return Err(format!("prewarm record: {} destinations", r.ndst));
            }
            r.dst[..r.ndst as usize].copy_from_slice(p.bytes(r.ndst as usize)?);
            p.statics.push(r);
        }
        (p.load.pc, p.load.len, p.load.op) = (pc, 4, crate::OpClass::Mem);
        p.load.add_access(false, 0, &[0; 8]);
        (p.store.pc, p.store.len, p.store.op) = (pc, 4, crate::OpClass::Mem);
        Ok(p)
    }

    /// The records it stands for: two for each branch (the branch, then where it went), one
    /// for each piece.
    pub fn records(&self) -> u64 {
        2 * self.branches + self.pieces
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.at).ok_or_else(truncated)?;
        self.at += 1;
        Ok(v)
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, String> {
        // Most take one to three bytes (a static branch's index, where a branch went, the
        // step to the next piece): read without a loop.
        let b = self.b.get(self.at..).unwrap_or_default();
        if let Some(&x) = b.first() {
            if x < 0x80 {
                self.at += 1;
                return Ok(x as u64);
            }
            if let Some(&y) = b.get(1) {
                if y < 0x80 {
                    self.at += 2;
                    return Ok((x & 0x7f) as u64 | (y as u64) << 7);
                }
                if let Some(&z) = b.get(2).filter(|&&z| z < 0x80) {
                    self.at += 3;
                    return Ok((x & 0x7f) as u64 | ((y & 0x7f) as u64) << 7 | (z as u64) << 14);
                }
            }
        }
        self.varint_long()
    }

    /// A varint of more than three bytes, or a damaged one: the native reader's own reading.
    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64, String> {
        let (v, next) = varint_at(&self.b, self.at).ok_or_else(|| "prewarm record: truncated, or a varint longer than 64 bits".to_string())?;
        self.at = next;
        Ok(v)
    }

    #[inline]
    fn bytes(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self.b.get(self.at..self.at + n).ok_or_else(truncated)?;
        self.at += n;
        Ok(s)
    }

    /// The next record (None after the last): the record the file held in its place before
    /// (`write_windows_as` with `packed` false writes exactly these).
    #[inline]
    pub fn next(&mut self) -> Result<Option<&Instr>, String> {
        self.out = if std::mem::take(&mut self.target_due) {
            Out::Target
        } else if self.branches > 0 {
            self.branches -= 1;
            let head = self.varint()?;
            let i = (head >> 2) as usize;
            let thread = if head & 1 != 0 { u32::try_from(self.varint()?).map_err(|_| "prewarm record: a thread past 32 bits".to_string())? } else { 0 };
            let next = self.varint()?;
            let count = self.statics.len();
            let r = self.statics.get_mut(i).ok_or_else(|| format!("prewarm record: static branch {i} of {count}"))?;
            r.branch = if head & 2 != 0 { crate::Branch::Taken } else { crate::Branch::NotTaken };
            r.thread = thread;
            self.target.pc = r.pc.wrapping_add(r.len as u64).wrapping_add(unzigzag(next) as u64);
            self.target.thread = thread;
            self.target_due = true;
            Out::Static(i)
        } else if self.pieces > 0 {
            self.pieces -= 1;
            let v = self.varint()?;
            let at = self.last.wrapping_add(unzigzag(v >> 2) as u64);
            self.last = at;
            match v & 3 {
                0 => {
                    self.code.pc = at;
                    Out::Code
                }
                1 => {
                    if at.checked_add(7).is_none() {
                        return Err(format!("prewarm record: a load of 8 bytes at {at:#x}"));
                    }
                    self.load.accesses[0].addr = at;
                    Out::Load
                }
                2 => {
                    let n = self.byte()? as usize;
                    if !(1..=8).contains(&n) || at.checked_add(n as u64 - 1).is_none() {
                        return Err(format!("prewarm record: a store of {n} bytes at {at:#x}"));
                    }
                    let from = self.at;
                    self.bytes(n)?;
                    self.store.accesses.clear();
                    self.store.data.clear();
                    self.store.add_access(true, at, &self.b[from..from + n]);
                    Out::Store
                }
                k => return Err(format!("prewarm record: piece kind {k} at {at:#x}")),
            }
        } else {
            return Ok(None);
        };
        Ok(Some(match self.out {
            Out::Static(i) => &self.statics[i],
            Out::Target => &self.target,
            Out::Code => &self.code,
            Out::Load => &self.load,
            Out::Store => &self.store,
        }))
    }
}

#[cold]
fn truncated() -> String {
    "prewarm record: truncated".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workloads, Consistent, NativeReader};

    fn read_all(p: &std::path::Path) -> Vec<Instr> {
        read_packed(p).0
    }

    /// A file's records, and the records of its packed prewarm if it has one.
    fn read_packed(p: &std::path::Path) -> (Vec<Instr>, Option<Vec<Instr>>) {
        let mut r = NativeReader::open(p).unwrap();
        let (mut v, mut ins, mut packed) = (Vec::new(), Instr::default(), None);
        while r.next_into(&mut ins).unwrap() {
            v.push(ins.clone());
            packed = packed.or_else(|| r.take_prewarm());
        }
        let packed = packed.map(|b| {
            let mut p = Prewarm::new(b).unwrap();
            let (n, mut out) = (p.records(), Vec::new());
            while let Some(r) = p.next().unwrap() {
                out.push(r.clone());
            }
            assert_eq!(out.len() as u64, n);
            out
        });
        (v, packed)
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
            let packed = |j: usize| dir.join(format!("{w}-{j}-packed.smt"));
            let mut src = Consistent::new(workloads::builtin(w, 3).unwrap());
            let done = write_windows_as(&mut src, &starts, len, 100, &path, false, false).unwrap();
            let mut src = Consistent::new(workloads::builtin(w, 3).unwrap());
            assert_eq!(write_windows(&mut src, &starts, len, 100, &packed, false).unwrap(), done);
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
            // Every branch of the input so far: pc, outcome, the next instruction's pc (MAX
            // until it comes).
            let mut taken: Vec<(u64, crate::Branch, u64)> = Vec::new();
            // Every 32-byte piece fetched or accessed so far (before each window's start).
            let mut touched: HashSet<u64> = HashSet::new();
            fn note_pieces(r: &Instr, touched: &mut HashSet<u64>) {
                if !r.external {
                    touched.insert(r.pc & !31);
                }
                for a in r.accesses.iter().filter(|a| a.size > 0) {
                    for p in a.addr >> 5..=(a.addr + a.size as u64 - 1) >> 5 {
                        touched.insert(p << 5);
                    }
                }
            }
            fn note_branch(r: &Instr, b: &mut Vec<(u64, crate::Branch, u64)>) {
                if r.external {
                    return;
                }
                if let Some(last) = b.last_mut().filter(|l| l.2 == u64::MAX) {
                    last.2 = r.pc;
                }
                if r.branch != crate::Branch::None {
                    b.push((r.pc, r.branch, u64::MAX));
                }
            }
            for (j, &s) in starts.iter().enumerate() {
                let recs = read_all(&path(j));
                // Up to the window's start: memory only.
                while n < s {
                    assert!(all.next_into(&mut ins).unwrap());
                    first_touch(&ins, &mut order, &mut seen);
                    note_branch(&ins, &mut taken);
                    note_pieces(&ins, &mut touched);
                    for a in &ins.accesses {
                        full.store(a.addr, ins.value(a));
                        if !ins.external {
                            last_line = a.addr;
                        }
                    }
                    n += !ins.external as u64;
                }
                // The branches the prewarm replays: the last ones whose next instruction came.
                let before: Vec<_> = taken[taken.len().saturating_sub(BRANCHES)..].iter().filter(|b| b.2 != u64::MAX).copied().collect();
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
                    note_branch(&ins, &mut taken);
                    note_pieces(&ins, &mut touched);
                    held += !ins.external as u64;
                    n += !ins.external as u64;
                    window.push(ins.clone());
                }
                // The file ends with them; before them the prewarm, and before that the image.
                // The prewarm: first the last branches before the window (the input's, in
                // order, each followed by an instruction where it went, none with accesses);
                // then the pieces of the 100 lines touched last, distinct, the last one the
                // window's start's latest, code fetched and data loaded or stored.
                let pw = done.prewarm[j] as usize;
                let image_end = recs.len() - window.len() - pw;
                // Packed, the same records: the prewarm's read back from its one record
                // (first in the file), the rest as they are.
                let (rest, unpacked) = read_packed(&packed(j));
                let unpacked = unpacked.expect("a packed prewarm");
                assert_eq!(unpacked.len(), pw, "{w} window {j}");
                assert_eq!(rest.len() + pw, recs.len(), "{w} window {j}");
                let all_packed = rest[..image_end].iter().chain(&unpacked).chain(&rest[image_end..]);
                for (k, (a, b)) in all_packed.zip(&recs).enumerate() {
                    assert_eq!(same(a), same(b), "{w} window {j}: record {k}, packed and not");
                }
                let warm = &recs[image_end..image_end + pw];
                assert!(warm.iter().all(|r| !r.external && r.accesses.len() <= 1));
                assert!(before.len() > 100, "{w} window {j}: {} branches", before.len());
                let (branch_recs, pieces) = warm.split_at(2 * before.len());
                for (k, b) in before.iter().enumerate() {
                    let (r, to) = (&branch_recs[2 * k], &branch_recs[2 * k + 1]);
                    assert_eq!((r.pc, r.branch, to.pc, to.branch), (b.0, b.1, b.2, crate::Branch::None), "{w} window {j}: branch {k}");
                    assert!(r.accesses.is_empty() && to.accesses.is_empty());
                }
                assert!(pieces.iter().all(|r| r.branch == crate::Branch::None));
                // A prewarm store writes the bytes memory holds at the start: nothing changes.
                for r in pieces.iter().filter(|r| r.accesses.first().is_some_and(|a| a.store)) {
                    let a = &r.accesses[0];
                    assert!(full.matches(a.addr, r.value(a)), "{w} window {j}: prewarm store at {:#x}", a.addr);
                }
                let at: Vec<u64> = pieces.iter().map(|r| r.accesses.first().map_or(r.pc, |a| a.addr) & !31).collect();
                let lines: std::collections::HashSet<u64> = at.iter().map(|a| a & !63).collect();
                // The 100 lines the L2 saw last, then what the L1s hold (some of the same).
                assert!(lines.len() >= 100, "{w} window {j}: {} distinct lines", lines.len());
                assert!(at.iter().all(|a| touched.contains(a)), "{w} window {j}: only pieces the input touched before");
                assert!(pieces.iter().any(|r| r.accesses.is_empty()), "{w} window {j}: code is fetched");
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

    /// A packed prewarm reads back as the records it was made of; a damaged one (cut
    /// anywhere, or a byte changed to anything) is refused with one line or reads as other
    /// records, never a panic.
    #[test]
    fn a_packed_prewarm_reads_back_and_damage_is_refused_without_a_panic() {
        let mut b = Instr::default();
        (b.pc, b.len, b.op, b.branch, b.thread, b.nsrc, b.ndst) = (0x40_1000, 2, crate::OpClass::Branch, crate::Branch::Taken, 3, 2, 1);
        (b.src[..2].copy_from_slice(&[4, 5]), b.dst[0] = 6);
        let warm = vec![(0x7000u64, vec![0u8; 8], false, false), (0x40_1020, vec![], false, true), (0x6ff8, vec![9, 8, 7, 6], true, false)];
        let bytes = pack(&[(b.clone(), 0x40_2000)], &warm, 0x40_0ff0);
        let all = |bytes: Vec<u8>| -> Result<Vec<Instr>, String> {
            let mut p = Prewarm::new(bytes)?;
            let mut v = Vec::new();
            while let Some(r) = p.next()? {
                v.push(r.clone());
            }
            Ok(v)
        };
        let v = all(bytes.clone()).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(v[0], b);
        assert_eq!((v[1].pc, v[1].len, v[1].thread, v[1].branch), (0x40_2000, 1, 3, crate::Branch::None));
        assert_eq!((v[2].pc, v[2].accesses[0].addr, v[2].accesses[0].store, v[2].data.as_slice()), (0x40_0ff0, 0x7000, false, &[0u8; 8][..]));
        assert_eq!((v[3].pc, v[3].len, v[3].accesses.len()), (0x40_1020, 1, 0));
        assert_eq!((v[4].accesses[0].addr, v[4].accesses[0].store, v[4].data.as_slice()), (0x6ff8, true, &[9u8, 8, 7, 6][..]));
        for k in 0..bytes.len() {
            let e = all(bytes[..k].to_vec()).unwrap_err();
            assert!(e.starts_with("prewarm record:") && !e.contains('\n'), "{e}");
            for x in [0u8, 0x7f, 0x80, 0xff] {
                let mut d = bytes.clone();
                d[k] = x;
                if let Err(e) = all(d) {
                    assert!(e.starts_with("prewarm record:") && !e.contains('\n'), "{e}");
                }
            }
        }
    }

    /// The L1 model is an LRU cache of 32-byte pieces: a hit moves nothing out, the third
    /// piece of a 2-way set evicts the least recent, and a stored piece leaves dirty.
    #[test]
    fn the_l1_model_evicts_the_least_recent_piece_of_a_set() {
        let mut l1 = L1::new();
        let s = L1_SETS as u64;
        assert_eq!(l1.access(7, true), Some(None));
        assert_eq!(l1.access(7 + s, false), Some(None));
        assert_eq!(l1.access(7 + s, false), None);
        assert_eq!(l1.access(7 + 2 * s, false), Some(Some((7, true))), "the least recent, dirty");
        assert_eq!(l1.access(7 + s, false), None, "the more recent stays");
        assert_eq!(l1.access(8, false), Some(None), "another set");
        let mut out = Vec::new();
        l1.contents(false, &mut out);
        let at: Vec<u64> = out.iter().map(|p| p.addr >> 5).collect();
        assert_eq!(at, [7 + 2 * s, 7 + s, 8], "the least recent of each set first");
    }

    /// The prewarm's order is the L2's: a line that keeps hitting in the L1 is not made
    /// recent by it (the L2 sees only misses and write-backs), and what the L1 holds comes
    /// last; a line written back is dirty.
    #[test]
    fn the_prewarm_orders_lines_as_the_l2_sees_them() {
        let mut r = Recent::new(4);
        let s = (L1_SETS * 32) as u64; // one set's pieces lie this far apart
        r.touch(0x1000, 8, true); // A: a store miss
        r.touch(0x1000 + 64 * 3, 8, false); // B
        r.touch(0x1000, 8, false); // A again: an L1 hit
        let l2: Vec<Piece> = r.lines(1);
        // The L2 saw B last; then the L1 holds A (dirty) and B.
        assert_eq!(l2[0], Piece { addr: 0x1000 + 64 * 3, dirty: false, code: false });
        assert!(l2[1..].contains(&Piece { addr: 0x1000, dirty: true, code: false }));
        // A leaves the L1 (two more pieces of its set): written back, dirty in the L2's order.
        r.touch(0x1000 + s, 8, false);
        r.touch(0x1000 + 2 * s, 8, false);
        let l2 = r.lines(4);
        assert!(l2.contains(&Piece { addr: 0x1000, dirty: true, code: false }), "{l2:?}");
        r.fetch(0x9000);
        assert!(r.lines(4).contains(&Piece { addr: 0x9000, dirty: false, code: true }));
    }

    #[test]
    fn overlapping_windows_are_refused_with_one_line() {
        let e = check_cuts(&[0, 100], 200).unwrap_err();
        assert!(e.contains("overlap") && !e.contains('\n'), "{e}");
        assert!(check_cuts(&[0, 200], 200).is_ok());
        assert!(check_cuts(&[0], 0).is_err());
    }
}
