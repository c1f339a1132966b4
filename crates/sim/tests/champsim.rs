//! The `champsim` preset against ChampSim's own numbers (issue 36): a walk-heavy loop, run in
//! ChampSim (master 2ff25011, default `champsim_config.json`) on the very records this test
//! writes. ChampSim's figures are constants here, each with how it was measured.

use secmem_sim::{configure, run, RunOptions};
use secmem_trace::champsim::{ChampSimRecord, ChampSimWriter};

/// `scripts/champsim-micro memindep`: independent loads, each to a new page (4 KiB + 64 B
/// apart over 256 MiB): every load misses the STLB and walks ChampSim's five levels, mostly
/// from the page-structure caches, and maps its page for the first time (a minor fault).
fn memindep(n: u64) -> Vec<ChampSimRecord> {
    (0..n)
        .map(|i| ChampSimRecord {
            ip: 0x400000 + 4 * (i % 16),
            destination_registers: [41, 0],
            source_registers: [42, 0, 0, 0],
            source_memory: [0x1000_0000 + (i * (4096 + 64)) % (256 << 20), 0, 0, 0],
            ..Default::default()
        })
        .collect()
}

#[test]
fn a_walk_heavy_loop_times_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 100000 -i 200000 --json F memindep.champsim`
    // (2026-11-27): the cycles and the STLB's load misses of its region of interest (200,001
    // instructions, CPI 65.1). Its walks overlap as far as its STLB's 16 MSHRs let them (the
    // walker's own mshr_size is not enforced): with 5 walks at once secmem took 2.2 times as
    // long. Not held here, as they disagree (docs/core-model.md): ChampSim's STLB miss latency
    // (508 cycles) against secmem's walks once started (1,059), and the walk reads the L1D
    // served (ChampSim 1,477 of 397,145, secmem 192,343 of 416,348).
    const CS_CYCLES: f64 = 13_022_761.0;
    const CS_STLB_MISSES: f64 = 199_977.0;
    let (warmup, n) = (100_000, 200_000);
    let path = std::env::temp_dir().join(format!("secmem-champsim-walks-{}.champsim", std::process::id()));
    let mut w = ChampSimWriter::create(&path).unwrap();
    memindep(warmup + n).iter().for_each(|r| w.write(r).unwrap());
    w.finish().unwrap();
    let p = configure("champsim", Some("none"), Some("none"), &[]).unwrap();
    let mut src = secmem_trace::open_trace(path.to_str().unwrap()).unwrap();
    let r = run(&p, &mut *src, &RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 }).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.error, None);
    let st = |k: &str| r.stats.get_f64(k).unwrap_or_else(|| panic!("no stat {k}"));
    let near = |what: &str, secmem: f64, champsim: f64, within: f64| {
        assert!((secmem / champsim - 1.0).abs() <= within, "{what}: secmem {secmem:.1}, ChampSim {champsim:.1}");
    };
    near("walks", st("ptw.walks"), CS_STLB_MISSES, 0.01);
    near("cycles", st("cycles"), CS_CYCLES, 0.10);
    // Every walk starts below the root, from the page-structure caches.
    assert_eq!(st("ptw.psc_hits"), st("ptw.walks"));
}
