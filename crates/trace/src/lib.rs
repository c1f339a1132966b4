//! Traces of real programs that carry data values, and the built-in workloads.
//!
//! - [`record`]: the [`Instr`] record, filled in place by every [`TraceSource`].
//! - [`workloads`]: built-in programs generated on the fly (`stream`, `chase`, `hot`, `mix`).
//! - [`native`]: the native trace file format (`docs/trace-format.md`).
//! - [`champsim`], [`lackey`]: readers of ChampSim and Valgrind lackey traces
//!   (`docs/trace-formats.md`), raw or xz/gzip/zstd-compressed ([`compress`]).
//! - [`open`]: [`open_trace_as`] opens a file of any of these formats, named or detected,
//!   and reads it on a thread of its own ([`readahead`]).
//! - [`export`]: any source written as a native or ChampSim trace (`secmem export`).
//! - [`bench_files`]: the same instructions as a file of each format, for the input benchmark.
//! - [`consistent`]: [`Consistent`] supplies memory a trace never saw written;
//!   [`Skip`] fast-forwards over the first instructions of any source.
//! - [`checkpoint`]: one pass writes each window of a sampled run as a trace of its own.

pub mod bench_files;
pub mod champsim;
pub mod checkpoint;
pub mod compress;
pub mod consistent;
pub mod cputime;
pub mod export;
pub mod lackey;
pub mod native;
pub mod packed;
pub mod open;
pub mod progress;
pub mod readahead;
pub mod record;
pub mod stop;
pub mod workloads;

pub use champsim::ChampSimReader;
pub use consistent::Consistent;
pub use export::{export, export_stored, Exported, EXPORT_FORMATS};
pub use lackey::LackeyReader;
pub use native::{NativeReader, NativeWriter};
pub use open::{detect_format, open_trace, open_trace_as, reading, set_reading, FORMATS, READINGS};
pub use readahead::{ReadAhead, ReadInline};

pub use packed::{One, Recs};
pub use record::{Access, Branch, Instr, OpClass, Record, Reg};

/// Errors reading a trace: always name where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A damaged or truncated file; `offset` counts bytes of the uncompressed file (native:
    /// the 16-byte header, then the decompressed record stream; ChampSim and lackey: the
    /// decompressed stream from its first byte).
    #[error("{path}: {what} at byte offset {offset}")]
    Corrupt {
        path: String,
        offset: u64,
        what: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// A stream of instruction records.
pub trait TraceSource: Send {
    /// Fill `out` with the next record; `Ok(false)` at the end of the trace.
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError>;
    /// The next records, at most `max` (and at least one) of them, read where the source
    /// holds them when it can ([`ReadAhead`]'s and [`ReadInline`]'s batches of packed slots:
    /// no copy, and no call per record),
    /// else `buf` filled by `next_into`; empty at the end. The same records, end and errors
    /// as `next_into`: the records given are consumed, and an error comes after them.
    #[inline]
    fn next_slice<'a>(&'a mut self, buf: &'a mut Instr, _max: usize) -> Result<Recs<'a>, TraceError> {
        Ok(Recs::Plain(if self.next_into(buf)? { std::slice::from_ref(buf) } else { &[] }))
    }
    /// Records into `slots` in order (a batch of [`ReadAhead`]'s), until they are full or the
    /// values read come to `max_bytes`: how many were read, and the end of the source
    /// (`Ok(())`) or its error if it came. The same records, end and error as `next_into`.
    /// A slot whose buffers grew big gives them up before it is filled
    /// (`readahead::give_up_big`).
    #[inline]
    fn fill(&mut self, slots: &mut [Instr], max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        let mut bytes = 0;
        for (n, r) in slots.iter_mut().enumerate() {
            readahead::give_up_big(r);
            match self.next_into(r) {
                Ok(true) => {
                    bytes += r.data.len();
                    if bytes >= max_bytes {
                        return (n + 1, None);
                    }
                }
                Ok(false) => return (n, Some(Ok(()))),
                Err(e) => return (n, Some(Err(e))),
            }
        }
        (slots.len(), None)
    }
    /// `fill` into a batch of packed slots (`packed`): the same records, end and error. A
    /// source that has no packed form keeps every record in the spill slots, in order, and
    /// says so (`plain`): they are handed on as plain records.
    #[inline]
    fn fill_packed(&mut self, b: &mut packed::PackedBatch, max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        let (n, end) = self.fill(&mut b.spill, max_bytes);
        (b.nspill, b.plain) = (n, true);
        (n, end)
    }
    /// A short name for reports (workload name or file name).
    fn name(&self) -> &str;
    /// The packed prewarm of a checkpointed window (`checkpoint::Prewarm`), once the records
    /// before it were read: a native trace's PREWARM record, taken once. None elsewhere.
    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// Whether long work inside the source (a fast-forward) may draw progress on stderr;
    /// adapters pass it on.
    fn show_progress(&mut self, _on: bool) {}
}

impl<T: TraceSource + ?Sized> TraceSource for Box<T> {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        (**self).next_into(out)
    }
    #[inline]
    fn next_slice<'a>(&'a mut self, buf: &'a mut Instr, max: usize) -> Result<Recs<'a>, TraceError> {
        (**self).next_slice(buf, max)
    }
    #[inline]
    fn fill_packed(&mut self, b: &mut packed::PackedBatch, max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        (**self).fill_packed(b, max_bytes)
    }
    #[inline]
    fn fill(&mut self, slots: &mut [Instr], max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        (**self).fill(slots, max_bytes)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn show_progress(&mut self, on: bool) {
        (**self).show_progress(on)
    }
    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        (**self).take_prewarm()
    }
}

/// Fast-forward: the first `n` instructions of a source are not handed out (nor the
/// external records among them), as the seeds skip a program's start. What they left in
/// memory is not lost: every byte they stored (or loaded: memory that was already there) is
/// handed out when the window starts, as external records of the final contents — the memory
/// image a functional fast-forward would have built. Pair it with [`Consistent`] for memory
/// the trace never shows at all.
pub struct Skip<S> {
    inner: S,
    left: u64,
    image: consistent::Shadow,
    /// Pages named by the records of [`Instr::set_pages`] it skipped: handed out again first.
    pages: Vec<u64>,
    /// Emitting the image: (page index, byte offset) of the next run.
    cursor: Option<(usize, usize)>,
    progress: bool,
}

impl<S: TraceSource> Skip<S> {
    pub fn new(inner: S, n: u64) -> Skip<S> {
        Skip { inner, left: n, image: consistent::Shadow::default(), pages: Vec::new(), cursor: None, progress: false }
    }

    /// Fast-forward; a stop request (SIGINT/SIGTERM) ends it within a few thousand
    /// instructions with [`stop::interrupted`], and a long one shows its progress.
    fn skip(&mut self, out: &mut Instr) -> Result<(), TraceError> {
        let total = self.left;
        let mut bar = progress::Progress::new(self.progress, total, format!("{} skipping", self.inner.name()));
        while self.left > 0 {
            if self.left & 0xFFF == 0 {
                if let Some(sig) = stop::stop_requested() {
                    bar.finish();
                    return Err(stop::interrupted(sig));
                }
                if self.left & 0xFFFF == 0 {
                    bar.update(total - self.left);
                }
            }
            if !self.inner.next_into(out)? {
                break;
            }
            self.left -= !out.external as u64;
            if out.is_pages() {
                self.pages.extend(out.accesses.iter().map(|a| a.addr >> 12));
                continue;
            }
            for a in &out.accesses {
                self.image.store(a.addr, out.value(a));
            }
        }
        bar.finish();
        self.left = 0;
        self.cursor = Some((0, 0));
        Ok(())
    }
}

impl<S: TraceSource> TraceSource for Skip<S> {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.left > 0 {
            self.skip(out)?;
        }
        if self.cursor.is_some() && !self.pages.is_empty() {
            let n = self.pages.len().min(native::MAX_ACCESSES);
            out.set_pages(self.pages.drain(..n));
            return Ok(true);
        }
        while let Some((k, from)) = self.cursor {
            if k >= self.image.pages() {
                self.cursor = None;
                self.image = consistent::Shadow::default();
                break;
            }
            match self.image.run_in_page(k, from) {
                Some((addr, bytes)) => {
                    let end = (addr % 4096) as usize + bytes.len();
                    out.clear();
                    out.external = true;
                    out.add_access(true, addr, bytes);
                    self.cursor = Some((k, end));
                    return Ok(true);
                }
                None => self.cursor = Some((k + 1, 0)),
            }
        }
        self.inner.next_into(out)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn show_progress(&mut self, on: bool) {
        self.progress = on;
        self.inner.show_progress(on);
    }
}

#[cfg(test)]
mod skip_tests {
    use super::*;

    #[test]
    fn skip_hands_out_the_skipped_memory_image_then_the_nth_instruction() {
        let mut src = workloads::builtin("stream", 1).unwrap();
        let mut all = Vec::new();
        let mut ins = Instr::default();
        while all.len() < 5000 && src.next_into(&mut ins).unwrap() {
            all.push(ins.clone());
        }
        let externals_first = all.iter().take_while(|r| r.external).count();
        assert!(externals_first > 0, "stream starts by initialising its arrays");
        let mut s = Skip::new(workloads::builtin("stream", 1).unwrap(), 100);
        let mut image = 0;
        while s.next_into(&mut ins).unwrap() && ins.external {
            image += ins.accesses[0].size as u64;
        }
        assert!(image > 0, "the skipped part's memory comes first");
        let instrs: Vec<&Instr> = all.iter().filter(|r| !r.external).collect();
        assert_eq!(&ins, instrs[100], "then the 101st instruction");
    }

    #[test]
    fn skipped_stores_reach_later_loads_through_consistent() {
        // stream's arrays are written by external records and instructions in the skipped
        // part; after the window starts every load must still agree with a shadow memory
        // built only from what the adapter hands out.
        let mut c = Consistent::new(Skip::new(workloads::builtin("stream", 1).unwrap(), 20_000));
        let mut mem = std::collections::HashMap::<u64, u8>::new();
        let mut ins = Instr::default();
        let (mut loads, mut supplied) = (0, 0);
        for _ in 0..50_000 {
            assert!(c.next_into(&mut ins).unwrap());
            for a in &ins.accesses {
                let v = ins.value(a);
                if a.store {
                    for (k, b) in v.iter().enumerate() {
                        mem.insert(a.addr + k as u64, *b);
                    }
                    supplied += ins.external as u64;
                } else {
                    loads += 1;
                    for (k, b) in v.iter().enumerate() {
                        assert_eq!(mem.get(&(a.addr + k as u64)), Some(b), "load at {:#x}", a.addr);
                    }
                }
            }
        }
        assert!(loads > 1000 && supplied > 0, "{loads} loads, {supplied} external stores");
        assert_eq!(c.supplied_records(), 0, "the skipped part's image leaves nothing to supply");
    }
}
