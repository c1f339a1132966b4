//! One run to profile (callgrind): `prof WORKLOAD|TRACE-PATH [INTEGRITY ENCRYPTION [N [KEY=VALUE...]]]`
//! on suh2003 after 500 k instructions of warm-up. A name with a `/` is a trace file, opened
//! as `secmem run --trace` opens it (decoded on a thread of its own; with `READ=inline` in the
//! environment, on the simulating thread, as `secmem run --read inline`).
fn main() {
    if let Ok(how) = std::env::var("READ") {
        secmem_trace::set_reading(&how).unwrap();
    }
    let w = std::env::args().nth(1).unwrap_or("chase".into());
    let i = std::env::args().nth(2).unwrap_or("chash".into());
    let e = std::env::args().nth(3).unwrap_or("otp".into());
    // Optional KEY=VALUE parameter overrides after the instruction count (cores=4: a mix of
    // four copies of the workload, rate mode).
    let sets: Vec<String> = std::env::args().skip(5).collect();
    let p = secmem_sim::configure("suh2003", Some(&i), Some(&e), &sets).unwrap();
    let o = secmem_sim::RunOptions { instructions: std::env::args().nth(4).and_then(|s| s.parse().ok()).unwrap_or(3_000_000), warmup: 500_000, seed: 1, progress: false, interval: 0 };
    let cores = secmem_sim::multi::cores(&p).unwrap();
    let r = if cores > 1 {
        let mut ins: Vec<secmem_sim::MixInput> = (0..cores)
            .map(|_| {
                let w = w.clone();
                secmem_sim::MixInput { name: w.clone(), open: Box::new(move || secmem_trace::workloads::builtin(&w, 1).map_err(|e| e.to_string())) }
            })
            .collect();
        secmem_sim::run_mix(&p, &mut ins, &o, &[]).unwrap()
    } else {
        let mut src = if w.contains('/') { secmem_trace::open_trace(&w).unwrap() } else { secmem_trace::workloads::builtin(&w, 1).unwrap() };
        secmem_sim::run(&p, &mut *src, &o).unwrap()
    };
    if let Some(e) = &r.error { println!("error = {}", e); }
    for (k, v) in &r.stats.0 { println!("{} = {:?}", k, v); }
}
