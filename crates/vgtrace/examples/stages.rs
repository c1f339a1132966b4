//! Time the tracer's stages on a saved raw smtrace stream (CPU time per instruction, so a
//! busy machine still gives comparable figures): `stages RAWFILE [LEVEL...]`.
//! Save a stream with `valgrind --tool=smtrace --smt-fd=3 PROGRAM 3>RAWFILE` (VALGRIND_LIB as
//! `secmem trace` sets it). With OUT=DIR it also writes DIR/layered.smt and DIR/fused.smt.
use std::io::Cursor;

use secmem_trace::cputime::thread_cpu_seconds as cpu;
use secmem_trace::{Instr, NativeWriter, TraceError, TraceSource};
use secmem_vgtrace::{Consistent, RawDecoder, Transcoder};

struct Src(RawDecoder<Cursor<Vec<u8>>>);
impl TraceSource for Src {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        self.0.next_record(out)
    }
    fn name(&self) -> &str {
        "raw"
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let bytes = std::fs::read(&a[0]).unwrap();
    let levels: Vec<i32> = a[1..].iter().map(|l| l.parse().unwrap()).collect();
    let out = std::env::var("OUT").ok();
    let path = |name: &str| out.as_ref().map(|d| format!("{d}/{name}")).unwrap_or_else(|| "/dev/null".into());
    let only = std::env::var("ONLY").unwrap_or_default();
    let run = |stage: &str| only.is_empty() || only == stage;
    let copy = || Cursor::new(bytes.clone());
    let mut i = Instr::default();
    let mut n = 1u64;
    if run("decode") {
        let (c0, t) = (copy(), cpu());
        let mut d = RawDecoder::new("raw", c0);
        n = 0;
        while d.next_record(&mut i).unwrap() {
            n += !i.external as u64;
        }
        println!("decode              {:6.1} ns/instr ({n} instructions)", (cpu() - t) / n as f64 * 1e9);
    }
    let ns = |s: f64, n: u64| s / n as f64 * 1e9;
    if run("consistent") {
        let (c0, t) = (copy(), cpu());
        let mut c = Consistent::new(Src(RawDecoder::new("raw", c0)));
        while c.next_into(&mut i).unwrap() {}
        println!("decode+consistent   {:6.1} ns/instr", ns(cpu() - t, n));
    }
    for l in levels {
        if run("layered") {
        let (c0, t) = (copy(), cpu());
        let mut c = Consistent::new(Src(RawDecoder::new("raw", c0)));
        let mut w = NativeWriter::with_level(path("layered.smt"), l).unwrap();
        while c.next_into(&mut i).unwrap() {
            c.inner_mut().0.take_new_code(|pc, b| {
                if b.len() <= 15 {
                    w.write_code(pc, b).unwrap()
                }
            });
            w.write(&i).unwrap();
        }
        let main = cpu() - t;
        let f = w.finish_stats().unwrap();
        println!(
            "layered, zstd {l:3}   {:6.1} ns/instr + zstd thread {:5.1}  ({:.2} B/instr raw)",
            ns(main, n),
            ns(f.compress_cpu_seconds, n),
            f.raw_bytes as f64 / n as f64
        );
        }
        if !run("transcode") {
            continue;
        }
        let (c0, t) = (copy(), cpu());
        let mut tr = Transcoder::new("raw", c0);
        let mut w = NativeWriter::with_level(path("fused.smt"), l).unwrap();
        tr.run(&mut w).unwrap();
        let main = cpu() - t;
        let n = tr.counts().instructions;
        eprintln!("{:?}", tr.counts());
        let f = w.finish_stats().unwrap();
        println!(
            "transcode, zstd {l:3} {:6.1} ns/instr + zstd thread {:5.1}  ({:.2} B/instr raw)",
            ns(main, n),
            ns(f.compress_cpu_seconds, n),
            f.raw_bytes as f64 / n as f64
        );
    }
}
