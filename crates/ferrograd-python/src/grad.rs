//! The Python `GradKey` class and the bridge for Python callbacks.

use std::sync::Arc;

use ferrograd::{GradCallback, GradKey, Tensor};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::convert::{arg, bool_arg, describe, str_arg, tensor_arg, OptArg};
use crate::errors::{device_error, dtype_error, external, shape_error, ResultExt};
use crate::tensor::{tensor_list, PyTensor};

/// How a callable is called in messages: its `__qualname__` (or `__name__`, or repr).
pub fn callable_name(f: &Bound<'_, PyAny>) -> String {
    for attr in ["__qualname__", "__name__"] {
        if let Ok(n) = f.getattr(attr).and_then(|n| n.extract::<String>()) {
            return n;
        }
    }
    describe(f)
}

/// Checks that the gradient `new` a callback named `who` returned can replace `old`.
fn check_callback_grad(who: &str, old: &Tensor, new: &Tensor) -> PyResult<()> {
    let op = format!("GradKey.attach callback {who:?}");
    if new.dtype() != old.dtype() {
        return Err(dtype_error(
            &op,
            format!(
                "returned a {} gradient for a {} tensor of shape {:?}",
                new.dtype(),
                old.dtype(),
                old.shape()
            ),
        ));
    }
    if new.shape() != old.shape() {
        return Err(shape_error(
            &op,
            format!(
                "returned a gradient of shape {:?} for a {} tensor of shape {:?}",
                new.shape(),
                old.dtype(),
                old.shape()
            ),
        ));
    }
    if new.device() != old.device() {
        return Err(device_error(
            &op,
            format!(
                "returned a gradient on {} for a tensor on {}",
                new.device(),
                old.device()
            ),
        ));
    }
    Ok(())
}

/// Wraps a Python callable `cb(tensor, grad) -> grad | None` for the engine.
fn callback(cb: Py<PyAny>) -> GradCallback {
    Arc::new(move |t: &Tensor, g: &Tensor| {
        Python::attach(|py| {
            let r = cb
                .call1(py, (PyTensor::from(t.clone()), PyTensor::from(g.clone())))
                .map_err(external)?;
            if r.is_none(py) {
                return Ok(None);
            }
            let who = callable_name(cb.bind(py));
            match r.bind(py).cast::<PyTensor>() {
                Ok(pt) => {
                    let new = pt.get().tensor();
                    check_callback_grad(&who, g, &new).map_err(external)?;
                    Ok(Some(new))
                }
                Err(_) => Err(external(PyTypeError::new_err(format!(
                    "GradKey.attach callback {who:?}: expected a Tensor or None as the new \
                     gradient, got {}",
                    describe(r.bind(py))
                )))),
            }
        })
    })
}

/// One or several tensors.
fn one_or_many(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(vec![t.get().tensor()]);
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return tensor_list(op, name, obj);
    }
    Err(PyTypeError::new_err(format!(
        "{op}: {name} must be a Tensor or a list of Tensors, got {}",
        describe(obj)
    )))
}

/// A gradient tape (MegEngine's `GradKey`): attach tensors, run ops, call `backward` once.
#[pyclass(name = "GradKey", module = "ferrograd", weakref)]
pub struct PyGradKey {
    key: GradKey,
}

impl From<GradKey> for PyGradKey {
    fn from(key: GradKey) -> Self {
        PyGradKey { key }
    }
}

/// Seeds for `ys`: ones where `dys` is None (or has None entries), else tensors/numbers.
fn seeds(op: &str, ys: &[Tensor], dys: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Tensor>> {
    let d = match dys {
        Some(d) if !d.is_none() => d,
        _ => return ys.iter().map(|y| y.ones_like().py()).collect(),
    };
    let items: Vec<Bound<'_, PyAny>> =
        if d.is_instance_of::<PyList>() || d.is_instance_of::<PyTuple>() {
            d.try_iter()?.collect::<PyResult<_>>()?
        } else {
            vec![d.clone()]
        };
    if items.len() != ys.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{op}: got {} tensors and {} gradients",
            ys.len(),
            items.len()
        )));
    }
    items
        .iter()
        .zip(ys)
        .map(|(o, y)| {
            if o.is_none() {
                y.ones_like().py()
            } else {
                arg(op, "dys", o, Some(y))
            }
        })
        .collect()
}

#[pymethods]
impl PyGradKey {
    /// Handles to one key compare equal (and hash alike).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyGradKey>()
            .is_ok_and(|o| o.borrow().key == self.key)
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.key.hash(&mut h);
        h.finish()
    }
    /// A new key, recording from now on. With `sibling_of`, it shares that key's level:
    /// neither records the other's backward.
    /// `recompute`: None, "auto" (recompute cheap elementwise chains in backward instead of
    /// saving them), or a callable `policy(op_name) -> bool` saying which ops to recompute.
    /// `_ambient`: the key behind PyTorch's `Tensor.backward`, which alone does not make
    /// traced functions run eagerly.
    #[new]
    #[pyo3(signature = (name=None, sibling_of=None, recompute=None, _ambient=false))]
    fn new(
        name: Option<&Bound<'_, PyAny>>,
        sibling_of: Option<&Bound<'_, PyAny>>,
        recompute: Option<&Bound<'_, PyAny>>,
        _ambient: bool,
    ) -> PyResult<Self> {
        let name = match name.filter(|n| !n.is_none()) {
            Some(n) => str_arg("GradKey", "name", n)?,
            None => "grad_key".to_string(),
        };
        let sibling_of = match sibling_of.filter(|s| !s.is_none()) {
            Some(s) => Some(s.cast::<PyGradKey>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "GradKey: sibling_of must be a GradKey or None, got {}",
                    describe(s)
                ))
            })?),
            None => None,
        };
        let policy: Option<ferrograd::autograd::MirrorPolicy> = match recompute {
            None => None,
            Some(r) if r.is_none() => None,
            Some(r) => {
                if let Ok(s) = r.extract::<String>() {
                    if s != "auto" {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "recompute must be None, \"auto\" or a callable, got {s:?}"
                        )));
                    }
                    Some(ferrograd::autograd::auto_policy())
                } else if r.is_callable() {
                    let f = r.clone().unbind();
                    Some(Arc::new(move |op: &ferrograd::Op| {
                        Python::attach(|py| {
                            // a policy that raises fails the op with its exception
                            f.call1(py, (op.name(),))
                                .and_then(|v| v.is_truthy(py))
                                .map_err(crate::errors::external)
                        })
                    }))
                } else {
                    return Err(PyTypeError::new_err(
                        "recompute must be None, \"auto\" or a callable",
                    ));
                }
            }
        };
        if _ambient {
            return Ok(PyGradKey {
                key: GradKey::new_ambient(name),
            });
        }
        let key = match (sibling_of, policy) {
            (Some(k), _) => k.borrow().key.new_sibling(name),
            (None, Some(p)) => GradKey::with_mirroring(name, p),
            (None, None) => GradKey::new(name),
        };
        Ok(PyGradKey { key })
    }

    /// Gradients of `ys` (seeded with `dys`, ones when None) with respect to `xs`, without
    /// callbacks or `.grad`; with `create_graph`, outer keys record them. Finishes the key.
    #[pyo3(
        signature = (ys, dys, xs, create_graph=OptArg::MISSING),
        text_signature = "($self, ys, dys, xs, create_graph=False)"
    )]
    fn grad(
        &self,
        py: Python<'_>,
        ys: &Bound<'_, PyAny>,
        dys: Option<&Bound<'_, PyAny>>,
        xs: &Bound<'_, PyAny>,
        create_graph: OptArg<'_>,
    ) -> PyResult<Vec<PyTensor>> {
        let create_graph = create_graph.or(false, |o| bool_arg("grad", "create_graph", o))?;
        let ys = one_or_many("grad", "ys", ys)?;
        let dys = seeds("grad", &ys, dys)?;
        let xs = one_or_many("grad", "xs", xs)?;
        let key = self.key.clone();
        let gs = py
            .detach(move || key.grad(&ys, &dys, &xs, create_graph))
            .py()?;
        Ok(gs.into_iter().map(PyTensor::from).collect())
    }

    /// `grad`, with None for an input that no gradient reaches; `retain_graph` keeps the
    /// recording, `create_graph` (which retains) records the backward onto this key.
    #[pyo3(signature = (ys, dys, xs, retain_graph=false, create_graph=false))]
    fn _grad_reached(
        &self,
        py: Python<'_>,
        ys: &Bound<'_, PyAny>,
        dys: Option<&Bound<'_, PyAny>>,
        xs: &Bound<'_, PyAny>,
        retain_graph: bool,
        create_graph: bool,
    ) -> PyResult<Vec<Option<PyTensor>>> {
        let ys = one_or_many("backward", "ys", ys)?;
        let dys = seeds("backward", &ys, dys)?;
        let xs = one_or_many("backward", "inputs", xs)?;
        let key = self.key.clone();
        let gs = py
            .detach(move || {
                if retain_graph || create_graph {
                    key.grad_reached_retain(&ys, &dys, &xs, create_graph)
                } else {
                    key.grad_reached(&ys, &dys, &xs, false)
                }
            })
            .py()?;
        Ok(gs.into_iter().map(|g| g.map(PyTensor::from)).collect())
    }

    #[getter]
    fn name(&self) -> String {
        self.key.name()
    }
    #[setter]
    fn set_name(&self, name: &Bound<'_, PyAny>) -> PyResult<()> {
        self.key.set_name(str_arg("GradKey.name", "value", name)?);
        Ok(())
    }
    /// Nesting level: keys created later are inner to keys created earlier.
    #[getter]
    fn level(&self) -> u64 {
        self.key.level()
    }
    /// Whether the key still records ops.
    #[getter]
    fn is_active(&self) -> bool {
        self.key.is_active()
    }
    /// Whether the key has been used by `backward` (or finished by hand).
    #[getter]
    fn is_finished(&self) -> bool {
        self.key.is_finished()
    }

    /// Tracks `tensor`. `callback(tensor, grad)` runs as soon as its gradient is final; a
    /// Tensor it returns replaces the gradient. The result is added into `tensor.grad`.
    #[pyo3(signature = (tensor, callback=None))]
    fn attach(
        &self,
        tensor: &Bound<'_, PyAny>,
        callback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self._attach(tensor, callback, OptArg::MISSING)
    }

    /// `attach`, choosing whether the final gradient is added into `tensor.grad`.
    #[pyo3(
        signature = (tensor, callback=None, accumulate=OptArg::MISSING),
        text_signature = "($self, tensor, callback=None, accumulate=True)"
    )]
    fn _attach(
        &self,
        tensor: &Bound<'_, PyAny>,
        callback: Option<&Bound<'_, PyAny>>,
        accumulate: OptArg<'_>,
    ) -> PyResult<()> {
        let accumulate = accumulate.or(true, |o| bool_arg("attach", "accumulate", o))?;
        let t = tensor_arg("attach", "tensor", tensor)?;
        let cb = match callback {
            Some(c) if !c.is_none() => {
                if !c.is_callable() {
                    return Err(PyTypeError::new_err(format!(
                        "attach: callback must be callable, got {}",
                        c.get_type().name()?
                    )));
                }
                Some(self::callback(c.clone().unbind()))
            }
            _ => None,
        };
        self.key.attach_with(&t, cb, accumulate).py()
    }

    /// Registers `hook()` (no arguments; what it returns is ignored) to run each time an
    /// eager backward of any key has added `tensor`'s final gradient into its `.grad`, as
    /// early as that gradient is final (the engine of PyTorch's
    /// `Tensor.register_post_accumulate_grad_hook`). Returns an id for
    /// `_remove_post_accumulate_grad_hook`.
    #[staticmethod]
    fn _register_post_accumulate_grad_hook(
        tensor: &Bound<'_, PyAny>,
        hook: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        const OP: &str = "register_post_accumulate_grad_hook";
        let t = tensor_arg(OP, "tensor", tensor)?;
        if !hook.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "{OP}: hook must be callable, got {}",
                describe(hook)
            )));
        }
        let hook = hook.clone().unbind();
        let cb: GradCallback = Arc::new(move |_t: &Tensor, _g: &Tensor| {
            Python::attach(|py| hook.call0(py).map(|_| None).map_err(external))
        });
        GradKey::register_post_accumulate_hook(&t, cb).py()
    }

    /// Runs the post-accumulate hooks of `tensor` now (after `backward(inputs=...)` has
    /// added into its `.grad`).
    #[staticmethod]
    fn _run_post_accumulate_grad_hooks(tensor: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = tensor_arg("backward", "inputs", tensor)?;
        GradKey::run_post_accumulate_hooks(&t).py()
    }

    /// Removes a hook `_register_post_accumulate_grad_hook` registered; False when it was
    /// removed already.
    #[staticmethod]
    fn _remove_post_accumulate_grad_hook(id: u64) -> bool {
        GradKey::remove_post_accumulate_hook(id)
    }

    /// Backward no longer adds into `tensor`'s `.grad` nor runs its callbacks (it stays
    /// part of the graphs recorded from it).
    /// and the tensor object goes on as a handle this key does not track (same data and
    /// `.grad`).
    fn _stop_delivering(&self, tensor: &Bound<'_, PyTensor>) -> PyResult<()> {
        let this = tensor.get();
        let t = this.tensor();
        self.key.stop_delivering(&t);
        this.rebind(t.untracked_by(&self.key));
        Ok(())
    }

    /// Whether this key tracks `tensor`.
    fn is_attached_to(&self, tensor: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self
            .key
            .is_attached_to(&tensor_arg("is_attached_to", "tensor", tensor)?))
    }

    /// Backpropagates from `ys` with gradients `dys` (ones when omitted), then finishes the
    /// key; with `retain_graph`, the key keeps its recording (and goes on recording), so a
    /// later backward through the same ops works again; with `create_graph` (which retains),
    /// the key also records this backward, so the gradients it delivers can be
    /// differentiated again by the same key (PyTorch's second order).
    #[pyo3(
        signature = (ys, dys=None, retain_graph=OptArg::MISSING, create_graph=OptArg::MISSING),
        text_signature = "($self, ys, dys=None, retain_graph=False, create_graph=False)"
    )]
    fn backward(
        &self,
        py: Python<'_>,
        ys: &Bound<'_, PyAny>,
        dys: Option<&Bound<'_, PyAny>>,
        retain_graph: OptArg<'_>,
        create_graph: OptArg<'_>,
    ) -> PyResult<()> {
        let retain = retain_graph.or(false, |o| bool_arg("backward", "retain_graph", o))?;
        let create = create_graph.or(false, |o| bool_arg("backward", "create_graph", o))?;
        let ys = one_or_many("backward", "ys", ys)?;
        let dys = seeds("backward", &ys, dys)?;
        let key = self.key.clone();
        if create {
            py.detach(move || key.backward_create_graph(&ys, &dys)).py()
        } else if retain {
            py.detach(move || key.backward_retain(&ys, &dys)).py()
        } else {
            py.detach(move || key.backward(&ys, &dys)).py()
        }
    }

    /// The name of the recorded op that produced `tensor` on this key (None for an attached
    /// tensor or one the key does not track).
    fn _producer_name(&self, tensor: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let t = tensor_arg("grad_fn", "tensor", tensor)?;
        Ok(self.key.producer_name(&t))
    }

    /// The recorded op that produced `tensor` on this key, as a graph node (None for an
    /// attached tensor or one the key does not track): what `Tensor.grad_fn` wraps.
    fn _producer_node(&self, tensor: &Bound<'_, PyAny>) -> PyResult<Option<PyGradNode>> {
        let t = tensor_arg("grad_fn", "tensor", tensor)?;
        Ok(self.key.producer_node(&t).map(PyGradNode))
    }

    /// Stops tracking `tensor` (in place, for every handle of it).
    fn _forget(&self, tensor: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = tensor_arg("detach_", "tensor", tensor)?;
        self.key.forget(&t);
        Ok(())
    }

    /// Whether backward adds `tensor`'s gradient into its `.grad`.
    fn _accumulates_into(&self, tensor: &Bound<'_, PyAny>) -> PyResult<bool> {
        let t = tensor_arg("retains_grad", "tensor", tensor)?;
        Ok(self.key.accumulates_into(&t))
    }

    /// Whether `tensor` is attached to this key (not merely computed from attached ones).
    fn _is_leaf_of(&self, tensor: &Bound<'_, PyAny>) -> PyResult<bool> {
        let t = tensor_arg("is_leaf", "tensor", tensor)?;
        Ok(self.key.is_leaf_of(&t))
    }

    /// Stops recording and frees the tape without running backward.
    fn finish(&self) {
        self.key.finish()
    }

    /// Per recorded op: its name and the `(shape, dtype, bytes)` of each tensor its rule keeps.
    fn saved_tensors_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (name, saved) in self.key.saved_tensors_report() {
            let entries = PyList::empty(py);
            for t in saved {
                let bytes = t.numel() * t.dtype().size_in_bytes();
                entries.append((PyTuple::new(py, t.shape())?, t.dtype().name(), bytes))?;
            }
            out.append((name, entries))?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        let state = if self.key.is_finished() {
            "finished"
        } else if self.key.is_active() {
            "recording"
        } else {
            "inactive"
        };
        format!("GradKey(name={:?}, {state})", self.key.name())
    }
}

/// A node of a key's graph (see `ferrograd::autograd::GradNode`), as `Tensor.grad_fn`'s
/// objects hold it.
#[pyclass(name = "_GradNode", module = "ferrograd", frozen)]
pub struct PyGradNode(ferrograd::autograd::GradNode);

#[pymethods]
impl PyGradNode {
    /// The recorded op's name.
    fn name(&self) -> String {
        self.0.name()
    }
    /// Whether this is an attached tensor's record (PyTorch's `AccumulateGrad`).
    fn is_leaf(&self) -> bool {
        self.0.is_leaf()
    }
    /// An identity for the life of the record.
    fn id(&self) -> usize {
        self.0.id()
    }
    /// The attached tensor of a leaf record (a new handle), else None.
    fn variable(&self) -> Option<crate::tensor::PyTensor> {
        self.0.variable().map(crate::tensor::PyTensor::from)
    }
    /// Whether `tensor` is this leaf record's attached tensor.
    fn is_variable(&self, tensor: &Bound<'_, PyAny>) -> PyResult<bool> {
        let t = tensor_arg("grad_fn", "tensor", tensor)?;
        Ok(self.0.is_variable(&t))
    }
    /// Per input of the op: `(node, index)`, or None for an input that is not tracked.
    fn inputs(&self) -> Vec<Option<(PyGradNode, usize)>> {
        self.0
            .inputs()
            .into_iter()
            .map(|i| i.map(|(n, k)| (PyGradNode(n), k)))
            .collect()
    }
}
