//! The raw stream straight into a native trace file, with the consistency adapter's records:
//! what [`crate::RawDecoder`] → [`crate::Consistent`] → [`NativeWriter`] write, record for
//! record, in one pass.
//!
//! Tracing to a file spends its time here, on one core, while Valgrind runs the program on
//! the other (zstd runs on a third thread, see [`NativeWriter`]). So the per-instruction work
//! is what changes from one execution to the next and nothing else: the static part of each
//! instruction (registers, op class, branch kind) was decoded once, from its DEF record
//! ([`crate::raw`]); the writer recognises a repeated static part by its id
//! ([`NativeWriter::write_keyed`]); records are handed from stage to stage by reference, not
//! moved through queues.
//!
//! Which loads need the consistency adapter's record is the tool's to say (it marks them
//! LOAD_NEW, see [`crate::raw`]): the transcoder supplies those and keeps no shadow memory
//! (kept here, it cost this thread, the one that bounds a traced run, 4-5 ns per
//! instruction).
//!
//! The order of the output is the layered pipeline's: the CODE record of an instruction
//! comes when its first execution is read (before the record of the instruction preceding
//! it, whose branch outcome waits for it), then the supplied external record of an
//! instruction (if its loads need one), the instruction, and the system-call writes that
//! followed it.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use secmem_trace::{Access, Consistent, Instr, NativeWriter, TraceError, TraceSource};

use crate::raw::{read_ext, read_pages, EndInfo, RawDecoder, RawInput, Statics, ACCESS_HEAD, T_DEF, T_END, T_EXEC, T_EXT, T_INSTR, T_LOAD, T_LOAD_NEW, T_PAGES, T_STORE, T_THREAD};

/// What the transcoder equals, record for record, in three layers: the record decoder, the
/// consistency adapter (the Rust shadow: the tool's LOAD_NEW marks are read as plain loads)
/// and the writer's general path. The reference for tests and the `stages` example; returns
/// the bytes `Consistent` supplied.
pub fn transcode_layered<R: Read + Send>(name: &str, r: R, w: &mut NativeWriter) -> Result<u64, TraceError> {
    let mut c = Consistent::new(RawDecoder::new(name, r));
    let mut i = Instr::default();
    while c.next_into(&mut i)? {
        let mut code = Ok(());
        // As the transcoder: CODE records only for encodings x86 allows (not Valgrind's
        // 19-byte preambles).
        c.inner_mut().take_new_code(|pc, b| {
            if b.len() <= 15 && code.is_ok() {
                code = w.write_code(pc, b);
            }
        });
        code?;
        w.write(&i)?;
    }
    Ok(c.supplied_bytes())
}

/// The largest access record whose value the fast path reads in place (a 32-byte AVX store).
const FAST: usize = ACCESS_HEAD + 32;

/// What a transcoding wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instruction records (INSTR records read).
    pub instructions: u64,
    /// External records written: system-call writes plus the consistency adapter's.
    pub external_records: u64,
    /// Bytes in external records from the tracer (system calls, signal frames).
    pub syscall_bytes: u64,
    /// Bytes the consistency adapter supplied.
    pub supplied_bytes: u64,
    /// Pages the program touched while `--skip` fast-forwarded (PAGES records).
    pub skipped_pages: u64,
}

/// A transcoding seen from another thread: the instructions recorded so far (updated every
/// `Watch::EVERY`) and a request to stop (checked as often), for a progress bar and Ctrl-C.
#[derive(Debug, Default)]
pub struct Watch {
    pub instructions: AtomicU64,
    pub stop: AtomicBool,
}

impl Watch {
    /// Instructions between updates: a branch per instruction, a store per 65,536.
    pub const EVERY: u64 = 1 << 16;

    /// The `n`-th instruction was read: reported every `EVERY`, and the stop request
    /// honoured then.
    #[inline(always)]
    fn count(&self, n: u64) -> Result<(), Failure> {
        if n.is_multiple_of(Watch::EVERY) && self.stopped(n) {
            return Err(Failure::Stopped);
        }
        Ok(())
    }

    /// Report `n` instructions read; whether a stop was asked for. Out of line: it runs once
    /// per `EVERY`, and inline it made the transcoder's hot loop slower.
    #[cold]
    #[inline(never)]
    fn stopped(&self, n: u64) -> bool {
        self.instructions.store(n, Ordering::Relaxed);
        self.stop.load(Ordering::Relaxed)
    }
}

/// Why a transcoding stopped.
#[derive(Debug)]
pub enum Failure {
    /// The raw stream was damaged or could not be read.
    Stream(TraceError),
    /// The output could not be written.
    Write(TraceError),
    /// `Watch::stop` was set.
    Stopped,
}

/// Stream errors (`?` on the input) are the default.
impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Failure {
        Failure::Stream(e)
    }
}

/// Transcodes a raw stream into a [`NativeWriter`]; see the module documentation.
pub struct Transcoder<R: Read> {
    inp: RawInput<R>,
    statics: Statics,
    thread: u32,
    /// The last instruction read (its static id, accesses and their values), waiting for the
    /// next one to settle its branch outcome.
    pending_id: u32,
    accesses: Vec<Access>,
    data: Vec<u8>,
    /// Which of `accesses` are loads the tool marked new to the trace (LOAD_NEW).
    fresh: Vec<u32>,
    has_pending: bool,
    /// External records that arrived after `pending`: `after[..n_after]`.
    after: Vec<Instr>,
    n_after: usize,
    /// The consistency adapter's record for the instruction being written.
    supply: Instr,
    counts: Counts,
    end_info: Option<EndInfo>,
}

impl<R: Read> Transcoder<R> {
    pub fn new(name: impl Into<String>, r: R) -> Transcoder<R> {
        Transcoder {
            inp: RawInput::new(name.into(), r),
            statics: Statics::new(),
            thread: 0,
            pending_id: 0,
            accesses: Vec::new(),
            data: Vec::new(),
            fresh: Vec::new(),
            has_pending: false,
            after: Vec::new(),
            n_after: 0,
            supply: Instr::default(),
            counts: Counts::default(),
            end_info: None,
        }
    }

    /// What was written so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Bytes of raw stream read so far.
    pub fn bytes_read(&self) -> u64 {
        self.inp.bytes_read
    }

    /// Static instructions decoded so far.
    pub fn static_count(&self) -> usize {
        self.statics.table.len()
    }

    /// The stream being read.
    pub fn get_ref(&self) -> &R {
        &self.inp.r
    }

    /// An external record into the file.
    fn emit_external(counts: &mut Counts, w: &mut NativeWriter, e: &Instr) -> Result<(), Failure> {
        counts.external_records += 1;
        counts.syscall_bytes += e.data.len() as u64;
        w.write(e).map_err(Failure::Write)
    }

    /// Write the pending instruction, its branch settled by `next_pc` (after the external
    /// record its loads need, for consistency), then the externals that followed it.
    #[inline(always)]
    fn release(&mut self, next_pc: Option<u64>, w: &mut NativeWriter) -> Result<(), Failure> {
        if self.has_pending {
            self.has_pending = false;
            let st = &self.statics.table[self.pending_id as usize];
            if !self.fresh.is_empty() {
                Self::supply(&mut self.fresh, &mut self.supply, &mut self.counts, self.thread, &self.accesses, &self.data, w)?;
            }
            w.write_exec(&st.prep, st.outcome(next_pc), self.thread, &self.accesses, &self.data).map_err(Failure::Write)?;
        }
        if self.n_after > 0 {
            self.release_after(w)?;
        }
        Ok(())
    }

    /// One more INSTR record read: reported to `watch` (and its stop request honoured) every
    /// `Watch::EVERY`.
    #[inline(always)]
    fn count_instruction(&mut self, watch: &Watch) -> Result<(), Failure> {
        self.counts.instructions += 1;
        watch.count(self.counts.instructions)
    }

    #[cold]
    fn release_after(&mut self, w: &mut NativeWriter) -> Result<(), Failure> {
        for e in &self.after[..self.n_after] {
            Self::emit_external(&mut self.counts, w, e)?;
        }
        self.n_after = 0;
        Ok(())
    }

    /// The hot loop: INSTR records of instructions seen before and accesses of up to 32
    /// bytes, while the buffer holds such a record in full (no refills, no per-field checks,
    /// no jump table). Anything else — a first execution, a DEF, EXT, THREAD, END or EXEC
    /// record, a wide access, a damaged record, externals waiting to be written — is left to
    /// `run_watched`'s general step, which also reports errors. Returns whether
    /// it consumed any record. The state it changes on every record lives in locals while it runs (in
    /// `self` the compiler stores and reloads it around every call into the writer).
    #[inline(always)]
    fn fast(&mut self, w: &mut NativeWriter, watch: &Watch) -> Result<bool, Failure> {
        if self.n_after > 0 {
            return Ok(false);
        }
        let Transcoder { inp, statics, thread, pending_id, accesses, data, fresh, has_pending, supply, counts, .. } = self;
        let buf = &inp.buf[..inp.end];
        let table = &statics.table[..];
        let thread = *thread;
        let start = inp.pos;
        let (mut pos, mut pend, mut has, mut n) = (start, *pending_id as usize, *has_pending, counts.instructions);
        let res = loop {
            let Some(rec) = buf.get(pos..pos + FAST) else { break Ok(()) };
            let kind = rec[0];
            // Fields of either record kind, read before knowing which (all within FAST).
            let id = u32::from_le_bytes(rec[1..5].try_into().unwrap()) as usize;
            let size = u16::from_le_bytes(rec[1..3].try_into().unwrap()) as usize;
            let addr = u64::from_le_bytes(rec[3..11].try_into().unwrap());
            let value = u64::from_le_bytes(rec[11..19].try_into().unwrap());
            if kind == T_INSTR {
                let Some(st) = table.get(id) else { break Ok(()) };
                if !st.code_given {
                    break Ok(());
                }
                pos += 5;
                n += 1;
                if let Err(e) = watch.count(n) {
                    break Err(e);
                }
                if has {
                    let p = &table[pend];
                    if !fresh.is_empty() {
                        if let Err(e) = Self::supply(fresh, supply, counts, thread, accesses, data, w) {
                            break Err(e);
                        }
                    }
                    if let Err(e) = w.write_exec(&p.prep, p.outcome(Some(st.prep.pc())), thread, accesses, data) {
                        break Err(Failure::Write(e));
                    }
                }
                accesses.clear();
                data.clear();
                pend = id;
                has = true;
            } else if kind == T_LOAD || kind == T_STORE || kind == T_LOAD_NEW {
                if size > FAST - ACCESS_HEAD || !has {
                    break Ok(());
                }
                if kind == T_LOAD_NEW {
                    fresh.push(accesses.len() as u32);
                }
                let off = data.len();
                if size <= 8 {
                    // The value in a whole word (its bytes past `size` belong to the next
                    // record): the writer handles a value with 8 bytes from its
                    // offset on as a masked word.
                    data.extend_from_slice(&value.to_le_bytes());
                } else {
                    data.extend_from_slice(&rec[ACCESS_HEAD..ACCESS_HEAD + size]);
                }
                accesses.push(Access { store: kind == T_STORE, addr, size: size as u32, off: off as u32 });
                pos += ACCESS_HEAD + size;
            } else {
                break Ok(());
            }
        };
        inp.pos = pos;
        *pending_id = pend as u32;
        *has_pending = has;
        counts.instructions = n;
        res.map(|()| pos != start)
    }

    /// The consistency adapter's record for the pending instruction's new loads (`fresh`,
    /// not empty), written before it: each loaded value stored, in program order. Clears
    /// `fresh`; `s` is kept clear between uses.
    #[cold]
    #[inline(never)]
    fn supply(fresh: &mut Vec<u32>, s: &mut Instr, counts: &mut Counts, thread: u32, accesses: &[Access], data: &[u8], w: &mut NativeWriter) -> Result<(), Failure> {
        for &k in fresh.iter() {
            let a = &accesses[k as usize];
            s.add_access(true, a.addr, &data[a.off as usize..(a.off + a.size) as usize]);
            counts.supplied_bytes += a.size as u64;
        }
        fresh.clear();
        s.external = true;
        s.thread = thread;
        w.write(s).map_err(Failure::Write)?;
        s.clear();
        counts.external_records += 1;
        Ok(())
    }

    /// Transcode the whole stream into `w` (which the caller finishes); returns the END
    /// record. Errors name the stream and the offset of the bad record.
    pub fn run(&mut self, w: &mut NativeWriter) -> Result<EndInfo, Failure> {
        self.run_watched(w, &Watch::default())
    }

    /// [`Transcoder::run`], reporting to and stoppable through `watch`.
    pub fn run_watched(&mut self, w: &mut NativeWriter, watch: &Watch) -> Result<EndInfo, Failure> {
        self.inp.header()?;
        let mut exec_pending = false;
        loop {
            if self.fast(w, watch)? {
                exec_pending = false;
            }
            if let Some(end) = self.end_info {
                self.release(None, w)?;
                return Ok(end);
            }
            // Enough bytes for any INSTR or scalar access record, so most records are
            // parsed without further checks.
            self.inp.fill_some(FAST)?;
            let at = self.inp.offset();
            if self.inp.avail() == 0 {
                self.release(None, w)?;
                if exec_pending {
                    return Ok(EndInfo { executed: 0, recorded: self.counts.instructions, count_reached: false, exit_code: 0, exec: true });
                }
                return Err(self.inp.corrupt(at, "the raw stream ended without an END record").into());
            }
            let kind = self.inp.u8_at(0);
            exec_pending = kind == T_EXEC;
            match kind {
                T_INSTR => {
                    self.inp.fill(5)?;
                    let id = self.inp.u32_at(1);
                    self.inp.pos += 5;
                    self.count_instruction(watch)?;
                    let Some(st) = self.statics.table.get_mut(id as usize) else {
                        return Err(self.inp.corrupt(at, format!("instruction id {id} used before its DEF")).into());
                    };
                    let pc = st.prep.pc();
                    if !st.code_given {
                        st.code_given = true;
                        if let Some((pc, b)) = self.statics.code(id).filter(|(_, b)| b.len() <= 15) {
                            w.write_code(pc, b).map_err(Failure::Write)?;
                        }
                    }
                    self.release(Some(pc), w)?;
                    self.accesses.clear();
                    self.data.clear();
                    self.pending_id = id;
                    self.has_pending = true;
                }
                t @ (T_LOAD | T_STORE | T_LOAD_NEW) => {
                    self.inp.fill(ACCESS_HEAD)?;
                    let size = self.inp.u16_at(1) as usize;
                    let addr = self.inp.u64_at(3);
                    self.inp.fill(ACCESS_HEAD + size)?;
                    if !self.has_pending || self.n_after > 0 {
                        return Err(self.inp.corrupt(at, "an access outside any instruction").into());
                    }
                    let off = self.data.len();
                    if size <= 8 && self.inp.avail() >= ACCESS_HEAD + 8 {
                        // One fixed-size copy (a variable-length one is a library call).
                        self.data.extend_from_slice(&self.inp.u64_at(ACCESS_HEAD).to_le_bytes());
                        self.data.truncate(off + size);
                    } else {
                        self.data.extend_from_slice(self.inp.bytes(ACCESS_HEAD, size));
                    }
                    if t == T_LOAD_NEW {
                        self.fresh.push(self.accesses.len() as u32);
                    }
                    self.accesses.push(Access { store: t == T_STORE, addr, size: size as u32, off: off as u32 });
                    self.inp.pos += ACCESS_HEAD + size;
                }
                T_EXEC => self.inp.pos += 1,
                T_DEF => self.statics.define(&mut self.inp, at)?,
                T_THREAD => {
                    self.inp.fill(5)?;
                    let tid = self.inp.u32_at(1);
                    self.inp.pos += 5;
                    if tid != self.thread {
                        // The next instruction belongs to another thread: it says nothing
                        // about where the pending one went.
                        self.release(None, w)?;
                        self.thread = tid;
                    }
                }
                T_EXT => {
                    if self.has_pending {
                        if self.after.len() == self.n_after {
                            self.after.push(Instr::default());
                        }
                        read_ext(&mut self.inp, at, self.thread, &mut self.after[self.n_after])?;
                        self.n_after += 1;
                    } else {
                        read_ext(&mut self.inp, at, self.thread, &mut self.supply)?;
                        Self::emit_external(&mut self.counts, w, &self.supply)?;
                        self.supply.clear();
                    }
                }
                T_PAGES => {
                    // The tool sends them before the window's first instruction.
                    if self.has_pending {
                        return Err(self.inp.corrupt(at, "a PAGES record after the first instruction").into());
                    }
                    read_pages(&mut self.inp, at, self.thread, &mut self.supply)?;
                    self.counts.skipped_pages += self.supply.accesses.len() as u64;
                    w.write(&self.supply).map_err(Failure::Write)?;
                    self.supply.clear();
                }
                T_END => {
                    self.inp.fill(22)?;
                    let end = EndInfo::read(&self.inp);
                    self.inp.pos += 22;
                    self.end_info = Some(end);
                }
                k => return Err(self.inp.corrupt(at, format!("unknown raw record kind {k:#04x}")).into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::MAGIC;
    use secmem_trace::consistent::Shadow;
    use std::io::Cursor;

    /// A raw stream written by hand, record by record, its loads marked LOAD_NEW as the tool
    /// marks them (by the Rust shadow's rule, which the tool follows).
    struct Raw(Vec<u8>, Shadow);

    impl Raw {
        fn new() -> Raw {
            Raw(MAGIC.to_vec(), Shadow::default())
        }
        fn def(&mut self, id: u32, pc: u64, bytes: &[u8]) {
            self.0.push(T_DEF);
            self.0.extend_from_slice(&id.to_le_bytes());
            self.0.extend_from_slice(&pc.to_le_bytes());
            self.0.push(bytes.len() as u8);
            self.0.extend_from_slice(bytes);
        }
        fn instr(&mut self, id: u32) {
            self.0.push(T_INSTR);
            self.0.extend_from_slice(&id.to_le_bytes());
        }
        fn access(&mut self, store: bool, addr: u64, v: &[u8]) {
            let new = !store && !self.1.matches(addr, v);
            if store || new {
                self.1.store(addr, v);
            }
            self.0.push(if store { T_STORE } else if new { T_LOAD_NEW } else { T_LOAD });
            self.0.extend_from_slice(&(v.len() as u16).to_le_bytes());
            self.0.extend_from_slice(&addr.to_le_bytes());
            self.0.extend_from_slice(v);
        }
        fn ext(&mut self, addr: u64, v: &[u8]) {
            self.1.store(addr, v);
            self.0.push(T_EXT);
            self.0.extend_from_slice(&addr.to_le_bytes());
            self.0.extend_from_slice(&(v.len() as u32).to_le_bytes());
            self.0.extend_from_slice(v);
        }
        fn thread(&mut self, tid: u32) {
            self.0.push(T_THREAD);
            self.0.extend_from_slice(&tid.to_le_bytes());
        }
        fn end(&mut self, n: u64) {
            self.0.push(T_END);
            self.0.extend_from_slice(&n.to_le_bytes());
            self.0.extend_from_slice(&n.to_le_bytes());
            self.0.extend_from_slice(&[0, 0, 0, 0, 0]);
        }
    }

    /// A loop that loads, adds, stores and branches back; a system call whose buffer comes
    /// back as external writes; a thread switch; a 16-byte and a five-access instruction;
    /// memory changed behind the program's back.
    fn program() -> Raw {
        let mut r = Raw::new();
        r.ext(0x9000, &[7; 24]); // before any instruction
        r.def(0, 0x1000, &[0x48, 0x8b, 0x07]); // mov rax, [rdi]
        r.def(1, 0x1003, &[0x48, 0x83, 0xc0, 0x01]); // add rax, 1
        r.def(2, 0x1007, &[0x48, 0x89, 0x06]); // mov [rsi], rax
        r.def(3, 0x100a, &[0x75, 0xf4]); // jne 0x1000
        r.def(4, 0x100c, &[0x0f, 0x05]); // syscall
        r.def(5, 0x100e, &[0xf3, 0x0f, 0x6f, 0x07]); // movdqu xmm0, [rdi]
        r.def(6, 0x1012, &[0xf3, 0xa4]); // rep movsb (five accesses below)
        r.def(7, 0x1014, &[0xe9, 0x00, 0x10, 0x00, 0x00]); // jmp far ahead
        r.def(8, 0x2019, &[0xc3]); // ret
        r.def(9, 0x1003, &[0x48, 0x83, 0xc0, 0x02]); // add rax, 2: id 1 rewritten, same static part
        let mut n = 0;
        for i in 0..300u64 {
            let a = 0x8000 + 8 * (i % 40);
            r.instr(0);
            r.access(false, a, &(i / 40).to_le_bytes());
            r.instr(if i % 7 == 3 { 9 } else { 1 });
            r.instr(2);
            r.access(true, a, &(i / 40 + 1).to_le_bytes());
            r.instr(3);
            n += 4;
            if i % 97 == 50 {
                r.instr(4);
                r.ext(0x9000 + i, &[i as u8; 3]);
                r.ext(0xa000, &[1, 2]);
                r.thread((i % 2) as u32);
                r.instr(5);
                r.access(false, 0x9000, &[7; 16]);
                r.instr(6);
                for k in 0..5 {
                    r.access(k % 2 == 1, 0xb000 + k, &[k as u8]);
                }
                r.instr(7);
                r.instr(8);
                r.access(false, 0x7ff0, &0x1000u64.to_le_bytes());
                n += 5;
            }
        }
        // New loads whose instructions are released by the next instruction with externals
        // waiting, by a thread switch and by the end of the stream.
        r.instr(0);
        r.access(false, 0xc000, &[1; 8]);
        r.ext(0xc100, &[2; 4]);
        r.instr(0);
        r.access(false, 0xc008, &[3; 8]);
        r.thread(1);
        r.instr(0);
        r.access(false, 0xc010, &[4; 8]);
        n += 3;
        r.end(n);
        r
    }

    /// The layered pipeline: decoder, consistency adapter, writer; the record stream.
    fn layered(raw: &[u8], path: &std::path::Path) -> Vec<u8> {
        let mut w = NativeWriter::create(path).unwrap();
        transcode_layered("raw", Cursor::new(raw.to_vec()), &mut w).unwrap();
        w.finish().unwrap();
        zstd::decode_all(&std::fs::read(path).unwrap()[16..]).unwrap()
    }

    fn transcoded(raw: &[u8], path: &std::path::Path) -> (Vec<u8>, Counts) {
        let mut w = NativeWriter::create(path).unwrap();
        let mut t = Transcoder::new("raw", Cursor::new(raw.to_vec()));
        t.run(&mut w).unwrap();
        w.finish().unwrap();
        (zstd::decode_all(&std::fs::read(path).unwrap()[16..]).unwrap(), t.counts())
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("secmem-transcode-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    #[test]
    fn transcoding_writes_the_layered_pipelines_bytes() {
        let raw = program().0;
        let want = layered(&raw, &tmp("layered.smt"));
        let (got, counts) = transcoded(&raw, &tmp("fused.smt"));
        assert!(want == got, "record streams differ ({} and {} bytes)", want.len(), got.len());
        // The stream exercised what it should: supplied loads, system-call writes, records.
        assert_eq!(counts.instructions, 300 * 4 + 3 * 5 + 3);
        assert!(counts.supplied_bytes > 24 && counts.syscall_bytes == 24 + 3 * (3 + 2) + 4, "{counts:?}");
        let mut r = secmem_trace::open_trace(tmp("fused.smt").to_str().unwrap()).unwrap();
        let (mut i, mut threads, mut taken) = (Instr::default(), 0, 0);
        while r.next_into(&mut i).unwrap() {
            threads |= 1 << i.thread;
            taken += (i.branch == secmem_trace::Branch::Taken) as u32;
        }
        assert_eq!(threads, 3, "both threads are in the file");
        assert!(taken > 250, "the loop's branch and the jumps are taken: {taken}");
    }

    #[test]
    fn a_stop_request_ends_the_run_at_the_next_report() {
        // More instructions than one report's worth, all on the fast path after the first
        // round, so the request is seen there.
        let mut r = Raw::new();
        r.def(0, 0x1000, &[0x48, 0x8b, 0x07]);
        r.def(1, 0x1003, &[0x75, 0xfb]);
        let n = 3 * Watch::EVERY;
        for i in 0..n / 2 {
            r.instr(0);
            r.access(false, 0x8000 + 8 * (i % 64), &i.to_le_bytes());
            r.instr(1);
        }
        r.end(n);
        let watch = Watch::default();
        watch.stop.store(true, Ordering::Relaxed);
        let mut w = NativeWriter::create(tmp("stopped.smt")).unwrap();
        let mut t = Transcoder::new("raw", Cursor::new(r.0));
        assert!(matches!(t.run_watched(&mut w, &watch), Err(Failure::Stopped)));
        // The instruction that reached the report is counted, and none after it.
        assert_eq!(t.counts().instructions, Watch::EVERY);
        assert_eq!(watch.instructions.load(Ordering::Relaxed), Watch::EVERY);
    }

    #[test]
    fn a_stream_of_another_version_is_refused_in_one_line() {
        let mut raw = program().0;
        raw[7] = 2;
        let mut w = NativeWriter::create(tmp("v2.smt")).unwrap();
        let e = match Transcoder::new("raw", Cursor::new(raw)).run(&mut w) {
            Err(Failure::Stream(e)) => e.to_string(),
            r => panic!("{r:?}"),
        };
        assert!(e.contains("raw stream version 2, this build reads 3") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_damaged_stream_fails_where_the_decoder_does() {
        let raw = program().0;
        for cut in [0, 5, 9, 40, raw.len() / 2, raw.len() - 1] {
            let mut w = NativeWriter::create(tmp("cut.smt")).unwrap();
            let e = match Transcoder::new("raw", Cursor::new(raw[..cut].to_vec())).run(&mut w) {
                Err(Failure::Stream(e)) => e.to_string(),
                r => panic!("cut at {cut}: {r:?}"),
            };
            let mut d = RawDecoder::new("raw", Cursor::new(raw[..cut].to_vec()));
            let mut i = Instr::default();
            let want = loop {
                match d.next_record(&mut i) {
                    Ok(true) => {}
                    Ok(false) => panic!("the decoder accepted a cut stream"),
                    Err(e) => break e.to_string(),
                }
            };
            assert_eq!(e, want, "cut at {cut}");
        }
    }
}
