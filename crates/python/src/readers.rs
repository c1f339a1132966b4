//! Python glue for reading trace files of every supported format (`secmem.open_trace`).
//!
//! `TraceReader` decodes records in batches of `BATCH` with the GIL released and hands them
//! out one by one as `Record` objects; a record's fields are converted when they are asked
//! for. Every reader error becomes `secmem.TraceError` (a `ValueError`), one line, with
//! `.path`, `.offset` (None unless the file is damaged) and `.what`; it is raised after the
//! records decoded before it, and again on every later `next()`.

use std::sync::Mutex;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use secmem_trace::{Branch, Instr, OpClass, TraceError as RsTraceError, TraceSource};

create_exception!(
    secmem,
    TraceError,
    PyValueError,
    "A trace that cannot be read: unknown or undetectable format, missing, truncated or corrupt file."
);

/// Records decoded per batch (per GIL release).
const BATCH: usize = 4096;

/// A reader error, kept to be raised again.
#[derive(Clone)]
struct ErrInfo {
    msg: String,
    path: Option<String>,
    offset: Option<u64>,
    what: String,
}

impl ErrInfo {
    fn of(e: &RsTraceError) -> ErrInfo {
        let msg = e.to_string().replace('\n', " ");
        match e {
            RsTraceError::Corrupt { path, offset, what } => ErrInfo {
                msg,
                path: Some(path.clone()),
                offset: Some(*offset),
                what: what.clone(),
            },
            RsTraceError::Io { path, source } => ErrInfo {
                msg,
                path: Some(path.clone()),
                offset: None,
                what: source.to_string(),
            },
            RsTraceError::Other(m) => ErrInfo {
                msg,
                path: None,
                offset: None,
                what: m.clone(),
            },
        }
    }

    fn raise(&self, py: Python<'_>) -> PyErr {
        let err = TraceError::new_err(self.msg.clone());
        let v = err.value(py);
        let _ = v.setattr("path", self.path.clone());
        let _ = v.setattr("offset", self.offset);
        let _ = v.setattr("what", self.what.clone());
        err
    }
}

fn op_name(op: OpClass) -> &'static str {
    match op {
        OpClass::Alu => "alu",
        OpClass::Mul => "mul",
        OpClass::Div => "div",
        OpClass::Fp => "fp",
        OpClass::FpDiv => "fpdiv",
        OpClass::Mem => "mem",
        OpClass::Branch => "branch",
        OpClass::Barrier => "barrier",
    }
}

/// Up to 16 value bytes in hex, for reprs.
fn hex_value(v: &[u8]) -> String {
    let mut s: String = v.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if v.len() > 16 {
        s.push('…');
    }
    s
}

/// One load or store with its value.
#[pyclass(frozen, eq, module = "secmem._core", name = "Access")]
#[derive(PartialEq)]
struct PyAccess {
    store: bool,
    #[pyo3(get)]
    addr: u64,
    #[pyo3(get)]
    size: u32,
    bytes: Vec<u8>,
}

#[pymethods]
impl PyAccess {
    /// "load" or "store".
    #[getter]
    fn kind(&self) -> &'static str {
        if self.store {
            "store"
        } else {
            "load"
        }
    }

    /// The full value loaded or stored (SIMD included), as bytes.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    fn __repr__(&self) -> String {
        format!(
            "Access(kind='{}', addr={:#x}, size={}, value={})",
            self.kind(),
            self.addr,
            self.size,
            hex_value(&self.bytes)
        )
    }
}

/// One executed instruction (or external write) of a trace.
#[pyclass(frozen, eq, module = "secmem._core", name = "Record")]
#[derive(PartialEq)]
struct Record {
    i: Instr,
}

#[pymethods]
impl Record {
    #[getter]
    fn pc(&self) -> u64 {
        self.i.pc
    }

    /// Instruction length in bytes (0: unknown, or an external record).
    #[getter]
    fn length(&self) -> u8 {
        self.i.len
    }

    /// The execution class: alu, mul, div, fp, fpdiv, mem, branch or barrier.
    #[getter]
    fn op(&self) -> &'static str {
        op_name(self.i.op)
    }

    /// True/False for a branch's outcome, None for other instructions.
    #[getter]
    fn taken(&self) -> Option<bool> {
        match self.i.branch {
            Branch::None => None,
            Branch::NotTaken => Some(false),
            Branch::Taken => Some(true),
        }
    }

    /// Memory written by the environment (loader, OS), not by an instruction.
    #[getter]
    fn external(&self) -> bool {
        self.i.external
    }

    #[getter]
    fn thread(&self) -> u32 {
        self.i.thread
    }

    #[getter]
    fn regs_read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.i.srcs().iter().map(|&r| r as u32))
    }

    #[getter]
    fn regs_written<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.i.dsts().iter().map(|&r| r as u32))
    }

    /// The loads and stores in order (a new list of `Access` objects on each call).
    #[getter]
    fn accesses<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let v: Vec<PyAccess> = self
            .i
            .accesses
            .iter()
            .map(|a| PyAccess {
                store: a.store,
                addr: a.addr,
                size: a.size,
                bytes: self.i.value(a).to_vec(),
            })
            .collect();
        PyList::new(py, v)
    }

    fn __repr__(&self) -> String {
        let i = &self.i;
        let acc: Vec<String> = i
            .accesses
            .iter()
            .map(|a| {
                format!(
                    "{} {}@{:#x}={}",
                    if a.store { "store" } else { "load" },
                    a.size,
                    a.addr,
                    hex_value(i.value(a))
                )
            })
            .collect();
        let mut s = format!(
            "Record(pc={:#x}, length={}, op='{}', accesses=[{}], regs_read={:?}, regs_written={:?}, taken={}",
            i.pc,
            i.len,
            op_name(i.op),
            acc.join(", "),
            i.srcs(),
            i.dsts(),
            match self.taken() {
                None => "None",
                Some(true) => "True",
                Some(false) => "False",
            }
        );
        if i.external {
            s.push_str(", external=True");
        }
        if i.thread != 0 {
            s.push_str(&format!(", thread={}", i.thread));
        }
        s.push(')');
        s
    }
}

struct Inner {
    src: Option<Box<dyn TraceSource>>,
    batch: Vec<Instr>,
    pos: usize,
    n: usize,
    done: bool,
    closed: bool,
    err: Option<ErrInfo>,
    count: u64,
}

impl Inner {
    /// Decode the next batch (no Python involved: runs without the GIL).
    fn fill(&mut self) {
        self.pos = 0;
        self.n = 0;
        let Some(src) = self.src.as_mut() else {
            self.done = true;
            return;
        };
        if self.batch.len() < BATCH {
            self.batch.resize_with(BATCH, Instr::default);
        }
        while self.n < BATCH {
            match src.next_into(&mut self.batch[self.n]) {
                Ok(true) => self.n += 1,
                Ok(false) => {
                    self.done = true;
                    break;
                }
                Err(e) => {
                    self.err = Some(ErrInfo::of(&e));
                    break;
                }
            }
        }
    }
}

/// An open trace file: iterate it for `Record`s. Also a context manager.
#[pyclass(module = "secmem._core", name = "TraceReader")]
struct TraceReader {
    inner: Mutex<Inner>,
    #[pyo3(get)]
    path: String,
    #[pyo3(get)]
    format: &'static str,
}

#[pymethods]
impl TraceReader {
    /// Open `path` as `format` (native, champsim, lackey; None or "auto": detect it).
    #[new]
    #[pyo3(signature = (path, format=None))]
    fn new(py: Python<'_>, path: String, format: Option<String>) -> PyResult<Self> {
        let r = py.detach(|| -> Result<_, RsTraceError> {
            let f = match format.as_deref() {
                None | Some("auto") => secmem_trace::detect_format(&path)?,
                Some(f) => secmem_trace::open::check_format(f)?,
            };
            Ok((f, secmem_trace::open_trace_as(&path, Some(f))?))
        });
        let (format, src) = r.map_err(|e| ErrInfo::of(&e).raise(py))?;
        Ok(TraceReader {
            inner: Mutex::new(Inner {
                src: Some(src),
                batch: Vec::new(),
                pos: 0,
                n: 0,
                done: false,
                closed: false,
                err: None,
                count: 0,
            }),
            path,
            format,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Record>> {
        let mut g = self
            .inner
            .try_lock()
            .map_err(|_| PyRuntimeError::new_err("this trace is being read by another thread"))?;
        let inner = &mut *g;
        if inner.pos == inner.n {
            if inner.closed {
                return Err(PyValueError::new_err("read from a closed trace"));
            }
            if let Some(e) = &inner.err {
                return Err(e.raise(py));
            }
            if inner.done {
                return Ok(None);
            }
            py.detach(|| inner.fill());
            if inner.n == 0 {
                return match &inner.err {
                    Some(e) => Err(e.raise(py)),
                    None => Ok(None),
                };
            }
        }
        let i = std::mem::take(&mut inner.batch[inner.pos]);
        inner.pos += 1;
        inner.count += 1;
        Ok(Some(Record { i }))
    }

    /// Records handed out so far.
    #[getter]
    fn count(&self) -> PyResult<u64> {
        Ok(self.lock()?.count)
    }

    /// Stop reading and release the file (iterating afterwards raises ValueError).
    fn close(&self) -> PyResult<()> {
        let mut g = self.lock()?;
        g.src = None;
        g.batch = Vec::new();
        g.pos = 0;
        g.n = 0;
        g.closed = true;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.lock()?.closed)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let n = self.inner.try_lock().map(|g| g.count).unwrap_or(0);
        format!("<secmem trace {:?} format={} records read={}>", self.path, self.format, n)
    }
}

impl TraceReader {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .try_lock()
            .map_err(|_| PyRuntimeError::new_err("this trace is being read by another thread"))
    }
}

/// The trace formats `open_trace` reads.
#[pyfunction]
fn trace_formats() -> Vec<&'static str> {
    secmem_trace::FORMATS.to_vec()
}

/// The detected format of the trace at `path` (raises TraceError if it cannot be told).
#[pyfunction]
fn detect_trace_format(py: Python<'_>, path: String) -> PyResult<&'static str> {
    py.detach(|| secmem_trace::detect_format(&path))
        .map_err(|e| ErrInfo::of(&e).raise(py))
}

/// For the trace-input benchmark: write the first `instructions` of a built-in `workload`, or
/// of the trace file `trace` (`trace_format`: None to detect it), as a file of `format` at
/// `dst` (compressed by its suffix); returns the instructions written.
#[pyfunction]
#[pyo3(signature = (dst, format, instructions, workload=None, trace=None, trace_format=None))]
fn write_bench_trace(
    py: Python<'_>,
    dst: String,
    format: String,
    instructions: u64,
    workload: Option<String>,
    trace: Option<String>,
    trace_format: Option<String>,
) -> PyResult<u64> {
    py.detach(|| {
        let mut src = match (workload, trace) {
            (Some(w), None) => secmem_trace::workloads::builtin(&w, 1)?,
            (None, Some(t)) => secmem_trace::open_trace_as(&t, trace_format.as_deref())?,
            _ => return Err(secmem_trace::TraceError::Other("write_bench_trace: give a workload or a trace".into())),
        };
        secmem_trace::bench_files::write_as(src.as_mut(), &dst, &format, instructions)
    })
    .map_err(|e| ErrInfo::of(&e).raise(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TraceReader>()?;
    m.add_class::<Record>()?;
    m.add_class::<PyAccess>()?;
    m.add_function(wrap_pyfunction!(trace_formats, m)?)?;
    m.add_function(wrap_pyfunction!(detect_trace_format, m)?)?;
    m.add_function(wrap_pyfunction!(write_bench_trace, m)?)?;
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    Ok(())
}
