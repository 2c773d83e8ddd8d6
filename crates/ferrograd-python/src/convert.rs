//! Conversions between Python values (numpy arrays, scalars, tensors) and engine tensors.

use std::sync::atomic::{AtomicUsize, Ordering};

use ferrograd::{DType, Device, Element, Tensor};
use numpy::{
    Element as NpElement, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple, PyType};

use crate::errors::ResultExt;
use crate::tensor::PyTensor;

/// The elements of a C-contiguous, aligned, native-order 1-D array of `T`, if `flat` is one.
fn read_flat<T: Copy + NpElement>(flat: &Bound<'_, PyAny>) -> PyResult<Option<Vec<T>>> {
    let Ok(arr) = flat.cast::<PyArrayDyn<T>>() else {
        return Ok(None);
    };
    let ro = arr
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("tensor: {e}")))?;
    match ro.as_slice() {
        Ok(s) => Ok(Some(s.to_vec())),
        Err(e) => Err(PyValueError::new_err(format!("tensor: {e}"))),
    }
}

/// The most axes a numpy array has.
const NUMPY_MAX_DIMS: usize = 64;

/// A tensor from a numpy array of a supported dtype (float32, float64, int64, bool), any
/// layout, alignment and byte order, up to numpy's 64 axes (copied).
pub fn from_numpy(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let Ok(arr) = obj.cast::<PyUntypedArray>() else {
        return Err(PyTypeError::new_err(format!(
            "tensor: expected a numpy array, got {}",
            obj.get_type().name()?
        )));
    };
    let shape: Vec<usize> = arr.shape().to_vec();
    // numpy does the layout work: a C-contiguous, aligned, native-order array (the array
    // itself when it is one), read flat, so any rank and layout is one slice
    let dtype = arr.dtype().call_method1("newbyteorder", ("=",))?;
    let flat = obj
        .py()
        .import("numpy")?
        .call_method1("require", (obj, dtype, "CA"))?
        .call_method1("reshape", (-1,))?;
    macro_rules! try_read {
        ($($t:ty),*) => {
            $(
                if let Some(data) = read_flat::<$t>(&flat)? {
                    return Tensor::from_vec(data, &shape).py();
                }
            )*
        };
    }
    try_read!(f32, f64, i64, bool, i32, i16, i8, u8);
    // float16 (and ml_dtypes' bfloat16) read as their bits
    let name: String = arr.dtype().getattr("name")?.extract()?;
    if name == "float16" || name == "bfloat16" {
        let bits_view = flat.call_method1("view", ("uint16",))?;
        if let Some(bits) = read_flat::<u16>(&bits_view)? {
            return if name == "float16" {
                let v: Vec<half::f16> = bits.into_iter().map(half::f16::from_bits).collect();
                Tensor::from_vec(v, &shape).py()
            } else {
                let v: Vec<half::bf16> = bits.into_iter().map(half::bf16::from_bits).collect();
                Tensor::from_vec(v, &shape).py()
            };
        }
    }
    Err(PyTypeError::new_err(format!(
        "tensor: unsupported data: a numpy array of dtype {}; expected float32, float64, \
         float16, int64, int32, int16, int8, uint8 or bool",
        arr.dtype()
    )))
}

fn to_array<'py, T: Element + NpElement>(
    py: Python<'py>,
    t: &Tensor,
) -> PyResult<Bound<'py, PyAny>> {
    let v: Vec<T> = t.to_vec().py()?;
    // a flat array reshaped by numpy: any rank numpy has
    let flat = numpy::PyArray1::from_vec(py, v);
    flat.call_method1("reshape", (PyTuple::new(py, t.shape())?,))
}

/// A numpy copy of a tensor.
pub fn to_numpy<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    ferrograd::graph::check_read(t, "numpy").py()?;
    if t.ndim() > NUMPY_MAX_DIMS {
        return Err(PyValueError::new_err(format!(
            "numpy: numpy arrays have at most {NUMPY_MAX_DIMS} dimensions, the tensor has {} \
             (shape {:?})",
            t.ndim(),
            t.shape()
        )));
    }
    let t = t.clone();
    match t.dtype() {
        DType::F32 => to_array::<f32>(py, &t),
        DType::F64 => to_array::<f64>(py, &t),
        DType::I64 => to_array::<i64>(py, &t),
        DType::Bool => to_array::<bool>(py, &t),
        DType::I32 => to_array::<i32>(py, &t),
        DType::I16 => to_array::<i16>(py, &t),
        DType::I8 => to_array::<i8>(py, &t),
        DType::U8 => to_array::<u8>(py, &t),
        DType::F16 => {
            let bits: Vec<u16> = t
                .to_vec::<half::f16>()
                .py()?
                .iter()
                .map(|h| h.to_bits())
                .collect();
            numpy::PyArray1::from_vec(py, bits)
                .call_method1("view", ("float16",))?
                .call_method1("reshape", (PyTuple::new(py, t.shape())?,))
        }
        DType::BF16 => {
            let Ok(ml) = py.import("ml_dtypes") else {
                return Err(PyTypeError::new_err(
                    "numpy: numpy has no bfloat16 without the ml_dtypes package; convert \
                     first with .float() (or .astype(\"float32\"))",
                ));
            };
            let bits: Vec<u16> = t
                .to_vec::<half::bf16>()
                .py()?
                .iter()
                .map(|h| h.to_bits())
                .collect();
            numpy::PyArray1::from_vec(py, bits)
                .call_method1("view", (ml.getattr("bfloat16")?,))?
                .call_method1("reshape", (PyTuple::new(py, t.shape())?,))
        }
    }
}

/// Reads the dtype argument of `op` from a string, a numpy dtype or a numpy scalar type.
pub fn parse_dtype(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_string()
    } else if let Some(n) = obj
        .getattr("name")
        .ok()
        .and_then(|n| n.extract::<String>().ok())
        .filter(|n| DType::parse(n).is_some())
    {
        // a numpy dtype, or ferrograd's bfloat16 where numpy has none
        n
    } else {
        let np = obj.py().import("numpy")?;
        np.getattr("dtype")?
            .call1((obj,))
            .and_then(|d| d.getattr("name"))
            .and_then(|n| n.extract())
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "{op}: dtype must be a dtype or a dtype name, got {}",
                    describe(obj)
                ))
            })?
    };
    DType::parse(&name).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{op}: unsupported dtype {name:?}; expected float32, float64, float16, bfloat16, \
             int64, int32, int16, int8, uint8 or bool"
        ))
    })
}

static DTYPES: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();

/// ferrograd's dtype object for a dtype (`ferrograd.float32`, ...: equal to numpy's of the
/// same name, with PyTorch's attributes), one per dtype.
pub fn numpy_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyAny>> {
    let all = DTYPES.get_or_try_init(py, || -> PyResult<Vec<Py<PyAny>>> {
        let table = py.import("ferrograd._tensor")?.getattr("_DTYPES")?;
        DType::ALL
            .iter()
            .map(|t| Ok(table.get_item(t.name())?.unbind()))
            .collect()
    });
    match all {
        Ok(all) => {
            let i = DType::ALL.iter().position(|&t| t == d).unwrap_or(0);
            Ok(all[i].bind(py).clone())
        }
        // (a package without the table: numpy's dtype, ferrograd's own bfloat16)
        Err(_) if d == DType::BF16 => py.import("ferrograd._tensor")?.getattr("bfloat16"),
        Err(_) => py.import("numpy")?.getattr("dtype")?.call1((d.name(),)),
    }
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

/// The device argument of `op`: a name (`"cpu"`, `"cuda"`, `"cuda:1"`) or a device object
/// whose `str` is one (a `torch.device`); `None` is the default device.
pub fn parse_device(op: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    let Some(o) = obj.filter(|o| !o.is_none()) else {
        return Ok(default_device());
    };
    let named = o.is_instance_of::<PyString>() || o.get_type().name().is_ok_and(|n| n == "device");
    if !named {
        return Err(PyTypeError::new_err(format!(
            "{op}: device must be a device name such as \"cpu\" or \"cuda:0\", got {}",
            describe(o)
        )));
    }
    Device::parse_for(op, &o.str()?.to_string()).py()
}

// ---------------------------------------------------------------------------------------------
// Argument conversion.
//
// Every parameter of a binding that is not a tensor is taken as a Python object and converted
// by one of the helpers below, so a bad argument always raises an exception whose message
// starts with the op's name and names the argument and the offending value:
//
//     sum: keepdims must be True or False, got 1
//     softmax: axis must be an int, got None
//     conv2d: groups must be a positive int, got -1
//
// Python bools (and numpy bools) are never taken as ints, and ints are never taken as bools.
// A parameter whose default is not `None` is declared as `OptArg` (absent is distinct from an
// explicit `None`, which the helper then refuses).
// ---------------------------------------------------------------------------------------------

/// An optional argument exactly as the caller gave it: [`OptArg::MISSING`] when left out, so
/// a default applies, while an explicit `None` is kept and can be refused (an
/// `Option<&Bound<PyAny>>` parameter cannot tell the two apart). Declare the parameter with
/// `#[pyo3(signature = (name = OptArg::MISSING), text_signature = "(name=<default>)")]`.
pub struct OptArg<'py>(Option<Bound<'py, PyAny>>);

impl<'py> OptArg<'py> {
    /// The value of a parameter the caller left out.
    pub const MISSING: OptArg<'py> = OptArg(None);

    /// `convert(value)` when the argument was given (`None` included), else `default`.
    pub fn or<T>(
        &self,
        default: T,
        convert: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> PyResult<T> {
        match &self.0 {
            Some(o) => convert(o),
            None => Ok(default),
        }
    }
}

/// One of two spellings of an argument (numpy's `axis`/`keepdims`, PyTorch's
/// `dim`/`keepdim`): whichever was given; both is a `TypeError`.
pub fn either<'py>(
    op: &str,
    (a, va): (&str, OptArg<'py>),
    (b, vb): (&str, OptArg<'py>),
) -> PyResult<OptArg<'py>> {
    match (&va.0, &vb.0) {
        (Some(_), Some(_)) => Err(PyTypeError::new_err(format!(
            "{op}: got both {a} and {b}, which are two names of one argument"
        ))),
        (None, _) => Ok(vb),
        _ => Ok(va),
    }
}

/// [`either`] for an optional argument whose `None` means "not given" (`axis`/`dim`).
pub fn either_opt<'a, 'py>(
    op: &str,
    (a, va): (&str, Option<&'a Bound<'py, PyAny>>),
    (b, vb): (&str, Option<&'a Bound<'py, PyAny>>),
) -> PyResult<Option<&'a Bound<'py, PyAny>>> {
    let va = va.filter(|v| !v.is_none());
    let vb = vb.filter(|v| !v.is_none());
    match (va, vb) {
        (Some(_), Some(_)) => Err(PyTypeError::new_err(format!(
            "{op}: got both {a} and {b}, which are two names of one argument"
        ))),
        (None, v) | (v, None) => Ok(v),
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for OptArg<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(OptArg(Some(obj.to_owned())))
    }
}

/// A short description of `obj` for an error message: its repr (cut to 80 characters), after
/// its type's name unless the repr already shows the type (`None`, bools, ints, floats):
/// `1`, `None`, `str 'abc'`, `list [1, 2]`.
pub fn describe(obj: &Bound<'_, PyAny>) -> String {
    let mut r = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".to_string());
    if r.chars().count() > 80 {
        r = r.chars().take(77).collect::<String>() + "...";
    }
    let plain = obj.is_none()
        || obj.is_exact_instance_of::<PyBool>()
        || obj.is_exact_instance_of::<PyInt>()
        || obj.is_exact_instance_of::<PyFloat>();
    if plain {
        r
    } else {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        format!("{ty} {r}")
    }
}

static NUMPY_BOOL: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Whether `obj` is a Python bool or a numpy bool (`numpy.bool_`).
pub fn is_bool(obj: &Bound<'_, PyAny>) -> bool {
    if obj.is_instance_of::<PyBool>() {
        return true;
    }
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() {
        return false;
    }
    let py = obj.py();
    let ty = NUMPY_BOOL.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        Ok(py
            .import("numpy")?
            .getattr("bool_")?
            .cast_into::<PyType>()?
            .unbind())
    });
    match ty {
        Ok(t) => obj.is_instance(t.bind(py)).unwrap_or(false),
        Err(_) => false,
    }
}

/// Whether `obj` stands for an integer: a Python int (not a bool) or an object with
/// `__index__` (numpy integers, 0-d integer arrays), but not a float, a bool or a numpy bool.
pub fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    if obj.is_instance_of::<PyInt>() {
        return !obj.is_instance_of::<PyBool>();
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        // every ndarray has `__index__`; only a 0-d integer one stands for an int
        return a.ndim() == 0 && matches!(a.dtype().kind(), b'i' | b'u');
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        // a tensor has `__index__` too (PyTorch's); only a 0-d integer one stands for an int
        let t = t.get().tensor();
        return t.ndim() == 0 && !t.dtype().is_float() && t.dtype() != DType::Bool;
    }
    !obj.is_instance_of::<PyFloat>()
        && !obj.is_instance_of::<PyString>()
        && obj.hasattr("__index__").unwrap_or(false)
        && !is_bool(obj)
}

fn not_an_int(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    let hint = if is_bool(obj) {
        " (a bool is not taken as an int)"
    } else {
        ""
    };
    PyTypeError::new_err(format!(
        "{op}: {name} must be an int, got {}{hint}",
        describe(obj)
    ))
}

/// An int argument (a Python int or an object with `__index__`, such as a numpy integer;
/// never a bool or a float). `TypeError` for anything else, `OverflowError` beyond int64.
pub fn int_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if !is_int(obj) {
        return Err(not_an_int(op, name, obj));
    }
    obj.extract::<i64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            PyOverflowError::new_err(format!(
                "{op}: {name} {} is out of range for int64",
                describe(obj)
            ))
        } else {
            not_an_int(op, name, obj)
        }
    })
}

/// An axis (or any signed index): [`int_arg`] as an `isize`.
pub fn axis_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<isize> {
    let v = int_arg(op, name, obj)?;
    isize::try_from(v).map_err(|_| {
        PyOverflowError::new_err(format!("{op}: {name} {v} is out of range for an index"))
    })
}

/// A size, count or dimension: [`int_arg`] that must be at least 0 (`ValueError` if not).
pub fn usize_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    let v = int_arg(op, name, obj)?;
    usize::try_from(v).map_err(|_| {
        PyValueError::new_err(format!("{op}: {name} must be a non-negative int, got {v}"))
    })
}

/// A count that must be at least 1 (`groups`, `divisor_override`): `ValueError` if not.
pub fn positive_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    let v = int_arg(op, name, obj)?;
    match usize::try_from(v) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "{op}: {name} must be a positive int, got {v}"
        ))),
    }
}

/// A flag: `True` or `False` (or a numpy bool); an int such as 1 is refused.
pub fn bool_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if is_bool(obj) {
        return obj.is_truthy();
    }
    Err(PyTypeError::new_err(format!(
        "{op}: {name} must be True or False, got {}",
        describe(obj)
    )))
}

/// A string argument.
pub fn str_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{op}: {name} must be a str, got {}",
            describe(obj)
        ))),
    }
}

/// The items of a list or tuple (`None` for anything else: a str, a Tensor, a number).
fn sequence_items<'py>(obj: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        return Some(l.iter().collect());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Some(t.iter().collect());
    }
    None
}

/// An int or a list/tuple of ints (each checked as `name[i]`).
pub fn ints_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
    if let Some(items) = sequence_items(obj) {
        return items
            .iter()
            .enumerate()
            .map(|(i, o)| axis_arg(op, &format!("{name}[{i}]"), o))
            .collect();
    }
    if is_int(obj) {
        return Ok(vec![axis_arg(op, name, obj)?]);
    }
    Err(PyTypeError::new_err(format!(
        "{op}: {name} must be an int or a sequence of ints, got {}",
        describe(obj)
    )))
}

/// Axes given as `None` (all axes: `Ok(None)`), an int, or a list/tuple of ints.
pub fn axes_arg(
    op: &str,
    name: &str,
    obj: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<isize>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => ints_arg(op, name, o).map(Some),
    }
}

/// Ints given as separate arguments (`reshape(2, 3)`) or as one list/tuple (`reshape((2, 3))`).
pub fn shape_args(op: &str, name: &str, args: &Bound<'_, PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if sequence_items(&a).is_none() && !is_int(&a) {
            return Err(PyTypeError::new_err(format!(
                "{op}: {name} must be ints or a sequence of ints, got {}",
                describe(&a)
            )));
        }
        return ints_arg(op, name, &a);
    }
    args.iter()
        .enumerate()
        .map(|(i, o)| axis_arg(op, &format!("{name}[{i}]"), &o))
        .collect()
}

/// Checks that every entry of a shape is non-negative.
pub fn to_usize(op: &str, name: &str, v: &[isize]) -> PyResult<Vec<usize>> {
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!("{op}: {name} {v:?} has the negative dimension {d}"))
            })
        })
        .collect()
}

/// A shape given as [`shape_args`], every entry non-negative.
pub fn sizes_args(op: &str, name: &str, args: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    to_usize(op, name, &shape_args(op, name, args)?)
}

/// A non-negative int or a pair of them (`kernel_size=3`, `stride=(1, 2)`).
pub fn pair_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
    if let Some(items) = sequence_items(obj) {
        if items.len() == 2 {
            return Ok((
                usize_arg(op, &format!("{name}[0]"), &items[0])?,
                usize_arg(op, &format!("{name}[1]"), &items[1])?,
            ));
        }
    } else if is_int(obj) {
        let v = usize_arg(op, name, obj)?;
        return Ok((v, v));
    }
    Err(PyTypeError::new_err(format!(
        "{op}: {name} must be an int or a pair of ints, got {}",
        describe(obj)
    )))
}

// ---------------------------------------------------------------------------------------------
// Tensor arguments.
// ---------------------------------------------------------------------------------------------

fn int_overflow(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    PyOverflowError::new_err(format!(
        "{op}: argument '{name}': the int {} is out of range for int64",
        describe(obj)
    ))
}

/// A Python number as a 0-d tensor in `dtype` (an int stays int64 for an int64 or bool
/// `dtype`; a bool stays bool for a bool one; float32 when there is no `dtype`).
/// `Ok(None)` when `obj` is not a Python number.
pub fn scalar(
    op: &str,
    name: &str,
    obj: &Bound<'_, PyAny>,
    dtype: Option<DType>,
) -> PyResult<Option<Tensor>> {
    if obj.is_instance_of::<PyBool>() {
        let v: bool = obj.extract()?;
        return Ok(Some(match dtype {
            None | Some(DType::Bool) => Tensor::scalar(v),
            Some(d) => Tensor::scalar_of(v as i64 as f64, d),
        }));
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(Some(match (obj.extract::<i64>(), dtype) {
            (Ok(v), None | Some(DType::I64) | Some(DType::Bool)) => Tensor::scalar(v),
            (Ok(v), Some(d)) => Tensor::scalar_of(v as f64, d),
            // beyond int64: a float tensor takes it converted to its dtype, as numpy does
            (Err(_), Some(d)) if d.is_float() => {
                let v: f64 = obj.extract().map_err(|_| int_overflow(op, name, obj))?;
                Tensor::scalar_of(v, d)
            }
            (Err(_), _) => return Err(int_overflow(op, name, obj)),
        }));
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract()?;
        // a float with an int or bool tensor has the default float dtype, and the op promotes
        // the tensor to it, as PyTorch
        return Ok(Some(match dtype {
            Some(d) if d.is_float() => Tensor::scalar_of(v, d),
            _ => Tensor::scalar_of(v, ferrograd::dtype::default_float()),
        }));
    }
    Ok(None)
}

/// Whether `obj` is data `ferrograd.tensor` can read: a numpy array, a list or tuple, an
/// object with `__array__` or `__array_interface__`, or one with the buffer protocol.
pub(crate) fn is_data(obj: &Bound<'_, PyAny>) -> bool {
    obj.cast::<PyUntypedArray>().is_ok()
        || obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.hasattr("__array__").unwrap_or(false)
        || obj.hasattr("__array_interface__").unwrap_or(false)
        || (!obj.is_instance_of::<PyString>() && PyMemoryView::from(obj).is_ok())
}

/// An op argument named `name`: a Tensor, a Python number (converted to `like`'s dtype) or
/// array-like data (read by `ferrograd.tensor`). Errors start with `op` and name `name`.
pub fn arg(
    op: &str,
    name: &str,
    obj: &Bound<'_, PyAny>,
    like: Option<&Tensor>,
) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().tensor());
    }
    if let Some(t) = scalar(op, name, obj, like.map(|t| t.dtype()))? {
        return Ok(t);
    }
    if is_data(obj) {
        let ferro = obj.py().import("ferrograd")?;
        return match ferro.getattr("tensor")?.call1((obj,)) {
            Ok(t) => Ok(t.cast::<PyTensor>()?.get().tensor()),
            Err(e) => {
                let py = obj.py();
                let inner = e.value(py).to_string();
                let inner = inner.strip_prefix("tensor: ").unwrap_or(&inner);
                let msg = format!("{op}: argument '{name}': {inner}");
                Err(PyErr::from_type(e.get_type(py), msg))
            }
        };
    }
    Err(PyTypeError::new_err(format!(
        "{op}: argument '{name}' must be a Tensor, a number or array-like data, got {}",
        describe(obj)
    )))
}

/// An argument that must already be a Tensor.
pub fn tensor_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    match obj.cast::<PyTensor>() {
        Ok(t) => Ok(t.get().tensor()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{op}: argument '{name}' must be a Tensor, got {}",
            describe(obj)
        ))),
    }
}
