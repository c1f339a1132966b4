//! Replay a log of calendar bookings (id, from, n as little-endian u64 triples) and time it.
use secmem_timing::Calendar;
use std::collections::HashMap;
fn main() {
    let path = std::env::args().nth(1).expect("log path");
    let b = std::fs::read(&path).unwrap();
    let v: Vec<u64> = b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let mut best = f64::MAX;
    let mut sum = 0u64;
    for _ in 0..3 {
        let mut ids: Vec<u64> = Vec::new();
        let recs: Vec<(usize, u64, u64)> = v.chunks_exact(3).map(|r| {
            let i = ids.iter().position(|&x| x == r[0]).unwrap_or_else(|| { ids.push(r[0]); ids.len() - 1 });
            (i, r[1], r[2])
        }).collect();
        let mut cals: Vec<Calendar> = vec![Calendar::new(); ids.len()];
        let t = std::time::Instant::now();
        sum = 0;
        let mut out = Vec::with_capacity(recs.len());
        for &(i, from, n) in &recs {
            let r = cals[i].reserve(from, n);
            out.push(r);
            sum = sum.wrapping_add(r);
        }
        if let Ok(p) = std::env::var("SAVE") { std::fs::write(p, out.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap(); }
        if let Ok(p) = std::env::var("CMP") {
            let b = std::fs::read(p).unwrap();
            let old: Vec<u64> = b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            let diff = old.iter().zip(&out).filter(|(a, b)| a != b).count();
            let later: u64 = old.iter().zip(&out).map(|(a, b)| b.saturating_sub(*a)).sum();
            let earlier: u64 = old.iter().zip(&out).map(|(a, b)| a.saturating_sub(*b)).sum();
            println!("differ {} of {}, slots later {} earlier {}", diff, out.len(), later, earlier);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    if std::env::var("DIST").is_ok() {
        let mut cals: HashMap<u64, Calendar> = HashMap::new();
        let mut hist: HashMap<(u64, u64, u32), u64> = HashMap::new();
        for r in v.chunks_exact(3) {
            let c = cals.entry(r[0]).or_default();
            let s = c.reserve(r[1], r[2]);
            let d = s.saturating_sub(r[1]);
            let bucket = 64 - d.leading_zeros();
            *hist.entry((r[0], r[2], bucket)).or_default() += 1;
        }
        let mut h: Vec<_> = hist.into_iter().collect();
        h.sort();
        for ((id, n, b), c) in h { println!("{:x} n={} dist<2^{}: {}", id & 0xfff, n, b, c); }
    }
    println!("{} bookings, {:.3} s best of 3, {:.1} ns each, checksum {}", v.len() / 3, best, best * 1e9 / (v.len() / 3) as f64, sum);
}
