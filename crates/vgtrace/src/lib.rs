//! Tracing unmodified Linux programs with data values, through secmem's own Valgrind tool.
//!
//! - `tool/smtrace.c`: the Valgrind tool (C), built by `build.rs` and embedded here; at run
//!   time it is installed into a cache directory beside symlinks to the system's Valgrind
//!   files and run by the system's `valgrind` launcher ([`install_tool`]).
//! - [`raw`]: the tool's raw stream (read through a pipe) and its decoder into
//!   [`secmem_trace::Instr`] records; [`decode`]: registers and op class from the bytes.
//! - [`Consistent`] (in `secmem_trace`), which supplies memory the trace never saw written.
//! - [`spawn`] streams a live program as a [`TraceSource`]; [`trace_to_file`] writes a
//!   native trace.

pub mod decode;
pub mod bench;
pub mod raw;
pub mod transcode;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use secmem_trace::cputime::thread_cpu_seconds;
use secmem_trace::{Instr, NativeWriter, ReadAhead, TraceError, TraceSource};

pub use secmem_trace::consistent::{Consistent, Shadow};
pub use raw::{EndInfo, RawDecoder};
pub use transcode::{transcode_layered, Failure, Transcoder, Watch};

/// The tool binary (empty if valgrind's headers were missing at build time).
static TOOL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/smtrace-amd64-linux"));

/// The one line shown whenever tracing is impossible on this machine.
pub const NEEDS_VALGRIND: &str = "secmem trace needs Debian's valgrind package: apt-get install valgrind, then reinstall secmem";

/// Valgrind's name for our tool (`--tool=smtrace`).
pub const TOOL_NAME: &str = "smtrace";

/// Whether this build carries the Valgrind tool.
pub fn tool_built() -> bool {
    !TOOL.is_empty()
}

/// The embedded tool binary.
pub fn tool_bytes() -> &'static [u8] {
    TOOL
}

fn fnv64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100000001b3))
}

/// Where the system's Valgrind keeps its tools and preload libraries.
fn valgrind_libexec() -> Option<PathBuf> {
    ["/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind", "/usr/local/libexec/valgrind"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("vgpreload_core-amd64-linux.so").exists())
}

fn find_in_path(prog: &str, path: Option<&str>) -> Option<PathBuf> {
    let path = path.map(str::to_string).or_else(|| std::env::var("PATH").ok()).unwrap_or_else(|| "/usr/bin:/bin".into());
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(prog)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The `valgrind` launcher, or [`NEEDS_VALGRIND`].
pub fn valgrind_launcher() -> Result<PathBuf, String> {
    if !tool_built() {
        return Err(NEEDS_VALGRIND.into());
    }
    let v = find_in_path("valgrind", None).ok_or_else(|| NEEDS_VALGRIND.to_string())?;
    valgrind_libexec().ok_or_else(|| NEEDS_VALGRIND.to_string())?;
    Ok(v)
}

/// Install the tool into the cache (`$XDG_CACHE_HOME/secmem` or `~/.cache/secmem`, in a
/// directory named by a hash of the tool) beside symlinks to everything in the system's
/// Valgrind directory; returns the directory to use as `VALGRIND_LIB`.
pub fn install_tool() -> Result<PathBuf, String> {
    if !tool_built() {
        return Err(NEEDS_VALGRIND.into());
    }
    let libexec = valgrind_libexec().ok_or_else(|| NEEDS_VALGRIND.to_string())?;
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").ok_or("secmem trace: neither XDG_CACHE_HOME nor HOME is set")?).join(".cache"),
    }
    .join("secmem");
    let key = fnv64(TOOL) ^ fnv64(libexec.as_os_str().as_encoded_bytes()).rotate_left(1);
    let dir = cache.join(format!("valgrind-{key:016x}"));
    let exe = format!("{TOOL_NAME}-amd64-linux");
    if std::fs::metadata(dir.join(&exe)).map(|m| m.len() == TOOL.len() as u64 && m.permissions().mode() & 0o100 != 0).unwrap_or(false) {
        return Ok(dir);
    }
    let err = |what: &str, p: &Path, e: std::io::Error| format!("secmem trace: cannot {what} {}: {e}", p.display());
    std::fs::create_dir_all(&cache).map_err(|e| err("create", &cache, e))?;
    // Built beside and renamed into place, so concurrent runs never see half a directory.
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = cache.join(format!("valgrind-{key:016x}.tmp{}-{serial}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| err("create", &tmp, e))?;
    let t = tmp.join(&exe);
    std::fs::write(&t, TOOL).map_err(|e| err("write", &t, e))?;
    std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755)).map_err(|e| err("chmod", &t, e))?;
    for ent in std::fs::read_dir(&libexec).map_err(|e| err("list", &libexec, e))? {
        let ent = ent.map_err(|e| err("list", &libexec, e))?;
        if ent.file_name() == exe.as_str() {
            continue;
        }
        let l = tmp.join(ent.file_name());
        std::os::unix::fs::symlink(ent.path(), &l).map_err(|e| err("link", &l, e))?;
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        if !dir.join(&exe).exists() {
            return Err(format!("secmem trace: cannot install the tool into {}", dir.display()));
        }
    }
    Ok(dir)
}

/// Where one of the traced program's standard streams goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProgramIo {
    #[default]
    Inherit,
    Null,
    /// A file: read for stdin, created (truncated) for stdout/stderr.
    File(PathBuf),
}

/// What to trace and how.
#[derive(Clone, Debug, Default)]
pub struct TraceCommand {
    /// The program and its arguments (`argv[0]` is looked up in PATH unless it has a '/').
    pub argv: Vec<String>,
    /// Environment variables set for the program (after `clear_env`).
    pub env: Vec<(String, String)>,
    /// Start the program with only `env` (plus what Valgrind itself needs).
    pub clear_env: bool,
    pub cwd: Option<PathBuf>,
    /// Record nothing for the first `skip` instructions.
    pub skip: u64,
    /// End the program once this many instructions were recorded.
    pub count: Option<u64>,
    /// The program's stdin (default: /dev/null, so traces do not depend on a terminal).
    pub stdin: ProgramIo,
    pub stdout: ProgramIo,
    pub stderr: ProgramIo,
    /// Have the tool copy its stream into the pipe instead of handing its buffers over
    /// (vmsplice): the same stream, more slowly; for checking one path against the other.
    pub copy_stream: bool,
}

impl TraceCommand {
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> TraceCommand {
        TraceCommand { argv: argv.into_iter().map(Into::into).collect(), stdin: ProgramIo::Null, ..TraceCommand::default() }
    }

    /// The program's path as it will be run (checked to exist and be executable), after
    /// checking that the working directory exists, or a one-line error: every reason the
    /// command cannot start, in one place.
    pub fn resolve_program(&self) -> Result<PathBuf, String> {
        if let Some(d) = &self.cwd {
            if !d.is_dir() {
                return Err(format!("{}: no such directory (the program's working directory)", d.display()));
            }
        }
        let prog = self.argv.first().ok_or("secmem trace: no program given")?;
        if prog.contains('/') {
            let p = match &self.cwd {
                Some(d) if !Path::new(prog).is_absolute() => d.join(prog),
                _ => PathBuf::from(prog),
            };
            if !p.exists() {
                return Err(format!("{prog}: no such program"));
            }
            if !is_executable(&p) {
                return Err(format!("{prog}: not an executable file"));
            }
            return Ok(p);
        }
        let path = self.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str());
        let path = if self.clear_env && path.is_none() { Some("/usr/local/bin:/usr/bin:/bin") } else { path };
        find_in_path(prog, path).ok_or_else(|| format!("{prog}: no such program (not found in PATH)"))
    }
}

fn io_for(p: &ProgramIo, write: bool) -> Result<Stdio, String> {
    Ok(match p {
        ProgramIo::Inherit => Stdio::inherit(),
        ProgramIo::Null => Stdio::null(),
        ProgramIo::File(f) => {
            // A FIFO waits for its other end: polled, so a stop request (Ctrl-C) ends the wait.
            let r = if write { secmem_files::open_for_writing(f) } else { secmem_files::open_for_reading(f) };
            Stdio::from(r.map_err(|e| format!("{}: {e}", f.display()))?)
        }
    })
}

/// A pipe whose ends are closed on exec (the child's end is made inheritable after fork).
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two fds into the array; each is owned exactly once below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("secmem trace: cannot create a pipe: {}", std::io::Error::last_os_error()));
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The read end of the tool's pipe, shared with the [`Tracee`] that may have to close it.
pub struct Pipe(Arc<File>);

impl Read for Pipe {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self.0).read(buf)
    }
}

/// Valgrind running the program: the process, its log, and how it ended. Dropping it
/// before the program has ended kills the program.
struct Tracee {
    pipe: Arc<File>,
    child: Option<Child>,
    /// Set once the child is reaped (its pid may then be reused): see [`LiveTrace::read_ahead`].
    reaped: Arc<Mutex<bool>>,
    log: Option<JoinHandle<String>>,
    name: String,
    status: Option<ExitStatus>,
    failure: Option<String>,
    started: Instant,
    /// CPU time (user + system) of Valgrind and what it ran, once reaped.
    cpu_seconds: f64,
}

impl Tracee {
    /// Wait for Valgrind to exit; returns its log (what it printed through --log-fd).
    fn reap(&mut self) -> String {
        if let Some(c) = self.child.take() {
            let mut reaped = self.reaped.lock().unwrap_or_else(|e| e.into_inner());
            let (status, cpu) = wait_with_cpu(c);
            *reaped = true;
            self.status = status;
            self.cpu_seconds = cpu;
        }
        self.log.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }

    /// The program's exit code, once it has ended on its own (None if it was killed, or
    /// ended by `count` or an exec).
    fn exit_code(&self, end: Option<EndInfo>) -> Option<i32> {
        match end {
            Some(e) if e.count_reached || e.exec => None,
            _ => self.status.and_then(|s| s.code()),
        }
    }

    /// One line explaining why the stream failed.
    fn explain(&mut self, e: &TraceError) -> String {
        if let Some(f) = &self.failure {
            return f.clone();
        }
        let log = self.reap();
        let said: Vec<&str> = log.lines().map(|l| l.trim_start_matches(|c: char| c == '=' || c.is_ascii_digit()).trim()).filter(|l| !l.is_empty()).collect();
        let status = self.status.map(|s| s.to_string()).unwrap_or_else(|| "unknown status".into());
        let msg = if let Some(line) = said.iter().find(|l| l.starts_with("valgrind:") || l.contains("rror") || l.contains("cannot") || l.contains("not found")) {
            format!("{}: tracing failed: {}", self.name, line.trim_start_matches("valgrind: "))
        } else if let Some(line) = said.first() {
            format!("{}: tracing failed ({status}): {line}", self.name)
        } else {
            format!("{}: tracing failed ({status}): {e}", self.name)
        };
        self.failure = Some(msg.clone());
        msg
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Stopped before the program ended (the simulation reached its count, an error,
            // Ctrl-C). Valgrind may be pid 1 of its own namespace, which the death signal of
            // `unshare --kill-child` does not always reach: kill the whole process group
            // (its own, see spawn) from here, and close our end of the pipe so that a tool
            // blocked writing into it fails and exits.
            if matches!(c.try_wait(), Ok(None)) {
                // SAFETY: signalling the process group we created for this child.
                unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                let _ = c.kill();
            }
            if let Ok(null) = File::open("/dev/null") {
                // SAFETY: dup2 onto an fd we own (kept open by the Arc) replaces it atomically.
                unsafe { libc::dup2(null.as_raw_fd(), self.pipe.as_raw_fd()) };
            }
            let mut reaped = self.reaped.lock().unwrap_or_else(|e| e.into_inner());
            let _ = c.wait();
            *reaped = true;
        }
        // The log thread ends when the last writer of the log pipe exits; never wait for it
        // here (a surviving grandchild would hang us).
        drop(self.log.take());
    }
}

/// Wait for `c` to exit: its status and the CPU time it and its waited-for descendants used
/// (`unshare` waits for Valgrind, so Valgrind's time is included).
fn wait_with_cpu(mut c: Child) -> (Option<ExitStatus>, f64) {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it and the status for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        let r = unsafe { libc::wait4(c.id() as i32, &mut status, 0, &mut ru) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    if r != c.id() as i32 {
        // Not ours to reap after all (already reaped): let std tell.
        return (c.wait().ok(), 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (Some(ExitStatus::from_raw(status)), tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// A program running under the tracer, read as a [`TraceSource`] (wrap it in
/// [`Consistent`] before simulating). Dropping it ends the program.
pub struct LiveTrace {
    dec: RawDecoder<Pipe>,
    proc: Tracee,
}

impl LiveTrace {
    /// What the END record said (once the stream has ended).
    pub fn end_info(&self) -> Option<EndInfo> {
        self.dec.end_info()
    }

    /// Raw stream bytes read from the pipe so far.
    pub fn pipe_bytes(&self) -> u64 {
        self.dec.bytes_read()
    }

    /// Distinct static instructions seen so far.
    pub fn static_instructions(&self) -> usize {
        self.dec.static_count()
    }

    /// The program's exit code, once it has ended on its own (None if it was killed, or
    /// ended by `count` or an exec).
    pub fn exit_code(&self) -> Option<i32> {
        self.proc.exit_code(self.dec.end_info())
    }

    /// Seconds since the program was started.
    pub fn elapsed(&self) -> f64 {
        self.proc.started.elapsed().as_secs_f64()
    }

    /// Hand the (pc, bytes) of instructions that appeared for the first time to `f`.
    pub fn take_new_code(&mut self, f: impl FnMut(u64, &[u8])) {
        self.dec.take_new_code(f)
    }

    /// The program's records with the consistency adapter's, decoded on a thread of their
    /// own (the simulator's thread then only simulates): what a live simulation reads.
    /// Dropping it kills the program at once, even while the reader waits on the pipe.
    pub fn read_ahead(self) -> ReadAhead {
        let pgid = self.proc.child.as_ref().map(|c| c.id() as i32);
        let reaped = self.proc.reaped.clone();
        ReadAhead::with_stop(Consistent::new(self), move || {
            // Not while the reader reaps it (it is ending anyway), nor once reaped (the pid
            // may belong to another process by then).
            if let (Some(pgid), Ok(done)) = (pgid, reaped.try_lock()) {
                if !*done {
                    // SAFETY: signalling the process group created for the program (see spawn).
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
            }
        })
    }
}

impl TraceSource for LiveTrace {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        match self.dec.next_record(out) {
            Ok(true) => Ok(true),
            Ok(false) => {
                self.proc.reap();
                Ok(false)
            }
            Err(e) => Err(TraceError::Other(self.proc.explain(&e))),
        }
    }

    fn name(&self) -> &str {
        &self.proc.name
    }
}

/// Whether `unshare --pid` works here (root, or a kernel that allows it); probed once.
fn pid_namespace_works() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        std::env::var_os("SECMEM_TRACE_NO_PIDNS").is_none()
            && Command::new("unshare")
                .args(["--pid", "--fork", "--kill-child", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
    })
}

/// Start `cmd` under the tracer; its records stream through a pipe (nothing touches disk).
pub fn spawn(cmd: &TraceCommand) -> Result<LiveTrace, TraceError> {
    // Consistent keeps the shadow on this side (read_ahead): the tool need not.
    let (proc, pipe) = start_with(cmd, false, false).map_err(TraceError::Other)?;
    Ok(LiveTrace { dec: RawDecoder::new(proc.name.clone(), pipe), proc })
}

fn clear_cloexec(fd: i32) -> std::io::Result<()> {
    // SAFETY: plain fcntl on an fd we own; runs in the forked child before exec.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Start Valgrind running `cmd`; returns it and the pipe its tool writes the raw stream to,
/// new loads marked (LOAD_NEW: what the transcoder needs).
fn start(cmd: &TraceCommand) -> Result<(Tracee, Pipe), String> {
    start_with(cmd, false, true)
}

/// As [`start`]; with `discard` the tool writes to /dev/null instead (the pipe then only
/// ends): what the tool alone costs; without `marks` the tool keeps no shadow and every load
/// is a LOAD (for a reader that keeps its own: `Consistent`).
fn start_with(cmd: &TraceCommand, discard: bool, marks: bool) -> Result<(Tracee, Pipe), String> {
    let prog = cmd.resolve_program()?;
    let valgrind = valgrind_launcher()?;
    let lib = install_tool()?;
    let name = Path::new(&cmd.argv[0]).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| cmd.argv[0].clone());
    let (r, mut w) = pipe()?;
    if discard {
        let null = File::options().write(true).open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
        w = OwnedFd::from(null);
    }
    let (lr, lw) = pipe()?;
    // A bigger pipe lets the tool write its chunks with fewer wake-ups (best effort).
    // SAFETY: fcntl on an fd we own.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let (wfd, lfd) = (w.as_raw_fd(), lw.as_raw_fd());
    let mut c = if pid_namespace_works() {
        // The program runs as pid 1 of its own pid namespace: the pid and tid that glibc
        // stores in memory are the same every run.
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--kill-child"]).arg(&valgrind);
        c
    } else {
        Command::new(&valgrind)
    };
    if cmd.clear_env {
        c.env_clear();
    } else {
        c.env_remove("VALGRIND_OPTS");
    }
    for (k, v) in &cmd.env {
        c.env(k, v);
    }
    c.env("VALGRIND_LIB", &lib);
    if let Some(d) = &cmd.cwd {
        c.current_dir(d);
    }
    c.arg(format!("--tool={TOOL_NAME}"))
        .args(["-q", "--command-line-only=yes", "--trace-children=no", "--run-libc-freeres=no", "--run-cxx-freeres=no"])
        // Chasing across conditional branches lets VEX run instrumentation of instructions
        // that never execute (both arms in one superblock): instruction counts would be off.
        .arg("--vex-guest-chase=no")
        // VEX's optimiser drops loads whose value is dead (a register overwritten before use)
        // before tools see the IR; the hardware still performs them. Level 0 keeps them at
        // little cost (the speed is in the tool's helpers).
        .arg("--vex-iropt-level=0")
        .arg(format!("--log-fd={lfd}"))
        .arg(format!("--smt-fd={wfd}"));
    if cmd.skip > 0 {
        c.arg(format!("--smt-skip={}", cmd.skip));
    }
    if let Some(n) = cmd.count {
        c.arg(format!("--smt-count={n}"));
    }
    if cmd.copy_stream {
        c.arg("--smt-splice=no");
    }
    if !marks {
        c.arg("--smt-shadow=no");
    }
    c.arg(&prog).args(&cmd.argv[1..]);
    c.stdin(io_for(&cmd.stdin, false)?).stdout(io_for(&cmd.stdout, true)?).stderr(io_for(&cmd.stderr, true)?);
    // SAFETY: only async-signal-safe fcntl calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            // No address-space randomisation (what `setarch -R` does): the vDSO and
            // Valgrind's own mappings land at the same addresses every run, so traces of the
            // same program and input are identical. Best effort: ignored where refused.
            let cur = libc::personality(0xffff_ffff);
            if cur != -1 {
                libc::personality((cur as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            }
            // Its own process group: Drop can kill Valgrind and everything it started, and
            // a terminal's Ctrl-C reaches secmem, which then ends the run cleanly.
            libc::setpgid(0, 0);
            clear_cloexec(wfd)?;
            clear_cloexec(lfd)
        });
    }
    let child = c.spawn().map_err(|e| format!("cannot start {}: {e}", valgrind.display()))?;
    drop(w);
    drop(lw);
    let log = std::thread::spawn(move || {
        let mut s = String::new();
        let mut f = File::from(lr);
        let mut b = [0u8; 4096];
        while let Ok(n) = f.read(&mut b) {
            if n == 0 {
                break;
            }
            if s.len() < 1 << 16 {
                s.push_str(&String::from_utf8_lossy(&b[..n]));
            }
        }
        s
    });
    let pipe = Arc::new(File::from(r));
    let proc = Tracee { pipe: pipe.clone(), child: Some(child), reaped: Arc::new(Mutex::new(false)), log: Some(log), name, status: None, failure: None, started: Instant::now(), cpu_seconds: 0.0 };
    Ok((proc, Pipe(pipe)))
}

/// Save the tool's raw stream of running `cmd` as it is (see [`raw`]; new loads marked, as
/// for a trace file): for comparing ways of reading one run (the transcoder against the
/// record decoder, say) and for timing them on the same bytes. Returns its length; a run
/// whose stream does not end (Valgrind failed) is an error that says why.
pub fn save_raw_stream(cmd: &TraceCommand, path: &Path) -> Result<u64, TraceError> {
    // The output rule: a temporary file renamed over `path` once complete (a FIFO or device
    // is written in place), never a half-written file under the final name.
    secmem_trace::native::write_atomically(path, |tmp| {
        let io = |e: std::io::Error| TraceError::Io { path: path.display().to_string(), source: e };
        let mut out = secmem_files::open_for_writing(tmp).map_err(io)?;
        let (mut proc, mut pipe) = start(cmd).map_err(TraceError::Other)?;
        // Copied with the last 22 bytes kept as they pass (a FIFO cannot be read back).
        let (mut buf, mut tail, mut n) = (vec![0u8; 1 << 16], Vec::with_capacity(1 << 16), 0u64);
        loop {
            let k = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            out.write_all(&buf[..k]).map_err(io)?;
            n += k as u64;
            tail.extend_from_slice(&buf[..k]);
            tail.drain(..tail.len().saturating_sub(22));
        }
        out.flush().map_err(io)?;
        // A stream ends with END, or with EXEC when the program replaced itself; anything
        // else is a failed run, which Valgrind's log explains.
        let ended = tail.len() == 22 && (tail[0] == raw::T_END || tail[21] == raw::T_EXEC);
        if !ended {
            return Err(TraceError::Other(proc.explain(&TraceError::Other("the raw stream ended without an END record".into()))));
        }
        proc.reap();
        Ok(n)
    })
}

/// What [`trace_to_file`] wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Instruction records (external records not counted).
    pub instructions: u64,
    /// Instructions the program executed, skipped ones included.
    pub executed: u64,
    /// Bytes written by system calls (external records from the tracer).
    pub syscall_bytes: u64,
    /// Bytes supplied for consistency (loads of memory the trace never saw written, or saw
    /// with other values): the loads the tool marked new, what [`Consistent`] supplies.
    pub supplied_bytes: u64,
    /// External records in the file (both kinds).
    pub external_records: u64,
    /// Pages (4 KiB) the program touched while `skip` fast-forwarded, named in the file so
    /// that schemes set them up before the window (`Instr::set_pages`).
    pub skipped_pages: u64,
    /// Distinct static instructions.
    pub static_instructions: u64,
    /// The native record stream, uncompressed.
    pub raw_bytes: u64,
    /// The file on disk (header + zstd frames).
    pub compressed_bytes: u64,
    /// The tool's raw stream read through the pipe.
    pub pipe_bytes: u64,
    pub exit_code: i32,
    /// The program was ended by `count`.
    pub count_reached: bool,
    /// The trace ended where the program called exec (the new image is not traced).
    pub exec: bool,
    pub wall_seconds: f64,
    /// CPU time of Valgrind running the program and the tool (user + system).
    pub tool_cpu_seconds: f64,
    /// CPU time of the thread that decoded the raw stream and encoded the records.
    pub transcode_cpu_seconds: f64,
    /// CPU time of the thread that compressed the records (zstd) and wrote the file.
    pub compress_cpu_seconds: f64,
}

/// Trace `cmd` into a native trace file at `path` (with [`Consistent`]'s external records,
/// so the file simulates without value mismatches). A failed run removes the file.
pub fn trace_to_file(cmd: &TraceCommand, path: &Path) -> Result<Summary, TraceError> {
    trace_to_file_watched(cmd, path, &Watch::default())
}

/// [`trace_to_file`] reporting its progress to `watch`; setting `watch.stop` ends it with
/// [`STOPPED`], the program killed and no file written.
pub fn trace_to_file_watched(cmd: &TraceCommand, path: &Path, watch: &Watch) -> Result<Summary, TraceError> {
    secmem_trace::native::write_atomically(path, |tmp| trace_to_file_inner(cmd, tmp, watch))
}

/// The error of a trace stopped through its [`Watch`].
pub const STOPPED: &str = "tracing stopped";

fn trace_to_file_inner(cmd: &TraceCommand, path: &Path, watch: &Watch) -> Result<Summary, TraceError> {
    let t0 = Instant::now();
    // The output first: an unwritable path fails before any program runs.
    let mut w = NativeWriter::create(path)?;
    let (mut proc, pipe) = start(cmd).map_err(TraceError::Other)?;
    let cpu0 = thread_cpu_seconds();
    let mut t = Transcoder::new(proc.name.clone(), pipe);
    let end = match t.run_watched(&mut w, watch) {
        Ok(end) => end,
        Err(Failure::Stream(e)) => return Err(TraceError::Other(proc.explain(&e))),
        Err(Failure::Write(e)) => return Err(e),
        Err(Failure::Stopped) => return Err(TraceError::Other(STOPPED.into())),
    };
    let transcode_cpu = thread_cpu_seconds() - cpu0;
    let done = w.finish_stats()?;
    proc.reap();
    let c = t.counts();
    let io = |e: std::io::Error| TraceError::Io { path: path.display().to_string(), source: e };
    Ok(Summary {
        instructions: c.instructions,
        executed: if end.exec { cmd.skip + c.instructions } else { end.executed },
        syscall_bytes: c.syscall_bytes,
        supplied_bytes: c.supplied_bytes,
        external_records: c.external_records,
        skipped_pages: c.skipped_pages,
        static_instructions: t.static_count() as u64,
        raw_bytes: done.raw_bytes,
        compressed_bytes: std::fs::metadata(path).map_err(io)?.len(),
        pipe_bytes: t.bytes_read(),
        exit_code: proc.exit_code(Some(end)).unwrap_or(0),
        count_reached: end.count_reached,
        exec: end.exec,
        wall_seconds: t0.elapsed().as_secs_f64(),
        tool_cpu_seconds: proc.cpu_seconds,
        transcode_cpu_seconds: transcode_cpu,
        compress_cpu_seconds: done.compress_cpu_seconds,
    })
}
