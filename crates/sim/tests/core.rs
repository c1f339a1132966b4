//! The core model on hand-written sequences and on the built-in workloads: loads that depend
//! on older stores, page walks, the CPI stack, and a trace timed alike in secmem's format and
//! in ChampSim's.

use secmem_core::stats::Stats;
use secmem_sim::{configure, run, RunOptions};
use secmem_trace::champsim::{ChampSimRecord, ChampSimWriter, Numbering};
use secmem_trace::workloads::{builtin, builtin_workloads};
use secmem_trace::{Branch, Consistent, Instr, OpClass, Skip, TraceError, TraceSource};

struct VecSource(Vec<Instr>, usize);

impl TraceSource for VecSource {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.1 >= self.0.len() {
            return Ok(false);
        }
        out.clone_from(&self.0[self.1]);
        self.1 += 1;
        Ok(true)
    }
    fn name(&self) -> &str {
        "hand-written"
    }
}

fn sim_src(preset: &str, sets: &[&str], src: &mut dyn TraceSource, n: u64, warmup: u64) -> Stats {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let p = configure(preset, Some("none"), Some("none"), &sets).unwrap();
    let r = run(&p, src, &RunOptions { instructions: n, warmup, seed: 1, progress: false, interval: 0 }).unwrap();
    assert_eq!(r.error, None);
    r.stats
}

fn sim(preset: &str, sets: &[&str], prog: &[Instr]) -> Stats {
    sim_src(preset, sets, &mut VecSource(prog.to_vec(), 0), prog.len() as u64, 0)
}

fn f(s: &Stats, k: &str) -> f64 {
    s.get_f64(k).unwrap_or_else(|| panic!("missing stat {}", k))
}

fn ins(pc: u64, op: OpClass, srcs: &[u8], dsts: &[u8]) -> Instr {
    let mut i = Instr { pc, len: 4, op, ..Default::default() };
    srcs.iter().for_each(|&r| i.add_src(r));
    dsts.iter().for_each(|&r| i.add_dst(r));
    i
}

fn mem(pc: u64, store: bool, addr: u64, size: usize, srcs: &[u8], dsts: &[u8]) -> Instr {
    let mut i = ins(pc, OpClass::Mem, srcs, dsts);
    i.add_access(store, addr, &vec![0u8; size]);
    i
}

/// K rounds of: r1 = 1 / r2 (20 cycles on suh2003); store r1 to A; load r2 from A — each
/// round's divide needs the value that went through memory in the round before, and only
/// through memory: without the dependence the divides overlap.
fn through_memory(k: u64, store_size: usize, load_size: usize) -> Vec<Instr> {
    let mut v = Vec::new();
    for j in 0..k {
        let a = 0x10_0000 + (j % 64) * 16;
        v.push(ins(0x1000, OpClass::Div, &[2], &[1]));
        v.push(mem(0x1004, true, a, store_size, &[1], &[]));
        v.push(mem(0x1008, false, a, load_size, &[], &[2]));
    }
    v
}

#[test]
fn a_load_waits_for_the_older_store_it_reads_and_takes_its_bytes() {
    let prog = through_memory(2000, 8, 8);
    let dep = |policy: &str| sim("suh2003", &[&format!("core.memory_dependence={}", policy)], &prog);
    let none = dep("none");
    let oracle = dep("oracle");
    // Without memory dependences every load reads the cache at once and the divides overlap;
    // with them, each divide waits for the one before through the store and the load.
    assert_eq!(f(&none, "lsq.forwarded_loads"), 0.0);
    assert_eq!(f(&oracle, "lsq.forwarded_loads"), 2000.0);
    assert!(f(&oracle, "cycles") > 2000.0 * 20.0, "{}", f(&oracle, "cycles"));
    assert!(f(&none, "cycles") < f(&oracle, "cycles") / 2.0, "{} vs {}", f(&none, "cycles"), f(&oracle, "cycles"));
    // Forwarded loads never touch the L1D; the stores do (and the loads of `none`).
    assert_eq!(f(&oracle, "l1d.accesses"), 2000.0);
    assert_eq!(f(&none, "l1d.accesses"), 4000.0);
    // Store sets: the first rounds go early and are squashed, then the pair is learnt.
    let sets = dep("store_sets");
    let v = f(&sets, "lsq.order_violations");
    assert!((1.0..=4.0).contains(&v), "{} violations", v);
    assert_eq!(f(&sets, "lsq.forwarded_loads") + v, 2000.0);
    assert!(f(&sets, "cycles") >= f(&oracle, "cycles"));
    // Conservative (SimpleScalar): as slow as the oracle here, every load follows a store.
    assert!(f(&dep("conservative"), "cycles") >= f(&oracle, "cycles"));
    // The stall is the memory dependence's in the CPI stack.
    assert!(f(&oracle, "cpi.memdep") + f(&oracle, "cpi.execute") > 0.9 * f(&oracle, "cycles"));
}

#[test]
fn folding_the_stack_pointer_frees_pops_from_each_other() {
    // Pops (rbx = [rsp], rsp += 8), x86 numbering (rsp = 4): each reads the stack pointer the
    // one before wrote after its load, unless the write is folded (ChampSim's decode).
    let prog: Vec<Instr> = (0..4000u64).map(|k| mem(0x1000 + (k % 16) * 4, false, 0x7f_0000 + (k % 64) * 8, 8, &[4], &[3, 4])).collect();
    let chained = sim("champsim", &["core.sp_folding=false"], &prog);
    let folded = sim("champsim", &["core.sp_folding=true"], &prog);
    // A dependent L1D hit takes 5 cycles on this machine; independent loads go 2 a cycle
    // (plus the first walk and misses).
    assert!(f(&chained, "cycles") > 4.0 * 4000.0, "{}", f(&chained, "cycles"));
    assert!(f(&folded, "cycles") < 4000.0 * 2.0, "{} vs {}", f(&folded, "cycles"), f(&chained, "cycles"));
    // A variable change of the stack pointer (rsp = rbx, no memory) is not folded: a chain of
    // them through rbx stays a chain.
    let moves: Vec<Instr> = (0..4000u64).flat_map(|k| [ins(0x2000 + (k % 8) * 8, OpClass::Alu, &[3], &[4]), mem(0x2004 + (k % 8) * 8, false, 0x7f_0000 + (k % 64) * 8, 8, &[4], &[3])]).collect();
    let (off, on) = (sim("champsim", &["core.sp_folding=false"], &moves), sim("champsim", &["core.sp_folding=true"], &moves));
    assert_eq!(f(&off, "cycles"), f(&on, "cycles"));
}

/// A branch in x86 numbering (flags: 16) at `pc`, 2 bytes long.
fn branch(pc: u64, srcs: &[u8], b: Branch) -> Instr {
    Instr { branch: b, len: 2, ..ins(pc, OpClass::Branch, srcs, &[]) }
}

#[test]
fn with_the_instruction_pointer_a_register_a_conditional_branch_waits_for_the_branch_before_it() {
    // A loop: a chain of dependent loads (L1D hits), a branch on each loaded value (always
    // not taken), then a branch on a register ready long ago whose direction is random (half
    // mispredicted). Without `core.ip_register` the random branch is found out as soon as it
    // issues; with it (ChampSim: both read and write the instruction pointer) only after the
    // branch on the load, so each misprediction costs the load chain's latency too.
    const FLAGS: u8 = 16;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut prog = Vec::new();
    for k in 0..3000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let taken = x & 1 == 1;
        prog.push(mem(0x1000, false, 0x7f_0000 + (k % 64) * 8, 8, &[1], &[1]));
        prog.push(ins(0x1004, OpClass::Alu, &[1], &[FLAGS]));
        prog.push(branch(0x1008, &[FLAGS], Branch::NotTaken));
        prog.push(ins(0x100a, OpClass::Alu, &[5], &[FLAGS]));
        prog.push(branch(0x100e, &[FLAGS], if taken { Branch::Taken } else { Branch::NotTaken }));
        if !taken {
            prog.push(ins(0x1010, OpClass::Alu, &[5], &[6]));
        }
        prog.push(branch(0x1014, &[], Branch::Taken));
    }
    let (off, on) = (sim("champsim", &["core.ip_register=false"], &prog), sim("champsim", &["core.ip_register=true"], &prog));
    let mispredicts = f(&on, "branch.conditional_mispredicts");
    assert_eq!(mispredicts, f(&off, "branch.conditional_mispredicts"));
    assert!(mispredicts > 1000.0, "{}", mispredicts);
    // A dependent L1D hit takes 5 cycles on this machine: each misprediction waits for one
    // more load-and-branch than without.
    let extra = (f(&on, "cycles") - f(&off, "cycles")) / mispredicts;
    assert!(extra > 3.0, "{} cycles more a misprediction", extra);
    // With a one-cycle operation instead of each load, the wait is that much shorter.
    let alu: Vec<Instr> = prog.iter().map(|i| if i.accesses.is_empty() { i.clone() } else { ins(i.pc, OpClass::Alu, &[5], &[1]) }).collect();
    let (off, on) = (sim("champsim", &["core.ip_register=false"], &alu), sim("champsim", &["core.ip_register=true"], &alu));
    let alu_extra = (f(&on, "cycles") - f(&off, "cycles")) / f(&on, "branch.conditional_mispredicts");
    assert!(alu_extra > 0.0 && alu_extra < extra - 2.0, "{} against {} cycles more a misprediction", alu_extra, extra);
    let e = configure("suh2003", Some("none"), Some("none"), &["core.ip_register=true".to_string()]).and_then(|p| run(&p, &mut VecSource(alu, 0), &RunOptions { instructions: 10, warmup: 0, seed: 1, progress: false, interval: 0 }).map(|_| ()));
    assert!(e.is_err_and(|e| e.0.contains("core.ip_register: needs a BTB")));
}

#[test]
fn a_first_touch_brought_in_by_an_external_record_is_a_miss_of_the_access_that_needs_it() {
    // Lines the environment wrote just before the program reads or writes them (memory a
    // trace never saw written): counted at the protected level as the load's or store's
    // miss, exactly as without the records (ChampSim's LOAD and RFO misses); on `champsim`
    // the OS's writes of page-table entries are the walks' misses, not stores.
    let mut with = Vec::new();
    let mut without = Vec::new();
    for k in 0..200u64 {
        let a = 0x40_0000 + k * 4096 + (k % 64) * 64;
        let access = mem(0x1000 + (k % 8) * 4, k % 3 == 0, a, 8, &[], &[]);
        let mut ext = Instr { external: true, ..Default::default() };
        ext.add_access(true, a, &[0; 8]);
        with.extend([ext, access.clone()]);
        without.push(access);
    }
    // Counts, not timing: a page-structure-cache entry serves a walk once its read returned,
    // so with walks overlapping, memory reads at other times (the records' instead of the
    // accesses') change the walks' reads; one walk at a time on a fixed-latency memory counts
    // both runs alike. Frames in first-touch order: the records touch the data's first page
    // before the code's.
    let first_touch = ["pages.order=first_touch", "memory.model=bus", "ptw.mshrs=1"];
    for preset in ["suh2003", "champsim"] {
        let (w, wo) = (sim_src(preset, &first_touch, &mut VecSource(with.clone(), 0), 200, 0), sim(preset, &first_touch, &without));
        for k in ["l2.misses", "l2.load_misses", "l2.store_misses", "l2.load_accesses", "l2.walk_misses"] {
            assert_eq!(f(&w, k), f(&wo, k), "{} {}", preset, k);
        }
        assert_eq!(f(&w, "l2.load_misses"), 133.0, "{}", preset);
        assert_eq!(f(&w, "l2.store_misses"), 67.0, "{}", preset);
        // A line brought in during the warm-up and first read after it: the write and its
        // memory read are not in the window's statistics, so neither is the miss (every miss
        // counted has its bytes in `mem.read_bytes`); the load is an access.
        let mut ext = Instr { external: true, ..Default::default() };
        ext.add_access(true, 0x50_0000, &[0; 8]);
        let mut prog = vec![ext];
        prog.extend((0..10u64).map(|k| ins(0x1000 + 4 * k, OpClass::Alu, &[], &[1])));
        prog.push(mem(0x1028, false, 0x50_0000, 8, &[], &[2]));
        let s = sim_src(preset, &[], &mut VecSource(prog, 0), 6, 5);
        let get = |k: &str| f(&s, k);
        assert_eq!((get("l2.load_accesses"), get("l2.load_misses"), get("l2.store_accesses")), (1.0, 0.0, 0.0), "{}", preset);
        assert!(get("l2.accesses") >= 1.0 && get("l2.misses") <= get("l2.accesses"), "{}", preset);
    }
}

#[test]
fn a_load_only_partly_in_a_store_reads_the_cache_after_that_store_commits() {
    // A 4-byte store under an 8-byte load: the queue cannot assemble the load.
    let prog = through_memory(500, 4, 8);
    let s = sim("suh2003", &["core.memory_dependence=oracle"], &prog);
    assert_eq!(f(&s, "lsq.partial_overlap_loads"), 500.0);
    assert_eq!(f(&s, "lsq.forwarded_loads"), 0.0);
    let full = sim("suh2003", &["core.memory_dependence=oracle"], &through_memory(500, 8, 8));
    assert!(f(&s, "cycles") > f(&full, "cycles"), "waiting for the commit costs more than forwarding");
}

#[test]
fn page_walks_read_page_table_entries_through_the_caches() {
    // Loads to 64 pages 1 GiB apart: every one a TLB miss, each walk a chain of reads.
    let mut prog = Vec::new();
    for round in 0..2u64 {
        for k in 0..64u64 {
            prog.push(mem(0x1000 + 4 * (k % 4), false, 0x10_0000_0000 + (k << 30) + round * 64, 8, &[], &[3]));
        }
    }
    for layout in ["ptw.layout=radix", "ptw.layout=champsim"] {
        walks_through_the_caches(layout, &prog);
    }
}

fn walks_through_the_caches(layout: &str, prog: &[Instr]) {
    let walk = sim("champsim", &[layout], prog);
    assert!(f(&walk, "ptw.walks") >= 64.0, "{}", f(&walk, "ptw.walks"));
    // Cold walks of a new 1 GiB region read levels 3..1 below the page-structure caches'
    // knowledge of the upper levels (5 levels in all, the first walk from the root).
    assert!(f(&walk, "ptw.reads") >= 3.0 * 64.0, "{}", f(&walk, "ptw.reads"));
    assert!(f(&walk, "ptw.psc_hits") >= 63.0);
    // Reads the L1D and the L2C did not serve reach the protected level, counted there as
    // walks (not as loads).
    let below = f(&walk, "ptw.reads") - f(&walk, "ptw.reads_from_l1d") - f(&walk, "ptw.reads_from_l2c");
    assert!(below > 0.0);
    assert_eq!(f(&walk, "l2.walk_accesses"), below);
    assert_eq!(f(&walk, "ptw.reads_from_l2") + f(&walk, "ptw.reads_from_mem"), below);
    assert!(f(&walk, "ptw.faults") >= 64.0, "first touches fill their entries");
    assert_eq!(f(&walk, "ptw.pte_mismatches"), 0.0);
    assert!(f(&walk, "cpi.tlb") > 0.0);
    let fixed = sim("champsim", &["tlb.walk=false", "tlb.miss_latency=0"], prog);
    assert!(f(&fixed, "cycles") < f(&walk, "cycles"));
    assert!(!fixed.0.iter().any(|(k, _)| k.starts_with("ptw.")), "no walker, no walk statistics");
    // Page-table lines are protected memory: a hash tree verifies them like data.
    let p = configure("champsim", Some("chash"), Some("otp"), &[layout.to_string()]).unwrap();
    let r = run(&p, &mut VecSource(prog.to_vec(), 0), &RunOptions { instructions: 128, warmup: 0, seed: 1, progress: false, interval: 0 }).unwrap();
    assert_eq!(r.error, None);
    assert_eq!(f(&r.stats, "ptw.pte_mismatches"), 0.0);
    assert!(f(&r.stats, "l2.meta_accesses") > 0.0);
}

#[test]
fn champsim_page_tables_give_every_page_its_own_leaf_line_and_re_read_after_a_cache_hit() {
    // One load to each of 64 neighbouring pages of one 2 MiB region, all first touches, each
    // after the one before (its address depends on it): every walk finds the last one's
    // entries (walks started together find older ones: `mmu` tests that).
    let prog: Vec<Instr> = (0..64u64).map(|k| mem(0x1000, false, 0x4000_0000 + (k << 12) + 8, 8, &[3], &[3])).collect();
    let radix = sim("champsim", &["ptw.layout=radix"], &prog);
    let cs = sim("champsim", &["ptw.layout=champsim"], &prog);
    for s in [&radix, &cs] {
        assert_eq!(f(s, "ptw.walks"), 65.0, "64 data pages and the code's");
        assert_eq!(f(s, "ptw.pte_mismatches"), 0.0);
    }
    // The same page-structure caches hit alike; after each hit ChampSim reads once more (the
    // level it hit, in the table of the walk that filled the entry).
    assert_eq!(f(&radix, "ptw.psc_hits"), f(&cs, "ptw.psc_hits"));
    assert!(f(&cs, "ptw.psc_hits") >= 63.0);
    assert_eq!(f(&cs, "ptw.reads") - f(&radix, "ptw.reads"), f(&cs, "ptw.psc_hits"));
    // x86 tables: eight leaf entries to a line, so most leaf reads hit the L1D; ChampSim's:
    // a line per page, every leaf read from beyond it.
    let beyond_l1d = |s: &Stats| f(s, "ptw.reads") - f(s, "ptw.reads_from_l1d");
    // (Eight leaf lines, and the upper levels of the code's walk and the first data walk.)
    assert!(beyond_l1d(&radix) <= 8.0 + 2.0 * 5.0, "{}", beyond_l1d(&radix));
    assert!(beyond_l1d(&cs) >= 64.0, "{}", beyond_l1d(&cs));
    assert!(f(&cs, "cycles") > f(&radix, "cycles"));
}

#[test]
fn the_cpi_stack_sums_to_the_cycles_on_every_workload_and_preset() {
    // Every preset on one workload and every workload on the deepest machine, each without and
    // with protection (the full cross product cost minutes of the test command and covers no
    // more causes: a run this short is mostly set-up).
    let mut runs: Vec<(&str, &str)> = secmem_sim::preset_names().into_iter().map(|p| (p, "mix")).collect();
    runs.extend(builtin_workloads().iter().map(|&(w, _)| ("champsim", w)));
    for (preset, w) in runs {
        for (i, e) in [("none", "none"), ("chash", "otp")] {
            let p = configure(preset, Some(i), Some(e), &[]).unwrap();
            let mut src = builtin(w, 1).unwrap();
            let r = run(&p, &mut *src, &RunOptions { instructions: 10_000, warmup: 2_000, seed: 1, progress: false, interval: 0 }).unwrap();
            assert_eq!(r.error, None);
            let s = r.stats;
            let sum: f64 = s.0.iter().filter(|(k, _)| k.starts_with("cpi.")).map(|(k, _)| f(&s, k)).sum();
            assert_eq!(sum, f(&s, "cycles"), "{} {} {}+{}", preset, w, i, e);
        }
    }
}

#[test]
fn a_trace_and_its_champsim_copy_time_alike() {
    // Fast-forwarding hands the skipped part's memory over as external records, and the
    // consistency adapter supplies memory the window reads first: records a ChampSim copy
    // does not have. They must not hold the pipeline.
    let dir = std::env::temp_dir().join(format!("secmem-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for w in ["mix", "stream"] {
        let (native, champsim) = (dir.join(format!("{w}.smt")), dir.join(format!("{w}.champsim")));
        let n = 150_000;
        for (path, format) in [(&native, "native"), (&champsim, "champsim")] {
            let mut src = Consistent::new(Skip::new(builtin(w, 1).unwrap(), 40_000));
            let e = secmem_trace::export(&mut src, path.to_str().unwrap(), format, n, Numbering::X86).unwrap();
            assert_eq!(e.instructions, n);
            assert!(e.external > 0, "{w}: the copy in native format has external records");
        }
        let ipc = |path: &std::path::Path, sets: &[&str]| {
            let mut src = secmem_trace::open_trace(path.to_str().unwrap()).unwrap();
            f(&sim_src("champsim", sets, &mut *src, n - 30_000, 30_000), "ipc")
        };
        // The native copy's memory image leaves dirty lines the ChampSim copy does not have
        // (mix: 31,651 write-backs in 1 M instructions after 0.2 M, against 8,365): in
        // champsim's write mode each batch of them turns the bus around. Timed here without
        // that, the records themselves must cost nothing.
        let same = ["dram.write_batch=1", "dram.write_turnaround=0"];
        let (a, b) = (ipc(&native, &same), ipc(&champsim, &same));
        let none = ["core.memory_dependence=none", "dram.write_batch=1", "dram.write_turnaround=0"];
        assert!(
            (a / b - 1.0).abs() < 0.02,
            "{w}: native {a:.4}, ChampSim format {b:.4} (without memory dependences {:.4}, {:.4})",
            ipc(&native, &none),
            ipc(&champsim, &none)
        );
    }
}

/// Moved from the trace crate's reader tests so that crate needs no simulator: a ChampSim
/// trace (no values) runs under an integrity and an encryption scheme without a mismatch.
#[test]
fn champsim_trace_simulates_with_consistent_values() {
    // A few thousand records: a loop streaming loads over 2 MiB and storing every 4th line,
    // plus a pointer-like reload of the same lines: more than the L2 holds, so lines are
    // written back, encrypted, hashed and read back.
    let mut recs = Vec::new();
    for k in 0..6000u64 {
        let line = 0x1000_0000 + (k * 64 * 5) % (2 << 20);
        recs.push(ChampSimRecord {
            ip: 0x400000,
            destination_registers: [10, 0],
            source_registers: [7, 0, 0, 0],
            source_memory: [line, 0, 0, 0],
            ..Default::default()
        });
        recs.push(ChampSimRecord {
            ip: 0x400004,
            destination_registers: [7, 0],
            source_registers: [7, 10, 0, 0],
            destination_memory: [if k % 4 == 0 { line + 8 } else { 0 }, 0],
            ..Default::default()
        });
        recs.push(ChampSimRecord {
            ip: 0x400008,
            is_branch: 1,
            branch_taken: (k % 16 != 15) as u8,
            destination_registers: [26, 0],
            source_registers: [25, 26, 0, 0],
            ..Default::default()
        });
    }
    let p = std::env::temp_dir().join(format!("secmem-core-test-{}-sim.champsim.xz", std::process::id()));
    let mut w = ChampSimWriter::create(&p).unwrap();
    recs.iter().for_each(|r| w.write(r).unwrap());
    w.finish().unwrap();
    let params = secmem_sim::configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
    let mut src = secmem_trace::open_trace(p.to_str().unwrap()).unwrap();
    let o = secmem_sim::RunOptions {
        instructions: 15_000,
        warmup: 3_000,
        seed: 1,
        progress: false,
        interval: 0,
    };
    let r = secmem_sim::run(&params, &mut *src, &o).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let st = |k: &str| r.stats.get_f64(k).unwrap_or_else(|| panic!("no stat {k}"));
    assert_eq!(st("trace.value_mismatches"), 0.0);
    assert_eq!(st("instructions"), 15_000.0);
    let ipc = st("ipc");
    assert!(ipc > 0.01 && ipc < 8.0, "ipc {ipc}");
    assert!(st("mem.read_bytes") > 0.0 && st("mem.write_bytes") > 0.0);
    std::fs::remove_file(&p).unwrap();
}
