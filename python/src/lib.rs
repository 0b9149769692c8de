//! The `blackbox` Python package's extension module, `blackbox._blackbox`: the
//! recorder, its working memory and knowledge base, the readers (replay, state at
//! a time, verify) and the export, over the Rust crates. Every call that may wait (for the disk, the
//! writer, a read) lets the interpreter go while it waits. The package's Python layer
//! (`python/python/blackbox/`) adds the working memory's mapping and re-exports this.

mod convert;
mod export;
mod read;
mod recorder;

use pyo3::prelude::*;

#[pymodule]
fn _blackbox(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("BlackboxError", py.get_type::<convert::BlackboxError>())?;
    m.add("LogDamaged", py.get_type::<convert::LogDamaged>())?;
    m.add("Locked", py.get_type::<convert::Locked>())?;
    m.add("InvalidInput", py.get_type::<convert::InvalidInput>())?;
    m.add_class::<recorder::Recorder>()?;
    m.add_class::<recorder::Working>()?;
    m.add_class::<recorder::Kb>()?;
    m.add_class::<read::Records>()?;
    m.add_function(wrap_pyfunction!(read::replay, m)?)?;
    m.add_function(wrap_pyfunction!(read::state_at, m)?)?;
    m.add_function(wrap_pyfunction!(read::verify, m)?)?;
    m.add_function(wrap_pyfunction!(read::to_ns, m)?)?;
    m.add_function(wrap_pyfunction!(export::export, m)?)?;
    Ok(())
}
