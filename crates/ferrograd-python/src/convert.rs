//! Conversions between Python values (numpy arrays, scalars, tensors) and engine tensors.

use std::sync::atomic::{AtomicUsize, Ordering};

use ferrograd::{DType, Device, Element, Tensor};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{
    Element as NpElement, IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::errors::ResultExt;
use crate::tensor::PyTensor;

fn read_array<T: Element + NpElement>(obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
    let Ok(arr) = obj.cast::<PyArrayDyn<T>>() else {
        return Ok(None);
    };
    let ro = arr
        .try_readonly()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let view = ro.as_array();
    let shape: Vec<usize> = view.shape().to_vec();
    let data: Vec<T> = match view.as_slice() {
        Some(s) => s.to_vec(),
        None => view.iter().copied().collect(),
    };
    Tensor::from_vec(data, &shape).py().map(Some)
}

/// A tensor from a numpy array of a supported dtype (float32, float64, int64, bool).
pub fn from_numpy(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Some(t) = read_array::<f32>(obj)? {
        return Ok(t);
    }
    if let Some(t) = read_array::<f64>(obj)? {
        return Ok(t);
    }
    if let Some(t) = read_array::<i64>(obj)? {
        return Ok(t);
    }
    if let Some(t) = read_array::<bool>(obj)? {
        return Ok(t);
    }
    let desc = match obj.cast::<PyUntypedArray>() {
        Ok(a) => format!("a numpy array of dtype {}", a.dtype()),
        Err(_) => format!("a {}", obj.get_type().name()?),
    };
    Err(PyTypeError::new_err(format!(
        "tensor: unsupported data: {desc}; expected float32, float64, int64 or bool"
    )))
}

fn to_array<'py, T: Element + NpElement>(
    py: Python<'py>,
    t: &Tensor,
) -> PyResult<Bound<'py, PyAny>> {
    let v: Vec<T> = t.to_vec().py()?;
    let arr = ArrayD::from_shape_vec(IxDyn(t.shape()), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(arr.into_pyarray(py).into_any())
}

/// A numpy copy of a tensor.
pub fn to_numpy<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    let t = t.clone();
    match t.dtype() {
        DType::F32 => to_array::<f32>(py, &t),
        DType::F64 => to_array::<f64>(py, &t),
        DType::I64 => to_array::<i64>(py, &t),
        DType::Bool => to_array::<bool>(py, &t),
    }
}

/// Reads a dtype from a string, a numpy dtype or a numpy scalar type.
pub fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_string()
    } else {
        let np = obj.py().import("numpy")?;
        np.getattr("dtype")?
            .call1((obj,))?
            .getattr("name")?
            .extract()?
    };
    DType::parse(&name).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "unsupported dtype {name:?}; expected float32, float64, int64 or bool"
        ))
    })
}

/// The numpy dtype object for a dtype.
pub fn numpy_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.getattr("dtype")?.call1((d.name(),))
}

/// The device that factories (`tensor`, `zeros`, ...) and device queries use when given none.
/// Held as its [`Device::slot`].
static DEFAULT_DEVICE: AtomicUsize = AtomicUsize::new(0);

pub fn default_device() -> Device {
    Device::from_slot(DEFAULT_DEVICE.load(Ordering::Relaxed))
}

pub fn set_default_device(d: Device) {
    DEFAULT_DEVICE.store(d.slot(), Ordering::Relaxed);
}

/// A device argument; `None` is the default device.
pub fn parse_device(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    match obj {
        None => Ok(default_device()),
        Some(o) if o.is_none() => Ok(default_device()),
        Some(o) => {
            let s = o.str()?.to_string();
            Device::parse(&s).py()
        }
    }
}

/// A Python number as a 0-d tensor in `like`'s dtype (float32 when there is no `like`).
fn scalar(op: &str, obj: &Bound<'_, PyAny>, like: Option<&Tensor>) -> PyResult<Option<Tensor>> {
    let dtype = like.map(|t| t.dtype());
    if obj.is_instance_of::<PyBool>() {
        let v: bool = obj.extract()?;
        return Ok(Some(match dtype {
            None | Some(DType::Bool) => Tensor::scalar(v),
            Some(d) => Tensor::scalar_of(v as i64 as f64, d),
        }));
    }
    if obj.is_instance_of::<PyInt>() {
        let v: i64 = obj.extract()?;
        return Ok(Some(match dtype {
            None | Some(DType::I64) | Some(DType::Bool) => Tensor::scalar(v),
            Some(d) => Tensor::scalar_of(v as f64, d),
        }));
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract()?;
        return Ok(Some(match dtype {
            None => Tensor::scalar(v as f32),
            Some(d) if d.is_float() => Tensor::scalar_of(v, d),
            Some(d) => {
                return Err(PyTypeError::new_err(format!(
                    "{op}: cannot mix a {d} tensor with the float {v}; cast the tensor with .astype(\"float32\") first"
                )))
            }
        }));
    }
    Ok(None)
}

/// An op argument: a Tensor, a Python number (converted to `like`'s dtype) or array-like data.
pub fn arg(op: &str, obj: &Bound<'_, PyAny>, like: Option<&Tensor>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().tensor());
    }
    if let Some(t) = scalar(op, obj, like)? {
        return Ok(t);
    }
    let is_data = obj.cast::<PyUntypedArray>().is_ok()
        || obj.is_instance_of::<pyo3::types::PyList>()
        || obj.is_instance_of::<pyo3::types::PyTuple>()
        || obj.hasattr("__array__")?;
    if is_data {
        let ferro = obj.py().import("ferrograd")?;
        let t = ferro.getattr("tensor")?.call1((obj,))?;
        return Ok(t.cast::<PyTensor>()?.get().tensor());
    }
    Err(PyTypeError::new_err(format!(
        "{op}: expected a Tensor or a number, got {}",
        obj.get_type().name()?
    )))
}

/// An argument that must already be a Tensor.
pub fn tensor_arg(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    match obj.cast::<PyTensor>() {
        Ok(t) => Ok(t.get().tensor()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{op}: expected a Tensor, got {}",
            obj.get_type().name()?
        ))),
    }
}

/// Axes given as `None`, an int, or a sequence of ints.
pub fn axes_arg(op: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<isize>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => {
            if let Ok(a) = o.extract::<isize>() {
                return Ok(Some(vec![a]));
            }
            o.extract::<Vec<isize>>().map(Some).map_err(|_| {
                PyTypeError::new_err(format!(
                    "{op}: axis must be None, an int or a sequence of ints"
                ))
            })
        }
    }
}

/// A shape given as separate ints or as one sequence.
pub fn shape_args(op: &str, args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if let Ok(v) = a.extract::<isize>() {
            return Ok(vec![v]);
        }
        return a.extract::<Vec<isize>>().map_err(|_| {
            PyTypeError::new_err(format!("{op}: expected ints or a sequence of ints"))
        });
    }
    args.extract::<Vec<isize>>()
        .map_err(|_| PyTypeError::new_err(format!("{op}: expected ints or a sequence of ints")))
}
