//! PyO3 bindings for ferrograd: `Tensor`, `GradKey`, the op functions and error mapping.
//! Only translation lives here; everything else is in the engine crate.

mod alloc;
mod convert;
mod errors;
mod function;
mod functions;
mod grad;
mod graph;
mod nccl;
mod table;
mod tensor;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // a panic is a bug, and where one is caught it becomes a Python exception carrying its
    // message: nothing is printed to stderr besides
    std::panic::set_hook(Box::new(|_| {}));
    errors::register(m)?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<grad::PyGradKey>()?;
    functions::register(m)?;
    table::register(m)?;
    function::register(m)?;
    graph::register(m)?;
    nccl::register(m)?;
    m.add("_OP_GRADIENTS", ferrograd::Op::name_table().to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // what `from ferrograd._core import *` re-exports: every public name registered above
    let mut public: Vec<String> = m
        .dict()
        .keys()
        .iter()
        .map(|k| k.extract::<String>())
        .collect::<PyResult<_>>()?;
    public.retain(|n| !n.starts_with('_') && n != "OP_NAMES");
    public.sort();
    m.add("__all__", public)?;
    Ok(())
}
