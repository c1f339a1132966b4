//! The engine's build identity, embedded in the extension as `_core.build_id`: a SHA-256 of
//! every source the engine is compiled from (the workspace's Cargo files, each crate's
//! sources and build script, the tracer tool, the presets compiled in). The results store keys
//! its points with it, so a changed engine never reads back results of the old one (issue 34);
//! the version number alone is the same at every commit.
//!
//! Also `_core.build_commit`: the git commit of the checkout built (with `+dirty` when tracked
//! files differed), or empty when git or the repository is absent, as in an unpacked sdist.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What is hashed, relative to the workspace root: directories are walked whole.
const SOURCES: [&str; 4] = ["Cargo.toml", "Cargo.lock", "crates", "configs"];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let mut files = Vec::new();
    for s in SOURCES {
        let p = root.join(s);
        // A directory is watched whole: cargo rescans it for any changed file.
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            walk(&p, &mut files);
        } else if p.is_file() {
            files.push(p);
        }
    }
    let mut rel: Vec<(String, PathBuf)> =
        files.into_iter().map(|p| (p.strip_prefix(&root).unwrap_or(&p).to_string_lossy().replace('\\', "/"), p)).collect();
    rel.sort();
    let mut h = Sha256::new();
    for (name, p) in &rel {
        let bytes = std::fs::read(p).unwrap_or_default();
        // Name and length first: moving bytes from one file to another changes the hash.
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    let id: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SECMEM_BUILD_ID={id}");

    // The commit: rebuilt when HEAD moves, so a commit that changes no engine source still
    // names itself.
    let mut commit = String::new();
    if let Some(c) = git(&root, &["rev-parse", "--verify", "-q", "HEAD"]) {
        if git(&root, &["rev-parse", "--show-toplevel"]).map(PathBuf::from).and_then(|t| t.canonicalize().ok()) == Some(root.clone()) {
            let dirty = git(&root, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            commit = c + if dirty { "+dirty" } else { "" };
            for (flag, file) in [("--git-dir", "HEAD"), ("--git-common-dir", "packed-refs")] {
                if let Some(d) = git(&root, &["rev-parse", flag]) {
                    let d = if Path::new(&d).is_absolute() { PathBuf::from(d) } else { root.join(d) };
                    println!("cargo:rerun-if-changed={}", d.join(file).display());
                    if file == "HEAD" {
                        if let Some(r) = git(&root, &["symbolic-ref", "-q", "HEAD"]) {
                            if let Some(common) = git(&root, &["rev-parse", "--git-common-dir"]) {
                                let c = if Path::new(&common).is_absolute() { PathBuf::from(common) } else { root.join(common) };
                                println!("cargo:rerun-if-changed={}", c.join(r).display());
                            }
                        }
                    }
                }
            }
        }
    }
    println!("cargo:rustc-env=SECMEM_BUILD_COMMIT={commit}");
}
