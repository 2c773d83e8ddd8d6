//! PyO3 bindings for ferrograd: `Tensor`, `GradKey`, the op functions and error mapping.
//! Only translation lives here; everything else is in the engine crate.

mod alloc;
mod convert;
mod errors;
mod function;
mod functions;
mod grad;
mod tensor;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<grad::PyGradKey>()?;
    functions::register(m)?;
    function::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
