//! Python glue for live tracing of programs (`secmem trace`, `secmem run -- PROGRAM`).
//!
//! Every failure — valgrind missing, program not found, the program or Valgrind dying —
//! becomes `_core.TracerError` (a `RuntimeError`) with one line.

use std::path::{Path, PathBuf};

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use secmem_trace::TraceSource;
use secmem_trace::progress::Progress;
use secmem_vgtrace::{LiveTrace, ProgramIo, TraceCommand, Watch};
use std::sync::atomic::Ordering;
use std::time::Duration;

create_exception!(_core, TracerError, PyRuntimeError, "A program could not be traced (valgrind missing, program not found, tracer failure).");

fn trace_err(e: impl std::fmt::Display) -> PyErr {
    TracerError::new_err(e.to_string().replace('\n', " "))
}

/// `None` → /dev/null, `"-"` → inherited from secmem, anything else → that file.
fn io(p: Option<&str>) -> ProgramIo {
    match p {
        None => ProgramIo::Null,
        Some("-") => ProgramIo::Inherit,
        Some(f) => ProgramIo::File(PathBuf::from(f)),
    }
}

#[allow(clippy::too_many_arguments)]
fn command(argv: Vec<String>, env: Option<Vec<(String, String)>>, clear_env: bool, cwd: Option<String>, skip: u64, count: Option<u64>, stdin: Option<&str>, stdout: Option<&str>) -> PyResult<TraceCommand> {
    if argv.is_empty() {
        return Err(trace_err("secmem trace: no program given (secmem trace -o OUT -- PROGRAM [ARGS...])"));
    }
    let mut c = TraceCommand::new(argv);
    c.env = env.unwrap_or_default();
    c.clear_env = clear_env;
    c.cwd = cwd.map(PathBuf::from);
    c.skip = skip;
    c.count = count;
    c.stdin = io(stdin);
    c.stdout = io(stdout);
    c.stderr = ProgramIo::Inherit;
    // Bad input (no such program or directory) is a ConfigError, like every other bad
    // argument; failures once the program runs are TracerErrors.
    c.resolve_program().map_err(crate::cfg_err)?;
    Ok(c)
}

/// The live program as a simulator input: the tracer's records through a pipe, with the
/// consistency adapter (memory the trace never saw written is supplied as external records,
/// so the simulator sees no value mismatches), decoded on a thread of their own. The program's stdout goes to /dev/null unless
/// `stdout` says otherwise ("-" inherits). Called by `run` in lib.rs for
/// `secmem run … -- PROGRAM [ARGS…]`.
#[allow(clippy::too_many_arguments)]
pub fn program_source(
    argv: Vec<String>,
    env: Option<Vec<(String, String)>>,
    clear_env: bool,
    cwd: Option<String>,
    skip: u64,
    count: Option<u64>,
    stdin: Option<&str>,
    stdout: Option<&str>,
) -> PyResult<Box<dyn TraceSource>> {
    let c = command(argv, env, clear_env, cwd, skip, count, stdin, stdout)?;
    let live: LiveTrace = secmem_vgtrace::spawn(&c).map_err(trace_err)?;
    Ok(Box::new(live.read_ahead()))
}

/// Trace a program into a native trace file; returns the summary as a dict.
#[pyfunction]
#[pyo3(signature = (argv, output, skip=0, count=None, env=None, clear_env=false, cwd=None, stdin=None, stdout=Some("-".to_string()), progress=false))]
#[allow(clippy::too_many_arguments)]
fn trace_program<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    output: &str,
    skip: u64,
    count: Option<u64>,
    env: Option<Vec<(String, String)>>,
    clear_env: bool,
    cwd: Option<String>,
    stdin: Option<String>,
    stdout: Option<String>,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let label = format!("tracing {}", argv.first().map(|a| a.rsplit('/').next().unwrap_or(a)).unwrap_or(""));
    let c = command(argv, env, clear_env, cwd, skip, count, stdin.as_deref(), stdout.as_deref())?;
    let watch = Watch::default();
    // The tracer on its own thread; this one draws the progress and turns Ctrl-C/SIGTERM
    // into a stop of the tracer (the program killed, no file written).
    let (s, stopped) = py.detach(|| {
        let _signals = crate::interrupt::Guard::install();
        let mut bar = Progress::new(progress, count.unwrap_or(0), label);
        std::thread::scope(|sc| {
            let h = sc.spawn(|| secmem_vgtrace::trace_to_file_watched(&c, Path::new(output), &watch));
            while !h.is_finished() {
                std::thread::sleep(Duration::from_millis(100));
                bar.update(watch.instructions.load(Ordering::Relaxed));
                if secmem_sim::run::stop_requested().is_some() {
                    watch.stop.store(true, Ordering::Relaxed);
                }
            }
            bar.finish();
            let r = h.join().unwrap_or_else(|_| Err(secmem_trace::TraceError::Other("the tracer thread panicked".into())));
            (r, secmem_sim::run::stop_requested())
        })
    });
    if let Some(sig) = stopped {
        return Err(crate::interrupt::keyboard_interrupt(sig, "; no trace file written"));
    }
    let s = s.map_err(trace_err)?;
    let d = PyDict::new(py);
    d.set_item("instructions", s.instructions)?;
    d.set_item("executed", s.executed)?;
    d.set_item("syscall_bytes", s.syscall_bytes)?;
    d.set_item("supplied_bytes", s.supplied_bytes)?;
    d.set_item("external_bytes", s.syscall_bytes + s.supplied_bytes)?;
    d.set_item("external_records", s.external_records)?;
    d.set_item("skipped_pages", s.skipped_pages)?;
    d.set_item("static_instructions", s.static_instructions)?;
    d.set_item("raw_bytes", s.raw_bytes)?;
    d.set_item("compressed_bytes", s.compressed_bytes)?;
    d.set_item("pipe_bytes", s.pipe_bytes)?;
    d.set_item("exit_code", s.exit_code)?;
    d.set_item("count_reached", s.count_reached)?;
    d.set_item("exec", s.exec)?;
    d.set_item("wall_seconds", s.wall_seconds)?;
    d.set_item("tool_cpu_seconds", s.tool_cpu_seconds)?;
    d.set_item("transcode_cpu_seconds", s.transcode_cpu_seconds)?;
    d.set_item("compress_cpu_seconds", s.compress_cpu_seconds)?;
    d.set_item("path", output)?;
    Ok(d)
}

/// One stage of the tracer on its own, for `secmem bench-tracer`: "tool" (Valgrind with the
/// tool, its stream thrown away) or "decode" (the stream decoded into records and dropped).
#[pyfunction]
#[pyo3(signature = (argv, stage, stdin=None))]
fn trace_stage<'py>(py: Python<'py>, argv: Vec<String>, stage: &str, stdin: Option<String>) -> PyResult<Bound<'py, PyDict>> {
    let c = command(argv, None, false, None, 0, None, stdin.as_deref(), None)?;
    let r = py
        .detach(|| match stage {
            "tool" => secmem_vgtrace::bench::tool_alone(&c),
            "decode" => secmem_vgtrace::bench::decode_only(&c),
            s => Err(secmem_trace::TraceError::Other(format!("unknown tracer stage '{s}': tool or decode"))),
        })
        .map_err(trace_err)?;
    let d = PyDict::new(py);
    d.set_item("instructions", r.instructions)?;
    d.set_item("wall_seconds", r.wall_seconds)?;
    d.set_item("tool_cpu_seconds", r.tool_cpu_seconds)?;
    d.set_item("decode_cpu_seconds", r.decode_cpu_seconds)?;
    Ok(d)
}

/// None if tracing works on this machine, else the one-line reason.
#[pyfunction]
fn tracer_unavailable() -> Option<String> {
    secmem_vgtrace::valgrind_launcher().err()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trace_program, m)?)?;
    m.add_function(wrap_pyfunction!(tracer_unavailable, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stage, m)?)?;
    m.add("TracerError", m.py().get_type::<TracerError>())?;
    Ok(())
}
