//! A stop request (what the Python glue's SIGINT/SIGTERM handler sends) ends a run at the
//! next check, keeping what was measured. Its own test binary: the request is process-wide.

use secmem_core::Stat;
use secmem_sim::{run, RunOptions};

#[test]
fn a_stop_request_ends_the_run_and_keeps_its_statistics() {
    let p = secmem_sim::configure("suh2003", Some("chash"), Some("otp"), &["memory.size=256MiB".into()]).unwrap();
    let o = RunOptions { instructions: 4_000_000_000, warmup: 0, seed: 1, progress: false, interval: 0 };
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        secmem_sim::run::request_stop(15);
    });
    let mut src = secmem_trace::workloads::builtin("hot", 1).unwrap();
    let r = run(&p, &mut *src, &o).unwrap();
    stopper.join().unwrap();
    secmem_sim::run::clear_stop();
    let e = r.error.expect("stopped");
    assert!(e.starts_with("interrupted by SIGTERM after "), "{e}");
    let get = |k: &str| r.stats.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("interrupted"), Some(Stat::Str("SIGTERM".into())));
    let Some(Stat::Int(n)) = get("instructions") else { panic!("no instruction count") };
    assert!(n > 0 && n < 4_000_000_000, "{n} instructions measured before the stop");
    assert!(matches!(get("cycles"), Some(Stat::Int(c)) if c > 0));

    // A stop requested before a run starts ends it at once; cleared, runs go on as usual.
    secmem_sim::run::request_stop(2);
    let r = run(&p, &mut *secmem_trace::workloads::builtin("hot", 1).unwrap(), &o).unwrap();
    assert!(r.error.unwrap().starts_with("interrupted by SIGINT after 0 instructions"));
    secmem_sim::run::clear_stop();
    let o = RunOptions { instructions: 10_000, ..o };
    assert!(run(&p, &mut *secmem_trace::workloads::builtin("hot", 1).unwrap(), &o).unwrap().error.is_none());

    // During a fast-forward (`--skip 5G`), before the run loop's first instruction: the
    // skip itself stops within a moment (it used to run to its end, minutes later).
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(500));
        secmem_sim::run::request_stop(2);
    });
    let t = std::time::Instant::now();
    let mut src = secmem_trace::Consistent::new(secmem_trace::Skip::new(secmem_trace::workloads::builtin("mix", 1).unwrap(), 5_000_000_000));
    let r = run(&p, &mut src, &RunOptions { instructions: 1000, ..o }).unwrap();
    stopper.join().unwrap();
    secmem_sim::run::clear_stop();
    assert!(t.elapsed().as_secs_f64() < 2.5, "the skip took {:?} to stop", t.elapsed());
    assert_eq!(r.error.as_deref(), Some("interrupted by SIGINT after 0 instructions"));
    assert_eq!(get_of(&r, "interrupted"), Some(Stat::Str("SIGINT".into())));
}

fn get_of(r: &secmem_sim::RunResult, k: &str) -> Option<Stat> {
    r.stats.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}
