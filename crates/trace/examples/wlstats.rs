//! Instruction mix and footprint of the built-in workloads (development aid).
use secmem_trace::{workloads::builtin, Instr, OpClass};
use std::collections::HashSet;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(5_000_000, |s| s.parse().unwrap());
    for name in ["stream", "chase", "hot", "mix"] {
        let mut w = builtin(name, 1).unwrap();
        let mut r = Instr::default();
        let (mut ld, mut st, mut br, mut taken, mut ext, mut timed) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        let mut lines = HashSet::new();
        let mut pcs = HashSet::new();
        let mut first_pc_visits = 0u64;
        let mut first_pc = 0;
        while timed < n {
            w.next_into(&mut r).unwrap();
            if r.external { ext += 1; continue; }
            timed += 1;
            if first_pc == 0 { first_pc = r.pc; }
            if r.pc == first_pc { first_pc_visits += 1; }
            pcs.insert(r.pc);
            if r.op == OpClass::Branch { br += 1; if r.branch == secmem_trace::Branch::Taken { taken += 1; } }
            for a in &r.accesses {
                if a.store { st += 1 } else { ld += 1 }
                lines.insert(a.addr >> 6);
            }
        }
        let p = |x: u64| 100.0 * x as f64 / n as f64;
        println!("{name:7} ext {ext:5}  per 100: loads {:5.1} stores {:5.1} branches {:5.1} (taken {:4.1}%)  lines {} ({:.2} MiB)  static pcs {}  first-pc visits {}",
            p(ld), p(st), p(br), 100.0 * taken as f64 / br.max(1) as f64, lines.len(), lines.len() as f64 * 64.0 / 1048576.0, pcs.len(), first_pc_visits);
    }
}
