//! End-to-end tests of the tracer on small C programs compiled here with gcc.
//!
//! Without valgrind (or a build without its headers) they skip with a printed reason,
//! unless SECMEM_REQUIRE_VALGRIND=1, when they fail (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use secmem_trace::{open_trace, Instr, NativeWriter, OpClass, TraceSource};
use secmem_vgtrace::{save_raw_stream, spawn, trace_to_file, transcode_layered, Consistent, ProgramIo, TraceCommand, Transcoder};

fn available() -> bool {
    let why = if !secmem_vgtrace::tool_built() {
        Some("this build carries no Valgrind tool (valgrind headers were missing)".to_string())
    } else if let Err(e) = secmem_vgtrace::valgrind_launcher() {
        Some(e)
    } else if Command::new("gcc").arg("--version").output().is_err() {
        Some("gcc is missing".to_string())
    } else {
        None
    };
    match why {
        None => true,
        Some(w) if std::env::var("SECMEM_REQUIRE_VALGRIND").as_deref() == Ok("1") => {
            panic!("SECMEM_REQUIRE_VALGRIND=1 but the tracer cannot run: {w}")
        }
        Some(w) => {
            eprintln!("skipped: {w}");
            false
        }
    }
}

fn workdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("secmem-vgtrace-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Known accesses to a 64-byte global `buf` (scalars of 1/2/4/8 bytes, a 32- and a 16-byte
/// SIMD store, then loads of all of them back), then a read() of argv[1] into `rbuf`.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
static unsigned char buf[64] __attribute__((aligned(64)));
static unsigned char rbuf[4096] __attribute__((aligned(64)));
static const unsigned char pat[32] = {
  0xa0,0xa1,0xa2,0xa3,0xa4,0xa5,0xa6,0xa7,0xa8,0xa9,0xaa,0xab,0xac,0xad,0xae,0xaf,
  0xb0,0xb1,0xb2,0xb3,0xb4,0xb5,0xb6,0xb7,0xb8,0xb9,0xba,0xbb,0xbc,0xbd,0xbe,0xbf };
int main(int argc, char** argv) {
  printf("buf %p rbuf %p\n", (void*)buf, (void*)rbuf);
  fflush(stdout);
  __asm__ volatile(
    "movb $0x11, (%0)\n\t"
    "movw $0x2233, 2(%0)\n\t"
    "movl $0x44556677, 4(%0)\n\t"
    "movabs $0x8899aabbccddeeff, %%rax\n\t"
    "movq %%rax, 8(%0)\n\t"
    "vmovdqu (%1), %%ymm0\n\t"
    "vmovdqu %%ymm0, 32(%0)\n\t"
    "movdqu 16(%1), %%xmm1\n\t"
    "movdqu %%xmm1, 16(%0)\n\t"
    "movzbl (%0), %%eax\n\t"
    "movzwl 2(%0), %%eax\n\t"
    "movl 4(%0), %%eax\n\t"
    "movq 8(%0), %%rax\n\t"
    "movdqu 16(%0), %%xmm2\n\t"
    "vmovdqu 32(%0), %%ymm3\n\t"
    "vzeroupper\n\t"
    :: "r"(buf), "r"(pat) : "rax", "xmm0", "xmm1", "xmm2", "xmm3", "memory");
  if (argc > 1) {
    int fd = open(argv[1], O_RDONLY);
    long n = read(fd, rbuf, sizeof rbuf);
    close(fd);
    printf("read %ld\n", n);
  }
  return 0;
}
"#;

struct Prog {
    exe: PathBuf,
    input: PathBuf,
    input_bytes: Vec<u8>,
}

fn program() -> &'static Prog {
    static P: OnceLock<Prog> = OnceLock::new();
    P.get_or_init(|| {
        let d = workdir();
        let src = d.join("known.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let exe = d.join("known");
        let o = Command::new("gcc").args(["-O1", "-o"]).arg(&exe).arg(&src).output().expect("gcc");
        assert!(o.status.success(), "gcc failed: {}", String::from_utf8_lossy(&o.stderr));
        let input = d.join("input.bin");
        let input_bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        std::fs::write(&input, &input_bytes).unwrap();
        Prog { exe, input, input_bytes }
    })
}

fn command(p: &Prog, out: &Path) -> TraceCommand {
    let mut c = TraceCommand::new([p.exe.to_str().unwrap(), p.input.to_str().unwrap()]);
    // A fixed environment: the run must be the same for every tool it is compared with.
    c.clear_env = true;
    c.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    c.stdout = ProgramIo::File(out.to_path_buf());
    c
}

/// All records of a live trace (optionally through the consistency adapter).
fn collect(src: &mut dyn TraceSource) -> Vec<Instr> {
    let mut v = vec![];
    let mut i = Instr::default();
    while src.next_into(&mut i).unwrap() {
        v.push(i.clone());
    }
    v
}

fn parse_addrs(out: &Path) -> (u64, u64) {
    let s = std::fs::read_to_string(out).unwrap();
    let w: Vec<&str> = s.split_whitespace().collect();
    let h = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
    (h(w[1]), h(w[3]))
}

#[test]
fn known_stores_and_loads_have_exact_addresses_and_values() {
    if !available() {
        return;
    }
    let p = program();
    let out = workdir().join("known.out");
    let recs = collect(&mut spawn(&command(p, &out)).unwrap());
    let (buf, _) = parse_addrs(&out);
    let pat: Vec<u8> = (0xa0..=0xbfu8).collect();
    let mut expect: Vec<(bool, u64, Vec<u8>)> = vec![
        (true, buf, vec![0x11]),
        (true, buf + 2, vec![0x33, 0x22]),
        (true, buf + 4, 0x44556677u32.to_le_bytes().to_vec()),
        (true, buf + 8, 0x8899aabbccddeeffu64.to_le_bytes().to_vec()),
        (true, buf + 32, pat.clone()),
        (true, buf + 16, pat[16..].to_vec()),
    ];
    let loads: Vec<(bool, u64, Vec<u8>)> = expect.iter().map(|(_, a, v)| (false, *a, v.clone())).collect();
    let order = [0, 1, 2, 3, 5, 4]; // loads in the program's order: 16-byte before 32-byte
    expect.extend(order.iter().map(|&k| loads[k].clone()));
    let got: Vec<(bool, u64, Vec<u8>)> = recs
        .iter()
        .filter(|r| !r.external)
        .flat_map(|r| r.accesses.iter().map(move |a| (a.store, a.addr, r.value(a).to_vec())))
        .filter(|(_, a, _)| *a >= buf && *a < buf + 64)
        .collect();
    assert_eq!(got, expect);
    // The SIMD stores are single instructions of the right class and registers.
    let ymm_store = recs.iter().find(|r| r.accesses.iter().any(|a| a.store && a.addr == buf + 32)).unwrap();
    assert_eq!((ymm_store.op, ymm_store.accesses.len()), (OpClass::Mem, 1));
    assert!((5..=7).contains(&ymm_store.len), "vmovdqu of {} bytes", ymm_store.len);
    assert!(ymm_store.srcs().contains(&32), "{:?}", ymm_store.srcs()); // ymm0
}

#[test]
fn read_buffers_are_external_records_with_the_file_bytes() {
    if !available() {
        return;
    }
    let p = program();
    let out = workdir().join("read.out");
    let recs = collect(&mut spawn(&command(p, &out)).unwrap());
    let (_, rbuf) = parse_addrs(&out);
    let ext: Vec<&Instr> = recs.iter().filter(|r| r.external && r.accesses.iter().any(|a| a.addr == rbuf)).collect();
    assert_eq!(ext.len(), 1, "one external record for the read() buffer");
    let a = &ext[0].accesses[0];
    assert!(a.store);
    assert_eq!(ext[0].value(a), &p.input_bytes[..]);
    // It follows the syscall instruction, which is a barrier.
    let at = recs.iter().position(|r| std::ptr::eq(r, ext[0])).unwrap();
    let prev = recs[..at].iter().rev().find(|r| !r.external).unwrap();
    assert_eq!(prev.op, OpClass::Barrier);
}

#[test]
fn instruction_count_matches_callgrind() {
    if !available() {
        return;
    }
    let p = program();
    let d = workdir();
    let out = d.join("cg-trace.out");
    let recs = collect(&mut spawn(&command(p, &out)).unwrap());
    let instrs: Vec<&Instr> = recs.iter().filter(|r| !r.external).collect();
    // Branch outcomes follow from the next pc; every control transfer has one.
    let (mut taken, mut not_taken) = (0, 0);
    for w in instrs.windows(2) {
        let (a, b) = (w[0], w[1]);
        assert_eq!(a.op == OpClass::Branch, a.branch != secmem_trace::Branch::None, "{a:?}");
        if a.branch == secmem_trace::Branch::NotTaken {
            assert_eq!(b.pc, a.pc + a.len as u64);
            not_taken += 1;
        } else if a.branch == secmem_trace::Branch::Taken {
            taken += 1;
        }
    }
    assert!(taken > 1000 && not_taken > 1000, "{taken} taken, {not_taken} not taken");
    // Callgrind charges a basic block when it is left, so the program's last block (up to
    // the exit_group syscall) is never counted: everything after the last control transfer
    // or syscall before the final instruction.
    let n = instrs.len();
    let last = instrs[..n - 1].iter().rposition(|r| matches!(r.op, OpClass::Branch | OpClass::Barrier)).unwrap();
    let tail = (n - 1 - last) as u64;
    assert!(tail > 0 && tail < 16, "last block of {tail} instructions");
    let lib = secmem_vgtrace::install_tool().unwrap();
    let cg = d.join("callgrind.out");
    let o = Command::new("valgrind")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("VALGRIND_LIB", &lib)
        .args(["--tool=callgrind", "-q", "--run-libc-freeres=no", "--run-cxx-freeres=no"])
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .arg(&p.exe)
        .arg(&p.input)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&cg).unwrap();
    let ir: u64 = text.lines().find_map(|l| l.strip_prefix("totals: ")).expect("callgrind totals").trim().parse().unwrap();
    assert_eq!(n as u64, ir + tail, "trace {n} instructions, callgrind Ir {ir}, last block {tail}");
}

#[test]
fn skip_and_count_windows_are_exact() {
    if !available() {
        return;
    }
    let p = program();
    let out = workdir().join("window.out");
    let full: Vec<Instr> = collect(&mut spawn(&command(p, &out)).unwrap()).into_iter().filter(|r| !r.external).collect();
    for (skip, count) in [(0u64, 1000u64), (5000, 2500), (full.len() as u64 - 100, 1000)] {
        let mut c = command(p, &out);
        c.skip = skip;
        c.count = Some(count);
        let mut live = spawn(&c).unwrap();
        let w: Vec<Instr> = collect(&mut live).into_iter().filter(|r| !r.external).collect();
        let want = &full[skip as usize..(skip + count).min(full.len() as u64) as usize];
        assert_eq!(w.len(), want.len(), "skip {skip} count {count}");
        for (a, b) in w.iter().zip(want) {
            assert_eq!((a.pc, &a.accesses, &a.data), (b.pc, &b.accesses, &b.data), "skip {skip} count {count}");
        }
        let end = live.end_info().unwrap();
        assert_eq!(end.count_reached, skip + count < full.len() as u64);
        assert_eq!(end.recorded, want.len() as u64);
    }
}

#[test]
fn pages_touched_during_skip_are_named_before_the_window() {
    if !available() {
        return;
    }
    let p = program();
    let out = workdir().join("pages.out");
    let all = collect(&mut spawn(&command(p, &out)).unwrap());
    assert!(!all.iter().any(|r| r.is_pages()), "no skip, no pages record");
    for skip in [5000u64, 20_000] {
        // Every page the code before instruction `skip` ran from or an access (the kernel's
        // writes included) touched, from the whole trace.
        let mut want: Vec<u64> = Vec::new();
        let mut n = 0;
        for r in &all {
            if !r.external {
                if n == skip {
                    break;
                }
                n += 1;
                want.extend((r.pc >> 12)..=((r.pc + r.len.max(1) as u64 - 1) >> 12));
            }
            for a in &r.accesses {
                want.extend((a.addr >> 12)..=((a.addr + a.size.max(1) as u64 - 1) >> 12));
            }
        }
        want.sort_unstable();
        want.dedup();
        let mut c = command(p, &out);
        c.skip = skip;
        c.count = Some(100);
        let w = collect(&mut spawn(&c).unwrap());
        let named = w.iter().take_while(|r| r.is_pages()).count();
        assert!(named >= 1 && !w[named..].iter().any(|r| r.is_pages()), "skip {skip}: pages records come first");
        let mut got: Vec<u64> = w[..named].iter().flat_map(|r| r.accesses.iter().map(|a| a.addr >> 12)).collect();
        let listed = got.len();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), listed, "skip {skip}: each page once");
        assert_eq!(got, want, "skip {skip}");
    }
}

fn sim_mismatches(src: &mut dyn TraceSource) -> (f64, f64) {
    let p = secmem_sim::configure("suh2003", Some("chash"), Some("otp"), &[]).unwrap();
    let o = secmem_sim::RunOptions { instructions: u64::MAX / 2, warmup: 0, seed: 1, progress: false, interval: 0 };
    let r = secmem_sim::run(&p, src, &o).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let get = |k: &str| r.stats.get_f64(k).unwrap_or_else(|| panic!("no {k}"));
    (get("trace.value_mismatches"), get("instructions"))
}

#[test]
fn consistency_adapter_gives_zero_value_mismatches() {
    if !available() {
        return;
    }
    let p = program();
    let out = workdir().join("sim.out");
    let mut c = Consistent::new(spawn(&command(p, &out)).unwrap());
    let (mism, n) = sim_mismatches(&mut c);
    assert_eq!(mism, 0.0);
    assert!(n > 10_000.0);
    assert!(c.supplied_bytes() > 1000, "the loader's image is supplied: {}", c.supplied_bytes());
    // Without the adapter the same trace does mismatch (so the check above can fail).
    let (raw, _) = sim_mismatches(&mut spawn(&command(p, &out)).unwrap());
    assert!(raw > 0.0);
}

#[test]
fn trace_file_round_trips_and_simulates_cleanly() {
    if !available() {
        return;
    }
    let p = program();
    let d = workdir();
    let f = d.join("known.smt");
    let s = trace_to_file(&command(p, &d.join("file.out")), &f).unwrap();
    assert!(s.instructions > 10_000 && s.compressed_bytes < s.raw_bytes && s.raw_bytes > 0);
    assert!(s.syscall_bytes >= 1000, "read() bytes: {}", s.syscall_bytes);
    let mut r = secmem_trace::open_trace(f.to_str().unwrap()).unwrap();
    let recs = collect(r.as_mut());
    assert_eq!(recs.iter().filter(|r| !r.external).count() as u64, s.instructions);
    let (mism, _) = sim_mismatches(secmem_trace::open_trace(f.to_str().unwrap()).unwrap().as_mut());
    assert_eq!(mism, 0.0);
}

#[test]
fn a_missing_program_is_one_line() {
    let e = match spawn(&TraceCommand::new(["/nonexistent/prog"])) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("spawned a missing program"),
    };
    assert!(e.contains("/nonexistent/prog") && !e.contains('\n'), "{e}");
    let e = TraceCommand::new(["no-such-program-xyz"]).resolve_program().unwrap_err();
    assert!(e.contains("no-such-program-xyz") && e.contains("PATH"), "{e}");
}

#[test]
fn the_same_program_and_input_give_identical_trace_files() {
    if !available() {
        return;
    }
    let p = program();
    let d = workdir();
    let (a, b) = (d.join("det-a.smt"), d.join("det-b.smt"));
    // stdout to /dev/null: a fresh output file would be fstat()ed with new times and inode.
    let mut c = command(p, &d.join("det.out"));
    c.stdout = ProgramIo::Null;
    trace_to_file(&c, &a).unwrap();
    trace_to_file(&c, &b).unwrap();
    let ra = collect(secmem_trace::open_trace(a.to_str().unwrap()).unwrap().as_mut());
    let rb = collect(secmem_trace::open_trace(b.to_str().unwrap()).unwrap().as_mut());
    if let Some(i) = (0..ra.len().min(rb.len())).find(|&i| ra[i] != rb[i]) {
        panic!("record {i} of {} differs:\n{:?}\n{:?}", ra.len(), ra[i], rb[i]);
    }
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "two traces of the same run differ");
}

fn sh(script: &str) -> TraceCommand {
    let mut c = TraceCommand::new(["/bin/sh".to_string(), "-c".to_string(), script.to_string()]);
    c.stdout = ProgramIo::Null;
    c
}

#[test]
fn an_exec_ends_the_trace_cleanly_keeping_what_came_before() {
    if !available() {
        return;
    }
    let out = workdir().join("exec.smt");
    let s = trace_to_file(&sh("exec /bin/true"), &out).expect("an exec is a clean end");
    assert!(s.exec && !s.count_reached, "{s:?}");
    assert!(s.instructions > 10_000, "the shell's instructions before the exec are kept: {s:?}");
    let mut r = secmem_trace::open_trace(out.to_str().unwrap()).unwrap();
    assert_eq!(collect(&mut *r).iter().filter(|i| !i.external).count() as u64, s.instructions);
}

#[test]
fn the_programs_exit_code_is_reported() {
    if !available() {
        return;
    }
    let out = workdir().join("exit7.smt");
    let s = trace_to_file(&sh("exit 7"), &out).unwrap();
    assert_eq!(s.exit_code, 7);
    let s = trace_to_file(&sh("exit 0"), &out).unwrap();
    assert_eq!(s.exit_code, 0);
}

#[test]
fn a_failed_trace_leaves_an_existing_file_alone_and_a_bad_path_fails_before_running() {
    if !available() {
        return;
    }
    let d = workdir().join("failed");
    std::fs::create_dir_all(&d).unwrap();
    let keep = d.join("keep.smt");
    std::fs::write(&keep, b"keep").unwrap();
    let e = trace_to_file(&TraceCommand::new(["/nonexistent/prog".to_string()]), &keep).unwrap_err();
    assert!(e.to_string().contains("no such program"), "{e}");
    assert_eq!(std::fs::read(&keep).unwrap(), b"keep");
    let t = std::time::Instant::now();
    let e = trace_to_file(&sh("exit 0"), &d.join("no/such/dir/x.smt")).unwrap_err();
    assert!(e.to_string().contains("no such directory"), "{e}");
    let e = trace_to_file(&sh("exit 0"), &d).unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
    assert!(t.elapsed().as_secs() < 10);
    assert!(std::fs::read_dir(&d).unwrap().all(|f| !f.unwrap().file_name().to_string_lossy().ends_with(".part")));
}

#[test]
fn dropping_a_live_trace_mid_run_ends_the_program_promptly() {
    if !available() {
        return;
    }
    // An endless program: the drop must kill it (and Valgrind) rather than wait for it.
    let mut live = spawn(&sh("while :; do :; done")).unwrap();
    let mut ins = Instr::default();
    for _ in 0..100_000 {
        assert!(live.next_into(&mut ins).unwrap());
    }
    let t = std::time::Instant::now();
    drop(live);
    assert!(t.elapsed().as_secs() < 10, "drop took {:?}", t.elapsed());
}

#[test]
fn the_trace_file_holds_the_live_streams_records() {
    // trace_to_file transcodes the raw stream in one pass; the live source decodes it
    // record by record and the consistency adapter supplies memory: both must give the same
    // records (two runs of deterministic programs: the C program, and a shell loop; files
    // read by a program are not used, their access times change from run to run).
    if !available() {
        return;
    }
    let d = workdir();
    let mut known = command(program(), &d.join("same.out"));
    known.stdout = ProgramIo::Null;
    let mut shell = sh("i=0; while [ $i -lt 200 ]; do i=$((i+1)); done");
    shell.clear_env = true;
    shell.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    for (name, cmd) in [("known", known), ("shell", shell)] {
        let f = d.join(format!("{name}-live.smt"));
        let s = trace_to_file(&cmd, &f).unwrap();
        let file = collect(secmem_trace::open_trace(f.to_str().unwrap()).unwrap().as_mut());
        let live = collect(&mut Consistent::new(spawn(&cmd).unwrap()));
        assert_eq!(file.iter().filter(|r| !r.external).count() as u64, s.instructions);
        if let Some(i) = (0..file.len().min(live.len())).find(|&i| file[i] != live[i]) {
            panic!("{name}: record {i} differs:\n{:?}\n{:?}", file[i], live[i]);
        }
        assert_eq!(file.len(), live.len(), "{name}");
        assert!(s.instructions > 10_000, "{name}: {s:?}");
    }
}

/// The pids of processes whose command line contains `marker`.
fn pids_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid = e.file_name().to_str()?.parse().ok()?;
            let c = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&c).contains(marker).then_some(pid)
        })
        .collect()
}

fn processes_with(marker: &str) -> usize {
    pids_with(marker).len()
}

#[test]
fn a_live_trace_read_ahead_gives_the_same_records_and_a_drop_kills_a_blocked_program() {
    if !available() {
        return;
    }
    let p = program();
    let mut c = command(p, &workdir().join("ra.out"));
    c.stdout = ProgramIo::Null;
    let want = collect(&mut Consistent::new(spawn(&c).unwrap()));
    let got = collect(&mut spawn(&c).unwrap().read_ahead());
    assert!(got == want && want.len() > 10_000, "{} and {} records", got.len(), want.len());
    // A program blocked forever (opening a FIFO nobody writes): the reader thread waits on
    // the pipe, and only the drop's stop hook can end the program.
    let fifo = workdir().join("never.fifo");
    let _ = std::fs::remove_file(&fifo);
    let cpath = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    let marker = format!("secmem-blocked-{}", std::process::id());
    // (The tool hands its buffer over only when it is full, so no record arrives.)
    let live = spawn(&sh(&format!("read x < {}; echo {marker}", fifo.display()))).unwrap().read_ahead();
    let t = std::time::Instant::now();
    while processes_with(&marker) < 2 && t.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(processes_with(&marker), 2, "unshare and valgrind run the shell");
    let t = std::time::Instant::now();
    drop(live);
    assert!(t.elapsed().as_secs() < 2, "drop took {:?}", t.elapsed());
    let t = std::time::Instant::now();
    while processes_with(&marker) > 0 && t.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = pids_with(&marker);
    for &pid in &left {
        // SAFETY: killing what this test started (its marker names this test process).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "the program was not killed: {left:?}");
}

#[test]
fn the_stream_is_the_same_handed_over_or_copied() {
    // The tool hands its buffers to the pipe (vmsplice) and refills one only once its chunk
    // has surely left the pipe, copying chunks when small ones come in a row (each failed
    // exec of a PATH search flushes one): the records must be those of a copied stream.
    if !available() {
        return;
    }
    let mut known = command(program(), &workdir().join("splice.out"));
    known.stdout = ProgramIo::Null;
    let mut search = TraceCommand::new(["/usr/bin/env", "PATH=/no/1:/no/2:/no/3:/no/4:/no/5:/no/6:/no/7:/no/8:/no/9:/no/10:/usr/bin:/bin", "true"]);
    search.clear_env = true;
    search.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    for (name, cmd) in [("known", known), ("search", search)] {
        let mut copied = cmd.clone();
        copied.copy_stream = true;
        let (a, b) = (collect(&mut spawn(&cmd).unwrap()), collect(&mut spawn(&copied).unwrap()));
        if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
            panic!("{name}: record {i} of {} differs:\n{:?}\n{:?}", a.len(), a[i], b[i]);
        }
        assert_eq!(a.len(), b.len(), "{name}");
        assert!(a.len() > 10_000, "{name}: {} records", a.len());
    }
}

#[test]
fn the_tool_marks_new_exactly_the_loads_the_rust_shadow_supplies() {
    // The tool keeps what the trace has seen of memory and marks the loads it had not seen
    // (LOAD_NEW); the transcoder supplies exactly those, while the record decoder leaves
    // consistency to `Consistent` (the Rust shadow). One run's raw stream read both ways must
    // give the same file: the C shadow and the Rust one agree on every load.
    if !available() {
        return;
    }
    let d = workdir();
    let text: Vec<u8> = (0..5_000u32).flat_map(|i| format!("{} {} ", i % 977, i * 31 % 101).into_bytes()).collect();
    std::fs::write(d.join("text.in"), &text).unwrap();
    let mut known = command(program(), &d.join("shadow.out"));
    known.stdout = ProgramIo::Null;
    let mut gzip = TraceCommand::new(["gzip", "-c", d.join("text.in").to_str().unwrap()]);
    gzip.stdout = ProgramIo::Null;
    let shell = sh("i=0; while [ $i -lt 200 ]; do i=$((i+1)); done");
    // Memory the trace saw that then changes behind its back: a shared page written by a
    // forked child (whose run is not traced) after the parent stored to it.
    let src = d.join("shared.c");
    std::fs::write(&src, SHARED).unwrap();
    let exe = d.join("shared");
    let o = Command::new("gcc").args(["-O1", "-o"]).arg(&exe).arg(&src).output().expect("gcc");
    assert!(o.status.success(), "gcc failed: {}", String::from_utf8_lossy(&o.stderr));
    let shared = TraceCommand::new([exe.to_str().unwrap()]);
    // After --skip the trace has seen nothing: most early loads are new.
    let mut skipped = gzip.clone();
    skipped.skip = 300_000;
    for (name, cmd) in [("known", known), ("gzip", gzip), ("skipped", skipped), ("shell", shell), ("shared", shared)] {
        let raw = d.join(format!("{name}.raw"));
        assert!(save_raw_stream(&cmd, &raw).unwrap() > 0);
        let t_path = d.join(format!("{name}-transcoded.smt"));
        let mut w = NativeWriter::create(&t_path).unwrap();
        let mut t = Transcoder::new(name, std::fs::File::open(&raw).unwrap());
        t.run(&mut w).unwrap();
        w.finish().unwrap();

        let l_path = d.join(format!("{name}-layered.smt"));
        let mut w = NativeWriter::create(&l_path).unwrap();
        let supplied = transcode_layered(name, std::fs::File::open(&raw).unwrap(), &mut w).unwrap();
        w.finish().unwrap();

        // Record by record, in lockstep (gzip's run is millions of records).
        let (mut ra, mut rb) = (open_trace(t_path.to_str().unwrap()).unwrap(), open_trace(l_path.to_str().unwrap()).unwrap());
        let (mut a, mut b, mut k) = (Instr::default(), Instr::default(), 0u64);
        loop {
            let (more_a, more_b) = (ra.next_into(&mut a).unwrap(), rb.next_into(&mut b).unwrap());
            assert_eq!(more_a, more_b, "{name}: one file ends at record {k}");
            if !more_a {
                break;
            }
            assert!(a == b, "{name}: record {k} differs:\n{a:?}\n{b:?}");
            k += 1;
        }
        assert_eq!(t.counts().supplied_bytes, supplied, "{name}");
        // The loader's image and libc's data are loaded before the trace saw them written.
        assert!(t.counts().supplied_bytes > 1000, "{name}: {:?}", t.counts());
        assert!(t.counts().instructions > 10_000, "{name}: {:?}", t.counts());
    }
}

/// A parent stores to a shared page, its child (not traced) overwrites part of it, and the
/// parent loads it back (16, 32 and 8 bytes at a time): loads of bytes the trace saw, with
/// other values now.
const SHARED: &str = r#"
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  volatile unsigned long* p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 64; i++) p[i] = i;
  if (fork() == 0) {
    for (int i = 0; i < 64; i += 2) p[i] = 1000 + i;
    _exit(0);
  }
  wait(0);
  /* 16- and 32-byte loads of rewritten words (the tool's vector path), then scalar ones. */
  __asm__ volatile("movdqu (%0), %%xmm0" : : "r"(p) : "xmm0", "memory");
  if (__builtin_cpu_supports("avx"))
    __asm__ volatile("vmovdqu 64(%0), %%ymm0" : : "r"(p) : "xmm0", "memory");
  unsigned long s = 0;
  for (int i = 0; i < 64; i++) s += p[i];
  return s == 64 * 63 / 2 + 32 * 1000 ? 0 : 1;
}
"#;
