//! Custom grad rules written in Python: `Function` subclasses and overrides of builtin rules.

use std::sync::Arc;

use ferrograd::autograd::{record_custom, register_rule, unregister_rule, GradRule, RuleOverride};
use ferrograd::{DType, Device, Op, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::errors::{device_error, dtype_error, external, to_pyerr, ResultExt};
use crate::grad::PyGradKey;
use crate::tensor::{tensor_list, PyTensor};

/// A rule whose backward is a Python callable: `callable(*output_grads) -> input grads`.
struct PyRule {
    name: String,
    callable: Py<PyAny>,
    shapes: Vec<Vec<usize>>,
    dtypes: Vec<DType>,
    devices: Vec<Device>,
    needs: Vec<bool>,
}

impl PyRule {
    fn new(name: &str, callable: Py<PyAny>, inputs: &[&Tensor], needs: &[bool]) -> PyRule {
        PyRule {
            name: name.to_string(),
            callable,
            shapes: inputs.iter().map(|t| t.shape().to_vec()).collect(),
            dtypes: inputs.iter().map(|t| t.dtype()).collect(),
            devices: inputs.iter().map(|t| t.device()).collect(),
            needs: needs.to_vec(),
        }
    }

    fn call(&self, py: Python<'_>, grads: &[Option<Tensor>]) -> PyResult<Vec<Option<Tensor>>> {
        let args: Vec<Py<PyAny>> = grads
            .iter()
            .map(|g| match g {
                Some(t) => Ok(Py::new(py, PyTensor::from(t.clone()))?.into_any()),
                None => Ok(py.None()),
            })
            .collect::<PyResult<_>>()?;
        let ret = self.callable.bind(py).call1(PyTuple::new(py, args)?)?;
        let n = self.shapes.len();
        let items: Vec<Bound<'_, PyAny>> = if ret.cast::<PyTensor>().is_ok() || ret.is_none() {
            vec![ret]
        } else if ret.is_instance_of::<PyTuple>() || ret.is_instance_of::<PyList>() {
            ret.try_iter()?.collect::<PyResult<_>>()?
        } else {
            return Err(PyTypeError::new_err(format!(
                "{}: backward must return a Tensor, None, or a tuple of them, got {}",
                self.name,
                ret.get_type().name()?
            )));
        };
        if items.len() != n {
            return Err(PyValueError::new_err(format!(
                "{}: backward returned {} gradient(s) for {} input(s)",
                self.name,
                items.len(),
                n
            )));
        }
        let mut out = Vec::with_capacity(n);
        for (i, item) in items.iter().enumerate() {
            if item.is_none() || !self.needs[i] {
                out.push(None);
                continue;
            }
            let g = match item.cast::<PyTensor>() {
                Ok(t) => t.get().tensor(),
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "{}: backward returned a {} for input {i}; expected a Tensor or None",
                        self.name,
                        item.get_type().name()?
                    )))
                }
            };
            if g.shape() != self.shapes[i].as_slice() {
                return Err(to_pyerr(ferrograd::Error::Shape {
                    op: self.name.clone(),
                    msg: format!(
                        "backward returned a gradient of shape {:?} for input {i} of shape {:?} \
                         (Function {}Backward returned an invalid gradient at index {i} - got \
                         {:?} but expected shape compatible with {:?})",
                        g.shape(),
                        self.shapes[i],
                        self.name,
                        g.shape(),
                        self.shapes[i]
                    ),
                }));
            }
            // never cast: a gradient of another dtype is a bug in the rule (a float32 gradient
            // for a float64 input loses precision; an int or bool one is meaningless)
            if g.dtype() != self.dtypes[i] {
                return Err(dtype_error(
                    &self.name,
                    format!(
                        "backward returned a {} gradient for input {i}, a {} tensor of shape {:?}; \
                         return a gradient of the input's dtype",
                        g.dtype(),
                        self.dtypes[i],
                        self.shapes[i]
                    ),
                ));
            }
            if g.device() != self.devices[i] {
                return Err(device_error(
                    &self.name,
                    format!(
                        "backward returned a gradient on {} for input {i}, a tensor on {}",
                        g.device(),
                        self.devices[i]
                    ),
                ));
            }
            out.push(Some(g));
        }
        Ok(out)
    }
}

impl GradRule for PyRule {
    fn name(&self) -> &str {
        &self.name
    }
    fn backward(&self, grads: &[Option<Tensor>]) -> ferrograd::Result<Vec<Option<Tensor>>> {
        Python::attach(|py| self.call(py, grads).map_err(external))
    }
}

/// Records a `Function` call: `function.backward` becomes the rule of its outputs.
#[pyfunction]
fn _record_function(
    function: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    outputs: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<()> {
    let ins = tensor_list(name, "inputs", inputs)?;
    let outs = tensor_list(name, "outputs", outputs)?;
    let refs: Vec<&Tensor> = ins.iter().collect();
    let backward = function.getattr("backward")?.unbind();
    record_custom(name, &refs, &outs, &mut |needs, _level| {
        Ok(Box::new(PyRule::new(
            name,
            Python::attach(|py| backward.clone_ref(py)),
            &refs,
            needs,
        )))
    })
    .py()
}

/// The level of the outermost recording key tracking any of `tensors`, or None.
#[pyfunction]
fn _tracking_level(tensors: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    let ts = tensor_list("Function", "inputs", tensors)?;
    Ok(ts
        .iter()
        .flat_map(|t| t.tracking_keys())
        .map(|k| k.level())
        .min())
}

/// The recording keys that track `tensor`, outermost first.
#[pyfunction]
fn _tracking_keys(tensor: &Bound<'_, PyAny>) -> PyResult<Vec<PyGradKey>> {
    let t = crate::convert::tensor_arg("grad", "y", tensor)?;
    Ok(t.tracking_keys().into_iter().map(PyGradKey::from).collect())
}

#[pyfunction]
fn _push_ceiling(level: u64) {
    ferrograd::autograd::push_ceiling(level)
}

/// Keeps the ops that follow out of a checkpointed segment's bookkeeping (returns the
/// previous setting; see `ferrograd::autograd::set_capture_paused`).
#[pyfunction]
fn _set_capture_paused(paused: bool) -> bool {
    ferrograd::autograd::set_capture_paused(paused)
}

#[pyfunction]
fn _grad_enabled() -> bool {
    ferrograd::autograd::grad_enabled()
}

/// Sets the float dtype ints become where an op needs a float (`set_default_dtype`).
#[pyfunction]
fn _set_default_float(name: &str) -> PyResult<()> {
    ferrograd::DType::parse(name)
        .and_then(ferrograd::dtype::set_default_float)
        .ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "set_default_dtype: only floating-point dtypes are allowed, got {name}"
            ))
        })
}

#[pyfunction]
fn _push_enable() {
    ferrograd::autograd::push_enable()
}

/// How many grad-mode scopes are pushed on this thread (see `_truncate_ceiling`).
#[pyfunction]
fn _ceiling_depth() -> usize {
    ferrograd::autograd::ceiling_depth()
}

/// Pops grad-mode scopes until `_ceiling_depth()` is `depth`.
#[pyfunction]
fn _truncate_ceiling(depth: usize) {
    ferrograd::autograd::truncate_ceiling(depth)
}

#[pyfunction]
fn _pop_ceiling() {
    ferrograd::autograd::pop_ceiling()
}

/// A Python override of a builtin rule: `rule(inputs, output)` returns a backward callable,
/// or None (or raises `GradRuleFallback`) to use the builtin rule for this call.
struct PyOverride {
    name: String,
    rule: Py<PyAny>,
}

impl RuleOverride for PyOverride {
    fn make(
        &self,
        _op: &Op,
        inputs: &[&Tensor],
        outputs: &[Tensor],
        needs: &[bool],
        _level: u64,
    ) -> ferrograd::Result<Option<Box<dyn GradRule>>> {
        Python::attach(|py| -> PyResult<Option<Box<dyn GradRule>>> {
            let ins: Vec<Py<PyTensor>> = inputs
                .iter()
                .map(|t| Py::new(py, PyTensor::from((*t).clone())))
                .collect::<PyResult<_>>()?;
            let out = Py::new(py, PyTensor::from(outputs[0].clone()))?;
            let fallback = py.import("ferrograd")?.getattr("GradRuleFallback")?;
            let ret = match self.rule.bind(py).call1((PyTuple::new(py, ins)?, out)) {
                Ok(r) => r,
                Err(e) if e.is_instance(py, &fallback) => return Ok(None),
                Err(e) => return Err(e),
            };
            if ret.is_none() {
                return Ok(None);
            }
            if !ret.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "grad rule for {:?} must return a backward callable or None, got {}",
                    self.name,
                    ret.get_type().name()?
                )));
            }
            Ok(Some(Box::new(PyRule::new(
                &self.name,
                ret.unbind(),
                inputs,
                needs,
            ))))
        })
        .map_err(external)
    }
}

/// Registers `rule(inputs, output) -> backward | None` as the grad rule of the builtin op
/// `op_name`; returning None (or raising `GradRuleFallback`) falls back to the builtin rule.
#[pyfunction]
fn register_grad_rule(op_name: &Bound<'_, PyAny>, rule: &Bound<'_, PyAny>) -> PyResult<()> {
    let op_name = &crate::convert::str_arg("register_grad_rule", "op_name", op_name)?;
    if !rule.is_callable() {
        return Err(PyTypeError::new_err(
            "register_grad_rule: rule must be callable",
        ));
    }
    register_rule(
        op_name,
        Arc::new(PyOverride {
            name: op_name.to_string(),
            rule: rule.clone().unbind(),
        }),
    )
    .py()
}

/// Removes a rule registered with `register_grad_rule`; returns whether there was one.
#[pyfunction]
fn unregister_grad_rule(op_name: &Bound<'_, PyAny>) -> PyResult<bool> {
    let op_name = crate::convert::str_arg("unregister_grad_rule", "op_name", op_name)?;
    Ok(unregister_rule(&op_name))
}

/// Runs `segment(*tensors)` (which returns a tuple of Tensors) as a checkpointed segment.
#[pyfunction]
fn _checkpoint(
    py: Python<'_>,
    segment: &Bound<'_, PyAny>,
    tensors: &Bound<'_, PyAny>,
) -> PyResult<Vec<PyTensor>> {
    let args = tensor_list("checkpoint", "args", tensors)?;
    let seg = segment.clone().unbind();
    let run: ferrograd::autograd::Segment = Arc::new(move |ts: &[Tensor]| {
        Python::attach(|py| -> PyResult<Vec<Tensor>> {
            let items: Vec<Py<PyAny>> = ts
                .iter()
                .map(|t| Ok(Py::new(py, PyTensor::from(t.clone()))?.into_any()))
                .collect::<PyResult<_>>()?;
            let out = seg.bind(py).call1(PyTuple::new(py, items)?)?;
            tensor_list("checkpoint", "the function's result", &out)
        })
        .map_err(external)
    });
    let outs = py
        .detach(move || ferrograd::autograd::checkpoint(run, &args))
        .py()?;
    Ok(outs.into_iter().map(PyTensor::from).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(_record_function, m)?)?;
    m.add_function(wrap_pyfunction!(_tracking_level, m)?)?;
    m.add_function(wrap_pyfunction!(_tracking_keys, m)?)?;
    m.add_function(wrap_pyfunction!(_push_ceiling, m)?)?;
    m.add_function(wrap_pyfunction!(_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_capture_paused, m)?)?;
    m.add_function(wrap_pyfunction!(_pop_ceiling, m)?)?;
    m.add_function(wrap_pyfunction!(_ceiling_depth, m)?)?;
    m.add_function(wrap_pyfunction!(_truncate_ceiling, m)?)?;
    m.add_function(wrap_pyfunction!(_push_enable, m)?)?;
    m.add_function(wrap_pyfunction!(_set_default_float, m)?)?;
    m.add_function(wrap_pyfunction!(register_grad_rule, m)?)?;
    m.add_function(wrap_pyfunction!(unregister_grad_rule, m)?)?;
    m.add("OP_NAMES", Op::names().to_vec())?;
    Ok(())
}
