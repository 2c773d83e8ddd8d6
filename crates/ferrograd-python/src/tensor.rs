//! The Python `Tensor` class.

use std::cell::UnsafeCell;

use std::sync::Arc;

use ferrograd::{DType, Device, SliceSpec, Tensor};
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyEllipsis, PyFloat, PyList, PySlice, PySliceMethods, PyTuple};

use crate::convert::{
    arg, axes_arg, axis_arg, bool_arg, from_numpy, is_bool, is_int, numpy_dtype, parse_device,
    parse_dtype, shape_args, sizes_args, OptArg,
};
use crate::convert::{describe, to_numpy};
use crate::errors::{device_error, dtype_error, shape_error, ResultExt};

/// Work (in elements) above which an op releases the GIL while its kernel runs.
const DETACH_WORK: usize = 1 << 15;

/// Runs `f` without the GIL when the work is large enough to repay the switch.
/// A panic inside a kernel (the only expected one: a buffer too large to allocate) becomes a
/// Python exception instead of unwinding through the interpreter.
pub fn compute<T: Send>(
    py: Python<'_>,
    work: usize,
    f: impl FnOnce() -> ferrograd::Result<T> + Send,
) -> ferrograd::Result<T> {
    let run = move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown failure".to_string());
            let err = if msg.contains("out of memory") {
                pyo3::exceptions::PyMemoryError::new_err(msg)
            } else {
                pyo3::exceptions::PyRuntimeError::new_err(format!("internal error: {msg}"))
            };
            Err(crate::errors::external(err))
        })
    };
    if work >= DETACH_WORK {
        py.detach(run)
    } else {
        run()
    }
}

/// Ops whose buffers all stay under this many elements (256 KiB at 8 bytes) get them straight
/// from the allocator, where a failure aborts instead of panicking (only large buffers are
/// reserved fallibly, see `compute`): such an op runs without the unwinding guard, which
/// costs a measurable share of a tiny op (a stray panic still becomes a Python exception, at
/// the binding's boundary).
const SMALL_OP: usize = 1 << 15;

/// [`compute`] for an op none of whose buffers exceeds `bound` elements.
fn compute_bounded<T: Send>(
    py: Python<'_>,
    bound: usize,
    work: usize,
    f: impl FnOnce() -> ferrograd::Result<T> + Send,
) -> ferrograd::Result<T> {
    if bound < SMALL_OP {
        f()
    } else {
        compute(py, work, f)
    }
}

/// An n-dimensional array that takes part in automatic differentiation.
#[pyclass(name = "Tensor", module = "ferrograd", weakref, dict, subclass, frozen)]
pub struct PyTensor {
    // In-place ops on a tensor that a GradKey tracks rebind the Python object to a handle
    // carrying the op's tape state (over the same storage), hence a cell. It is read and
    // written only with the GIL held (every `&PyTensor` here comes from a GIL-bound
    // reference), and reads clone the handle at once: no reference into the cell outlives the
    // access, so the GIL alone serialises them and no lock is needed.
    inner: UnsafeCell<Tensor>,
    // A weak reference to the Python object `.grad` last handed out or assigned (GIL-guarded
    // as `inner`): while it lives and still stands for the tensor's gradient, `.grad` gives
    // that same object, as PyTorch's (`p.grad = t; loss.backward(); p.grad is t`).
    grad_obj: UnsafeCell<Option<Py<PyAny>>>,
    // For a view made by a view op (reshape, slicing, transpose, ...): the Python tensor whose
    // memory it views, followed to the root as PyTorch's `_base` (a view of a view records
    // the first one's base). Held strongly, so the base lives as long as its views, as
    // PyTorch's. GIL-guarded as `inner`; set once, when the view is made.
    base: UnsafeCell<Option<Py<PyAny>>>,
}

// SAFETY: see `inner`: all access is serialised by the GIL; `Tensor` itself is Send + Sync.
unsafe impl Sync for PyTensor {}

impl From<Tensor> for PyTensor {
    fn from(t: Tensor) -> Self {
        PyTensor {
            inner: UnsafeCell::new(t),
            grad_obj: UnsafeCell::new(None),
            base: UnsafeCell::new(None),
        }
    }
}

/// Whether writing `v` into `x` can be a raw in-place write: nothing records it (no key tracks
/// either, or all that do are kept from recording, as under `no_grad`) and no trace follows it
/// (a trace records the write as the tensor's new value instead).
fn raw_write(x: &Tensor, v: &Tensor) -> bool {
    !x.is_recorded() && !v.is_recorded() && !ferrograd::graph::is_tracing()
}

fn binary_op(op: &str) -> Option<ferrograd::op::BinaryOp> {
    use ferrograd::op::BinaryOp;
    Some(match op {
        "iadd" => BinaryOp::Add,
        "isub" => BinaryOp::Sub,
        "imul" => BinaryOp::Mul,
        "itruediv" => BinaryOp::Div,
        _ => return None,
    })
}

/// Whether a trace is recording ops whose gradients its graph may take (no tape records
/// inside a trace, so `is_recorded` says nothing there): an in-place write must then leave
/// the value a grad rule saved as it was, computing from a copy (an ordinary traced op,
/// gradients flowing through it).
fn traced_with_grad() -> bool {
    ferrograd::graph::is_tracing() && ferrograd::autograd::grad_enabled()
}

impl PyTensor {
    fn inplace(&self, py: Python<'_>, op: &str, o: &Bound<'_, PyAny>, f: Binary) -> PyResult<()> {
        let x = self.t();
        let y = arg(op, "other", o, Some(&x))?;
        if let Some(bop) = binary_op(op) {
            // nothing records it (no key tracks either, or all that do are kept from recording,
            // as under no_grad): a raw write, and the tensor keeps its tape state
            if raw_write(&x, &y) {
                let work = x.numel();
                return compute(py, work, || x.binary_assign_(bop, &y)).py();
            }
        }
        // the destination is forked when the update is recorded (it or the operand is
        // tracked: `buf *= w`), so a rule that saves it keeps the value before the write; so
        // is an operand over the same storage (`y *= y`, `y *= y[::-1]`), which the write
        // would change as well (the same fork when it is the destination itself)
        let traced = traced_with_grad();
        let tracked = x.is_recorded() || y.is_recorded();
        let src = if tracked {
            x.fork().py()?
        } else if traced {
            x.copy().py()?
        } else {
            x.clone()
        };
        let y = if y.same(&x) {
            src.clone()
        } else if Arc::ptr_eq(y.storage(), x.storage()) {
            if traced {
                y.copy().py()?
            } else {
                y.fork().py()?
            }
        } else {
            y
        };
        let work = src.numel().max(y.numel());
        let bound = src.numel().saturating_mul(y.numel());
        let result = compute_bounded(py, bound, work, || f(&src, &y)).py()?;
        self.rebind(x.update_(op, &result).py()?);
        Ok(())
    }

    /// Writes `v` (broadcast to the selection) into the part of `x` that `specs` select.
    fn setitem_value(&self, x: &Tensor, specs: &[SliceSpec], v: &Tensor) -> PyResult<()> {
        if raw_write(x, v) {
            return x.slice(specs).py()?.assign_(v).py();
        }
        let part = {
            let _g = ferrograd::autograd::no_grad();
            x.slice(specs).py()?.layout().clone()
        };
        let x = x.written_back(v, &part);
        let result = x.set_slice(specs, v).py()?;
        self.rebind(x.update_("setitem", &result).py()?);
        Ok(())
    }

    /// The engine tensor this object currently stands for.
    pub fn tensor(&self) -> Tensor {
        // SAFETY: the GIL is held (see `inner`) and no `&mut` into the cell exists now.
        let t = unsafe { (*self.inner.get()).clone() };
        if t.is_rebased() {
            // an in-place write through another view of this memory: follow it (see
            // `Tensor::current`)
            let t = t.current();
            self.rebind(t.clone());
            return t;
        }
        t
    }
    fn t(&self) -> Tensor {
        self.tensor()
    }

    /// The base recorded for this view, if it is one (see `base`).
    fn base_obj(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        // SAFETY: the GIL is held (see `base`); the value is cloned out at once.
        unsafe { (*self.base.get()).as_ref().map(|b| b.clone_ref(py)) }
    }

    /// `out`, the result of a view op on `src`, as a Python tensor that records `src` (or
    /// the base `src` views) as its base when `out` is a view of `src`'s memory (a reshape
    /// that had to copy records nothing). A view op that changed nothing and returned `src`
    /// itself gives a new view of it instead, as PyTorch's (`x.view(x.shape)._base is x`).
    pub(crate) fn view_of(src: &Bound<'_, PyAny>, out: Tensor) -> PyResult<PyTensor> {
        let Ok(s) = src.cast::<PyTensor>() else {
            return Ok(out.into());
        };
        let from = s.get().tensor();
        let out = if from.same(&out) {
            out.alias().py()?
        } else {
            out
        };
        let is_view = Arc::ptr_eq(from.storage(), out.storage()) && !from.same(&out);
        let r = PyTensor::from(out);
        if is_view {
            let root = s
                .get()
                .base_obj(src.py())
                .unwrap_or_else(|| src.clone().unbind());
            // SAFETY: `r` is not yet shared; the GIL is held
            unsafe { *r.base.get() = Some(root) };
        }
        Ok(r)
    }
    pub(crate) fn rebind(&self, t: Tensor) {
        // SAFETY: the GIL is held (see `inner`) and no reference into the cell exists now;
        // the old handle is dropped after the cell is updated, outside the access.
        let old = unsafe { std::mem::replace(&mut *self.inner.get(), t) };
        drop(old);
    }
}

type Unary = fn(&Tensor) -> ferrograd::Result<Tensor>;
type Binary = fn(&Tensor, &Tensor) -> ferrograd::Result<Tensor>;

pub fn unary(py: Python<'_>, x: &Tensor, f: Unary) -> PyResult<PyTensor> {
    // an elementwise result has the input's size
    compute_bounded(py, x.numel(), x.numel(), || f(x))
        .py()
        .map(PyTensor::from)
}

/// `f(a, other)`, or `f(other, a)` when `reflected`; Python numbers take `a`'s dtype.
/// `name` is the argument name `other` has in errors.
pub fn binary(
    py: Python<'_>,
    op: &str,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    name: &str,
    reflected: bool,
    f: Binary,
) -> PyResult<PyTensor> {
    let b = arg(op, name, other, Some(a))?;
    let work = a.numel().max(b.numel());
    // a broadcast (or matrix) product has at most as many elements as its operands together
    let bound = a.numel().saturating_mul(b.numel());
    let (l, r) = if reflected { (&b, a) } else { (a, &b) };
    compute_bounded(py, bound, work, || f(l, r))
        .py()
        .map(PyTensor::from)
}

/// `a / other` (or `other / a`, `reflected`). An integer tensor with a Python int divides in
/// the default float dtype from the start, as PyTorch's: the int is not first converted to
/// the tensor's dtype, where it could wrap (`1000 / int8_tensor` is 1000 / x, not -24 / x).
fn true_div(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    reflected: bool,
) -> PyResult<PyTensor> {
    if !a.dtype().is_float()
        && other.is_instance_of::<pyo3::types::PyInt>()
        && !other.is_instance_of::<pyo3::types::PyBool>()
    {
        let f = ferrograd::dtype::default_float();
        let af = compute(py, a.numel(), || a.astype(f)).py()?;
        return binary(py, "div", &af, other, "other", reflected, Tensor::div);
    }
    binary(py, "div", a, other, "other", reflected, Tensor::div)
}

/// `x ** e`; `name` is the argument name `e` has in errors.
pub fn pow_impl(
    py: Python<'_>,
    x: &Tensor,
    e: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<PyTensor> {
    if e.cast::<PyTensor>().is_err() && x.dtype().is_float() {
        if let Ok(p) = e.extract::<f64>() {
            return compute(py, x.numel(), || x.pow_scalar(p))
                .py()
                .map(PyTensor::from);
        }
    }
    let integer = |d: DType| !d.is_float() && d != DType::Bool;
    if x.dtype() == DType::Bool
        && (is_int(e)
            || e.cast::<PyTensor>()
                .is_ok_and(|t| integer(t.borrow().t().dtype())))
    {
        // a bool base with an integer exponent computes in int64, as PyTorch's
        let x = compute(py, x.numel(), || x.astype(DType::I64)).py()?;
        return pow_impl(py, &x, e, name);
    }
    let py_bool = e.is_instance_of::<pyo3::types::PyBool>();
    if integer(x.dtype()) && e.cast::<PyTensor>().is_err() && (is_int(e) || py_bool) {
        // an integer tensor to a non-negative integer power stays integer (PyTorch's; a
        // Python bool is the power 0 or 1): exact products by repeated squaring, wrapping
        // around as integer arithmetic does
        let p: i64 = if py_bool {
            i64::from(e.extract::<bool>()?)
        } else {
            e.extract()?
        };
        if p < 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "pow: integers to negative integer powers are not allowed",
            ));
        }
        return compute(py, x.numel(), || int_pow(x, p as u64))
            .py()
            .map(PyTensor::from);
    }
    if integer(x.dtype()) {
        if let Ok(t) = e.cast::<PyTensor>() {
            let et = t.borrow().t().clone();
            if !et.dtype().is_float() {
                // integer ** integer tensor stays integer, as PyTorch's
                let work = x.numel().max(et.numel());
                return compute(py, work, || int_pow_tensor(x, &et))
                    .py()
                    .map(PyTensor::from);
            }
        }
    }
    binary(py, "pow", x, e, name, false, Tensor::pow)
}

/// Elementwise `x ** e` of integer tensors (broadcast, PyTorch's promotion), wrapping
/// around as integer arithmetic does; computed on the host.
fn int_pow_tensor(x: &Tensor, e: &Tensor) -> ferrograd::Result<Tensor> {
    let like = x.mul(e)?; // the result's shape and dtype
    let shape = like.shape().to_vec();
    let host = |t: &Tensor| -> ferrograd::Result<Vec<i64>> {
        t.detach()
            .astype(DType::I64)?
            .broadcast_to(&shape)?
            .copy()?
            .to_device(Device::Cpu)?
            .to_vec::<i64>()
    };
    let (xs, es) = (host(x)?, host(e)?);
    let mut out = Vec::with_capacity(xs.len());
    for (&b, &p) in xs.iter().zip(&es) {
        if p < 0 {
            return Err(ferrograd::Error::Invalid {
                op: "pow".to_string(),
                msg: format!("integers to negative integer powers are not allowed (exponent {p})"),
            });
        }
        out.push(b.wrapping_pow(p.min(u32::MAX as i64) as u32));
    }
    Tensor::from_vec(out, &shape)?
        .astype(like.dtype())?
        .to_device(like.device())
}

fn int_pow(x: &Tensor, mut p: u64) -> ferrograd::Result<Tensor> {
    let mut result = x.ones_like()?;
    let mut base = x.clone();
    while p > 0 {
        if p & 1 == 1 {
            result = result.mul(&base)?;
        }
        p >>= 1;
        if p > 0 {
            base = base.mul(&base)?;
        }
    }
    Ok(result)
}

pub fn reduce_impl(
    py: Python<'_>,
    op: &str,
    x: &Tensor,
    axis: Option<&Bound<'_, PyAny>>,
    keepdims: &OptArg<'_>,
    f: fn(&Tensor, Option<&[isize]>, bool) -> ferrograd::Result<Tensor>,
) -> PyResult<PyTensor> {
    let axes = axes_arg(op, "axis", axis)?;
    let keepdims = keepdims.or(false, |o| bool_arg(op, "keepdims", o))?;
    compute(py, x.numel(), || f(x, axes.as_deref(), keepdims))
        .py()
        .map(PyTensor::from)
}

/// Runs a binary operator's body, or gives `NotImplemented` when `other` is nothing a tensor
/// operator can take (not a tensor, a Python number or array-like data), so that `other`'s
/// reflected operator gets its turn (`t + obj` calls `obj.__radd__(t)`), as Python's
/// protocol and PyTorch's tensors have it.
fn operator(
    py: Python<'_>,
    other: &Bound<'_, PyAny>,
    body: impl FnOnce() -> PyResult<PyTensor>,
) -> PyResult<Py<PyAny>> {
    let known = other.cast::<PyTensor>().is_ok()
        || other.is_instance_of::<pyo3::types::PyInt>()
        || other.is_instance_of::<PyFloat>()
        || other.is_instance_of::<pyo3::types::PyComplex>()
        || crate::convert::is_data(other);
    if !known {
        return Ok(py.NotImplemented());
    }
    Ok(Py::new(py, body()?)?.into_any())
}

/// The `-` operator refuses a bool operand beside a number or a tensor of another dtype (a
/// Python bool included), as PyTorch's, with the words of the module function `sub`; two
/// bool tensors reach the engine, which refuses them as its own op.
fn no_bool_sub(x: &Tensor, other: &Bound<'_, PyAny>) -> PyResult<()> {
    let other_bool = match other.cast::<PyTensor>() {
        Ok(t) => t.get().tensor().dtype() == DType::Bool,
        Err(_) => other.is_instance_of::<pyo3::types::PyBool>(),
    };
    if (x.dtype() == DType::Bool) == other_bool {
        return Ok(());
    }
    Err(pyo3::exceptions::PyNotImplementedError::new_err(
        "sub: subtraction with a bool tensor is not supported; to invert a mask use ~ or \
         logical_not(), for the difference of two masks ^ or logical_xor()",
    ))
}

/// `transpose()` reverses the axes; `transpose(a, b)` swaps two; `transpose(*perm)` permutes.
pub fn transpose_impl(src: &Bound<'_, PyAny>, x: &Tensor, axes: &[isize]) -> PyResult<PyTensor> {
    let r = match axes.len() {
        0 => x.t(),
        // two axes swap, as PyTorch's transpose(dim0, dim1) (also on a matrix, where numpy's
        // permutation (0, 1) would be the identity: a ported `w.transpose(0, 1)` transposes)
        2 => x.transpose(axes[0], axes[1]),
        _ => x.permute(axes),
    };
    PyTensor::view_of(src, r.py()?)
}

/// A parsed indexing expression: basic specs, where `None` adds axes (in output
/// coordinates), at most one integer-array index (output axis, indices), and the axis that
/// boolean scalars add (output position, whether every one was `True`).
struct IndexExpr {
    specs: Vec<SliceSpec>,
    newaxes: Vec<usize>,
    advanced: Option<(usize, Tensor)>,
    bool_axis: Option<(usize, bool)>,
}

impl IndexExpr {
    /// The shape of the indexed result from the shape `basic` the specs select, and which of
    /// its axes were added (by `None` or a boolean).
    fn full_shape(&self, basic: &[usize]) -> (Vec<usize>, Vec<bool>) {
        let mut shape = basic.to_vec();
        let mut added = vec![false; shape.len()];
        for &a in &self.newaxes {
            shape.insert(a, 1);
            added.insert(a, true);
        }
        if let Some((p, all_true)) = self.bool_axis {
            shape.insert(p, usize::from(all_true));
            added.insert(p, true);
        }
        (shape, added)
    }
}

fn getitem(x: &Tensor, key: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let e = parse_index(x, key)?;
    let mut out = x.slice(&e.specs).py()?;
    for &a in &e.newaxes {
        out = out.expand_dims(a as isize).py()?;
    }
    if let Some((p, all_true)) = e.bool_axis {
        out = out.expand_dims(p as isize).py()?;
        if !all_true {
            // a False index selects nothing along the axis it adds
            let specs: Vec<SliceSpec> = out
                .shape()
                .iter()
                .enumerate()
                .map(|(i, &n)| SliceSpec::Range {
                    start: 0,
                    stop: if i == p { 0 } else { n as isize },
                    step: 1,
                })
                .collect();
            out = out.slice(&specs).py()?;
        }
    }
    if let Some((axis, idx)) = e.advanced {
        out = out
            .select_indices("getitem", axis as isize, &idx, true)
            .py()?;
    }
    Ok(out)
}

/// One entry of an indexing expression.
enum IndexItem<'py> {
    NewAxis,
    Ellipsis,
    Slice(Bound<'py, PySlice>),
    Int(isize),
    Bool(bool),
    Array(Tensor),
}

fn parse_index(x: &Tensor, key: &Bound<'_, PyAny>) -> PyResult<IndexExpr> {
    let objs: Vec<Bound<'_, PyAny>> = if let Ok(t) = key.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        vec![key.clone()]
    };
    let mut items = Vec::with_capacity(objs.len());
    for o in &objs {
        items.push(if o.is_none() {
            IndexItem::NewAxis
        } else if o.is_instance_of::<PyEllipsis>() {
            IndexItem::Ellipsis
        } else if let Ok(s) = o.cast::<PySlice>() {
            IndexItem::Slice(s.clone())
        } else if is_bool(o) {
            // numpy: a boolean scalar adds an axis of length 1 (True) or 0 (False)
            IndexItem::Bool(o.is_truthy()?)
        } else if is_int(o) {
            IndexItem::Int(axis_arg("getitem", "index", o)?)
        } else {
            let idx = arg("getitem", "index", o, None)?;
            if idx.dtype() != DType::I64 || idx.ndim() != 1 {
                return Err(PyIndexError::new_err(format!(
                    "getitem: an index must be an int, a slice, None, ..., a bool or a 1-D \
                     integer array, got {} (read as {} of shape {:?})",
                    describe(o),
                    idx.dtype(),
                    idx.shape()
                )));
            }
            IndexItem::Array(idx)
        });
    }
    let consumes = |i: &IndexItem<'_>| {
        matches!(
            i,
            IndexItem::Slice(_) | IndexItem::Int(_) | IndexItem::Array(_)
        )
    };
    let used = items.iter().filter(|i| consumes(i)).count();
    let ellipses = items
        .iter()
        .filter(|i| matches!(i, IndexItem::Ellipsis))
        .count();
    if ellipses > 1 {
        return Err(PyIndexError::new_err(
            "getitem: an index can only have a single ellipsis ('...')",
        ));
    }
    if used > x.ndim() {
        return Err(PyIndexError::new_err(format!(
            "getitem: too many indices ({used}) for a tensor of shape {:?}",
            x.shape()
        )));
    }
    let has_bool = items.iter().any(|i| matches!(i, IndexItem::Bool(_)));
    let has_array = items.iter().any(|i| matches!(i, IndexItem::Array(_)));
    if has_bool && has_array {
        return Err(PyIndexError::new_err(
            "getitem: a boolean scalar index cannot be combined with an array index",
        ));
    }
    let mut specs = Vec::new();
    let mut newaxes = Vec::new();
    let mut advanced: Option<(usize, Tensor)> = None;
    // numpy: with a boolean scalar, integers become advanced indices too; all of them make
    // one axis, placed where the first is when they are adjacent, else first
    let mut adv_positions: Vec<usize> = Vec::new(); // in the ellipsis-expanded expression
    let mut bool_at: Option<usize> = None; // output position before the first advanced item
    let mut all_true = true;
    let (mut d, mut od, mut pos) = (0usize, 0usize, 0usize);
    let full = |n: usize| SliceSpec::Range {
        start: 0,
        stop: n as isize,
        step: 1,
    };
    for item in items {
        let is_adv =
            matches!(item, IndexItem::Bool(_)) || (has_bool && matches!(item, IndexItem::Int(_)));
        if is_adv {
            adv_positions.push(pos);
            bool_at.get_or_insert(od);
        }
        match item {
            IndexItem::NewAxis => {
                newaxes.push(od);
                od += 1;
                pos += 1;
            }
            IndexItem::Ellipsis => {
                for _ in 0..(x.ndim() - used) {
                    specs.push(full(x.shape()[d]));
                    d += 1;
                    od += 1;
                    pos += 1;
                }
            }
            IndexItem::Slice(s) => {
                let ind = s.indices(x.shape()[d] as isize)?;
                specs.push(SliceSpec::Range {
                    start: ind.start,
                    stop: ind.stop,
                    step: ind.step,
                });
                d += 1;
                od += 1;
                pos += 1;
            }
            IndexItem::Int(i) => {
                specs.push(SliceSpec::Index(i));
                d += 1;
                pos += 1;
            }
            IndexItem::Bool(b) => {
                all_true &= b;
                pos += 1;
            }
            IndexItem::Array(idx) => {
                if advanced.is_some() {
                    return Err(PyIndexError::new_err(
                        "getitem: only one array index per expression is supported",
                    ));
                }
                advanced = Some((od, idx));
                specs.push(full(x.shape()[d]));
                d += 1;
                od += 1;
                pos += 1;
            }
        }
    }
    let bool_axis = bool_at.map(|at| {
        let adjacent = match (adv_positions.first(), adv_positions.last()) {
            (Some(&a), Some(&b)) => b - a + 1 == adv_positions.len(),
            _ => true,
        };
        (if adjacent { at } else { 0 }, all_true)
    });
    Ok(IndexExpr {
        specs,
        newaxes,
        advanced,
        bool_axis,
    })
}

/// The value of a one-element tensor as the Python number of its dtype, exactly (an int64
/// is never read through a float64).
fn item_of<'py>(py: Python<'py>, op: &str, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    ferrograd::graph::check_read(t, op).py()?;
    if t.numel() != 1 {
        return Err(shape_error(
            op,
            format!(
                "only one-element tensors can be converted to a Python scalar, got shape {:?}",
                t.shape()
            ),
        ));
    }
    Ok(match t.dtype() {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            t.item().py()?.into_pyobject(py)?.into_any()
        }
        DType::I64 => t.to_vec::<i64>().py()?[0].into_pyobject(py)?.into_any(),
        DType::I32 | DType::I16 | DType::I8 | DType::U8 => {
            (t.item().py()? as i64).into_pyobject(py)?.into_any()
        }
        DType::Bool => pyo3::types::PyBool::new(py, t.to_vec::<bool>().py()?[0])
            .to_owned()
            .into_any(),
    })
}

/// Whether a value of shape `from` broadcasts to `to` (numpy's rule).
fn broadcasts(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// Iterates over the first axis of a tensor (as numpy iterates over an array's rows).
#[pyclass(name = "TensorIterator", module = "ferrograd")]
pub struct PyTensorIter {
    tensor: Tensor,
    next: usize,
    // the tensor iterated over: each row is a view of it
    src: Py<PyAny>,
}

#[pymethods]
impl PyTensorIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyTensor>> {
        if self.next >= self.tensor.shape()[0] {
            return Ok(None);
        }
        let row = self
            .tensor
            .slice(&[SliceSpec::Index(self.next as isize)])
            .py()?;
        self.next += 1;
        PyTensor::view_of(self.src.bind(py), row).map(Some)
    }
    fn __length_hint__(&self) -> usize {
        self.tensor.shape()[0].saturating_sub(self.next)
    }
}

#[pymethods]
impl PyTensor {
    /// `Tensor(data, dtype=None, device=None)` (MegEngine's constructor: `fg.tensor`), or
    /// PyTorch's legacy `Tensor(d0, d1, ...)` (two or more sizes: zeros of the default float
    /// dtype) and `Tensor()` (an empty one).
    #[new]
    #[pyo3(signature = (*args, dtype=None, device=None))]
    fn py_new(
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let f = py.import("ferrograd._porting")?.getattr("_legacy_tensor")?;
        let t = f.call1((args, dtype, device))?;
        Ok(PyTensor::from(t.cast::<PyTensor>()?.get().tensor()))
    }

    /// Builds a tensor from a numpy array of a supported dtype (copied).
    #[staticmethod]
    #[pyo3(signature = (array, device=None))]
    fn _from_numpy(
        array: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dev = parse_device("tensor", device)?;
        let t = from_numpy(array)?;
        if dev != Device::Cpu {
            return to_device(&t, dev);
        }
        Ok(PyTensor::from(t))
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t().shape())
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.t().ndim()
    }
    #[getter]
    fn size(&self) -> usize {
        self.t().numel()
    }
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.t().dtype())
    }
    #[getter]
    fn device(&self) -> String {
        self.t().device().to_string()
    }
    /// Which data this handle is: its storage's address and its layout (handles with equal
    /// keys see the same elements).
    #[getter]
    fn _data_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let t = self.t();
        let l = t.layout();
        (
            Arc::as_ptr(t.storage()) as usize,
            l.offset(),
            PyTuple::new(py, l.shape())?,
            PyTuple::new(py, l.strides())?,
        )
            .into_pyobject(py)
    }
    /// `(address, nbytes)` of the whole buffer this tensor views, for `untyped_storage()`: the
    /// address of its first byte on the host; for device memory a number that identifies the
    /// buffer as long as it lives (so `data_ptr()` comparisons tell shared memory); 0 for an
    /// empty buffer.
    fn _storage_info(&self) -> (usize, usize) {
        let t = self.t();
        let storage = t.storage();
        let nbytes = storage.bytes();
        if nbytes == 0 {
            return (0, 0);
        }
        let addr = match &*storage.read() {
            ferrograd::storage::StorageData::Cpu(c) => {
                ferrograd::with_cpu_vec!(c, |v| v.as_ptr() as usize)
            }
            #[allow(unreachable_patterns)]
            _ => Arc::as_ptr(storage) as usize,
        };
        (addr, nbytes)
    }
    /// `(shape, dtype name, device)`: what a traced function's cache key holds of a tensor.
    #[getter]
    fn _spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let t = self.t();
        let shape = PyTuple::new(py, t.shape())?;
        (shape, t.dtype().name(), t.device().to_string()).into_pyobject(py)
    }
    /// The accumulated gradient (`None` until backward produces one).
    #[getter]
    fn grad(slf: &Bound<'_, Self>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let me = slf.get();
        let Some(g) = me.t().grad() else {
            return Ok(None);
        };
        // SAFETY: the GIL is held (see `grad_obj`); the reference is cloned at once.
        let cached = unsafe { (*me.grad_obj.get()).as_ref().map(|r| r.clone_ref(py)) };
        if let Some(r) = cached {
            if let Ok(Some(obj)) = r.bind(py).call0().map(|o| (!o.is_none()).then_some(o)) {
                if let Ok(pt) = obj.cast::<PyTensor>() {
                    // SAFETY: as in `tensor`
                    let held = unsafe { (*pt.get().inner.get()).clone() };
                    if held.same(&g) {
                        return Ok(Some(obj.unbind()));
                    }
                }
            }
        }
        let obj = Bound::new(py, PyTensor::from(g))?.into_any();
        me.remember_grad_obj(&obj);
        Ok(Some(obj.unbind()))
    }
    #[setter]
    fn set_grad(slf: &Bound<'_, Self>, g: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let me = slf.get();
        let res = me.set_grad_value(g);
        if let (Ok(()), Some(o)) = (&res, g) {
            if !o.is_none() {
                me.remember_grad_obj(o);
            }
        }
        res
    }
}

impl PyTensor {
    /// Keeps a weak reference to `obj`, the Python object now standing for `.grad`.
    fn remember_grad_obj(&self, obj: &Bound<'_, PyAny>) {
        let r = pyo3::types::PyWeakrefReference::new(obj)
            .ok()
            .map(|r| r.into_any().unbind());
        // SAFETY: the GIL is held (see `grad_obj`) and no reference into the cell exists now.
        let old = unsafe { std::mem::replace(&mut *self.grad_obj.get(), r) };
        drop(old);
    }
    fn set_grad_value(&self, g: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let g = match g {
            None => None,
            Some(o) if o.is_none() => None,
            Some(o) => {
                let t = crate::convert::tensor_arg("grad", "value", o)?;
                let x = self.t();
                if t.dtype() != x.dtype() {
                    return Err(dtype_error(
                        "grad",
                        format!(
                            "assigned gradient has dtype {} but the tensor has dtype {}",
                            t.dtype(),
                            x.dtype()
                        ),
                    ));
                }
                if t.shape() != x.shape() {
                    return Err(shape_error(
                        "grad",
                        format!(
                            "assigned gradient has shape {:?} but the tensor has shape {:?}",
                            t.shape(),
                            x.shape()
                        ),
                    ));
                }
                if t.device() != x.device() {
                    return Err(device_error(
                        "grad",
                        format!(
                            "assigned gradient is on {} but the tensor is on {}",
                            t.device(),
                            x.device()
                        ),
                    ));
                }
                Some(t)
            }
        };
        self.t().set_grad(g).py()?;
        Ok(())
    }
}

#[pymethods]
impl PyTensor {
    #[getter(T)]
    fn transposed(slf: &Bound<'_, Self>) -> PyResult<PyTensor> {
        let out = slf.get().t().t().py()?;
        PyTensor::view_of(slf.as_any(), out)
    }

    /// Whether this tensor was made by a view op and shares the memory of its `_base`
    /// (PyTorch's `_is_view()`; `detach()` and `view(dtype)` are not views there).
    fn _is_view(&self) -> bool {
        // SAFETY: the GIL is held (see `base`)
        unsafe { (*self.base.get()).is_some() }
    }

    /// The tensor this view was made from, followed to the root as PyTorch's
    /// (`a.view(4).t()._base is a`); None for a tensor that is not a view.
    #[getter]
    fn _base(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.base_obj(py)
    }

    /// Drops the record of the tensor this one views, and returns it: for a result an op
    /// composes from a view of its own temporary (an advanced index reshaped), which
    /// PyTorch makes as a new tensor, not a view.
    fn _forget_base<'py>(slf: &Bound<'py, Self>) -> Bound<'py, Self> {
        // SAFETY: the GIL is held (see `base`); the old value is dropped after the update
        let old = unsafe { (*slf.get().base.get()).take() };
        drop(old);
        slf.clone()
    }

    fn __traverse__(
        &self,
        visit: pyo3::pyclass::PyVisit<'_>,
    ) -> Result<(), pyo3::pyclass::PyTraverseError> {
        // SAFETY: the collector runs with the GIL held and no access to `base` in progress
        if let Some(b) = unsafe { &*self.base.get() } {
            visit.call(b)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        // SAFETY: as in `__traverse__`; the old value is dropped after the cell is updated
        let old = unsafe { (*self.base.get()).take() };
        drop(old);
    }

    /// A numpy copy of the data.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, &self.t())
    }
    /// The value of a one-element tensor as a Python number.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        item_of(py, "item", &self.t())
    }
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.t();
        if t.dtype() == DType::BF16 {
            // numpy has no bfloat16 of its own: every bfloat16 is exactly a float32, so the
            // Python floats are the same without ml_dtypes.
            ferrograd::graph::check_read(&t, "tolist").py()?;
            return to_numpy(py, &t.astype(DType::F32).py()?)?.call_method0("tolist");
        }
        to_numpy(py, &t)?.call_method0("tolist")
    }
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // the result is always a fresh copy, which every value of `copy` allows
        if let Some(c) = copy.filter(|c| !c.is_none()) {
            bool_arg("__array__", "copy", c)?;
        }
        let a = to_numpy(py, &self.t())?;
        match dtype {
            Some(d) if !d.is_none() => a.call_method1("astype", (d,)),
            _ => Ok(a),
        }
    }
    fn __len__(&self) -> PyResult<usize> {
        self.t()
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }
    /// Iterates over the first axis, yielding tensors (as numpy yields rows).
    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<PyTensorIter> {
        let t = slf.get().t();
        if t.ndim() == 0 {
            return Err(PyTypeError::new_err("iteration over a 0-d tensor"));
        }
        Ok(PyTensorIter {
            tensor: t,
            next: 0,
            src: slf.clone().into_any().unbind(),
        })
    }
    fn __float__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = item_of(py, "float", &self.t())?;
        Ok(PyFloat::new(py, v.extract::<f64>()?).into_any())
    }
    /// The value as a Python int: exact for int64; a float is truncated toward zero.
    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = item_of(py, "int", &self.t())?;
        if let Ok(f) = v.cast::<PyFloat>() {
            let f = f.value();
            if f.is_nan() {
                return Err(PyValueError::new_err(
                    "int: cannot convert a NaN tensor to an integer",
                ));
            }
            if f.is_infinite() {
                return Err(PyOverflowError::new_err(format!(
                    "int: cannot convert an infinite tensor ({f}) to an integer"
                )));
            }
        }
        v.call_method0("__int__")
    }
    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        let t = self.t();
        if t.numel() != 1 {
            // (ShapeError: a ValueError as numpy's, and the RuntimeError PyTorch raises)
            return Err(shape_error(
                "bool",
                format!(
                    "the truth value of a tensor of shape {:?} is ambiguous (use .any() or .all())",
                    t.shape()
                ),
            ));
        }
        item_of(py, "bool", &t)?.is_truthy()
    }
    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        slf.as_ptr() as isize
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        if ferrograd::graph::check_read(&self.t(), "repr").is_err() {
            // a value computed inside a trace has no fixed value to show
            let t = self.t();
            return Ok(format!(
                "Tensor(<traced>, shape={:?}, dtype={})",
                t.shape(),
                t.dtype()
            ));
        }
        let arr = to_numpy(py, &self.t())?;
        let body = py
            .import("numpy")?
            .getattr("array2string")?
            .call1((arr,))?
            .to_string();
        let body = body.replace('\n', "\n       ");
        let mut s = format!("Tensor({body}, dtype={}", self.t().dtype());
        if self.t().device() != Device::Cpu {
            s.push_str(&format!(", device={}", self.t().device()));
        }
        s.push(')');
        Ok(s)
    }

    fn astype(&self, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let d = parse_dtype("astype", dtype)?;
        self.t().astype(d).py().map(PyTensor::from)
    }
    /// The same data, cut off from every gradient tape.
    fn detach(&self) -> PyTensor {
        self.t().detach().into()
    }
    /// A copy that keeps the gradient connection.
    fn copy(&self, py: Python<'_>) -> PyResult<PyTensor> {
        unary(py, &self.t(), Tensor::copy)
    }
    fn clone(&self, py: Python<'_>) -> PyResult<PyTensor> {
        unary(py, &self.t(), Tensor::copy)
    }
    /// PyTorch's `to`: `to(device)`, `to(dtype)`, `to(device, dtype)`, `to(other)` (its
    /// device and dtype), or the keywords; `copy=True` always copies. The same tensor when
    /// nothing changes; a dtype change is differentiable between float dtypes.
    #[pyo3(signature = (*args, device=None, dtype=None, non_blocking=false, copy=false, memory_format=None))]
    #[allow(clippy::too_many_arguments)] // (PyTorch's keywords)
    fn to(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        device: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        non_blocking: bool,
        copy: bool,
        memory_format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let _ = non_blocking; // transfers are ordered on the stream either way
        let _ = memory_format; // every tensor is row-major
                               // PyTorch's positional forms end in `non_blocking, copy` (bools)
        let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let flags = items
            .iter()
            .rev()
            .take_while(|a| a.is_instance_of::<pyo3::types::PyBool>())
            .count()
            .min(2);
        let (targets, flags) = items.split_at(items.len() - flags);
        let copy = copy || (flags.len() == 2 && flags[1].is_truthy()?);
        let (mut dev, mut dt) = (None, None);
        if let Some(d) = device.filter(|d| !d.is_none()) {
            dev = Some(parse_device("to", Some(d))?);
        }
        if let Some(d) = dtype.filter(|d| !d.is_none()) {
            dt = Some(parse_dtype("to", d)?);
        }
        if targets.len() > 2 {
            return Err(PyTypeError::new_err(format!(
                "to: takes at most 2 positional arguments (device, dtype) before \
                 non_blocking and copy, got {}",
                targets.len()
            )));
        }
        for a in targets {
            if let Ok(other) = a.cast::<PyTensor>() {
                let o = other.borrow().t();
                dev = Some(o.device());
                dt = Some(o.dtype());
            } else if let Ok(d) = parse_dtype("to", a) {
                dt = Some(d);
            } else if a.is_instance_of::<pyo3::types::PyString>() {
                // not a dtype name: a device, or the device parser's error
                dev = Some(parse_device("to", Some(a))?);
            } else {
                let d = parse_device("to", Some(a)).map_err(|_| {
                    PyTypeError::new_err(format!(
                        "to: expected a device, a dtype or a Tensor, got {}",
                        describe(a)
                    ))
                })?;
                dev = Some(d);
            }
        }
        let t = self.t();
        let mut out = match dt {
            Some(d) if d != t.dtype() => t.astype(d).py()?,
            _ => t.clone(),
        };
        if let Some(d) = dev {
            out = out.to(d).py()?;
        }
        if copy && Arc::ptr_eq(out.storage(), t.storage()) {
            out = compute(py, out.numel(), || out.copy()).py()?;
        }
        Ok(out.into())
    }
    fn cpu(&self) -> PyResult<PyTensor> {
        to_device(&self.t(), Device::Cpu)
    }

    #[pyo3(signature = (*shape))]
    fn reshape(slf: &Bound<'_, Self>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = shape_args("reshape", "shape", shape)?;
        let out = slf.get().t().reshape_infer(&s).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    fn flatten(slf: &Bound<'_, Self>) -> PyResult<PyTensor> {
        let x = slf.get().t();
        let out = x.reshape(&[x.numel()]).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    #[pyo3(signature = (*axes))]
    fn transpose(slf: &Bound<'_, Self>, axes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let a = if axes.is_empty() {
            Vec::new()
        } else {
            shape_args("transpose", "axes", axes)?
        };
        transpose_impl(slf.as_any(), &slf.get().t(), &a)
    }
    /// The diagonal of the `(dim1, dim2)` planes as the last axis, a view (PyTorch's
    /// `diagonal`).
    fn _diagonal_view(
        slf: &Bound<'_, Self>,
        offset: isize,
        dim1: isize,
        dim2: isize,
    ) -> PyResult<PyTensor> {
        let out = slf.get().t().diagonal(offset, dim1, dim2).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    /// The windows of `size` elements `step` apart along `dim` as a new last axis, a view
    /// (PyTorch's `Tensor.unfold`).
    fn _unfold_view(
        slf: &Bound<'_, Self>,
        dim: isize,
        size: usize,
        step: usize,
    ) -> PyResult<PyTensor> {
        let out = slf.get().t().unfold_view(dim, size, step).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    /// The view of this tensor's buffer with `size`, `stride` and `storage_offset` (PyTorch's
    /// `as_strided`).
    #[pyo3(signature = (size, stride, storage_offset=None))]
    fn _as_strided_view(
        slf: &Bound<'_, Self>,
        size: Vec<usize>,
        stride: Vec<isize>,
        storage_offset: Option<usize>,
    ) -> PyResult<PyTensor> {
        let out = slf
            .get()
            .t()
            .as_strided(&size, &stride, storage_offset)
            .py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    #[pyo3(signature = (*axes))]
    fn permute(slf: &Bound<'_, Self>, axes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let a = shape_args("permute", "axes", axes)?;
        let out = slf.get().t().permute(&a).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    fn expand_dims(slf: &Bound<'_, Self>, axis: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let axis = axis_arg("expand_dims", "axis", axis)?;
        let out = slf.get().t().expand_dims(axis).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    #[pyo3(signature = (axis=None))]
    fn squeeze(slf: &Bound<'_, Self>, axis: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let axes = axes_arg("squeeze", "axis", axis)?;
        let out = slf.get().t().squeeze(axes.as_deref()).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }
    #[pyo3(signature = (*shape))]
    fn broadcast_to(slf: &Bound<'_, Self>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = sizes_args("broadcast_to", "shape", shape)?;
        let out = slf.get().t().broadcast_to(&s).py()?;
        PyTensor::view_of(slf.as_any(), out)
    }

    #[pyo3(
        signature = (axis=None, keepdims=OptArg::MISSING, *, dim=None, keepdim=OptArg::MISSING),
        text_signature = "($self, axis=None, keepdims=False, *, dim=None, keepdim=False)"
    )]
    fn sum(
        &self,
        py: Python<'_>,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: OptArg<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: OptArg<'_>,
    ) -> PyResult<PyTensor> {
        let axis = crate::convert::either_opt("sum", ("axis", axis), ("dim", dim))?;
        let keep = crate::convert::either("sum", ("keepdims", keepdims), ("keepdim", keepdim))?;
        reduce_impl(py, "sum", &self.t(), axis, &keep, Tensor::sum)
    }
    #[pyo3(
        signature = (axis=None, keepdims=OptArg::MISSING, *, dim=None, keepdim=OptArg::MISSING),
        text_signature = "($self, axis=None, keepdims=False, *, dim=None, keepdim=False)"
    )]
    fn mean(
        &self,
        py: Python<'_>,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: OptArg<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: OptArg<'_>,
    ) -> PyResult<PyTensor> {
        let axis = crate::convert::either_opt("mean", ("axis", axis), ("dim", dim))?;
        let keep = crate::convert::either("mean", ("keepdims", keepdims), ("keepdim", keepdim))?;
        reduce_impl(py, "mean", &self.t(), axis, &keep, Tensor::mean)
    }
    #[pyo3(
        signature = (axis=None, keepdims=OptArg::MISSING),
        text_signature = "($self, axis=None, keepdims=False)"
    )]
    fn max(
        &self,
        py: Python<'_>,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: OptArg<'_>,
    ) -> PyResult<PyTensor> {
        reduce_impl(py, "max", &self.t(), axis, &keepdims, Tensor::max)
    }
    #[pyo3(
        signature = (axis=None, keepdims=OptArg::MISSING),
        text_signature = "($self, axis=None, keepdims=False)"
    )]
    fn min(
        &self,
        py: Python<'_>,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: OptArg<'_>,
    ) -> PyResult<PyTensor> {
        reduce_impl(py, "min", &self.t(), axis, &keepdims, Tensor::min)
    }
    #[pyo3(
        signature = (axis=OptArg::MISSING, *, dim=OptArg::MISSING),
        text_signature = "($self, axis=-1, *, dim=None)"
    )]
    fn softmax(&self, py: Python<'_>, axis: OptArg<'_>, dim: OptArg<'_>) -> PyResult<PyTensor> {
        let axis = crate::convert::either("softmax", ("axis", axis), ("dim", dim))?;
        let axis = axis.or(-1, |o| axis_arg("softmax", "axis", o))?;
        compute(py, self.t().numel(), || self.t().softmax(axis))
            .py()
            .map(PyTensor::from)
    }
    #[pyo3(
        signature = (axis=OptArg::MISSING, *, dim=OptArg::MISSING),
        text_signature = "($self, axis=-1, *, dim=None)"
    )]
    fn log_softmax(&self, py: Python<'_>, axis: OptArg<'_>, dim: OptArg<'_>) -> PyResult<PyTensor> {
        let axis = crate::convert::either("log_softmax", ("axis", axis), ("dim", dim))?;
        let axis = axis.or(-1, |o| axis_arg("log_softmax", "axis", o))?;
        compute(py, self.t().numel(), || self.t().log_softmax(axis))
            .py()
            .map(PyTensor::from)
    }

    #[pyo3(signature = (other, transpose_a=false, transpose_b=false))]
    fn matmul(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        transpose_a: bool,
        transpose_b: bool,
    ) -> PyResult<PyTensor> {
        let f = crate::functions::matmul_fn(transpose_a, transpose_b);
        binary(py, "matmul", &self.t(), other, "other", false, f)
    }

    fn __add__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "add", &self.t(), o, "other", false, Tensor::add)
        })
    }
    fn __radd__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "add", &self.t(), o, "other", true, Tensor::add)
        })
    }
    fn __sub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            let x = self.t();
            no_bool_sub(&x, o)?;
            binary(py, "sub", &x, o, "other", false, Tensor::sub)
        })
    }
    fn __rsub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            let x = self.t();
            no_bool_sub(&x, o)?;
            binary(py, "sub", &x, o, "other", true, Tensor::sub)
        })
    }
    fn __mul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "mul", &self.t(), o, "other", false, Tensor::mul)
        })
    }
    fn __rmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "mul", &self.t(), o, "other", true, Tensor::mul)
        })
    }
    fn __truediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || true_div(py, &self.t(), o, false))
    }
    fn __rtruediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || true_div(py, &self.t(), o, true))
    }
    fn __pow__(
        &self,
        py: Python<'_>,
        e: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if modulo.is_some_and(|m| !m.is_none()) {
            return Err(PyTypeError::new_err("pow: a modulus is not supported"));
        }
        operator(py, e, || pow_impl(py, &self.t(), e, "other"))
    }
    fn __rpow__(
        &self,
        py: Python<'_>,
        b: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let _ = modulo;
        operator(py, b, || {
            let x = self.t();
            if !x.dtype().is_float() && is_int(b) {
                // an integer base to integer tensor powers stays integer, as PyTorch's
                let base = arg("pow", "other", b, Some(&x))?;
                if !base.dtype().is_float() {
                    return compute(py, x.numel(), || int_pow_tensor(&base, &x))
                        .py()
                        .map(PyTensor::from);
                }
            }
            binary(py, "pow", &x, b, "other", true, Tensor::pow)
        })
    }
    fn __matmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "matmul", &self.t(), o, "other", false, Tensor::matmul)
        })
    }
    fn __rmatmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        operator(py, o, || {
            binary(py, "matmul", &self.t(), o, "other", true, Tensor::matmul)
        })
    }
    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        unary(py, &self.t(), Tensor::neg)
    }
    fn __pos__(&self) -> PyTensor {
        self.t().clone().into()
    }
    fn __abs__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        unary(py, &self.t(), Tensor::abs)
    }
    fn __richcmp__(
        &self,
        py: Python<'_>,
        o: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let (name, f): (&str, Binary) = match op {
            CompareOp::Eq => ("equal", Tensor::eq),
            CompareOp::Ne => ("not_equal", Tensor::ne),
            CompareOp::Lt => ("less", Tensor::lt),
            CompareOp::Le => ("less_equal", Tensor::le),
            CompareOp::Gt => ("greater", Tensor::gt),
            CompareOp::Ge => ("greater_equal", Tensor::ge),
        };
        operator(py, o, || binary(py, name, &self.t(), o, "other", false, f))
    }
    fn __getitem__(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let out = getitem(&slf.get().t(), key)?;
        PyTensor::view_of(slf.as_any(), out)
    }

    /// `x[key] = value`, in place (basic indexing). Differentiable in `x` and `value` while
    /// a GradKey tracks either.
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let x = self.t();
        let e = parse_index(&x, key)?;
        if e.advanced.is_some() {
            return Err(PyIndexError::new_err(
                "setitem: assignment through an array index is not supported",
            ));
        }
        let mut v = arg("setitem", "value", value, Some(&x))?;
        if v.device() != x.device() && !v.is_tracked() {
            // a slice takes values from another device as `copy_` does (PyTorch's)
            v = v.to_device(x.device()).py()?;
        }
        if e.bool_axis.is_some() || !e.newaxes.is_empty() {
            // the value broadcasts to the indexed result, whose added axes (of `None` and
            // booleans) have length 1, or 0 for a False index, which writes nothing
            let basic: Vec<usize> = x.slice(&e.specs).py()?.shape().to_vec();
            let (full, added) = e.full_shape(&basic);
            if !broadcasts(v.shape(), &full) {
                return Err(shape_error(
                    "setitem",
                    format!(
                        "cannot assign a value of shape {:?} to an index result of shape {:?}",
                        v.shape(),
                        full
                    ),
                ));
            }
            if full.contains(&0) {
                return Ok(());
            }
            if v.ndim() == 0 {
                // a scalar is written as it is (a Python number may join a tensor on any device)
                return self.setitem_value(&x, &e.specs, &v);
            }
            let axes: Vec<isize> = added
                .iter()
                .enumerate()
                .filter(|(_, &a)| a)
                .map(|(i, _)| i as isize)
                .collect();
            v = v.broadcast_to(&full).py()?.squeeze(Some(&axes)).py()?;
        }
        self.setitem_value(&x, &e.specs, &v)
    }

    fn __iadd__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inplace(py, "iadd", o, Tensor::add)
    }
    fn __isub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inplace(py, "isub", o, Tensor::sub)
    }
    fn __imul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inplace(py, "imul", o, Tensor::mul)
    }
    fn __itruediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inplace(py, "itruediv", o, Tensor::div)
    }

    /// Makes this object stand for `value`'s data (detached: no tape state, no `.grad`), of
    /// any shape, dtype and device: PyTorch's `p.data = value` and `Module.to(dtype)`, which
    /// keep the Python object (so optimizers holding it keep training it).
    fn _replace_data(&self, value: PyRef<'_, PyTensor>) {
        self.rebind(value.tensor().detach());
    }

    /// Makes this object stand for `value` itself, tape state included: the in-place
    /// spellings of view ops (`x.unsqueeze_(0)` is `x = x.unsqueeze(0)` on the same object).
    fn _replace_view(&self, value: PyRef<'_, PyTensor>) {
        self.rebind(value.tensor());
    }

    /// What an in-place op computes from before writing its result here: a copy carrying
    /// this tensor's tape state when a tape records the write, a traced copy when a trace
    /// may differentiate it (so a grad rule that saves its input keeps the value before the
    /// write), this tensor itself otherwise. The one rule for every in-place spelling composed in Python
    /// (`x.sin_()`, `F.silu(x, inplace=True)`); the binary ones (`x += y`) apply it here.
    fn _write_source(&self) -> PyResult<PyTensor> {
        let x = self.t();
        Ok(PyTensor::from(if x.is_recorded() {
            x.fork().py()?
        } else if traced_with_grad() {
            x.copy().py()?
        } else {
            x
        }))
    }

    /// Copies `src` (broadcast, cast to this dtype) into this tensor, in place; returns self.
    fn copy_<'py>(slf: &Bound<'py, Self>, src: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        let x = this.t();
        let mut v = arg("copy_", "src", src, Some(&x))?;
        if v.device() != x.device() && !v.is_tracked() {
            // a copy between devices (no gradient can cross one)
            v = v.to_device(x.device()).py()?;
        }
        if raw_write(&x, &v) {
            x.assign_(&v).py()?;
        } else {
            let result = v.astype(x.dtype()).py()?.broadcast_to(x.shape()).py()?;
            this.rebind(x.update_("copy_", &result).py()?);
        }
        Ok(slf.clone())
    }

    /// Fills the tensor with `value`, in place; returns self.
    fn fill_<'py>(slf: &Bound<'py, Self>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        let x = this.t();
        if (is_int(value) || value.is_instance_of::<PyFloat>()) && !is_bool(value) {
            // a Python number the dtype cannot hold is refused, as by `full`
            crate::functions::fill_value("fill_", "value", value, x.dtype())?;
        }
        let v = arg("fill_", "value", value, Some(&x))?;
        if v.numel() != 1 {
            return Err(PyValueError::new_err(format!(
                "fill_: expected a single value, got shape {:?}",
                v.shape()
            )));
        }
        let result = v
            .detach()
            .to_device(x.device())
            .py()?
            .astype(x.dtype())
            .py()?
            .broadcast_to(x.shape())
            .py()?;
        this.rebind(x.update_("fill_", &result).py()?);
        Ok(slf.clone())
    }

    /// Sets every element to zero, in place; returns self.
    fn zero_<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        let x = this.t();
        let result = x.zeros_like().py()?;
        this.rebind(x.update_("zero_", &result).py()?);
        Ok(slf.clone())
    }

    /// How many times this tensor's storage has been written in place.
    #[getter]
    fn _version(&self) -> u64 {
        self.t().storage().version()
    }
    /// Numpy defers to the Tensor's reflected operators (`np.float64(2) * t` is a Tensor).
    #[classattr]
    fn __array_ufunc__() -> Option<i32> {
        None
    }
}

pub fn to_device(t: &Tensor, dev: Device) -> PyResult<PyTensor> {
    t.to(dev).py().map(PyTensor::from)
}

/// A list of tensors from a Python sequence (the argument `name`; its items are `name[i]`).
pub fn tensor_list(op: &str, name: &str, seq: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    if seq.cast::<PyTensor>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "{op}: {name} must be a sequence of Tensors, got one Tensor"
        )));
    }
    let list: Vec<Bound<'_, PyAny>> = if let Ok(l) = seq.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = seq.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        seq.try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "{op}: {name} must be a sequence of Tensors, got {}",
                    describe(seq)
                ))
            })?
            .collect::<PyResult<_>>()?
    };
    list.iter()
        .enumerate()
        .map(|(i, o)| arg(op, &format!("{name}[{i}]"), o, None))
        .collect()
}
