//! `secmem-bench [INSTRUCTIONS [REPEAT]]`: simulated instructions per second per workload and
//! scheme, the fastest of REPEAT runs (default 3).

use secmem_sim::bench::{bench, bench_schemes, default_workloads};

fn main() {
    let n = std::env::args().nth(1).and_then(|s| secmem_core::params::parse_count(&s)).unwrap_or(5_000_000);
    let repeat = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let schemes = bench_schemes();
    println!("{:<8} {:<6} {:<5} {:>12} {:>7} {:>9} {:>14}", "workload", "integ", "enc", "instructions", "IPC", "seconds", "M instr/s");
    let r = bench("suh2003", &default_workloads(), &schemes, &[], n, n / 5, repeat, |r| {
        println!(
            "{:<8} {:<6} {:<5} {:>12} {:>7.3} {:>9.2} {:>14.2}",
            r.workload, r.integrity, r.encryption, r.instructions, r.ipc, r.seconds, r.instr_per_sec / 1e6
        );
    });
    if let Err(e) = r {
        eprintln!("secmem-bench: {}", e);
        std::process::exit(1);
    }
}
