//! Python glue for code authentication (`secmem.codeauth`): keys, signing and verifying ELF
//! programs, tag files. Bytes in, bytes out; Python owns the files' paths.
//!
//! Bad input (a malformed ELF, a damaged key or tag file, bad parameters) raises
//! `_core.CodeAuthError` (a `ValueError`); a refusal — a block whose tag does not match, a
//! wrong key — raises `_core.IntegrityError` with `.addr` set to the refused block when there
//! is one.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use secmem_codeauth::{self as ca, Error, Keys, PadKind, Params, Program, TagFile, Width};

create_exception!(_core, CodeAuthError, PyValueError, "Bad input to code authentication: a malformed ELF, a damaged key or tag file, bad parameters.");

fn err(e: Error) -> PyErr {
    match e {
        Error::Mismatch { .. } | Error::NothingVerifies { .. } | Error::NotSigned { .. } | Error::WrongKey { .. } => Python::attach(|py| {
            let pe = crate::IntegrityError::new_err(e.to_string());
            let v = pe.value(py);
            let _ = v.setattr("addr", e.addr());
            let _ = v.setattr("what", "code");
            pe
        }),
        e => CodeAuthError::new_err(e.to_string()),
    }
}

fn keys(keyfile: &[u8]) -> PyResult<Keys> {
    Keys::from_file_bytes(keyfile).map_err(err)
}

fn params(block: u32, width: u32, pad: &str) -> PyResult<Params> {
    Params::new(PadKind::from_name(pad).map_err(err)?, Width::from_bits(width).map_err(err)?, block).map_err(err)
}

/// A key file's bytes from `KEY_BYTES` random bytes.
#[pyfunction]
fn codeauth_keys<'py>(py: Python<'py>, random: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &Keys::from_random(random).map_err(err)?.to_file_bytes()))
}

/// A key file's bytes derived from a seed (deterministic; for tests and simulations).
#[pyfunction]
fn codeauth_derive_keys<'py>(py: Python<'py>, seed: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &Keys::derive(seed).to_file_bytes())
}

/// The fingerprint (hex) of a key file's keys.
#[pyfunction]
fn codeauth_fingerprint(keyfile: &[u8]) -> PyResult<String> {
    Ok(keys(keyfile)?.fingerprint_hex())
}

/// Sign the executable segments of an ELF file: the tag file's bytes.
#[pyfunction]
#[pyo3(signature = (keyfile, elf, program_id, block=64, width=128, pad="pr-trivium", tp=None, base=0))]
#[allow(clippy::too_many_arguments)]
fn codeauth_sign<'py>(py: Python<'py>, keyfile: &[u8], elf: &[u8], program_id: u32, block: u32, width: u32, pad: &str, tp: Option<u64>, base: u64) -> PyResult<Bound<'py, PyBytes>> {
    let (k, p) = (keys(keyfile)?, params(block, width, pad)?);
    let program = Program::from_elf(elf, block, base).map_err(err)?;
    let tags = py.detach(|| ca::sign(&k, p, &program, program_id, tp)).map_err(err)?;
    Ok(PyBytes::new(py, &tags.to_bytes()))
}

/// Verify an ELF file against a tag file; the number of blocks verified.
#[pyfunction]
fn codeauth_verify(py: Python<'_>, keyfile: &[u8], elf: &[u8], tagfile: &[u8]) -> PyResult<u64> {
    let k = keys(keyfile)?;
    let tags = TagFile::from_bytes(tagfile).map_err(err)?;
    let program = ca::program_for(elf, &tags).map_err(err)?;
    Ok(py.detach(|| ca::verify(&k, &program, &tags)).map_err(err)?.blocks)
}

/// What a tag file holds (everything but the tags themselves).
#[pyfunction]
fn codeauth_tagfile_info<'py>(py: Python<'py>, tagfile: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let t = TagFile::from_bytes(tagfile).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("program_id", t.program_id)?;
    d.set_item("block", t.params.block)?;
    d.set_item("width", t.params.width.bits())?;
    d.set_item("slot", t.params.width.slot())?;
    d.set_item("pad", t.params.pad.name())?;
    d.set_item("tp", t.layout.tp())?;
    d.set_item("tags", t.layout.tags())?;
    d.set_item("tags_per_block", t.layout.tags_per_block())?;
    d.set_item("key_fingerprint", t.key_fingerprint.iter().map(|b| format!("{b:02x}")).collect::<String>())?;
    d.set_item("table_sha256", t.table_digest().iter().map(|b| format!("{b:02x}")).collect::<String>())?;
    let segs = PyList::empty(py);
    for s in t.layout.segments() {
        segs.append((s.vaddr, s.blocks, s.first_tag))?;
    }
    d.set_item("segments", segs)?;
    Ok(d)
}

/// Write bytes to a file atomically (an exclusive temporary file, then rename); `private`
/// files (keys) are created readable by their owner only, from the start.
#[pyfunction]
#[pyo3(signature = (path, data, private=false))]
fn codeauth_write(py: Python<'_>, path: &str, data: &[u8], private: bool) -> PyResult<()> {
    let mode = if private { secmem_files::PRIVATE } else { secmem_files::PUBLIC };
    let _signals = crate::interrupt::Guard::install();
    let r = py.detach(|| ca::write_atomic(std::path::Path::new(path), data, mode));
    crate::interrupt::check()?;
    r.map_err(err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(codeauth_keys, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_derive_keys, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_sign, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_verify, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_tagfile_info, m)?)?;
    m.add_function(wrap_pyfunction!(codeauth_write, m)?)?;
    m.add("CODEAUTH_KEY_BYTES", secmem_codeauth::keys::KEY_BYTES)?;
    m.add("CodeAuthError", m.py().get_type::<CodeAuthError>())?;
    Ok(())
}
