//! The native trace format, version 1: a 16-byte header, then a zstd-compressed stream of
//! records ending in an explicit end marker. Byte-level layout: `docs/trace-format.md`.
//!
//! Written and read record by record (nothing is held in memory but a buffer), so traces of
//! billions of instructions stream. Every way a file can be damaged ends in an error that
//! names the file and the offset — never a panic, never a loop: truncation is caught by the
//! zstd frame and the end marker, flipped bytes by zstd's checksum, the record syntax and
//! the end marker's record count.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::Path;

use crate::record::{Access, Branch, Instr, OpClass, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// First 8 bytes of every native trace (PNG-style: catches 7-bit and newline mangling).
pub const MAGIC: [u8; 8] = *b"\x89SMTR\r\n\x1a";
/// The format version this code writes and reads.
pub const VERSION: u16 = 1;
/// Header size; the record stream starts at this offset.
pub const HEADER_LEN: u64 = 16;
/// Header flag: the record stream is one zstd frame (else it is stored raw).
pub const FLAG_ZSTD: u16 = 1;

/// Record kinds (the first byte of each record).
pub const KIND_INSTR: u8 = 0x01;
/// Kinds 0x80..=0xFE carry a varint payload length: readers skip the ones they don't know.
pub const KIND_SKIPPABLE_FIRST: u8 = 0x80;
pub const KIND_END: u8 = 0xFF;

// INSTR header byte.
const H_OP: u8 = 0x07;
const H_BRANCH_SHIFT: u8 = 3;
const H_PC_SEQ: u8 = 0x20;
const H_EXTERNAL: u8 = 0x40;
const H_RESERVED: u8 = 0x80;
// Access flags byte.
const A_STORE: u8 = 0x01;

/// Limits that bound what a (possibly corrupt) record can make a reader allocate.
pub const MAX_ACCESSES: usize = 4096;
pub const MAX_ACCESS_SIZE: usize = 1 << 20;
pub const MAX_RECORD_DATA: usize = 16 << 20;

/// Slots of the address-prediction table (see `slot`).
const SLOTS: usize = 1024;

/// Access addresses are coded as deltas from the last address in the same slot, so a
/// static load walking an array costs a one-byte delta whatever else runs in between.
#[inline(always)]
fn slot(pc: u64, k: usize) -> usize {
    ((pc ^ (pc >> 10) ^ (pc >> 20)) as usize).wrapping_add(k) & (SLOTS - 1)
}

#[inline(always)]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[inline(always)]
fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

// ---------------------------------------------------------------------------------------------
// Writer.

/// Writes a native trace file. Call [`NativeWriter::finish`]: without it the file has no
/// end marker and readers report it as truncated.
pub struct NativeWriter {
    path: String,
    enc: Option<zstd::stream::write::Encoder<'static, BufWriter<File>>>,
    buf: Vec<u8>,
    prev_end: u64,
    slots: Box<[u64; SLOTS]>,
    count: u64,
}

impl NativeWriter {
    /// Create (truncate) `path` and write the header; zstd level 3.
    pub fn create(path: impl AsRef<Path>) -> Result<NativeWriter, TraceError> {
        NativeWriter::with_level(path, 3)
    }

    /// As [`NativeWriter::create`] with a zstd compression level (1..=22).
    pub fn with_level(path: impl AsRef<Path>, level: i32) -> Result<NativeWriter, TraceError> {
        let p = path.as_ref();
        let name = p.display().to_string();
        let io = |source| TraceError::Io { path: name.clone(), source };
        let mut f = BufWriter::with_capacity(1 << 16, File::create(p).map_err(io)?);
        let mut header = [0u8; HEADER_LEN as usize];
        header[..8].copy_from_slice(&MAGIC);
        header[8..10].copy_from_slice(&VERSION.to_le_bytes());
        header[10..12].copy_from_slice(&FLAG_ZSTD.to_le_bytes());
        f.write_all(&header).map_err(io)?;
        let mut enc = zstd::stream::write::Encoder::new(f, level).map_err(io)?;
        enc.include_checksum(true).map_err(io)?;
        Ok(NativeWriter {
            path: name,
            enc: Some(enc),
            buf: Vec::with_capacity(1 << 17),
            prev_end: 0,
            slots: Box::new([0; SLOTS]),
            count: 0,
        })
    }

    fn io(&self, source: std::io::Error) -> TraceError {
        TraceError::Io { path: self.path.clone(), source }
    }

    fn invalid(&self, what: String) -> TraceError {
        TraceError::Other(format!("{}: record {}: {what}", self.path, self.count))
    }

    /// Append one record.
    pub fn write(&mut self, r: &Instr) -> Result<(), TraceError> {
        if r.nsrc as usize > MAX_SRC || r.ndst as usize > MAX_DST {
            return Err(self.invalid(format!("{} sources / {} destinations", r.nsrc, r.ndst)));
        }
        if r.accesses.len() > MAX_ACCESSES {
            return Err(self.invalid(format!("{} accesses (at most {MAX_ACCESSES})", r.accesses.len())));
        }
        let mut total = 0usize;
        for a in &r.accesses {
            let end = a.off as usize + a.size as usize;
            total += a.size as usize;
            if end > r.data.len() || a.size as usize > MAX_ACCESS_SIZE || total > MAX_RECORD_DATA {
                return Err(self.invalid(format!("access of {} bytes at data offset {}", a.size, a.off)));
            }
        }
        let b = &mut self.buf;
        b.push(KIND_INSTR);
        let seq = r.pc == self.prev_end;
        b.push(
            r.op as u8
                | (r.branch as u8) << H_BRANCH_SHIFT
                | if seq { H_PC_SEQ } else { 0 }
                | if r.external { H_EXTERNAL } else { 0 },
        );
        b.push(r.len);
        if !seq {
            put_varint(b, zigzag(r.pc.wrapping_sub(self.prev_end) as i64));
        }
        b.push(r.nsrc << 4 | r.ndst);
        b.extend_from_slice(r.srcs());
        b.extend_from_slice(r.dsts());
        put_varint(b, r.accesses.len() as u64);
        for (k, a) in r.accesses.iter().enumerate() {
            b.push(if a.store { A_STORE } else { 0 });
            put_varint(b, a.size as u64);
            let s = &mut self.slots[slot(r.pc, k)];
            put_varint(b, zigzag(a.addr.wrapping_sub(*s) as i64));
            *s = a.addr;
            b.extend_from_slice(r.value(a));
        }
        self.prev_end = r.pc.wrapping_add(r.len as u64);
        self.count += 1;
        if self.buf.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        let enc = self.enc.as_mut().expect("writer used after finish");
        let r = enc.write_all(&self.buf);
        self.buf.clear();
        r.map_err(|e| self.io(e))
    }

    /// Write the end marker, close the zstd frame and the file; returns the record count.
    pub fn finish(mut self) -> Result<u64, TraceError> {
        self.buf.push(KIND_END);
        put_varint(&mut self.buf, self.count);
        self.flush_buf()?;
        let enc = self.enc.take().expect("writer used after finish");
        let f = enc.finish().map_err(|e| self.io(e))?;
        let file = f.into_inner().map_err(|e| self.io(e.into_error()))?;
        file.sync_all().ok();
        Ok(self.count)
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

// ---------------------------------------------------------------------------------------------
// Reader.

/// Reads a native trace file record by record.
pub struct NativeReader {
    path: String,
    name: String,
    src: Box<dyn Read + Send>,
    compressed: bool,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Stream offset of `buf[0]` (the header counts: the first record is at offset 16).
    base: u64,
    eof: bool,
    prev_end: u64,
    slots: Box<[u64; SLOTS]>,
    count: u64,
    done: bool,
    /// The first error, repeated by every later call.
    failed: Option<(u64, String)>,
}

type Res<T> = Result<T, (u64, String)>;

/// Reads exactly one header from `f`, returning whether the stream is zstd-compressed.
fn read_header(path: &str, f: &mut impl Read) -> Result<bool, TraceError> {
    let mut h = [0u8; HEADER_LEN as usize];
    let mut n = 0;
    while n < h.len() {
        match f.read(&mut h[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(source) => return Err(TraceError::Io { path: path.to_string(), source }),
        }
    }
    if n < MAGIC.len() || h[..8] != MAGIC {
        return Err(TraceError::Other(format!(
            "{path}: not a secmem trace ({}); expected a secmem native trace (see docs/trace-format.md)",
            describe_foreign(&h[..n])
        )));
    }
    let corrupt = |offset: u64, what: &str| TraceError::Corrupt { path: path.to_string(), offset, what: what.into() };
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
        let f = File::open(p).map_err(|source| TraceError::Io { path: path.clone(), source })?;
        let mut f = BufReader::with_capacity(1 << 16, f);
        let compressed = read_header(&path, &mut f)?;
        let src: Box<dyn Read + Send> = if compressed {
            let d = zstd::stream::read::Decoder::with_buffer(f)
                .map_err(|source| TraceError::Io { path: path.clone(), source })?;
            Box::new(d)
        } else {
            Box::new(f)
        };
        let name = p.file_name().map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        Ok(NativeReader {
            path,
            name,
            src,
            compressed,
            buf: vec![0; 1 << 18].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: HEADER_LEN,
            eof: false,
            prev_end: 0,
            slots: Box::new([0; SLOTS]),
            count: 0,
            done: false,
            failed: None,
        })
    }

    /// Records read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    #[inline(always)]
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Refill the (fully consumed) buffer; false at the end of the stream.
    fn refill(&mut self) -> Res<bool> {
        debug_assert_eq!(self.pos, self.end);
        if self.eof {
            return Ok(false);
        }
        self.base += self.end as u64;
        self.pos = 0;
        self.end = 0;
        loop {
            match self.src.read(&mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    return Err((self.offset(), "truncated: the compressed stream ends early".into()))
                }
                Err(e) => {
                    let what = if self.compressed { "cannot decompress" } else { "read error" };
                    return Err((self.offset(), format!("{what}: {e}")));
                }
            }
        }
    }

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

    #[cold]
    fn byte_slow(&mut self) -> Res<u8> {
        if !self.refill()? {
            return Err((self.offset(), "truncated: the record stream ends without its end marker".into()));
        }
        self.byte()
    }

    fn varint(&mut self) -> Res<u64> {
        let at = self.offset();
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                break;
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err((at, "varint longer than 64 bits".into()))
    }

    /// Append `n` bytes of the stream to `out`.
    fn bytes_into(&mut self, mut n: usize, out: &mut Vec<u8>) -> Res<()> {
        while n > 0 {
            if self.pos == self.end && !self.refill()? {
                return Err((self.offset(), "truncated: the record stream ends inside a record".into()));
            }
            let k = n.min(self.end - self.pos);
            out.extend_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            n -= k;
        }
        Ok(())
    }

    fn skip(&mut self, mut n: u64) -> Res<()> {
        while n > 0 {
            if self.pos == self.end && !self.refill()? {
                return Err((self.offset(), "truncated: the record stream ends inside a record".into()));
            }
            let k = n.min((self.end - self.pos) as u64);
            self.pos += k as usize;
            n -= k;
        }
        Ok(())
    }

    fn instr(&mut self, out: &mut Instr) -> Res<()> {
        out.clear();
        let at = self.offset();
        let h = self.byte()?;
        if h & H_RESERVED != 0 {
            return Err((at, format!("reserved bit set in instruction header {h:#04x}")));
        }
        out.op = OpClass::from_u8(h & H_OP).expect("3-bit op class");
        out.branch = match (h >> H_BRANCH_SHIFT) & 3 {
            0 => Branch::None,
            1 => Branch::NotTaken,
            2 => Branch::Taken,
            _ => return Err((at, "invalid branch outcome 3".into())),
        };
        out.external = h & H_EXTERNAL != 0;
        out.len = self.byte()?;
        out.pc = if h & H_PC_SEQ != 0 {
            self.prev_end
        } else {
            self.prev_end.wrapping_add(unzigzag(self.varint()?) as u64)
        };
        let at = self.offset();
        let regs = self.byte()?;
        let (ns, nd) = ((regs >> 4) as usize, (regs & 15) as usize);
        if ns > MAX_SRC || nd > MAX_DST {
            return Err((at, format!("{ns} source / {nd} destination registers")));
        }
        out.src = [0; MAX_SRC];
        out.dst = [0; MAX_DST];
        for i in 0..ns {
            out.src[i] = self.byte()?;
        }
        for i in 0..nd {
            out.dst[i] = self.byte()?;
        }
        out.nsrc = ns as u8;
        out.ndst = nd as u8;
        let at = self.offset();
        let n = self.varint()?;
        if n > MAX_ACCESSES as u64 {
            return Err((at, format!("{n} accesses in one record (at most {MAX_ACCESSES})")));
        }
        for k in 0..n as usize {
            let at = self.offset();
            let f = self.byte()?;
            if f & !A_STORE != 0 {
                return Err((at, format!("reserved bits in access flags {f:#04x}")));
            }
            let size = self.varint()?;
            if size > MAX_ACCESS_SIZE as u64 || out.data.len() + size as usize > MAX_RECORD_DATA {
                return Err((at, format!("access of {size} bytes exceeds the format's limits")));
            }
            let s = slot(out.pc, k);
            let addr = self.slots[s].wrapping_add(unzigzag(self.varint()?) as u64);
            self.slots[s] = addr;
            let off = out.data.len() as u32;
            self.bytes_into(size as usize, &mut out.data)?;
            out.accesses.push(Access { store: f & A_STORE != 0, addr, size: size as u32, off });
        }
        self.prev_end = out.pc.wrapping_add(out.len as u64);
        Ok(())
    }

    fn end_marker(&mut self) -> Res<()> {
        let at = self.offset();
        let n = self.varint()?;
        if n != self.count {
            return Err((at, format!("end marker counts {n} records but {} were read", self.count)));
        }
        // Nothing may follow; reading to the end also makes zstd verify its checksum.
        if self.pos < self.end || self.refill()? {
            return Err((self.offset(), "data after the end marker".into()));
        }
        Ok(())
    }

    fn next_record(&mut self, out: &mut Instr) -> Res<bool> {
        loop {
            let at = self.offset();
            let kind = self.byte()?;
            match kind {
                KIND_INSTR => {
                    self.instr(out)?;
                    self.count += 1;
                    return Ok(true);
                }
                KIND_END => {
                    self.end_marker()?;
                    return Ok(false);
                }
                KIND_SKIPPABLE_FIRST.. => {
                    let n = self.varint()?;
                    self.skip(n)?;
                }
                _ => return Err((at, format!("unknown record kind {kind:#04x}"))),
            }
        }
    }
}

impl TraceSource for NativeReader {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        if self.failed.is_none() {
            match self.next_record(out) {
                Ok(more) => {
                    self.done = !more;
                    return Ok(more);
                }
                Err(e) => self.failed = Some(e),
            }
        }
        let (offset, what) = self.failed.clone().unwrap();
        Err(TraceError::Corrupt { path: self.path.clone(), offset, what })
    }

    fn name(&self) -> &str {
        &self.name
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
        let mut r = Instr { pc: u64::MAX - 2, len: 7, op: OpClass::Barrier, branch: Branch::Taken, ..Default::default() };
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
        recs.push(r);
        let p = tmp("odd.smt");
        write(&p, &recs);
        assert_reads(&p, &recs);
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
        r.accesses.push(Access { store: false, addr: 0, size: 8, off: 0 });
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
        let cuts = [17, 20, 100, 1000, full.len() / 3, full.len() / 2, full.len() - 20, full.len() - 4, full.len() - 1];
        for cut in cuts {
            std::fs::write(&q, &full[..cut]).unwrap();
            let (v, e) = read_all(&q);
            match e {
                Some(TraceError::Corrupt { path, offset, what }) => {
                    assert!(path.ends_with("cut.smt"));
                    assert!(offset >= HEADER_LEN && what.contains("truncated"), "cut {cut}: {what} at {offset}");
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
            assert!(v.len() <= recs.len());
            assert!(v.iter().zip(&recs).all(|(a, b)| a == b), "records before the cut are intact");
        }
        // Cut inside the header.
        for cut in [0, 5, 8, 12] {
            std::fs::write(&q, &full[..cut]).unwrap();
            let e = open_trace(q.to_str().unwrap()).err().expect("accepted a cut header").to_string();
            assert!(e.contains("cut.smt") && !e.contains('\n'), "{e}");
        }
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
            let at = if i < 10 { i } else { HEADER_LEN as usize + rng.below((full.len() - 16) as u64) as usize };
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
            Some(TraceError::Corrupt { offset: 16, what, .. }) => assert!(what.contains("0x42")),
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

    #[test]
    fn foreign_files_and_versions_are_refused_in_one_line() {
        let q = tmp("foreign.trace");
        let cases: [(&[u8], &str); 4] = [
            (b"", "empty"),
            (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "gzip"),
            (b"instr 0x400000 add\n", "unknown magic"),
            (b"\x89SMTR\r\n\x1a\x02\x00\x01\x00\x00\x00\x00\x00", "version 2"),
        ];
        for (bytes, want) in cases {
            std::fs::write(&q, bytes).unwrap();
            let e = open_trace(q.to_str().unwrap()).err().unwrap().to_string();
            assert!(e.contains("foreign.trace") && e.contains(want) && !e.contains('\n'), "{e}");
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
