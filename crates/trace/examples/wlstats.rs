//! Instruction mix and footprint of the built-in workloads.
//!
//! `cargo run --release -p secmem-trace --example wlstats [INSTRUCTIONS]` (default 5 M):
//! loads, stores and branches per 100 instructions, distinct 64-byte lines touched by the
//! instructions (external loader records excluded), static instructions.

use secmem_trace::workloads::{builtin, builtin_workloads};
use secmem_trace::{Branch, Instr, OpClass};
use std::collections::HashSet;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(5_000_000, |s| s.parse().expect("INSTRUCTIONS"));
    println!("first {n} instructions of each workload (seed 1):");
    for (name, _) in builtin_workloads() {
        let mut w = builtin(name, 1).unwrap();
        let mut r = Instr::default();
        let (mut loads, mut stores, mut branches, mut taken, mut external, mut timed) =
            (0, 0, 0, 0, 0, 0u64);
        let mut lines = HashSet::new();
        let mut pcs = HashSet::new();
        while timed < n {
            w.next_into(&mut r).unwrap();
            if r.external {
                external += 1;
                continue;
            }
            timed += 1;
            pcs.insert(r.pc);
            if r.op == OpClass::Branch {
                branches += 1;
                taken += (r.branch == Branch::Taken) as u64;
            }
            for a in &r.accesses {
                if a.store {
                    stores += 1;
                } else {
                    loads += 1;
                }
                lines.insert(a.addr >> 6);
            }
        }
        let per100 = |x: u64| 100.0 * x as f64 / n as f64;
        println!(
            "{name:7} per 100 instructions: {:5.1} loads {:5.1} stores {:5.1} branches ({:4.1}% taken); \
             {} lines = {:.2} MiB; {} static instructions; {external} external records",
            per100(loads),
            per100(stores),
            per100(branches),
            100.0 * taken as f64 / branches.max(1) as f64,
            lines.len(),
            lines.len() as f64 * 64.0 / (1 << 20) as f64,
            pcs.len(),
        );
    }
}
