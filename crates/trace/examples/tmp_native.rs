use std::time::Instant;
use std::io::Read;
fn main() {
    let path = "/tmp/mix60.zst";
    let t = Instant::now();
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut d = zstd::stream::read::Decoder::with_buffer(f).unwrap();
    let mut buf = vec![0u8; 1 << 18];
    let mut n = 0u64;
    loop { let k = d.read(&mut buf).unwrap(); if k == 0 { break; } n += k as u64; }
    println!("stream-decoded {} bytes in {:.3}s", n, t.elapsed().as_secs_f64());
}
