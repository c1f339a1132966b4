//! Python glue for live tracing of programs (`secmem trace`, `secmem run -- PROGRAM`).
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
