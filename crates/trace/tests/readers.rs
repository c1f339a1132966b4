//! The foreign-format readers (ChampSim, lackey) and format detection, on fixtures written
//! here: exact records back, damage reported as `Corrupt` at the right offset, never a panic.

use std::io::Write;
use std::path::{Path, PathBuf};

use secmem_trace::champsim::ChampSimRecord;
use secmem_trace::{
    detect_format, open_trace, open_trace_as, Access, Branch, Instr, NativeWriter, OpClass,
    TraceError, TraceSource,
};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("secmem-readers-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn xz(b: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn gz(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// Read everything, returning the records and the error that stopped it (if any); checks
/// that the end and errors are sticky and that the reader stops.
fn read_all(src: &mut dyn TraceSource) -> (Vec<Instr>, Option<TraceError>) {
    let mut v = Vec::new();
    let mut r = Instr::default();
    for _ in 0..10_000_000 {
        match src.next_into(&mut r) {
            Ok(true) => v.push(r.clone()),
            Ok(false) => {
                assert!(!src.next_into(&mut r).unwrap(), "records after the end");
                return (v, None);
            }
            Err(e) => {
                let again = src.next_into(&mut r).unwrap_err().to_string();
                assert_eq!(again, e.to_string(), "errors must be sticky");
                assert!(!e.to_string().contains('\n'), "one line: {e}");
                return (v, Some(e));
            }
        }
    }
    panic!("reader did not stop");
}

fn read_path(p: &Path, format: Option<&str>) -> (Vec<Instr>, Option<TraceError>) {
    match open_trace_as(s(p), format) {
        Ok(mut src) => read_all(src.as_mut()),
        Err(e) => (vec![], Some(e)),
    }
}

fn corrupt_at(e: Option<TraceError>) -> (u64, String) {
    match e {
        Some(TraceError::Corrupt { offset, what, .. }) => (offset, what),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn zeros(size: usize) -> Vec<u8> {
    vec![0; size]
}

// ---------------------------------------------------------------------------------------------
// ChampSim.

/// Five hand-made records and the `Instr`s they must become.
fn champsim_fixture() -> (Vec<ChampSimRecord>, Vec<Instr>) {
    let recs = vec![
        // mov rax, [rbx+8]: a load, falls through to 0x401004 (length 4).
        ChampSimRecord {
            ip: 0x401000,
            destination_registers: [10, 0],
            source_registers: [7, 0, 0, 0],
            source_memory: [0x7fff_0008, 0, 0, 0],
            ..Default::default()
        },
        // add [rcx], rax: load then store of the same address (loads first), 3 bytes.
        ChampSimRecord {
            ip: 0x401004,
            destination_registers: [25, 0],
            source_registers: [9, 10, 0, 0],
            destination_memory: [0x60_0000, 0],
            source_memory: [0x60_0000, 0, 0, 0],
            ..Default::default()
        },
        // jne 0x401000: a taken branch (reads flags, writes the instruction pointer).
        ChampSimRecord {
            ip: 0x401007,
            is_branch: 1,
            branch_taken: 1,
            destination_registers: [26, 0],
            source_registers: [25, 26, 0, 0],
            ..Default::default()
        },
        // The same branch not taken: falls through (length 2).
        ChampSimRecord {
            ip: 0x401007,
            is_branch: 1,
            branch_taken: 0,
            destination_registers: [26, 0],
            source_registers: [25, 26, 0, 0],
            ..Default::default()
        },
        // An ALU op, last record: its length is unknown (0). Two loads in slots 1 and 3.
        ChampSimRecord {
            ip: 0x401009,
            destination_registers: [0, 11],
            source_registers: [0, 12, 0, 13],
            source_memory: [0, 0x1000, 0, 0x2000],
            destination_memory: [0, 0x3000],
            ..Default::default()
        },
    ];
    let mut want = Vec::new();
    let mut i = Instr {
        pc: 0x401000,
        len: 4,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_src(7);
    i.add_dst(10);
    i.add_access(false, 0x7fff_0008, &zeros(1));
    want.push(i);
    let mut i = Instr {
        pc: 0x401004,
        len: 3,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_src(9);
    i.add_src(10);
    i.add_dst(25);
    i.add_access(false, 0x60_0000, &zeros(1));
    i.add_access(true, 0x60_0000, &zeros(1));
    want.push(i);
    // Taken: length not inferable from the next ip, and not learned yet for this pc.
    let mut i = Instr {
        pc: 0x401007,
        len: 0,
        op: OpClass::Branch,
        branch: Branch::Taken,
        ..Default::default()
    };
    i.add_src(25);
    want.push(i.clone());
    i.len = 2;
    i.branch = Branch::NotTaken;
    want.push(i);
    let mut i = Instr {
        pc: 0x401009,
        len: 0,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_src(12);
    i.add_src(13);
    i.add_dst(11);
    i.add_access(false, 0x1000, &zeros(1));
    i.add_access(false, 0x2000, &zeros(1));
    i.add_access(true, 0x3000, &zeros(1));
    want.push(i);
    (recs, want)
}

fn champsim_bytes(recs: &[ChampSimRecord]) -> Vec<u8> {
    recs.iter().flat_map(|r| r.encode()).collect()
}

#[test]
fn champsim_record_layout_is_champsims() {
    let r = ChampSimRecord {
        ip: 0x0102030405060708,
        is_branch: 1,
        branch_taken: 1,
        destination_registers: [0xa1, 0xa2],
        source_registers: [0xb1, 0xb2, 0xb3, 0xb4],
        destination_memory: [0x11, 0x22],
        source_memory: [0x33, 0x44, 0x55, 0x66],
    };
    let b = r.encode();
    assert_eq!(b.len(), 64);
    assert_eq!(b[0..8], [8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(b[8..16], [1, 1, 0xa1, 0xa2, 0xb1, 0xb2, 0xb3, 0xb4]);
    assert_eq!(b[16], 0x11);
    assert_eq!(b[24], 0x22);
    assert_eq!(b[32], 0x33);
    assert_eq!(b[56], 0x66);
    assert_eq!(ChampSimRecord::decode(&b), r);
}

#[test]
fn champsim_raw_xz_gz_zstd_read_back_exactly() {
    let (recs, want) = champsim_fixture();
    let raw = champsim_bytes(&recs);
    let files: [(&str, Vec<u8>); 6] = [
        ("t.champsim", raw.clone()),
        ("t.champsimtrace.xz", xz(&raw)),
        ("t.champsim.gz", gz(&raw)),
        (
            "t.champsimtrace.zst",
            zstd::encode_all(&raw[..], 3).unwrap(),
        ),
        // Compression is known by magic, not by name.
        ("xz-named.champsim.gz", xz(&raw)),
        ("plain-name.champsim", gz(&raw)),
    ];
    for (name, bytes) in files {
        let p = tmp(name);
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(detect_format(s(&p)).unwrap(), "champsim", "{name}");
        for fmt in [Some("champsim"), None] {
            let (got, err) = read_path(&p, fmt);
            assert!(err.is_none(), "{name}: {err:?}");
            assert_eq!(got, want, "{name}");
        }
    }
}

#[test]
fn champsim_lengths_are_learned_per_pc() {
    // A loop: 0x10 (4 bytes) then a 2-byte branch at 0x14 taken back to 0x10, ten times,
    // then not taken. The taken branch learns its length from the not-taken one only at the
    // end, and a later taken execution reuses it.
    let mut recs = Vec::new();
    let body = |ip| ChampSimRecord {
        ip,
        ..Default::default()
    };
    let br = |taken| ChampSimRecord {
        ip: 0x14,
        is_branch: 1,
        branch_taken: taken,
        ..Default::default()
    };
    for _ in 0..3 {
        recs.push(body(0x10));
        recs.push(br(1));
    }
    recs.push(body(0x10));
    recs.push(br(0));
    recs.push(body(0x16));
    recs.push(br(1));
    let p = tmp("loop.champsim");
    std::fs::write(&p, champsim_bytes(&recs)).unwrap();
    let (got, err) = read_path(&p, None);
    assert!(err.is_none());
    let lens: Vec<u8> = got.iter().map(|i| i.len).collect();
    assert_eq!(lens, [4, 0, 4, 0, 4, 0, 4, 2, 0, 2]);
}

#[test]
fn champsim_truncation_and_damage_are_located() {
    let recs: Vec<ChampSimRecord> = (0..1000u64)
        .map(|k| ChampSimRecord {
            ip: 0x400000 + 4 * k,
            source_memory: [0x10_0000 + 64 * k, 0, 0, 0],
            ..Default::default()
        })
        .collect();
    let raw = champsim_bytes(&recs);
    // Raw: a size that is not a multiple of 64.
    let p = tmp("cut.champsim");
    for cut in [1, 63, 64 * 10 + 5, raw.len() - 1] {
        std::fs::write(&p, &raw[..cut]).unwrap();
        let (got, e) = read_path(&p, None);
        assert_eq!(got.len(), cut / 64, "records before the cut are read");
        let (off, what) = corrupt_at(e);
        assert_eq!(off, (cut / 64 * 64) as u64, "{what}");
        assert!(
            what.contains("truncated") && what.contains(&format!("{} of its 64", cut % 64)),
            "{what}"
        );
    }
    // A byte that cannot be a ChampSim is_branch.
    let mut bad = raw.clone();
    bad[64 * 7 + 8] = 0x42;
    std::fs::write(&p, &bad).unwrap();
    let (got, e) = read_path(&p, Some("champsim"));
    assert_eq!(got.len(), 7);
    let (off, what) = corrupt_at(e);
    assert_eq!(off, 64 * 7 + 8);
    assert!(
        what.contains("is_branch") && what.contains("0x42"),
        "{what}"
    );

    // Compressed: cut anywhere, the error is Corrupt (never a panic, never a hang) and the
    // records before it are intact.
    for (name, z) in [("cut.champsim.xz", xz(&raw)), ("cut.champsim.gz", gz(&raw))] {
        let q = tmp(name);
        for cut in [z.len() - 1, z.len() - 9, z.len() / 2, 40, 13] {
            std::fs::write(&q, &z[..cut]).unwrap();
            let (got, e) = read_path(&q, None);
            let msg = e.as_ref().map(|e| e.to_string()).unwrap_or_default();
            let (off, what) = corrupt_at(e);
            assert!(
                what.contains("truncated") || what.contains("decompress"),
                "{name} cut {cut}: {msg}"
            );
            assert!(msg.contains(name), "{msg}");
            assert!(
                got.len() * 64 <= off as usize && off as usize <= raw.len(),
                "{msg}"
            );
            for (k, i) in got.iter().enumerate() {
                assert_eq!(i.pc, recs[k].ip, "{name} cut {cut}");
            }
        }
        // Flipped bytes in the middle of the compressed stream: a checksum or format error.
        let mut flips = 0;
        for at in [z.len() / 3, z.len() / 2, z.len() - 20] {
            let mut d = z.clone();
            d[at] ^= 0x55;
            std::fs::write(&q, &d).unwrap();
            let (got, e) = read_path(&q, Some("champsim"));
            if let Some(e) = e {
                assert!(matches!(e, TraceError::Corrupt { .. }), "{e}");
                flips += 1;
            } else {
                assert_eq!(got.len(), recs.len());
            }
        }
        assert!(flips >= 2, "{name}: only {flips} of 3 flips detected");
    }
}

// ---------------------------------------------------------------------------------------------
// Lackey.

const LACKEY: &str = "==4242== Lackey, an example Valgrind tool
==4242== Copyright (C) 2002-2017, and GNU GPL'd, by Nicholas Nethercote.
I  0023C790,2
I  0023C792,5
 S BE80199C,4
I  0025242B,3
 L BE801950,4
 M 0025747C,4

==4242== a message in the middle
I  04010B9F,16
 L 7FF000100,32
 S 7FF000120,16
I  0040000F,1
==4242== 
==4242== Counted 1 call to main()
";

fn lackey_want() -> Vec<Instr> {
    let mut v = Vec::new();
    v.push(Instr {
        pc: 0x23c790,
        len: 2,
        ..Default::default()
    });
    let mut i = Instr {
        pc: 0x23c792,
        len: 5,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_access(true, 0xbe80199c, &zeros(4));
    v.push(i);
    let mut i = Instr {
        pc: 0x25242b,
        len: 3,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_access(false, 0xbe801950, &zeros(4));
    i.add_access(false, 0x25747c, &zeros(4));
    i.add_access(true, 0x25747c, &zeros(4));
    v.push(i);
    let mut i = Instr {
        pc: 0x4010b9f,
        len: 16,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_access(false, 0x7ff000100, &zeros(32));
    i.add_access(true, 0x7ff000120, &zeros(16));
    v.push(i);
    v.push(Instr {
        pc: 0x40000f,
        len: 1,
        ..Default::default()
    });
    v
}

#[test]
fn lackey_reads_back_exactly() {
    let want = lackey_want();
    assert_eq!(
        want[2].accesses[2],
        Access {
            store: true,
            addr: 0x25747c,
            size: 4,
            off: 8
        }
    );
    let crlf = LACKEY.replace('\n', "\r\n");
    let files: [(&str, Vec<u8>); 5] = [
        ("t.lackey", LACKEY.as_bytes().to_vec()),
        ("t.txt", LACKEY.as_bytes().to_vec()),
        ("t.lackey.xz", xz(LACKEY.as_bytes())),
        ("lackey-out.gz", gz(LACKEY.as_bytes())),
        ("crlf.log", crlf.into_bytes()),
    ];
    for (name, bytes) in files {
        let p = tmp(name);
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(detect_format(s(&p)).unwrap(), "lackey", "{name}");
        let (got, err) = read_path(&p, None);
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(got, want, "{name}");
    }
    // No final newline; only messages; nothing at all.
    let p = tmp("nonl.lackey");
    std::fs::write(
        &p,
        LACKEY.trim_end_matches("\n==4242== Counted 1 call to main()\n"),
    )
    .unwrap();
    assert_eq!(read_path(&p, None).0, want);
    std::fs::write(&p, "==1== hello\n").unwrap();
    assert_eq!(detect_format(s(&p)).unwrap(), "lackey");
    let (got, err) = read_path(&p, None);
    assert!(got.is_empty() && err.is_none());
    std::fs::write(&p, "").unwrap();
    let (got, err) = read_path(&p, Some("lackey"));
    assert!(got.is_empty() && err.is_none());
}

#[test]
fn bad_lackey_lines_name_their_number_and_offset() {
    let p = tmp("bad.lackey");
    let cases: [(&str, &str); 7] = [
        (" X 0023C790,2", "expected an 'I'"),
        ("I  0023C79G,2", "hexadecimal"),
        (" L 00000010,", "size"),
        (" L 00000010,0", "access of 0 bytes"),
        ("I  00000010,300", "instruction of 300"),
        (" S 00000010 8", "ADDRESS,SIZE"),
        ("hello world", "expected an 'I'"),
    ];
    // The bad line is line 6, after the messages and the first record's lines.
    let good = "==1== x\nI  00400000,3\n L 00001000,8\n\n==1== y\n";
    for (bad, want) in cases {
        std::fs::write(&p, format!("{good}{bad}\nI  00400003,1\n")).unwrap();
        let (got, e) = read_path(&p, Some("lackey"));
        assert!(
            got.is_empty(),
            "the record with the bad line is not returned"
        );
        let msg = e.as_ref().unwrap().to_string();
        let (off, what) = corrupt_at(e);
        assert_eq!(off, good.len() as u64, "{msg}");
        assert!(what.contains("line 6") && what.contains(want), "{msg}");
        assert!(
            msg.contains("bad.lackey") && msg.contains(&format!("offset {}", good.len())),
            "{msg}"
        );
    }
    // A data line before any instruction.
    std::fs::write(&p, "==1== x\n L 00001000,8\n").unwrap();
    let (off, what) = corrupt_at(read_path(&p, Some("lackey")).1);
    assert_eq!(off, 8);
    assert!(
        what.contains("line 2") && what.contains("before any instruction"),
        "{what}"
    );
    // Binary garbage: a very long line is refused without reading it all.
    std::fs::write(&p, vec![b'x'; 100_000]).unwrap();
    let (off, what) = corrupt_at(read_path(&p, Some("lackey")).1);
    assert_eq!(off, 0);
    assert!(what.contains("longer than"), "{what}");
    // A truncated xz lackey file.
    let big: String = (0..20_000)
        .map(|k| {
            format!(
                "I  {:08X},4\n L {:08X},8\n",
                0x400000 + 4 * k,
                0x10000 + 8 * k
            )
        })
        .collect();
    let z = xz(big.as_bytes());
    let q = tmp("cut.lackey.xz");
    std::fs::write(&q, &z[..z.len() * 2 / 3]).unwrap();
    let (got, e) = read_path(&q, None);
    let (off, what) = corrupt_at(e);
    assert!(
        what.contains("truncated") || what.contains("decompress"),
        "{what}"
    );
    assert!(!got.is_empty() && off as usize <= big.len());
    for (k, i) in got.iter().enumerate() {
        assert_eq!(i.pc, 0x400000 + 4 * k as u64);
    }
}

// ---------------------------------------------------------------------------------------------
// Detection and format names.

#[test]
fn formats_are_detected_and_bad_names_refused() {
    // Native, whatever its name says.
    let p = tmp("native.champsim");
    let mut w = NativeWriter::create(&p).unwrap();
    let mut i = Instr {
        pc: 0x1000,
        len: 4,
        op: OpClass::Mem,
        ..Default::default()
    };
    i.add_access(false, 0x2000, &[1, 2, 3, 4]);
    w.write(&i).unwrap();
    w.finish().unwrap();
    assert_eq!(detect_format(s(&p)).unwrap(), "native");
    let (got, err) = read_path(&p, None);
    assert!(err.is_none());
    assert_eq!(got, vec![i]);
    // ChampSim by content, under a name that says nothing.
    let (recs, want) = champsim_fixture();
    let q = tmp("trace.bin");
    std::fs::write(&q, xz(&champsim_bytes(&recs))).unwrap();
    assert_eq!(detect_format(s(&q)).unwrap(), "champsim");
    assert_eq!(read_path(&q, None).0, want);
    // Forcing a format overrides detection: the ChampSim bytes are no lackey text.
    let (_, e) = read_path(&q, Some("lackey"));
    assert!(corrupt_at(e).1.contains("line 1"));
    // Unknown format names: one line listing the valid ones.
    let e = open_trace_as(s(&q), Some("pin")).err().unwrap().to_string();
    assert!(
        e.contains("'pin'") && e.contains("native, champsim, lackey") && !e.contains('\n'),
        "{e}"
    );
    assert_eq!(detect_format(s(&q)).unwrap(), "champsim");
    assert!(open_trace_as(s(&q), Some("auto")).is_ok());
    // Undetectable files: a hint to name the format.
    let u = tmp("mystery.dat");
    for bytes in [
        &b"hello, world\n"[..],
        &[0xff; 200][..],
        &[][..],
        &gz(b"some text\n")[..],
    ] {
        std::fs::write(&u, bytes).unwrap();
        let e = open_trace(s(&u))
            .err()
            .expect("detected the undetectable")
            .to_string();
        assert!(
            e.contains("mystery.dat") && e.contains("--trace-format") && !e.contains('\n'),
            "{e}"
        );
    }
    // A missing file names itself.
    let e = open_trace("/nonexistent/x.champsim")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("/nonexistent/x.champsim"), "{e}");
    // A native-named file that is not native: the native reader's clear refusal.
    let n = tmp("fake.smt");
    std::fs::write(&n, b"hello").unwrap();
    let e = open_trace(s(&n)).err().unwrap().to_string();
    assert!(e.contains("not a secmem trace"), "{e}");
}

#[test]
fn garbage_never_panics_or_hangs() {
    // Random bytes, random text-like bytes, and damaged compressed fixtures, read as every
    // format and detected: each read ends (records, a clean end or an error), never a panic.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (recs, _) = champsim_fixture();
    let seeds = [xz(&champsim_bytes(&recs)), gz(LACKEY.as_bytes()), LACKEY.as_bytes().to_vec()];
    let p = tmp("garbage.bin");
    for i in 0..300 {
        let bytes: Vec<u8> = match i % 3 {
            0 => (0..next() % 700).map(|_| next() as u8).collect(),
            1 => (0..next() % 700)
                .map(|_| b"IL SM0123456789ABCDEF,=\n \r"[(next() % 26) as usize])
                .collect(),
            _ => {
                let mut b = seeds[(next() % 3) as usize].clone();
                for _ in 0..1 + next() % 3 {
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = next() as u8;
                }
                b.truncate((next() % (b.len() as u64 + 1)) as usize);
                b
            }
        };
        std::fs::write(&p, &bytes).unwrap();
        for f in [None, Some("champsim"), Some("lackey"), Some("native")] {
            let (_, e) = read_path(&p, f);
            if let Some(e) = e {
                let m = e.to_string();
                assert!(m.contains("garbage.bin") && !m.contains('\n'), "{m}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading on a thread (open_trace_as reads every format through ReadAhead).

/// Large files of every format and compression, whole and damaged in the middle.
fn big_files() -> Vec<(PathBuf, &'static str)> {
    use secmem_trace::workloads::builtin;
    let mut src = builtin("mix", 4).unwrap();
    let mut recs = Vec::new();
    let mut i = Instr::default();
    while recs.len() < 30_000 && src.next_into(&mut i).unwrap() {
        if !i.external {
            recs.push(i.clone());
        }
    }
    let native = tmp("big.smt");
    let mut w = NativeWriter::create(&native).unwrap();
    for r in &recs {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    let cs: Vec<ChampSimRecord> = recs
        .iter()
        .map(|r| ChampSimRecord {
            ip: r.pc,
            is_branch: (r.branch != Branch::None) as u8,
            branch_taken: (r.branch == Branch::Taken) as u8,
            source_memory: [r.accesses.iter().find(|a| !a.store).map_or(0, |a| a.addr), 0, 0, 0],
            destination_memory: [r.accesses.iter().find(|a| a.store).map_or(0, |a| a.addr), 0],
            ..Default::default()
        })
        .collect();
    let raw = champsim_bytes(&cs);
    let lackey: String = recs
        .iter()
        .map(|r| {
            let mut l = format!("I  {:08X},{}\n", r.pc, r.len.max(1));
            for a in &r.accesses {
                l += &format!(" {} {:08X},{}\n", if a.store { 'S' } else { 'L' }, a.addr, a.size);
            }
            l
        })
        .collect();
    let mut files = vec![(native.clone(), "native")];
    for (name, bytes, fmt) in [
        ("big.champsim.xz", xz(&raw), "champsim"),
        ("big.champsim.gz", gz(&raw), "champsim"),
        ("big.champsim", raw.clone(), "champsim"),
        ("big.lackey.xz", xz(lackey.as_bytes()), "lackey"),
    ] {
        let p = tmp(name);
        std::fs::write(&p, bytes).unwrap();
        files.push((p, fmt));
    }
    // Damaged copies: a flipped byte in the middle, and a cut.
    for (p, fmt) in files.clone() {
        let b = std::fs::read(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let mut flipped = b.clone();
        flipped[b.len() / 2] ^= 0x5a;
        let q = tmp(&format!("flipped-{name}"));
        std::fs::write(&q, flipped).unwrap();
        files.push((q, fmt));
        let q = tmp(&format!("cut-{name}"));
        std::fs::write(&q, &b[..b.len() * 2 / 3]).unwrap();
        files.push((q, fmt));
    }
    files
}

/// The format's reader, on the caller's thread.
fn direct(p: &Path, fmt: &str) -> Result<Box<dyn TraceSource>, TraceError> {
    Ok(match fmt {
        "native" => Box::new(secmem_trace::NativeReader::open(p)?),
        "champsim" => Box::new(secmem_trace::ChampSimReader::open(p)?),
        _ => Box::new(secmem_trace::LackeyReader::open(p)?),
    })
}

#[test]
fn read_ahead_gives_each_readers_records_end_and_errors_in_place() {
    let mut errors = 0;
    for (p, fmt) in big_files() {
        let (want, want_err) = read_all(direct(&p, fmt).unwrap().as_mut());
        // As opened (a native file is read in batches on this thread, the others ahead on a
        // thread of their own), and a native file read ahead too (as from a pipe).
        let mut ways = vec![read_path(&p, Some(fmt))];
        if fmt == "native" {
            ways.push(read_all(&mut secmem_trace::ReadAhead::new(secmem_trace::NativeReader::open(&p).unwrap())));
        }
        for (got, got_err) in ways {
            let name = p.display();
            assert_eq!(got.len(), want.len(), "{name}: records before the end or the error");
            assert!(got == want, "{name}: records differ");
            let (a, b) = (got_err.map(|e| e.to_string()), want_err.as_ref().map(|e| e.to_string()));
            assert_eq!(a, b, "{name}: the same error (or none)");
            errors += a.is_some() as u32;
            assert!(want.len() > 1000 || a.is_some(), "{name}: {} records", want.len());
        }
    }
    assert!(errors >= 8, "the damaged files fail: {errors}");
}

/// `set_reading("inline")`: native files opened from then on give, in batches on this
/// thread, the records, end and errors they give read ahead; other formats are read ahead
/// either way; a way not known is one line naming the valid ones.
#[test]
fn native_files_read_inline_give_what_they_give_read_ahead() {
    let e = secmem_trace::set_reading("sideways").unwrap_err().to_string();
    assert_eq!(e, "unknown way of reading traces 'sideways': valid ones are ahead, inline");
    let files = big_files();
    let ahead: Vec<_> = files.iter().map(|(p, fmt)| read_path(p, Some(fmt))).collect();
    secmem_trace::set_reading("inline").unwrap();
    assert_eq!(secmem_trace::reading(), "inline");
    let inline: Vec<_> = files.iter().map(|(p, fmt)| read_path(p, Some(fmt))).collect();
    secmem_trace::set_reading("ahead").unwrap();
    assert_eq!(secmem_trace::reading(), "ahead");
    let natives = files.iter().filter(|(_, f)| *f == "native").count();
    assert!(natives >= 3, "{natives} native files, damaged ones among them");
    for (((p, _), (a, ae)), (b, be)) in files.iter().zip(&ahead).zip(&inline) {
        assert!(a == b, "{}: records differ", p.display());
        assert_eq!(ae.as_ref().map(|e| e.to_string()), be.as_ref().map(|e| e.to_string()), "{}", p.display());
    }
}

#[test]
fn dropping_a_read_ahead_source_early_returns_at_once() {
    for (p, fmt) in big_files().into_iter().take(5) {
        let mut r = open_trace_as(s(&p), Some(fmt)).unwrap();
        let mut i = Instr::default();
        for _ in 0..100 {
            assert!(r.next_into(&mut i).unwrap());
        }
        let t = std::time::Instant::now();
        drop(r);
        assert!(t.elapsed().as_secs_f64() < 1.0, "{}: drop took {:?}", p.display(), t.elapsed());
        // Nothing is left in a bad state: the file reads again in full.
        let (v, e) = read_path(&p, Some(fmt));
        assert!(e.is_none() && v.len() > 1000);
    }
}

#[test]
fn an_access_past_the_end_of_the_address_space_is_refused_by_every_reader() {
    // Found by fuzzing: such a record reached the simulator, whose address arithmetic
    // overflowed. No program can make one.
    let first_err = |p: &Path, f: &str| {
        let mut src = open_trace_as(s(p), Some(f)).unwrap();
        let mut ins = Instr::default();
        loop {
            match src.next_into(&mut ins) {
                Ok(true) => {}
                Ok(false) => panic!("{f}: read to the end"),
                Err(e) => return e.to_string(),
            }
        }
    };
    let l = tmp("wrap.lackey");
    std::fs::write(&l, "I  04001000,3\n L fffffffffffffffc,8\n").unwrap();
    let e = first_err(&l, "lackey");
    assert!(e.ends_with("bad lackey line 2: 8 bytes at 0xfffffffffffffffc run past the end of the address space at byte offset 14"), "{e}");
    // A ChampSim operand is read as one byte at its address (ChampSim's own view), so even the
    // record the fuzzer found (an operand at 2^64 - 4, once read as 8 bytes) now fits.
    let c = tmp("wrap.champsim");
    let mut r = ChampSimRecord { ip: 0x401000, ..Default::default() };
    r.source_memory[0] = u64::MAX;
    std::fs::write(&c, r.encode()).unwrap();
    let mut src = open_trace_as(s(&c), Some("champsim")).unwrap();
    let mut ins = Instr::default();
    assert!(src.next_into(&mut ins).unwrap());
    assert_eq!((ins.accesses[0].addr, ins.accesses[0].size), (u64::MAX, 1));
    let n = tmp("wrap.smt");
    let mut w = NativeWriter::create(&n).unwrap();
    let mut ins = Instr { pc: 0x401000, len: 4, op: OpClass::Mem, ..Default::default() };
    ins.add_access(false, u64::MAX - 1, &[1, 2, 3, 4]);
    w.write(&ins).unwrap();
    w.finish().unwrap();
    let e = first_err(&n, "native");
    assert!(e.contains("an access of 4 bytes at 0xfffffffffffffffe runs past the end of the address space at byte offset 16"), "{e}");
}
