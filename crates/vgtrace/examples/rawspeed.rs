//! Decode a saved raw smtrace stream: `rawspeed FILE` (times the decoder alone).
use secmem_trace::Instr;
fn main() {
    let p = std::env::args().nth(1).expect("rawspeed FILE");
    let f = std::fs::File::open(&p).unwrap();
    let mut d = secmem_vgtrace::RawDecoder::new(p, f);
    let t = std::time::Instant::now();
    let (mut i, mut n) = (Instr::default(), 0u64);
    while d.next_record(&mut i).unwrap() {
        n += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!("{n} records in {s:.2} s: {:.1} M/s", n as f64 / s / 1e6);
}
