//! Writing any instruction source (a built-in workload, a trace file, a live program) as a
//! native or a ChampSim trace: `secmem export`, so that ChampSim can run exactly the
//! instructions secmem ran.

use std::path::Path;

use crate::champsim::{ChampSimRecord, ChampSimWriter, Lost, Numbering};
use crate::native::NativeWriter;
use crate::record::Instr;
use crate::{TraceError, TraceSource};

/// The formats [`export`] writes.
pub const EXPORT_FORMATS: &[&str] = &["native", "champsim"];

/// What an export wrote and left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    pub instructions: u64,
    /// External records (memory written by the environment): kept in a native trace; a
    /// ChampSim trace has no such records, so they are left out of it.
    pub external: u64,
    /// ChampSim exports: branches by ChampSim type (indexed by [`BranchType`] as usize).
    pub branch_types: [u64; 6],
    /// ChampSim exports: registers and accesses beyond a record's slots.
    pub lost: Lost,
    /// ChampSim exports: instructions that lost a register or an access.
    pub lossy_instructions: u64,
}

/// A stop request (Ctrl-C, SIGTERM) ends an export within 4096 instructions; the partial
/// file is dropped with its temporary.
#[inline]
fn stop_check(n: u64) -> Result<(), TraceError> {
    match (n & 0xFFF == 0).then(crate::stop::stop_requested).flatten() {
        Some(sig) => Err(crate::stop::interrupted(sig)),
        None => Ok(()),
    }
}

/// Write the first `limit` instructions of `src` (with the external records among them) to
/// `path` in `format` (one of [`EXPORT_FORMATS`]); `numbering` says how `src` numbers its
/// registers (ChampSim traces keep ChampSim's ids). The file appears only when complete.
pub fn export(src: &mut dyn TraceSource, path: &str, format: &str, limit: u64, numbering: Numbering) -> Result<Exported, TraceError> {
    export_stored(src, path, format, limit, numbering, false)
}

/// [`export`], a native trace's record stream stored `uncompressed` if asked: 4-9 times
/// the bytes, for a trace read many times over (a sweep's), whose reading then costs
/// no decompression (docs/trace-formats.md, "Stored uncompressed"). A ChampSim trace is
/// compressed or not by its name, so `uncompressed` is refused for one.
pub fn export_stored(src: &mut dyn TraceSource, path: &str, format: &str, limit: u64, numbering: Numbering, uncompressed: bool) -> Result<Exported, TraceError> {
    check_stored(format, uncompressed)?;
    let mut out = Exported::default();
    let mut ins = Instr::default();
    match format {
        "native" => {
            crate::native::write_atomically(Path::new(path), |tmp| {
                let mut w = if uncompressed { NativeWriter::uncompressed(tmp)? } else { NativeWriter::create(tmp)? };
                while out.instructions < limit && src.next_into(&mut ins)? {
                    w.write(&ins)?;
                    count(&mut out, &ins);
                    stop_check(out.instructions)?;
                }
                w.finish()
            })?;
        }
        "champsim" => {
            let mut w = ChampSimWriter::create(path)?;
            while out.instructions < limit && src.next_into(&mut ins)? {
                count(&mut out, &ins);
                stop_check(out.instructions)?;
                if ins.external {
                    continue;
                }
                let (rec, ty, lost) = ChampSimRecord::from_instr(&ins, numbering);
                if let Some(t) = ty {
                    out.branch_types[t as usize] += 1;
                }
                if lost != Lost::default() {
                    out.lossy_instructions += 1;
                    out.lost.registers += lost.registers;
                    out.lost.accesses += lost.accesses;
                }
                w.write(&rec)?;
            }
            w.finish()?;
        }
        f => {
            return Err(TraceError::Other(format!(
                "unknown export format '{f}': valid formats are {}",
                EXPORT_FORMATS.join(", ")
            )))
        }
    }
    Ok(out)
}

/// Whether [`export_stored`] takes `uncompressed` with `format`: callers check before they
/// open a source (a live program is started by opening it).
pub fn check_stored(format: &str, uncompressed: bool) -> Result<(), TraceError> {
    // An unknown format is left to `export_stored`'s own refusal, which names the valid ones.
    if uncompressed && format != "native" && EXPORT_FORMATS.contains(&format) {
        return Err(TraceError::Other(format!(
            "only a native trace is written uncompressed on request: a {format} trace's compression follows its file name"
        )));
    }
    Ok(())
}

fn count(out: &mut Exported, ins: &Instr) {
    if ins.external {
        out.external += 1;
    } else {
        out.instructions += 1;
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use crate::champsim::{BranchType, ChampSimReader, REG_FLAGS, REG_INSTRUCTION_POINTER, REG_STACK_POINTER};
    use crate::record::{Branch, OpClass};
    use crate::workloads::builtin;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("secmem-export-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn branch(srcs: &[u8], dsts: &[u8], load: bool, store: bool, outcome: Branch) -> Instr {
        let mut i = Instr { pc: 0x401000, len: 2, op: OpClass::Branch, branch: outcome, ..Default::default() };
        srcs.iter().for_each(|&r| i.add_src(r));
        dsts.iter().for_each(|&r| i.add_dst(r));
        if load {
            i.add_access(false, 0x7ff0, &[0; 8]);
        }
        if store {
            i.add_access(true, 0x7ff8, &[0; 8]);
        }
        i
    }

    /// ChampSim's own rule (`ooo_model_instr`'s constructor), applied to a record.
    fn champsim_type(r: &ChampSimRecord) -> Option<BranchType> {
        let has = |v: &[u8], x: u8| v.contains(&x);
        let (s, d) = (&r.source_registers[..], &r.destination_registers[..]);
        let (rsp, rip, rfl) = (has(s, REG_STACK_POINTER), has(s, REG_INSTRUCTION_POINTER), has(s, REG_FLAGS));
        let (wsp, wip) = (has(d, REG_STACK_POINTER), has(d, REG_INSTRUCTION_POINTER));
        let other = s.iter().any(|&x| x != 0 && ![REG_STACK_POINTER, REG_FLAGS, REG_INSTRUCTION_POINTER].contains(&x));
        use BranchType::*;
        Some(if !rsp && !rfl && wip && !other {
            DirectJump
        } else if !rsp && !rip && !rfl && wip && other {
            Indirect
        } else if !rsp && rip && !wsp && wip && (rfl || other) {
            Conditional
        } else if rsp && rip && wsp && wip && !rfl && !other {
            DirectCall
        } else if rsp && rip && wsp && wip && !rfl && other {
            IndirectCall
        } else if rsp && !rip && wsp && wip {
            Return
        } else {
            return None;
        })
    }

    #[test]
    fn branches_get_the_registers_from_which_champsim_derives_their_type() {
        use BranchType::*;
        let (rax, rsp, flags) = (0u8, 4u8, 16u8);
        let cases = [
            (branch(&[flags], &[], false, false, Branch::Taken), Conditional),
            (branch(&[flags], &[], false, false, Branch::NotTaken), Conditional),
            (branch(&[1], &[], false, false, Branch::NotTaken), Conditional), // jrcxz
            (branch(&[], &[], false, false, Branch::Taken), DirectJump),
            (branch(&[rax], &[], false, false, Branch::Taken), Indirect),
            (branch(&[rsp], &[rsp], false, true, Branch::Taken), DirectCall),
            (branch(&[rax, rsp], &[rsp], false, true, Branch::Taken), IndirectCall),
            (branch(&[rsp], &[rsp], true, false, Branch::Taken), Return),
        ];
        for (ins, want) in cases {
            let (rec, ty, lost) = ChampSimRecord::from_instr(&ins, Numbering::X86);
            assert_eq!(ty, Some(want), "{:?}", ins);
            assert_eq!(champsim_type(&rec), Some(want), "ChampSim reads {:?} as another type", rec);
            assert_eq!(lost, Lost::default());
            assert_eq!((rec.is_branch, rec.branch_taken), (1, (ins.branch == Branch::Taken) as u8));
        }
    }

    #[test]
    fn registers_and_accesses_map_and_overflow_is_counted() {
        let mut i = Instr { pc: 0x400, len: 3, op: OpClass::Mem, ..Default::default() };
        for r in [0u8, 4, 16, 40, 7] {
            i.add_src(r);
        }
        i.add_dst(2);
        i.add_dst(16);
        i.add_dst(3);
        for k in 0..5u64 {
            i.add_access(false, 0x1000 + 8 * k, &[0; 4]);
        }
        i.add_access(true, 0x2000, &[0; 16]);
        let (r, ty, lost) = ChampSimRecord::from_instr(&i, Numbering::X86);
        assert_eq!(ty, None);
        assert_eq!(r.source_registers, [32, REG_STACK_POINTER, REG_FLAGS, 72]);
        assert_eq!(r.destination_registers, [34, REG_FLAGS]);
        assert_eq!(r.source_memory, [0x1000, 0x1008, 0x1010, 0x1018]);
        assert_eq!(r.destination_memory, [0x2000, 0]);
        assert_eq!(lost, Lost { registers: 2, accesses: 1 });
    }

    #[test]
    fn a_workload_exported_to_champsim_reads_back_as_the_same_instructions() {
        let d = dir();
        for name in ["w.champsim.xz", "w.champsim.gz", "w.champsim"] {
            let path = d.join(name);
            let mut src = builtin("hot", 1).unwrap();
            let e = export(&mut *src, path.to_str().unwrap(), "champsim", 200_000, Numbering::X86).unwrap();
            assert_eq!(e.instructions, 200_000);
            let calls = e.branch_types[BranchType::DirectCall as usize];
            assert!(calls > 0 && calls - e.branch_types[BranchType::Return as usize] <= 1, "{:?}", e);
            let mut back = ChampSimReader::open(&path).unwrap();
            let mut want = builtin("hot", 1).unwrap();
            let (mut a, mut b) = (Instr::default(), Instr::default());
            let mut n = 0;
            while back.next_into(&mut a).unwrap() {
                while want.next_into(&mut b).unwrap() && b.external {}
                assert_eq!(a.pc, b.pc, "record {}", n);
                assert_eq!(a.branch, b.branch, "record {}", n);
                let addrs = |i: &Instr| i.accesses.iter().map(|x| (x.store, x.addr)).collect::<Vec<_>>();
                let mut sorted = addrs(&b);
                sorted.sort_by_key(|&(s, _)| s); // ChampSim lists loads first
                assert_eq!(addrs(&a), sorted, "record {}", n);
                n += 1;
            }
            assert_eq!(n, 200_000, "{}", name);
            assert!(!d.join(format!("{}.tmp-{}", name, std::process::id())).exists());
        }
    }

    #[test]
    fn native_export_keeps_every_record_and_bad_formats_are_refused() {
        let d = dir();
        let path = d.join("w.smt");
        let mut src = builtin("stream", 1).unwrap();
        let e = export(&mut *src, path.to_str().unwrap(), "native", 5_000, Numbering::X86).unwrap();
        assert_eq!(e.instructions, 5_000);
        assert!(e.external > 0, "stream starts with external records");
        let mut back = crate::NativeReader::open(&path).unwrap();
        let mut want = builtin("stream", 1).unwrap();
        let (mut a, mut b) = (Instr::default(), Instr::default());
        while back.next_into(&mut a).unwrap() {
            assert!(want.next_into(&mut b).unwrap());
            assert_eq!(a, b);
        }
        // Uncompressed: the same records, the header's zstd flag clear, more bytes.
        let raw = d.join("w-raw.smt");
        let mut src = builtin("stream", 1).unwrap();
        assert_eq!(export_stored(&mut *src, raw.to_str().unwrap(), "native", 5_000, Numbering::X86, true).unwrap(), e);
        let mut back = crate::NativeReader::open(&raw).unwrap();
        let mut want = crate::NativeReader::open(&path).unwrap();
        while back.next_into(&mut a).unwrap() {
            assert!(want.next_into(&mut b).unwrap());
            assert_eq!(a, b);
        }
        assert!(!want.next_into(&mut b).unwrap());
        let head = std::fs::read(&raw).unwrap();
        assert_eq!(u16::from_le_bytes([head[10], head[11]]) & crate::native::FLAG_ZSTD, 0);
        assert!(head.len() as u64 > std::fs::metadata(&path).unwrap().len());
        let mut src = builtin("stream", 1).unwrap();
        let err = export_stored(&mut *src, d.join("x.champsim").to_str().unwrap(), "champsim", 10, Numbering::X86, true).unwrap_err().to_string();
        assert!(err.contains("only a native trace is written uncompressed"), "{err}");
        assert!(!d.join("x.champsim").exists());
        let mut src = builtin("stream", 1).unwrap();
        let err = export_stored(&mut *src, d.join("x").to_str().unwrap(), "pin", 10, Numbering::X86, true).unwrap_err().to_string();
        assert!(err.contains("unknown export format 'pin'"), "{err}");
        let mut src = builtin("stream", 1).unwrap();
        let err = export(&mut *src, d.join("x").to_str().unwrap(), "pin", 10, Numbering::X86).unwrap_err().to_string();
        assert_eq!(err, "unknown export format 'pin': valid formats are native, champsim");
    }

    #[test]
    fn champsim_xz_exports_use_the_fast_preset_in_blocks_of_the_records_one_thread_writes() {
        // 300,000 records (19.2 MB) make two blocks of EXPORT_XZ_BLOCK.
        let d = dir();
        let path = d.join("fast.champsim.xz");
        let mut src = builtin("hot", 1).unwrap();
        export(&mut *src, path.to_str().unwrap(), "champsim", 300_000, Numbering::X86).unwrap();
        let b = std::fs::read(&path).unwrap();
        assert_eq!(&b[..6], b"\xfd7zXZ\0");
        // Stream header (12 bytes), then the first block header: its size, flags (one filter;
        // 0x40/0x80: compressed/uncompressed size follow, as varints), the filter: LZMA2
        // (0x21), one property byte, which encodes the dictionary: 4 MiB (20) for presets
        // 3-4, 8 MiB (22) for the default preset 6, which compressed 20-40x slower.
        let flags = b[13];
        assert_eq!(flags & 0x3f, 0x00, "one filter");
        let mut at = 14;
        let varint = |at: &mut usize| {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let x = b[*at];
                *at += 1;
                v |= ((x & 0x7f) as u64) << shift;
                shift += 7;
                if x & 0x80 == 0 {
                    return v;
                }
            }
        };
        assert_eq!(flags & 0x80, 0x80, "a block of a multithreaded encoder states its size");
        if flags & 0x40 != 0 {
            varint(&mut at);
        }
        assert_eq!(varint(&mut at), crate::champsim::EXPORT_XZ_BLOCK, "the first block is whole");
        assert_eq!((b[at], b[at + 1]), (0x21, 0x01));
        let dict = |p: u8| (2u64 | (p as u64 & 1)) << (p / 2 + 11);
        assert_eq!(crate::champsim::EXPORT_XZ_PRESET, 3);
        assert_eq!(dict(b[at + 2]), 4 << 20, "dictionary property {}", b[at + 2]);
        // The records are what the single-threaded encoder of preset 3 (the old path) wraps,
        // byte for byte, and the file is the same with one thread as with three.
        let raw = d.join("fast.champsim");
        let mut src = builtin("hot", 1).unwrap();
        export(&mut *src, raw.to_str().unwrap(), "champsim", 300_000, Numbering::X86).unwrap();
        let records = std::fs::read(&raw).unwrap();
        assert_eq!(records.len(), 300_000 * 64);
        let xz = |w: &mut dyn std::io::Write| {
            w.write_all(&records).unwrap();
        };
        let mut old = liblzma::write::XzEncoder::new(Vec::new(), crate::champsim::EXPORT_XZ_PRESET);
        xz(&mut old);
        let old = old.finish().unwrap();
        let unpack = |c: &[u8]| {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut liblzma::read::XzDecoder::new_multi_decoder(c), &mut out).unwrap();
            out
        };
        assert!(unpack(&b) == unpack(&old) && unpack(&b) == records, "the export's records differ from one thread's");
        for threads in [1, 3] {
            let mut w = crate::champsim::export_xz(Vec::new(), threads).unwrap();
            xz(&mut w);
            assert!(w.finish().unwrap() == b, "{} threads wrote another file", threads);
        }
    }

}
