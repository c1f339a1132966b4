//! Trace a program: `vgtrace OUT.smt PROGRAM [ARGS...]` writes a native trace and prints the
//! summary; with MODE=raw or MODE=consistent it only reads the live stream (to time the
//! decoder and the consistency adapter). SKIP/COUNT set the window.
use secmem_trace::{Instr, TraceSource};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!("usage: vgtrace OUT.smt PROGRAM [ARGS...]");
        std::process::exit(2);
    }
    let mut cmd = secmem_vgtrace::TraceCommand::new(a[1..].iter().cloned());
    cmd.stdout = secmem_vgtrace::ProgramIo::Null;
    cmd.skip = std::env::var("SKIP").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    cmd.count = std::env::var("COUNT").ok().and_then(|v| v.parse().ok());
    let t = std::time::Instant::now();
    let mode = std::env::var("MODE").unwrap_or_default();
    let r = match mode.as_str() {
        "raw" | "consistent" => (|| {
            let live = secmem_vgtrace::spawn(&cmd)?;
            let mut src: Box<dyn TraceSource> = if mode == "raw" { Box::new(live) } else { Box::new(secmem_vgtrace::Consistent::new(live)) };
            let (mut i, mut n) = (Instr::default(), 0u64);
            while src.next_into(&mut i)? {
                n += 1;
            }
            println!("{n} records in {:.2} s", t.elapsed().as_secs_f64());
            Ok(())
        })(),
        _ => secmem_vgtrace::trace_to_file(&cmd, std::path::Path::new(&a[0])).map(|s| println!("{s:?}")),
    };
    if let Err(e) = r {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
