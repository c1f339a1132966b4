//! Every committed corpus file (fuzz/corpus/TARGET/*) through its target, as an ordinary
//! test: what a fuzzing campaign found interesting stays covered, and any input that once
//! crashed (kept in the corpus after its fix) stays fixed.

use std::path::Path;

#[test]
fn every_corpus_file_runs_clean_through_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (name, target) in secmem_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {}", dir.display(), e))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: empty corpus");
        let t0 = std::time::Instant::now();
        for f in &files {
            let data = std::fs::read(f).unwrap();
            let r = std::panic::catch_unwind(|| target(&data));
            assert!(r.is_ok(), "{name}: {} crashed the target", f.display());
        }
        eprintln!("{name}: {} corpus files in {:.2} s", files.len(), t0.elapsed().as_secs_f64());
        total += files.len();
    }
    assert!(total > 0);
}
