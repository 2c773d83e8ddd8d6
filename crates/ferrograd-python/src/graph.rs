//! Graph mode's bindings: the tracer's entry points (what `ferrograd.trace` drives), the
//! `Graph` class and the compiled executable.

use std::sync::Arc;

use ferrograd::graph::{self, Callable, Executable, Graph, Options};
use ferrograd::Tensor;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::describe;
use crate::errors::{external, ResultExt};
use crate::grad::callable_name;
use crate::tensor::{tensor_list, PyTensor};

/// A traced step: its nodes in order (`len`, `str`: one line per node, `to_dot`: Graphviz).
#[pyclass(name = "Graph", module = "ferrograd", frozen)]
pub struct PyGraph {
    graph: Arc<Graph>,
}

#[pymethods]
impl PyGraph {
    fn __len__(&self) -> usize {
        self.graph.len()
    }
    fn __str__(&self) -> String {
        self.graph.to_string()
    }
    fn __repr__(&self) -> String {
        format!(
            "Graph({} nodes, {} inputs, {} captured, {} outputs)",
            self.graph.len(),
            self.graph.n_inputs,
            self.graph.captures.len(),
            self.graph.outputs.len()
        )
    }
    /// Graphviz source of the graph.
    fn to_dot(&self) -> String {
        self.graph.to_dot()
    }
    /// The shapes of the constants in the graph (data made inside the function from Python
    /// values, fixed into every run).
    fn constant_shapes(&self) -> Vec<Vec<usize>> {
        self.graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| {
                matches!(n.kind, ferrograd::graph::NodeKind::Constant(_))
                    && !self.graph.shape_constants.contains(i)
            })
            .map(|(_, n)| n.shape.clone())
            .collect()
    }
    /// How many nodes of each op (or leaf kind).
    fn op_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for node in &self.graph.nodes {
            let name = node.name();
            let n: usize = d.get_item(name)?.map_or(Ok(0), |v| v.extract())?;
            d.set_item(name, n + 1)?;
        }
        Ok(d)
    }
}

/// A graph after its passes and memory plan, ready to run.
#[pyclass(name = "_Executable", module = "ferrograd", frozen)]
pub struct PyExecutable {
    exe: Executable,
}

#[pymethods]
impl PyExecutable {
    /// Runs the step on `inputs`; returns its outputs.
    fn run(&self, py: Python<'_>, inputs: &Bound<'_, PyAny>) -> PyResult<Vec<PyTensor>> {
        let ins = tensor_list("trace", "inputs", inputs)?;
        let exe = &self.exe;
        let outs = py.detach(|| exe.run(&ins)).py()?;
        Ok(outs.into_iter().map(PyTensor::from).collect())
    }
    /// Runs the step unless a recording key tracks an input (the call must then run eagerly)
    /// or a guard fails (the function must be traced again): None then.
    fn try_run(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Vec<PyTensor>>> {
        let ins = tensor_list("trace", "inputs", inputs)?;
        if graph::keys_recording()
            || ins.iter().any(|t| t.is_recorded())
            || self.exe.guard_failure_with(&ins).is_some()
        {
            return Ok(None);
        }
        let exe = &self.exe;
        let outs = py.detach(|| exe.run(&ins)).py()?;
        Ok(Some(outs.into_iter().map(PyTensor::from).collect()))
    }
    /// The tensors the graph captured (read by reference).
    fn captures(&self) -> Vec<PyTensor> {
        self.exe
            .graph()
            .captures
            .iter()
            .cloned()
            .map(PyTensor::from)
            .collect()
    }
    /// Why the graph cannot run now on `inputs` (then the function is traced again), or
    /// None.
    #[pyo3(signature = (inputs=None))]
    fn guard_failure(&self, inputs: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
        let ins = match inputs {
            Some(i) => tensor_list("trace", "inputs", i)?,
            None => Vec::new(),
        };
        Ok(self.exe.guard_failure_with(&ins))
    }
    #[getter]
    fn graph(&self) -> PyGraph {
        PyGraph {
            graph: Arc::new(self.exe.graph().clone()),
        }
    }
    /// The plan's figures.
    fn memory_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.exe.memory_report();
        let d = PyDict::new(py);
        d.set_item("planned_peak_bytes", r.planned_peak_bytes)?;
        d.set_item("held_bytes", r.held_bytes)?;
        d.set_item("unplanned_peak_bytes", r.unplanned_peak_bytes)?;
        d.set_item("saved_bytes", r.saved_bytes)?;
        d.set_item("recomputed_nodes", r.recomputed_nodes)?;
        d.set_item("buffers", r.buffers)?;
        d.set_item("buffer_bytes", r.buffer_bytes)?;
        d.set_item("nodes", r.nodes)?;
        d.set_item("fused_chains", r.fused_chains)?;
        d.set_item("fused_nodes", r.fused_nodes)?;
        d.set_item("inplace_outputs", r.inplace_outputs)?;
        d.set_item("arena_bytes", self.exe.arena_bytes())?;
        d.set_item("last_run_new_buffers", self.exe.last_run_fresh_buffers())?;
        Ok(d)
    }
}

/// Starts a trace; returns the handles the function receives for `inputs`.
#[pyfunction]
fn _trace_begin(inputs: &Bound<'_, PyAny>) -> PyResult<Vec<PyTensor>> {
    let ins = tensor_list("trace", "inputs", inputs)?;
    let hs = graph::begin(&ins).py()?;
    Ok(hs.into_iter().map(PyTensor::from).collect())
}

/// Ends the trace with the function's tensor results; returns the graph.
#[pyfunction]
fn _trace_end(outputs: &Bound<'_, PyAny>) -> PyResult<PyGraph> {
    let outs = match tensor_list("trace", "outputs", outputs) {
        Ok(o) => o,
        Err(e) => {
            graph::abort();
            return Err(e);
        }
    };
    let g = graph::end(&outs).py()?;
    Ok(PyGraph { graph: Arc::new(g) })
}

/// Drops the active trace (the function raised).
#[pyfunction]
fn _trace_abort() {
    graph::abort()
}

/// Whether the traces started from now keep what they change in tensors from outside them,
/// so that `_trace_undo` can put it back (off: drops what was kept).
#[pyfunction]
fn _trace_keep_undo(on: bool) {
    graph::keep_undo(on)
}

/// Starts (`True`) or ends (`False`) a guarded part of the active trace; returns, for the
/// part that ends, each tensor from outside the trace it wrote in place with a traced copy of
/// its value from before the part's first write into it.
#[pyfunction]
fn _trace_guard_writes(on: bool) -> Vec<(PyTensor, PyTensor)> {
    graph::guard_writes(on)
        .into_iter()
        .map(|(t, old)| (PyTensor::from(t), PyTensor::from(old)))
        .collect()
}

/// Puts back the values and `.grad`s the last trace changed in tensors from outside it (kept
/// by `_trace_keep_undo(True)`); returns whether anything was kept.
#[pyfunction]
fn _trace_undo() -> PyResult<bool> {
    graph::undo().py()
}

/// Whether a recording key tracks any of `tensors` (a traced call then runs eagerly, for it).
#[pyfunction]
fn _any_recorded(tensors: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ts = tensor_list("trace", "inputs", tensors)?;
    Ok(ts.iter().any(|t| t.is_recorded()))
}

/// Whether an op run now would be recorded by a gradient key (a traced call then runs
/// eagerly).
#[pyfunction]
fn _keys_recording() -> bool {
    graph::keys_recording()
}

/// Whether ops on this thread are being traced.
#[pyfunction]
fn _tracing() -> bool {
    graph::is_tracing()
}

/// Marks the constants a trace makes from now on as built from shapes and Python numbers
/// (not reported as data fixed into the graph); returns the previous setting.
#[pyfunction]
fn _trace_shape_data(on: bool) -> bool {
    graph::set_shape_data(on)
}

/// Gradients of `ys` (seeded with `dys`) with respect to `xs` by the graph gradient pass; None
/// for an `x` no gradient reaches.
#[pyfunction]
fn _trace_gradients(
    py: Python<'_>,
    ys: &Bound<'_, PyAny>,
    dys: &Bound<'_, PyAny>,
    xs: &Bound<'_, PyAny>,
) -> PyResult<Vec<Option<PyTensor>>> {
    let ys = tensor_list("grad", "ys", ys)?;
    let dys = tensor_list("grad", "dys", dys)?;
    let xs = tensor_list("grad", "xs", xs)?;
    let gs = py
        .detach(|| graph::gradients(&ys, &dys, &xs, &mut |_, _| Ok(())))
        .py()?;
    Ok(gs.into_iter().map(|g| g.map(PyTensor::from)).collect())
}

/// `fn(*inputs)` as a node of the trace, run at this point of every run of the graph (a
/// gradient callback): returns what it returned. A function that returns None passes its first
/// input through (it runs for its effect), and must return None on every run.
#[pyfunction]
fn _trace_call(
    name: &str,
    func: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
) -> PyResult<Option<PyTensor>> {
    if !func.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "_trace_call: expected a callable, got {}",
            describe(func)
        )));
    }
    let ins = tensor_list(name, "inputs", inputs)?;
    if ins.is_empty() {
        return Err(PyValueError::new_err(format!(
            "_trace_call: {name} needs at least one tensor input"
        )));
    }
    let who = callable_name(func);
    let f = func.clone().unbind();
    let call_once = move |ts: &[Tensor]| -> ferrograd::Result<Option<Tensor>> {
        Python::attach(|py| -> PyResult<Option<Tensor>> {
            let args: Vec<PyTensor> = ts.iter().cloned().map(PyTensor::from).collect();
            let r = f.call1(py, pyo3::types::PyTuple::new(py, args)?)?;
            if r.is_none(py) {
                return Ok(None);
            }
            match r.bind(py).cast::<PyTensor>() {
                Ok(t) => Ok(Some(t.get().tensor())),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "{who} returned {}; expected a Tensor or None",
                    describe(r.bind(py))
                ))),
            }
        })
        .map_err(external)
    };
    // whether it returned None when traced: it must do the same on every run
    let first = call_once_traced(name, call_once, &ins)?;
    Ok(first.map(PyTensor::from))
}

/// Runs `call` once now (as a node of the trace when one is active) and returns its result.
fn call_once_traced(
    name: &str,
    call: impl Fn(&[Tensor]) -> ferrograd::Result<Option<Tensor>> + Send + Sync + 'static,
    ins: &[Tensor],
) -> PyResult<Option<Tensor>> {
    let call = Arc::new(call);
    if !graph::is_tracing() {
        return call(ins).py();
    }
    let returned_none = Arc::new(std::sync::OnceLock::<bool>::new());
    let (c, rn, label) = (call.clone(), returned_none.clone(), name.to_string());
    let callable: Callable = Arc::new(move |ts: &[Tensor]| {
        let out = c(ts)?;
        let none_when_traced = *rn.get_or_init(|| out.is_none());
        match (out, none_when_traced) {
            (Some(t), false) => Ok(t),
            (None, true) => Ok(ts[0].clone()),
            (Some(_), true) | (None, false) => Err(ferrograd::Error::Trace {
                op: label.clone(),
                msg: "returned None on one run and a tensor on another: a traced callback \
                      must do the same on every run"
                    .to_string(),
            }),
        }
    });
    let out = graph::call(name, callable, ins).py()?;
    Ok(match returned_none.get() {
        Some(true) => None,
        _ => Some(out),
    })
}

/// A call of a custom `Function` inside a trace: `outputs` (computed by its forward from
/// `inputs`) are replaced by handles through which the gradient pass calls
/// `backward(grads) -> input grads` (lists, None entries allowed) instead of differentiating
/// the forward's ops.
#[pyfunction]
fn _trace_custom(
    name: &str,
    inputs: &Bound<'_, PyAny>,
    outputs: &Bound<'_, PyAny>,
    backward: &Bound<'_, PyAny>,
) -> PyResult<Vec<PyTensor>> {
    let ins = tensor_list(name, "inputs", inputs)?;
    let outs = tensor_list(name, "outputs", outputs)?;
    let n_in = ins.len();
    let f = backward.clone().unbind();
    let label = name.to_string();
    let rule: graph::CustomRule = Arc::new(move |dys: &[Option<Tensor>]| {
        Python::attach(|py| -> PyResult<Vec<Option<Tensor>>> {
            let args: Vec<Option<PyTensor>> =
                dys.iter().map(|g| g.clone().map(PyTensor::from)).collect();
            let r = f.call1(py, (args,))?;
            let items: Vec<Bound<'_, PyAny>> = r.bind(py).try_iter()?.collect::<PyResult<_>>()?;
            if items.len() != n_in {
                return Err(PyValueError::new_err(format!(
                    "{label}.backward returned {} gradients for {n_in} inputs",
                    items.len()
                )));
            }
            items
                .iter()
                .map(|o| {
                    if o.is_none() {
                        Ok(None)
                    } else {
                        o.cast::<PyTensor>()
                            .map(|t| Some(t.get().tensor()))
                            .map_err(|_| {
                                PyTypeError::new_err(format!(
                                    "{label}.backward returned {}; expected Tensors or None",
                                    describe(o)
                                ))
                            })
                    }
                })
                .collect()
        })
        .map_err(external)
    });
    let hs = graph::custom(name, &ins, &outs, rule).py()?;
    Ok(hs.into_iter().map(PyTensor::from).collect())
}

/// Runs the passes and the memory plan on a traced graph.
#[pyfunction]
#[pyo3(signature = (graph, mirror=None, memory_budget=None))]
fn _compile(
    py: Python<'_>,
    graph: &PyGraph,
    mirror: Option<&Bound<'_, PyAny>>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyExecutable> {
    let mut opts = Options::default();
    match mirror.filter(|m| !m.is_none()) {
        None => {}
        Some(m) => {
            if let Ok(s) = m.extract::<String>() {
                if s != "auto" {
                    return Err(PyValueError::new_err(format!(
                        "trace: mirror must be None, \"auto\" or a callable policy(op_name) -> \
                         bool, got {s:?}"
                    )));
                }
                opts.mirror = graph::Mirror::Auto;
            } else if m.is_callable() {
                let f = m.clone().unbind();
                opts.mirror = graph::Mirror::Policy(Arc::new(move |op: &str| {
                    Python::attach(|py| {
                        f.call1(py, (op,))
                            .and_then(|v| v.is_truthy(py))
                            .map_err(external)
                    })
                }));
            } else {
                return Err(PyTypeError::new_err(format!(
                    "trace: mirror must be None, \"auto\" or a callable policy(op_name) -> bool, \
                     got {}",
                    describe(m)
                )));
            }
        }
    }
    if let Some(b) = memory_budget.filter(|b| !b.is_none()) {
        let bytes: i128 = b
            .extract()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "trace: memory_budget must be a number of bytes, got {}",
                    describe(b)
                ))
            })
            .and_then(|v: i128| {
                if v <= 0 || v > usize::MAX as i128 {
                    Err(PyValueError::new_err(format!(
                        "trace: memory_budget must be a positive number of bytes, got {v}"
                    )))
                } else {
                    Ok(v)
                }
            })?;
        opts.memory_budget = Some(bytes as usize);
    }
    let g = (*graph.graph).clone();
    let exe = py
        .detach(|| Executable::compile(g, &opts))
        .map_err(|e| match e {
            ferrograd::Error::Invalid { .. } => PyValueError::new_err(e.to_string()),
            e => crate::errors::to_pyerr(e),
        })?;
    Ok(PyExecutable { exe })
}

/// Adds the graph-mode classes and functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGraph>()?;
    m.add_class::<PyExecutable>()?;
    m.add_function(wrap_pyfunction!(_trace_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_end, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_abort, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_keep_undo, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_guard_writes, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_undo, m)?)?;
    m.add_function(wrap_pyfunction!(_tracing, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_shape_data, m)?)?;
    m.add_function(wrap_pyfunction!(_any_recorded, m)?)?;
    m.add_function(wrap_pyfunction!(_keys_recording, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_call, m)?)?;
    m.add_function(wrap_pyfunction!(_compile, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_custom, m)?)?;
    Ok(())
}
