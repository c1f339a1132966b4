//! Builds the `smtrace` Valgrind tool (tool/smtrace.c) against Debian's valgrind package and
//! leaves it in OUT_DIR for `include_bytes!`, so the wheel carries it. Without the package's
//! headers and static archives the file is left empty and tracing reports, at run time, that
//! valgrind is needed (everything else in secmem builds and works).
//!
//! Needs (Debian/Ubuntu, amd64): `apt-get install valgrind gcc` — the valgrind package ships
//! /usr/include/valgrind/pub_tool_*.h and /usr/lib/x86_64-linux-gnu/valgrind/lib{coregrind,vex}-amd64-linux.a.

use std::path::{Path, PathBuf};
use std::process::Command;

const INCLUDE: &str = "/usr/include/valgrind";
const LIBDIRS: [&str; 3] = ["/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind", "/usr/libexec/valgrind"];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let tool = out.join("smtrace-amd64-linux");
    println!("cargo:rerun-if-changed=tool/smtrace.c");
    println!("cargo:rerun-if-changed={INCLUDE}/pub_tool_basics.h");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let libdir = LIBDIRS.iter().map(Path::new).find(|d| d.join("libcoregrind-amd64-linux.a").exists());
    for d in LIBDIRS {
        println!("cargo:rerun-if-changed={d}/libcoregrind-amd64-linux.a");
    }
    let reason = if arch != "x86_64" || os != "linux" {
        Some(format!("the tracer supports x86_64 Linux only (target: {arch} {os})"))
    } else if !Path::new(INCLUDE).join("pub_tool_tooliface.h").exists() {
        Some(format!("{INCLUDE}/pub_tool_tooliface.h is missing"))
    } else if libdir.is_none() {
        Some("libcoregrind-amd64-linux.a is missing".to_string())
    } else {
        None
    };
    if let Some(why) = reason {
        println!("cargo:warning=secmem trace disabled: {why} (apt-get install valgrind gcc, then rebuild)");
        std::fs::write(&tool, b"").unwrap();
        return;
    }
    let libdir = libdir.unwrap();
    let obj = out.join("smtrace.o");
    let cc = std::env::var("SMTRACE_CC").unwrap_or_else(|_| "gcc".into());
    // Flags as Valgrind's own tools are built: no PIC (the tool is linked at a fixed
    // address), no builtins or stack protector (there is no libc underneath).
    run(Command::new(&cc).args([
        "-O2",
        "-g0",
        "-I",
        INCLUDE,
        "-DVGA_amd64=1",
        "-DVGO_linux=1",
        "-DVGP_amd64_linux=1",
        "-DVGPV_amd64_linux_vanilla=1",
        "-fno-stack-protector",
        "-fno-builtin",
        "-fno-pic",
        "-fno-PIE",
        "-fno-strict-aliasing",
        "-fcf-protection=none",
        "-Wall",
        "-Wno-unused-parameter",
        "-c",
        "tool/smtrace.c",
        "-o",
    ])
    .arg(&obj));
    run(Command::new(&cc)
        .arg("-o")
        .arg(&tool)
        .arg(&obj)
        .args(["-static", "-nodefaultlibs", "-nostartfiles", "-u", "_start", "-Wl,-Ttext-segment=0x58000000", "-no-pie"])
        .arg(libdir.join("libcoregrind-amd64-linux.a"))
        .arg(libdir.join("libvex-amd64-linux.a"))
        .arg("-lgcc"));
}

fn run(c: &mut Command) {
    let o = c.output().unwrap_or_else(|e| panic!("cannot run {:?}: {e}", c.get_program()));
    if !o.status.success() {
        panic!("building the smtrace Valgrind tool failed: {:?}\n{}{}", c, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    }
}
