//! A run's fixed cost, for profiling (`valgrind --tool=callgrind`): WORKLOAD INTEGRITY
//! ENCRYPTION [N [KEY=VALUE...]], N instructions (10k by default) with no warm-up, as
//! `secmem run -n 10k --warmup 0 [--set KEY=VALUE...]` (e.g. `pages.image=lazy`). Prints the
//! statistics and the engine's set-up time.
fn main() {
    let arg = |i: usize, d: &str| std::env::args().nth(i).unwrap_or(d.into());
    let (w, i, e) = (arg(1, "mix"), arg(2, "chash"), arg(3, "otp"));
    let sets: Vec<String> = std::env::args().skip(5).collect();
    let p = secmem_sim::configure("suh2003", Some(&i), Some(&e), &sets).unwrap();
    let o = secmem_sim::RunOptions { instructions: arg(4, "10000").parse().unwrap(), warmup: 0, seed: 1, progress: false, interval: 0 };
    let t = std::time::Instant::now();
    let mut src = secmem_trace::workloads::builtin(&w, 1).unwrap();
    let r = secmem_sim::run(&p, &mut *src, &o).unwrap();
    if let Some(e) = &r.error {
        println!("error = {}", e);
    }
    for (k, v) in &r.stats.0 {
        println!("{} = {:?}", k, v);
    }
    eprintln!("wall {:.3} s", t.elapsed().as_secs_f64());
}
