//! Time the tracer's stages on a saved raw smtrace stream (CPU time per instruction, so a
//! busy machine still gives comparable figures): `stages RAWFILE [LEVEL...]`.
//! Save a stream with `stages --save RAWFILE PROGRAM [ARGS...]` (the program's output goes to
//! /dev/null). With OUT=DIR it also writes DIR/layered.smt and DIR/fused.smt.
//! ONLY=STAGE runs one stage: decode, consistent, layered, transcode or floor (a lower bound
//! for the transcoder, see `floor`).
use std::io::Cursor;

use secmem_trace::cputime::thread_cpu_seconds as cpu;
use secmem_trace::{Instr, NativeWriter, TraceSource};
use secmem_vgtrace::{transcode_layered, Consistent, RawDecoder, Transcoder};


/// What any transcoder of this raw stream into this native format does for every record, and
/// nothing else: step from record to record, look each instruction up, write its kind and
/// head (the branch outcome patched in when the next instruction's pc is known), its pc delta
/// when it does not follow on, and each access's address delta and value — no consistency
/// shadow, no check that the static part is in the writer's table (every record is written
/// as a repeat), no external, thread or CODE records, no compression. Its CPU time is a floor
/// for the transcoder's in this design — written plainly, so a tighter loop may exist
/// (docs/tracer.md, "Speed"). Returns (instructions, bytes written).
fn floor(raw: &[u8]) -> (u64, u64) {
    use secmem_vgtrace::raw::{T_DEF, T_END, T_EXEC, T_EXT, T_INSTR, T_LOAD, T_LOAD_NEW, T_STORE, T_THREAD};
    #[derive(Clone, Copy)]
    struct St {
        pc: u64,
        len: u8,
        flow: Flow,
        op: u8,
    }
    impl Default for St {
        fn default() -> St {
            St { pc: 0, len: 0, flow: Flow::None, op: 0 }
        }
    }
    use secmem_trace::native::{addr_slot, put_varint as varint, zigzag, ADDR_SLOTS, H_BRANCH_SHIFT, H_PC_SEQ, H_REPEAT, KIND_INSTR};
    use secmem_vgtrace::decode::Flow;
    let zz = |v: u64| zigzag(v as i64);
    let mut dec = secmem_vgtrace::decode::X86Decoder::new();
    let (mut table, mut addrs) = (Vec::<St>::new(), vec![0u64; ADDR_SLOTS]);
    let mut out: Vec<u8> = Vec::with_capacity(5 << 20);
    let (mut total, mut p, mut n, mut k) = (0u64, 8usize, 0u64, 0usize);
    let (mut prev_end, mut head_at, mut pend) = (0u64, usize::MAX, St::default());
    while p < raw.len() {
        if out.len() >= 4 << 20 {
            total += out.len() as u64;
            out.clear();
            head_at = usize::MAX;
        }
        let u32_at = |o: usize| u32::from_le_bytes(raw[p + o..p + o + 4].try_into().unwrap());
        match raw[p] {
            T_INSTR => {
                let st = table[u32_at(1) as usize];
                p += 5;
                n += 1;
                if head_at != usize::MAX {
                    let off = st.pc != pend.pc.wrapping_add(pend.len as u64);
                    out[head_at] |= (pend.flow.outcome(off) as u8) << H_BRANCH_SHIFT;
                }
                let seq = st.pc == prev_end;
                head_at = out.len() + 1;
                out.extend_from_slice(&[KIND_INSTR, st.op | (H_PC_SEQ * seq as u8) | H_REPEAT]);
                if !seq {
                    varint(&mut out, zz(st.pc.wrapping_sub(prev_end)));
                }
                prev_end = st.pc.wrapping_add(st.len as u64);
                (pend, k) = (st, 0);
            }
            T_LOAD | T_STORE | T_LOAD_NEW => {
                let size = u16::from_le_bytes(raw[p + 1..p + 3].try_into().unwrap()) as usize;
                let addr = u64::from_le_bytes(raw[p + 3..p + 11].try_into().unwrap());
                let slot = &mut addrs[addr_slot(pend.pc, k)];
                varint(&mut out, zz(addr.wrapping_sub(*slot)));
                *slot = addr;
                out.extend_from_slice(&raw[p + 11..p + 11 + size]);
                p += 11 + size;
                k += 1;
            }
            T_DEF => {
                let id = u32_at(1) as usize;
                let pc = u64::from_le_bytes(raw[p + 5..p + 13].try_into().unwrap());
                let len = raw[p + 13];
                let bytes = &raw[p + 14..p + 14 + (len as usize).min(32)];
                let d = secmem_vgtrace::raw::decode_def(&mut dec, pc, len, bytes);
                if table.len() <= id {
                    table.resize(id + 1, St::default());
                }
                table[id] = St { pc, len, flow: d.flow, op: d.op as u8 };
                p += 14 + (len as usize).min(32);
            }
            T_THREAD => p += 5,
            T_EXT => p += 13 + u32_at(9) as usize,
            T_EXEC => p += 1,
            T_END => break,
            k => panic!("raw record kind {k:#x} at {p}"),
        }
    }
    (n, total + out.len() as u64)
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() >= 3 && a[0] == "--save" {
        let mut cmd = secmem_vgtrace::TraceCommand::new(a[2..].to_vec());
        cmd.stdout = secmem_vgtrace::ProgramIo::Null;
        let n = secmem_vgtrace::save_raw_stream(&cmd, std::path::Path::new(&a[1])).unwrap();
        println!("{n} bytes of raw stream in {}", a[1]);
        return;
    }
    let bytes = std::fs::read(&a[0]).unwrap();
    let levels: Vec<i32> = a[1..].iter().map(|l| l.parse().unwrap()).collect();
    let out = std::env::var("OUT").ok();
    let path = |name: &str| out.as_ref().map(|d| format!("{d}/{name}")).unwrap_or_else(|| "/dev/null".into());
    let only = std::env::var("ONLY").unwrap_or_default();
    let run = |stage: &str| only.is_empty() || only == stage;
    let copy = || Cursor::new(bytes.clone());
    let mut i = Instr::default();
    let mut n = 1u64;
    if run("decode") {
        let (c0, t) = (copy(), cpu());
        let mut d = RawDecoder::new("raw", c0);
        n = 0;
        while d.next_record(&mut i).unwrap() {
            n += !i.external as u64;
        }
        println!("decode              {:6.1} ns/instr ({n} instructions)", (cpu() - t) / n as f64 * 1e9);
    }
    let ns = |s: f64, n: u64| s / n as f64 * 1e9;
    if only == "floor" {
        let t = cpu();
        let (n, b) = floor(&bytes);
        println!("floor               {:6.1} ns/instr ({:.2} B/instr)", ns(cpu() - t, n), b as f64 / n as f64);
        return;
    }
    if run("consistent") {
        let (c0, t) = (copy(), cpu());
        let mut c = Consistent::new(RawDecoder::new("raw", c0));
        while c.next_into(&mut i).unwrap() {}
        println!("decode+consistent   {:6.1} ns/instr", ns(cpu() - t, n));
    }
    for l in levels {
        if run("layered") {
        let (c0, t) = (copy(), cpu());
        let mut w = NativeWriter::with_level(path("layered.smt"), l).unwrap();
        transcode_layered("raw", c0, &mut w).unwrap();
        let main = cpu() - t;
        let f = w.finish_stats().unwrap();
        println!(
            "layered, zstd {l:3}   {:6.1} ns/instr + zstd thread {:5.1}  ({:.2} B/instr raw)",
            ns(main, n),
            ns(f.compress_cpu_seconds, n),
            f.raw_bytes as f64 / n as f64
        );
        }
        if !run("transcode") {
            continue;
        }
        let (c0, t) = (copy(), cpu());
        let mut tr = Transcoder::new("raw", c0);
        let mut w = NativeWriter::with_level(path("fused.smt"), l).unwrap();
        tr.run(&mut w).unwrap();
        let main = cpu() - t;
        let n = tr.counts().instructions;
        eprintln!("{:?}", tr.counts());
        let f = w.finish_stats().unwrap();
        println!(
            "transcode, zstd {l:3} {:6.1} ns/instr + zstd thread {:5.1}  ({:.2} B/instr raw)",
            ns(main, n),
            ns(f.compress_cpu_seconds, n),
            f.raw_bytes as f64 / n as f64
        );
    }
}
