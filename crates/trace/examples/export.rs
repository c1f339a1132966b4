//! A built-in workload written as a native trace, without the Python CLI (`secmem export`
//! does the same): `export WORKLOAD RECORDS PATH`. scripts/pgo-train uses it to run the
//! trace reader's path in its training set.
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [w, n, path] = &a[..] else {
        eprintln!("usage: export WORKLOAD RECORDS PATH");
        std::process::exit(2);
    };
    let r = n.parse::<u64>().map_err(|e| e.to_string()).and_then(|n| {
        let mut src = secmem_trace::workloads::builtin(w, 1).map_err(|e| e.to_string())?;
        secmem_trace::export(&mut *src, path, "native", n, secmem_trace::champsim::Numbering::X86).map_err(|e| e.to_string())
    });
    if let Err(e) = r {
        eprintln!("export: {}", e);
        std::process::exit(1);
    }
}
