//! Fuzz targets: each takes arbitrary bytes and must neither panic, abort nor hang, whatever
//! they hold; where an oracle exists it is checked too. The same functions run under AFL
//! (`src/bin/fuzz.rs`) and as ordinary tests over the committed corpora (`tests/replay.rs`).
//!
//! - `trace_file`: the bytes as a trace file, opened with each `--trace-format` (or detected,
//!   under several file names) and read to the end; then simulated for a few thousand
//!   instructions. Covers every reader, format detection and the compressed forms as found.
//! - `trace_compressed`: the bytes as the *content* of a native, ChampSim or lackey trace,
//!   stored raw or xz/gzip/zstd-compressed, so mutations reach the readers behind each codec.
//! - `tracer_stream`: the bytes as the tracer's raw pipe stream (the vgtrace decoder,
//!   including x86 decoding of the instruction bytes it carries), then through the
//!   transcoder into a trace file, which must read back.
//! - `params`: a preset file and `--set` lines; whatever is accepted must build an engine
//!   and a core (or refuse with an error) and simulate a few hundred instructions.
//! - `engine`: a sequence of SecureMemory operations and adversary pokes under one of the
//!   36 scheme pairs, against a plain byte array: untampered memory reads back exactly what
//!   was written and never raises; tampering is noticed as the scheme promises.
//! - `engine_choices`: the same, with the pair's declared choice parameters (sgx.meta,
//!   sgx.counters, the MAC placements, the hashes, ...) taken from the input too.

use std::io::Write;
use std::path::PathBuf;

use secmem_core::{Engine, Params};
use secmem_trace::{Instr, NativeWriter, TraceSource};
use secmem_vgtrace::{Failure, Transcoder};

pub mod engine;

/// Every target by name.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("trace_file", trace_file),
    ("trace_compressed", trace_compressed),
    ("tracer_stream", tracer_stream),
    ("params", params),
    ("engine", engine::engine),
    ("engine_choices", engine::engine_choices),
];

pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|t| t.0 == name).map(|t| t.1)
}

/// Records read from one input at most: enough to reach every record kind, bounded so a
/// huge decompressed stream cannot stall the fuzzer.
const MAX_RECORDS: usize = 20_000;

/// A scratch file of this process (tmpfs when there is one): readers open paths.
fn scratch(name: &str, data: &[u8]) -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = base.join(format!("secmem-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).expect("scratch file");
    f.write_all(data).expect("scratch write");
    p
}

/// Read `src` to its end (or MAX_RECORDS); every record must be self-consistent and an
/// error must be a one-line message.
fn drain(mut src: Box<dyn TraceSource>) {
    let mut ins = Instr::default();
    for _ in 0..MAX_RECORDS {
        match src.next_into(&mut ins) {
            Ok(true) => check_record(&ins),
            Ok(false) => return,
            Err(e) => {
                let m = e.to_string();
                assert!(!m.is_empty() && !m.contains('\n'), "error is not one line: {m:?}");
                return;
            }
        }
    }
}

fn check_record(ins: &Instr) {
    for a in &ins.accesses {
        // Values are sliced out of the record's data: must be in range.
        assert_eq!(ins.value(a).len(), a.size as usize);
    }
}

/// A small machine for simulating fuzzed inputs quickly.
fn small_machine() -> Params {
    secmem_sim::configure("suh2003", None, None, &["memory.size=16MiB".into(), "l2.size=64KiB".into()]).expect("small machine")
}

/// Simulate at most a few thousand instructions of `src`: any record a reader accepts must
/// be simulated or refused with an error, never crash the simulator.
fn simulate(src: &mut dyn TraceSource, p: &Params) {
    let o = secmem_sim::RunOptions { instructions: 2_000, warmup: 200, seed: 1, progress: false, interval: 0 };
    if let Ok(r) = secmem_sim::run(p, src, &o) {
        if let Some(e) = r.error {
            assert!(!e.contains('\n'), "error is not one line: {e:?}");
        }
    }
}

const FORMATS: [Option<&str>; 4] = [None, Some("native"), Some("champsim"), Some("lackey")];
const NAMES: [&str; 8] =
    ["t", "t.smt", "t.champsim", "t.champsimtrace.xz", "t.lackey", "t.lackey.gz", "t.smt.zst", "t.trace"];

/// Byte 0 picks the format (or detection) and the file name; the rest is the file.
pub fn trace_file(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else { return };
    let format = FORMATS[(sel & 3) as usize];
    let path = scratch(NAMES[(sel >> 2) as usize % NAMES.len()], body);
    let path = path.to_str().expect("utf-8 path");
    if let Ok(src) = secmem_trace::open_trace_as(path, format) {
        drain(src);
        if sel & 0x80 != 0 {
            if let Ok(mut src) = secmem_trace::open_trace_as(path, format) {
                simulate(&mut *src, &small_machine());
            }
        }
    }
}

/// Byte 0 picks the format and the codec; the rest is the uncompressed content (for native:
/// the record stream after the header).
pub fn trace_compressed(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else { return };
    let codec = sel & 3; // raw, xz, gzip, zstd
    let format = ["native", "champsim", "lackey"][((sel >> 2) % 3) as usize];
    let file = if format == "native" {
        use secmem_trace::native::{FLAG_ZSTD, MAGIC, VERSION};
        // The native format is raw or zstd inside: the codec bit picks which.
        let zstd = codec & 1 == 1;
        let mut f = MAGIC.to_vec();
        f.extend(VERSION.to_le_bytes());
        f.extend((if zstd { FLAG_ZSTD } else { 0 }).to_le_bytes());
        f.extend([0; 4]);
        f.extend(if zstd { zstd::encode_all(body, 1).expect("zstd") } else { body.to_vec() });
        f
    } else {
        compress(codec, body)
    };
    let path = scratch("c.trace", &file);
    if let Ok(src) = secmem_trace::open_trace_as(path.to_str().expect("utf-8 path"), Some(format)) {
        drain(src);
    }
}

/// `body` compressed with codec 0 raw, 1 xz, 2 gzip, 3 zstd.
pub fn compress(codec: u8, body: &[u8]) -> Vec<u8> {
    match codec {
        1 => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 0);
            e.write_all(body).expect("xz");
            e.finish().expect("xz")
        }
        2 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(body).expect("gzip");
            e.finish().expect("gzip")
        }
        3 => zstd::encode_all(body, 1).expect("zstd"),
        _ => body.to_vec(),
    }
}

/// The tracer's raw stream, decoded as `secmem run -- PROGRAM` decodes its pipe, then
/// transcoded into a trace file as `secmem trace` does; a file written must read back with
/// every instruction the transcoder counted.
pub fn tracer_stream(data: &[u8]) {
    decode_stream(data);
    let path = scratch("transcoded.smt", b"");
    let mut w = NativeWriter::create(&path).expect("scratch file");
    let mut t = Transcoder::new("fuzz", data);
    match t.run(&mut w) {
        Ok(_) => {
            w.finish().expect("finishing the trace file");
            let mut r = secmem_trace::open_trace(path.to_str().expect("utf-8 path")).expect("the written file opens");
            let (mut ins, mut n) = (Instr::default(), 0u64);
            while r.next_into(&mut ins).expect("the written file reads back") {
                check_record(&ins);
                n += !ins.external as u64;
            }
            assert_eq!(n, t.counts().instructions, "instructions read back");
        }
        Err(Failure::Stream(e) | Failure::Write(e)) => assert!(!e.to_string().contains('\n'), "error is not one line: {e}"),
        Err(Failure::Stopped) => panic!("stopped without a request"),
    }
}

fn decode_stream(data: &[u8]) {
    let mut d = secmem_vgtrace::raw::RawDecoder::new("fuzz", data);
    let mut ins = Instr::default();
    for _ in 0..MAX_RECORDS {
        match d.next_record(&mut ins) {
            Ok(true) => {
                check_record(&ins);
                // A DEF record carries min(len, 32) bytes (crates/vgtrace/src/raw.rs).
                d.take_new_code(|_, b| assert!(b.len() <= 32, "{} code bytes", b.len()));
            }
            Ok(false) => return,
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "error is not one line: {e}");
                return;
            }
        }
    }
}

/// A preset file, then `--set` lines after a line `--`: configure, build, simulate briefly.
pub fn params(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (preset, sets) = text.split_once("\n--\n").unwrap_or((&text, ""));
    let sets: Vec<String> = sets.lines().map(str::to_string).collect();
    let path = scratch("p.toml", preset.as_bytes());
    let Ok(p) = secmem_sim::configure(path.to_str().expect("utf-8 path"), None, None, &sets) else { return };
    let Ok(eng) = Engine::new(&p, 1) else { return };
    drop(eng);
    let o = secmem_sim::RunOptions { instructions: 300, warmup: 50, seed: 1, progress: false, interval: 0 };
    if let Ok(r) = secmem_sim::run(&p, &mut Tiny(0), &o) {
        if let Some(e) = r.error {
            assert!(!e.contains('\n'), "error is not one line: {e:?}");
        }
    }
}

/// A few hundred instructions touching a few pages (loads, stores, a loop branch): enough to
/// exercise a machine's every structure without the set-up cost of a built-in workload.
struct Tiny(u64);

impl TraceSource for Tiny {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, secmem_trace::TraceError> {
        let i = self.0;
        self.0 += 1;
        out.clear();
        out.pc = 0x40_1000 + 4 * (i % 16);
        out.len = 4;
        let addr = 0x10_0000 + (i * 8200) % (64 << 10);
        match i % 4 {
            0 => out.add_access(false, addr, &[0; 8]),
            1 => out.add_access(true, addr, &i.to_le_bytes()),
            3 => out.branch = secmem_trace::Branch::Taken,
            _ => {}
        }
        Ok(true)
    }
    fn name(&self) -> &str {
        "tiny"
    }
}
