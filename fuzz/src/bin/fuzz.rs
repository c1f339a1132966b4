//! One AFL entry point for every target, chosen by `SECMEM_FUZZ_TARGET` (see scripts/fuzz):
//! one instrumented binary to build instead of one per target.

fn main() {
    let name = std::env::var("SECMEM_FUZZ_TARGET").unwrap_or_default();
    let Some(target) = secmem_fuzz::target(&name) else {
        eprintln!("SECMEM_FUZZ_TARGET must be one of {:?}", secmem_fuzz::TARGETS.iter().map(|t| t.0).collect::<Vec<_>>());
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
