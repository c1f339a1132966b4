//! A blind mutation campaign, for when AFL is not at hand (installing cargo-afl and building
//! its instrumented binary took 77 min on the shared machine): random byte flips, overwrites,
//! insertions, deletions and splices of a target's committed corpus, each run through the
//! target with its oracle; an input that panics is written to fuzz/crashes/TARGET and the run
//! exits 1. No coverage guidance, so it finds what is near the seeds, not deep paths.
//!
//!   cargo run --release --manifest-path fuzz/Cargo.toml --target-dir target \
//!       --example mutate -- TARGET SECONDS [SEED]

use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: mutate TARGET SECONDS [SEED]";
    let (Some(name), Some(secs)) = (args.get(1), args.get(2).and_then(|s| s.parse::<u64>().ok())) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(target) = secmem_fuzz::target(name) else {
        eprintln!("mutate: unknown target {name} (one of {:?})", secmem_fuzz::TARGETS.iter().map(|t| t.0).collect::<Vec<_>>());
        std::process::exit(2);
    };
    let mut state: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(root.join("corpus").join(name))
        .map(|d| d.map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect())
        .unwrap_or_default();
    corpus.sort();
    if corpus.is_empty() {
        eprintln!("mutate: fuzz/corpus/{name} is empty");
        std::process::exit(2);
    }
    std::panic::set_hook(Box::new(|_| {})); // a panic is reported below, with its input
    let (t0, limit) = (Instant::now(), Duration::from_secs(secs));
    let (mut runs, mut crashes) = (0u64, 0u64);
    while t0.elapsed() < limit {
        let mut input = corpus[next() as usize % corpus.len()].clone();
        for _ in 0..1 + next() % 8 {
            let at = if input.is_empty() { 0 } else { next() as usize % input.len() };
            match next() % 5 {
                0 if !input.is_empty() => input[at] ^= 1 << (next() % 8),
                1 if !input.is_empty() => input[at] = next() as u8,
                2 => input.insert(at, next() as u8),
                3 if !input.is_empty() => {
                    input.remove(at);
                }
                _ => {
                    // Splice: the tail of another corpus input from here on.
                    let other = &corpus[next() as usize % corpus.len()];
                    input.truncate(at);
                    input.extend_from_slice(&other[at.min(other.len())..]);
                }
            }
        }
        runs += 1;
        if std::panic::catch_unwind(|| target(&input)).is_err() {
            crashes += 1;
            let dir = root.join("crashes").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("mutate-{runs}")), &input).unwrap();
        }
    }
    println!("{name}: {runs} inputs in {:.0} s from {} corpus files, {crashes} panicked", t0.elapsed().as_secs_f64(), corpus.len());
    if crashes > 0 {
        std::process::exit(1);
    }
}
