//! LHash against CHTree on a trace taken after a tracer's `--skip`, with and without the
//! pages the tracer saw the program touch during the skip (`Instr::set_pages`): without them
//! lhash adds, inside the window, every page the program had used before it (issue 32).
//!
//! `skippages TRACE [INSTRUCTIONS [WARMUP [KEY=VALUE...]]]` prints, per L2 size, the IPC of
//! no protection, the IPC lost and the off-chip bytes added by chash and lhash, and lhash's
//! pages added in the window (of them, those set up untimed as memory from before it).
use secmem_trace::{open_trace, Instr, TraceError, TraceSource};

/// The trace without its pages records: what a simulator that ignores them sees.
struct NoPages(Box<dyn TraceSource>);

impl TraceSource for NoPages {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        loop {
            if !self.0.next_into(out)? {
                return Ok(false);
            }
            if !out.is_pages() {
                return Ok(true);
            }
        }
    }
    fn name(&self) -> &str {
        self.0.name()
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = a.first() else {
        eprintln!("usage: skippages TRACE [INSTRUCTIONS [WARMUP [KEY=VALUE...]]]");
        std::process::exit(2);
    };
    let n = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(5_000_000u64);
    let warmup = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000u64);
    let extra: Vec<String> = a.iter().skip(3).cloned().collect();
    let o = secmem_sim::RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 };
    println!("{path}: {n} instructions after {warmup}");
    println!("{:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>12} {:>10}", "L2", "pages", "base IPC", "chash", "lhash", "chash B", "lhash B", "lhash pages", "predating");
    for l2 in ["256KiB", "1MiB", "4MiB"] {
        let (mut base, mut base_bytes) = (0.0, 0.0);
        for with in [false, true] {
            let mut row = Vec::new();
            let mut bytes = Vec::new();
            let mut pages = (0.0, 0.0);
            for i in ["none", "chash", "lhash"] {
                if i == "none" && with {
                    row.push(base);
                    bytes.push(base_bytes);
                    continue;
                }
                let mut sets = vec![format!("l2.size={l2}")];
                sets.extend(extra.iter().cloned());
                let p = secmem_sim::configure("suh2003", Some(i), Some("none"), &sets).unwrap();
                let src = open_trace(path).unwrap_or_else(|e| panic!("{e}"));
                let mut src: Box<dyn TraceSource> = if with { src } else { Box::new(NoPages(src)) };
                let r = secmem_sim::run(&p, &mut *src, &o).unwrap();
                if let Some(e) = r.error {
                    eprintln!("{l2} {i}: {e}");
                    std::process::exit(1);
                }
                let g = |k: &str| r.stats.get_f64(k).unwrap_or(0.0);
                if i == "none" {
                    (base, base_bytes) = (g("ipc"), g("mem.read_bytes") + g("mem.write_bytes"));
                }
                bytes.push(g("mem.read_bytes") + g("mem.write_bytes"));
                if i == "lhash" {
                    pages = (g("lhash.pages_added"), g("lhash.pages_predating"));
                }
                row.push(g("ipc"));
            }
            let loss = |x: f64| 100.0 * (1.0 - x / row[0]);
            let more = |x: f64| 100.0 * (x / bytes[0] - 1.0);
            println!(
                "{:>7} {:>8} {:>8.4} {:>7.2}% {:>7.2}% {:>8.1}% {:>8.1}% {:>12} {:>10}",
                l2,
                if with { "named" } else { "ignored" },
                row[0],
                loss(row[1]),
                loss(row[2]),
                more(bytes[1]),
                more(bytes[2]),
                pages.0,
                pages.1
            );
        }
    }
}
