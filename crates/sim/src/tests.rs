//! Whole-simulator behaviour: functional correctness through the timing path, protection
//! costs, accounting of every byte on the bus, determinism, barriers and bad input.

use crate::{configure, run, RunOptions};
use secmem_core::stats::Stats;
use secmem_trace::workloads::builtin;
use secmem_trace::{Instr, OpClass, TraceError, TraceSource};

fn sim(workload: &str, integ: &str, enc: &str, sets: &[&str], n: u64) -> Stats {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let p = configure("suh2003", Some(integ), Some(enc), &sets).unwrap();
    let mut src = builtin(workload, 1).unwrap();
    let r = run(&p, &mut *src, &RunOptions { instructions: n, warmup: n / 4, seed: 1, progress: false, interval: 0 }).unwrap();
    assert_eq!(r.error, None);
    r.stats
}

fn f(s: &Stats, k: &str) -> f64 {
    s.get_f64(k).unwrap_or_else(|| panic!("missing stat {}", k))
}

#[test]
fn every_workload_reads_back_what_it_wrote_under_every_scheme() {
    for w in ["stream", "chase", "hot", "mix"] {
        for i in secmem_core::registry::INTEGRITY_SCHEMES {
            // otp, or for a tree over counters the first encryption scheme whose counters it protects.
            let pairs = secmem_core::registry::pair_names();
            let e = if i == &"none" { "none" } else if pairs.contains(&(i, "otp")) { "otp" } else { pairs.iter().find(|p| p.0 == *i).unwrap().1 };
            // A small L2 forces evictions, tree traffic and re-fetches of encrypted lines.
            let s = sim(w, i, e, &["l2.size=64KiB"], 50_000);
            assert_eq!(f(&s, "trace.value_mismatches"), 0.0, "{} under {}+{}", w, i, e);
            assert_eq!(f(&s, "instructions"), 50_000.0);
            assert!(f(&s, "l2.misses") > 100.0, "{} must miss in the L2", w);
        }
    }
}

#[test]
fn every_registered_encryption_scheme_runs_real_workloads_through_the_timing_model() {
    // Every scheme of the registry, alone and under a tree, on workloads whose working sets
    // exceed every on-chip metadata store: no error, no value the trace disagrees with. (sgx
    // reported tampering that never happened on exactly these; its unit tests did not.)
    for w in ["mix", "chase"] {
        for e in secmem_core::registry::ENCRYPTION_SCHEMES {
            // Alone, under a tree over data, and under every integrity scheme over its counters.
            let over_counters = secmem_core::registry::pairs()
                .filter(|(i, x)| x.decl.name == *e && i.coverage.protects.contains(&secmem_core::decl::Role::Counters))
                .map(|(i, _)| i.decl.name);
            for i in ["none", "chash"].into_iter().chain(over_counters) {
                let s = sim(w, i, e, &[], 40_000);
                assert_eq!(f(&s, "trace.value_mismatches"), 0.0, "{} under {}+{}", w, i, e);
                assert_eq!(f(&s, "instructions"), 40_000.0, "{} under {}+{}", w, i, e);
            }
        }
    }
}

#[test]
fn protection_costs_ipc_and_every_extra_byte_is_accounted() {
    for w in ["stream", "chase"] {
        let base = sim(w, "none", "none", &[], 200_000);
        for (i, e) in [("chash", "none"), ("none", "otp"), ("chash", "otp")] {
            let s = sim(w, i, e, &[], 200_000);
            assert!(f(&s, "ipc") < f(&base, "ipc"), "{} {}+{}: IPC {} vs base {}", w, i, e, f(&s, "ipc"), f(&base, "ipc"));
            let line = 64.0;
            // Every read is a data line, a tree chunk or an 8-byte time-stamp beat...
            let mut reads = line * (f(&s, "l2.misses") + f(&s, "l2.meta_misses"));
            let mut writes = line * (f(&s, "l2.data_writebacks") + f(&s, "l2.meta_writebacks"));
            if e == "otp" {
                reads += 8.0 * f(&s, "otp.ts_bus_reads");
                writes += 8.0 * f(&s, "otp.writes");
            }
            assert_eq!(f(&s, "mem.read_bytes"), reads, "{} {}+{} read bytes", w, i, e);
            assert_eq!(f(&s, "mem.write_bytes"), writes, "{} {}+{} write bytes", w, i, e);
            assert!(reads + writes > f(&base, "mem.read_bytes") + f(&base, "mem.write_bytes"));
            if i == "chash" {
                assert!(f(&s, "chash.hash_loads_per_miss") > 0.0);
                assert!(f(&s, "l2.meta_accesses") > 0.0);
            }
        }
    }
}

#[test]
fn otp_hides_most_of_the_aes_latency() {
    let s = sim("chase", "none", "otp", &[], 100_000);
    assert!(f(&s, "otp.pad_hidden_fraction") > 0.5, "{}", f(&s, "otp.pad_hidden_fraction"));
}

#[test]
fn mecu_resume_cycles_eaten_by_reencryption_are_counted_as_saturated() {
    // 256 KiB blocks take ~330 k cycles each to re-encrypt; chase writes to many of them.
    let n = 60_000;
    let fast = ["mecu.lines_per_block=4096", "mecu.resume_period=1000000"];
    let s = sim("chase", "none", "mecu", &fast, n);
    assert!(f(&s, "mecu.saturated_resume_cycles") >= 1.0, "{:?}", s.get("mecu.stall_cycles_per_resume_cycle"));
    let slow = ["mecu.lines_per_block=16", "mecu.resume_period=1000000"];
    let s = sim("chase", "none", "mecu", &slow, n);
    assert!(f(&s, "mecu.resumes") >= 1.0);
    assert_eq!(f(&s, "mecu.saturated_resume_cycles"), 0.0, "{:?}", s.get("mecu.stall_cycles_per_resume_cycle"));
}

#[test]
fn identical_inputs_give_identical_statistics() {
    let a = sim("mix", "chash", "otp", &[], 100_000);
    let b = sim("mix", "chash", "otp", &[], 100_000);
    let strip = crate::run::simulated;
    assert_eq!(strip(&a), strip(&b));
    let c = sim("mix", "chash", "otp", &["l2.size=256KiB"], 100_000);
    assert_ne!(strip(&a), strip(&c));
}

#[test]
fn a_smaller_l2_misses_more() {
    let small = sim("hot", "none", "none", &["l2.size=256KiB"], 300_000);
    let big = sim("hot", "none", "none", &["l2.size=4MiB"], 300_000);
    assert!(f(&small, "l2.miss_rate") > f(&big, "l2.miss_rate"));
}

/// A hand-written trace.
struct VecSource(Vec<Instr>, usize);

impl TraceSource for VecSource {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.1 >= self.0.len() {
            return Ok(false);
        }
        *out = self.0[self.1].clone();
        self.1 += 1;
        Ok(true)
    }
    fn name(&self) -> &str {
        "vec"
    }
}

fn load(pc: u64, addr: u64, dst: u8) -> Instr {
    let mut i = Instr { pc, len: 4, op: OpClass::Mem, ..Default::default() };
    i.add_access(false, addr, &[0u8; 8]);
    i.add_dst(dst);
    i
}

#[test]
fn a_barrier_waits_for_pending_integrity_checks() {
    let mut prog = vec![];
    for k in 0..200u64 {
        prog.push(load(0x1000, 0x10_0000 + k * 4096 * 7, 1));
        let mut b = Instr { pc: 0x1004, len: 4, op: OpClass::Barrier, ..Default::default() };
        b.add_src(2); // independent of the load: only the check can hold it
        prog.push(b);
    }
    let stall = |integ: &str| {
        let p = configure("suh2003", Some(integ), Some("none"), &["core.syscall_barriers=true".into()]).unwrap();
        let mut src = VecSource(prog.clone(), 0);
        let r = run(&p, &mut src, &RunOptions { instructions: 400, warmup: 0, seed: 1, progress: false, interval: 0 }).unwrap();
        assert_eq!(r.error, None);
        (f(&r.stats, "core.barrier_stall_cycles"), f(&r.stats, "core.barriers"))
    };
    let (with_chash, n) = stall("chash");
    assert_eq!(n, 200.0);
    assert!(with_chash > 0.0);
    assert_eq!(stall("none").0, 0.0, "no checks, nothing to wait for");
}

/// Run `src` under lhash (no encryption) for `n` instructions, no warm-up.
fn lhash_run(src: &mut dyn TraceSource, n: u64, sets: &[&str]) -> Stats {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let p = configure("suh2003", Some("lhash"), Some("none"), &sets).unwrap();
    let r = run(&p, src, &RunOptions { instructions: n, warmup: 0, seed: 1, progress: false, interval: 0 }).unwrap();
    assert_eq!(r.error, None);
    r.stats
}

#[test]
fn system_calls_check_lhash_memory_only_when_they_are_made_signing_barriers() {
    let mut prog = vec![];
    for k in 0..20u64 {
        prog.push(load(0x1000, 0x10_0000 + k * 4096, 1));
        prog.push(Instr { pc: 0x1004, len: 2, op: OpClass::Barrier, ..Default::default() });
    }
    let s = lhash_run(&mut VecSource(prog.clone(), 0), 40, &[]);
    assert_eq!((f(&s, "lhash.checks"), f(&s, "lhash.check_cycles"), f(&s, "core.barriers")), (0.0, 0.0, 0.0));
    let s = lhash_run(&mut VecSource(prog, 0), 40, &["core.syscall_barriers=true"]);
    assert_eq!((f(&s, "lhash.checks"), f(&s, "core.barriers")), (20.0, 20.0));
    assert!(f(&s, "lhash.check_cycles") > 0.0 && f(&s, "core.barrier_stall_cycles") > 0.0);
}

fn store(pc: u64, addr: u64, v: u8) -> Instr {
    let mut i = Instr { pc, len: 4, op: OpClass::Mem, ..Default::default() };
    i.add_access(true, addr, &[v; 8]);
    i
}

#[test]
fn pages_built_before_the_window_are_not_added_inside_it() {
    use secmem_trace::{Consistent, Skip};
    // The fast-forwarded part builds 16 pages; the window reads them, then a system call
    // writes a page nobody touched before (the kernel allocating it now).
    let pages: Vec<u64> = (0..16u64).map(|k| 0x20_0000 + k * 4096 * 3).collect();
    let built: Vec<Instr> = pages.iter().map(|&a| store(0x1000, a, 7)).collect();
    let mut window: Vec<Instr> = pages.iter().map(|&a| {
        let mut l = load(0x1004, a, 1);
        l.data.fill(7);
        l
    }).collect();
    window.push(Instr { pc: 0x1008, len: 2, op: OpClass::Barrier, ..Default::default() });
    let mut io = Instr { external: true, ..Default::default() };
    io.add_access(true, 0x90_0000, &[9; 8]);
    window.push(io);
    window.push(load(0x100a, 0x90_0000, 2));
    let n = window.iter().filter(|i| !i.external).count() as u64;
    let added = |s: &Stats| (f(s, "lhash.pages_added"), f(s, "lhash.pages_predating"));
    // Skipped in the simulator (`--skip` of a trace file): the image comes first.
    let prog: Vec<Instr> = built.iter().chain(&window).cloned().collect();
    let mut skipped = Consistent::new(Skip::new(VecSource(prog, 0), built.len() as u64));
    let s = lhash_run(&mut skipped, n, &[]);
    assert_eq!(f(&s, "trace.value_mismatches"), 0.0);
    // The code page and the system call's page are added in the window, timed.
    assert_eq!(added(&s), (18.0, 16.0));
    let set_up_bytes = 16.0 * 4096.0;
    assert!(f(&s, "mem.write_bytes") < set_up_bytes, "{}", f(&s, "mem.write_bytes"));
    // Skipped by the tracer: the window's loads find memory never seen, supplied lazily.
    let mut lazy = Consistent::new(VecSource(window.clone(), 0));
    let s = lhash_run(&mut lazy, n, &[]);
    assert_eq!(added(&s), (18.0, 16.0));
    assert!(f(&s, "mem.write_bytes") < set_up_bytes);
    // The program building the same pages inside the window pays for adding them.
    let prog: Vec<Instr> = built.iter().chain(&window).cloned().collect();
    let s = lhash_run(&mut VecSource(prog, 0), n + built.len() as u64, &[]);
    assert_eq!(added(&s), (18.0, 0.0));
    assert!(f(&s, "mem.write_bytes") >= set_up_bytes);
}

#[test]
fn pages_a_tracer_saw_touched_before_the_window_are_set_up_untimed_when_first_used() {
    use secmem_trace::Skip;
    // The window only stores to 16 pages the program had used before it (no load brings
    // their bytes in as an external record); a 17th page is new in the window.
    let pages: Vec<u64> = (0..16u64).map(|k| 0x20_0000 + k * 4096 * 3).collect();
    let mut window: Vec<Instr> = pages.iter().map(|&a| store(0x1000, a, 7)).collect();
    window.push(store(0x1004, 0x90_0000, 9));
    let n = window.len() as u64;
    let added = |s: &Stats| (f(s, "lhash.pages_added"), f(s, "lhash.pages_predating"));
    let mut named = Instr::default();
    // Named in a different order than used, plus one page the window never touches.
    named.set_pages(pages.iter().rev().map(|a| a >> 12).chain([0x70_0000 >> 12]));
    assert!(named.is_pages());
    let with: Vec<Instr> = std::iter::once(named.clone()).chain(window.iter().cloned()).collect();
    let s_with = lhash_run(&mut VecSource(with, 0), n, &[]);
    let s_without = lhash_run(&mut VecSource(window.clone(), 0), n, &[]);
    // Code page and the new page are added in the window; the 16 named pages before it, and
    // the page never used is never added.
    assert_eq!(added(&s_with), (18.0, 16.0));
    assert_eq!(added(&s_without), (18.0, 0.0));
    let set_up_bytes = 16.0 * 4096.0;
    assert!(f(&s_with, "mem.write_bytes") + set_up_bytes <= f(&s_without, "mem.write_bytes"), "{} vs {}", f(&s_with, "mem.write_bytes"), f(&s_without, "mem.write_bytes"));
    // Frames are still given out in the window's order: data traffic is the same apart from
    // the set-up.
    assert_eq!(f(&s_with, "l2.misses"), f(&s_without, "l2.misses"));
    // A simulator-side --skip over a trace that starts with the record hands it on.
    let before: Vec<Instr> = vec![named, store(0x1008, 0x80_0000, 1)];
    let prog: Vec<Instr> = before.iter().chain(&window).cloned().collect();
    let s = lhash_run(&mut Skip::new(VecSource(prog, 0), 1), n, &[]);
    // (The skipped store's page comes in the image, also before the window.)
    assert_eq!(added(&s), (19.0, 17.0));
}

#[test]
fn a_trace_shorter_than_the_warmup_is_reported_not_hidden() {
    let p = configure("suh2003", None, None, &[]).unwrap();
    let mut src = VecSource(vec![load(0x1000, 0x2000, 1); 10], 0);
    let r = run(&p, &mut src, &RunOptions { instructions: 100, warmup: 50, seed: 1, progress: false, interval: 0 }).unwrap();
    assert_eq!(r.error.unwrap(), "the trace ended after 10 instructions, before the warm-up of 50 was over");
    assert_eq!(r.stats.get_f64("instructions"), Some(0.0));
}

#[test]
fn a_trace_beyond_physical_memory_stops_with_a_clear_error_and_keeps_results() {
    let p = configure("suh2003", Some("none"), Some("none"), &["memory.size=64KiB".into()]).unwrap();
    let prog: Vec<Instr> = (0..100u64).map(|k| load(0x1000, k * 4096, 1)).collect();
    let mut src = VecSource(prog, 0);
    let r = run(&p, &mut src, &RunOptions { instructions: 100, warmup: 0, seed: 1, progress: false, interval: 0 }).unwrap();
    let e = r.error.unwrap();
    assert!(e.starts_with("out of simulated physical memory at virtual address"), "{}", e);
    assert!(r.stats.get_f64("instructions").unwrap() > 0.0);
}

#[test]
fn scheme_names_are_checked_wherever_they_come_from() {
    let e = configure("suh2003", Some("merkle"), None, &[]).unwrap_err().0;
    let all = secmem_core::registry::INTEGRITY_SCHEMES.join(", ");
    assert_eq!(e, format!("unknown integrity scheme 'merkle' (choose from {})", all));
    let e = configure("suh2003", None, None, &["encryption=rot13".into()]).unwrap_err().0;
    assert!(e.starts_with("unknown encryption scheme 'rot13'"), "{}", e);
    let e = configure("suh2003", None, None, &["l2.sise=1MiB".into()]).unwrap_err().0;
    assert!(e.contains("did you mean 'l2.size'"), "{}", e);
}

#[test]
fn every_declared_parameter_is_read_by_some_component() {
    // A declared key nobody reads would be a silent no-op for users who --set it.
    let p = configure("suh2003", None, None, &[]).unwrap();
    let mut models = vec![p.clone()];
    let mut dram = p.clone();
    dram.set("memory.model", "dram").unwrap();
    models.push(dram);
    for ca in secmem_core::codeauth::CODEAUTH_SCHEMES.iter().skip(1) {
        let mut q = p.clone();
        q.set("codeauth", ca).unwrap();
        models.push(q);
    }
    // Frequent-value speculation reads its own keys only when it is on.
    let mut fv = p.clone();
    fv.set("speculation.frequent_values", "8").unwrap();
    models.push(fv);
    for base in &models {
        for (i, e) in secmem_core::registry::pair_names() {
            {
                let mut q = base.clone();
                q.set("integrity", i).unwrap();
                q.set("encryption", e).unwrap();
                let eng = secmem_core::Engine::new(&q, 1).unwrap();
                crate::ooo::Core::new(&q, &eng).unwrap();
                crate::run::IpcSampler::new(&q).unwrap();
                // Clones share nothing: fold this combination's reads into p's record.
                for k in q.keys_read() {
                    let _ = p.str(&k);
                }
            }
        }
    }
    let read = p.keys_read();
    for c in crate::components() {
        // `description` is read by the CLI's preset list.
        for d in c.params.iter().filter(|d| d.key != "description") {
            assert!(read.contains(d.key), "{} declares '{}', which no component reads", c.name, d.key);
        }
    }
    // And every key a preset gives is declared.
    for name in crate::preset_names() {
        let q = crate::load_preset(name).unwrap();
        // A cache level a preset adds (`caches.private`) has the keys every level has.
        let levels = q.str("caches.private").unwrap();
        let level_key = |k: &str| {
            k.split_once('.').is_some_and(|(l, key)| levels.split(',').any(|n| n.trim() == l) && crate::hierarchy::LEVEL_KEYS.contains(&key))
        };
        for k in q.keys() {
            let declared = crate::components().iter().any(|c| c.params.iter().any(|d| d.key == k));
            assert!(k == "inherit" || declared || level_key(k), "preset {} sets '{}', which nothing declares", name, k);
        }
    }
}

#[test]
fn declarations_have_units_and_meanings_and_each_key_is_declared_once() {
    let mut seen = std::collections::BTreeSet::new();
    for c in crate::components() {
        assert!(!c.summary.is_empty() && !c.source.is_empty(), "{}", c.name);
        for d in c.params {
            assert!(seen.insert(d.key), "'{}' is declared twice", d.key);
            assert!(!d.unit.is_empty() && d.meaning.len() > 3, "{}: unit and meaning", d.key);
        }
    }
    // Statistics too: once each (a parameter's own key is the parameter's), with unit and meaning.
    let mut stats = std::collections::BTreeSet::new();
    for c in crate::components() {
        for d in c.stats {
            assert!(stats.insert(d.key) && !seen.contains(d.key), "statistic '{}' is declared twice", d.key);
            assert!(!d.unit.is_empty() && d.meaning.len() > 3, "{}: unit and meaning", d.key);
        }
    }
}

#[test]
fn a_typo_in_a_preset_file_is_refused() {
    let dir = std::env::temp_dir().join(format!("secmem-preset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("typo.toml");
    std::fs::write(&f, "inherit = \"suh2003\"\n[l2]\nsise = \"256KiB\"\n").unwrap();
    let e = crate::load_preset(f.to_str().unwrap()).unwrap_err().0;
    assert!(e.ends_with("unknown parameter 'l2.sise' (did you mean 'l2.size'?)"), "{}", e);
}

#[test]
fn frequent_value_speculation_keeps_the_data_and_sees_the_frequent_chunks_of_real_runs() {
    // 004 §3.2 on the shi2007 machine: the program sees the same values, the same lines move,
    // and most of hot's fetched chunks are frequent values (whether a speculation is in time is
    // the tdes tests' subject). shi2007's memory starts encrypted (memory.boot_encrypted), so
    // hot's never-written lines of zeros are ciphertext that the speculation matches.
    for w in ["stream", "hot"] {
        let go = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            let p = configure("shi2007", None, None, &sets).unwrap();
            let mut src = builtin(w, 1).unwrap();
            let r = run(&p, &mut *src, &RunOptions { instructions: 60_000, warmup: 20_000, seed: 1, progress: false, interval: 0 }).unwrap();
            assert_eq!(r.error, None);
            r.stats
        };
        // Both on the same replicated engines (004 §3.2: "pipelined and replicated").
        let off = go(&["tdes.engines=4"]);
        let on = go(&["tdes.engines=4", "speculation.frequent_values=8"]);
        assert_eq!(f(&on, "trace.value_mismatches"), 0.0, "{}", w);
        assert_eq!(f(&on, "mem.read_bytes"), f(&off, "mem.read_bytes"), "{}: speculation moved other bytes", w);
        assert!(f(&on, "speculation.fv_chunks") > 0.0, "{}", w);
        // hot's lines are mostly small values and zeros; stream's doubles are rarely frequent.
        if w == "hot" {
            assert!(f(&on, "speculation.fv_frequent_fraction") > 0.5, "{}", w);
            assert!(f(&on, "speculation.fv_hit_fraction") > 0.5, "{}", w);
        }
    }
}

#[test]
fn aes_speculation_with_reordered_chunks_keeps_the_data_of_real_runs() {
    // ocb re-orders each written line by its frequent value bitmap (004 §3.2.2): the program
    // still sees every value it wrote, and the lines that move besides are the bitmaps' own.
    let go = |sets: &[&str]| {
        let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        sets.push("encryption=ocb".into());
        let p = configure("shi2007", None, None, &sets).unwrap();
        let mut src = builtin("hot", 1).unwrap();
        let r = run(&p, &mut *src, &RunOptions { instructions: 60_000, warmup: 20_000, seed: 1, progress: false, interval: 0 }).unwrap();
        assert_eq!(r.error, None);
        r.stats
    };
    let off = go(&[]);
    let on = go(&["speculation.frequent_values=8"]);
    assert_eq!(f(&on, "trace.value_mismatches"), 0.0);
    assert!(f(&on, "speculation.fv_hits") > 0.0);
    let bitmap_reads = f(&on, "ocb.bitmap_bus_reads") + f(&on, "ocb.bitmap_prefetches");
    assert_eq!(f(&on, "mem.reads") - f(&off, "mem.reads"), bitmap_reads);
}

/// Every statistic a run reports is declared by its owner, next to its parameters (issue
/// 34): every registered scheme pair (from the registry, so a new scheme is checked from its
/// registration on), plus the runs that report more — a sampled run, the champsim machine
/// (private levels, BTB, page walker, DRAM), shi2007's DRAM, code authentication, time-stamp
/// speculation and the IPC series. A key that fails here needs a `stat(...)` in the
/// `stats` list of the component that reports it.
///
/// Every run but the first sets mix's image up lazily: a run reports the same keys either
/// way (compared on all 64 pairs), and writing the 31 MiB image through the timed path made
/// this one test 270 s of the Rust tests' ~450 s.
#[test]
fn every_statistic_a_run_reports_is_declared() {
    use secmem_core::decl::find_stat;
    let comps = crate::components();
    let mut undeclared = std::collections::BTreeSet::new();
    let mut runs: Vec<(&str, String, String, Vec<String>, Option<&str>)> = vec![("suh2003", "chash".into(), "otp".into(), vec![], None)];
    for (i, e) in secmem_core::registry::pair_names() {
        runs.push(("suh2003", i.to_string(), e.to_string(), vec![], None));
    }
    // A counter cache (write-back) reports its own keys.
    runs.push(("suh2003", "bonsai".into(), "split".into(), vec!["split.cache_blocks=16".into()], None));
    let sets = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    runs.push(("suh2003", "chash".into(), "otp".into(), sets(&["speculation.stamps=true", "sample.ipc_period=5000"]), None));
    runs.push(("suh2003", "chash".into(), "otp".into(), sets(&["codeauth=pr-aes", "memory.write_delay=200"]), None));
    runs.push(("suh2003", "none".into(), "ocb".into(), sets(&["speculation.frequent_values=16"]), None));
    runs.push(("suh2003", "chash".into(), "otp".into(), vec![], Some("2000:500:500")));
    runs.push(("champsim", "none".into(), "none".into(), vec![], None));
    runs.push(("shi2007", "none".into(), "tdes".into(), vec![], None));
    for (k, (preset, i, e, mut sets, sample)) in runs.into_iter().enumerate() {
        if k > 0 {
            sets.push("pages.image=lazy".into());
        }
        let p = configure(preset, Some(&i), Some(&e), &sets).unwrap_or_else(|err| panic!("{preset} {i}+{e} {sets:?}: {err}"));
        let mut src = builtin("mix", 1).unwrap();
        let o = RunOptions { instructions: 8_000, warmup: 2_000, seed: 1, progress: false, interval: 0 };
        let plan = sample.map(|s| crate::Sampling::parse(s, o.instructions).unwrap());
        let r = crate::run_sampled(&p, &mut *src, &o, plan).unwrap();
        assert_eq!(r.error, None, "{preset} {i}+{e} {sets:?}");
        for (k, _) in &r.stats.0 {
            if find_stat(comps.iter().copied(), k).is_none() {
                undeclared.insert(format!("{k} ({preset} {i}+{e} {})", sets.join(" ")));
            }
        }
    }
    assert!(undeclared.is_empty(), "statistics no component declares:\n{}", undeclared.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn statistic_patterns_stand_for_the_keys_named_at_run_time() {
    use secmem_core::decl::stat;
    assert!(stat("ci95.*", "", "").matches("ci95.l2.miss_rate"));
    assert!(!stat("ci95.*", "", "").matches("ci95"));
    assert!(stat("ptw.reads_from_*", "", "").matches("ptw.reads_from_l1d"));
    assert!(!stat("ptw.reads_from_*", "", "").matches("ptw.reads_from_"));
    assert!(stat("*.accesses", "", "").matches("l2c.accesses"));
    assert!(!stat("*.accesses", "", "").matches("core0.l2c.accesses"));
    assert!(stat("core#.ipc", "", "").matches("core12.ipc"));
    assert!(!stat("core#.ipc", "", "").matches("corex.ipc"));
    assert!(stat("l2.misses", "", "").matches("l2.misses") && !stat("l2.misses", "", "").matches("l2.misses_x"));
}

fn with(workload: &str, sets: &[&str], o: RunOptions) -> Stats {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let p = configure("suh2003", Some("chash"), Some("otp"), &sets).unwrap();
    let mut src = builtin(workload, 1).unwrap();
    let r = run(&p, &mut *src, &o).unwrap();
    assert_eq!(r.error, None);
    r.stats
}

#[test]
fn intervals_cut_the_measured_region_and_add_up_to_its_totals() {
    let o = RunOptions { instructions: 50_000, warmup: 10_000, seed: 1, progress: false, interval: 12_000 };
    let s = with("mix", &[], o.clone());
    let series = |k: &str| s.get_series(k).unwrap_or_else(|| panic!("no {k}")).to_vec();
    // 50k in pieces of 12k: four whole ones and the 2k left.
    assert_eq!(series("interval.instructions"), [12_000.0, 12_000.0, 12_000.0, 12_000.0, 2_000.0]);
    assert_eq!(f(&s, "interval.period"), 12_000.0);
    for (k, total) in [("interval.cycles", "cycles"), ("interval.l2.misses", "l2.misses"), ("interval.mem.read_bytes", "mem.read_bytes"), ("interval.mem.write_bytes", "mem.write_bytes")] {
        assert_eq!(series(k).iter().sum::<f64>(), f(&s, total), "{k}");
    }
    let (ipc, n, c) = (series("interval.ipc"), series("interval.instructions"), series("interval.cycles"));
    for i in 0..ipc.len() {
        assert!((ipc[i] - n[i] / c[i]).abs() < 1e-12);
    }
    // Off, a run reports no intervals and the same statistics otherwise.
    let plain = with("mix", &[], RunOptions { interval: 0, ..o });
    assert!(plain.get("interval.ipc").is_none());
    let without = |s: &Stats| crate::run::simulated(&Stats(s.0.iter().filter(|(k, _)| !k.starts_with("interval.")).cloned().collect()));
    assert_eq!(without(&s), without(&plain));
}

#[test]
fn a_warmup_too_short_for_the_l2_brings_in_fewer_lines_than_it_holds() {
    // 20k instructions of stream bring in a few thousand lines: far from a 4 MiB L2's 65,536.
    let o = RunOptions { instructions: 50_000, warmup: 20_000, seed: 1, progress: false, interval: 0 };
    let short = with("stream", &["l2.size=4MiB"], o.clone());
    assert_eq!(f(&short, "l2.lines"), (4 << 20) as f64 / 64.0);
    let fills = f(&short, "l2.warmup_fills");
    assert!(fills > 100.0 && fills < f(&short, "l2.lines") / 4.0, "{fills}");
    // A 16 KiB L2 (256 lines) is turned over many times by the same warm-up.
    let small = with("stream", &["l2.size=16KiB"], o.clone());
    assert!(f(&small, "l2.warmup_fills") > 4.0 * f(&small, "l2.lines"));
    // No warm-up, no fills.
    assert_eq!(f(&with("stream", &[], RunOptions { warmup: 0, ..o }), "l2.warmup_fills"), 0.0);
}

/// Pairs enough to reach every scheme: each integrity scheme over otp (or the first
/// encryption scheme it pairs with), each encryption scheme alone (or under the first
/// integrity scheme it needs).
fn every_scheme_once() -> Vec<(&'static str, &'static str)> {
    let pairs = secmem_core::registry::pair_names();
    let mut v: Vec<(&str, &str)> = Vec::new();
    for &(i, e) in &pairs {
        let want = (i, if pairs.contains(&(i, "otp")) { "otp" } else { e });
        if !v.iter().any(|p| p.0 == i) && want == (i, e) {
            v.push(want);
        }
    }
    for &(i, e) in &pairs {
        if !v.iter().any(|p| p.1 == e) {
            v.push(if pairs.contains(&("none", e)) { ("none", e) } else { (i, e) });
        }
    }
    v
}

#[test]
fn a_lazily_set_up_image_gives_every_load_the_bytes_a_timed_image_gives() {
    // Every load is compared with the trace's value (`trace.value_mismatches`): a page of
    // the image set up wrongly, or not at all, reads differently from the timed image.
    for w in ["hot", "mix", "stream"] {
        let timed = sim(w, "chash", "otp", &[], 20_000);
        assert_eq!(f(&timed, "trace.value_mismatches"), 0.0, "{} timed", w);
        for (i, e) in every_scheme_once() {
            let s = sim(w, i, e, &["pages.image=lazy"], 20_000);
            assert_eq!(f(&s, "trace.value_mismatches"), 0.0, "{} under {}+{}, lazy", w, i, e);
            assert_eq!(f(&s, "instructions"), 20_000.0, "{} under {}+{}, lazy", w, i, e);
            if (i, e) == ("chash", "otp") {
                // The image's pages have the frames a timed image gives them: the program's
                // lines fall in the same L1D sets (in touch order stream's arrays did not).
                for k in ["l1d.miss_rate", "tlb.dtlb_misses"] {
                    assert_eq!(f(&s, k), f(&timed, k), "{} {}", w, k);
                }
            }
        }
    }
    // The image's cost is out of the statistics: mix's 31 MiB take nearly all of a short
    // timed run's cycles with no warm-up.
    let o = RunOptions { instructions: 10_000, warmup: 0, seed: 1, progress: false, interval: 0 };
    let cycles = |sets: &[String]| {
        let p = configure("suh2003", Some("chash"), Some("otp"), sets).unwrap();
        let r = run(&p, &mut *builtin("mix", 1).unwrap(), &o).unwrap();
        (f(&r.stats, "cycles"), f(&r.stats, "mem.write_bytes"), f(&r.stats, "trace.value_mismatches"))
    };
    let (timed, lazy) = (cycles(&[]), cycles(&["pages.image=lazy".into()]));
    assert!(lazy.0 * 100.0 < timed.0, "cycles: lazy {} against timed {}", lazy.0, timed.0);
    assert!(lazy.1 * 100.0 < timed.1, "bytes written: lazy {} against timed {}", lazy.1, timed.1);
    assert_eq!((timed.2, lazy.2), (0.0, 0.0));
}

#[test]
fn a_lazy_image_page_first_touched_by_a_fetch_a_load_a_store_or_the_kernel_holds_the_image() {
    // Four pages of image, each first touched another way, plus a page the image never wrote.
    let (code, data, stored, kernel) = (0x40_0000u64, 0x60_0000u64, 0x61_0000u64, 0x62_0000u64);
    // Bytes of the image at page `a`: deterministic, distinct per page (xorshift).
    let img = |a: u64| {
        let mut x = a | 1;
        (0..4096).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }).collect::<Vec<u8>>()
    };
    // The data page is mapped before its image comes (a checkpoint's page order): its bytes
    // are set up as they come.
    let mut mapped = Instr::default();
    mapped.set_mapped([data >> 12].into_iter());
    let mut prog = vec![mapped];
    for a in [code, data, stored, kernel] {
        let mut x = Instr { external: true, ..Default::default() };
        x.add_access(true, a, &img(a)[..2048]);
        prog.push(x);
        let mut x = Instr { external: true, ..Default::default() };
        x.add_access(true, a + 2048, &img(a)[2048..]);
        prog.push(x);
    }
    let load_of = |pc: u64, a: u64, bytes: &[u8]| {
        let mut l = Instr { pc, len: 4, op: OpClass::Mem, ..Default::default() };
        l.add_access(false, a, bytes);
        l.add_dst(1);
        l
    };
    let (c, d, s, k) = (img(code), img(data), img(stored), img(kernel));
    // Fetched first (its own code), then read as data.
    prog.push(Instr { pc: code + 64, len: 4, op: OpClass::Alu, ..Default::default() });
    prog.push(load_of(code + 68, code + 64, &c[64..72]));
    prog.push(load_of(code + 72, data + 1000, &d[1000..1016]));
    let mut st = Instr { pc: code + 76, len: 4, op: OpClass::Mem, ..Default::default() };
    st.add_access(true, stored + 8, &[0xAB; 8]);
    prog.push(st);
    let mut after: Vec<u8> = s[..24].to_vec();
    after[8..16].fill(0xAB);
    prog.push(load_of(code + 80, stored, &after));
    // A system call whose kernel writes part of a page nobody touched yet.
    prog.push(Instr { pc: code + 84, len: 2, op: OpClass::Barrier, ..Default::default() });
    let mut io = Instr { external: true, ..Default::default() };
    io.add_access(true, kernel + 100, &[0x5A; 4]);
    prog.push(io);
    let mut after: Vec<u8> = k[96..112].to_vec();
    after[4..8].fill(0x5A);
    prog.push(load_of(code + 86, kernel + 96, &after));
    prog.push(load_of(code + 90, 0x70_0000, &[0; 8]));
    let n = prog.iter().filter(|i| !i.external).count() as u64;
    let run_with = |integ: &str, enc: &str, image: &str, prog: &[Instr]| {
        let p = configure("suh2003", Some(integ), Some(enc), &[format!("pages.image={}", image)]).unwrap();
        let r = run(&p, &mut VecSource(prog.to_vec(), 0), &RunOptions { instructions: n, warmup: 0, seed: 1, progress: false, interval: 0 }).unwrap();
        assert_eq!(r.error, None, "{}+{} {}", integ, enc, image);
        f(&r.stats, "trace.value_mismatches")
    };
    for (i, e) in every_scheme_once() {
        for image in ["timed", "lazy"] {
            assert_eq!(run_with(i, e, image, &prog), 0.0, "{}+{}, {}", i, e, image);
        }
    }
    // Without the image the same loads read other bytes: the check can fail.
    let bare: Vec<Instr> = prog.iter().skip(9).cloned().collect();
    assert!(run_with("chash", "otp", "lazy", &bare) >= 4.0);
}

/// The run loop's plain stretches (records a slice at a time, from a read-ahead, stepped
/// through `Core::step_all`) simulate exactly what its record-at-a-time path does: the same
/// statistics on mix, whose external records fall among its instructions, with a warm-up and
/// a length that are not multiples of the loop's 256; and the same error at the same
/// instruction when a step fails inside a stretch.
#[test]
fn stretches_read_ahead_run_as_records_one_at_a_time() {
    use secmem_trace::ReadAhead;
    let p = configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
    let o = RunOptions { instructions: 30_001, warmup: 10_007, seed: 1, progress: false, interval: 0 };
    let one = run(&p, &mut *builtin("mix", 1).unwrap(), &o).unwrap();
    let many = run(&p, &mut ReadAhead::new(builtin("mix", 1).unwrap()), &o).unwrap();
    assert!(one.error.is_none() && many.error.is_none());
    assert_eq!(f(&one.stats, "instructions"), 30_001.0);
    let strip = crate::run::simulated;
    assert_eq!(strip(&one.stats), strip(&many.stats));
    let p = configure("suh2003", Some("none"), Some("none"), &["memory.size=64KiB".into()]).unwrap();
    let mut prog: Vec<Instr> = (0..300u64).map(|k| load(0x1000 + 4 * k, 0x8000, 1)).collect();
    prog.extend((0..100u64).map(|k| load(0x2000, k * 4096, 1)));
    let o = RunOptions { instructions: 400, warmup: 0, seed: 1, progress: false, interval: 0 };
    let one = run(&p, &mut VecSource(prog.clone(), 0), &o).unwrap().error.unwrap();
    let many = run(&p, &mut ReadAhead::new(VecSource(prog, 0)), &o).unwrap().error.unwrap();
    assert!(one.starts_with("out of simulated physical memory") && !one.contains("instruction 256)"), "{one}");
    assert_eq!(one, many);
}

/// Records read into packed slots (`secmem_trace::packed`: a native trace through
/// `ReadAhead` or `ReadInline`, its external records and big records kept whole in spill
/// slots) simulate exactly what the same file's records read one at a time do: the same statistics on mix,
/// in full detail on suh2003 and on the champsim preset (queues, BTB, stack-pointer folding,
/// fetch buffer), sampled, and with intervals.
#[test]
fn packed_records_read_ahead_run_as_plain_records() {
    use crate::sample::Sampling;
    use secmem_trace::{NativeReader, NativeWriter, ReadAhead, ReadInline};
    let path = std::env::temp_dir().join(format!("secmem-packed-{}.smt", std::process::id()));
    let mut w = NativeWriter::create(&path).unwrap();
    let mut src = builtin("mix", 1).unwrap();
    let mut r = Instr::default();
    for _ in 0..60_000 {
        assert!(src.next_into(&mut r).unwrap());
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    let strip = crate::run::simulated;
    let o = RunOptions { instructions: 40_001, warmup: 10_007, seed: 1, progress: false, interval: 0 };
    let plan = Some(Sampling { period: 10_000, window: 2_000, warming: 3_000 });
    let cases = [("suh2003", None, 0), ("champsim", None, 0), ("suh2003", plan, 0), ("suh2003", None, 7_000)];
    for (preset, plan, interval) in cases {
        let p = configure(preset, Some("chash"), Some("otp"), &[]).unwrap();
        let o = RunOptions { interval, ..o.clone() };
        let plain = crate::run::run_sampled(&p, &mut NativeReader::open(&path).unwrap(), &o, plan).unwrap();
        let ahead = crate::run::run_sampled(&p, &mut ReadAhead::new(NativeReader::open(&path).unwrap()), &o, plan).unwrap();
        let inline = crate::run::run_sampled(&p, &mut ReadInline::new(NativeReader::open(&path).unwrap()), &o, plan).unwrap();
        for (how, packed) in [("read ahead", ahead), ("inline", inline)] {
            assert!(plain.error.is_none() && packed.error.is_none(), "{preset} {how}: {:?} {:?}", plain.error, packed.error);
            assert_eq!(strip(&plain.stats), strip(&packed.stats), "{preset} {how}, sampled {}, interval {interval}", plan.is_some());
        }
    }
    std::fs::remove_file(&path).ok();
}
