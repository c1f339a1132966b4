//! [`ReadAhead`] and [`ReadInline`]: a trace source read in batches of packed slots.
//!
//! A source decodes records straight into the slots of a batch, packed slots of one line
//! each (`packed`: a native trace's common record; the others, and every record of a
//! source with no packed form, whole in its spill slots); the consumer reads them there in
//! order (`next_slice`: no copy) or copies them out (`next_into`). The two differ in where
//! the batches are filled:
//! - [`ReadAhead`] fills them on a thread of its own, ahead of the consumer: decompressing
//!   xz (a ChampSim or lackey file) costs the simulating thread as much as simulating, while
//!   the machine's second core idles. The batches form a fixed ring of [`RING`]: an emptied
//!   batch goes back to the reader with its slots and their buffers, and the reader waits
//!   for one rather than make another, so once the ring has gone round nothing is allocated
//!   or faulted in again. (Packing each record into shared vectors instead cost two copies
//!   of every record, a fifth of a run's host instructions on gzip; slots made afresh
//!   whenever the reader found no batch given back cost their allocation and page faults:
//!   callgrind and interleaved CPU times, docs/speed.md.) Buffering is bounded: at most
//!   [`RING`] batches of at most [`BATCH`] records or [`BATCH_BYTES`] bytes of values are
//!   read ahead.
//! - [`ReadInline`] fills one batch on the consumer's own thread whenever it has been read
//!   (a native trace file's records, when the process reads them inline:
//!   `open::set_reading`; a checkpointed window's, always). Each slot read ahead was a line written on one core and read on
//!   the other, which cost the consumer about what decoding it does: inline, a run took
//!   13-28% less CPU, but 5-28% more wall time where the second core would have idled
//!   (docs/speed.md, "Sixth pass").
//!
//! What the consumer sees is what the source would have given: the same records, then the
//! same end or the same error (repeated on every later call, as the readers do), at the
//! same record position. Dropping a `ReadAhead` stops the reading: the thread ends at its
//! next batch (an optional stop hook reaches sources that may block, such as a live
//! program).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::compress::repeat_err;
use crate::packed::{PackedBatch, Shape};
use crate::{Instr, Recs, TraceError, TraceSource};

/// Records per batch.
pub const BATCH: usize = 1024;
/// A batch closes early once its records carry this many bytes of values.
pub const BATCH_BYTES: usize = 1 << 20;
/// Batches in the ring: the one the consumer reads, the one the reader fills, the rest
/// waiting.
pub const RING: usize = 8;
/// A slot whose value buffer has grown past this (a loader image's record) gives it up
/// before it is filled again (`give_up_big`).
const SLOT_BYTES: usize = 4096;

/// A batch as it is handed over: the first `n` slots hold records (packed, `packed`), then
/// how the source ended, if it did.
pub struct Batch {
    b: PackedBatch,
    n: usize,
    end: Option<Result<(), TraceError>>,
}

impl Default for Batch {
    fn default() -> Batch {
        Batch { b: PackedBatch::new(0), n: 0, end: None }
    }
}

impl Batch {
    /// The source decodes straight into the slots, in one call a batch.
    #[inline(always)]
    fn fill<S: TraceSource + ?Sized>(&mut self, src: &mut S) {
        (self.b.nspill, self.b.plain) = (0, false);
        self.b.shapes.clear();
        (self.n, self.end) = src.fill_packed(&mut self.b, BATCH_BYTES);
    }
}

/// Where a [`Batches`] gets its next batch.
pub trait Feed {
    /// The next batch into `cur`, which has been read to its end. An error that ends the
    /// reading for good comes with `true` (it is kept and repeated); one with `false` (a stop
    /// request while waiting) is only returned.
    fn next(&mut self, cur: &mut Batch) -> Result<(), (TraceError, bool)>;
    /// The source's `take_prewarm`, where the consumer can reach it.
    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        None
    }
}

/// A source's records in batches of packed slots, read in order: [`ReadAhead`] or
/// [`ReadInline`] (see the module documentation).
pub struct Batches<F> {
    name: String,
    feed: F,
    cur: Batch,
    /// Next record of `cur`.
    at: usize,
    /// The shapes the packed slots name: those of every batch so far.
    shapes: Vec<Shape>,
    failed: Option<TraceError>,
    done: bool,
}

/// A [`TraceSource`] read ahead on a thread; see the module documentation.
pub type ReadAhead = Batches<Ahead>;
/// A [`TraceSource`] read in batches on the consumer's thread; see the module documentation.
pub type ReadInline<S> = Batches<Inline<S>>;

/// [`ReadAhead`]'s reader thread and the channels to it.
pub struct Ahead {
    /// The source's, for the error if the thread is lost.
    name: String,
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<JoinHandle<()>>,
}

/// [`ReadInline`]'s source.
pub struct Inline<S>(S);

impl ReadAhead {
    /// Read `src` on a thread of its own.
    pub fn new<S: TraceSource + 'static>(src: S) -> ReadAhead {
        ReadAhead::spawn(src, None)
    }

    /// As [`ReadAhead::new`]; `stop` is called if the consumer drops it before the source
    /// has ended (to end a source that may block the thread, e.g. kill a traced program).
    pub fn with_stop<S: TraceSource + 'static>(src: S, stop: impl FnOnce() + Send + 'static) -> ReadAhead {
        ReadAhead::spawn(src, Some(Box::new(stop)))
    }

    fn spawn<S: TraceSource + 'static>(src: S, stop: Option<Box<dyn FnOnce() + Send>>) -> ReadAhead {
        let name = src.name().to_string();
        // Neither channel ever holds more than the ring: only the wait for a batch given
        // back blocks the reader.
        let (tx, rx) = sync_channel(RING);
        let (back, back_rx) = sync_channel(RING);
        let thread = std::thread::Builder::new()
            .name("secmem-read-ahead".into())
            .spawn(move || read(src, tx, back_rx))
            .expect("cannot start the trace reader thread");
        // It starts with an empty batch, not one of the ring's: the ring stays RING.
        Batches::with(name.clone(), Ahead { name, rx, back, stop, thread: Some(thread) }, Batch::default())
    }
}

impl<S: TraceSource> ReadInline<S> {
    /// Read `src` in batches on the caller's thread. The first batch is read now, so that
    /// what a source holds from before its first record (a checkpoint's prewarm,
    /// `take_prewarm`) can be taken before the first slice, as from the source itself.
    pub fn new(src: S) -> ReadInline<S> {
        let name = src.name().to_string();
        let mut r = Batches::with(name, Inline(src), Batch { b: PackedBatch::new(BATCH), ..Batch::default() });
        r.cur.fill(&mut r.feed.0);
        r.shapes.extend_from_slice(&r.cur.b.shapes);
        r
    }
}

impl<F: Feed> Batches<F> {
    fn with(name: String, feed: F, cur: Batch) -> Batches<F> {
        Batches { name, feed, cur, at: 0, shapes: Vec::new(), failed: None, done: false }
    }

    /// Records `from..to` of `cur`.
    #[inline]
    fn recs(&self, from: usize, to: usize) -> Recs<'_> {
        self.cur.b.recs(&self.shapes, from, to)
    }

    /// Make `cur` a batch with records from `at` on: false at the end of the source.
    #[cold]
    fn next_batch(&mut self) -> Result<bool, TraceError> {
        loop {
            if let Some(e) = &self.failed {
                return Err(repeat_err(e));
            }
            if self.done {
                return Ok(false);
            }
            match self.cur.end.take() {
                Some(Ok(())) => {
                    self.done = true;
                    continue;
                }
                Some(Err(e)) => {
                    self.failed = Some(e);
                    continue;
                }
                None => {}
            }
            match self.feed.next(&mut self.cur) {
                Ok(()) => {
                    self.shapes.extend_from_slice(&self.cur.b.shapes);
                    self.at = 0;
                    if self.cur.n > 0 {
                        return Ok(true);
                    }
                }
                Err((e, true)) => self.failed = Some(e),
                Err((e, false)) => return Err(e),
            }
        }
    }
}

impl<F: Feed + Send> TraceSource for Batches<F> {
    #[inline]
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.at < self.cur.n || self.next_batch()? {
            self.recs(self.at, self.at + 1).get(0).to_instr(out); // in `out`'s buffers
            self.at += 1;
            return Ok(true);
        }
        Ok(false)
    }

    #[inline]
    fn next_slice<'a>(&'a mut self, _: &'a mut Instr, max: usize) -> Result<Recs<'a>, TraceError> {
        if self.at == self.cur.n && !self.next_batch()? {
            return Ok(Recs::EMPTY);
        }
        let from = self.at;
        self.at = self.cur.n.min(from.saturating_add(max.max(1)));
        Ok(self.recs(from, self.at))
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        self.feed.take_prewarm()
    }
}

impl<S: TraceSource> Feed for Inline<S> {
    #[inline]
    fn next(&mut self, cur: &mut Batch) -> Result<(), (TraceError, bool)> {
        cur.fill(&mut self.0);
        Ok(())
    }

    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        self.0.take_prewarm()
    }
}

impl Feed for Ahead {
    fn next(&mut self, cur: &mut Batch) -> Result<(), (TraceError, bool)> {
        // Waiting for a source that may take long (a live program fast-forwarding): a stop
        // request ends the wait.
        loop {
            match self.rx.recv_timeout(std::time::Duration::from_millis(100)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(sig) = crate::stop::stop_requested() {
                        return Err((crate::stop::interrupted(sig), false));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err((self.lost(), true)),
                Ok(b) => {
                    let used = std::mem::replace(cur, b);
                    if !used.b.slots.is_empty() {
                        // (Not the empty batch a ReadAhead starts with: the ring stays RING.)
                        let _ = self.back.try_send(used);
                    }
                    return Ok(());
                }
            }
        }
    }
}

impl Ahead {
    /// The reader thread stopped without saying how the source ended: it panicked.
    #[cold]
    fn lost(&mut self) -> TraceError {
        let why = match self.thread.take().map(|t| t.join()) {
            Some(Err(p)) => p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into()),
            _ => "no reason given".into(),
        };
        TraceError::Other(format!("{}: the trace reader stopped: {}", self.name, why.replace('\n', " ")))
    }
}

/// The reader thread: batches until the source ends or fails, or the consumer is gone.
/// (Inlined into the thread's closure: left out of line, the native reader's loop compiled
/// to ~5 more host instructions a record and ran 2-10% slower, in interleaved rounds.)
#[inline(always)]
fn read<S: TraceSource>(mut src: S, tx: SyncSender<Batch>, back: Receiver<Batch>) {
    let mut made = 0;
    loop {
        let mut b = match back.try_recv() {
            Ok(b) => b,
            Err(_) if made < RING => {
                made += 1;
                Batch { b: PackedBatch::new(BATCH), ..Batch::default() }
            }
            Err(_) => match back.recv() {
                Ok(b) => b,
                Err(_) => return, // the consumer is gone
            },
        };
        b.fill(&mut src);
        let last = b.end.is_some();
        if tx.send(b).is_err() || last {
            return;
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // The channels close with this struct: the thread's next send, or its wait for a
        // batch given back, fails and it ends, dropping the source. A source blocked
        // elsewhere is the stop hook's business. The thread is not waited for (a source
        // blocked on a pipe would hang the drop).
        if let Some(stop) = self.stop.take() {
            if self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
                stop();
            }
        }
    }
}

/// A slot whose buffers grew past [`SLOT_BYTES`] (a loader image's record) gives them up, so
/// that a few big records do not stay allocated in every slot of the ring. Sources call it
/// for each slot as `TraceSource::fill` is about to decode into it: the slot's line is being
/// written then anyway. (A pass over the slots before the reader fills a batch moved every
/// slot's line between the cores once more; one by the consumer as it handed a batch back
/// cost ~10 host instructions a record: docs/speed.md.)
#[inline(always)]
pub(crate) fn give_up_big(r: &mut Instr) {
    if r.data.capacity() > SLOT_BYTES || r.accesses.capacity() > SLOT_BYTES / 64 {
        give_up(r);
    }
}

#[cold]
fn give_up(r: &mut Instr) {
    (r.data, r.accesses) = (Vec::new(), Vec::new());
}

/// Three records of one small access each, for `fills_give_up_big_buffers`.
#[cfg(test)]
pub(crate) fn small_records() -> Vec<Instr> {
    (0..3u64)
        .map(|k| {
            let mut r = Instr { pc: 0x40_0000 + 4 * k, len: 4, ..Instr::default() };
            r.add_access(k == 1, 0x1000 + 64 * k, &k.to_le_bytes());
            r
        })
        .collect()
}

/// Test of a source's `fill` (the default and the native reader's): into three slots whose
/// buffers are small, of big values and of many accesses, it reads the first three records
/// of `want` (`small_records`), the small slot keeping its buffer and the others giving
/// theirs up first.
#[cfg(test)]
pub(crate) fn fills_give_up_big_buffers(src: &mut dyn TraceSource, want: &[Instr]) {
    let mut recs = vec![Instr::default(); 3];
    recs[0].data.reserve_exact(64);
    recs[0].accesses.reserve_exact(4);
    recs[1].add_access(true, 0x2000, &vec![2u8; SLOT_BYTES + 1]);
    for k in 0..SLOT_BYTES / 64 + 1 {
        recs[2].add_access(false, 0x3000 + k as u64, &[3]);
    }
    let kept = (recs[0].data.as_ptr(), recs[0].accesses.as_ptr());
    let (n, _) = src.fill(&mut recs, usize::MAX);
    assert_eq!(n, 3);
    assert!(recs[..] == want[..3], "the records read");
    assert!(want[..3].iter().all(|r| r.data.len() <= 64 && r.accesses.len() <= 4), "small records");
    assert_eq!((recs[0].data.as_ptr(), recs[0].accesses.as_ptr()), kept, "a small slot keeps its buffers");
    for r in &recs[1..] {
        assert!(r.data.capacity() <= SLOT_BYTES && r.accesses.capacity() <= SLOT_BYTES / 64, "big buffers given up");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{builtin, testutil::take};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    /// Records from a vector, then an error or the end; counts how far it was read and
    /// says when it is dropped.
    struct Scripted {
        recs: Vec<Instr>,
        at: usize,
        fail: Option<&'static str>,
        read: Arc<AtomicU64>,
        dropped: Arc<AtomicBool>,
    }

    impl TraceSource for Scripted {
        fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
            if self.at == self.recs.len() {
                return match self.fail {
                    Some(m) => Err(TraceError::Corrupt { path: "s".into(), offset: self.at as u64, what: m.into() }),
                    None => Ok(false),
                };
            }
            out.copy_from(&self.recs[self.at]); // in its buffers, as readers fill a slot
            self.at += 1;
            self.read.fetch_add(1, Ordering::Relaxed);
            Ok(true)
        }
        fn name(&self) -> &str {
            "scripted"
        }
    }

    impl Drop for Scripted {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::Relaxed);
        }
    }

    fn scripted(n: usize, fail: Option<&'static str>) -> (Scripted, Vec<Instr>, Arc<AtomicU64>, Arc<AtomicBool>) {
        let recs = take(builtin("mix", 2).unwrap().as_mut(), n);
        let (read, dropped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        (Scripted { recs: recs.clone(), at: 0, fail, read: read.clone(), dropped: dropped.clone() }, recs, read, dropped)
    }

    /// Every record, then the end or the error: read by `next_into` and by `next_slice` in
    /// turns (the two must give one stream, whichever is called), slices of at most 0 (one),
    /// 1, 2, 7, 500 or any number of records, none longer; each end or error repeated by both.
    fn drain(r: &mut dyn TraceSource) -> (Vec<Instr>, Option<String>) {
        let (mut v, mut i, mut k) = (Vec::new(), Instr::default(), 0usize);
        loop {
            let got = if (k / 7) % 2 == 1 {
                let max = [0, 1, 2, 7, 500, usize::MAX][k % 6];
                r.next_slice(&mut Instr::default(), max).map(|x| {
                    assert!(x.len() <= max.max(1), "{} records, at most {max} asked", x.len());
                    x.to_vec()
                })
            } else {
                r.next_into(&mut i).map(|more| if more { vec![i.clone()] } else { vec![] })
            };
            k += 1;
            match got {
                Ok(x) if !x.is_empty() => v.extend(x),
                Ok(_) => {
                    assert!(!r.next_into(&mut i).unwrap(), "records after the end");
                    assert!(r.next_slice(&mut i, 5).unwrap().is_empty(), "records after the end");
                    return (v, None);
                }
                Err(e) => {
                    assert_eq!(r.next_into(&mut i).unwrap_err().to_string(), e.to_string(), "errors are sticky");
                    assert_eq!(r.next_slice(&mut i, 5).unwrap_err().to_string(), e.to_string(), "errors are sticky");
                    return (v, Some(e.to_string()));
                }
            }
        }
    }

    #[test]
    fn slots_that_grew_big_give_their_buffers_up_as_they_are_filled_and_the_others_keep_theirs() {
        let want = small_records();
        let mut src = Scripted { recs: want.clone(), at: 0, fail: None, read: Arc::default(), dropped: Arc::default() };
        fills_give_up_big_buffers(&mut src, &want);
    }

    /// `src` read ahead on a thread, and a copy of it (its own counters) in batches on the
    /// caller's.
    fn both(src: Scripted) -> [Box<dyn TraceSource>; 2] {
        let again = Scripted { recs: src.recs.clone(), at: 0, fail: src.fail, read: Arc::default(), dropped: Arc::default() };
        [Box::new(ReadAhead::new(src)), Box::new(ReadInline::new(again))]
    }

    #[test]
    fn every_record_then_the_end() {
        for n in [0, 1, BATCH - 1, BATCH, BATCH + 1, 5 * BATCH + 17] {
            let (src, want, _, dropped) = scripted(n, None);
            let [ahead, inline] = both(src);
            for mut r in [inline, ahead] {
                assert_eq!(r.name(), "scripted");
                let (got, err) = drain(&mut *r);
                assert!(err.is_none() && got == want, "{n} records");
            }
            for _ in 0..1000 {
                if dropped.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert!(dropped.load(Ordering::Relaxed), "the source read ahead is dropped once read");
        }
    }

    /// Records of every value size up to 70 bytes and up to five accesses, in batches that
    /// close on either limit, come out as they went in: also once the ring has gone round
    /// several times, each slot then holding a record of another shape than its last (no
    /// access or byte of the earlier one left behind), and after a record too big for a
    /// slot to keep its buffers.
    #[test]
    fn records_of_every_shape_come_out_as_they_went_in() {
        let mut recs = Vec::new();
        for k in 0..3 * RING * BATCH + 11 {
            let mut r = Instr { pc: 0x40_0000 + 4 * k as u64, len: 4, external: k % 97 == 0, ..Instr::default() };
            for j in 0..k % 6 {
                let size = (k * 7 + j * 13) % 71;
                let value: Vec<u8> = (0..size).map(|b| (b + k + j) as u8).collect();
                r.add_access(j % 2 == 0, 0x1000_0000 + 64 * (k + j) as u64, &value);
            }
            if k == BATCH + 5 || k == 2 * RING * BATCH + 3 {
                r.add_access(true, 0x2000_0000, &vec![7u8; BATCH_BYTES + 1]); // closes its batch alone
            }
            recs.push(r);
        }
        let src = Scripted { recs: recs.clone(), at: 0, fail: None, read: Arc::default(), dropped: Arc::default() };
        for mut r in both(src) {
            let (got, err) = drain(&mut *r);
            assert!(err.is_none());
            assert_eq!(got.len(), recs.len());
            for (k, (a, b)) in got.iter().zip(&recs).enumerate() {
                assert_eq!(a, b, "record {k}");
            }
        }
    }

    #[test]
    fn an_error_comes_after_the_records_before_it() {
        // The last after the ring has gone round twice.
        for n in [0, 3, BATCH, 2 * BATCH + 5, 2 * RING * BATCH + 5] {
            let (src, want, _, _) = scripted(n, Some("bad record"));
            for mut r in both(src) {
                let (got, err) = drain(&mut *r);
                assert_eq!(got, want, "{n}");
                assert_eq!(err.as_deref(), Some(format!("s: bad record at byte offset {n}").as_str()));
            }
        }
    }

    #[test]
    fn reading_ahead_is_bounded_and_an_early_drop_stops_it() {
        let (src, want, read, dropped) = scripted(100 * BATCH, None);
        let stopped = Arc::new(AtomicBool::new(false));
        let s = stopped.clone();
        let mut r = ReadAhead::with_stop(src, move || s.store(true, Ordering::Relaxed));
        let mut i = Instr::default();
        for w in want.iter().take(10) {
            assert!(r.next_into(&mut i).unwrap());
            assert_eq!(&i, w);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let ahead = read.load(Ordering::Relaxed) as usize;
        assert!(ahead <= RING * BATCH, "read {ahead} records ahead of 10");
        drop(r);
        assert!(stopped.load(Ordering::Relaxed), "the stop hook runs when the source had not ended");
        for _ in 0..1000 {
            if dropped.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(dropped.load(Ordering::Relaxed), "the thread ends and drops the source");
        assert!((read.load(Ordering::Relaxed) as usize) < want.len(), "it stopped reading");
    }

    #[test]
    fn a_panicking_source_is_one_error_line() {
        struct Panics;
        impl TraceSource for Panics {
            fn next_into(&mut self, _: &mut Instr) -> Result<bool, TraceError> {
                panic!("decoder bug\nsecond line");
            }
            fn name(&self) -> &str {
                "p.smt"
            }
        }
        let (got, err) = drain(&mut ReadAhead::new(Panics)); // (inline, a panic is the caller's)
        assert!(got.is_empty());
        let e = err.unwrap();
        assert!(e.starts_with("p.smt: the trace reader stopped: decoder bug") && !e.contains('\n'), "{e}");
    }
}
