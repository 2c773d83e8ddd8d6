//! Module-level functions: `ferrograd.exp(x)`, `ferrograd.matmul(a, b)`, ...

use ferrograd::{memory, DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::wrap_pyfunction;

use crate::convert::{
    arg, axes_arg, axis_arg, bool_arg, describe, is_bool, is_int, pair_arg, parse_device,
    parse_dtype, positive_arg, shape_args, sizes_args, str_arg, tensor_arg, usize_arg, OptArg,
};
use crate::errors::ResultExt;
use crate::tensor::{binary, compute, reduce_impl, tensor_list, transpose_impl, PyTensor};

type Binary = fn(&Tensor, &Tensor) -> ferrograd::Result<Tensor>;

/// A binary function where either side may be a Python number.
pub(crate) fn binary_fn(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    f: Binary,
) -> PyResult<PyTensor> {
    if let Ok(t) = a.cast::<PyTensor>() {
        return binary(py, op, &t.get().tensor(), b, "b", false, f);
    }
    if let Ok(t) = b.cast::<PyTensor>() {
        return binary(py, op, &t.get().tensor(), a, "a", true, f);
    }
    let x = arg(op, "a", a, None)?;
    binary(py, op, &x, b, "b", false, f)
}

/// `matmul(a, b)`, where either side may be array-like data; `transpose_a` / `transpose_b`
/// swap the last two axes of that operand first (a view, as MegEngine's matmul).
#[pyfunction]
#[pyo3(signature = (a, b, transpose_a=false, transpose_b=false))]
fn matmul(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    transpose_a: bool,
    transpose_b: bool,
) -> PyResult<PyTensor> {
    binary_fn(py, "matmul", a, b, matmul_fn(transpose_a, transpose_b))
}

/// The matrix product with either operand's last two axes swapped first (vectors as they are).
pub(crate) fn matmul_fn(transpose_a: bool, transpose_b: bool) -> Binary {
    fn mt(t: &Tensor) -> ferrograd::Result<Tensor> {
        if t.ndim() >= 2 {
            t.transpose(-1, -2)
        } else {
            Ok(t.clone())
        }
    }
    match (transpose_a, transpose_b) {
        (false, false) => Tensor::matmul,
        (true, false) => |a, b| mt(a)?.matmul(b),
        (false, true) => |a, b| a.matmul(&mt(b)?),
        (true, true) => |a, b| mt(a)?.matmul(&mt(b)?),
    }
}

#[pyfunction]
#[pyo3(name = "where")]
fn where_(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let c = arg("where", "cond", cond, None)?;
    let like = a
        .cast::<PyTensor>()
        .ok()
        .or_else(|| b.cast::<PyTensor>().ok())
        .map(|t| t.get().tensor());
    let x = arg("where", "a", a, like.as_ref())?;
    let y = arg("where", "b", b, Some(&x))?;
    compute(py, x.numel().max(y.numel()), || {
        ferrograd::where_cond(&c, &x, &y)
    })
    .py()
    .map(PyTensor::from)
}

macro_rules! reduce_dim_fns {
    ($($name:ident),* $(,)?) => {
        $(
            #[pyfunction]
            #[pyo3(
                signature = (x, axis=None, keepdims=OptArg::MISSING, *, dim=None, keepdim=OptArg::MISSING),
                text_signature = "(x, axis=None, keepdims=False, *, dim=None, keepdim=False)"
            )]
            fn $name(
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                axis: Option<&Bound<'_, PyAny>>,
                keepdims: OptArg<'_>,
                dim: Option<&Bound<'_, PyAny>>,
                keepdim: OptArg<'_>,
            ) -> PyResult<PyTensor> {
                let op = stringify!($name);
                let t = arg(op, "x", x, None)?;
                let axis = crate::convert::either_opt(op, ("axis", axis), ("dim", dim))?;
                let keep = crate::convert::either(op, ("keepdims", keepdims), ("keepdim", keepdim))?;
                reduce_impl(py, op, &t, axis, &keep, Tensor::$name)
            }
        )*
    };
}
reduce_dim_fns!(sum, mean);

macro_rules! reduce_fns {
    ($($name:ident),* $(,)?) => {
        $(
            #[pyfunction]
            #[pyo3(
                signature = (x, axis=None, keepdims=OptArg::MISSING),
                text_signature = "(x, axis=None, keepdims=False)"
            )]
            fn $name(py: Python<'_>, x: &Bound<'_, PyAny>, axis: Option<&Bound<'_, PyAny>>, keepdims: OptArg<'_>) -> PyResult<PyTensor> {
                let t = arg(stringify!($name), "x", x, None)?;
                reduce_impl(py, stringify!($name), &t, axis, &keepdims, Tensor::$name)
            }
        )*
    };
}
reduce_fns!(max, min);

#[pyfunction]
#[pyo3(
    signature = (x, axis=OptArg::MISSING, *, dim=OptArg::MISSING),
    text_signature = "(x, axis=-1, *, dim=None)"
)]
fn softmax(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: OptArg<'_>,
    dim: OptArg<'_>,
) -> PyResult<PyTensor> {
    let t = arg("softmax", "x", x, None)?;
    let axis = crate::convert::either("softmax", ("axis", axis), ("dim", dim))?;
    let axis = axis.or(-1, |o| axis_arg("softmax", "axis", o))?;
    compute(py, t.numel(), || t.softmax(axis))
        .py()
        .map(PyTensor::from)
}

#[pyfunction]
#[pyo3(
    signature = (x, axis=OptArg::MISSING, *, dim=OptArg::MISSING),
    text_signature = "(x, axis=-1, *, dim=None)"
)]
fn log_softmax(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: OptArg<'_>,
    dim: OptArg<'_>,
) -> PyResult<PyTensor> {
    let t = arg("log_softmax", "x", x, None)?;
    let axis = crate::convert::either("log_softmax", ("axis", axis), ("dim", dim))?;
    let axis = axis.or(-1, |o| axis_arg("log_softmax", "axis", o))?;
    compute(py, t.numel(), || t.log_softmax(axis))
        .py()
        .map(PyTensor::from)
}

/// Mean cross-entropy of `logits` (classes on axis 1) against int64 `labels`.
#[pyfunction]
fn cross_entropy(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let l = tensor_arg("cross_entropy", "logits", logits)?;
    let y = arg("cross_entropy", "labels", labels, None)?;
    compute(py, l.numel(), || ferrograd::cross_entropy(&l, &y))
        .py()
        .map(PyTensor::from)
}

#[pyfunction]
#[pyo3(signature = (x, *shape))]
fn reshape(x: &Bound<'_, PyAny>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
    let t = arg("reshape", "x", x, None)?;
    let s = shape_args("reshape", "shape", shape)?;
    PyTensor::view_of(x, t.reshape_infer(&s).py()?)
}

#[pyfunction]
#[pyo3(signature = (x, *axes))]
fn transpose(x: &Bound<'_, PyAny>, axes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
    let t = arg("transpose", "x", x, None)?;
    let a = if axes.is_empty() {
        Vec::new()
    } else {
        shape_args("transpose", "axes", axes)?
    };
    transpose_impl(x, &t, &a)
}

#[pyfunction]
#[pyo3(signature = (x, *axes))]
fn permute(x: &Bound<'_, PyAny>, axes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
    let t = arg("permute", "x", x, None)?;
    let a = shape_args("permute", "axes", axes)?;
    PyTensor::view_of(x, t.permute(&a).py()?)
}

#[pyfunction]
#[pyo3(signature = (x, *shape))]
fn broadcast_to(x: &Bound<'_, PyAny>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
    let t = arg("broadcast_to", "x", x, None)?;
    let s = sizes_args("broadcast_to", "shape", shape)?;
    PyTensor::view_of(x, t.broadcast_to(&s).py()?)
}

#[pyfunction]
fn expand_dims(x: &Bound<'_, PyAny>, axis: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let axis = axis_arg("expand_dims", "axis", axis)?;
    let out = arg("expand_dims", "x", x, None)?.expand_dims(axis).py()?;
    PyTensor::view_of(x, out)
}

#[pyfunction]
#[pyo3(signature = (x, axis=None))]
fn squeeze(x: &Bound<'_, PyAny>, axis: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let t = arg("squeeze", "x", x, None)?;
    let axes = axes_arg("squeeze", "axis", axis)?;
    PyTensor::view_of(x, t.squeeze(axes.as_deref()).py()?)
}

#[pyfunction]
#[pyo3(
    signature = (tensors, axis=OptArg::MISSING, *, dim=OptArg::MISSING),
    text_signature = "(tensors, axis=0, *, dim=None)"
)]
fn concat(
    py: Python<'_>,
    tensors: &Bound<'_, PyAny>,
    axis: OptArg<'_>,
    dim: OptArg<'_>,
) -> PyResult<PyTensor> {
    let axis = crate::convert::either("concat", ("axis", axis), ("dim", dim))?;
    let axis = axis.or(0, |o| axis_arg("concat", "axis", o))?;
    let ts = tensor_list("concat", "tensors", tensors)?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    let work = ts.iter().map(|t| t.numel()).sum();
    compute(py, work, || ferrograd::concat(&refs, axis))
        .py()
        .map(PyTensor::from)
}

#[pyfunction]
#[pyo3(
    signature = (tensors, axis=OptArg::MISSING, *, dim=OptArg::MISSING),
    text_signature = "(tensors, axis=0, *, dim=None)"
)]
fn stack(
    py: Python<'_>,
    tensors: &Bound<'_, PyAny>,
    axis: OptArg<'_>,
    dim: OptArg<'_>,
) -> PyResult<PyTensor> {
    let axis = crate::convert::either("stack", ("axis", axis), ("dim", dim))?;
    let axis = axis.or(0, |o| axis_arg("stack", "axis", o))?;
    let ts = tensor_list("stack", "tensors", tensors)?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    let work = ts.iter().map(|t| t.numel()).sum();
    compute(py, work, || ferrograd::stack(&refs, axis))
        .py()
        .map(PyTensor::from)
}

/// `numpy.take_along_axis`: `out[p] = x[p with axis replaced by indices[p]]` (int64 indices
/// with `x`'s number of axes; negative ones count from the end).
#[pyfunction]
fn take_along_axis(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let axis = axis_arg("take_along_axis", "axis", axis)?;
    let t = arg("take_along_axis", "x", x, None)?;
    let i = arg("take_along_axis", "indices", indices, None)?;
    compute(py, i.numel(), || t.take_along_axis(&i, axis))
        .py()
        .map(PyTensor::from)
}

/// The entries `index` (1-D int64) of `x` along `axis`, as `torch.index_select(x, dim, index)`;
/// negative entries count from the end unless `negative=False` (then they are an
/// `IndexError`); errors name `op`.
#[pyfunction]
#[pyo3(signature = (x, axis, index, *, negative = true, op = "index_select"))]
fn index_select(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
    index: &Bound<'_, PyAny>,
    negative: bool,
    op: &str,
) -> PyResult<PyTensor> {
    let axis = axis_arg(op, "axis", axis)?;
    let t = arg(op, "x", x, None)?;
    let i = arg(op, "index", index, None)?;
    compute(py, i.numel(), || t.select_indices(op, axis, &i, negative))
        .py()
        .map(PyTensor::from)
}

/// Zeros of `shape` with `src` added at `index` along `axis` (the transpose of
/// `take_along_axis`); differentiable in `src`.
#[pyfunction]
fn _scatter_add(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    index: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
    shape: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let axis = axis_arg("scatter_add", "axis", axis)?;
    let s = sizes_args("scatter_add", "shape", &PyTuple::new(shape.py(), [shape])?)?;
    let t = arg("scatter_add", "src", src, None)?;
    let i = arg("scatter_add", "index", index, None)?;
    compute(py, i.numel(), || t.scatter_add_to(&i, axis, &s))
        .py()
        .map(PyTensor::from)
}

/// The int64 positions that sort `x` along `axis` (stable; NaN above every number, so last
/// ascending and first descending): an op, so it is traced and runs on any device.
#[pyfunction]
fn _argsort(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
    descending: bool,
) -> PyResult<PyTensor> {
    let axis = axis_arg("argsort", "axis", axis)?;
    let t = arg("argsort", "x", x, None)?;
    compute(py, t.numel() * 8, || t.argsort(axis, descending))
        .py()
        .map(PyTensor::from)
}

/// What a factory fills with: a float (cast to the dtype) or an int kept exact for int64.
#[derive(Clone, Copy)]
pub(crate) enum Fill {
    Float(f64),
    Int(i64),
}

/// Refuses a fill value `d` cannot hold, as PyTorch's `full` and `fill_` do (its words): an
/// integer outside the dtype's range (an unsigned dtype also takes `-max..=-1`, which wraps),
/// a float below the lowest or above the largest integer, a finite float beyond the range of
/// float32, float16 or bfloat16 (PyTorch rounds those to infinity only in a one-element
/// tensor); bool takes any value, as there.
pub(crate) fn check_fill_range(op: &str, name: &str, v: Fill, d: DType) -> PyResult<()> {
    let (lo, hi): (f64, f64) = match d {
        DType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DType::I16 => (i16::MIN as f64, i16::MAX as f64),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::U8 => (0.0, u8::MAX as f64),
        DType::F32 => (-(f32::MAX as f64), f32::MAX as f64),
        DType::F16 => (-65504.0, 65504.0),
        DType::BF16 => (-3.3895313892515355e38, 3.3895313892515355e38),
        _ => return Ok(()),
    };
    let bad = match v {
        Fill::Int(i) if d == DType::U8 => !(-255..=255).contains(&i),
        Fill::Int(i) => (i as f64) < lo || (i as f64) > hi,
        Fill::Float(f) if d.is_float() => f.is_finite() && (f < lo || f > hi),
        // a float into an integer dtype truncates toward zero: 127.9 fills an int8 with 127
        Fill::Float(f) => f < lo || f >= hi + 1.0,
    };
    if bad {
        let shown = match v {
            Fill::Int(i) => i.to_string(),
            Fill::Float(f) if f.abs() >= 1e16 => format!("{f:e}"),
            Fill::Float(f) => f.to_string(),
        };
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{op}: {name} {shown} cannot be converted to type {d} without overflow"
        )));
    }
    Ok(())
}

/// The fill value argument `name` of `op` for a tensor of dtype `d`.
pub(crate) fn fill_value(op: &str, name: &str, obj: &Bound<'_, PyAny>, d: DType) -> PyResult<Fill> {
    let v = fill_value_unchecked(op, name, obj, d)?;
    if !is_bool(obj) {
        check_fill_range(op, name, v, d)?;
    }
    Ok(v)
}

fn fill_value_unchecked(op: &str, name: &str, obj: &Bound<'_, PyAny>, d: DType) -> PyResult<Fill> {
    if is_bool(obj) {
        return Ok(Fill::Float(if obj.is_truthy()? { 1.0 } else { 0.0 }));
    }
    if is_int(obj) {
        return match d {
            DType::I64 => crate::convert::int_arg(op, name, obj).map(Fill::Int),
            // in range (checked by the caller); -1 wraps into an unsigned dtype, as PyTorch's
            DType::I32 | DType::I16 | DType::I8 | DType::U8 => {
                crate::convert::int_arg(op, name, obj).map(Fill::Int)
            }
            DType::Bool => Ok(Fill::Float(if obj.is_truthy()? { 1.0 } else { 0.0 })),
            // beyond int64 too, converted to the float dtype (as numpy does)
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
                obj.extract::<f64>().map(Fill::Float).map_err(|_| {
                    pyo3::exceptions::PyOverflowError::new_err(format!(
                        "{op}: {name} {} is out of range for {d}",
                        describe(obj)
                    ))
                })
            }
        };
    }
    if !obj.is_instance_of::<pyo3::types::PyString>() && obj.hasattr("__float__")? {
        if let Ok(v) = obj.extract::<f64>() {
            if !d.is_float() && !v.is_finite() {
                // numpy: "cannot convert float NaN to integer"
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "{op}: cannot fill a {d} tensor with {name} {v}"
                )));
            }
            return Ok(Fill::Float(v));
        }
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "{op}: {name} must be a number, got {}",
        describe(obj)
    )))
}

fn filled(
    op: &str,
    shape: &Bound<'_, PyTuple>,
    value: Fill,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let s = if shape.is_empty() {
        Vec::new()
    } else {
        sizes_args(op, "shape", shape)?
    };
    let d = dtype_or_f32(op, dtype)?;
    let dev = parse_device(op, device)?;
    filled_with(shape.py(), &s, value, d, dev)
}

fn dtype_or_f32(op: &str, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<DType> {
    match dtype {
        Some(d) if !d.is_none() => parse_dtype(op, d),
        _ => Ok(DType::F32),
    }
}

fn filled_with(
    py: Python<'_>,
    s: &[usize],
    value: Fill,
    d: DType,
    dev: ferrograd::Device,
) -> PyResult<PyTensor> {
    compute(py, 0, || match value {
        Fill::Float(v) => Tensor::full_on(s, v, d, dev),
        // exact: an int64 beyond 2**53 does not survive a trip through a float64
        Fill::Int(v) => Tensor::scalar(v)
            .astype(d)?
            .to_device(dev)?
            .broadcast_to(s)?
            .copy(),
    })
    .py()
    .map(PyTensor::from)
}

#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None))]
fn zeros(
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    filled("zeros", shape, Fill::Float(0.0), dtype, device)
}

#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None))]
fn ones(
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    filled("ones", shape, Fill::Float(1.0), dtype, device)
}

#[pyfunction]
#[pyo3(signature = (shape, value, dtype=None, device=None))]
fn full(
    shape: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let s = sizes_args("full", "shape", &PyTuple::new(shape.py(), [shape])?)?;
    let d = dtype_or_f32("full", dtype)?;
    let v = fill_value("full", "value", value, d)?;
    let dev = parse_device("full", device)?;
    filled_with(shape.py(), &s, v, d, dev)
}

#[pyfunction]
fn zeros_like(x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    tensor_arg("zeros_like", "x", x)?
        .zeros_like()
        .py()
        .map(PyTensor::from)
}

#[pyfunction]
fn ones_like(x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    tensor_arg("ones_like", "x", x)?
        .ones_like()
        .py()
        .map(PyTensor::from)
}

/// Live bytes, peak bytes, live buffers and live tensors on `device`, counted by the engine.
#[pyfunction]
#[pyo3(signature = (device=None))]
fn memory_stats<'py>(
    py: Python<'py>,
    device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = memory::stats(parse_device("memory_stats", device)?);
    let d = PyDict::new(py);
    d.set_item("live_bytes", s.live_bytes)?;
    d.set_item("peak_bytes", s.peak_bytes)?;
    d.set_item("live_buffers", s.live_buffers)?;
    d.set_item("live_tensors", s.live_tensors)?;
    Ok(d)
}

/// Returns cached, unused buffers of `device` to the system.
#[pyfunction]
#[pyo3(signature = (device=None))]
fn empty_cache(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match parse_device("empty_cache", device)? {
        ferrograd::Device::Cpu => {
            memory::empty_cpu_cache();
            Ok(())
        }
        ferrograd::Device::Cuda(i) => _cuda_empty_cache(py, i),
    }
}

/// Makes `device` the one that `tensor`, `zeros`, `ones`, `full` and the memory queries use
/// when given none (like `torch.set_default_device`). A CUDA device must be usable.
#[pyfunction]
fn set_default_device(device: &Bound<'_, PyAny>) -> PyResult<()> {
    let d = parse_device("set_default_device", Some(device))?;
    d.check_available("set_default_device").py()?;
    crate::convert::set_default_device(d);
    Ok(())
}

/// The device used when none is given ("cpu" unless `set_default_device` changed it).
#[pyfunction]
fn get_default_device() -> String {
    crate::convert::default_device().to_string()
}

/// Sets the peak figure of `device` to its current live bytes.
#[pyfunction]
#[pyo3(signature = (device=None))]
fn reset_peak_memory_stats(device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    memory::reset_peak(parse_device("reset_peak_memory_stats", device)?);
    Ok(())
}

/// An int or a pair of ints (`default` when absent or None).
fn pair(
    op: &str,
    name: &str,
    v: Option<&Bound<'_, PyAny>>,
    default: usize,
) -> PyResult<(usize, usize)> {
    match v.filter(|v| !v.is_none()) {
        None => Ok((default, default)),
        Some(v) => pair_arg(op, name, v),
    }
}

/// 2-D convolution of `x` `[n, c, h, w]` with `weight` `[o, c/groups, kh, kw]` (PyTorch's
/// cross-correlation), plus `bias` `[o]`.
#[pyfunction]
#[pyo3(
    signature = (
        x, weight, bias=None, stride=None, padding=None, dilation=None, groups=OptArg::MISSING
    ),
    text_signature = "(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)"
)]
#[allow(clippy::too_many_arguments)]
fn conv2d(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: OptArg<'_>,
) -> PyResult<PyTensor> {
    let x = tensor_arg("conv2d", "x", x)?;
    let w = tensor_arg("conv2d", "weight", weight)?;
    let b = match bias {
        Some(b) if !b.is_none() => Some(tensor_arg("conv2d", "bias", b)?),
        _ => None,
    };
    let groups = groups.or(1, |o| positive_arg("conv2d", "groups", o))?;
    let (s, d) = (
        pair("conv2d", "stride", stride, 1)?,
        pair("conv2d", "dilation", dilation, 1)?,
    );
    // padding: a pair, or PyTorch's "valid" (none) and "same" (output size = input size)
    let mode = match padding {
        Some(p) if p.is_instance_of::<pyo3::types::PyString>() => {
            Some(str_arg("conv2d", "padding", p)?)
        }
        _ => None,
    };
    let same = match mode.as_deref() {
        None => false,
        Some("valid") => false,
        Some("same") if s == (1, 1) => true,
        Some("same") => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "conv2d: padding='same' is not supported for strided convolutions (stride {s:?})"
            )))
        }
        Some(other) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "conv2d: padding must be an int, a pair, 'valid' or 'same', got {other:?}"
            )))
        }
    };
    let p = match mode {
        Some(_) => (0, 0),
        None => pair("conv2d", "padding", padding, 0)?,
    };
    compute(py, x.numel().saturating_mul(w.numel()), || {
        if same {
            ferrograd::conv2d_same(&x, &w, b.as_ref(), d, groups)
        } else {
            ferrograd::conv2d(&x, &w, b.as_ref(), s, p, d, groups)
        }
    })
    .py()
    .map(PyTensor::from)
}

type PoolArgs = ((usize, usize), Option<(usize, usize)>, (usize, usize));

fn pool_args(
    op: &str,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<PoolArgs> {
    let k = pair_arg(op, "kernel_size", kernel_size)?;
    let s = match stride {
        Some(s) if !s.is_none() => Some(pair(op, "stride", Some(s), 1)?),
        _ => None,
    };
    Ok((k, s, pair(op, "padding", padding, 0)?))
}

fn pool2d(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    f: impl FnOnce(PoolArgs, &Tensor) -> ferrograd::Result<Tensor> + Send,
) -> PyResult<PyTensor> {
    let x = tensor_arg(op, "x", x)?;
    let args = pool_args(op, kernel_size, stride, padding)?;
    compute(py, x.numel(), || f(args, &x))
        .py()
        .map(PyTensor::from)
}

/// 2-D max pooling of `[n, c, h, w]`; `stride` defaults to `kernel_size` (PyTorch's
/// `max_pool2d`: padding never wins, the first maximum of a window takes the gradient).
#[pyfunction]
#[pyo3(
    signature = (
        x, kernel_size, stride=None, padding=None, dilation=None, ceil_mode=OptArg::MISSING
    ),
    text_signature = "(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False)"
)]
#[allow(clippy::too_many_arguments)]
fn max_pool2d(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    ceil_mode: OptArg<'_>,
) -> PyResult<PyTensor> {
    let d = pair("max_pool2d", "dilation", dilation, 1)?;
    let ceil_mode = ceil_mode.or(false, |o| bool_arg("max_pool2d", "ceil_mode", o))?;
    pool2d(
        py,
        "max_pool2d",
        x,
        kernel_size,
        stride,
        padding,
        |(k, s, p), x| ferrograd::max_pool2d(x, k, s, p, d, ceil_mode),
    )
}

/// 2-D average pooling of `[n, c, h, w]`; `stride` defaults to `kernel_size` (PyTorch's
/// `avg_pool2d`: padding counts in the divisor unless `count_include_pad` is false;
/// `divisor_override` replaces the divisor).
#[pyfunction]
#[pyo3(
    signature = (
        x, kernel_size, stride=None, padding=None, ceil_mode=OptArg::MISSING,
        count_include_pad=OptArg::MISSING, divisor_override=None
    ),
    text_signature = "(x, kernel_size, stride=None, padding=0, ceil_mode=False, \
                      count_include_pad=True, divisor_override=None)"
)]
#[allow(clippy::too_many_arguments)]
fn avg_pool2d(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    ceil_mode: OptArg<'_>,
    count_include_pad: OptArg<'_>,
    divisor_override: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    const OP: &str = "avg_pool2d";
    let ceil_mode = ceil_mode.or(false, |o| bool_arg(OP, "ceil_mode", o))?;
    let count_include_pad = count_include_pad.or(true, |o| bool_arg(OP, "count_include_pad", o))?;
    let divisor_override = divisor_override
        .filter(|o| !o.is_none())
        .map(|o| positive_arg(OP, "divisor_override", o))
        .transpose()?;
    let divisor = match (divisor_override, count_include_pad) {
        (Some(d), _) => ferrograd::AvgDivisor::Fixed(d),
        (None, true) => ferrograd::AvgDivisor::IncludePad,
        (None, false) => ferrograd::AvgDivisor::ExcludePad,
    };
    pool2d(
        py,
        "avg_pool2d",
        x,
        kernel_size,
        stride,
        padding,
        |(k, s, p), x| ferrograd::avg_pool2d(x, k, s, p, ceil_mode, divisor),
    )
}

/// Whether a CUDA device can be used.
#[pyfunction]
fn _cuda_is_available() -> bool {
    #[cfg(feature = "cuda")]
    return ferrograd::cuda::is_available();
    #[cfg(not(feature = "cuda"))]
    false
}

/// How many CUDA devices there are.
#[pyfunction]
fn _cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    return ferrograd::cuda::device_count();
    #[cfg(not(feature = "cuda"))]
    0
}

#[cfg_attr(feature = "cuda", allow(dead_code))]
fn no_cuda(op: &str) -> PyErr {
    crate::errors::to_pyerr(ferrograd::Error::Device {
        op: op.to_string(),
        msg: "CUDA is not available: this build has no CUDA backend".to_string(),
    })
}

/// A tensor over a numpy array's own memory (zero-copy: writes on either side are seen by
/// the other; the tensor keeps the array alive; a read-only array gives a tensor that refuses
/// writes), or None when the array cannot be shared (misaligned, byte-swapped, empty, bool
/// bytes other than 0 and 1, or a dtype ferrograd does not store), for the caller to copy
/// instead. bool and ml_dtypes' bfloat16 arrays are shared like the others.
#[pyfunction]
fn _share_numpy(array: &Bound<'_, PyAny>) -> PyResult<Option<PyTensor>> {
    use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
    let Ok(arr) = array.cast::<PyUntypedArray>() else {
        return Ok(None);
    };
    let dtype = arr.dtype();
    if dtype.is_native_byteorder() == Some(false) {
        return Ok(None);
    }
    let item = dtype.itemsize();
    let shape: Vec<usize> = arr.shape().to_vec();
    let raw = arr.as_array_ptr();
    // SAFETY: `arr` is a live ndarray (the GIL is held); these are its header fields
    let (data, flags) = unsafe { ((*raw).fields.data as *mut u8, (*raw).fields.flags) };
    let flag = |f: std::os::raw::c_int| flags & f != 0;
    let read_only = !flag(numpy::npyffi::flags::NPY_ARRAY_WRITEABLE);
    if !flag(numpy::npyffi::flags::NPY_ARRAY_ALIGNED)
        || shape.contains(&0)
        || data.is_null()
        || (data as usize) % item != 0
    {
        return Ok(None);
    }
    let mut strides = Vec::with_capacity(shape.len());
    let mut low = 0isize; // the lowest byte the view touches, from `data`
    let mut high = 0isize;
    for (&n, &s) in shape.iter().zip(arr.strides()) {
        if s % item as isize != 0 {
            return Ok(None);
        }
        strides.push(s / item as isize);
        let ext = (n as isize - 1) * s;
        if ext < 0 {
            low += ext;
        } else {
            high += ext;
        }
    }
    let offset = (-low) as usize / item;
    let len = (high - low) as usize / item + 1;
    // SAFETY: `low` is the view's lowest byte, inside the array's memory
    let base = unsafe { data.offset(low) };
    let owner = ferrograd::storage::Owner(Box::new(array.clone().unbind()));
    macro_rules! share {
        ($t:ty) => {
            // SAFETY: numpy guarantees `len` aligned elements of this dtype from `base`
            // (checked above), alive while the array is, which `owner` keeps
            unsafe {
                Tensor::from_borrowed(
                    base as *mut $t,
                    len,
                    &shape,
                    &strides,
                    offset,
                    owner,
                    read_only,
                )
            }
        };
    }
    let t = match (dtype.kind(), item) {
        (b'f', 4) => share!(f32),
        (b'f', 8) => share!(f64),
        (b'f', 2) => share!(half::f16),
        (b'i', 8) => share!(i64),
        (b'i', 4) => share!(i32),
        (b'i', 2) => share!(i16),
        (b'i', 1) => share!(i8),
        (b'u', 1) => share!(u8),
        (b'b', 1) => {
            // numpy and DLPack producers (PyTorch, JAX) store a bool as one byte, 0 or 1:
            // Rust's bool; a byte other than 0 or 1 is refused (read as a copy instead)
            // SAFETY: `len` bytes from `base`, alive while the array is (checked above)
            let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, len) };
            if bytes.iter().any(|&b| b > 1) {
                return Ok(None);
            }
            share!(bool)
        }
        // ml_dtypes' bfloat16 (a void kind to numpy), as JAX and numpy code hold it
        (b'V', 2) if dtype.getattr("name")?.extract::<String>()? == "bfloat16" => {
            share!(half::bf16)
        }
        _ => return Ok(None),
    };
    t.py().map(|t| Some(PyTensor::from(t)))
}

/// Where a CPU tensor's elements lie in memory, so a library that works on raw memory (numpy,
/// MPI through mpi4py) reads or writes them in place, without a copy:
/// `(address, nbytes, offset, strides)`: the span of memory the view touches, the byte offset
/// of its first element in that span and its strides in bytes (numpy's meaning). The caller
/// keeps the tensor alive while the memory is in use; `writable=True` counts as a write (the
/// tensor's version moves on, so a backward that saved it notices the change).
#[pyfunction]
#[pyo3(signature = (tensor, writable=false))]
fn _host_memory(
    tensor: &Bound<'_, PyAny>,
    writable: bool,
) -> PyResult<(usize, usize, usize, Vec<isize>)> {
    let t = tensor_arg("_host_memory", "tensor", tensor)?;
    ferrograd::graph::check_read(&t, "_host_memory").py()?;
    let not_cpu = || {
        pyo3::exceptions::PyValueError::new_err(format!(
            "_host_memory: expected a CPU tensor, got one of shape {:?} on {}",
            t.shape(),
            t.device()
        ))
    };
    if t.device() != ferrograd::Device::Cpu {
        return Err(not_cpu());
    }
    let storage = t.storage();
    let base = |d: &ferrograd::storage::StorageData| match d {
        ferrograd::storage::StorageData::Cpu(c) => {
            Some(ferrograd::with_cpu_vec!(c, |v| v.as_ptr() as usize))
        }
        #[allow(unreachable_patterns)]
        _ => None,
    };
    let addr = if writable {
        base(&*storage.write("_host_memory").py()?)
    } else {
        base(&storage.read())
    };
    let addr = addr.ok_or_else(not_cpu)?;
    let item = t.dtype().size_in_bytes();
    let layout = t.layout();
    let (lo, hi) = layout.storage_span();
    let strides = layout
        .strides()
        .iter()
        .map(|&s| s * item as isize)
        .collect();
    Ok((
        addr + lo * item,
        (hi - lo) * item,
        (layout.offset() - lo) * item,
        strides,
    ))
}

/// `(x - mean) / sqrt(var + eps)` over the last axis in one fused op (layer norm's core; the
/// affine part is ordinary ops). CPU and CUDA, float32 and float64.
#[pyfunction]
fn _normalize(py: Python<'_>, x: &Bound<'_, PyAny>, eps: f64) -> PyResult<PyTensor> {
    let t = tensor_arg("layer_norm", "input", x)?;
    compute(py, t.numel(), || t.normalize(eps))
        .py()
        .map(PyTensor::from)
}

/// Layer norm with its affine part over the last axis in one fused op (weight and bias of
/// the last axis's length). CPU and CUDA, float32 and float64.
#[pyfunction]
fn _layer_norm(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    eps: f64,
) -> PyResult<PyTensor> {
    let t = tensor_arg("layer_norm", "input", x)?;
    let w = tensor_arg("layer_norm", "weight", weight)?;
    let b = tensor_arg("layer_norm", "bias", bias)?;
    compute(py, t.numel(), || t.layer_norm(&w, &b, eps))
        .py()
        .map(PyTensor::from)
}

/// Scaled dot-product attention as one fused op (no mask other than `causal`, the same
/// leading axes for query, key and value). CPU and CUDA, float32 and float64.
#[pyfunction]
fn _attention(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    scale: f64,
    causal: bool,
) -> PyResult<PyTensor> {
    const OP: &str = "scaled_dot_product_attention";
    let q = tensor_arg(OP, "query", query)?;
    let k = tensor_arg(OP, "key", key)?;
    let v = tensor_arg(OP, "value", value)?;
    let work = q
        .numel()
        .saturating_mul(k.shape().iter().rev().nth(1).copied().unwrap_or(1));
    compute(py, work, || {
        q.scaled_dot_product_attention(&k, &v, Some(scale), causal)
    })
    .py()
    .map(PyTensor::from)
}

/// Random numbers of `shape` from the counter-based generator (`random` op): uniform in
/// `[0, 1)`, or standard normal; the same `counter` value and `salt` give the same numbers.
#[pyfunction]
fn _random(
    py: Python<'_>,
    counter: &Bound<'_, PyAny>,
    shape: Vec<usize>,
    dtype: &Bound<'_, PyAny>,
    salt: u64,
    normal: bool,
) -> PyResult<PyTensor> {
    let c = tensor_arg("random", "counter", counter)?;
    let dtype = parse_dtype("random", dtype)?;
    let op = ferrograd::Op::Elementwise(ferrograd::op::ElementwiseOp::Random {
        shape: shape.clone(),
        dtype,
        salt,
        normal,
    });
    let n = shape.iter().product::<usize>();
    compute(py, n, || ferrograd::apply1(&op, &[&c]))
        .py()
        .map(PyTensor::from)
}

/// Whether the fused update takes these tensors: contiguous float32/64 of one shape, dtype
/// and device, no shared memory, outside a trace; on the CPU only, unless `device_scalars`
/// (the caller passes the learning rate and step count as device tensors: a CUDA step then
/// reads nothing back to the host).
#[pyfunction]
#[pyo3(signature = (tensors, device_scalars=false))]
fn _optim_fusable(tensors: &Bound<'_, PyAny>, device_scalars: bool) -> PyResult<bool> {
    let ts = tensor_list("optimizer_step", "tensors", tensors)?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    Ok(
        (device_scalars || refs.iter().all(|t| t.device() == ferrograd::Device::Cpu))
            && ferrograd::optim::fusable(&refs),
    )
}

/// One fused optimizer step in place (`kind`: "sgd", "adam", "rmsprop", "adagrad",
/// "adadelta"): the parameter and its state tensors (in the order `ferrograd::optim`'s step
/// functions take them, `None` where a state is not kept) updated in one pass, with the
/// hyperparameters by name. With `lr` (and `aux`: the step count, or SGD's first-step flag)
/// as float64 one-element tensors on the parameter's CUDA device, the kernel reads them there
/// (`ferrograd::optim::step_with_device_scalars`) and the hyperparameters that derive from
/// them (`lr`, `bias_correction*`, `first`) may be left out.
#[pyfunction]
#[pyo3(signature = (kind, param, grad, states, hyper, lr=None, aux=None, lr_decay=0.0))]
#[allow(clippy::too_many_arguments)]
fn _optim_step(
    py: Python<'_>,
    kind: &str,
    param: &Bound<'_, PyAny>,
    grad: &Bound<'_, PyAny>,
    states: Vec<Option<Bound<'_, PyAny>>>,
    hyper: &Bound<'_, PyDict>,
    lr: Option<&Bound<'_, PyAny>>,
    aux: Option<&Bound<'_, PyAny>>,
    lr_decay: f64,
) -> PyResult<()> {
    use ferrograd::optim as o;
    const OP: &str = "optimizer_step";
    let p = tensor_arg(OP, "param", param)?;
    let g = tensor_arg(OP, "grad", grad)?;
    let lr_t = lr.map(|t| tensor_arg(OP, "lr", t)).transpose()?;
    let aux_t = aux.map(|t| tensor_arg(OP, "aux", t)).transpose()?;
    let on_device = lr_t.is_some();
    let s = states
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_ref()
                .map(|t| tensor_arg(OP, &format!("states[{i}]"), t))
                .transpose()
        })
        .collect::<PyResult<Vec<_>>>()?;
    let state = |i: usize| s.get(i).and_then(|t| t.as_ref());
    let need = |i: usize| {
        state(i).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "{OP}: {kind} needs states[{i}], got {} states",
                s.len()
            ))
        })
    };
    let f = |name: &str| -> PyResult<f64> {
        let derived = matches!(
            name,
            "lr" | "first" | "bias_correction1" | "bias_correction2_sqrt"
        );
        match hyper.get_item(name)? {
            Some(v) => v.extract(),
            // read on the device instead
            None if on_device && derived => Ok(1.0),
            None => Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "{OP}: {kind} needs `{name}`"
            ))),
        }
    };
    let scalars = lr_t.as_ref().map(|lr| o::DeviceScalars {
        lr,
        aux: aux_t.as_ref(),
        lr_decay,
    });
    let b = |name: &str| -> PyResult<bool> { Ok(f(name)? != 0.0) };
    let (h, states) = match kind {
        "sgd" => {
            let h = o::SgdStep {
                lr: f("lr")?,
                momentum: f("momentum")?,
                dampening: f("dampening")?,
                weight_decay: f("weight_decay")?,
                nesterov: b("nesterov")?,
                first: b("first")?,
            };
            (o::Hyper::Sgd(h), [state(0), None, None])
        }
        "adam" => {
            let h = o::AdamStep {
                lr: f("lr")?,
                beta1: f("beta1")?,
                beta2: f("beta2")?,
                eps: f("eps")?,
                weight_decay: f("weight_decay")?,
                decoupled: b("decoupled")?,
                bias_correction1: f("bias_correction1")?,
                bias_correction2_sqrt: f("bias_correction2_sqrt")?,
            };
            (
                o::Hyper::Adam(h),
                [Some(need(0)?), Some(need(1)?), state(2)],
            )
        }
        "rmsprop" => {
            let h = o::RmspropStep {
                lr: f("lr")?,
                alpha: f("alpha")?,
                eps: f("eps")?,
                weight_decay: f("weight_decay")?,
                momentum: f("momentum")?,
                centered: b("centered")?,
            };
            (o::Hyper::Rmsprop(h), [Some(need(0)?), state(1), state(2)])
        }
        "adagrad" => {
            let h = o::AdagradStep {
                lr: f("lr")?,
                eps: f("eps")?,
                weight_decay: f("weight_decay")?,
            };
            (o::Hyper::Adagrad(h), [Some(need(0)?), None, None])
        }
        "adadelta" => {
            let h = o::AdadeltaStep {
                lr: f("lr")?,
                rho: f("rho")?,
                eps: f("eps")?,
                weight_decay: f("weight_decay")?,
            };
            (
                o::Hyper::Adadelta(h),
                [Some(need(0)?), Some(need(1)?), None],
            )
        }
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{OP}: unknown kind {other:?} (sgd, adam, rmsprop, adagrad, adadelta)"
            )))
        }
    };
    let n = p.numel();
    compute(py, n, || o::step(&h, &p, &g, states, scalars.as_ref())).py()
}

#[pyfunction]
fn _cuda_synchronize(py: Python<'_>, ordinal: &Bound<'_, PyAny>) -> PyResult<()> {
    let ordinal = usize_arg("synchronize", "device", ordinal)?;
    #[cfg(feature = "cuda")]
    return py.detach(|| ferrograd::cuda::synchronize(ordinal)).py();
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (py, ordinal);
        Err(no_cuda("synchronize"))
    }
}

#[pyfunction]
#[pyo3(name = "_cuda_empty_cache")]
fn cuda_empty_cache_py(py: Python<'_>, ordinal: &Bound<'_, PyAny>) -> PyResult<()> {
    let ordinal = usize_arg("empty_cache", "device", ordinal)?;
    _cuda_empty_cache(py, ordinal)
}

fn _cuda_empty_cache(py: Python<'_>, ordinal: usize) -> PyResult<()> {
    #[cfg(feature = "cuda")]
    return py.detach(|| ferrograd::cuda::empty_cache(ordinal)).py();
    #[cfg(not(feature = "cuda"))]
    {
        // nothing was ever cached on a device this build cannot use
        let _ = (py, ordinal);
        Ok(())
    }
}

/// Compiles every kernel with NVRTC for `arch` (e.g. "sm_90") and returns the PTX size.
#[pyfunction]
fn _cuda_compile_kernels(py: Python<'_>, arch: &Bound<'_, PyAny>) -> PyResult<usize> {
    let arch = str_arg("compile_kernels", "arch", arch)?;
    #[cfg(feature = "cuda")]
    return py
        .detach(move || ferrograd::cuda::compile_kernels(&arch))
        .py()
        .map(|p| p.len());
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (py, arch);
        Err(no_cuda("compile_kernels"))
    }
}

/// How many threads CPU kernels use.
#[pyfunction]
fn _num_threads() -> usize {
    ferrograd::num_threads()
}

/// Makes the calling thread (the interpreter's main thread) one of the CPU worker pool's
/// threads when the pool is made on it.
#[pyfunction]
fn _join_pool_here() {
    ferrograd::join_pool_here()
}

/// Sizes the CPU worker pool (before its first use); returns its size after the call.
#[pyfunction]
fn _set_num_threads(n: usize) -> usize {
    ferrograd::set_num_threads(n)
}

/// Loads the OpenBLAS at `path` (numpy's bundled one) for large CPU matrix products where it
/// is the faster; whether it loaded, and whether products use it on this CPU.
#[pyfunction]
fn _set_blas_library(path: &Bound<'_, PyAny>) -> PyResult<(bool, bool)> {
    let path = str_arg("set_blas_library", "path", path)?;
    let loaded = ferrograd::blas::set_library(&path);
    Ok((loaded, ferrograd::blas::in_use()))
}

/// The safetensors bytes of `(name, tensor)` pairs with optional string metadata
/// (`fg.save` writes them).
#[pyfunction]
#[pyo3(signature = (items, metadata=None))]
fn _to_safetensors<'py>(
    py: Python<'py>,
    items: Vec<(String, PyRef<'py, PyTensor>)>,
    metadata: Option<std::collections::HashMap<String, String>>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let tensors: Vec<(String, Tensor)> =
        items.iter().map(|(n, t)| (n.clone(), t.tensor())).collect();
    let bytes = py
        .detach(move || ferrograd::io::to_safetensors(&tensors, metadata))
        .py()?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}

/// The `(name, tensor)` pairs (CPU tensors, in the file's order) and metadata of
/// safetensors bytes (`fg.load` reads them); a corrupt buffer raises ValueError.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn _from_safetensors(
    py: Python<'_>,
    data: &[u8],
) -> PyResult<(
    Vec<(String, PyTensor)>,
    Option<std::collections::HashMap<String, String>>,
)> {
    let owned = data.to_vec();
    let (tensors, meta) = py
        .detach(move || ferrograd::io::from_safetensors(&owned))
        .py()?;
    Ok((
        tensors
            .into_iter()
            .map(|(n, t)| (n, PyTensor::from(t)))
            .collect(),
        meta,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_cuda_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(_to_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(_from_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(_host_memory, m)?)?;
    m.add_function(wrap_pyfunction!(_share_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_attention, m)?)?;
    m.add_function(wrap_pyfunction!(_random, m)?)?;
    m.add_function(wrap_pyfunction!(_optim_fusable, m)?)?;
    m.add_function(wrap_pyfunction!(_optim_step, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_empty_cache_py, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_compile_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(_set_blas_library, m)?)?;
    m.add_function(wrap_pyfunction!(_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_join_pool_here, m)?)?;
    m.add_function(wrap_pyfunction!(conv2d, m)?)?;
    m.add_function(wrap_pyfunction!(max_pool2d, m)?)?;
    m.add_function(wrap_pyfunction!(avg_pool2d, m)?)?;
    macro_rules! add {
        ($($f:ident),* $(,)?) => { $( m.add_function(wrap_pyfunction!($f, m)?)?; )* };
    }
    add!(
        matmul,
        where_,
        sum,
        mean,
        max,
        min,
        softmax,
        log_softmax,
        cross_entropy,
        reshape,
        transpose,
        permute,
        broadcast_to,
        expand_dims,
        squeeze,
        concat,
        stack,
        take_along_axis,
        index_select,
        _scatter_add,
        _argsort,
        zeros,
        ones,
        full,
        zeros_like,
        ones_like,
        memory_stats,
        reset_peak_memory_stats,
        empty_cache,
        set_default_device,
        get_default_device
    );
    Ok(())
}
