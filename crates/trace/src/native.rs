//! The native trace format, version 1: a 16-byte header, then a zstd-compressed stream of
//! records ending in an explicit end marker. Byte-level layout: `docs/trace-format.md`.
//!
//! Written and read record by record (nothing is held in memory but buffers), so traces of
//! billions of instructions stream. Two small tables, kept identically by writer and reader,
//! make records short: the static part of an instruction (length, registers, access shapes)
//! is sent once per pc and then only referred to, and access addresses are deltas from the
//! last address used by the same static access.
//!
//! Every way a file can be damaged ends in an error that names the file and an offset —
//! never a panic, never a loop: truncation is caught by the zstd frames and the end marker,
//! flipped bytes by zstd's checksums, the record syntax and the end marker's record count.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::consistent::BuildPageHasher;
use crate::cputime::thread_cpu_seconds;
use crate::packed::{Packed, PackedBatch, Shape};
use crate::record::{append_accesses, append_bytes, Access, Branch, Instr, OpClass, Reg, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// First 8 bytes of every native trace (PNG-style: catches 7-bit and newline mangling).
pub const MAGIC: [u8; 8] = *b"\x89SMTR\r\n\x1a";
/// The format version this code writes and reads.
pub const VERSION: u16 = 1;
/// Header size; the record stream starts at this offset.
pub const HEADER_LEN: u64 = 16;
/// Header flag: the record stream is zstd-compressed, one or more frames (else stored raw).
pub const FLAG_ZSTD: u16 = 1;

/// Record kinds (the first byte of each record).
pub const KIND_INSTR: u8 = 0x01;
/// Kinds 0x80..=0xFE carry a varint payload length: readers skip the ones they don't know.
pub const KIND_SKIPPABLE_FIRST: u8 = 0x80;
/// Skippable: the encoding of one static instruction (`varint pc`, then its bytes).
pub const KIND_CODE: u8 = 0x80;
/// Skippable: later records were executed by thread `varint tid` (until the next one).
pub const KIND_THREAD: u8 = 0x81;
/// Skippable: a checkpointed window's prewarm (`checkpoint::Prewarm`), its records packed;
/// a reader keeps the payload for [`TraceSource::take_prewarm`].
pub const KIND_PREWARM: u8 = 0x90;
pub const KIND_END: u8 = 0xFF;

// INSTR head byte (docs/trace-format.md, "INSTR").
const H_OP: u8 = 0x07;
pub const H_BRANCH_SHIFT: u8 = 3;
pub const H_PC_SEQ: u8 = 0x20;
const H_EXTERNAL: u8 = 0x40;
pub const H_REPEAT: u8 = 0x80;
// Access flags byte.
const A_STORE: u8 = 0x01;

/// Limits that bound what a (possibly corrupt) record can make a reader allocate.
pub const MAX_ACCESSES: usize = 1024;
pub const MAX_ACCESS_SIZE: usize = 1 << 20;
pub const MAX_RECORD_DATA: usize = 16 << 20;

/// Address table: 1024 slots (see `addr_slot`).
pub const ADDR_SLOTS: usize = 1024;
/// Static table: 4096 entries (see `static_slot`), for instructions of up to 4 accesses.
const STATIC_SLOTS: usize = 4096;
const STATIC_ACCESSES: usize = 4;

/// The address-table slot of access `k` of an instruction at `pc` (docs/trace-format.md,
/// "Coding state").
#[inline(always)]
pub fn addr_slot(pc: u64, k: usize) -> usize {
    ((pc ^ (pc >> 10) ^ (pc >> 20)) as usize).wrapping_add(k) & (ADDR_SLOTS - 1)
}

#[inline(always)]
fn static_slot(pc: u64) -> usize {
    (pc ^ (pc >> 12) ^ (pc >> 24)) as usize & (STATIC_SLOTS - 1)
}

/// The format's svarint mapping (docs/trace-format.md, "Primitive encodings").
#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
pub(crate) fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// The format's varint: unsigned LEB128 (docs/trace-format.md, "Primitive encodings").
#[inline(always)]
pub fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// A record as the coder sees it: borrowed pieces, of an [`Instr`] or of a tracer's
/// [`Prepared`] static part and one execution of it.
#[derive(Clone, Copy)]
struct Rec<'a> {
    pc: u64,
    len: u8,
    op: OpClass,
    branch: Branch,
    external: bool,
    thread: u32,
    srcs: &'a [Reg],
    dsts: &'a [Reg],
    accesses: &'a [Access],
    data: &'a [u8],
}

impl<'a> Rec<'a> {
    /// `r` as a record (its register counts already checked against the limits).
    #[inline(always)]
    fn of(r: &'a Instr) -> Rec<'a> {
        Rec {
            pc: r.pc,
            len: r.len,
            op: r.op,
            branch: r.branch,
            external: r.external,
            thread: r.thread,
            srcs: r.srcs(),
            dsts: r.dsts(),
            accesses: &r.accesses,
            data: &r.data,
        }
    }

    #[inline(always)]
    fn value(&self, a: &Access) -> &'a [u8] {
        &self.data[a.off as usize..(a.off + a.size) as usize]
    }
}

/// The static part of an instruction as the tables remember it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Static {
    valid: bool,
    pc: u64,
    len: u8,
    nsrc: u8,
    src: [Reg; MAX_SRC],
    ndst: u8,
    dst: [Reg; MAX_DST],
    nacc: u8,
    /// (store, size) of each access.
    acc: [(bool, u32); STATIC_ACCESSES],
}

impl Static {
    /// The static part of `r`, if it has few enough accesses to be remembered.
    fn of(r: &Rec) -> Option<Static> {
        if r.accesses.len() > STATIC_ACCESSES {
            return None;
        }
        let mut s = Static {
            valid: true,
            pc: r.pc,
            len: r.len,
            nsrc: r.srcs.len() as u8,
            ndst: r.dsts.len() as u8,
            nacc: r.accesses.len() as u8,
            ..Static::default()
        };
        s.src[..r.srcs.len()].copy_from_slice(r.srcs);
        s.dst[..r.dsts.len()].copy_from_slice(r.dsts);
        for (k, a) in r.accesses.iter().enumerate() {
            s.acc[k] = (a.store, a.size);
        }
        Some(s)
    }

    /// Whether `r`'s static part is this one (what `Static::of(r) == Some(*self)` says).
    #[inline(always)]
    fn matches(&self, r: &Rec) -> bool {
        self.valid
            && self.pc == r.pc
            && self.len == r.len
            && self.src[..self.nsrc as usize] == *r.srcs
            && self.dst[..self.ndst as usize] == *r.dsts
            && self.nacc as usize == r.accesses.len()
            && r.accesses
                .iter()
                .zip(&self.acc)
                .all(|(a, &(store, size))| a.store == store && a.size == size)
    }
}

/// Coding state shared by the writer and the reader: both update it after every record.
struct Codec {
    /// pc + len of the previous record.
    prev_end: u64,
    addrs: Box<[u64; ADDR_SLOTS]>,
    statics: Box<[Static; STATIC_SLOTS]>,
}

impl Codec {
    fn new() -> Codec {
        Codec {
            prev_end: 0,
            addrs: Box::new([0; ADDR_SLOTS]),
            statics: vec![Static::default(); STATIC_SLOTS]
                .into_boxed_slice()
                .try_into()
                .ok()
                .unwrap(),
        }
    }

    /// `commit` of a record just read: a repeated static part (most records) needs no `Rec`,
    /// whose register slices cost bounds checks on every record.
    #[inline(always)]
    fn commit_read(&mut self, r: &Instr, full: bool) {
        if full {
            return self.commit(&Rec::of(r), true);
        }
        self.prev_end = r.pc.wrapping_add(r.len as u64);
        for (k, a) in r.accesses.iter().enumerate() {
            self.addrs[addr_slot(r.pc, k)] = a.addr;
        }
    }

    /// Record `r` as coded: `full` if its static part was sent rather than repeated.
    #[inline(always)]
    fn commit(&mut self, r: &Rec, full: bool) {
        self.prev_end = r.pc.wrapping_add(r.len as u64);
        for (k, a) in r.accesses.iter().enumerate() {
            self.addrs[addr_slot(r.pc, k)] = a.addr;
        }
        if full {
            self.statics[static_slot(r.pc)] = Static::of(r).unwrap_or_default();
        }
    }
}

/// A static instruction prepared once for [`NativeWriter::write_exec`]: a tracer keeps one
/// per static instruction it has decoded and writes each execution through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepared {
    key: u32,
    pc: u64,
    len: u8,
    op: OpClass,
    nsrc: u8,
    ndst: u8,
    src: [Reg; MAX_SRC],
    dst: [Reg; MAX_DST],
    slot: u16,
}

impl Prepared {
    /// The static part of an instruction (at most [`MAX_SRC`] sources and [`MAX_DST`]
    /// destinations: the rest are dropped), identified by `key` (< u32::MAX): prepared
    /// instructions written to the same writer have the same key if and only if their pc,
    /// length and registers are all the same. (Two keys for one static part still make a
    /// valid file, only a larger one: the writer takes a different key for a different
    /// static part and sends it in full.)
    pub fn new(key: u32, pc: u64, len: u8, op: OpClass, srcs: &[Reg], dsts: &[Reg]) -> Prepared {
        assert!(key != NO_KEY, "key {NO_KEY:#x} is reserved");
        let (ns, nd) = (srcs.len().min(MAX_SRC), dsts.len().min(MAX_DST));
        let (mut src, mut dst) = ([0; MAX_SRC], [0; MAX_DST]);
        src[..ns].copy_from_slice(&srcs[..ns]);
        dst[..nd].copy_from_slice(&dsts[..nd]);
        Prepared { key, pc, len, op, nsrc: ns as u8, ndst: nd as u8, src, dst, slot: static_slot(pc) as u16 }
    }

    pub fn key(&self) -> u32 {
        self.key
    }
    pub fn pc(&self) -> u64 {
        self.pc
    }
    pub fn len(&self) -> u8 {
        self.len
    }
    pub fn op(&self) -> OpClass {
        self.op
    }
    pub fn srcs(&self) -> &[Reg] {
        &self.src[..self.nsrc as usize]
    }
    pub fn dsts(&self) -> &[Reg] {
        &self.dst[..self.ndst as usize]
    }

    /// Start `r` as an execution of this instruction: static part set, no accesses, no
    /// branch outcome, not external.
    #[inline(always)]
    pub fn start(&self, r: &mut Instr, thread: u32) {
        r.accesses.clear();
        r.data.clear();
        r.pc = self.pc;
        r.len = self.len;
        r.op = self.op;
        r.nsrc = self.nsrc;
        r.src = self.src;
        r.ndst = self.ndst;
        r.dst = self.dst;
        r.branch = Branch::None;
        r.external = false;
        r.thread = thread;
    }
}

// ---------------------------------------------------------------------------------------------
// Writer.

/// The zstd level [`NativeWriter::create`] uses. Measured on gzip and bzip2 traces
/// (docs/trace-format.md, "Size and speed"): level 1 compresses the record stream about 2.5×
/// faster than level 3 for about 10% more bytes, and compression is the writer's largest cost.
pub const DEFAULT_LEVEL: i32 = 1;

/// Record-stream bytes per zstd frame: the writer fills a buffer this large and hands it to
/// the compressor thread, which compresses it in one go as a frame of its own. zstd's
/// streaming interface keeps a window buffer that wraps around, after which every block is
/// compressed in its slower external-dictionary mode — on the record stream of a gzip trace
/// it took 3.44-3.74 ns per byte against 2.80 for 4 MiB frames, whose files are 0.6% larger
/// (1 MiB: 2.9 ns, 2.6%; 16 MiB: 2.95 ns, 0.1%). The file's writeback is started after each
/// frame.
const FRAME: usize = 4 << 20;
/// Room past FRAME in a buffer: the writer checks the size after each record.
const FRAME_SLACK: usize = 1 << 12;
/// Frames queued for the compressor: the writer fills the next while one waits and one is
/// compressed (with less than a frame queued it waited out each frame's compression: traced
/// gzip ran at 24-28 M instructions/s instead of 30). The writer holds about four frames'
/// memory: those three and the compressed one.
const FRAMES_QUEUED: usize = 1;

/// Have the kernel start writing what the file holds so far to disk, without waiting: the
/// `sync_all` at the end then waits for the last part only (it took 0.15-0.2 s of a
/// 4-7 s trace of gzip when all 80 MB were left to it).
fn start_writeback(f: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a system call on an fd the writer owns; failure only costs the head start.
        unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
}

/// zstd and the file, on a thread of their own: the writer's caller encodes records while
/// the previous frames are compressed (on a 2-core machine tracing a program, this is what
/// keeps the third busy stage off the decoder's core most of the time).
struct Compressor {
    tx: Option<SyncSender<Vec<u8>>>,
    /// Chunks the compressor is done with, for reuse.
    back: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<std::io::Result<(File, f64)>>>,
}

/// Compress `frame` as one zstd frame (with its checksum) onto `f`.
fn write_frame(z: &mut zstd::bulk::Compressor<'_>, frame: &[u8], out: &mut Vec<u8>, f: &mut BufWriter<File>) -> std::io::Result<()> {
    out.clear();
    out.reserve(zstd::zstd_safe::compress_bound(frame.len()));
    z.compress_to_buffer(frame, out)?;
    f.write_all(out)
}

impl Compressor {
    /// Compress onto `f` (the header written) at zstd `level`, or store the frames as they
    /// are if None.
    fn start(mut f: BufWriter<File>, level: Option<i32>) -> std::io::Result<Compressor> {
        let mut z = match level {
            Some(level) => {
                let mut z = zstd::bulk::Compressor::new(level)?;
                z.include_checksum(true)?;
                Some(z)
            }
            None => None,
        };
        let (tx, rx) = sync_channel::<Vec<u8>>(FRAMES_QUEUED);
        let (back_tx, back) = sync_channel::<Vec<u8>>(FRAMES_QUEUED + 2);
        let thread = std::thread::Builder::new()
            .name("secmem-zstd".into())
            .spawn(move || {
                let mut out = Vec::new();
                for mut frame in rx {
                    match &mut z {
                        Some(z) => write_frame(z, &frame, &mut out, &mut f)?,
                        None => f.write_all(&frame)?,
                    }
                    frame.clear();
                    let _ = back_tx.try_send(frame);
                    start_writeback(f.get_ref());
                }
                // The sender is gone: the writer finished (or was dropped).
                let f = f.into_inner().map_err(|e| e.into_error())?;
                Ok((f, thread_cpu_seconds()))
            })
            .expect("cannot start the trace compressor thread");
        Ok(Compressor { tx: Some(tx), back, thread: Some(thread) })
    }

    /// Queue a frame; returns an empty buffer to fill next. On failure the thread's error.
    fn send(&mut self, frame: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let tx = self.tx.as_ref().expect("writer used after finish");
        if tx.send(frame).is_err() {
            // The thread stopped early: only an error makes it do that.
            return Err(self.join().err().unwrap_or_else(|| std::io::Error::other("the trace compressor stopped")));
        }
        Ok(self.back.try_recv().unwrap_or_else(|_| Vec::with_capacity(FRAME + FRAME_SLACK)))
    }

    /// Close the stream and wait for the file (and the thread's CPU time).
    fn join(&mut self) -> std::io::Result<(File, f64)> {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("the trace compressor panicked")),
            None => Err(std::io::Error::other("writer used after finish")),
        }
    }
}

impl Drop for Compressor {
    /// A writer dropped without `finish` still leaves complete zstd frames (without the end
    /// marker: readers call it truncated) once the drop returns.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

/// What a [`NativeWriter`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Finished {
    pub records: u64,
    /// The record stream, uncompressed (end marker included, header not).
    pub raw_bytes: u64,
    /// CPU time of the compressor thread (zstd and the file writes).
    pub compress_cpu_seconds: f64,
}

/// Writes a native trace file. Call [`NativeWriter::finish`]: without it the file has no
/// end marker and readers report it as truncated.
pub struct NativeWriter {
    path: String,
    zstd: Compressor,
    buf: Vec<u8>,
    codec: Codec,
    /// The caller's key of each static-table entry and the entry's access shapes in short
    /// ([`NativeWriter::write_exec`]): a small table, so recognising a repeated static part
    /// takes one cache line instead of the entry's (and the entry itself is only kept when
    /// these two do not describe it, see `write_inner`).
    keys: Box<[(u32, u32); STATIC_SLOTS]>,
    count: u64,
    thread: u32,
    /// Bytes of the record stream handed to zstd so far.
    raw: u64,
}

/// No key ([`NativeWriter::write`]).
const NO_KEY: u32 = u32::MAX;
/// Shapes the summary beside the keys cannot hold (see `size_code`).
const NO_SHAPES: u32 = u32::MAX;

/// An access size as a 3-bit code for the shapes summary kept beside the keys (a
/// record's access count in 3 bits, then 4 bits per access: store, and this code), exact for
/// the sizes that occur nearly always; None for the others.
#[inline(always)]
fn size_code(size: u32) -> Option<u32> {
    match size {
        1 => Some(0),
        2 => Some(1),
        4 => Some(2),
        8 => Some(3),
        16 => Some(4),
        32 => Some(5),
        _ => None,
    }
}

/// Bytes written into a vector's reserved space.
struct Enc<'a> {
    s: &'a mut [std::mem::MaybeUninit<u8>],
    n: usize,
}

impl Enc<'_> {
    #[inline(always)]
    fn u8(&mut self, x: u8) {
        self.s[self.n].write(x);
        self.n += 1;
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.u8(v as u8 | 0x80);
            v >>= 7;
        }
        self.u8(v as u8);
    }

    #[inline(always)]
    fn bytes(&mut self, v: &[u8]) {
        for (d, &x) in self.s[self.n..self.n + v.len()].iter_mut().zip(v) {
            d.write(x);
        }
        self.n += v.len();
    }

    /// A value of `size` ≤ 8 bytes held in the low bytes of `w`: one 8-byte store (the bytes
    /// past `size` are overwritten by what follows, or lie past the end), no branch on the size.
    #[inline(always)]
    fn word(&mut self, w: u64, size: usize) {
        for (d, x) in self.s[self.n..self.n + 8].iter_mut().zip(w.to_le_bytes()) {
            d.write(x);
        }
        self.n += size;
    }

    /// An access's value: the usual sizes as fixed-size copies (a variable-length copy is a
    /// library call, slower than the rest of a small record's encoding).
    #[inline(always)]
    fn value(&mut self, v: &[u8]) {
        match v.len() {
            1 => self.u8(v[0]),
            2 => self.bytes(<&[u8; 2]>::try_from(v).unwrap()),
            4 => self.bytes(<&[u8; 4]>::try_from(v).unwrap()),
            8 => self.bytes(<&[u8; 8]>::try_from(v).unwrap()),
            _ => self.bytes(v),
        }
    }
}

impl NativeWriter {
    /// Create (truncate) `path` and write the header; zstd level [`DEFAULT_LEVEL`].
    pub fn create(path: impl AsRef<Path>) -> Result<NativeWriter, TraceError> {
        NativeWriter::with_level(path, DEFAULT_LEVEL)
    }

    /// As [`NativeWriter::create`] with a zstd compression level (1..=22; negative levels
    /// are zstd's faster ones).
    pub fn with_level(path: impl AsRef<Path>, level: i32) -> Result<NativeWriter, TraceError> {
        NativeWriter::start(path, Some(level))
    }

    /// As [`NativeWriter::create`], the record stream stored uncompressed (the header's
    /// FLAG_ZSTD clear): for files read many times over whose decompression would cost more
    /// than their size (a checkpointed window's, `checkpoint`).
    pub fn uncompressed(path: impl AsRef<Path>) -> Result<NativeWriter, TraceError> {
        NativeWriter::start(path, None)
    }

    fn start(path: impl AsRef<Path>, level: Option<i32>) -> Result<NativeWriter, TraceError> {
        let p = path.as_ref();
        let name = p.display().to_string();
        let io = |source| TraceError::Io {
            path: name.clone(),
            source,
        };
        let mut f = BufWriter::with_capacity(1 << 16, secmem_files::open_for_writing(p).map_err(io)?);
        let mut header = [0u8; HEADER_LEN as usize];
        header[..8].copy_from_slice(&MAGIC);
        header[8..10].copy_from_slice(&VERSION.to_le_bytes());
        header[10..12].copy_from_slice(&(if level.is_some() { FLAG_ZSTD } else { 0 }).to_le_bytes());
        f.write_all(&header).map_err(io)?;
        Ok(NativeWriter {
            zstd: Compressor::start(f, level).map_err(io)?,
            path: name,
            buf: Vec::with_capacity(FRAME + FRAME_SLACK),
            codec: Codec::new(),
            keys: Box::new([(NO_KEY, NO_SHAPES); STATIC_SLOTS]),
            count: 0,
            thread: 0,
            raw: 0,
        })
    }

    fn io(&self, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn invalid(&self, what: String) -> TraceError {
        TraceError::Other(format!("{}: record {}: {what}", self.path, self.count))
    }

    /// Append one record.
    pub fn write(&mut self, r: &Instr) -> Result<(), TraceError> {
        if r.nsrc as usize > MAX_SRC || r.ndst as usize > MAX_DST {
            return Err(self.invalid(format!("{} sources / {} destinations", r.nsrc, r.ndst)));
        }
        self.write_inner(&Rec::of(r), NO_KEY)
    }

    /// Append one execution of the prepared instruction `st`: its branch outcome, the
    /// thread that ran it, and its accesses (values in `data`, as in [`Instr`]). The file is
    /// the same as [`NativeWriter::write`] of the equivalent [`Instr`] would make; what
    /// differs is the cost: the common execution (the static part already in the table, no
    /// accesses, the pc following the previous record) is two bytes written and two fields
    /// updated.
    #[inline(always)]
    pub fn write_exec(&mut self, st: &Prepared, branch: Branch, thread: u32, accesses: &[Access], data: &[u8]) -> Result<(), TraceError> {
        let c = &mut self.codec;
        if accesses.is_empty() && st.pc == c.prev_end && thread == self.thread && self.keys[st.slot as usize] == (st.key, 0) {
            // The commonest record of all, inline: two bytes.
            self.buf.extend_from_slice(&[KIND_INSTR, st.op as u8 | (branch as u8) << H_BRANCH_SHIFT | H_PC_SEQ | H_REPEAT]);
            c.prev_end = st.pc.wrapping_add(st.len as u64);
        } else if !self.try_exec(st, branch, thread, accesses, data) {
            return self.write_exec_slow(st, branch, thread, accesses, data);
        }
        self.count += 1;
        if self.buf.len() >= FRAME {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Write an execution whose static part is in the table with these access shapes (the
    /// usual case) straight into reserved space, without the general checks; false (nothing
    /// written) for any other.
    #[inline(never)]
    fn try_exec(&mut self, st: &Prepared, branch: Branch, thread: u32, accesses: &[Access], data: &[u8]) -> bool {
        let c = &mut self.codec;
        let seq = st.pc == c.prev_end;
        if accesses.is_empty() {
            if thread != self.thread || self.keys[st.slot as usize] != (st.key, 0) {
                return false;
            }
            if seq {
                // The commonest record of all: two bytes.
                self.buf.extend_from_slice(&[KIND_INSTR, st.op as u8 | (branch as u8) << H_BRANCH_SHIFT | H_PC_SEQ | H_REPEAT]);
                c.prev_end = st.pc.wrapping_add(st.len as u64);
                return true;
            }
        } else {
            if thread != self.thread || accesses.len() > STATIC_ACCESSES {
                return false;
            }
            let mut sh = accesses.len() as u32;
            let mut fits = true;
            for (k, a) in accesses.iter().enumerate() {
                fits &= a.off as usize + a.size as usize <= data.len();
                match size_code(a.size) {
                    Some(code) => sh |= (code << 1 | a.store as u32) << (3 + 4 * k),
                    None => fits = false,
                }
            }
            if !fits || self.keys[st.slot as usize] != (st.key, sh) {
                return false;
            }
        }
        // kind, head, pc varint; per access an address varint and at most 32 value bytes.
        self.buf.reserve(12 + 42 * STATIC_ACCESSES);
        let base = self.buf.len();
        let mut e = Enc { s: self.buf.spare_capacity_mut(), n: 0 };
        e.u8(KIND_INSTR);
        e.u8(st.op as u8 | (branch as u8) << H_BRANCH_SHIFT | (H_PC_SEQ * seq as u8) | H_REPEAT);
        if !seq {
            e.varint(zigzag(st.pc.wrapping_sub(c.prev_end) as i64));
        }
        for (k, a) in accesses.iter().enumerate() {
            let slot = &mut c.addrs[addr_slot(st.pc, k)];
            e.varint(zigzag(a.addr.wrapping_sub(*slot) as i64));
            *slot = a.addr;
            // The reserved space has room for a whole word after any access.
            match data.get(a.off as usize..a.off as usize + 8) {
                Some(w) if a.size <= 8 => e.word(u64::from_le_bytes(w.try_into().unwrap()), a.size as usize),
                _ => e.value(&data[a.off as usize..(a.off + a.size) as usize]),
            }
        }
        let n = e.n;
        // SAFETY: `Enc` initialised the first n bytes of the spare capacity (n ≤ the reserved
        // space, which indexing the spare slice checks).
        unsafe { self.buf.set_len(base + n) };
        c.prev_end = st.pc.wrapping_add(st.len as u64);
        true
    }

    #[inline(never)]
    fn write_exec_slow(&mut self, st: &Prepared, branch: Branch, thread: u32, accesses: &[Access], data: &[u8]) -> Result<(), TraceError> {
        let r = Rec {
            pc: st.pc,
            len: st.len,
            op: st.op,
            branch,
            external: false,
            thread,
            srcs: st.srcs(),
            dsts: st.dsts(),
            accesses,
            data,
        };
        self.write_inner(&r, st.key)
    }

    /// Why `r` cannot be written.
    #[cold]
    fn reject(&self, r: &Rec) -> TraceError {
        if r.accesses.len() > MAX_ACCESSES {
            return self.invalid(format!("{} accesses (at most {MAX_ACCESSES})", r.accesses.len()));
        }
        let mut total = 0usize;
        for a in r.accesses {
            total += a.size as usize;
            if a.off as usize + a.size as usize > r.data.len() || a.size as usize > MAX_ACCESS_SIZE || total > MAX_RECORD_DATA {
                return self.invalid(format!("access of {} bytes at data offset {}", a.size, a.off));
            }
        }
        self.invalid("unencodable record".into())
    }

    #[cold]
    fn thread_record(&mut self, thread: u32) {
        self.thread = thread;
        let mut p = Vec::with_capacity(5);
        put_varint(&mut p, thread as u64);
        self.buf.push(KIND_THREAD);
        put_varint(&mut self.buf, p.len() as u64);
        self.buf.extend_from_slice(&p);
    }

    /// The encoder proper. Written for the tracer's common case (a repeated static part, a
    /// few small accesses): one pass over the accesses checks them and summarises their
    /// shapes, then the record goes into reserved space without further capacity checks.
    #[inline(always)]
    fn write_inner(&mut self, r: &Rec, key: u32) -> Result<(), TraceError> {
        let nacc = r.accesses.len();
        let mut bad = nacc > MAX_ACCESSES;
        let mut total = 0usize;
        // Shapes in short (see `shapes`), for keyed records.
        let mut sh = if key != NO_KEY && nacc <= STATIC_ACCESSES { nacc as u32 } else { NO_SHAPES };
        for (k, a) in r.accesses.iter().enumerate() {
            let size = a.size as usize;
            total += size;
            bad |= a.off as usize + size > r.data.len() || size > MAX_ACCESS_SIZE;
            if sh != NO_SHAPES {
                sh = match size_code(a.size) {
                    Some(c) => sh | (c << 1 | a.store as u32) << (3 + 4 * k),
                    None => NO_SHAPES,
                };
            }
        }
        if bad || total > MAX_RECORD_DATA {
            return Err(self.reject(r));
        }
        if r.thread != self.thread {
            self.thread_record(r.thread);
        }
        let c = &self.codec;
        let seq = r.pc == c.prev_end;
        let slot = static_slot(r.pc);
        // An entry written by a keyed record whose shapes the summary holds is described by
        // its key and shapes alone: with keys given as `Prepared::new` asks (one per static
        // part), a record repeats it iff it has that key and those shapes, and its full form
        // is not kept (writing and comparing it cost a cache miss each, in a table too large
        // for the L1 cache). Any other entry is kept and compared in full. (A record from
        // `write` never repeats a described entry: the tracer's have no pc.)
        let (k, s) = self.keys[slot];
        let described = k != NO_KEY && s != NO_SHAPES;
        let repeat = if described { (k, s) == (key, sh) } else { c.statics[slot].matches(r) };
        // Header ≤ 26 bytes (kind, head, pc varint, len, registers byte and registers, access
        // count), each access ≤ 14 (flags, size varint, address varint) plus its value.
        self.buf.reserve(26 + 14 * nacc + total);
        let base = self.buf.len();
        let mut e = Enc { s: self.buf.spare_capacity_mut(), n: 0 };
        e.u8(KIND_INSTR);
        e.u8(r.op as u8
            | (r.branch as u8) << H_BRANCH_SHIFT
            | if seq { H_PC_SEQ } else { 0 }
            | if r.external { H_EXTERNAL } else { 0 }
            | if repeat { H_REPEAT } else { 0 });
        if !seq {
            e.varint(zigzag(r.pc.wrapping_sub(c.prev_end) as i64));
        }
        if !repeat {
            e.u8(r.len);
            e.u8((r.srcs.len() as u8) << 4 | r.dsts.len() as u8);
            e.bytes(r.srcs);
            e.bytes(r.dsts);
            e.varint(nacc as u64);
            for a in r.accesses {
                e.u8(if a.store { A_STORE } else { 0 });
                e.varint(a.size as u64);
            }
        }
        for (k, a) in r.accesses.iter().enumerate() {
            e.varint(zigzag(a.addr.wrapping_sub(c.addrs[addr_slot(r.pc, k)]) as i64));
            e.value(r.value(a));
        }
        let n = e.n;
        // SAFETY: `Enc` initialised the first n bytes of the spare capacity (n ≤ the reserved
        // space, which indexing the spare slice checks).
        unsafe { self.buf.set_len(base + n) };
        self.codec.commit(r, !repeat && (key == NO_KEY || sh == NO_SHAPES));
        if !repeat {
            self.keys[slot] = (key, sh);
        }
        self.count += 1;
        if self.buf.len() >= FRAME {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Record the encoding of the static instruction at `pc` (a tracer does this once per
    /// pc, before its first execution). Readers that do not need it skip it.
    pub fn write_code(&mut self, pc: u64, bytes: &[u8]) -> Result<(), TraceError> {
        if bytes.len() > 15 {
            return Err(self.invalid(format!("{} instruction bytes at {pc:#x} (x86 allows 15)", bytes.len())));
        }
        let mut p = Vec::with_capacity(10 + bytes.len());
        put_varint(&mut p, pc);
        p.extend_from_slice(bytes);
        self.buf.push(KIND_CODE);
        put_varint(&mut self.buf, p.len() as u64);
        self.buf.extend_from_slice(&p);
        Ok(())
    }

    /// A skippable record of `kind` (0x80..=0xFE) holding `payload` (readers that do not
    /// know the kind skip it).
    pub fn write_skippable(&mut self, kind: u8, payload: &[u8]) -> Result<(), TraceError> {
        if !(KIND_SKIPPABLE_FIRST..KIND_END).contains(&kind) || payload.len() > MAX_RECORD_DATA {
            return Err(self.invalid(format!("a skippable record of kind {kind:#04x} and {} bytes", payload.len())));
        }
        self.buf.push(kind);
        put_varint(&mut self.buf, payload.len() as u64);
        self.buf.extend_from_slice(payload);
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        self.raw += self.buf.len() as u64;
        let frame = std::mem::take(&mut self.buf);
        self.buf = self.zstd.send(frame).map_err(|e| self.io(e))?;
        Ok(())
    }

    /// Write the end marker, the last zstd frame and the file; returns the record count.
    pub fn finish(self) -> Result<u64, TraceError> {
        Ok(self.finish_stats()?.records)
    }

    /// As [`NativeWriter::finish`], returning what was written and what it cost.
    pub fn finish_stats(mut self) -> Result<Finished, TraceError> {
        self.buf.push(KIND_END);
        put_varint(&mut self.buf, self.count);
        let raw_bytes = self.raw_bytes();
        self.flush_buf()?;
        let (file, cpu) = self.zstd.join().map_err(|e| self.io(e))?;
        file.sync_all().ok();
        Ok(Finished { records: self.count, raw_bytes, compress_cpu_seconds: cpu })
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes of the uncompressed record stream written so far (not the 16-byte header; the
    /// end marker `finish` adds is 2–11 bytes more).
    pub fn raw_bytes(&self) -> u64 {
        self.raw + self.buf.len() as u64
    }
}

/// Write the file at `path` through `f`, handed the path to write (by `secmem_files`' rule:
/// a temporary file created exclusively beside `path`, renamed over it once `f` succeeds; a
/// FIFO or device itself, written in place). A failure leaves an existing file of that name
/// alone (the temporary file is removed), and readers never see a half-written file. The
/// destination is checked first, so a bad one fails before any work.
pub fn write_atomically<T>(path: &Path, f: impl FnOnce(&Path) -> Result<T, TraceError>) -> Result<T, TraceError> {
    let out = secmem_files::Output::create(path, secmem_files::PUBLIC).map_err(|e| TraceError::Other(e.to_string()))?;
    let v = f(out.path())?;
    out.commit().map_err(|e| TraceError::Other(e.to_string()))?;
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// Reader.

/// Parse failure; the details were stored by whoever detected it (a tiny error type keeps
/// the parser fast).
struct Bad;

type Res<T> = Result<T, Bad>;

/// Where a record is parsed from: the buffered stream (byte at a time, refilling, precise
/// errors) or, on the fast path, a slice of the buffer holding the whole record.
trait Input {
    fn byte(&mut self) -> Res<u8>;
    fn bytes_into(&mut self, n: usize, out: &mut Vec<u8>) -> Res<()>;
    fn offset(&self) -> u64;
    /// A syntax error at stream offset `at`.
    fn fail(&mut self, at: u64, what: String) -> Bad;

    #[inline(always)]
    fn varint(&mut self) -> Res<u64> {
        let at = self.offset();
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err(self.fail(at, "varint longer than 64 bits".into()))
    }
}

/// One INSTR record (after its kind byte) into `out`, without touching `c`; returns whether
/// the static part was sent in full.
#[inline(always)]
fn parse_instr<I: Input>(i: &mut I, c: &Codec, out: &mut Instr) -> Res<bool> {
    out.clear();
    let at = i.offset();
    let h = i.byte()?;
    out.op = OpClass::from_u8(h & H_OP).expect("3-bit op class");
    out.branch = match (h >> H_BRANCH_SHIFT) & 3 {
        0 => Branch::None,
        1 => Branch::NotTaken,
        2 => Branch::Taken,
        _ => return Err(i.fail(at, "invalid branch outcome 3".into())),
    };
    out.external = h & H_EXTERNAL != 0;
    out.pc = if h & H_PC_SEQ != 0 {
        c.prev_end
    } else {
        c.prev_end.wrapping_add(unzigzag(i.varint()?) as u64)
    };
    let full = h & H_REPEAT == 0; // (registers: zeroed by `clear`)
    let s = &c.statics[static_slot(out.pc)];
    let nacc;
    if full {
        out.len = i.byte()?;
        let at = i.offset();
        let regs = i.byte()?;
        let (ns, nd) = ((regs >> 4) as usize, (regs & 15) as usize);
        if ns > MAX_SRC || nd > MAX_DST {
            return Err(i.fail(at, format!("{ns} source / {nd} destination registers")));
        }
        for r in &mut out.src[..ns] {
            *r = i.byte()?;
        }
        for r in &mut out.dst[..nd] {
            *r = i.byte()?;
        }
        out.nsrc = ns as u8;
        out.ndst = nd as u8;
        let at = i.offset();
        let n = i.varint()?;
        if n > MAX_ACCESSES as u64 {
            return Err(i.fail(
                at,
                format!("{n} accesses in one record (at most {MAX_ACCESSES})"),
            ));
        }
        nacc = n as usize;
        let mut total = 0u64;
        for _ in 0..nacc {
            let at = i.offset();
            let f = i.byte()?;
            if f & !A_STORE != 0 {
                return Err(i.fail(at, format!("reserved bits in access flags {f:#04x}")));
            }
            let size = i.varint()?;
            total += size;
            if size > MAX_ACCESS_SIZE as u64 || total > MAX_RECORD_DATA as u64 {
                return Err(i.fail(
                    at,
                    format!("access of {size} bytes exceeds the format's limits"),
                ));
            }
            // Addresses and values follow the shapes: remember the shapes in place.
            out.accesses.push(Access {
                store: f & A_STORE != 0,
                addr: 0,
                size: size as u32,
                off: 0,
            });
        }
    } else {
        if !s.valid || s.pc != out.pc {
            return Err(i.fail(
                at,
                format!(
                    "repeats the static part of pc {:#x}, which was not sent",
                    out.pc
                ),
            ));
        }
        out.len = s.len;
        out.nsrc = s.nsrc;
        out.src = s.src;
        out.ndst = s.ndst;
        out.dst = s.dst;
        nacc = s.nacc as usize;
        for &(store, size) in &s.acc[..nacc] {
            out.accesses.push(Access {
                store,
                addr: 0,
                size,
                off: 0,
            });
        }
    }
    for k in 0..nacc {
        let addr = c.addrs[addr_slot(out.pc, k)].wrapping_add(unzigzag(i.varint()?) as u64);
        let off = out.data.len() as u32;
        let a = &mut out.accesses[k];
        a.addr = addr;
        a.off = off;
        let size = a.size as usize;
        i.bytes_into(size, &mut out.data)?;
    }
    Ok(full)
}

/// The fast path's input: a slice of the buffer. Running off its end is not an error, just
/// a reason to parse the record again from the stream.
struct Slice<'a> {
    b: &'a [u8],
    i: usize,
}

impl Input for Slice<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Res<u8> {
        let x = *self.b.get(self.i).ok_or(Bad)?;
        self.i += 1;
        Ok(x)
    }

    #[inline(always)]
    fn bytes_into(&mut self, n: usize, out: &mut Vec<u8>) -> Res<()> {
        let s = self
            .b
            .get(self.i..self.i.checked_add(n).ok_or(Bad)?)
            .ok_or(Bad)?;
        append_bytes(out, s);
        self.i += n;
        Ok(())
    }

    fn offset(&self) -> u64 {
        0
    }

    fn fail(&mut self, _: u64, _: String) -> Bad {
        Bad
    }
}

/// The decompressed record stream, buffered.
struct Stream {
    src: Box<dyn Read + Send>,
    compressed: bool,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Stream offset of `buf[0]` (the header counts: the first record is at offset 16).
    base: u64,
    eof: bool,
    /// The first error, repeated by every later call.
    failed: Option<(u64, String)>,
}

impl Stream {
    /// Read more of the stream into the buffer, keeping its unconsumed bytes; false at the
    /// end of the stream.
    fn refill(&mut self) -> Res<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.base + self.end as u64;
                    let what = if e.kind() == ErrorKind::UnexpectedEof {
                        "truncated: the compressed stream ends early".to_string()
                    } else if self.compressed {
                        format!("cannot decompress: {e}")
                    } else {
                        format!("read error: {e}")
                    };
                    return Err(self.fail(at, what));
                }
            }
        }
    }

    #[cold]
    fn byte_slow(&mut self) -> Res<u8> {
        if !self.refill()? {
            return Err(self.fail(
                self.offset(),
                "truncated: the record stream ends without its end marker".into(),
            ));
        }
        self.byte()
    }

    fn skip(&mut self, mut n: u64) -> Res<()> {
        while n > 0 {
            if self.pos == self.end && !self.refill()? {
                return Err(self.fail(
                    self.offset(),
                    "truncated: the record stream ends inside a record".into(),
                ));
            }
            let k = n.min((self.end - self.pos) as u64);
            self.pos += k as usize;
            n -= k;
        }
        Ok(())
    }
}

impl Input for Stream {
    #[inline(always)]
    fn byte(&mut self) -> Res<u8> {
        if self.pos < self.end {
            let b = self.buf[self.pos];
            self.pos += 1;
            Ok(b)
        } else {
            self.byte_slow()
        }
    }

    fn bytes_into(&mut self, mut n: usize, out: &mut Vec<u8>) -> Res<()> {
        while n > 0 {
            if self.pos == self.end && !self.refill()? {
                return Err(self.fail(
                    self.offset(),
                    "truncated: the record stream ends inside a record".into(),
                ));
            }
            let k = n.min(self.end - self.pos);
            out.extend_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            n -= k;
        }
        Ok(())
    }

    #[inline(always)]
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    #[cold]
    fn fail(&mut self, at: u64, what: String) -> Bad {
        if self.failed.is_none() {
            self.failed = Some((at, what));
        }
        Bad
    }
}

/// Bytes kept available in the buffer before each record so most parse from a slice.
const FAST_MIN: usize = 256;

/// Reads a native trace file record by record. Damage in a zstd-compressed file (what every
/// writer makes) fails zstd's frame checksum; a raw file (flags bit 0 clear, for debugging)
/// has no checksum, and a flipped bit that still parses is read silently.
pub struct NativeReader {
    path: String,
    name: String,
    s: Stream,
    codec: Codec,
    count: u64,
    done: bool,
    thread: u32,
    /// The payload of the last PREWARM record read, until taken (`take_prewarm`).
    prewarm: Option<Vec<u8>>,
    /// The packed shape (`packed::Shape`) of each entry of the static table (`fill_packed`):
    /// its index, `UNPACKABLE`, or `UNKNOWN` until a packed read first needs it.
    shape_of: Box<[u32; STATIC_SLOTS]>,
    /// Index of each shape handed out so far.
    interned: std::collections::HashMap<Shape, u32, BuildPageHasher>,
    /// Tests: every record through the general parser (what the fast path must agree with).
    #[cfg(test)]
    general_only: bool,
}

/// Reads exactly one header from `f`, returning whether the stream is zstd-compressed.
fn read_header(path: &str, f: &mut impl Read) -> Result<bool, TraceError> {
    let mut h = [0u8; HEADER_LEN as usize];
    let mut n = 0;
    while n < h.len() {
        match f.read(&mut h[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(TraceError::Io {
                    path: path.to_string(),
                    source,
                })
            }
        }
    }
    if n < MAGIC.len() || h[..8] != MAGIC {
        return Err(TraceError::Other(format!(
            "{path}: not a secmem trace ({}); expected a secmem native trace (see docs/trace-format.md)",
            describe_foreign(&h[..n])
        )));
    }
    let corrupt = |offset: u64, what: &str| TraceError::Corrupt {
        path: path.to_string(),
        offset,
        what: what.into(),
    };
    if n < h.len() {
        return Err(corrupt(n as u64, "truncated header"));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(TraceError::Other(format!(
            "{path}: secmem trace format version {version} is not supported (this build reads version {VERSION})"
        )));
    }
    let flags = u16::from_le_bytes([h[10], h[11]]);
    if flags & !FLAG_ZSTD != 0 {
        return Err(corrupt(10, &format!("unknown header flags {flags:#06x}")));
    }
    if h[12..16] != [0; 4] {
        return Err(corrupt(12, "reserved header bytes are not zero"));
    }
    Ok(flags & FLAG_ZSTD != 0)
}

/// A hint for files that are not native traces.
fn describe_foreign(h: &[u8]) -> String {
    match h {
        [] => "the file is empty".into(),
        [0x1f, 0x8b, ..] => "it is gzip-compressed data".into(),
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => "it is xz-compressed data".into(),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => "it is a bare zstd stream".into(),
        _ => {
            let hex: Vec<String> = h.iter().take(8).map(|b| format!("{b:02x}")).collect();
            format!("unknown magic bytes {}", hex.join(" "))
        }
    }
}

impl NativeReader {
    /// Open a native trace: checks the header and starts decompressing.
    pub fn open(path: impl AsRef<Path>) -> Result<NativeReader, TraceError> {
        let p = path.as_ref();
        let path = p.display().to_string();
        let f = secmem_files::open_for_reading(p).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        let mut f = BufReader::with_capacity(1 << 16, f);
        let compressed = read_header(&path, &mut f)?;
        let src: Box<dyn Read + Send> = if compressed {
            let d =
                zstd::stream::read::Decoder::with_buffer(f).map_err(|source| TraceError::Io {
                    path: path.clone(),
                    source,
                })?;
            Box::new(d)
        } else {
            Box::new(f)
        };
        let name = p
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        let s = Stream {
            src,
            compressed,
            buf: vec![0; 1 << 18].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: HEADER_LEN,
            eof: false,
            failed: None,
        };
        Ok(NativeReader {
            path,
            name,
            s,
            codec: Codec::new(),
            count: 0,
            done: false,
            thread: 0,
            prewarm: None,
            shape_of: Box::new([UNKNOWN; STATIC_SLOTS]),
            interned: std::collections::HashMap::default(),
            #[cfg(test)]
            general_only: false,
        })
    }

    /// Records read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    fn end_marker(&mut self) -> Res<()> {
        let s = &mut self.s;
        let at = s.offset();
        let n = s.varint()?;
        if n != self.count {
            return Err(s.fail(
                at,
                format!("end marker counts {n} records but {} were read", self.count),
            ));
        }
        // Nothing may follow; reading to the end also makes zstd verify its checksum.
        if s.pos < s.end || s.refill()? {
            return Err(s.fail(s.offset(), "data after the end marker".into()));
        }
        Ok(())
    }

    fn next_record(&mut self, out: &mut Instr) -> Res<bool> {
        loop {
            let s = &mut self.s;
            if s.end - s.pos < FAST_MIN && !s.eof {
                s.refill()?;
            }
            let at = s.offset();
            let kind = s.byte()?;
            match kind {
                KIND_INSTR => {
                    // Fast path from a slice; anything unusual is parsed again from the stream.
                    let mut sl = Slice {
                        b: &s.buf[s.pos..s.end],
                        i: 0,
                    };
                    let full = match parse_instr(&mut sl, &self.codec, out) {
                        Ok(full) => {
                            s.pos += sl.i;
                            full
                        }
                        Err(Bad) => parse_instr(s, &self.codec, out)?,
                    };
                    self.codec.commit_read(out, full);
                    if full {
                        self.shape_of[static_slot(out.pc)] = UNKNOWN;
                    }
                    if let Some(why) = out.wrapping_access() {
                        return Err(self.s.fail(at, why));
                    }
                    out.thread = self.thread;
                    self.count += 1;
                    return Ok(true);
                }
                KIND_END => {
                    self.end_marker()?;
                    return Ok(false);
                }
                KIND_THREAD => {
                    let n = s.varint()?;
                    let start = s.offset();
                    let tid = s.varint()?;
                    if s.offset() - start != n || tid > u32::MAX as u64 {
                        return Err(s.fail(at, "malformed thread record".into()));
                    }
                    self.thread = tid as u32;
                }
                KIND_PREWARM => {
                    let n = s.varint()?;
                    if n > MAX_RECORD_DATA as u64 {
                        return Err(s.fail(at, format!("a prewarm record of {n} bytes (at most {MAX_RECORD_DATA})")));
                    }
                    let mut v = Vec::with_capacity(n as usize);
                    s.bytes_into(n as usize, &mut v)?;
                    self.prewarm = Some(v);
                }
                KIND_SKIPPABLE_FIRST.. => {
                    let n = s.varint()?;
                    s.skip(n)?;
                }
                _ => return Err(s.fail(at, format!("unknown record kind {kind:#04x}"))),
            }
        }
    }
}

/// The op class of each value of the INSTR head's op bits (all eight are classes).
const OPS: [OpClass; 8] = [
    OpClass::Alu,
    OpClass::Mul,
    OpClass::Div,
    OpClass::Fp,
    OpClass::FpDiv,
    OpClass::Mem,
    OpClass::Branch,
    OpClass::Barrier,
];
/// The outcome of each value of the head's branch bits but 3 (invalid).
const BRANCHES: [Branch; 3] = [Branch::None, Branch::NotTaken, Branch::Taken];

/// The varint at `b[i..]` and the index after it, if it lies whole in `b` and is valid (the
/// values and refusals of `Input::varint`).
#[inline(always)]
pub(crate) fn varint_at(b: &[u8], mut i: usize) -> Option<(u64, usize)> {
    let x = *b.get(i)?;
    if x < 0x80 {
        return Some((x as u64, i + 1));
    }
    let (mut v, mut shift) = ((x & 0x7f) as u64, 7);
    while shift < 64 {
        i += 1;
        let x = *b.get(i)?;
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            return (shift < 63 || x <= 1).then_some((v, i + 1));
        }
        shift += 7;
    }
    None
}

impl NativeReader {
    /// The common record (98% of a tracer's), decoded without the general parser: an INSTR
    /// record whose static part is repeated, lying whole in the buffer. Anything else (another
    /// kind, a static part sent in full, the buffer's last bytes, anything wrong) gives false
    /// having changed nothing but `out`; the general parser then reads the record from the
    /// same place, and reports what is wrong. What it gives is exactly what that parser gives.
    #[inline(always)]
    fn next_fast(&mut self, out: &mut Instr) -> bool {
        self.fast_ready() && self.next_fast_ready(out)
    }

    /// Whether the fast path may read (neither the end nor an error seen): only the general
    /// parser changes that, so a run of fast reads checks it once (`fill`).
    #[inline(always)]
    fn fast_ready(&self) -> bool {
        !self.done && self.s.failed.is_none()
    }

    /// `next_fast`, once `fast_ready` said yes since the general parser last read.
    #[inline(always)]
    fn next_fast_ready(&mut self, out: &mut Instr) -> bool {
        #[cfg(test)]
        if self.general_only {
            return false;
        }
        let s = &mut self.s;
        if s.end - s.pos < FAST_MIN {
            return false;
        }
        let b = &s.buf[s.pos..s.end];
        let (kind, h) = (b[0], b[1]);
        let outcome = (h >> H_BRANCH_SHIFT) & 3;
        if kind != KIND_INSTR || h & H_REPEAT == 0 || outcome == 3 {
            return false;
        }
        let Codec { prev_end, addrs, statics } = &mut self.codec;
        let mut i = 2;
        let pc = if h & H_PC_SEQ != 0 {
            *prev_end
        } else {
            let Some((d, j)) = varint_at(b, i) else {
                return false;
            };
            i = j;
            prev_end.wrapping_add(unzigzag(d) as u64)
        };
        let st = &statics[static_slot(pc)];
        if !st.valid || st.pc != pc {
            return false;
        }
        out.accesses.clear();
        out.data.clear();
        let Some(i) = fast_accesses(b, i, addrs, pc, &st.acc[..st.nacc as usize], |_, store, addr, v| {
            let off = out.data.len() as u32;
            append_accesses(&mut out.accesses, &[Access { store, addr, size: v.len() as u32, off }]);
            append_bytes(&mut out.data, v);
        }) else {
            return false;
        };
        out.pc = pc;
        out.len = st.len;
        out.op = OPS[(h & H_OP) as usize];
        out.branch = BRANCHES[outcome as usize];
        out.external = h & H_EXTERNAL != 0;
        out.nsrc = st.nsrc;
        out.src = st.src;
        out.ndst = st.ndst;
        out.dst = st.dst;
        out.thread = self.thread;
        s.pos += i;
        *prev_end = pc.wrapping_add(st.len as u64);
        self.count += 1;
        true
    }
}

/// The accesses `acc` of the record at `pc` on a fast path, from `b[i..]`: each one's
/// address and value given to `each` (with its index and whether it stores) as decoded; the
/// index after the last. Each address goes into the address table as it is decoded (what
/// `commit_read` does after a record, in a second pass over its accesses); None (a varint or
/// value cut short, or an access that wraps, which the general parser refuses with its
/// message) having put the table's earlier addresses back, so that the general parser reads
/// the record from the state it was written in.
#[inline(always)]
fn fast_accesses(b: &[u8], mut i: usize, addrs: &mut [u64; ADDR_SLOTS], pc: u64, acc: &[(bool, u32)], mut each: impl FnMut(usize, bool, u64, &[u8])) -> Option<usize> {
    let mut before = [0u64; STATIC_ACCESSES];
    for (k, &(store, size)) in acc.iter().enumerate() {
        let slot = addr_slot(pc, k);
        let given_up = |addrs: &mut [u64; ADDR_SLOTS], before: &[u64]| {
            put_back(addrs, pc, before);
            None
        };
        let Some((d, j)) = varint_at(b, i) else {
            return given_up(addrs, &before[..k]);
        };
        let addr = addrs[slot].wrapping_add(unzigzag(d) as u64);
        let Some(v) = b.get(j..j + size as usize) else {
            return given_up(addrs, &before[..k]);
        };
        if addr.checked_add((size as u64).saturating_sub(1)).is_none() {
            return given_up(addrs, &before[..k]);
        }
        before[k] = addrs[slot];
        addrs[slot] = addr;
        each(k, store, addr, v);
        i = j + size as usize;
    }
    Some(i)
}

/// A record given up half-way by a fast path: the address table's entries for its first
/// `before.len()` accesses as they were, so the general parser reads it from that state.
#[cold]
fn put_back(addrs: &mut [u64; ADDR_SLOTS], pc: u64, before: &[u64]) {
    for (j, &a) in before.iter().enumerate() {
        addrs[addr_slot(pc, j)] = a;
    }
}

/// `NativeReader::shape_of`: not yet looked up, and a static part no packed slot holds.
const UNKNOWN: u32 = u32::MAX;
const UNPACKABLE: u32 = u32::MAX - 1;

impl NativeReader {
    /// `next_fast_ready` into consecutive packed slots (`fill_packed`): common records whose
    /// static part fits a packed slot (its shape looked up once per static table entry, a new
    /// one added to `new`), until one is not such a record (left unread, having changed
    /// nothing but its slot and the shapes: it is then read into a spill slot), the slots run
    /// out, or the values read reach `budget` bytes (the record that reaches it included).
    /// Gives the records read and their values' bytes. The reader's position, the previous
    /// record's end and the count stay in locals for the run, written back once (through
    /// `&mut self` they were loaded and stored again for every record). What it gives is
    /// what `next_fast_ready` gives, record by record.
    #[inline(always)]
    fn packed_run(&mut self, slots: &mut [Packed], new: &mut Vec<Shape>, budget: usize) -> (usize, usize) {
        #[cfg(test)]
        if self.general_only {
            return (0, 0);
        }
        let NativeReader { s, codec: Codec { prev_end, addrs, statics }, shape_of, interned, thread, count, .. } = self;
        let buf = &s.buf[..s.end];
        let (mut pos, mut pe, thread) = (s.pos, *prev_end, *thread);
        let (mut n, mut bytes) = (0usize, 0usize);
        for out in slots.iter_mut() {
            if buf.len() - pos < FAST_MIN {
                break;
            }
            let Some((used, end, size)) = packed_one(&buf[pos..], pe, addrs, statics, shape_of, interned, new, out) else {
                break;
            };
            out.thread = thread;
            pos += used;
            pe = end;
            n += 1;
            bytes += size;
            if bytes >= budget {
                break;
            }
        }
        s.pos = pos;
        *prev_end = pe;
        *count += n as u64;
        (n, bytes)
    }
}

/// One record of `packed_run` from `b` (at least `FAST_MIN` bytes), the previous record
/// ending at `prev_end`: the bytes it took, its end and the size of its values; None having
/// changed nothing but `out` and the shapes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn packed_one(
    b: &[u8],
    prev_end: u64,
    addrs: &mut [u64; ADDR_SLOTS],
    statics: &[Static; STATIC_SLOTS],
    shape_of: &mut [u32; STATIC_SLOTS],
    interned: &mut std::collections::HashMap<Shape, u32, BuildPageHasher>,
    new: &mut Vec<Shape>,
    out: &mut Packed,
) -> Option<(usize, u64, usize)> {
    let (kind, h) = (b[0], b[1]);
    let outcome = (h >> H_BRANCH_SHIFT) & 3;
    if kind != KIND_INSTR || h & (H_REPEAT | H_EXTERNAL) != H_REPEAT || outcome == 3 {
        return None;
    }
    let mut i = 2;
    let pc = if h & H_PC_SEQ != 0 {
        prev_end
    } else {
        let (d, j) = varint_at(b, i)?;
        i = j;
        prev_end.wrapping_add(unzigzag(d) as u64)
    };
    let slot = static_slot(pc);
    let st = &statics[slot];
    if !st.valid || st.pc != pc {
        return None;
    }
    let mut shape = shape_of[slot];
    if shape == UNKNOWN {
        shape = intern(interned, new, st);
        shape_of[slot] = shape;
    }
    if shape == UNPACKABLE {
        return None;
    }
    // (The shape holds at most PACKED_ACCESSES accesses and PACKED_BYTES bytes.)
    let mut off = 0usize;
    let i = fast_accesses(b, i, addrs, pc, &st.acc[..st.nacc as usize], |k, _, addr, v| {
        out.addr[k] = addr;
        copy_value(&mut out.data[off..off + v.len()], v);
        off += v.len();
    })?;
    out.shape = shape;
    out.op = OPS[(h & H_OP) as usize];
    out.branch = BRANCHES[outcome as usize];
    Some((i, pc.wrapping_add(st.len as u64), off))
}

/// The packed shape of static part `st` (a new one added to `new`), or `UNPACKABLE`.
#[cold]
fn intern(interned: &mut std::collections::HashMap<Shape, u32, BuildPageHasher>, new: &mut Vec<Shape>, st: &Static) -> u32 {
    let (srcs, dsts) = (&st.src[..st.nsrc as usize], &st.dst[..st.ndst as usize]);
    let Some(sh) = Shape::new(st.pc, st.len, srcs, dsts, &st.acc[..st.nacc as usize]) else {
        return UNPACKABLE;
    };
    intern_shape(interned, new, sh)
}

/// The number of shape `sh` (a new one added to `new`).
fn intern_shape(interned: &mut std::collections::HashMap<Shape, u32, BuildPageHasher>, new: &mut Vec<Shape>, sh: Shape) -> u32 {
    let n = interned.len() as u32;
    *interned.entry(sh).or_insert_with(|| {
        new.push(sh);
        n
    })
}

/// `dst` = `src`, as fixed-size copies for the usual value sizes (`record::append_bytes`).
#[inline(always)]
fn copy_value(dst: &mut [u8], src: &[u8]) {
    match src.len() {
        1 => dst[0] = src[0],
        2 => dst[..2].copy_from_slice(&<[u8; 2]>::try_from(src).expect("2 bytes")),
        4 => dst[..4].copy_from_slice(&<[u8; 4]>::try_from(src).expect("4 bytes")),
        8 => dst[..8].copy_from_slice(&<[u8; 8]>::try_from(src).expect("8 bytes")),
        16 => dst[..16].copy_from_slice(&<[u8; 16]>::try_from(src).expect("16 bytes")),
        _ => dst.copy_from_slice(src),
    }
}

impl TraceSource for NativeReader {
    // Inline into the read-ahead thread's loop (`ReadAhead`), which calls it for every record.
    #[inline]
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.next_fast(out) {
            return Ok(true);
        }
        self.next_slow(out)
    }

    /// `next_into` for each slot, with the fast path's readiness checked once per run of
    /// fast reads and no `Result` made per record (the read-ahead thread's loop).
    #[inline]
    fn fill(&mut self, slots: &mut [Instr], max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        let (mut bytes, mut fast) = (0, self.fast_ready());
        for (n, r) in slots.iter_mut().enumerate() {
            crate::readahead::give_up_big(r);
            if !(fast && self.next_fast_ready(r)) {
                match self.next_slow(r) {
                    Ok(true) => fast = self.fast_ready(),
                    Ok(false) => return (n, Some(Ok(()))),
                    Err(e) => return (n, Some(Err(e))),
                }
            }
            bytes += r.data.len();
            if bytes >= max_bytes {
                return (n + 1, None);
            }
        }
        (slots.len(), None)
    }

    /// `fill` into packed slots: the common record through `packed_run`; the others read as
    /// `fill` reads them, each into a packed slot if it fits one (`Shape::of`), else
    /// (external, more accesses or bytes than a packed slot holds) into the next spill slot.
    #[inline]
    fn fill_packed(&mut self, b: &mut PackedBatch, max_bytes: usize) -> (usize, Option<Result<(), TraceError>>) {
        let (mut bytes, mut fast) = (0, self.fast_ready());
        let n = b.slots.len().min(b.spill.len());
        let mut k = 0;
        while k < n {
            if fast {
                let (m, got) = self.packed_run(&mut b.slots[k..n], &mut b.shapes, max_bytes - bytes);
                k += m;
                bytes += got;
                // (With no record read, as with `max_bytes` 0, the record is spilled below.)
                if m > 0 && bytes >= max_bytes {
                    return (k, None);
                }
                if k == n {
                    break;
                }
            }
            let j = b.nspill;
            let r = &mut b.spill[j];
            crate::readahead::give_up_big(r);
            if !(fast && self.next_fast_ready(r)) {
                match self.next_slow(r) {
                    Ok(true) => fast = self.fast_ready(),
                    Ok(false) => return (k, Some(Ok(()))),
                    Err(e) => return (k, Some(Err(e))),
                }
            }
            bytes += r.data.len();
            // A record that fits a packed slot all the same (from the general parser: a
            // static part sent again in full, 3% of xz's records) is stepped as the common
            // ones are, not through the core's out-of-line step for spilled records, a second
            // copy of the core's code for the host's instruction cache to hold.
            match Shape::of(r) {
                Some(sh) => b.slots[k] = Packed::of(r, intern_shape(&mut self.interned, &mut b.shapes, sh), &sh),
                None => {
                    b.slots[k] = Packed::spilled(j);
                    b.nspill += 1;
                }
            }
            k += 1;
            if bytes >= max_bytes {
                return (k, None);
            }
        }
        (n, None)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn take_prewarm(&mut self) -> Option<Vec<u8>> {
        self.prewarm.take()
    }
}

impl NativeReader {
    #[inline(never)]
    fn next_slow(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        if self.s.failed.is_none() {
            if let Ok(more) = self.next_record(out) {
                self.done = !more;
                return Ok(more);
            }
        }
        let (offset, what) = self
            .s
            .failed
            .clone()
            .unwrap_or((self.s.offset(), "undecodable record".into()));
        Err(TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what,
        })
    }
}

/// Open a trace file of any supported format (today: the native format, by its magic).
pub fn open_trace(path: &str) -> Result<Box<dyn TraceSource>, TraceError> {
    Ok(Box::new(NativeReader::open(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{builtin, testutil::take, Mix};
    use std::path::PathBuf;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("secmem-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    fn write(path: &Path, recs: &[Instr]) {
        let mut w = NativeWriter::create(path).unwrap();
        for r in recs {
            w.write(r).unwrap();
        }
        assert_eq!(w.finish().unwrap(), recs.len() as u64);
    }

    /// Read `path` back and require exactly `recs`, without error.
    fn assert_reads(path: &Path, recs: &[Instr]) {
        let (back, err) = read_all(path);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(back.len(), recs.len());
        for (i, (a, b)) in recs.iter().zip(&back).enumerate() {
            assert_eq!(a, b, "record {i}");
        }
    }

    /// Read everything, returning the records and the error that stopped it (if any).
    fn read_all(path: &Path) -> (Vec<Instr>, Option<TraceError>) {
        let mut src = match open_trace(path.to_str().unwrap()) {
            Ok(s) => s,
            Err(e) => return (vec![], Some(e)),
        };
        let mut v = Vec::new();
        let mut r = Instr::default();
        // A generous cap: a reader that loops forever fails here instead of hanging.
        for _ in 0..10_000_000 {
            match src.next_into(&mut r) {
                Ok(true) => v.push(r.clone()),
                Ok(false) => {
                    assert!(!src.next_into(&mut r).unwrap(), "records after the end");
                    return (v, None);
                }
                Err(e) => {
                    let again = src.next_into(&mut r).unwrap_err().to_string();
                    assert_eq!(again, e.to_string(), "errors must be sticky");
                    return (v, Some(e));
                }
            }
        }
        panic!("reader did not stop");
    }

    fn mix_records(n: usize) -> Vec<Instr> {
        // Short phases so all three programs and their external images are in the sample.
        take(&mut Mix::with_phase(5, 60_000), n)
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0i64, 1, -1, 63, -64, 64, i64::MAX, i64::MIN, 1 << 40] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
    }

    /// Stored uncompressed (FLAG_ZSTD clear), the same records read back, with a PREWARM
    /// record's payload kept for `take_prewarm` and skipped as a record; the file is the
    /// record stream itself (larger than compressed).
    #[test]
    fn an_uncompressed_trace_round_trips_and_keeps_its_prewarm_record() {
        let recs = mix_records(50_000);
        let (p, q) = (tmp("raw.smt"), tmp("raw-z.smt"));
        let mut w = NativeWriter::uncompressed(&p).unwrap();
        w.write_skippable(KIND_PREWARM, &[1, 2, 3]).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        write(&q, &recs);
        assert_reads(&p, &recs);
        let mut r = NativeReader::open(&p).unwrap();
        assert_eq!(r.take_prewarm(), None, "not read yet");
        let mut x = Instr::default();
        assert!(r.next_into(&mut x).unwrap());
        assert_eq!(r.take_prewarm(), Some(vec![1, 2, 3]));
        assert_eq!(r.take_prewarm(), None, "taken once");
        let head = std::fs::read(&p).unwrap();
        assert_eq!(u16::from_le_bytes([head[10], head[11]]) & FLAG_ZSTD, 0);
        assert!(std::fs::metadata(&p).unwrap().len() > std::fs::metadata(&q).unwrap().len());
    }

    #[test]
    fn mix_round_trips_exactly() {
        let recs = mix_records(300_000 + 5760);
        let p = tmp("roundtrip.smt");
        write(&p, &recs);
        assert_reads(&p, &recs);
        let mut r = NativeReader::open(&p).unwrap();
        assert_eq!(r.name(), "roundtrip.smt");
        let mut x = Instr::default();
        while r.next_into(&mut x).unwrap() {}
        assert_eq!(r.count(), recs.len() as u64);
    }

    #[test]
    fn odd_records_round_trip() {
        // Jumps back and forth, huge addresses, several accesses, empty and big values.
        let mut recs = Vec::new();
        let mut r = Instr {
            pc: u64::MAX - 2,
            len: 7,
            op: OpClass::Barrier,
            branch: Branch::Taken,
            ..Default::default()
        };
        r.add_src(63);
        r.add_dst(0);
        r.add_access(false, u64::MAX - 7, &[1, 2, 3, 4, 5, 6, 7, 8]);
        r.add_access(true, 0, &[]);
        r.add_access(true, 1 << 63, &[9; 4096]);
        recs.push(r.clone());
        r.pc = 5;
        r.len = 0;
        r.external = true;
        r.op = OpClass::FpDiv;
        recs.push(r.clone());
        for k in 0..6 {
            r.add_src(k);
        }
        for k in 0..3 {
            r.add_dst(k);
        }
        r.branch = Branch::NotTaken;
        recs.push(r.clone());
        // One pc with too many accesses for the static table, then few, then many again:
        // the table entry is replaced, repeated and invalidated in turn.
        let mut few = Instr {
            pc: 0x4000,
            len: 4,
            op: OpClass::Mem,
            ..Default::default()
        };
        few.add_src(1);
        few.add_access(false, 0x1000, &[1, 2]);
        let mut many = few.clone();
        for k in 0..5u8 {
            many.add_access(k % 2 == 0, 0x2000 + k as u64 * 64, &[k; 3]);
        }
        for x in [&many, &many, &few, &few, &many, &few, &few] {
            recs.push(x.clone());
        }
        let p = tmp("odd.smt");
        write(&p, &recs);
        assert_reads(&p, &recs);
    }

    #[test]
    fn threads_and_instruction_bytes_round_trip() {
        let recs: Vec<Instr> = [0u32, 0, 7, 7, 0, 300_000]
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let mut r = Instr { pc: 0x1000 + 4 * k as u64, len: 4, thread: t, ..Default::default() };
                r.add_access(k % 2 == 1, 0x8000 + k as u64, &[k as u8]);
                r
            })
            .collect();
        let p = tmp("threads.smt");
        let mut w = NativeWriter::create(&p).unwrap();
        for r in &recs {
            w.write_code(r.pc, &[0x90, 0x90, 0x90, 0x90]).unwrap();
            w.write(r).unwrap();
        }
        assert!(w.write_code(0, &[0; 16]).is_err(), "more than 15 bytes is not an x86 instruction");
        w.finish().unwrap();
        assert_reads(&p, &recs);
    }

    #[test]
    fn prepared_executions_write_the_same_bytes_as_records() {
        // Every record of mix (externals included) written twice: as Instr, and as an
        // execution of a prepared static part keyed by its static part (pc, length,
        // registers: not the op class). The record streams must be identical, whatever path
        // each record takes in the writer.
        let recs = mix_records(200_000);
        let (p, q) = (tmp("as-records.smt"), tmp("as-executions.smt"));
        write(&p, &recs);
        let mut keys = std::collections::HashMap::new();
        let mut w = NativeWriter::create(&q).unwrap();
        for r in &recs {
            if r.external {
                w.write(r).unwrap();
                continue;
            }
            let id = (r.pc, r.len, r.srcs().to_vec(), r.dsts().to_vec());
            let n = keys.len() as u32;
            let key = *keys.entry(id).or_insert(n);
            let st = Prepared::new(key, r.pc, r.len, r.op, r.srcs(), r.dsts());
            w.write_exec(&st, r.branch, r.thread, &r.accesses, &r.data).unwrap();
        }
        w.finish().unwrap();
        let body = |p: &Path| zstd::decode_all(&std::fs::read(p).unwrap()[16..]).unwrap();
        assert!(body(&p) == body(&q), "the two ways of writing differ");
        assert!(keys.len() > 20, "{} static instructions", keys.len());
        assert_reads(&q, &recs);
    }

    #[test]
    fn empty_trace_is_valid() {
        let p = tmp("empty.smt");
        write(&p, &[]);
        let (v, e) = read_all(&p);
        assert!(v.is_empty() && e.is_none());
    }

    #[test]
    fn writer_rejects_records_it_could_not_encode() {
        let p = tmp("reject.smt");
        let mut w = NativeWriter::create(&p).unwrap();
        let mut r = Instr::default();
        r.accesses.push(Access {
            store: false,
            addr: 0,
            size: 8,
            off: 0,
        });
        let e = w.write(&r).unwrap_err().to_string();
        assert!(e.contains("reject.smt") && e.contains("record 0"), "{e}");
        r.clear();
        r.nsrc = 9;
        assert!(w.write(&r).is_err());
    }

    #[test]
    fn truncated_files_are_corrupt_not_panics() {
        let recs = mix_records(100_000);
        let p = tmp("full.smt");
        write(&p, &recs);
        let full = std::fs::read(&p).unwrap();
        let q = tmp("cut.smt");
        let cuts = [
            17,
            20,
            100,
            1000,
            full.len() / 3,
            full.len() / 2,
            full.len() - 20,
            full.len() - 4,
            full.len() - 1,
        ];
        for cut in cuts {
            std::fs::write(&q, &full[..cut]).unwrap();
            let (v, e) = read_all(&q);
            match e {
                Some(TraceError::Corrupt { path, offset, what }) => {
                    assert!(path.ends_with("cut.smt"));
                    assert!(
                        offset >= HEADER_LEN && what.contains("truncated"),
                        "cut {cut}: {what} at {offset}"
                    );
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
            assert!(v.len() <= recs.len());
            assert!(
                v.iter().zip(&recs).all(|(a, b)| a == b),
                "records before the cut are intact"
            );
        }
        // Cut inside the header.
        for cut in [0, 5, 8, 12] {
            std::fs::write(&q, &full[..cut]).unwrap();
            let e = open_trace(q.to_str().unwrap())
                .err()
                .expect("accepted a cut header")
                .to_string();
            assert!(e.contains("cut.smt") && !e.contains('\n'), "{e}");
        }
    }

    /// The zstd frames of a compressed file: (offset, length) of each.
    fn frames(file: &[u8]) -> Vec<(usize, usize)> {
        let (mut at, mut v) = (HEADER_LEN as usize, Vec::new());
        while at < file.len() {
            let n = zstd::zstd_safe::find_frame_compressed_size(&file[at..]).expect("a whole zstd frame");
            v.push((at, n));
            at += n;
        }
        v
    }

    #[test]
    fn long_streams_are_several_frames_each_checked() {
        // 32-byte loads of random values at wandering addresses: about 10 MiB of records.
        let mut rng = crate::workloads::Rng::new(7, 3);
        let recs: Vec<Instr> = (0..240_000u64)
            .map(|i| {
                let mut r = Instr { pc: 0x40_0000 + 4 * (i % 64), len: 4, op: OpClass::Mem, ..Instr::default() };
                let v: Vec<u8> = (0..4).flat_map(|_| rng.next().to_le_bytes()).collect();
                r.add_access(false, 0x10_0000 + 32 * rng.below(1 << 20), &v);
                r
            })
            .collect();
        let p = tmp("frames.smt");
        write(&p, &recs);
        assert_reads(&p, &recs);
        let full = std::fs::read(&p).unwrap();
        let fr = frames(&full);
        assert!(fr.len() >= 3, "{} frames", fr.len());
        // A flipped byte in the first frame surfaces at its end at the latest (its checksum),
        // not at the end of the file.
        let q = tmp("frames-bad.smt");
        let mut bad = full.clone();
        bad[fr[0].0 + fr[0].1 / 2] ^= 0x10;
        std::fs::write(&q, &bad).unwrap();
        let (v, e) = read_all(&q);
        assert!(matches!(e, Some(TraceError::Corrupt { .. })), "{e:?}");
        assert!(v.len() < recs.len() / 2, "{} of {} records delivered", v.len(), recs.len());
        // Cut at a frame boundary: whole frames, no end marker.
        std::fs::write(&q, &full[..fr[1].0 + fr[1].1]).unwrap();
        let (v, e) = read_all(&q);
        assert!(e.as_ref().is_some_and(|e| e.to_string().contains("truncated")), "{e:?}");
        assert!(!v.is_empty() && v.len() < recs.len());
    }

    #[test]
    fn flipped_bytes_are_detected() {
        let recs = mix_records(50_000);
        let p = tmp("flip-src.smt");
        write(&p, &recs);
        let full = std::fs::read(&p).unwrap();
        let q = tmp("flip.smt");
        let mut rng = crate::workloads::Rng::new(1, 2);
        for i in 0..60 {
            let mut bad = full.clone();
            let at = if i < 10 {
                i
            } else {
                HEADER_LEN as usize + rng.below((full.len() - 16) as u64) as usize
            };
            bad[at] ^= 1 << rng.below(8);
            std::fs::write(&q, &bad).unwrap();
            let (v, e) = read_all(&q);
            let e = e.unwrap_or_else(|| panic!("flip at {at} not detected ({} records)", v.len()));
            let msg = e.to_string();
            assert!(msg.contains("flip.smt") && !msg.contains('\n'), "{msg}");
            if at >= HEADER_LEN as usize {
                assert!(matches!(e, TraceError::Corrupt { .. }), "{msg}");
            }
        }
    }

    #[test]
    fn raw_streams_are_read_and_their_corruption_located() {
        // Flag bit 0 clear: the records are stored uncompressed (for debugging and tests).
        let recs = mix_records(2_000);
        let p = tmp("z.smt");
        write(&p, &recs);
        let full = std::fs::read(&p).unwrap();
        let raw = zstd::decode_all(&full[16..]).unwrap();
        let mut file = full[..16].to_vec();
        file[10] = 0;
        file.extend_from_slice(&raw);
        let q = tmp("raw.smt");
        std::fs::write(&q, &file).unwrap();
        assert_reads(&q, &recs);
        // An unknown record kind where the first record starts.
        file[16] = 0x42;
        std::fs::write(&q, &file).unwrap();
        match read_all(&q).1 {
            Some(TraceError::Corrupt {
                offset: 16, what, ..
            }) => assert!(what.contains("0x42")),
            e => panic!("{e:?}"),
        }
        // A first record that claims to repeat a static part never sent.
        let mut rep = file[..16].to_vec();
        rep.extend_from_slice(&[KIND_INSTR, H_REPEAT]);
        rep.extend_from_slice(&raw);
        std::fs::write(&q, &rep).unwrap();
        match read_all(&q).1 {
            Some(TraceError::Corrupt {
                offset: 17, what, ..
            }) => assert!(what.contains("repeats"), "{what}"),
            e => panic!("{e:?}"),
        }
        // A skippable extension record before the first record is ignored.
        let mut ext = file[..16].to_vec();
        ext.extend_from_slice(&[0x80, 3, 7, 7, 7]);
        ext.extend_from_slice(&raw);
        std::fs::write(&q, &ext).unwrap();
        assert_reads(&q, &recs);
        // A wrong record count in the end marker.
        let mut cnt = file[..16].to_vec();
        cnt.extend_from_slice(&raw);
        let n = cnt.len();
        cnt[n - 2] ^= 1;
        std::fs::write(&q, &cnt).unwrap();
        let e = read_all(&q).1.unwrap().to_string();
        assert!(e.contains("end marker"), "{e}");
    }

    /// mix's records without the external ones, written to `name`: the records, a header
    /// saying the body is raw (no zstd, so no checksum), and the raw body, for damaging.
    fn raw_stream(name: &str) -> (Vec<Instr>, Vec<u8>, Vec<u8>) {
        let mut recs = take(&mut Mix::with_phase(5, 1_000), 7_296 + 6_000);
        recs.retain(|r| !r.external);
        let p = tmp(name);
        write(&p, &recs);
        let full = std::fs::read(&p).unwrap();
        let raw = zstd::decode_all(&full[16..]).unwrap();
        let mut head = full[..16].to_vec();
        head[10] = 0;
        (recs, head, raw)
    }

    /// `raw` with `edits` random bytes changed, then cut at random if `cut`, written after
    /// `head` to `q`.
    fn write_damaged(q: &Path, head: &[u8], raw: &[u8], rng: &mut crate::workloads::Rng, edits: usize, cut: bool) {
        let mut body = raw.to_vec();
        for _ in 0..edits {
            let at = rng.below(body.len() as u64) as usize;
            body[at] = rng.next() as u8;
        }
        if cut {
            body.truncate(rng.below(body.len() as u64) as usize);
        }
        let mut file = head.to_vec();
        file.extend_from_slice(&body);
        std::fs::write(q, &file).unwrap();
    }

    #[test]
    fn parser_survives_garbage_without_a_checksum() {
        // Raw streams have no zstd checksum: damage reaches the record parser itself, which
        // must stop (with an error or a clean end) without panicking or looping.
        let (_, head, raw) = raw_stream("g.smt");
        let q = tmp("garbage.smt");
        let mut rng = crate::workloads::Rng::new(3, 4);
        let mut errors = 0;
        for i in 0..400 {
            write_damaged(&q, &head, &raw, &mut rng, 1 + i % 4, i % 5 == 0);
            errors += read_all(&q).1.is_some() as u32;
        }
        assert!(
            errors > 100,
            "only {errors} of 400 damaged streams were noticed"
        );
    }

    /// Every record and the error that stopped it, through the fast path or not.
    fn read_as(path: &Path, general_only: bool) -> (Vec<Instr>, Option<String>) {
        let mut r = NativeReader::open(path).unwrap();
        r.general_only = general_only;
        let (mut v, mut x) = (Vec::new(), Instr::default());
        for _ in 0..1_000_000 {
            match r.next_into(&mut x) {
                Ok(true) => v.push(x.clone()),
                Ok(false) => return (v, None),
                Err(e) => return (v, Some(e.to_string())),
            }
        }
        panic!("no end")
    }

    /// `read_as` through `fill` (the read-ahead thread's way), `k` slots a call and at most
    /// `max_bytes` of values.
    fn read_filled(path: &Path, k: usize, max_bytes: usize) -> (Vec<Instr>, Option<String>) {
        let mut r = NativeReader::open(path).unwrap();
        let (mut v, mut slots) = (Vec::new(), vec![Instr::default(); k]);
        for _ in 0..1_000_000 {
            let (n, end) = r.fill(&mut slots, max_bytes);
            assert!(n <= k && (n > 0 || end.is_some()), "{n} of {k} slots and no end");
            v.extend_from_slice(&slots[..n]);
            match end {
                None => {}
                Some(Ok(())) => return (v, None),
                Some(Err(e)) => return (v, Some(e.to_string())),
            }
        }
        panic!("no end")
    }

    /// `read_filled` through `fill_packed` (the read-ahead thread's way since packed slots),
    /// also giving how many records were packed rather than spilled.
    fn read_packed(path: &Path, k: usize, max_bytes: usize) -> ((Vec<Instr>, Option<String>), usize) {
        let mut r = NativeReader::open(path).unwrap();
        let (mut v, mut b, mut shapes, mut packed) = (Vec::new(), PackedBatch::new(k), Vec::new(), 0);
        for _ in 0..1_000_000 {
            (b.nspill, b.shapes) = (0, Vec::new());
            let (n, end) = r.fill_packed(&mut b, max_bytes);
            assert!(n <= k && (n > 0 || end.is_some()), "{n} of {k} slots and no end");
            assert!(!b.plain, "the native reader packs");
            shapes.extend_from_slice(&b.shapes);
            let recs = b.recs(&shapes, 0, n);
            v.extend(recs.to_vec());
            packed += (0..n).filter(|&j| matches!(recs.get(j), crate::One::View(_))).count();
            match end {
                None => {}
                Some(Ok(())) => return ((v, None), packed),
                Some(Err(e)) => return ((v, Some(e.to_string())), packed),
            }
        }
        panic!("no end")
    }

    /// Records of 0-4 accesses of 0-40 bytes each (a few over a packed slot's two accesses
    /// and 32 bytes), repeated static parts and static parts sent again changed, external
    /// records and threads: read into packed slots they are what the general parser reads,
    /// each one that fits a packed slot packed, whichever way it was read.
    #[test]
    fn packed_slots_hold_what_the_general_parser_reads() {
        let mut recs = Vec::new();
        for k in 0..20_000u64 {
            let at = k % 61;
            let mut r = Instr { pc: 0x40_0000 + 8 * at, len: 3 + (at % 5) as u8, op: OpClass::from_u8((k % 8) as u8).unwrap(), ..Instr::default() };
            r.branch = [Branch::None, Branch::Taken, Branch::NotTaken][(k % 3) as usize];
            r.thread = (k / 5000) as u32;
            for j in 0..(at % 4) as u8 {
                r.add_src(j + 1);
            }
            r.add_dst((at % 7) as u8);
            // The shape is the pc's, but every 997th record changes it (its static part is
            // sent again, and the next repeats refer to the new one).
            let shape = if k % 997 == 5 { at + 1 } else { at };
            for j in 0..(shape % 5) {
                let size = [1usize, 2, 4, 8, 16, 32, 3, 40, 0][((shape + j) % 9) as usize];
                let value: Vec<u8> = (0..size).map(|b| (b as u64 * 7 + k + j) as u8).collect();
                r.add_access((shape + j) % 2 == 0, 0x1000_0000 + 64 * ((k * 13 + j * 5) % 4001), &value);
            }
            r.external = k % 1013 == 7;
            recs.push(r);
        }
        // Those the general parser reads among them (a static part sent in full) too.
        let fits = recs.iter().filter(|r| Shape::of(r).is_some()).count();
        assert!(fits > recs.len() / 3 && fits < recs.len(), "{fits} of {} fit", recs.len());
        let p = tmp("packed.smt");
        write(&p, &recs);
        assert!(read_as(&p, true) == (recs.clone(), None));
        for (k, max_bytes) in [(1, usize::MAX), (7, 1), (3, 0), (64, 40), (1024, usize::MAX)] {
            let (got, packed) = read_packed(&p, k, max_bytes);
            assert!(got.1.is_none() && got.0.len() == recs.len(), "{k} slots: {:?}", got.1);
            for (j, (a, b)) in got.0.iter().zip(&recs).enumerate() {
                assert_eq!(a, b, "record {j}, {k} slots");
            }
            assert_eq!(packed, fits, "{k} slots: every record that fits a packed slot is packed");
        }
        // Read ahead on a thread and in batches on this one (the shapes gathered batch by
        // batch), a slice or a record at a time.
        for (by_slice, ahead) in [(true, true), (false, true), (true, false), (false, false)] {
            let src = NativeReader::open(&p).unwrap();
            let mut r: Box<dyn TraceSource> = if ahead { Box::new(crate::ReadAhead::new(src)) } else { Box::new(crate::ReadInline::new(src)) };
            let (mut got, mut one) = (Vec::new(), Instr::default());
            loop {
                if by_slice {
                    let x = r.next_slice(&mut one, 300).unwrap();
                    if x.is_empty() {
                        break;
                    }
                    got.extend(x.to_vec());
                } else if r.next_into(&mut one).unwrap() {
                    got.push(one.clone());
                } else {
                    break;
                }
            }
            assert!(got == recs, "read ahead {ahead}, by slice {by_slice}");
        }
    }

    #[test]
    fn the_fast_path_reads_what_the_general_parser_reads_and_fails_where_it_fails() {
        // Raw streams (no checksum) damaged at random, as above: both ways of reading give
        // the same records and the same error, at the same offset.
        // (Without the external records: their value bytes would take most of the damage.)
        let (recs, head, raw) = raw_stream("fast.smt");
        let q = tmp("fast-raw.smt");
        let mut rng = crate::workloads::Rng::new(5, 6);
        let (mut fast_errors, mut long_reads) = (0, 0);
        for i in 0..150 {
            // damage 0 is the stream as written
            let (edits, cut) = if i > 0 { (1 + i % 3, i % 5 == 0) } else { (0, false) };
            write_damaged(&q, &head, &raw, &mut rng, edits, cut);
            let (want, got) = (read_as(&q, true), read_as(&q, false));
            assert_eq!(want.1, got.1, "damage {i}");
            assert!(want.0 == got.0, "damage {i}: the records differ");
            // Slots filled a batch at a time: the same records and error, whatever the batch
            // (one slot, a few, more than the stream) and its byte limit (1: one a call).
            let (k, max_bytes) = [(1, usize::MAX), (7, 1), (64, 40), (5000, usize::MAX)][i % 4];
            let filled = read_filled(&q, k, max_bytes);
            assert_eq!(want.1, filled.1, "damage {i}, filled");
            assert!(want.0 == filled.0, "damage {i}: the filled records differ");
            let (packed, _) = read_packed(&q, k, max_bytes);
            assert_eq!(want.1, packed.1, "damage {i}, packed");
            assert!(want.0 == packed.0, "damage {i}: the packed records differ");
            if i == 0 {
                assert!(want.1.is_none() && want.0 == recs);
            }
            fast_errors += want.1.is_some() as u32;
            long_reads += (want.0.len() > 1000) as u32;
        }
        assert!(fast_errors > 40 && long_reads > 40, "{fast_errors} errors, {long_reads} long reads");
        // A repeated record whose address delta is `delta`, with more than the fast path's
        // margin of bytes behind it; the offset of that record.
        let crafted = |delta: &[u8]| {
            let mut body = vec![KIND_INSTR, OpClass::Mem as u8];
            put_varint(&mut body, zigzag(0x1000));
            body.extend_from_slice(&[4, 0, 1, 0, 8]); // len, no registers, one 8-byte load
            put_varint(&mut body, zigzag(0x5000));
            body.extend_from_slice(&[1; 8]);
            let at = HEADER_LEN + body.len() as u64;
            body.extend_from_slice(&[KIND_INSTR, OpClass::Mem as u8 | H_REPEAT]);
            put_varint(&mut body, zigzag(-4));
            body.extend_from_slice(delta);
            body.extend_from_slice(&[2; 8]);
            body.extend(std::iter::repeat_n([KIND_CODE, 2, 1, 0x90], 100).flatten());
            body.extend_from_slice(&[KIND_END, 2]);
            let mut file = head.clone();
            file.extend_from_slice(&body);
            std::fs::write(&q, &file).unwrap();
            at
        };
        let mut wraps = Vec::new();
        put_varint(&mut wraps, zigzag((u64::MAX - 3).wrapping_sub(0x5000) as i64));
        let at = crafted(&wraps);
        let want = format!("an access of 8 bytes at 0xfffffffffffffffc runs past the end of the address space at byte offset {at}");
        let overlong = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        let at2 = crafted(&overlong) + 3;
        let want2 = format!("varint longer than 64 bits at byte offset {at2}");
        for (delta, want) in [(&wraps[..], want), (&overlong[..], want2)] {
            crafted(delta);
            for general_only in [true, false] {
                let (v, e) = read_as(&q, general_only);
                assert_eq!((v.len(), e), (1, Some(format!("{}: {want}", q.display()))));
            }
            let (v, e) = read_filled(&q, 16, usize::MAX);
            assert_eq!((v.len(), e), (1, Some(format!("{}: {want}", q.display()))));
            let ((v, e), _) = read_packed(&q, 16, usize::MAX);
            assert_eq!((v.len(), e), (1, Some(format!("{}: {want}", q.display()))));
        }
    }

    /// Records the fast path gives up half-way through (a long second value that runs past
    /// the decoded bytes it holds, at each refill of the buffer), after it has put the first
    /// access's address into the address table: the general parser reads them again from
    /// the table as it was, so both ways give the same records.
    #[test]
    fn the_fast_path_gives_up_half_way_without_changing_the_address_table() {
        let mut recs = Vec::new();
        for k in 0..6000u64 {
            let mut r = Instr { pc: 0x40_1000 + 16 * (k % 3), len: 7, op: OpClass::Mem, ..Instr::default() };
            r.add_src(3);
            r.add_dst(5);
            let big: Vec<u8> = (0..400u64).map(|b| (b * 7 + k) as u8).collect();
            r.add_access(false, 0x7000_0000 + 8 * (k % 97), &k.to_le_bytes());
            r.add_access(true, 0x9000_0000 + 64 * (k * 13 % 1001), &big);
            recs.push(r);
        }
        let p = tmp("halfway.smt");
        write(&p, &recs);
        let (general, fast) = (read_as(&p, true), read_as(&p, false));
        assert!(general.1.is_none() && general.0 == recs);
        assert!(fast.1.is_none() && fast.0 == recs, "the fast path's records differ");
        let filled = read_filled(&p, 64, usize::MAX);
        assert!(filled.1.is_none() && filled.0 == recs, "the filled records differ");
        let (packed, _) = read_packed(&p, 64, usize::MAX);
        assert!(packed.1.is_none() && packed.0 == recs, "the packed records differ");
    }

    #[test]
    fn filling_a_slot_gives_up_its_big_buffers_first() {
        let recs = crate::readahead::small_records();
        let p = tmp("give-up.smt");
        write(&p, &recs);
        crate::readahead::fills_give_up_big_buffers(&mut NativeReader::open(&p).unwrap(), &recs);
    }

    #[test]
    fn foreign_files_and_versions_are_refused_in_one_line() {
        let q = tmp("foreign.trace");
        let cases: [(&[u8], &str); 4] = [
            (b"", "empty"),
            (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "gzip"),
            (b"instr 0x400000 add\n", "unknown magic"),
            (
                b"\x89SMTR\r\n\x1a\x02\x00\x01\x00\x00\x00\x00\x00",
                "version 2",
            ),
        ];
        for (bytes, want) in cases {
            std::fs::write(&q, bytes).unwrap();
            let e = open_trace(q.to_str().unwrap()).err().unwrap().to_string();
            assert!(
                e.contains("foreign.trace") && e.contains(want) && !e.contains('\n'),
                "{e}"
            );
        }
        let e = open_trace("/nonexistent/x.smt").err().unwrap().to_string();
        assert!(e.contains("/nonexistent/x.smt"), "{e}");
    }

    #[test]
    fn builtin_workloads_round_trip() {
        for name in ["stream", "chase", "hot"] {
            let recs = take(builtin(name, 3).unwrap().as_mut(), 20_000);
            let p = tmp(&format!("{name}.smt"));
            write(&p, &recs);
            assert_reads(&p, &recs);
        }
    }
}
