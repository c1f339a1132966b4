//! Python glue for reading trace files of every supported format (`secmem.open_trace`).
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
