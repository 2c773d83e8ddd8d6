//! The op tables' Python bindings: each row of the engine's unary, binary and comparison tables
//! (`ferrograd::unary_ops!`, `binary_ops!`, `compare_ops!`) gives a `Tensor` method, a module
//! function, an entry of `_op_table()` (from which `python/ferrograd/_stubs.py` writes the
//! stubs) and of the module's `__all__` (from which the package re-exports). Adding an op to a
//! table needs nothing here.

use ferrograd::op::BinaryOp;
use ferrograd::Tensor;
use pyo3::prelude::*;

use crate::convert::arg;
use crate::functions::binary_fn;
use crate::tensor::{binary, pow_impl, unary, PyTensor};

type Binary = fn(&Tensor, &Tensor) -> ferrograd::Result<Tensor>;

/// `a op other` for a binary table op (`pow` with a Python number takes the scalar form).
fn binary_method(
    py: Python<'_>,
    op: BinaryOp,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    f: Binary,
) -> PyResult<PyTensor> {
    if op == BinaryOp::Pow {
        return pow_impl(py, a, other, "other");
    }
    binary(py, op.name(), a, other, "other", false, f)
}

/// `op(a, b)` for a binary table op, where either side may be a Python number.
fn binary_function(
    py: Python<'_>,
    op: BinaryOp,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    f: Binary,
) -> PyResult<PyTensor> {
    if op == BinaryOp::Pow {
        if let Ok(t) = a.cast::<PyTensor>() {
            return pow_impl(py, &t.get().tensor(), b, "b");
        }
    }
    binary_fn(py, op.name(), a, b, f)
}

macro_rules! py_unary {
    ($($op:ident $name:ident $float:tt $int:tt $grad:tt),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "`.")]
                fn $name(&self, py: Python<'_>) -> PyResult<PyTensor> {
                    unary(py, &self.tensor(), Tensor::$name)
                }
            )*
        }

        mod unary_functions {
            use super::*;
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` of `x`.")]
                #[pyfunction]
                pub(super) fn $name(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    let t = arg(stringify!($name), "x", x, None)?;
                    unary(py, &t, Tensor::$name)
                }
            )*
        }

        fn register_unary(m: &Bound<'_, PyModule>, table: &mut Vec<Row>) -> PyResult<()> {
            $(
                m.add_function(wrap_pyfunction!(unary_functions::$name, m)?)?;
                table.push(("unary", stringify!($name), stringify!($name)));
            )*
            Ok(())
        }
    };
}
ferrograd::unary_ops!(py_unary);

macro_rules! py_binary {
    ($($op:ident $name:ident $float:tt $int:tt $da:tt $db:tt),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` with numpy broadcasting.")]
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    binary_method(py, BinaryOp::$op, &self.tensor(), other, Tensor::$name)
                }
            )*
        }

        mod binary_functions {
            use super::*;
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` of `a` and `b`, with numpy broadcasting.")]
                #[pyfunction]
                pub(super) fn $name(
                    py: Python<'_>,
                    a: &Bound<'_, PyAny>,
                    b: &Bound<'_, PyAny>,
                ) -> PyResult<PyTensor> {
                    binary_function(py, BinaryOp::$op, a, b, Tensor::$name)
                }
            )*
        }

        fn register_binary(m: &Bound<'_, PyModule>, table: &mut Vec<Row>) -> PyResult<()> {
            $(
                m.add_function(wrap_pyfunction!(binary_functions::$name, m)?)?;
                table.push(("binary", stringify!($name), stringify!($name)));
            )*
            Ok(())
        }
    };
}
ferrograd::binary_ops!(py_binary);

macro_rules! py_compare {
    ($($op:ident $method:ident $name:ident $kernel:tt),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[doc = concat!("Elementwise comparison `", stringify!($name), "`; a bool tensor.")]
                fn $method(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    binary(py, stringify!($name), &self.tensor(), other, "other", false, Tensor::$method)
                }
            )*
        }

        mod compare_functions {
            use super::*;
            $(
                #[doc = concat!("Elementwise comparison `", stringify!($name), "` of `a` and `b`; a bool tensor.")]
                #[pyfunction]
                pub(super) fn $name(
                    py: Python<'_>,
                    a: &Bound<'_, PyAny>,
                    b: &Bound<'_, PyAny>,
                ) -> PyResult<PyTensor> {
                    binary_fn(py, stringify!($name), a, b, Tensor::$method)
                }
            )*
        }

        fn register_compare(m: &Bound<'_, PyModule>, table: &mut Vec<Row>) -> PyResult<()> {
            $(
                m.add_function(wrap_pyfunction!(compare_functions::$name, m)?)?;
                table.push(("compare", stringify!($name), stringify!($method)));
            )*
            Ok(())
        }
    };
}
ferrograd::compare_ops!(py_compare);

/// A row of `_op_table()`: the table (`"unary"`, `"binary"`, `"compare"`), the function's
/// name and the method's name.
type Row = (&'static str, &'static str, &'static str);

/// Adds the table ops' functions and `_op_table()` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let mut table = Vec::new();
    register_unary(m, &mut table)?;
    register_binary(m, &mut table)?;
    register_compare(m, &mut table)?;
    m.add("_OP_TABLE", table)?;
    Ok(())
}
