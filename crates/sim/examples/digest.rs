//! A digest of every simulated statistic over a fixed grid of workloads, scheme pairs and
//! parameter variants: run it before and after a refactor that must not change what is
//! simulated, and diff the two outputs (a changed line names the configuration; `--dump`
//! prints the statistics themselves).
//!
//! `cargo run --release --example digest [INSTRUCTIONS] [--dump] [--only SUBSTRING] [--without KEY,KEY] [--set KEY=VALUE]`
//! (`--without`: statistics left out of the digest, e.g. keys a change adds on purpose, so
//! that the rest can be shown unchanged; `--set`: a setting added to every row, e.g.
//! `pages.image=lazy` to see what it moves)

use secmem_sim::run::simulated;
use std::hash::{Hash, Hasher};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.first().and_then(|s| secmem_core::params::parse_count(s)).unwrap_or(200_000);
    let dump = args.iter().any(|a| a == "--dump");
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let set = args.iter().position(|a| a == "--set").and_then(|i| args.get(i + 1)).cloned();
    let without: Vec<String> = args.iter().position(|a| a == "--without").and_then(|i| args.get(i + 1)).map_or(vec![], |v| v.split(',').map(String::from).collect());
    let mut grid: Vec<(&str, &str, String, String, Vec<String>)> = Vec::new();
    for w in ["stream", "chase", "hot", "mix"] {
        for (i, e) in secmem_core::registry::pair_names() {
            grid.push(("suh2003", w, i.to_string(), e.to_string(), vec![]));
        }
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let extra: Vec<(&str, &str, &str, &str, Vec<String>)> = vec![
        ("suh2003", "chase", "chash", "otp", s(&["otp.ts_cache_entries=64", "speculation.stamps=true"])),
        ("suh2003", "stream", "none", "otp", s(&["speculation.stamps=true"])),
        ("suh2003", "mix", "lhash", "otp", s(&["lhash.check_period=20000"])),
        ("suh2003", "hot", "chash", "mecu", s(&["mecu.resume_period=200000", "mecu.lines_per_block=4"])),
        ("suh2003", "stream", "chash", "otp", s(&["memory.write_delay=200"])),
        ("suh2003", "chase", "mhash", "none", s(&["mhash.blocks_per_chunk=2"])),
        ("suh2003", "hot", "chash", "otp", s(&["sample.ipc_period=50000"])),
        ("gassend2003", "chase", "chash", "none", vec![]),
        ("shi2007", "chase", "none", "tdes", vec![]),
        ("shi2007", "stream", "none", "ocb", vec![]),
        ("enck2008", "hot", "none", "mecu", vec![]),
        ("durahim2009", "mix", "none", "none", vec![]),
        ("durahim2009", "chase", "chash", "otp", vec![]),
        // The one preset allowed to change with the core model: its digest names what did.
        ("champsim", "mix", "none", "none", vec![]),
        ("champsim", "chase", "none", "none", vec![]),
    ];
    for (p, w, i, e, sets) in extra {
        grid.push((p, w, i.into(), e.into(), sets));
    }
    for (preset, w, i, e, mut sets) in grid {
        sets.extend(set.clone());
        let name = format!("{} {} {}+{} {}", preset, w, i, e, sets.join(" "));
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let p = secmem_sim::configure(preset, Some(&i), Some(&e), &sets).unwrap_or_else(|e| panic!("{}: {}", name, e));
        let mut src = secmem_trace::workloads::builtin(w, 1).unwrap();
        let o = secmem_sim::RunOptions { instructions: n, warmup: n / 4, seed: 1, progress: false, interval: 0 };
        let r = secmem_sim::run(&p, &mut *src, &o).unwrap_or_else(|e| panic!("{}: {}", name, e));
        let mut st = simulated(&r.stats);
        st.0.retain(|(k, _)| !without.contains(k));
        let text = format!("{:?} {:?}", st.0, r.error);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        println!("{:016x}  {:<60} ipc={:.4}", h.finish(), name.trim(), st.get_f64("ipc").unwrap_or(0.0));
        if dump {
            for (k, v) in &st.0 {
                println!("    {} = {:?}", k, v);
            }
        }
    }
}
