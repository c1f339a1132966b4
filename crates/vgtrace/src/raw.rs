//! The raw stream the `smtrace` Valgrind tool writes, and its decoder into [`Instr`] records.
//!
//! The stream is private to the tracer (tool and decoder are always built together), so it
//! favours the tool's speed over size: fixed-width little-endian fields, no compression.
//! Native traces on disk are [`secmem_trace::NativeWriter`]'s business.
//!
//! ```text
//! header   "SMTRAW\0" u8 version = 3
//! 0x01 INSTR   u32 id                       one executed instruction
//! 0x02 LOAD    u16 size, u64 addr, value    an access of the last INSTR, in program order
//! 0x03 STORE   u16 size, u64 addr, value
//! 0x04 DEF     u32 id, u64 pc, u8 len, min(len, 32) bytes
//!                                           static instruction `id` (sent before its first
//!                                           INSTR; ids are dense from 0; one per distinct
//!                                           pc and encoding, so rewritten code gets a new id)
//! 0x05 THREAD  u32 tid                      later INSTRs ran on thread tid (0-based)
//! 0x06 EXT     u64 addr, u32 size, value    memory written by the kernel or Valgrind's core
//!                                           (system calls, signal frames), after the last INSTR
//! 0x07 END     u64 executed, u64 recorded, u8 reason (0 exit, 1 --count reached), i32 exit code
//! 0x08 EXEC    the program is about to exec (flushed first): if the stream ends right after
//!              it, the exec succeeded and the trace ends there cleanly (the new image is
//!              not traced); any later record means the exec failed and tracing goes on
//! 0x09 LOAD_NEW u16 size, u64 addr, value   a LOAD some of whose bytes the trace had not
//!                                           seen there (never, or with another value)
//! 0x0A PAGES   u32 n, n × u64 page number     pages (4 KiB) the program ran code from or
//!                                           accessed (the kernel's writes included) while --skip
//!                                           fast-forwarded, in order of first touch (n ≤ 1024),
//!                                           before the window's first INSTR
//! ```
//!
//! PAGES becomes an external record whose accesses are loads of no bytes, one per page
//! ([`Instr::set_pages`]): memory from before the trace whose contents the trace does not
//! carry, which a scheme that sets pages up on first touch sets up before the window.
//!
//! LOAD_NEW is the tool's answer to what [`crate::Consistent`] asks of each load (the tool
//! keeps what the trace has seen of memory, by the same rule as `Shadow::reconcile`): the
//! transcoder supplies exactly these loads' values and keeps no shadow of its own. The
//! record decoder ([`RawDecoder`]) reads it as a LOAD and leaves consistency to
//! `Consistent`, which reaches the same answer (the tracer's tests compare the two).
//!
//! Branch outcomes are not in the stream: a control-flow instruction is taken iff the next
//! instruction of the same thread does not start at pc + len, so each instruction is held
//! back until the next one arrives.

use std::collections::{HashMap, VecDeque};
use std::io::Read;

use secmem_trace::native::Prepared;
use secmem_trace::{Branch, Instr, OpClass, Reg, TraceError, TraceSource};

use crate::decode::{Decoded, Flow, X86Decoder};

pub const MAGIC: [u8; 8] = *b"SMTRAW\x00\x03";
pub const T_INSTR: u8 = 0x01;
pub const T_LOAD: u8 = 0x02;
pub const T_STORE: u8 = 0x03;
pub const T_DEF: u8 = 0x04;
pub const T_THREAD: u8 = 0x05;
pub const T_EXT: u8 = 0x06;
pub const T_END: u8 = 0x07;
pub const T_EXEC: u8 = 0x08;
pub const T_LOAD_NEW: u8 = 0x09;
pub const T_PAGES: u8 = 0x0A;

/// Bytes of an access record before its value (kind, size, address).
pub(crate) const ACCESS_HEAD: usize = 11;

/// What the END record says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndInfo {
    /// Instructions the program executed (skipped ones included).
    pub executed: u64,
    /// Instructions recorded (after --skip).
    pub recorded: u64,
    /// The tool ended the program because --count was reached.
    pub count_reached: bool,
    /// The program's exit code (0 when ended by --count).
    pub exit_code: i32,
    /// The stream ended at an exec: the program went on as another image, untraced.
    pub exec: bool,
}

impl EndInfo {
    /// The END record at `inp`'s position (22 bytes available).
    pub(crate) fn read<R: Read>(inp: &RawInput<R>) -> EndInfo {
        EndInfo {
            executed: inp.u64_at(1),
            recorded: inp.u64_at(9),
            count_reached: inp.u8_at(17) == 1,
            exit_code: inp.u32_at(18) as i32,
            exec: false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The buffered stream and the static-instruction table: shared by the record decoder here and
// the file transcoder (`crate::transcode`).

/// The raw stream's buffer: small enough to stay in the L2 cache with the tables the
/// decoder reads (a 1 MiB buffer decoded measurably slower), large enough that a pipe read
/// returns a lot at a time.
const BUF: usize = 256 << 10;

/// The raw stream, buffered, with the stream offset of every byte.
pub(crate) struct RawInput<R> {
    pub name: String,
    pub r: R,
    pub buf: Vec<u8>,
    pub pos: usize,
    pub end: usize,
    /// Stream offset of buf[0].
    base: u64,
    eof: bool,
    pub bytes_read: u64,
}

impl<R: Read> RawInput<R> {
    pub fn new(name: String, r: R) -> RawInput<R> {
        RawInput { name, r, buf: vec![0; BUF], pos: 0, end: 0, base: 0, eof: false, bytes_read: 0 }
    }

    pub fn corrupt(&self, at: u64, what: impl Into<String>) -> TraceError {
        TraceError::Corrupt { path: self.name.clone(), offset: at, what: what.into() }
    }

    #[inline(always)]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    #[inline(always)]
    pub fn avail(&self) -> usize {
        self.end - self.pos
    }

    /// Make `n` bytes available at `pos`; false at a clean end of stream before any of them.
    #[inline(always)]
    pub fn fill(&mut self, n: usize) -> Result<bool, TraceError> {
        if self.end - self.pos >= n {
            return Ok(true);
        }
        self.fill_slow(n, true)
    }

    /// Read until `n` bytes are available or the stream ends (then fewer, without error).
    pub fn fill_some(&mut self, n: usize) -> Result<(), TraceError> {
        if self.end - self.pos < n {
            self.fill_slow(n, false)?;
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn fill_slow(&mut self, n: usize, exact: bool) -> Result<bool, TraceError> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n.next_power_of_two(), 0);
        }
        while self.end < n && !self.eof {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => {
                    self.end += k;
                    self.bytes_read += k as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceError::Io { path: self.name.clone(), source: e }),
            }
        }
        if self.end >= n || !exact {
            Ok(self.end > 0)
        } else if self.end == 0 {
            Ok(false)
        } else {
            Err(self.corrupt(self.offset(), format!("stream truncated inside a record ({} of {} bytes)", self.end, n)))
        }
    }

    /// Check and skip the 8-byte header.
    pub fn header(&mut self) -> Result<(), TraceError> {
        if !self.fill(8)? {
            return Err(self.corrupt(0, "empty raw stream (the tracer wrote nothing)"));
        }
        if self.buf[self.pos..self.pos + 7] == MAGIC[..7] && self.buf[self.pos + 7] != MAGIC[7] {
            let v = self.buf[self.pos + 7];
            return Err(self.corrupt(0, format!("raw stream version {v}, this build reads {} (written by another build of secmem's tool)", MAGIC[7])));
        }
        if self.buf[self.pos..self.pos + 8] != MAGIC {
            return Err(self.corrupt(0, "not an smtrace raw stream (bad magic)"));
        }
        self.pos += 8;
        Ok(())
    }

    #[inline(always)]
    pub fn u8_at(&self, o: usize) -> u8 {
        self.buf[self.pos + o]
    }
    #[inline(always)]
    pub fn u16_at(&self, o: usize) -> u16 {
        u16::from_le_bytes(self.buf[self.pos + o..self.pos + o + 2].try_into().unwrap())
    }
    #[inline(always)]
    pub fn u32_at(&self, o: usize) -> u32 {
        u32::from_le_bytes(self.buf[self.pos + o..self.pos + o + 4].try_into().unwrap())
    }
    #[inline(always)]
    pub fn u64_at(&self, o: usize) -> u64 {
        u64::from_le_bytes(self.buf[self.pos + o..self.pos + o + 8].try_into().unwrap())
    }
    #[inline(always)]
    pub fn bytes(&self, o: usize, n: usize) -> &[u8] {
        &self.buf[self.pos + o..self.pos + o + n]
    }
}

/// One static instruction as the hot loops need it (compact: the table is indexed by id for
/// every executed instruction, and a cache miss here costs more than all the rest).
#[derive(Clone, Copy)]
pub(crate) struct Static {
    /// Its static part, ready for the native writer (keyed by the id).
    pub prep: Prepared,
    pub flow: Flow,
    /// Whether its CODE was handed out (or written).
    pub code_given: bool,
}

impl Static {
    /// The branch outcome of an execution followed by the instruction at `next_pc` (None:
    /// unknown, e.g. at the end or at a thread switch: conditional branches fall through).
    /// Jumps, calls and returns transfer control even when they land on pc + len (`call
    /// next; pop` reads the pc that way).
    #[inline(always)]
    pub fn outcome(&self, next_pc: Option<u64>) -> Branch {
        self.flow.outcome(next_pc.is_some_and(|n| n != self.prep.pc().wrapping_add(self.prep.len() as u64)))
    }
}

/// The instruction a DEF record defines: `len` bytes at `pc`, of which `bytes` (at most 32)
/// were sent.
pub fn decode_def(decoder: &mut X86Decoder, pc: u64, len: u8, bytes: &[u8]) -> Decoded {
    let mut dec = decoder.decode(pc, bytes);
    if len == 0 || len > 15 {
        // Valgrind's client-request preambles are one 19-byte "instruction".
        dec.op = OpClass::Alu;
        dec.flow = Flow::None;
    }
    dec
}

/// The static instructions by id, each decoded once, from its DEF record.
pub(crate) struct Statics {
    pub table: Vec<Static>,
    /// Instruction bytes by id (for CODE records).
    pub code: Vec<Vec<u8>>,
    /// The writer's key of each static part (pc, length, sources, destinations).
    keys: HashMap<(u64, u8, Vec<Reg>, Vec<Reg>), u32>,
    decoder: X86Decoder,
}

impl Statics {
    pub fn new() -> Statics {
        Statics { table: Vec::new(), code: Vec::new(), keys: HashMap::new(), decoder: X86Decoder::new() }
    }

    /// Read the DEF record at `inp`'s position (starting at `at`) and decode its instruction.
    pub fn define<R: Read>(&mut self, inp: &mut RawInput<R>, at: u64) -> Result<(), TraceError> {
        inp.fill(14)?;
        let id = inp.u32_at(1);
        let pc = inp.u64_at(5);
        let len = inp.u8_at(13);
        let nb = (len as usize).min(32);
        inp.fill(14 + nb)?;
        if id as usize != self.table.len() {
            return Err(inp.corrupt(at, format!("instruction id {id} defined out of order")));
        }
        let bytes = inp.bytes(14, nb).to_vec();
        inp.pos += 14 + nb;
        let dec = decode_def(&mut self.decoder, pc, len, &bytes);
        // The writer's key: the first id with this static part (rewritten code can repeat
        // one under a new id), as `Prepared::new` asks.
        let prep = Prepared::new(id, pc, len, dec.op, &dec.src, &dec.dst);
        let part = (pc, len, prep.srcs().to_vec(), prep.dsts().to_vec());
        let key = *self.keys.entry(part).or_insert(id);
        let prep = if key == id { prep } else { Prepared::new(key, pc, len, dec.op, &dec.src, &dec.dst) };
        self.table.push(Static { prep, flow: dec.flow, code_given: false });
        self.code.push(bytes);
        Ok(())
    }

    /// The (pc, bytes) of static instruction `id`.
    pub fn code(&self, id: u32) -> Option<(u64, &[u8])> {
        let (s, b) = (self.table.get(id as usize)?, self.code.get(id as usize)?);
        Some((s.prep.pc(), &b[..(s.prep.len() as usize).min(b.len())]))
    }
}

/// An EXT record at `inp`'s position (starting at `at`) as an external record in `e`.
pub(crate) fn read_ext<R: Read>(inp: &mut RawInput<R>, at: u64, thread: u32, e: &mut Instr) -> Result<(), TraceError> {
    inp.fill(13)?;
    let addr = inp.u64_at(1);
    let size = inp.u32_at(9) as usize;
    if size > secmem_trace::native::MAX_ACCESS_SIZE {
        return Err(inp.corrupt(at, format!("external write of {size} bytes")));
    }
    inp.fill(13 + size)?;
    e.clear();
    e.external = true;
    e.thread = thread;
    e.add_access(true, addr, inp.bytes(13, size));
    inp.pos += 13 + size;
    Ok(())
}

/// A PAGES record at `inp`'s position (starting at `at`) as the external record of
/// [`Instr::set_pages`] in `e`.
pub(crate) fn read_pages<R: Read>(inp: &mut RawInput<R>, at: u64, thread: u32, e: &mut Instr) -> Result<(), TraceError> {
    inp.fill(5)?;
    let n = inp.u32_at(1) as usize;
    if n == 0 || n > secmem_trace::native::MAX_ACCESSES {
        return Err(inp.corrupt(at, format!("a PAGES record of {n} pages")));
    }
    inp.fill(5 + 8 * n)?;
    e.clear();
    e.set_pages((0..n).map(|k| inp.u64_at(5 + 8 * k)));
    e.thread = thread;
    inp.pos += 5 + 8 * n;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Records.

/// Decodes a raw stream into records; see the module documentation.
pub struct RawDecoder<R: Read> {
    inp: RawInput<R>,
    statics: Statics,
    thread: u32,
    /// The last instruction read, waiting for the next one to settle its branch outcome.
    pending: Instr,
    pending_id: u32,
    has_pending: bool,
    /// External records that arrived after `pending` (they follow it in the output).
    after_pending: Vec<Instr>,
    /// Records ready to be handed out, in order.
    ready: VecDeque<Instr>,
    spare: Vec<Instr>,
    end_info: Option<EndInfo>,
    error: Option<String>,
    header_checked: bool,
    /// Static ids of returned instructions whose CODE was not yet taken.
    new_code: Vec<u32>,
    /// An EXEC record was the last one read.
    exec_pending: bool,
    /// INSTR records read.
    recorded: u64,
}

impl<R: Read> RawDecoder<R> {
    pub fn new(name: impl Into<String>, r: R) -> RawDecoder<R> {
        RawDecoder {
            inp: RawInput::new(name.into(), r),
            statics: Statics::new(),
            thread: 0,
            pending: Instr::default(),
            pending_id: 0,
            has_pending: false,
            after_pending: Vec::new(),
            ready: VecDeque::new(),
            spare: Vec::new(),
            end_info: None,
            error: None,
            header_checked: false,
            new_code: Vec::new(),
            exec_pending: false,
            recorded: 0,
        }
    }

    /// The stream being decoded.
    pub fn get_ref(&self) -> &R {
        &self.inp.r
    }

    /// The END record, once read.
    pub fn end_info(&self) -> Option<EndInfo> {
        self.end_info
    }

    /// Bytes of raw stream read so far.
    pub fn bytes_read(&self) -> u64 {
        self.inp.bytes_read
    }

    /// Static instructions decoded so far.
    pub fn static_count(&self) -> usize {
        self.statics.table.len()
    }

    /// The (pc, bytes) of static instructions that appeared for the first time in records
    /// returned since the last call (for the native format's CODE records).
    pub fn take_new_code(&mut self, mut f: impl FnMut(u64, &[u8])) {
        for id in self.new_code.drain(..) {
            if let Some((pc, b)) = self.statics.code(id) {
                f(pc, b);
            }
        }
    }

    fn take_spare(&mut self) -> Instr {
        let mut i = self.spare.pop().unwrap_or_default();
        i.clear();
        i
    }

    /// Settle the pending instruction's branch outcome from the pc that follows it.
    fn settle_pending(&mut self, next_pc: Option<u64>) {
        self.pending.branch = match self.statics.table.get(self.pending_id as usize) {
            Some(s) => s.outcome(next_pc),
            None => Branch::None,
        };
    }

    /// Move the pending instruction and the externals after it to the ready queue.
    fn release_pending(&mut self) {
        if self.has_pending {
            let p = std::mem::take(&mut self.pending);
            self.ready.push_back(p);
            self.has_pending = false;
        }
        for e in self.after_pending.drain(..) {
            self.ready.push_back(e);
        }
    }

    /// Read records until something is ready or the stream ends.
    /// Returns true if it put a record into `out` directly (else records are in `ready`, or
    /// the stream is over).
    fn pump(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if !self.header_checked {
            self.inp.header()?;
            self.header_checked = true;
        }
        while self.ready.is_empty() {
            if self.end_info.is_some() {
                self.settle_pending(None);
                self.release_pending();
                return Ok(false);
            }
            let at = self.inp.offset();
            if !self.inp.fill(1)? {
                self.settle_pending(None);
                self.release_pending();
                if self.exec_pending {
                    self.end_info = Some(EndInfo { executed: 0, recorded: self.recorded, count_reached: false, exit_code: 0, exec: true });
                    continue;
                }
                return Err(self.inp.corrupt(at, "the raw stream ended without an END record"));
            }
            let kind = self.inp.u8_at(0);
            self.exec_pending = kind == T_EXEC;
            match kind {
                T_EXEC => self.inp.pos += 1,
                T_INSTR => {
                    self.inp.fill(5)?;
                    let id = self.inp.u32_at(1);
                    self.inp.pos += 5;
                    self.recorded += 1;
                    let Some(st) = self.statics.table.get_mut(id as usize) else {
                        return Err(self.inp.corrupt(at, format!("instruction id {id} used before its DEF")));
                    };
                    if !st.code_given {
                        st.code_given = true;
                        self.new_code.push(id);
                    }
                    let st = *st;
                    let mut direct = false;
                    if self.has_pending {
                        self.settle_pending(Some(st.prep.pc()));
                        if self.after_pending.is_empty() && self.ready.is_empty() {
                            // The common case: hand the finished instruction out directly and
                            // reuse the caller's buffers for the new one.
                            std::mem::swap(out, &mut self.pending);
                            direct = true;
                        } else {
                            self.release_pending();
                            self.pending = self.take_spare();
                        }
                    }
                    st.prep.start(&mut self.pending, self.thread);
                    self.pending_id = id;
                    self.has_pending = true;
                    if direct {
                        return Ok(true);
                    }
                }
                t @ (T_LOAD | T_STORE | T_LOAD_NEW) => {
                    self.inp.fill(ACCESS_HEAD)?;
                    let size = self.inp.u16_at(1) as usize;
                    let addr = self.inp.u64_at(3);
                    self.inp.fill(ACCESS_HEAD + size)?;
                    if !self.has_pending || !self.after_pending.is_empty() {
                        return Err(self.inp.corrupt(at, "an access outside any instruction"));
                    }
                    self.pending.add_access(t == T_STORE, addr, self.inp.bytes(ACCESS_HEAD, size));
                    self.inp.pos += ACCESS_HEAD + size;
                }
                T_DEF => self.statics.define(&mut self.inp, at)?,
                T_THREAD => {
                    self.inp.fill(5)?;
                    let tid = self.inp.u32_at(1);
                    self.inp.pos += 5;
                    if tid != self.thread {
                        // The next instruction belongs to another thread: it says nothing
                        // about where the pending one went.
                        self.settle_pending(None);
                        self.release_pending();
                        self.thread = tid;
                    }
                }
                T_EXT | T_PAGES => {
                    let mut e = self.take_spare();
                    if kind == T_EXT {
                        read_ext(&mut self.inp, at, self.thread, &mut e)?;
                    } else {
                        read_pages(&mut self.inp, at, self.thread, &mut e)?;
                    }
                    if self.has_pending {
                        self.after_pending.push(e);
                    } else {
                        self.ready.push_back(e);
                    }
                }
                T_END => {
                    self.inp.fill(22)?;
                    self.end_info = Some(EndInfo::read(&self.inp));
                    self.inp.pos += 22;
                }
                k => return Err(self.inp.corrupt(at, format!("unknown raw record kind {k:#04x}"))),
            }
        }
        Ok(false)
    }

    /// The next record (as [`TraceSource::next_into`], which calls it).
    pub fn next_record(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.ready.is_empty() {
            if let Some(e) = &self.error {
                return Err(TraceError::Other(e.clone()));
            }
            match self.pump(out) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(e) => {
                    self.error = Some(e.to_string());
                    if self.ready.is_empty() {
                        return Err(e);
                    }
                    // Hand out what was decoded before the error first.
                }
            }
        }
        match self.ready.pop_front() {
            Some(mut r) => {
                std::mem::swap(out, &mut r);
                self.spare.push(r);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The records alone (no consistency adapter: see [`crate::Consistent`]).
impl<R: Read + Send> TraceSource for RawDecoder<R> {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        self.next_record(out)
    }
    fn name(&self) -> &str {
        &self.inp.name
    }
}
