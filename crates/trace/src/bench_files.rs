//! The trace-input benchmark's files (`secmem bench --trace-input`): the same instructions as
//! a file of each format (native, ChampSim, lackey), raw or compressed, so that reading them
//! can be timed against each other. Not an exporter for users: `secmem export` is that; this
//! writes only what the benchmark reads, including the lackey files no exporter writes.
//!
//! ChampSim and lackey files keep only what their formats hold (docs/trace-formats.md):
//! no values and no external records in either, no sizes in ChampSim (at most 4 loads, 2
//! stores, 4 source and 2 destination registers), no registers or branch outcomes in lackey.
//! They are compressed by the file name's suffix: `.xz`, `.gz` or `.zst` (else raw); native
//! files are zstd streams of their own. A file is written beside its destination and renamed
//! into place.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::champsim::{ChampSimRecord, Numbering};
use crate::open::check_format;
use crate::record::Instr;
use crate::{NativeWriter, TraceError, TraceSource};

/// xz preset for exported files: ChampSim's traces are distributed as `xz` files of the
/// default preset (6), whose decoding speed is what the benchmark measures.
const XZ_PRESET: u32 = 6;

/// Write the first `instructions` instructions of `src` (and, for the native format, the
/// external records among them) to `path` as a trace of `format`; returns the instructions
/// written.
pub fn write_as(src: &mut dyn TraceSource, path: &str, format: &str, instructions: u64) -> Result<u64, TraceError> {
    let format = check_format(format)?;
    crate::native::write_atomically(Path::new(path), |tmp| match format {
        "native" => native(src, tmp, instructions),
        f => foreign(src, tmp, f, instructions, path),
    })
}

fn io(path: &str, e: std::io::Error) -> TraceError {
    TraceError::Io { path: path.to_string(), source: e }
}

fn native(src: &mut dyn TraceSource, tmp: &Path, instructions: u64) -> Result<u64, TraceError> {
    let mut w = NativeWriter::create(tmp)?;
    let (mut ins, mut n) = (Instr::default(), 0);
    while n < instructions && src.next_into(&mut ins)? {
        w.write(&ins)?;
        n += !ins.external as u64;
    }
    w.finish()?;
    Ok(n)
}

fn foreign(src: &mut dyn TraceSource, tmp: &Path, format: &str, instructions: u64, path: &str) -> Result<u64, TraceError> {
    let f = BufWriter::with_capacity(1 << 16, File::create(tmp).map_err(|e| io(path, e))?);
    let mut out: Box<dyn Write> = match Path::new(path).extension().and_then(|e| e.to_str()) {
        Some("xz") => Box::new(liblzma::write::XzEncoder::new(f, XZ_PRESET)),
        Some("gz") => Box::new(flate2::write::GzEncoder::new(f, flate2::Compression::default())),
        Some("zst") => Box::new(zstd::stream::write::Encoder::new(f, 3).map_err(|e| io(path, e))?.auto_finish()),
        _ => Box::new(f),
    };
    let (mut ins, mut n, mut line) = (Instr::default(), 0, String::new());
    while n < instructions && src.next_into(&mut ins)? {
        if ins.external {
            continue;
        }
        n += 1;
        let r = if format == "champsim" {
            out.write_all(&champsim(&ins).encode())
        } else {
            lackey(&ins, &mut line);
            out.write_all(line.as_bytes())
        };
        r.map_err(|e| io(path, e))?;
    }
    // Dropping the encoders finishes their streams; flush errors must still be seen.
    out.flush().map_err(|e| io(path, e))?;
    drop(out);
    Ok(n)
}

/// `r` as a ChampSim record: `secmem export`'s encoding (x86 registers, branch signatures).
pub fn champsim(r: &Instr) -> ChampSimRecord {
    ChampSimRecord::from_instr(r, Numbering::X86).0
}

/// `r` as lackey lines (as `--tool=lackey --trace-mem=yes` prints them).
fn lackey(r: &Instr, line: &mut String) {
    use std::fmt::Write;
    line.clear();
    let _ = writeln!(line, "I  {:08x},{}", r.pc, r.len);
    for a in &r.accesses {
        let _ = writeln!(line, " {} {:08x},{}", if a.store { 'S' } else { 'L' }, a.addr, a.size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open_trace_as;
    use crate::workloads::builtin;

    #[test]
    fn exported_files_read_back_as_their_formats_allow() {
        let d = std::env::temp_dir().join(format!("secmem-bench-files-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let mut want = Vec::new();
        let mut src = builtin("mix", 3).unwrap();
        let mut i = Instr::default();
        while want.len() < 5000 && src.next_into(&mut i).unwrap() {
            if !i.external {
                want.push(i.clone());
            }
        }
        for (name, format) in [("m.smt", "native"), ("m.champsim.xz", "champsim"), ("m.champsim.gz", "champsim"), ("m.lackey.zst", "lackey"), ("m.lackey", "lackey")] {
            let p = d.join(name).to_str().unwrap().to_string();
            let n = write_as(builtin("mix", 3).unwrap().as_mut(), &p, format, 5000).unwrap();
            assert_eq!(n, 5000);
            let mut r = open_trace_as(&p, None).unwrap();
            let mut got = Vec::new();
            while r.next_into(&mut i).unwrap() {
                if !i.external {
                    got.push(i.clone());
                }
            }
            assert_eq!(got.len(), want.len(), "{name}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.pc, w.pc, "{name}");
                let kinds = |r: &Instr| r.accesses.iter().map(|a| (a.store, a.addr)).collect::<Vec<_>>();
                match format {
                    "native" => assert_eq!(g, w),
                    "champsim" => {
                        assert_eq!(g.branch, w.branch, "{name}");
                        let mut k = kinds(w);
                        k.sort_by_key(|a| a.0); // loads first
                        assert_eq!(kinds(g), k, "{name} at {:#x}", w.pc);
                        assert_eq!(g.srcs().len(), w.srcs().len().min(4), "{name}");
                    }
                    _ => {
                        assert_eq!(g.len, w.len, "{name}");
                        let sizes = |r: &Instr| r.accesses.iter().map(|a| (a.store, a.addr, a.size)).collect::<Vec<_>>();
                        assert_eq!(sizes(g), sizes(w), "{name}");
                    }
                }
            }
        }
        let e = write_as(builtin("mix", 3).unwrap().as_mut(), d.join("x").to_str().unwrap(), "pin", 1).unwrap_err();
        assert!(e.to_string().contains("unknown trace format 'pin'"), "{e}");
        assert!(std::fs::read_dir(&d).unwrap().all(|f| !f.unwrap().file_name().to_string_lossy().ends_with(".part")));
    }
}
