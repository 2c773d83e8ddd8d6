//! Engine errors as Python exceptions.
//!
//! Shape, dtype and device errors get their own classes that also derive from the builtin a
//! user would try first (`ValueError`, `TypeError`, `RuntimeError`), so `except ValueError`
//! and `except RuntimeError` both catch a shape mismatch.

use std::fmt;

use ferrograd::Error;
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

static SHAPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DTYPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DEVICE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static GRAD_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static INPLACE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TRACE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static AXIS_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static OOM_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn make_type<'py>(
    py: Python<'py>,
    name: &str,
    doc: &str,
    bases: Vec<Bound<'py, PyType>>,
) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__module__", "ferrograd")?;
    ns.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    let ty = py
        .import("builtins")?
        .getattr("type")?
        .call1((name, bases, ns))?;
    Ok(ty.cast_into::<PyType>()?.unbind())
}

/// Creates the exception classes and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let value = py.get_type::<PyValueError>();
    let type_ = py.get_type::<PyTypeError>();
    let runtime = py.get_type::<PyRuntimeError>();
    type Spec<'a, 'py> = (
        &'a PyOnceLock<Py<PyType>>,
        &'a str,
        &'a str,
        Vec<Bound<'py, PyType>>,
    );
    let index = py.get_type::<PyIndexError>();
    let memory = py.get_type::<PyMemoryError>();
    let specs: [Spec<'_, '_>; 8] = [
        (
            &SHAPE_ERROR,
            "ShapeError",
            "Shapes that do not work together.",
            vec![value.clone(), runtime.clone()],
        ),
        (
            &DTYPE_ERROR,
            "DTypeError",
            "Dtypes that do not work together.",
            vec![type_.clone(), runtime.clone()],
        ),
        (
            &DEVICE_ERROR,
            "DeviceError",
            "Tensors on different devices, or a device that is not available.",
            vec![runtime.clone(), value.clone()],
        ),
        (
            &GRAD_ERROR,
            "GradError",
            "Misuse of a gradient tape (a finished key, a bad rule).",
            vec![runtime.clone()],
        ),
        (
            &INPLACE_ERROR,
            "InplaceError",
            "A tensor saved for backward was modified in place.",
            vec![runtime.clone()],
        ),
        (
            &TRACE_ERROR,
            "TraceError",
            "What a traced function cannot do: read the value of a tensor computed inside it, \
             write in place where the graph cannot follow.",
            vec![runtime.clone()],
        ),
        (
            &AXIS_ERROR,
            "AxisError",
            "An axis out of range for a tensor's rank: an IndexError, as PyTorch raises, and a \
             ValueError, as numpy's AxisError is.",
            vec![index.clone(), value.clone()],
        ),
        (
            &OOM_ERROR,
            "OutOfMemoryError",
            "A buffer the device could not allocate: a RuntimeError, as PyTorch's \
             `OutOfMemoryError` is, and a MemoryError.",
            vec![runtime.clone(), memory.clone()],
        ),
    ];
    for (cell, name, doc, bases) in specs {
        let ty = make_type(py, name, doc, bases)?;
        m.add(name, ty.bind(py))?;
        let _ = cell.set(py, ty);
    }
    Ok(())
}

fn raise(cell: &PyOnceLock<Py<PyType>>, fallback: fn(String) -> PyErr, msg: String) -> PyErr {
    Python::attach(|py| match cell.get(py) {
        Some(ty) => PyErr::from_type(ty.bind(py).clone(), msg),
        None => fallback(msg),
    })
}

/// A Python exception carried through the engine (raised by a callback or a custom rule).
pub struct PyErrBox(pub PyErr);

impl fmt::Debug for PyErrBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
impl fmt::Display for PyErrBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for PyErrBox {}

/// Wraps a Python exception for the engine.
pub fn external(e: PyErr) -> Error {
    Error::External(Box::new(PyErrBox(e)))
}

/// Maps an engine error to the Python exception for its kind.
pub fn to_pyerr(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Shape { .. } => raise(&SHAPE_ERROR, PyValueError::new_err, msg),
        Error::DType { .. } => raise(&DTYPE_ERROR, PyTypeError::new_err, msg),
        Error::Device { .. } => raise(&DEVICE_ERROR, PyRuntimeError::new_err, msg),
        Error::Invalid { .. } => PyValueError::new_err(msg),
        Error::Index { .. } => PyIndexError::new_err(msg),
        Error::Axis { .. } => raise(&AXIS_ERROR, PyIndexError::new_err, msg),
        Error::OutOfMemory { .. } => raise(&OOM_ERROR, PyMemoryError::new_err, msg),
        Error::Autograd { .. } => {
            // (PyTorch's wording too, which ported tests match)
            let msg = if msg.contains("a leaf tensor that requires grad (or a view of one)") {
                format!("{msg} (a leaf Variable that requires grad is being used in an in-place operation.)")
            } else {
                msg
            };
            raise(&GRAD_ERROR, PyRuntimeError::new_err, msg)
        }
        Error::Version { .. } => raise(
            &INPLACE_ERROR,
            PyRuntimeError::new_err,
            format!(
                "{msg} (one of the variables needed for gradient computation has been modified \
                 by an inplace operation)"
            ),
        ),
        Error::Trace { .. } => raise(&TRACE_ERROR, PyRuntimeError::new_err, msg),
        Error::External(b) => match b.downcast::<PyErrBox>() {
            Ok(p) => p.0,
            Err(b) => PyRuntimeError::new_err(b.to_string()),
        },
    }
}

/// `.py()` on engine results.
pub trait ResultExt<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> ResultExt<T> for ferrograd::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_pyerr)
    }
}

/// A `ShapeError` whose message starts with `op`.
pub fn shape_error(op: &str, msg: impl Into<String>) -> PyErr {
    to_pyerr(Error::Shape {
        op: op.to_string(),
        msg: msg.into(),
    })
}

/// A `DTypeError` whose message starts with `op`.
pub fn dtype_error(op: &str, msg: impl Into<String>) -> PyErr {
    to_pyerr(Error::DType {
        op: op.to_string(),
        msg: msg.into(),
    })
}

/// A `DeviceError` whose message starts with `op`.
pub fn device_error(op: &str, msg: impl Into<String>) -> PyErr {
    to_pyerr(Error::Device {
        op: op.to_string(),
        msg: msg.into(),
    })
}
