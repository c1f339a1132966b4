//! Compare two native traces record by record: `smtdiff A.smt B.smt` (exit 1 at the first
//! difference). Checks that a faster tracer writes the same records.
use secmem_trace::{open_trace, Instr};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (mut x, mut y) = (open_trace(&a[0]).unwrap(), open_trace(&a[1]).unwrap());
    let (mut i, mut j, mut n) = (Instr::default(), Instr::default(), 0u64);
    loop {
        let (p, q) = (x.next_into(&mut i).unwrap(), y.next_into(&mut j).unwrap());
        if p != q || (p && i != j) {
            println!("record {n} differs:\n  {}\n  {}", if p { format!("{i:?}") } else { "end".into() }, if q { format!("{j:?}") } else { "end".into() });
            std::process::exit(1);
        }
        if !p {
            break;
        }
        n += 1;
    }
    println!("{n} records identical");
}
