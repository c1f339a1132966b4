//! Writes the seed inputs of every target into corpus/TARGET/seed-*: small valid inputs of
//! each format, from which the fuzzer mutates. `cargo run --example seeds` (then commit).

use std::path::Path;

use secmem_trace::champsim::ChampSimRecord;
use secmem_trace::{Instr, NativeWriter};

fn put(target: &str, name: &str, data: &[u8]) {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(format!("seed-{name}")), data).unwrap();
}

fn with(sel: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![sel];
    v.extend_from_slice(body);
    v
}

/// A small native trace: loads, stores and branches over a few pages (no memory image).
fn native(records: u64) -> Vec<u8> {
    let p = std::env::temp_dir().join(format!("secmem-seed-{}.smt", std::process::id()));
    let mut w = NativeWriter::create(&p).unwrap();
    let mut ins = Instr::default();
    for i in 0..records {
        ins.clear();
        ins.pc = 0x40_1000 + 4 * (i % 16);
        ins.len = 4;
        match i % 4 {
            0 => ins.add_access(false, 0x10_0000 + 8 * (i % 512), &i.to_le_bytes()),
            1 => ins.add_access(true, 0x20_0000 + 8 * (i % 512), &(i * 3).to_le_bytes()),
            3 => ins.branch = secmem_trace::Branch::Taken,
            _ => {}
        }
        w.write(&ins).unwrap();
    }
    w.finish().unwrap();
    let b = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    b
}

fn champsim(records: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..records {
        let mut r = ChampSimRecord { ip: 0x401000 + 4 * i, ..Default::default() };
        if i % 3 == 0 {
            r.source_memory[0] = 0x7fff_0000 + 64 * i;
        }
        if i % 5 == 0 {
            r.destination_memory[0] = 0x6000_0000 + 8 * i;
        }
        if i % 7 == 0 {
            r.is_branch = 1;
            r.branch_taken = (i % 2) as u8;
            r.destination_registers[0] = 26; // the instruction pointer, as ChampSim writes it
        }
        v.extend_from_slice(&r.encode());
    }
    v
}

fn lackey() -> Vec<u8> {
    b"==1234== Lackey, an example Valgrind tool\nI  04001000,3\n L 1ffefff8,8\nI  04001003,5\n S 1ffefff0,8\n M 04021000,4\nI  04001008,2\n".to_vec()
}

fn xz(b: &[u8]) -> Vec<u8> {
    secmem_fuzz::compress(1, b)
}

fn gz(b: &[u8]) -> Vec<u8> {
    secmem_fuzz::compress(2, b)
}

/// A raw tracer stream in the format of crates/vgtrace/src/raw.rs.
fn raw_stream() -> Vec<u8> {
    use secmem_vgtrace::raw::*;
    let mut v = MAGIC.to_vec();
    let def = |v: &mut Vec<u8>, id: u32, pc: u64, code: &[u8]| {
        v.push(T_DEF);
        v.extend(id.to_le_bytes());
        v.extend(pc.to_le_bytes());
        v.push(code.len() as u8);
        v.extend(code);
    };
    def(&mut v, 0, 0x401000, &[0x48, 0x8b, 0x03]); // mov rax, [rbx]
    def(&mut v, 1, 0x401003, &[0x48, 0x89, 0x01]); // mov [rcx], rax
    def(&mut v, 2, 0x401006, &[0x75, 0xf8]); // jne back
    for i in 0..4u64 {
        v.push(T_INSTR);
        v.extend(0u32.to_le_bytes());
        // Bytes the trace had not seen: the tool marks the load new.
        v.push(T_LOAD_NEW);
        v.extend(8u16.to_le_bytes());
        v.extend((0x7000 + 8 * i).to_le_bytes());
        v.extend((i * 3).to_le_bytes());
        v.push(T_INSTR);
        v.extend(1u32.to_le_bytes());
        v.push(T_STORE);
        v.extend(8u16.to_le_bytes());
        v.extend((0x9000 + 8 * i).to_le_bytes());
        v.extend((i * 3).to_le_bytes());
        v.push(T_INSTR);
        v.extend(2u32.to_le_bytes());
    }
    v.push(T_THREAD);
    v.extend(1u32.to_le_bytes());
    v.push(T_EXT);
    v.extend(0x5000u64.to_le_bytes());
    v.extend(4u32.to_le_bytes());
    v.extend(b"abcd");
    v.push(T_END);
    v.extend(12u64.to_le_bytes());
    v.extend(12u64.to_le_bytes());
    v.push(0);
    v.extend(0i32.to_le_bytes());
    v
}

fn main() {
    let n = native(300);
    let c = champsim(40);
    let l = lackey();
    // trace_file: byte 0 = format (0 detect, 1 native, 2 champsim, 3 lackey) | name << 2
    // (0 "t", 1 .smt, 2 .champsim, 3 .champsimtrace.xz, 4 .lackey, 5 .lackey.gz, 6 .smt.zst,
    // 7 .trace) | 0x80 to simulate too.
    put("trace_file", "native", &with(0x80 | 1 << 2, &n));
    put("trace_file", "native-detect", &with(0, &n));
    put("trace_file", "champsim", &with(0x80 | 2 | 2 << 2, &c));
    put("trace_file", "champsim-xz", &with(2 | 3 << 2, &xz(&c)));
    put("trace_file", "champsim-zst-detect", &with(0x80 | 7 << 2, &zstd::encode_all(&c[..], 1).unwrap()));
    put("trace_file", "lackey", &with(0x80 | 3 | 4 << 2, &l));
    put("trace_file", "lackey-gz", &with(5 << 2, &gz(&l)));
    put("trace_file", "lackey-detect", &with(0x80 | 7 << 2, &l));
    // trace_compressed: byte 0 = codec (0 raw, 1 xz, 2 gzip, 3 zstd) | format << 2 (0 native,
    // 1 champsim, 2 lackey); native bodies are the record stream after the 16-byte header.
    let body = &n[16..];
    let native_raw = zstd::decode_all(body).unwrap();
    put("trace_compressed", "native-raw", &with(0, &native_raw));
    put("trace_compressed", "native-zstd", &with(1, &native_raw));
    for (codec, name) in [(0u8, "raw"), (1, "xz"), (2, "gzip"), (3, "zstd")] {
        put("trace_compressed", &format!("champsim-{name}"), &with(codec | 1 << 2, &c));
        put("trace_compressed", &format!("lackey-{name}"), &with(codec | 2 << 2, &l));
    }
    put("tracer_stream", "raw", &raw_stream());
    // params: a preset file, a line "--", then --set lines.
    put("params", "inherit", b"inherit = \"suh2003\"\n[l2]\nsize = \"256KiB\"\nways = 8\n--\nmemory.size=64MiB\nchash.arity=2\n");
    put("params", "schemes", b"inherit = \"suh2003\"\nintegrity = \"lhash\"\nencryption = \"mecu\"\n[lhash]\ncheck_period = \"10k\"\n--\nmecu.lines_per_block=4\n");
    put("params", "own", b"description = \"x\"\ninherit = \"gassend2003\"\n[otp]\nts_cache_entries = 16\nspeculate = true\n--\nintegrity=mhash\nencryption=otp\nl1d.line=64B\n");
    put("params", "tdes", b"inherit = \"shi2007\"\n--\nencryption=tdes\nintegrity=naive\nmemory.size=1GiB\n");
    // engine: byte 0 = scheme pair and sizes; then operations (see src/engine.rs).
    for sel in [0u8, 3, 9, 15, 20, 27, 33, 35, 38, 77, 110, 143] {
        let mut ops = vec![sel];
        for i in 0..12u8 {
            ops.extend([i % 10, i.wrapping_mul(37), i, 40 + i]);
            ops.extend((0..(40 + i)).map(|k| k ^ i));
        }
        put("engine", &format!("pair{sel}"), &ops);
    }
    // engine_choices: two selector bytes (pair, sizes), then a byte per declared choice
    // parameter of the pair (`engine::choices`), then operations as above. Every value of
    // every choice of the counter-tree pairs, the others at their defaults, on a 16 KiB memory
    // under a 4 KiB L2 (sgx's nodes in the L2 compete with data for its 64 lines).
    use secmem_core::registry::{self, ENCRYPTION_SCHEMES, INTEGRITY_SCHEMES};
    let (ni, ne) = (INTEGRITY_SCHEMES.len(), ENCRYPTION_SCHEMES.len());
    let index = |list: &[&str], name: &str| list.iter().position(|n| *n == name).expect("registered");
    for (integ, enc) in [("none", "sgx"), ("chash", "sgx"), ("tdx", "sgx"), ("bonsai", "split"), ("bonsai", "otp")] {
        if registry::compatible(registry::integrity(integ).unwrap(), registry::encryption(enc).unwrap()).is_err() {
            continue;
        }
        let sel = (index(INTEGRITY_SCHEMES, integ) + ni * index(ENCRYPTION_SCHEMES, enc) + 2 * ni * ne) as u16;
        let choices = secmem_fuzz::engine::choices(integ, enc);
        for (k, (key, values)) in choices.iter().enumerate() {
            for (v, value) in values.iter().enumerate().skip(1) {
                // sgx's nodes in the L2 under each organisation: the placement is what is new.
                let in_l2 = choices.iter().position(|c| c.0 == "sgx.meta");
                let mut ops = sel.to_le_bytes().to_vec();
                ops.extend(choices.iter().enumerate().map(|(j, _)| if j == k { v as u8 } else if Some(j) == in_l2 { 1 } else { 0 }));
                for i in 0..12u8 {
                    ops.extend([i % 10, i.wrapping_mul(37), i, 40 + i]);
                    ops.extend((0..(40 + i)).map(|k| k ^ i));
                }
                // A combination the schemes refuse (tdx and sgx both in the ECC bits) is no seed.
                let (i, e, sets) = secmem_fuzz::engine::choice_machine(&ops).expect("a pair that can be built");
                let built = secmem_sim::configure("suh2003", Some(i), Some(e), &sets).map(|p| secmem_core::Engine::new(&p, 1).is_ok());
                if built == Ok(true) {
                    put("engine_choices", &format!("{integ}-{enc}-{key}-{value}"), &ops);
                }
            }
        }
    }
}
