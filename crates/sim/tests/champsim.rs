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

/// `scripts/champsim-micro l1store` / `l2store`: independent stores, each to the next line
/// of 16 KiB (L1D hits) or of 256 KiB (misses in the L1D that hit the L2C).
fn stores(n: u64, region: u64) -> Vec<ChampSimRecord> {
    (0..n)
        .map(|i| ChampSimRecord {
            ip: 0x400000 + 4 * (i % 16),
            source_registers: [42, 0, 0, 0],
            destination_memory: [0x1000_0000 + (i * 64) % region, 0],
            ..Default::default()
        })
        .collect()
}

/// Cycles per instruction of `records` on `champsim` with `sets`, after `warmup`.
fn cpi(name: &str, records: &[ChampSimRecord], warmup: u64, sets: &[&str]) -> f64 {
    let path = std::env::temp_dir().join(format!("secmem-champsim-{name}-{}.champsim", std::process::id()));
    let mut w = ChampSimWriter::create(&path).unwrap();
    records.iter().for_each(|r| w.write(r).unwrap());
    w.finish().unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let p = configure("champsim", Some("none"), Some("none"), &sets).unwrap();
    let mut src = secmem_trace::open_trace(path.to_str().unwrap()).unwrap();
    let n = records.len() as u64 - warmup;
    let r = run(&p, &mut *src, &RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 }).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.error, None);
    1.0 / r.stats.get_f64("ipc").unwrap()
}

#[test]
fn stores_written_after_retirement_hold_l1d_mshrs_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 200000 -i 800000 --json F NAME.champsim`
    // (2026-11-28): cycles per instruction of its region of interest. A store that misses the
    // L1D holds one of its 16 MSHRs until the L2C's line is in, and the write queue and store
    // queue fill behind them; written at execute, nothing waits for the MSHRs.
    const CS_L1STORE: f64 = 1.000;
    const CS_L2STORE: f64 = 2.40;
    let (warmup, n) = (50_000, 200_000);
    let near = |what: &str, secmem: f64, champsim: f64| {
        assert!((secmem / champsim - 1.0).abs() <= 0.05, "{what}: secmem {secmem:.3}, ChampSim {champsim:.3}");
    };
    near("L1D stores", cpi("l1store", &stores(warmup + n, 16 << 10), warmup, &[]), CS_L1STORE);
    let l2 = stores(warmup + n, 256 << 10);
    let l2c = cpi("l2store", &l2, warmup, &[]);
    eprintln!("l2store {l2c}");
    near("L2C stores", l2c, CS_L2STORE);
    let at_execute = cpi("l2store-exec", &l2, warmup, &["core.store_at_retire=false"]);
    assert!(at_execute < 1.1, "stores written at execute wait for nothing: {at_execute:.3}");
    // Without write-backs each store takes one of the L2C's tag checks, 5 every 6 cycles.
    let no_writebacks = cpi("l2store-nowb", &l2, warmup, &["caches.writebacks=false"]);
    assert!((no_writebacks - 1.2).abs() < 0.02, "one L2C tag check a store: {no_writebacks:.3}");
}

#[test]
fn stores_at_retirement_need_a_store_queue() {
    // suh2003 has none: its stores share the LSQ, so there is nowhere for them to wait.
    let sets = ["core.store_at_retire=true".to_string()];
    let p = configure("suh2003", Some("none"), Some("none"), &sets).unwrap();
    let path = std::env::temp_dir().join(format!("secmem-champsim-sq-{}.champsim", std::process::id()));
    let mut w = ChampSimWriter::create(&path).unwrap();
    stores(10, 4096).iter().for_each(|r| w.write(r).unwrap());
    w.finish().unwrap();
    let mut src = secmem_trace::open_trace(path.to_str().unwrap()).unwrap();
    let e = run(&p, &mut *src, &RunOptions { instructions: 10, warmup: 0, seed: 1, progress: false, interval: 0 });
    std::fs::remove_file(&path).unwrap();
    assert!(e.is_err_and(|e| e.0.contains("core.store_at_retire: needs a store queue")));
}

/// `scripts/champsim-micro alias`: load r1 <- [L1D line] (its address from r2); store [A] <-
/// r1; store [B] <- r3; load r2 <- [B]. The second load's store has its data at once, but
/// finishes only after the store before it, which waits for the first load.
fn alias(n: u64) -> Vec<ChampSimRecord> {
    let (r1, r2, r3) = (40, 41, 42);
    (0..n)
        .map(|i| {
            let (k, a) = (i / 4, 0x1000_0000 + 8 * ((i / 4) % 64));
            match i % 4 {
                0 => ChampSimRecord { ip: 0x400000, destination_registers: [r1, 0], source_registers: [r2, 0, 0, 0], source_memory: [0x1010_0000 + 64 * (k % 128), 0, 0, 0], ..Default::default() },
                1 => ChampSimRecord { ip: 0x400004, source_registers: [r1, 0, 0, 0], destination_memory: [a, 0], ..Default::default() },
                2 => ChampSimRecord { ip: 0x400008, source_registers: [r3, 0, 0, 0], destination_memory: [a + 0x1000, 0], ..Default::default() },
                _ => ChampSimRecord { ip: 0x40000C, destination_registers: [r2, 0], source_memory: [a + 0x1000, 0, 0, 0], ..Default::default() },
            }
        })
        .collect()
}

#[test]
fn a_load_served_by_a_store_waits_for_the_older_stores_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 200000 -i 800000 alias.champsim` (2026-11-28): 1.50
    // cycles an instruction, 6 an iteration: the load's 5 and a cycle for the stores to
    // finish in order and release it. Stores finishing each at its own time break the chain.
    const CS_ALIAS: f64 = 1.4997;
    let (warmup, n) = (50_000, 200_000);
    let recs = alias(warmup + n);
    // Held without tlb.restart: the stores' D-TLB lookups here leave the first load's a cycle
    // late every iteration, where ChampSim's are not (docs/core-model.md, "DTLB lookups
    // restarted and merged"), and a restart makes that cycle three.
    let in_order = cpi("alias", &recs, warmup, &["tlb.restart=false"]);
    let free = cpi("alias-free", &recs, warmup, &["core.stores_in_order=false", "tlb.restart=false"]);
    assert!(free < 0.8, "without the rule nothing waits: {free:.3}");
    // secmem's D-TLB lookups put one cycle more into each iteration (docs/core-model.md,
    // seventh pass): without them, ChampSim's cycles exactly.
    assert!((in_order / CS_ALIAS - 1.0).abs() <= 0.20, "in order: secmem {in_order:.3}, ChampSim {CS_ALIAS:.3}");
    let restarting = cpi("alias-restart", &recs, warmup, &[]);
    assert!(restarting > in_order + 0.4, "a late load restarts its tag check: {restarting:.3} against {in_order:.3}");
    let no_dtlb = cpi("alias-nodtlb", &recs, warmup, &["tlb.tag_checks=0", "tlb.tags_in_flight=0"]);
    assert!((no_dtlb / CS_ALIAS - 1.0).abs() <= 0.01, "without the D-TLB's limit: secmem {no_dtlb:.3}, ChampSim {CS_ALIAS:.3}");
}

/// `scripts/champsim-micro ldst`: independent loads and stores alternating, each to another
/// line of 8 KiB (L1D hits), loads and stores on pages of their own.
fn ldst(n: u64) -> Vec<ChampSimRecord> {
    (0..n)
        .map(|i| {
            let off = (64 * (i / 2)) % 8192;
            if i % 2 == 0 {
                ChampSimRecord { ip: 0x400000, destination_registers: [41, 0], source_registers: [42, 0, 0, 0], source_memory: [0x1000_0000 + off, 0, 0, 0], ..Default::default() }
            } else {
                ChampSimRecord { ip: 0x400004, source_registers: [42, 0, 0, 0], destination_memory: [0x1000_2000 + off, 0], ..Default::default() }
            }
        })
        .collect()
}

#[test]
fn loads_and_retired_stores_share_the_l1d_and_dtlb_lookups_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 200000 -i 800000 ldst.champsim` (2026-11-28): 0.890
    // cycles an instruction. Its L1D starts at most 4 tag checks in any 3 cycles, loads and
    // retired stores together, and its DTLB 2 lookups in any 2; with neither limit each
    // instruction would take half a cycle (a load and a store a cycle).
    // A load whose translation comes late has its tag check started again (tlb.restart);
    // without, it waited in front of the L1D for the D-TLB, behind the stores booked first,
    // and took 1.000.
    const CS_LDST: f64 = 0.8900;
    let (warmup, n) = (50_000, 200_000);
    let recs = ldst(warmup + n);
    let both = cpi("ldst", &recs, warmup, &[]);
    assert!((both / CS_LDST - 1.0).abs() <= 0.05, "secmem {both:.3}, ChampSim {CS_LDST:.3}");
    let waiting = cpi("ldst-waiting", &recs, warmup, &["tlb.restart=false"]);
    assert!((waiting / CS_LDST - 1.0).abs() > 0.10, "without restarts: secmem {waiting:.3}, ChampSim {CS_LDST:.3}");
    let neither = cpi("ldst-free", &recs, warmup, &["l1d.tags_in_flight=0", "tlb.tag_checks=0", "tlb.tags_in_flight=0"]);
    assert!((neither - 0.5).abs() < 0.01, "without the limits a load and a store a cycle: {neither:.3}");
}

/// `scripts/champsim-micro dirtychase`: a chain of dependent loads over 5 MiB (line i x 40503
/// of its 81,920), each followed by a store to the line it read and three independent
/// operations: one DRAM read in flight at a time, and a dirty line written back for each.
fn dirtychase(n: u64) -> Vec<ChampSimRecord> {
    let lines = (5 << 20) / 64;
    (0..n / 5)
        .flat_map(|i| {
            let a = 0x1000_0000 + 64 * (i * 40503 % lines);
            let load = ChampSimRecord { ip: 0x400000, destination_registers: [40, 0], source_registers: [40, 0, 0, 0], source_memory: [a, 0, 0, 0], ..Default::default() };
            let store = ChampSimRecord { ip: 0x400004, source_registers: [40, 0, 0, 0], destination_memory: [a + 8, 0], ..Default::default() };
            let op = |k: u64| ChampSimRecord { ip: 0x400008 + 4 * k, destination_registers: [41, 0], source_registers: [42, 0, 0, 0], ..Default::default() };
            [load, store, op(0), op(1), op(2)]
        })
        .collect()
}

/// `scripts/champsim-micro ifetch`: independent one-cycle operations in 128 KiB of
/// straight-line code, run round, so every instruction line misses the L1I (32 KiB) and
/// hits the L2C.
fn ifetch(n: u64) -> Vec<ChampSimRecord> {
    (0..n)
        .map(|i| ChampSimRecord { ip: 0x400000 + (4 * i) % (128 << 10), destination_registers: [41, 0], source_registers: [42, 0, 0, 0], ..Default::default() })
        .collect()
}

#[test]
fn reads_after_the_dram_turned_to_writes_in_their_gaps_time_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 200000 -i 100000 --json F dirtychase.champsim`
    // (2026-11-28): 6,075,455 cycles for 100,000 instructions. Its DRAM turns to writes
    // whenever the read queue is empty (swap_write_mode), i.e. after every read here, with its
    // write queue at the low mark: each read waits for a write to go out, then a turnaround.
    const CS_DIRTYCHASE: f64 = 60.75;
    let (warmup, n) = (200_000, 100_000);
    let recs = dirtychase(warmup + n);
    let on = cpi("dirtychase", &recs, warmup, &[]);
    assert!((on / CS_DIRTYCHASE - 1.0).abs() <= 0.10, "secmem {on:.2}, ChampSim {CS_DIRTYCHASE:.2}");
    // Without the rule the writes wait for 7/8 of the queue and go nine at a time.
    let off = cpi("dirtychase-off", &recs, warmup, &["dram.idle_writes=0"]);
    assert!(off / CS_DIRTYCHASE < 0.8, "without the rule: secmem {off:.2}, ChampSim {CS_DIRTYCHASE:.2}");
}

#[test]
fn instruction_line_misses_overlap_in_the_fetch_buffer_as_in_champsim() {
    // `bin/champsim --hide-heartbeat -w 200000 -i 800000 ifetch.champsim` (2026-11-28):
    // 200,000 cycles, 0.25 an instruction (its four execution units): the IFETCH_BUFFER's 64
    // instructions span four lines, each sent to the L1I once it is in the buffer, so their
    // misses overlap and hide. Fetching a line at a time, each miss holds fetch.
    const CS_IFETCH: f64 = 0.2500;
    let (warmup, n) = (50_000, 200_000);
    let recs = ifetch(warmup + n);
    let ahead = cpi("ifetch", &recs, warmup, &[]);
    assert!((ahead / CS_IFETCH - 1.0).abs() <= 0.05, "secmem {ahead:.3}, ChampSim {CS_IFETCH:.3}");
    let one_line = cpi("ifetch-one", &recs, warmup, &["core.fetch_buffer=0"]);
    assert!(one_line > 2.0 * CS_IFETCH, "a line at a time: {one_line:.3}");
}
