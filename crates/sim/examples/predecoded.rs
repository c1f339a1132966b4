//! What a trace file's decoding costs a run, and so the most any faster trace format could
//! save: `predecoded TRACE.smt [ROUNDS]` decodes the native trace's first ~6.2 M records
//! into packed batches in memory, then runs suh2003 chash+otp (1 M warm-up, then 1 M and
//! 5 M instructions) reading the file inline (`ReadInline` over `NativeReader`, as `secmem
//! run --read inline`) and replaying the batches (each copied into the run's batch, as a
//! reader of records already in the core's layout would), interleaved. Prints the
//! steady-state CPU time per instruction of each ((5 M - 1 M) / 4 M, this thread's CPU).
//! Both give the same statistics (checked), and it says how many records stay spilled
//! (`packed`: external ones, more accesses or bytes than a packed slot holds). docs/speed.md,
//! eighth pass.
use std::sync::Arc;

use secmem_trace::cputime::thread_cpu_seconds;
use secmem_trace::packed::PackedBatch;
use secmem_trace::readahead::{BATCH, BATCH_BYTES};
use secmem_trace::{Instr, NativeReader, ReadInline, TraceError, TraceSource};

/// Batches decoded in advance, handed out in order.
struct Replay {
    batches: Arc<Vec<(PackedBatch, usize)>>,
    at: usize,
}

impl TraceSource for Replay {
    fn next_into(&mut self, _: &mut Instr) -> Result<bool, TraceError> {
        Err(TraceError::Other("a replay is read in batches only".into()))
    }

    fn fill_packed(&mut self, b: &mut PackedBatch, _: usize) -> (usize, Option<Result<(), TraceError>>) {
        let Some((s, n)) = self.batches.get(self.at) else {
            return (0, Some(Ok(())));
        };
        self.at += 1;
        b.slots[..*n].copy_from_slice(&s.slots[..*n]);
        for (to, from) in b.spill.iter_mut().zip(&s.spill[..s.nspill]) {
            to.clone_from(from);
        }
        (b.nspill, b.plain) = (s.nspill, false);
        b.shapes.extend_from_slice(&s.shapes);
        (*n, None)
    }

    fn name(&self) -> &str {
        "predecoded"
    }
}

/// This thread's CPU seconds for a run of `n` instructions after 1 M of warm-up, and its
/// statistics.
fn run(src: &mut dyn TraceSource, n: u64) -> (f64, String) {
    let p = secmem_sim::configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
    let o = secmem_sim::RunOptions { instructions: n, warmup: 1_000_000, seed: 1, progress: false, interval: 0 };
    let c = thread_cpu_seconds();
    let r = secmem_sim::run(&p, src, &o).unwrap();
    let t = thread_cpu_seconds() - c;
    assert!(r.error.is_none(), "{:?}", r.error);
    let stats: Vec<String> = r.stats.0.iter().filter(|(k, _)| !k.starts_with("sim.") && k.as_str() != "workload").map(|(k, v)| format!("{k}={v:?}")).collect();
    (t, stats.join(","))
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let path = a.first().expect("usage: predecoded TRACE.smt [ROUNDS]");
    let rounds: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut r = NativeReader::open(path).unwrap();
    let mut batches = Vec::new();
    loop {
        let mut b = PackedBatch::new(BATCH);
        let (n, end) = r.fill_packed(&mut b, BATCH_BYTES);
        batches.push((b, n));
        if let Some(e) = end {
            e.unwrap();
            break;
        }
        if batches.len() * BATCH > 6_200_000 {
            break;
        }
    }
    let (n, spilled): (usize, usize) = batches.iter().fold((0, 0), |(n, s), (b, k)| (n + k, s + b.nspill));
    println!("{n} records decoded, {spilled} of them kept whole in spill slots ({:.2}%)", 100.0 * spilled as f64 / n as f64);
    let batches = Arc::new(batches);
    let file = |n| run(&mut ReadInline::new(NativeReader::open(path).unwrap()), n);
    let replay = |n| run(&mut ReadInline::new(Replay { batches: batches.clone(), at: 0 }), n);
    for k in 0..rounds {
        let (fs, f_stats) = file(1_000_000);
        let (fl, _) = file(5_000_000);
        let (rs, r_stats) = replay(1_000_000);
        let (rl, _) = replay(5_000_000);
        assert_eq!(f_stats, r_stats, "the replay's statistics differ from the file's");
        println!("round {}: read inline {:.1} ns, predecoded {:.1} ns a instruction", k + 1, (fl - fs) / 4e6 * 1e9, (rl - rs) / 4e6 * 1e9);
    }
}
