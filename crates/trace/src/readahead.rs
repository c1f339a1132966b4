//! [`ReadAhead`]: a trace source read on a thread of its own, ahead of its consumer.
//!
//! Decompressing and decoding a trace (xz above all) costs the simulating thread as much as
//! simulating, while the machine's second core idles. A `ReadAhead` runs the source on a
//! thread that packs batches of records; the consumer copies records out of them, in order
//! (no allocation: emptied batches go back to the reader).
//! Buffering is bounded: at most [`QUEUED`] batches of at most [`BATCH`] records or
//! [`BATCH_BYTES`] bytes of values wait at a time.
//!
//! What the consumer sees is what the source would have given: the same records, then the
//! same end or the same error (repeated on every later call, as the readers do), at the
//! same record position. Dropping it stops the reading: the thread ends at its next batch
//! (an optional stop hook reaches sources that may block, such as a live program).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::compress::repeat_err;
use crate::record::{append_accesses, append_bytes, Access, Branch, OpClass, Reg, MAX_DST, MAX_SRC};
use crate::{Instr, TraceError, TraceSource};

/// Records per batch.
pub const BATCH: usize = 4096;
/// A batch closes early once its records carry this many bytes of values.
pub const BATCH_BYTES: usize = 1 << 20;
/// Batches waiting for the consumer, at most.
pub const QUEUED: usize = 8;

/// The fixed part of a record in a batch; its accesses and values follow those of the
/// records before it in the batch's shared vectors.
#[derive(Clone, Copy)]
struct Head {
    pc: u64,
    len: u8,
    op: OpClass,
    nsrc: u8,
    src: [Reg; MAX_SRC],
    ndst: u8,
    dst: [Reg; MAX_DST],
    branch: Branch,
    external: bool,
    thread: u32,
    naccesses: u32,
    ndata: u32,
}

/// What the reader thread hands over: records packed into three contiguous vectors (the
/// consumer then reads memory the other core wrote in order, which the prefetcher follows;
/// records with buffers of their own would cost a cache miss each), then how the source
/// ended, if it did.
#[derive(Default)]
struct Batch {
    heads: Vec<Head>,
    accesses: Vec<Access>,
    data: Vec<u8>,
    end: Option<Result<(), TraceError>>,
}

impl Batch {
    fn clear(&mut self) {
        self.heads.clear();
        self.accesses.clear();
        self.data.clear();
        self.end = None;
    }

    #[inline]
    fn push(&mut self, r: &Instr) {
        self.heads.push(Head {
            pc: r.pc,
            len: r.len,
            op: r.op,
            nsrc: r.nsrc,
            src: r.src,
            ndst: r.ndst,
            dst: r.dst,
            branch: r.branch,
            external: r.external,
            thread: r.thread,
            naccesses: r.accesses.len() as u32,
            ndata: r.data.len() as u32,
        });
        append_accesses(&mut self.accesses, &r.accesses);
        append_bytes(&mut self.data, &r.data);
    }
}

/// A [`TraceSource`] read ahead on a thread; see the module documentation.
pub struct ReadAhead {
    name: String,
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
    cur: Batch,
    /// Next record, access and value byte of `cur`.
    at: (usize, usize, usize),
    failed: Option<TraceError>,
    done: bool,
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<JoinHandle<()>>,
}

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
        let (tx, rx) = sync_channel(QUEUED);
        let (back, back_rx) = sync_channel(QUEUED + 2);
        let thread = std::thread::Builder::new()
            .name("secmem-read-ahead".into())
            .spawn(move || read(src, tx, back_rx))
            .expect("cannot start the trace reader thread");
        ReadAhead { name, rx, back, cur: Batch::default(), at: (0, 0, 0), failed: None, done: false, stop, thread: Some(thread) }
    }

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
fn read<S: TraceSource>(mut src: S, tx: SyncSender<Batch>, back: Receiver<Batch>) {
    let mut r = Instr::default();
    loop {
        let mut b = back.try_recv().unwrap_or_default();
        b.clear();
        while b.heads.len() < BATCH && b.data.len() < BATCH_BYTES {
            match src.next_into(&mut r) {
                Ok(true) => b.push(&r),
                Ok(false) => {
                    b.end = Some(Ok(()));
                    break;
                }
                Err(e) => {
                    b.end = Some(Err(e));
                    break;
                }
            }
        }
        let last = b.end.is_some();
        if tx.send(b).is_err() || last {
            return;
        }
    }
}

impl TraceSource for ReadAhead {
    #[inline]
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.at.0 < self.cur.heads.len() {
            self.take(out);
            return Ok(true);
        }
        self.next_batch(out)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl ReadAhead {
    /// The next record of the current batch into `out`.
    #[inline]
    fn take(&mut self, out: &mut Instr) {
        let (i, a, d) = self.at;
        let h = &self.cur.heads[i];
        let (na, nd) = (h.naccesses as usize, h.ndata as usize);
        out.pc = h.pc;
        out.len = h.len;
        out.op = h.op;
        out.nsrc = h.nsrc;
        out.src = h.src;
        out.ndst = h.ndst;
        out.dst = h.dst;
        out.branch = h.branch;
        out.external = h.external;
        out.thread = h.thread;
        out.accesses.clear();
        append_accesses(&mut out.accesses, &self.cur.accesses[a..a + na]);
        out.data.clear();
        append_bytes(&mut out.data, &self.cur.data[d..d + nd]);
        self.at = (i + 1, a + na, d + nd);
    }

    #[cold]
    fn next_batch(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
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
            // Waiting for a source that may take long (a live program fast-forwarding): a
            // stop request ends the wait.
            let got = loop {
                match self.rx.recv_timeout(std::time::Duration::from_millis(100)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(sig) = crate::stop::stop_requested() {
                            return Err(crate::stop::interrupted(sig));
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Err(()),
                    Ok(b) => break Ok(b),
                }
            };
            match got {
                Ok(b) => {
                    let used = std::mem::replace(&mut self.cur, b);
                    let _ = self.back.try_send(used);
                    self.at = (0, 0, 0);
                    if !self.cur.heads.is_empty() {
                        self.take(out);
                        return Ok(true);
                    }
                }
                Err(_) => self.failed = Some(self.lost()),
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // The channel closes with this struct: the thread's next send fails and it ends,
        // dropping the source. A source blocked elsewhere is the stop hook's business. The
        // thread is not waited for (a source blocked on a pipe would hang the drop).
        if let Some(stop) = self.stop.take() {
            if self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
                stop();
            }
        }
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
            out.clone_from(&self.recs[self.at]);
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

    fn drain(r: &mut ReadAhead) -> (Vec<Instr>, Option<String>) {
        let (mut v, mut i) = (Vec::new(), Instr::default());
        loop {
            match r.next_into(&mut i) {
                Ok(true) => v.push(i.clone()),
                Ok(false) => {
                    assert!(!r.next_into(&mut i).unwrap(), "records after the end");
                    return (v, None);
                }
                Err(e) => {
                    assert_eq!(r.next_into(&mut i).unwrap_err().to_string(), e.to_string(), "errors are sticky");
                    return (v, Some(e.to_string()));
                }
            }
        }
    }

    #[test]
    fn every_record_then_the_end() {
        for n in [0, 1, BATCH - 1, BATCH, BATCH + 1, 5 * BATCH + 17] {
            let (src, want, _, dropped) = scripted(n, None);
            let mut r = ReadAhead::new(src);
            assert_eq!(r.name(), "scripted");
            let (got, err) = drain(&mut r);
            assert!(err.is_none() && got == want, "{n} records");
            drop(r);
            for _ in 0..1000 {
                if dropped.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert!(dropped.load(Ordering::Relaxed), "the source is dropped once read");
        }
    }

    /// Records of every value size up to 70 bytes and up to five accesses, in batches that
    /// close on either limit, come out as they went in.
    #[test]
    fn records_of_every_shape_come_out_as_they_went_in() {
        let mut recs = Vec::new();
        for k in 0..3 * BATCH {
            let mut r = Instr { pc: 0x40_0000 + 4 * k as u64, len: 4, external: k % 97 == 0, ..Instr::default() };
            for j in 0..k % 6 {
                let size = (k * 7 + j * 13) % 71;
                let value: Vec<u8> = (0..size).map(|b| (b + k + j) as u8).collect();
                r.add_access(j % 2 == 0, 0x1000_0000 + 64 * (k + j) as u64, &value);
            }
            if k == BATCH + 5 {
                r.add_access(true, 0x2000_0000, &vec![7u8; BATCH_BYTES + 1]); // closes its batch alone
            }
            recs.push(r);
        }
        let src = Scripted { recs: recs.clone(), at: 0, fail: None, read: Arc::default(), dropped: Arc::default() };
        let (got, err) = drain(&mut ReadAhead::new(src));
        assert!(err.is_none());
        assert_eq!(got.len(), recs.len());
        for (k, (a, b)) in got.iter().zip(&recs).enumerate() {
            assert_eq!(a, b, "record {k}");
        }
    }

    #[test]
    fn an_error_comes_after_the_records_before_it() {
        for n in [0, 3, BATCH, 2 * BATCH + 5] {
            let (src, want, _, _) = scripted(n, Some("bad record"));
            let (got, err) = drain(&mut ReadAhead::new(src));
            assert_eq!(got, want, "{n}");
            assert_eq!(err.as_deref(), Some(format!("s: bad record at byte offset {n}").as_str()));
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
        assert!(ahead <= (QUEUED + 2) * BATCH, "read {ahead} records ahead of 10");
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
        let (got, err) = drain(&mut ReadAhead::new(Panics));
        assert!(got.is_empty());
        let e = err.unwrap();
        assert!(e.starts_with("p.smt: the trace reader stopped: decoder bug") && !e.contains('\n'), "{e}");
    }
}
