//! `secmem._core`: the Rust engine seen from Python. Only glue lives here; the CLI and the
//! friendly API are in the `secmem` Python package.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use secmem_core::encryption::Seed;
use secmem_core::{Engine, Snapshot as CoreSnapshot, Stat, Stats};
use secmem_sim::RunOptions;
use std::sync::{Mutex, MutexGuard};

mod codeauth;
mod interrupt;
mod readers;
mod spec;
mod tracer;

create_exception!(_core, IntegrityError, PyException, "Untrusted memory did not behave like valid memory.");
create_exception!(_core, ConfigError, PyValueError, "A bad preset, parameter, scheme or workload.");

fn cfg_err(e: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(e.to_string())
}

fn integrity_err(e: secmem_core::IntegrityError) -> PyErr {
    Python::attach(|py| {
        let err = IntegrityError::new_err(e.to_string());
        let v = err.value(py);
        let _ = v.setattr("addr", e.addr);
        let _ = v.setattr("what", e.what.clone());
        err
    })
}

fn power_err(e: secmem_core::power::PowerError) -> PyErr {
    match e {
        secmem_core::power::PowerError::Integrity(e) => integrity_err(e),
        secmem_core::power::PowerError::Refused(m) => pyo3::exceptions::PyRuntimeError::new_err(m),
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in &s.0 {
        match v {
            Stat::Int(i) => d.set_item(k, i)?,
            Stat::Float(f) | Stat::Rate(f, _, _) => d.set_item(k, f)?,
            Stat::Str(s) => d.set_item(k, s)?,
            Stat::Series(v) => d.set_item(k, PyList::new(py, v)?)?,
        }
    }
    Ok(d)
}

/// The instructions of one input: a built-in workload, a trace file or a live program
/// (`count`: the instructions wanted after `skip`, so the tracer can end the program).
#[allow(clippy::too_many_arguments)]
fn source(
    workload: Option<&str>,
    trace: Option<&str>,
    trace_format: Option<&str>,
    skip: u64,
    program: Option<Vec<String>>,
    program_env: Option<Vec<(String, String)>>,
    clear_env: bool,
    cwd: Option<String>,
    stdin: Option<&str>,
    stdout: Option<&str>,
    count: Option<u64>,
    seed: u64,
) -> PyResult<Box<dyn secmem_trace::TraceSource>> {
    let given = workload.is_some() as u8 + trace.is_some() as u8 + program.is_some() as u8;
    if given > 1 {
        return Err(cfg_err("give one of a workload, a trace file or a program, not several"));
    }
    let live = program.is_some();
    let mut src: Box<dyn secmem_trace::TraceSource> = match (workload, trace, program) {
        (_, _, Some(argv)) => {
            // The tracer fast-forwards itself and ends the program once the run has read
            // what it needs (plus the records it may read ahead).
            let count = count.and_then(|n| n.checked_add(1024));
            tracer::program_source(argv, program_env, clear_env, cwd, skip, count, stdin, stdout)?
        }
        (_, Some(t), _) => secmem_trace::open_trace_as(t, trace_format).map_err(cfg_err)?,
        (w, None, None) => secmem_trace::workloads::builtin(w.unwrap_or("mix"), seed).map_err(cfg_err)?,
    };
    if skip > 0 && !live {
        // Fast-forward a file or built-in workload; memory the skipped part wrote reaches
        // later loads as external records.
        src = Box::new(secmem_trace::Consistent::new(secmem_trace::Skip::new(src, skip)));
    }
    Ok(src)
}

/// Run a mix (`cores` > 1): the machine and counts of `spec`, one core per input of
/// `inputs` (RunSpecs whose input fields are read; one input: rate mode, a copy per core).
/// `alone(i)`: input i's IPC alone on one core or None (the mix's speedups), called once the
/// mix is checked; `names[i]` its
/// name in the statistics (empty or missing: the workload, trace file or program). Each core's
/// input is opened before the run (a bad one is a ConfigError) and again to replay it.
#[pyfunction]
#[pyo3(signature = (spec, inputs, alone=None, names=Vec::new()))]
fn run_mix(
    py: Python<'_>,
    spec: PyRef<'_, spec::RunSpec>,
    inputs: Vec<PyRef<'_, spec::RunSpec>>,
    alone: Option<Bound<'_, PyAny>>,
    names: Vec<String>,
) -> PyResult<spec::RunOutcome> {
    let s: spec::RunSpec = spec.clone();
    let p = secmem_sim::configure(&s.preset, s.integrity.as_deref(), s.encryption.as_deref(), &s.sets).map_err(cfg_err)?;
    if s.sample.is_some() {
        return Err(cfg_err("--sample runs one core: it cannot sample a mix"));
    }
    let config = PyDict::new(py);
    for (k, v) in p.iter() {
        config.set_item(k, v.to_string())?;
    }
    let given: Vec<spec::RunSpec> = inputs.iter().map(|i| (**i).clone()).collect();
    if !names.is_empty() && names.len() != given.len() {
        return Err(cfg_err(format!("run_mix: {} names for {} inputs", names.len(), given.len())));
    }
    // An empty name is the input's own (`input_name`).
    let names: Vec<String> = given.iter().enumerate().map(|(i, g)| names.get(i).filter(|n| !n.is_empty()).cloned().unwrap_or_else(|| input_name(g))).collect();
    let cores = secmem_sim::multi::cores(&p).map_err(cfg_err)?;
    let assigned = secmem_sim::multi::assign(cores, &names).map_err(cfg_err)?;
    // Which given input each core runs: the one input in rate mode, else its own.
    let which: Vec<usize> = (0..assigned.len()).map(|c| if given.len() == 1 { 0 } else { c }).collect();
    // Asked once the mix is known to be valid: finding them may run each program alone.
    let mut ipc_alone: Vec<Option<f64>> = vec![None; given.len()];
    if let Some(f) = &alone {
        for (i, a) in ipc_alone.iter_mut().enumerate() {
            *a = f.call1((i,))?.extract()?;
        }
    }
    let alone_per_core: Vec<Option<f64>> = which.iter().map(|&i| ipc_alone[i]).collect();
    let count = s.warmup.checked_add(s.instructions);
    let o = RunOptions { instructions: s.instructions, warmup: s.warmup, seed: s.seed, progress: s.progress, interval: s.interval };
    let r = py
        .detach(|| {
            let _signals = interrupt::Guard::install();
            let mut mix: Vec<secmem_sim::MixInput> = which
                .iter()
                .map(|&i| {
                    let g = given[i].clone();
                    let seed = s.seed;
                    secmem_sim::MixInput {
                        name: names[i].clone(),
                        open: Box::new(move || {
                            let g = g.clone();
                            source(
                                g.workload.as_deref(),
                                g.trace.as_deref(),
                                g.trace_format.as_deref(),
                                g.skip,
                                g.program,
                                g.program_env,
                                g.clear_env,
                                g.cwd,
                                g.stdin.as_deref(),
                                g.stdout.as_deref(),
                                count,
                                seed,
                            )
                            .map_err(|e| e.to_string())
                        }),
                    }
                })
                .collect();
            secmem_sim::run_mix(&p, &mut mix, &o, &alone_per_core)
        })
        .map_err(cfg_err)?;
    Ok(spec::RunOutcome { stats: stats_dict(py, &r.stats)?.unbind(), error: r.error, config: config.unbind() })
}

/// A mix input's name in the statistics: the workload, the trace file's name or the program.
fn input_name(s: &spec::RunSpec) -> String {
    if let Some(t) = &s.trace {
        return std::path::Path::new(t).file_name().map_or(t.clone(), |n| n.to_string_lossy().into_owned());
    }
    if let Some(p) = s.program.as_ref().and_then(|a| a.first()) {
        return std::path::Path::new(p).file_name().map_or(p.clone(), |n| n.to_string_lossy().into_owned());
    }
    s.workload.clone().unwrap_or_else(|| "mix".into())
}

/// Run one simulation as `spec` says. The configuration is resolved (and every scheme name,
/// preset and parameter checked by the registry) before the input starts; the statistics
/// measured up to an error are kept, with the error beside them.
#[pyfunction]
fn run(py: Python<'_>, spec: PyRef<'_, spec::RunSpec>) -> PyResult<spec::RunOutcome> {
    let s: spec::RunSpec = spec.clone();
    let p = secmem_sim::configure(&s.preset, s.integrity.as_deref(), s.encryption.as_deref(), &s.sets).map_err(cfg_err)?;
    let config = PyDict::new(py);
    for (k, v) in p.iter() {
        config.set_item(k, v.to_string())?;
    }
    // `--sample [U:W:D]` ("" for the defaults), checked before the input starts.
    let plan = s.sample.as_deref().map(|x| secmem_sim::Sampling::parse(x, s.instructions)).transpose().map_err(cfg_err)?;
    let count = s.warmup.checked_add(s.instructions);
    let (skip, instructions) = (s.skip, s.instructions);
    // Opening may wait (a FIFO's writer): without the GIL, and ended by Ctrl-C/SIGTERM.
    let (workload, trace, trace_format, stdin, stdout) = (s.workload, s.trace, s.trace_format, s.stdin, s.stdout);
    let (program, program_env, clear_env, cwd, seed) = (s.program, s.program_env, s.clear_env, s.cwd, s.seed);
    let opened = {
        let _signals = interrupt::Guard::install();
        py.detach(|| {
            source(
                workload.as_deref(),
                trace.as_deref(),
                trace_format.as_deref(),
                skip,
                program,
                program_env,
                clear_env,
                cwd,
                stdin.as_deref(),
                stdout.as_deref(),
                count,
                seed,
            )
        })
    };
    interrupt::check()?;
    let mut src = opened?;
    let o = RunOptions { instructions, warmup: s.warmup, seed: s.seed, progress: s.progress, interval: s.interval };
    let r = py
        .detach(|| {
            let _signals = interrupt::Guard::install();
            secmem_sim::run_sampled(&p, &mut *src, &o, plan)
        })
        .map_err(cfg_err)?;
    // The run counts instructions after the fast-forward: say so when the input ran out.
    let error = r.error.map(|e| if skip > 0 && e.starts_with("the trace ended") { format!("{e}, after skipping {skip}") } else { e });
    Ok(spec::RunOutcome { stats: stats_dict(py, &r.stats)?.unbind(), error, config: config.unbind() })
}

/// The instructions of a trace file after `skip`, counted by reading it, if it ends within
/// `limit` of them; None when it is longer, or cannot be read (the run then says why). Runs
/// use it to fit their defaults to a short trace (`-n` to its end, a warm-up within it).
#[pyfunction]
#[pyo3(signature = (trace, trace_format=None, skip=0, limit=u64::MAX))]
fn trace_length(py: Python<'_>, trace: &str, trace_format: Option<&str>, skip: u64, limit: u64) -> PyResult<Option<u64>> {
    let mut src = source(None, Some(trace), trace_format, skip, None, None, false, None, None, None, None, 1)?;
    let _signals = interrupt::Guard::install();
    let n = py.detach(|| {
        let mut ins = secmem_trace::Instr::default();
        let mut n = 0u64;
        while n <= limit {
            match src.next_into(&mut ins) {
                Ok(true) => n += u64::from(!ins.external),
                Ok(false) => return Some(n),
                Err(_) => return None,
            }
            if n & 0xFFFF == 0 && secmem_trace::stop::stop_requested().is_some() {
                return None;
            }
        }
        None
    });
    interrupt::check()?;
    Ok(n)
}

/// The built-in workloads as (name, description).
/// Seconds between two progress lines off a terminal (`SECMEM_PROGRESS_SECONDS`, default 10):
/// one setting for the engine's bars and the Python layer's.
#[pyfunction]
fn progress_seconds() -> f64 {
    secmem_trace::progress::line_seconds()
}

#[pyfunction]
fn workloads() -> Vec<(String, String)> {
    secmem_trace::workloads::builtin_workloads().iter().map(|(n, d)| (n.to_string(), d.to_string())).collect()
}

#[pyfunction]
fn presets() -> Vec<String> {
    secmem_sim::preset_names().iter().map(|s| s.to_string()).collect()
}

#[pyfunction]
fn integrity_schemes() -> Vec<String> {
    secmem_core::registry::INTEGRITY_SCHEMES.iter().map(|s| s.to_string()).collect()
}

/// Every (integrity, encryption) pair that can be built (`registry::compatible`).
#[pyfunction]
fn scheme_pairs() -> Vec<(String, String)> {
    secmem_core::registry::pair_names().into_iter().map(|(i, e)| (i.to_string(), e.to_string())).collect()
}

/// `--sample`'s plan for `instructions` measured instructions: (period U, window W,
/// detailed warm-up D), as a run resolves it (a run split into parts gives each the whole
/// run's plan).
#[pyfunction]
fn sample_plan(spec: &str, instructions: u64) -> PyResult<(u64, u64, u64)> {
    let s = secmem_sim::Sampling::parse(spec, instructions).map_err(cfg_err)?;
    Ok((s.period, s.window, s.warming))
}

/// One pass over an input (a built-in `workload` or a `trace` file, from its start) writing
/// each window of the sampled run `sample` (measuring `instructions` after `warmup`) as a
/// checkpoint in `directory` (`secmem_trace::checkpoint`): the memory image its records
/// touch, the prewarm (its last branches, the `prewarm` lines the L2 saw last before it and
/// what the L1s held), then its `warm` (B) + D + W
/// instructions. Returns `{"files", "instructions", "prewarm", "image_bytes", "read",
/// "seconds"}` (CPU seconds of the pass). A plan or B that does not fit is a ConfigError.
#[pyfunction]
#[pyo3(signature = (directory, sample, instructions, warmup, warm, workload=None, trace=None, trace_format=None, seed=1, prewarm=secmem_trace::checkpoint::DEFAULT_PREWARM, progress=false))]
#[allow(clippy::too_many_arguments)]
fn checkpoint_windows<'py>(
    py: Python<'py>,
    directory: &str,
    sample: &str,
    instructions: u64,
    warmup: u64,
    warm: u64,
    workload: Option<&str>,
    trace: Option<&str>,
    trace_format: Option<&str>,
    seed: u64,
    prewarm: usize,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = secmem_sim::Sampling::parse(sample, instructions).map_err(cfg_err)?;
    let starts = secmem_sim::checkpointed::starts(&plan, warmup, instructions, warm).map_err(cfg_err)?;
    let len = secmem_sim::checkpointed::length(&plan, warm);
    let _signals = interrupt::Guard::install();
    let opened = py.detach(|| source(workload, trace, trace_format, 0, None, None, false, None, None, None, None, seed));
    interrupt::check()?;
    let mut src = opened?;
    std::fs::create_dir_all(directory).map_err(|e| cfg_err(format!("{directory}: {e}")))?;
    let dir = std::path::PathBuf::from(directory);
    let path = |j: usize| dir.join(format!("w{j:05}.smt"));
    let t = secmem_trace::cputime::thread_cpu_seconds();
    let w = py.detach(|| {
        src.show_progress(progress);
        secmem_trace::checkpoint::write_windows(&mut *src, &starts, len, prewarm, &path, progress)
    });
    let seconds = secmem_trace::cputime::thread_cpu_seconds() - t;
    interrupt::check()?;
    let w = w.map_err(cfg_err)?;
    let d = PyDict::new(py);
    let files: Vec<String> = (0..w.instructions.len()).map(|j| path(j).to_string_lossy().into_owned()).collect();
    d.set_item("files", files)?;
    d.set_item("instructions", w.instructions)?;
    d.set_item("prewarm", w.prewarm)?;
    d.set_item("image_bytes", w.image_bytes)?;
    d.set_item("read", w.read)?;
    d.set_item("seconds", seconds)?;
    Ok(d)
}

/// A sampled run from checkpoints (`checkpoint_windows`): `spec` gives the machine, the plan
/// (`sample`, resolved for `instructions`), the seed; `files[j]` is a window's checkpoint and
/// `prewarm[j]` the loads it begins with; `warm` is B. Each window runs on a machine of its
/// own, on up to `threads` threads; the statistics are the windows' combined, with 95%
/// intervals (`ci95.*`), the same whatever `threads` is.
#[pyfunction]
#[pyo3(signature = (spec, files, prewarm, warm, name, threads=1))]
fn run_checkpointed(py: Python<'_>, spec: PyRef<'_, spec::RunSpec>, files: Vec<String>, prewarm: Vec<u64>, warm: u64, name: &str, threads: usize) -> PyResult<spec::RunOutcome> {
    let s: spec::RunSpec = spec.clone();
    let p = secmem_sim::configure(&s.preset, s.integrity.as_deref(), s.encryption.as_deref(), &s.sets).map_err(cfg_err)?;
    let plan = secmem_sim::Sampling::parse(s.sample.as_deref().unwrap_or(""), s.instructions).map_err(cfg_err)?;
    if files.len() != prewarm.len() {
        return Err(cfg_err(format!("run_checkpointed: {} files and {} prewarm counts", files.len(), prewarm.len())));
    }
    let config = PyDict::new(py);
    for (k, v) in p.iter() {
        config.set_item(k, v.to_string())?;
    }
    let r = py
        .detach(|| {
            let _signals = interrupt::Guard::install();
            let open = |j: usize| secmem_sim::checkpointed::open_window(&files[j], prewarm[j]);
            secmem_sim::checkpointed::run_windows(&p, &open, files.len(), plan, warm, s.seed, name, threads).map(|(r, _)| r)
        })
        .map_err(cfg_err)?;
    Ok(spec::RunOutcome { stats: stats_dict(py, &r.stats)?.unbind(), error: r.error, config: config.unbind() })
}

/// How this process reads native trace files from now on: "ahead" (a thread of their own)
/// or "inline" (in batches on the simulating thread); `secmem_trace::set_reading`.
#[pyfunction]
fn set_trace_reading(how: &str) -> PyResult<()> {
    secmem_trace::set_reading(how).map_err(cfg_err)
}

/// How this process reads native trace files (`set_trace_reading`).
#[pyfunction]
fn trace_reading() -> &'static str {
    secmem_trace::reading()
}

/// Student's t quantile of a two-sided 95% interval with `df` degrees of freedom (the one
/// sampled runs use).
#[pyfunction]
fn t95(df: u64) -> f64 {
    secmem_sim::sample::t95(df)
}

/// The (integrity, encryption) pairs `secmem bench` runs by default.
#[pyfunction]
fn bench_schemes() -> Vec<(String, String)> {
    secmem_sim::bench::bench_schemes()
}

#[pyfunction]
fn encryption_schemes() -> Vec<String> {
    secmem_core::registry::ENCRYPTION_SCHEMES.iter().map(|s| s.to_string()).collect()
}

/// Every parameter of a preset (after --integrity/--encryption/--set) as key → text.
#[pyfunction]
#[pyo3(signature = (preset, integrity=None, encryption=None, sets=Vec::new()))]
fn params(preset: &str, integrity: Option<&str>, encryption: Option<&str>, sets: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let p = secmem_sim::configure(preset, integrity, encryption, &sets).map_err(cfg_err)?;
    Ok(p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// Write a built-in workload to a native trace file (for `--trace` and for sharing).
#[pyfunction]
fn export_workload(py: Python<'_>, workload: &str, path: &str, records: u64, seed: u64) -> PyResult<u64> {
    let mut src = secmem_trace::workloads::builtin(workload, seed).map_err(cfg_err)?;
    let _signals = interrupt::Guard::install();
    let e = py.detach(|| secmem_trace::export(&mut *src, path, "native", records, secmem_trace::champsim::Numbering::X86));
    interrupt::check()?;
    Ok(e.map_err(cfg_err)?.instructions)
}

/// Write `records` instructions of a workload, trace file or live program (after `skip`)
/// as a `format` trace (native or champsim; a native one `uncompressed` if asked); returns
/// what was written and left out.
#[pyfunction]
#[pyo3(signature = (path, format="native", records=1_000_000, workload=None, trace=None, trace_format=None, skip=0, program=None, program_env=None, clear_env=false, cwd=None, stdin=None, seed=1, uncompressed=false))]
#[allow(clippy::too_many_arguments)]
fn export<'py>(
    py: Python<'py>,
    path: &str,
    format: &str,
    records: u64,
    workload: Option<&str>,
    trace: Option<&str>,
    trace_format: Option<&str>,
    skip: u64,
    program: Option<Vec<String>>,
    program_env: Option<Vec<(String, String)>>,
    clear_env: bool,
    cwd: Option<String>,
    stdin: Option<&str>,
    seed: u64,
    uncompressed: bool,
) -> PyResult<Bound<'py, PyDict>> {
    use secmem_trace::champsim::{BranchType, Numbering};
    // ChampSim traces keep ChampSim's register ids; everything else numbers them as x86.
    let champsim_in = match trace {
        Some(t) => match trace_format {
            None | Some("auto") => secmem_trace::detect_format(t).map_err(cfg_err)? == "champsim",
            Some(f) => f == "champsim",
        },
        None => false,
    };
    let numbering = if champsim_in { Numbering::ChampSim } else { Numbering::X86 };
    secmem_trace::export::check_stored(format, uncompressed).map_err(cfg_err)?;
    // From the opening on (a FIFO's writer may keep it waiting), Ctrl-C/SIGTERM end the call.
    let _signals = interrupt::Guard::install();
    let opened = py.detach(|| source(workload, trace, trace_format, skip, program, program_env, clear_env, cwd, stdin, None, Some(records), seed));
    interrupt::check()?;
    let mut src = opened?;
    let e = py.detach(|| secmem_trace::export_stored(&mut *src, path, format, records, numbering, uncompressed));
    interrupt::check()?;
    let e = e.map_err(cfg_err)?;
    let d = PyDict::new(py);
    d.set_item("instructions", e.instructions)?;
    d.set_item("external_records", e.external)?;
    d.set_item("lossy_instructions", e.lossy_instructions)?;
    d.set_item("lost_registers", e.lost.registers)?;
    d.set_item("lost_accesses", e.lost.accesses)?;
    let types = PyDict::new(py);
    for (name, n) in BranchType::NAMES.iter().zip(e.branch_types) {
        types.set_item(name, n)?;
    }
    d.set_item("branch_types", types)?;
    Ok(d)
}

/// Every attack against each integrity scheme: a list of dicts (scheme, attack, applicable,
/// detected, expected, detail).
#[pyfunction]
#[pyo3(signature = (preset, integrities, encryption, sets=Vec::new(), seed=1))]
fn attack<'py>(py: Python<'py>, preset: &str, integrities: Vec<String>, encryption: &str, sets: Vec<String>, seed: u64) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for i in &integrities {
        let p = secmem_sim::configure(preset, Some(i), Some(encryption), &sets).map_err(cfg_err)?;
        let cells = py.detach(|| secmem_core::adversary::attack_all(&p, seed)).map_err(cfg_err)?;
        append_cells(py, &out, i, encryption, cells)?;
    }
    Ok(out)
}

/// Privacy attacks against each encryption scheme: a list of dicts like `attack`'s.
#[pyfunction]
#[pyo3(signature = (preset, encryptions, sets=Vec::new(), seed=1))]
fn attack_encryption<'py>(py: Python<'py>, preset: &str, encryptions: Vec<String>, sets: Vec<String>, seed: u64) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for e in &encryptions {
        let p = secmem_sim::configure(preset, Some("none"), Some(e), &sets).map_err(cfg_err)?;
        let cells = py.detach(|| secmem_core::adversary::attack_encryption(&p, seed)).map_err(cfg_err)?;
        append_cells(py, &out, "none", e, cells)?;
    }
    Ok(out)
}

/// Code authentication attacks (seed 001) for each (codeauth, integrity, encryption): a list of
/// dicts like `attack`'s, with the code authentication scheme under "codeauth".
#[pyfunction]
#[pyo3(signature = (preset, combos, sets=Vec::new(), seed=1))]
fn attack_codeauth<'py>(py: Python<'py>, preset: &str, combos: Vec<(String, String, String)>, sets: Vec<String>, seed: u64) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (ca, i, e) in &combos {
        let mut all = vec![format!("codeauth={}", ca)];
        all.extend(sets.iter().cloned());
        let p = secmem_sim::configure(preset, Some(i), Some(e), &all).map_err(cfg_err)?;
        let cells = py.detach(|| secmem_core::adversary::attack_codeauth(&p, seed)).map_err(cfg_err)?;
        let n = out.len();
        append_cells(py, &out, i, e, cells)?;
        for k in n..out.len() {
            out.get_item(k)?.set_item("codeauth", ca)?;
        }
    }
    Ok(out)
}

fn append_cells(py: Python<'_>, out: &Bound<'_, PyList>, integ: &str, enc: &str, cells: Vec<secmem_core::adversary::Outcome>) -> PyResult<()> {
    {
        let i = integ;
        let encryption = enc;
        for c in cells {
            let d = PyDict::new(py);
            d.set_item("integrity", i)?;
            d.set_item("encryption", encryption)?;
            d.set_item("attack", c.attack)?;
            d.set_item("applicable", c.applicable)?;
            d.set_item("detected", c.detected)?;
            d.set_item("expected", c.expected)?;
            // When it was noticed and when the schemes' declarations promise it: a cell is
            // right (`ok`) when both agree.
            d.set_item("when", c.when.map(|w| w.name()))?;
            d.set_item("declared", c.declared.name())?;
            d.set_item("ok", c.ok())?;
            d.set_item("detail", c.detail)?;
            out.append(d)?;
        }
    }
    Ok(())
}

/// Speed benchmark rows: simulated instructions per second per workload and scheme.
#[pyfunction]
#[pyo3(name = "bench", signature = (preset, workloads, schemes, instructions, warmup, repeat=1, sets=Vec::new()))]
fn run_bench<'py>(
    py: Python<'py>,
    preset: &str,
    workloads: Vec<String>,
    schemes: Vec<(String, String)>,
    instructions: u64,
    warmup: u64,
    repeat: u32,
    sets: Vec<String>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for w in &workloads {
        for s in &schemes {
            // Ctrl-C/SIGTERM stop the run in progress (it returns, marked interrupted) and
            // end the benchmark with KeyboardInterrupt.
            let rows = {
                let _signals = interrupt::Guard::install();
                py.detach(|| secmem_sim::bench::bench(preset, std::slice::from_ref(w), std::slice::from_ref(s), &sets, instructions, warmup, repeat, |_| {}))
            };
            interrupt::check()?;
            let rows = rows.map_err(cfg_err)?;
            for r in rows {
                let d = PyDict::new(py);
                d.set_item("workload", &r.workload)?;
                d.set_item("integrity", &r.integrity)?;
                d.set_item("encryption", &r.encryption)?;
                d.set_item("instructions", r.instructions)?;
                d.set_item("ipc", r.ipc)?;
                d.set_item("seconds", r.seconds)?;
                d.set_item("instructions_per_second", r.instr_per_sec)?;
                eprintln!(
                    "  {:<8} {:>6}+{:<5} {:>6.2} M instr/s  IPC {:.3}",
                    r.workload, r.integrity, r.encryption, r.instr_per_sec / 1e6, r.ipc
                );
                out.append(d)?;
            }
        }
    }
    Ok(out)
}

/// The functional engine on its own: real cryptography on real bytes in untrusted memory.
/// Usable from any Python thread: one lock serialises the engine, and every call waits for
/// it and works with the GIL released, so no thread holding the GIL ever waits on it.
#[pyclass(module = "secmem._core")]
struct SecureMemory {
    eng: Mutex<Engine>,
    size: u64,
    raw_size: u64,
    dma: (u64, u64),
    integrity: &'static str,
    encryption: &'static str,
}

#[pyclass(module = "secmem._core")]
struct Snapshot {
    inner: CoreSnapshot,
}

/// A zeroed buffer of `n` bytes, or MemoryError naming the request (never an abort).
fn buffer(n: usize, what: &str) -> PyResult<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| PyMemoryError::new_err(format!("{}: cannot allocate {} bytes", what, n)))?;
    v.resize(n, 0);
    Ok(v)
}

#[pymethods]
impl SecureMemory {
    #[new]
    #[pyo3(signature = (size, integrity="chash", encryption="otp", preset="suh2003", sets=Vec::new(), seed=None))]
    fn new(py: Python<'_>, size: &str, integrity: &str, encryption: &str, preset: &str, mut sets: Vec<String>, seed: Option<u64>) -> PyResult<Self> {
        sets.insert(0, format!("memory.size={}", size));
        // Without a seed the keys come from 128 bits of the OS's random source, so nobody can
        // derive them offline. A given seed is for reproducible experiments only.
        let seed = match seed {
            Some(s) => Seed::fixed(s),
            None => Seed::secret(os_random_key()?),
        };
        let p = secmem_sim::configure(preset, Some(integrity), Some(encryption), &sets).map_err(cfg_err)?;
        let mut eng = py.detach(|| Engine::with_keys(&p, seed)).map_err(cfg_err)?;
        Ok(SecureMemory {
            size: eng.data_size(),
            raw_size: eng.untrusted().size(),
            dma: eng.dma_region(),
            integrity: eng.integrity().name(),
            encryption: eng.encryption().name(),
            eng: Mutex::new(eng),
        })
    }

    /// Protected bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn integrity(&self) -> &'static str {
        self.integrity
    }

    #[getter]
    fn encryption(&self) -> &'static str {
        self.encryption
    }

    fn write(&self, py: Python<'_>, addr: u64, data: &[u8]) -> PyResult<()> {
        self.bounds(addr, data.len() as u64)?;
        py.detach(|| self.lock().write(addr, data, 0)).map_err(integrity_err)?;
        Ok(())
    }

    fn read<'py>(&self, py: Python<'py>, addr: u64, n: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.bounds(addr, n as u64)?;
        let mut buf = buffer(n, "read")?;
        py.detach(|| self.lock().read(addr, &mut buf, 0)).map_err(integrity_err)?;
        Ok(PyBytes::new(py, &buf))
    }

    /// Write back and drop every cached line.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().flush(0)).map_err(integrity_err)?;
        Ok(())
    }

    /// Give the pages of [addr, addr + size) key ID `key_id` (xts's key table); cached lines
    /// are written back first.
    fn set_key_id(&self, py: Python<'_>, addr: u64, size: u64, key_id: u32) -> PyResult<()> {
        self.bounds(addr, size)?;
        py.detach(|| self.lock().set_key_id(addr, size, key_id)).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The key ID of the page holding `addr`.
    fn key_id(&self, py: Python<'_>, addr: u64) -> PyResult<u32> {
        self.bounds(addr, 1)?;
        Ok(py.detach(|| self.lock().key_id(addr)))
    }

    /// Verify all touched memory; returns the number of chunks checked.
    fn check(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.lock().check(0)).map_err(integrity_err)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| {
            let mut s = Stats::default();
            self.lock().stats(&mut s);
            s
        });
        stats_dict(py, &s)
    }

    /// Regions of untrusted memory as (name, base, size).
    fn layout(&self, py: Python<'_>) -> Vec<(String, u64, u64)> {
        py.detach(|| self.lock().layout().regions().iter().map(|r| (r.name.clone(), r.base, r.size)).collect())
    }

    /// Where the metadata protecting `addr` lives: (description, address) pairs.
    fn metadata(&self, py: Python<'_>, addr: u64) -> PyResult<Vec<(String, u64)>> {
        self.bounds(addr, 1)?;
        Ok(py.detach(|| self.lock().metadata_of(addr).into_iter().map(|m| (m.kind.to_string(), m.addr)).collect()))
    }

    /// The unprotected DMA region as (base, size).
    fn dma_region(&self) -> (u64, u64) {
        self.dma
    }

    /// ReadWithoutChecking: the unprotected region only, raw from memory.
    fn read_without_checking<'py>(&self, py: Python<'py>, addr: u64, n: usize) -> PyResult<Bound<'py, PyBytes>> {
        // No buffer larger than the region is ever allocated; the engine checks the range.
        let mut buf = buffer(n.min(self.dma.1 as usize + 1), "read_without_checking")?;
        if buf.len() < n {
            let (base, size) = self.dma;
            return Err(PyValueError::new_err(format!(
                "ReadWithoutChecking of 0x{:x}+{} outside the unprotected region 0x{:x}+{}",
                addr, n, base, size
            )));
        }
        py.detach(|| self.lock().read_without_checking(addr, &mut buf, 0)).map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &buf))
    }

    // The adversary's view (also reachable as `.untrusted` from the Python wrapper).
    #[getter]
    fn raw_size(&self) -> u64 {
        self.raw_size
    }

    fn peek<'py>(&self, py: Python<'py>, addr: u64, n: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.raw_bounds(addr, n as u64)?;
        let mut buf = buffer(n, "peek")?;
        py.detach(|| self.lock().untrusted().read(addr, &mut buf));
        Ok(PyBytes::new(py, &buf))
    }

    fn poke(&self, py: Python<'_>, addr: u64, data: &[u8]) -> PyResult<()> {
        self.raw_bounds(addr, data.len() as u64)?;
        py.detach(|| self.lock().untrusted().write(addr, data));
        Ok(())
    }

    fn snapshot(&self, py: Python<'_>) -> Snapshot {
        Snapshot { inner: py.detach(|| self.lock().untrusted().snapshot()) }
    }

    fn restore(&self, py: Python<'_>, s: &Snapshot) -> PyResult<()> {
        let inner = &s.inner;
        py.detach(|| self.lock().untrusted().restore(inner)).map_err(PyValueError::new_err)
    }

    /// Base addresses of pages of untrusted memory ever written.
    fn touched_pages(&self, py: Python<'_>) -> Vec<u64> {
        py.detach(|| {
            let mut e = self.lock();
            let end = e.untrusted().size();
            e.untrusted().touched_pages(0, end)
        })
    }

    /// Suspend (mecu): write the caches back and take the key device out.
    fn suspend(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().suspend()).map_err(power_err)
    }

    /// Resume (mecu): the key device is back, a new resume cycle begins.
    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().resume()).map_err(power_err)
    }

    /// Reboot (mecu): a new key; the old instance's memory becomes unreadable.
    fn reboot(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().reboot()).map_err(power_err)
    }
}

impl SecureMemory {
    /// The engine, waited for (call with the GIL released). A panic inside an earlier call
    /// cannot happen by design; were it to, the engine is still handed out rather than every
    /// later call failing.
    fn lock(&self) -> MutexGuard<'_, Engine> {
        self.eng.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bounds(&self, addr: u64, n: u64) -> PyResult<()> {
        range_in(addr, n, self.size, "protected")
    }

    fn raw_bounds(&self, addr: u64, n: u64) -> PyResult<()> {
        range_in(addr, n, self.raw_size, "untrusted")
    }
}

/// A 128-bit key from the OS's random source (getrandom(2)).
fn os_random_key() -> PyResult<[u8; 16]> {
    let mut b = [0u8; 16];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `b`.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(pyo3::exceptions::PyOSError::new_err(format!("the OS random source failed: {e}")));
        }
        got += n as usize;
    }
    Ok(b)
}

fn range_in(addr: u64, n: u64, size: u64, what: &str) -> PyResult<()> {
    match addr.checked_add(n) {
        Some(e) if e <= size => Ok(()),
        _ => Err(PyValueError::new_err(format!("address range 0x{:x}+{} is outside the {} {} bytes", addr, n, size, what))),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A wait for a FIFO's reader ends on the stop request SIGINT/SIGTERM make during a call.
    secmem_files::set_stop_check(|| secmem_trace::stop::stop_requested().is_some());
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(sample_plan, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_windows, m)?)?;
    m.add("DEFAULT_PREWARM", secmem_trace::checkpoint::DEFAULT_PREWARM)?;
    m.add("TRACE_READINGS", secmem_trace::READINGS.to_vec())?;
    m.add_function(wrap_pyfunction!(run_checkpointed, m)?)?;
    m.add_function(wrap_pyfunction!(t95, m)?)?;
    m.add_function(wrap_pyfunction!(set_trace_reading, m)?)?;
    m.add_function(wrap_pyfunction!(trace_reading, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(progress_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(run_mix, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(integrity_schemes, m)?)?;
    m.add_function(wrap_pyfunction!(bench_schemes, m)?)?;
    m.add_function(wrap_pyfunction!(scheme_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(encryption_schemes, m)?)?;
    m.add_function(wrap_pyfunction!(params, m)?)?;
    m.add_function(wrap_pyfunction!(export_workload, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(trace_length, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(attack, m)?)?;
    m.add_function(wrap_pyfunction!(attack_encryption, m)?)?;
    m.add_function(wrap_pyfunction!(attack_codeauth, m)?)?;
    spec::register(m)?;
    readers::register(m)?;
    tracer::register(m)?;
    codeauth::register(m)?;
    m.add_class::<SecureMemory>()?;
    m.add_class::<Snapshot>()?;
    m.add("IntegrityError", m.py().get_type::<IntegrityError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // build.rs: a hash of the engine's sources, and the commit built when git knew it.
    m.add("build_id", env!("SECMEM_BUILD_ID"))?;
    let commit = env!("SECMEM_BUILD_COMMIT");
    m.add("build_commit", (!commit.is_empty()).then_some(commit))?;
    Ok(())
}
