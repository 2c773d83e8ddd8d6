//! Tracing: one more layer under [`crate::apply`]. While a trace is active on a thread, every op
//! still runs (so the trace has concrete values, and the first call of a traced function is an
//! ordinary step), and each op also becomes a node of the trace's graph, its output tensor
//! tagged with that node. Tensors from outside the function become captures (by reference),
//! factories and data become fill and constant nodes, in-place writes to captured tensors and
//! `.grad` updates become the graph's effects. No gradient tape records while a trace is
//! active: backward inside a trace is the graph gradient pass (`graph::grad`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::ir::{Callable, Graph, Node, NodeId, NodeKind};
use crate::autograd::CeilingGuard;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::tensor::Tensor;

/// The trace a tensor's value belongs to, and its node there.
pub(crate) type TraceRef = (u64, NodeId);

static NEXT_TRACE: AtomicU64 = AtomicU64::new(1);

/// Nodes traced between two sweeps that release values nothing can read any more.
const SWEEP_EVERY: usize = 16;

/// Whether a trace is active on this thread: 0 none, 1 tracing, 2 suspended (inside a
/// callback node, whose own ops run untraced).
const NONE: u8 = 0;
const TRACING: u8 = 1;
const SUSPENDED: u8 = 2;

pub(crate) struct Tracer {
    id: u64,
    pub(crate) graph: Graph,
    /// Each node's value at trace time (what the gradient pass's rules read); `None` once
    /// released: no tensor shares its memory any more and no rule will read it (see
    /// [`Tracer::release`]), so the first call holds what an eager step would.
    pub(crate) values: Vec<Option<Tensor>>,
    /// Whether some op's gradient rule may read the node's value (its save mask keeps it).
    saved: Vec<bool>,
    /// The nodes over each storage (by address), every kind: a storage is released when no
    /// tensor outside these nodes holds it.
    holders: HashMap<usize, Vec<NodeId>>,
    /// Nodes that may be released later (not saved, not a capture, argument or constant).
    candidates: Vec<NodeId>,
    /// Nodes pushed since the last release sweep.
    since_sweep: usize,
    /// The version of each value's storage when the node was made: a value written in place
    /// since is stale (the graph has it as it was, eager code would see the write).
    versions: Vec<u64>,
    /// Storage (by address) of each input, which the function must not write in place.
    input_storage: HashMap<usize, usize>,
    /// The nodes whose values live in each storage (by address), latest last: a handle the
    /// trace did not tag (a snapshot, another handle of a captured tensor) is the node over
    /// the same storage and layout.
    by_storage: HashMap<usize, Vec<NodeId>>,
    /// The capture node of each capture.
    capture_nodes: Vec<NodeId>,
    /// Whether a gradient pass is adding the nodes now.
    grad_pass: bool,
    /// Whether the nodes that pass adds can be differentiated again (`create_graph`, or a
    /// manager outside it recording): else no gradient flows through them, as on the tape,
    /// and the trace keeps none of their values for another pass.
    grad_pass_differentiable: bool,
    /// The index of the trace's own ceiling in this thread's stack.
    depth: usize,
    /// No tape records while tracing.
    _blocked: CeilingGuard,
}

/// Whether nothing but the active trace (and `extra` other references the caller knows of)
/// holds the handle `t`: a view no code can read any more, which a write need not rebuild.
pub(crate) fn held_only_by_trace(t: &Tensor, extra: usize) -> bool {
    with_tracer(|tr| match trace_ref(t) {
        Some((id, n)) if id == tr.id => {
            let own = tr.values[n]
                .as_ref()
                .is_some_and(|v| Arc::ptr_eq(&v.0, &t.0));
            Arc::strong_count(&t.0) <= extra + usize::from(own)
        }
        _ => false,
    })
    .unwrap_or(false)
}

/// Runs `f` with reads of values written in place since allowed: the ops that rebuild the
/// handles an in-place write changed read their old values on purpose (only the elements the
/// write left as they were, which the buffer still holds).
pub(crate) fn reading_stale<R>(f: impl FnOnce() -> R) -> R {
    let was = READING_STALE.with(|r| r.replace(true));
    let out = f();
    READING_STALE.with(|r| r.set(was));
    out
}

/// Marks the constants made from now on as built from shapes and Python numbers the trace
/// keys on (an `arange`, a triangular mask), not from data that may change between calls;
/// returns the previous setting.
pub fn set_shape_data(on: bool) -> bool {
    SHAPE_DATA.with(|s| s.replace(on))
}

/// What a trace changed in tensors from outside it, kept when asked for ([`keep_undo`]) so
/// that [`undo`] can put it back: the values a tensor from outside had before the trace first
/// wrote into it in place, and the `.grad` such a tensor had before the trace first set it.
#[derive(Default)]
struct UndoLog {
    data: Vec<(Tensor, Tensor)>,
    grads: Vec<(Tensor, Option<Tensor>)>,
}

thread_local! {
    static UNDO: RefCell<Option<UndoLog>> = const { RefCell::new(None) };
    static GUARD: RefCell<Option<Vec<(Tensor, Tensor)>>> = const { RefCell::new(None) };
    static SHAPE_DATA: Cell<bool> = const { Cell::new(false) };
    static READING_STALE: Cell<bool> = const { Cell::new(false) };
    static STATE: Cell<u8> = const { Cell::new(NONE) };
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

/// Whether an op run now on this thread would be recorded by some gradient key (one is
/// recording and `no_grad` is not in force): a traced function then runs eagerly, so that the
/// key sees its ops.
pub fn keys_recording() -> bool {
    crate::autograd::record::is_recording_any_scoped() && crate::autograd::ceiling() != 0
}

/// Whether ops on this thread are being traced now.
#[inline]
pub fn is_tracing() -> bool {
    STATE.with(|s| s.get() == TRACING)
}

/// Runs `f` on the active tracer (`None` when there is none).
fn with_tracer<R>(f: impl FnOnce(&mut Tracer) -> R) -> Option<R> {
    TRACER.with(|t| t.borrow_mut().as_mut().map(f))
}

fn trace_ref(t: &Tensor) -> Option<TraceRef> {
    t.0.meta().trace
}

fn set_ref(t: &Tensor, r: TraceRef) {
    t.0.meta().trace = Some(r);
}

impl Tracer {
    fn push(&mut self, kind: NodeKind, value: &Tensor) -> NodeId {
        let id = self.graph.nodes.len();
        self.graph.nodes.push(Node {
            kind,
            shape: value.shape().to_vec(),
            dtype: value.dtype(),
            device: value.device(),
            grad_pass: self.grad_pass,
            recompute: false,
            // (a gradient pass's nodes also follow `no_grad`: a custom backward that computes
            // under it, between backwards of its own, makes constants, as it does eagerly)
            no_grad: (self.grad_pass && !self.grad_pass_differentiable)
                || !crate::autograd::grad_enabled(),
        });
        self.values.push(Some(value.clone()));
        self.saved.push(false);
        self.versions.push(value.storage().version());
        self.holders.entry(storage_key(value)).or_default().push(id);
        if !matches!(
            self.graph.nodes[id].kind,
            NodeKind::Input(_) | NodeKind::Capture(_) | NodeKind::Constant(_)
        ) {
            self.candidates.push(id);
        }
        if !matches!(
            self.graph.nodes[id].kind,
            NodeKind::Detach(_) | NodeKind::Call { .. }
        ) {
            // a handle of a detached value or of what a callback returned is the value it came
            // from, through which gradients flow
            self.by_storage
                .entry(storage_key(value))
                .or_default()
                .push(id);
        }
        set_ref(value, (self.id, id));
        id
    }

    /// The node of `t`: its own when the trace made it (or the node over the same storage
    /// and layout), else a capture (made on first use). A node whose value was written in place
    /// since is refused.
    pub(crate) fn node_of(&mut self, t: &Tensor) -> Result<NodeId> {
        let n = match self.lookup(t) {
            Some(n) => n,
            None => self.capture(t),
        };
        self.check_fresh(n)?;
        Ok(n)
    }

    /// `t`'s node, if the trace has one (without capturing it).
    fn lookup(&self, t: &Tensor) -> Option<NodeId> {
        if let Some((id, n)) = trace_ref(t) {
            if id == self.id {
                return Some(n);
            }
        }
        let nodes = self.by_storage.get(&storage_key(t))?;
        let latest = nodes
            .iter()
            .rev()
            .copied()
            .find(|&n| self.layout_is(n, t))?;
        // views of the same layout (a reshape to the same shape, `x[:]`) hold the same data
        // but only some of the tensor's uses read through them: the handle is the first node
        // with this data (the argument, capture or in-place write the views came from), or a
        // gradient taken for it would miss every other use
        let version = self.versions[latest];
        nodes
            .iter()
            .copied()
            .find(|&n| self.versions[n] == version && self.layout_is(n, t))
    }

    /// Refuses node `n` if its value's storage was written in place after it was made.
    pub(crate) fn check_fresh(&self, n: NodeId) -> Result<()> {
        if self.is_fresh(n) || READING_STALE.with(Cell::get) {
            return Ok(());
        }
        let node = &self.graph.nodes[n];
        Err(Error::Trace {
            op: node.name().to_string(),
            msg: format!(
                "a {} tensor of shape {:?} (node %{n}) is read after an in-place write into its \
                 memory (through another handle or view of it): a traced function may write in \
                 place only through the tensor it then keeps using",
                node.dtype, node.shape
            ),
        })
    }

    /// Whether node `n`'s value still has the data it had when the node was made (a released
    /// value was fresh when released, and nothing could write into it since).
    fn is_fresh(&self, n: NodeId) -> bool {
        match &self.values[n] {
            Some(v) => v.storage().version() == self.versions[n],
            None => true,
        }
    }

    /// Whether node `n`'s (unreleased) value has `t`'s layout.
    fn layout_is(&self, n: NodeId, t: &Tensor) -> bool {
        self.values[n]
            .as_ref()
            .is_some_and(|v| v.layout() == t.layout())
    }

    /// Marks what the gradient rule of op node `n` (over `inputs`) may read as saved, then
    /// now and then releases what nothing can read any more.
    fn after_op(&mut self, n: NodeId, op: &Op, inputs: &[&Tensor]) {
        let mask = match self.graph.nodes[n].no_grad {
            true => crate::autograd::SaveMask::default(),
            false => crate::autograd::graph_saves(op, inputs),
        };
        if let NodeKind::Op { inputs: ins, .. } = &self.graph.nodes[n].kind {
            for (k, &i) in ins.iter().enumerate() {
                if k >= 64 || mask.keeps(k) {
                    self.saved[i] = true;
                    if self.values[i].is_none() {
                        if let Some(t) = inputs.get(k) {
                            // a node released while no rule wanted it, read again now through
                            // another handle of the same data: the value written into a
                            // captured tensor in place (`w -= lr * g`; the buffer the update
                            // computed was released, the parameter holds the data)
                            self.values[i] = Some((*t).clone());
                            self.versions[i] = t.storage().version();
                        }
                    }
                }
            }
        }
        if mask.outputs {
            self.saved[n] = true;
        }
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY {
            self.since_sweep = 0;
            self.release();
        }
    }

    /// Releases the values of every storage only the trace still holds and no gradient rule
    /// may read: the storage is then unreachable (no tensor shares it), so no later op can
    /// take it as an input, and its memory returns to the pool as it would in eager mode.
    fn release(&mut self) {
        let mut i = 0;
        while i < self.candidates.len() {
            let n = self.candidates[i];
            let keep = match &self.values[n] {
                None => false,
                Some(_) if self.saved[n] => false,
                Some(v) => {
                    let key = storage_key(v);
                    if self.releasable(key) {
                        self.release_storage(key);
                        false
                    } else {
                        true
                    }
                }
            };
            if keep {
                i += 1;
            } else {
                self.candidates.swap_remove(i);
            }
        }
    }

    /// Whether the values over storage `key` may be released: each is a node's own handle
    /// (nothing else holds it), fresh, of a releasable kind and not saved, and together they
    /// are every holder of the storage.
    fn releasable(&self, key: usize) -> bool {
        let Some(nodes) = self.holders.get(&key) else {
            return false;
        };
        let mut handles = 0;
        let mut storage = None;
        for &m in nodes {
            let Some(v) = &self.values[m] else {
                continue;
            };
            if self.saved[m]
                || Arc::strong_count(&v.0) != 1
                || v.storage().version() != self.versions[m]
                || matches!(
                    self.graph.nodes[m].kind,
                    NodeKind::Input(_) | NodeKind::Capture(_) | NodeKind::Constant(_)
                )
            {
                return false;
            }
            handles += 1;
            storage = Some(v.storage());
        }
        storage.is_some_and(|s| Arc::strong_count(s) == handles)
    }

    fn release_storage(&mut self, key: usize) {
        for m in self.holders.remove(&key).unwrap_or_default() {
            self.values[m] = None;
        }
        self.by_storage.remove(&key);
    }

    /// Captures `t` (a tensor from outside the function): its capture node.
    fn capture(&mut self, t: &Tensor) -> NodeId {
        let c = self.graph.captures.len();
        self.graph.captures.push(t.clone());
        let n = self.push(NodeKind::Capture(c), t);
        self.capture_nodes.push(n);
        n
    }

    /// Whether `t`'s memory existed before the trace: an argument, a tensor from outside
    /// (captured or not yet seen) or the `.grad` of one, not a value the trace computed.
    fn made_outside(&self, t: &Tensor) -> bool {
        match self.by_storage.get(&storage_key(t)) {
            None => true,
            Some(nodes) => nodes.iter().any(|&n| {
                matches!(
                    self.graph.nodes[n].kind,
                    NodeKind::Input(_)
                        | NodeKind::Capture(_)
                        | NodeKind::GradOf(_)
                        | NodeKind::InputGrad(_)
                )
            }),
        }
    }

    /// The capture `t` is the whole of (same storage and layout: the captured tensor or any
    /// handle of it, also one an in-place op continued), if any.
    fn capture_of(&self, t: &Tensor) -> Option<usize> {
        self.by_storage
            .get(&storage_key(t))?
            .iter()
            .find_map(|&n| match self.graph.nodes[n].kind {
                NodeKind::Capture(c) if self.layout_is(n, t) => Some(c),
                _ => None,
            })
    }

    /// The argument `t` is (the whole of it: the handle the function received, or the
    /// tensor the caller passed).
    fn input_of(&self, t: &Tensor) -> Option<usize> {
        self.by_storage
            .get(&storage_key(t))?
            .iter()
            .find_map(|&n| match self.graph.nodes[n].kind {
                NodeKind::Input(i) if self.layout_is(n, t) => Some(i),
                _ => None,
            })
    }

    /// Whether `t` shares memory with a captured tensor without being the whole of it.
    fn views_capture(&self, t: &Tensor) -> bool {
        self.by_storage.get(&storage_key(t)).is_some_and(|ns| {
            ns.iter()
                .any(|&n| matches!(self.graph.nodes[n].kind, NodeKind::Capture(_)))
        })
    }

    /// The capture whose `.grad` `t`'s is: `t` itself or another handle of the whole tensor
    /// (captured now if the function had not read it); `None` for a tensor the function made
    /// or a view.
    fn grad_owner(&mut self, t: &Tensor) -> Option<usize> {
        if let Some(c) = self.capture_of(t) {
            return Some(c);
        }
        if self.lookup(t).is_some() || self.views_capture(t) {
            return None;
        }
        let n = self.capture(t);
        match self.graph.nodes[n].kind {
            NodeKind::Capture(c) => Some(c),
            _ => None,
        }
    }
}

fn storage_key(t: &Tensor) -> usize {
    Arc::as_ptr(t.storage()) as usize
}

/// Starts tracing on this thread: the function's tensor arguments become input nodes. Returns
/// the handles the function must receive (over the same data, tagged as inputs).
pub fn begin(inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    if STATE.with(|s| s.get()) != NONE {
        return Err(Error::Trace {
            op: "trace".to_string(),
            msg: "a trace is already active on this thread".to_string(),
        });
    }
    let mut tracer = Tracer {
        id: NEXT_TRACE.fetch_add(1, Ordering::Relaxed),
        graph: Graph {
            n_inputs: inputs.len(),
            ..Graph::default()
        },
        values: Vec::new(),
        saved: Vec::new(),
        holders: HashMap::new(),
        candidates: Vec::new(),
        since_sweep: 0,
        versions: Vec::new(),
        input_storage: HashMap::new(),
        by_storage: HashMap::new(),
        grad_pass: false,
        grad_pass_differentiable: true,
        capture_nodes: Vec::new(),
        depth: crate::autograd::ceiling_depth(),
        _blocked: CeilingGuard::new(0),
    };
    let handles: Vec<Tensor> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            // (sharing the argument's `.grad`: the function reads and sets the caller's)
            let h = t.snapshot();
            // (a tensor passed twice is the first argument it was passed as)
            tracer
                .input_storage
                .entry(Arc::as_ptr(t.storage()) as usize)
                .or_insert(i);
            tracer.push(NodeKind::Input(i), &h);
            h
        })
        .collect();
    crate::autograd::set_trace_ceiling(tracer.depth);
    TRACER.with(|t| *t.borrow_mut() = Some(tracer));
    STATE.with(|s| s.set(TRACING));
    Ok(handles)
}

/// Ends the trace: `outputs` are the function's results. Returns the graph.
pub fn end(outputs: &[Tensor]) -> Result<Graph> {
    let mut tracer = take()?;
    let outs = outputs
        .iter()
        .map(|t| tracer.node_of(t))
        .collect::<Result<Vec<_>>>()?;
    tracer.graph.outputs = outs;
    Ok(tracer.graph)
}

/// Drops the active trace (the function raised).
pub fn abort() {
    let _ = take();
}

fn take() -> Result<Tracer> {
    STATE.with(|s| s.set(NONE));
    GUARD.with(|g| g.borrow_mut().take());
    crate::autograd::set_trace_ceiling(usize::MAX);
    TRACER
        .with(|t| t.borrow_mut().take())
        .ok_or_else(|| Error::Trace {
            op: "trace".to_string(),
            msg: "no trace is active".to_string(),
        })
}

/// Whether the traces started from now on this thread keep what they change in tensors from
/// outside them (parameters, optimizer state, buffers, arguments and their `.grad`), so that
/// [`undo`] can restore it: the first call of a traced function runs the step, and a graph
/// that then cannot be compiled (a memory budget no plan meets) must leave no trace of it.
/// Turning it off drops what was kept.
pub fn keep_undo(on: bool) {
    UNDO.with(|u| *u.borrow_mut() = on.then(UndoLog::default));
}

/// Puts back what the last trace changed in tensors from outside it (see [`keep_undo`]):
/// their values and `.grad`s as they were before it. Returns whether anything was kept.
pub fn undo() -> Result<bool> {
    let Some(log) = UNDO.with(|u| u.borrow_mut().take()) else {
        return Ok(false);
    };
    let _no_grad = crate::autograd::no_grad();
    for (dst, old) in log.data.into_iter().rev() {
        dst.detach().update_("trace", &old)?;
    }
    for (t, old) in log.grads.into_iter().rev() {
        *t.grad_cell().lock().unwrap_or_else(|e| e.into_inner()) = old;
    }
    Ok(true)
}

/// Starts (`true`) or ends (`false`) a guarded part of the active trace and returns what the
/// part that ends wrote: each tensor from outside the trace written in place during it, with a
/// node of the graph holding its value from before the part's first write into it. A step the
/// graph may have to skip at run time (a scaler's step on inf/NaN gradients) selects between
/// the two after the part, so that a skip also undoes what hooks of the step wrote.
pub fn guard_writes(on: bool) -> Vec<(Tensor, Tensor)> {
    let done = GUARD.with(|g| g.borrow_mut().take());
    if on {
        GUARD.with(|g| *g.borrow_mut() = Some(Vec::new()));
    }
    done.unwrap_or_default()
}

/// Keeps, as a node of the graph, `dst`'s value before its first in-place write within a
/// guarded part of the trace (see [`guard_writes`]), when `dst` is from outside the trace.
fn guard_old_value(dst: &Tensor) -> Result<()> {
    let wanted = GUARD.with(|g| {
        g.borrow().as_ref().is_some_and(|log| {
            !log.iter()
                .any(|(t, _)| Arc::ptr_eq(t.storage(), dst.storage()) && t.layout() == dst.layout())
        })
    });
    if !wanted || !with_tracer(|tr| tr.made_outside(dst)).unwrap_or(false) {
        return Ok(());
    }
    // a copy made while tracing: a node that reads `dst`'s value as it is now
    let old = {
        let _no_grad = crate::autograd::no_grad();
        dst.detach().copy()?
    };
    GUARD.with(|g| {
        if let Some(log) = g.borrow_mut().as_mut() {
            log.push((dst.clone(), old));
        }
    });
    Ok(())
}

/// Keeps a copy of `dst`'s value before the trace's first in-place write into it, when the
/// trace keeps an undo log and `dst` is from outside the trace.
fn keep_old_value(dst: &Tensor) -> Result<()> {
    let wanted = UNDO.with(|u| {
        u.borrow().as_ref().is_some_and(|log| {
            !log.data
                .iter()
                .any(|(t, _)| Arc::ptr_eq(t.storage(), dst.storage()) && t.layout() == dst.layout())
        })
    });
    if !wanted || !with_tracer(|tr| tr.made_outside(dst)).unwrap_or(false) {
        return Ok(());
    }
    // the copy is no part of the graph
    STATE.with(|s| s.set(SUSPENDED));
    let copy = dst.detach().copy();
    STATE.with(|s| s.set(TRACING));
    let copy = copy?;
    UNDO.with(|u| {
        if let Some(log) = u.borrow_mut().as_mut() {
            log.data.push((dst.clone(), copy));
        }
    });
    Ok(())
}

/// Keeps `t`'s `.grad` before the trace first sets it, when the trace keeps an undo log.
fn keep_old_grad(t: &Tensor) {
    UNDO.with(|u| {
        if let Some(log) = u.borrow_mut().as_mut() {
            if !log.grads.iter().any(|(g, _)| Arc::ptr_eq(&g.0, &t.0)) {
                let old = t.0.meta().grad.clone();
                let old = old.and_then(|c| c.lock().unwrap_or_else(|e| e.into_inner()).clone());
                log.grads.push((t.clone(), old));
            }
        }
    });
}

/// After an op ran: its output becomes a node (called by `apply`).
#[inline]
pub(crate) fn on_op(op: &Op, inputs: &[&Tensor], out: &Tensor) -> Result<()> {
    if !is_tracing() {
        return Ok(());
    }
    with_tracer(|tr| {
        let ins = inputs
            .iter()
            .map(|t| tr.node_of(t))
            .collect::<Result<Vec<_>>>()?;
        let n = tr.push(
            NodeKind::Op {
                op: op.clone(),
                inputs: ins,
            },
            out,
        );
        tr.after_op(n, op, inputs);
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// A factory's new tensor (every element `value`) becomes a fill node.
#[inline]
pub(crate) fn on_fill(t: &Tensor, value: f64) {
    if is_tracing() {
        with_tracer(|tr| tr.push(NodeKind::Fill(value), t));
    }
}

/// Data made inside the function becomes a constant node.
#[inline]
pub(crate) fn on_constant(t: &Tensor) {
    if is_tracing() {
        with_tracer(|tr| {
            let n = tr.push(NodeKind::Constant(t.view(t.layout().clone())), t);
            if READING_STALE.with(Cell::get) || SHAPE_DATA.with(Cell::get) {
                tr.graph.shape_constants.push(n);
            }
        });
    }
}

/// `detach` of a traced tensor: the same value, through which no gradient flows.
pub(crate) fn on_detach(src: &Tensor, out: &Tensor) {
    if !is_tracing() {
        return;
    }
    with_tracer(|tr| {
        // a stale source is refused where the detached value is used
        let n = match tr.lookup(src) {
            Some(n) => n,
            None => tr.capture(src),
        };
        tr.push(NodeKind::Detach(n), out);
        if !tr.is_fresh(n) {
            // the view shares the stale memory: so is it
            let last = tr.versions.len() - 1;
            tr.versions[last] = tr.versions[n];
        }
    });
}

/// An in-place update of `dst` to `result`'s value: a captured tensor takes it at the end of
/// every run; a tensor the function made is simply `result` from now on (the graph is
/// functional). Writing into a view of a captured tensor is refused.
pub(crate) fn on_update(op: &str, dst: &Tensor, result: &Tensor) -> Result<()> {
    if !is_tracing() {
        return Ok(());
    }
    keep_old_value(dst)?;
    guard_old_value(dst)?;
    with_tracer(|tr| {
        let node = tr.node_of(result)?;
        if let Some(&i) = tr.input_storage.get(&(Arc::as_ptr(dst.storage()) as usize)) {
            // the whole argument takes the new value at the end of every run (as a captured
            // tensor does); a part of it is refused
            if tr.input_of(dst) == Some(i) {
                tr.graph.input_writes.retain(|&(w, _)| w != i);
                tr.graph.input_writes.push((i, node));
                return Ok(());
            }
            return Err(Error::Trace {
                op: op.to_string(),
                msg: format!(
                    "cannot write in place into a view (shape {:?}) of argument {i} of a traced \
                     function: write into the argument itself, or return the new value",
                    dst.shape()
                ),
            });
        }
        if let Some(c) = tr.capture_of(dst) {
            tr.graph.writes.push((c, node));
            return Ok(());
        }
        if tr.lookup(dst).is_none() && !tr.views_capture(dst) {
            // a tensor from outside the function that it writes without having read it
            // (`ema.copy_(x)`): captured now, so every run writes it, not only this one
            let n = tr.capture(dst);
            if let NodeKind::Capture(c) = tr.graph.nodes[n].kind {
                tr.graph.writes.push((c, node));
            }
            return Ok(());
        }
        match tr.views_capture(dst) {
            true => Err(Error::Trace {
                op: op.to_string(),
                msg: format!(
                    "cannot write in place into a view (shape {:?}) of a tensor from outside \
                     the traced function; write into the tensor itself",
                    dst.shape()
                ),
            }),
            false => {
                // `dst` now stands for `node`, whose value is `result`'s own handle: keep it,
                // since a rule of a later op that reads `dst` reads that value (released once
                // nothing else held it, a `silu_` whose rule keeps only its input left the
                // next op's gradient without it)
                tr.saved[node] = true;
                Ok(())
            }
        }
    })
    .unwrap_or(Ok(()))
}

/// `t.grad` read inside the trace: the `.grad` of a tensor from outside is read at the start
/// of every run (a `grad_of` node), and whether it was `None` is a condition of the trace.
pub(crate) fn on_get_grad(t: &Tensor, grad: Option<&Tensor>) {
    if !is_tracing() {
        return;
    }
    with_tracer(|tr| {
        if let Some(i) = tr.input_of(t) {
            // an argument's .grad: read from the tensor each run is given
            if !tr.graph.input_grad_guards.iter().any(|&(g, _)| g == i)
                && !tr.graph.input_grads.iter().any(|&(g, _)| g == i)
            {
                tr.graph.input_grad_guards.push((i, grad.is_none()));
            }
            if let Some(g) = grad {
                if !trace_ref(g).is_some_and(|(id, _)| id == tr.id) {
                    tr.push(NodeKind::InputGrad(i), g);
                }
            }
            return;
        }
        let Some(c) = tr.grad_owner(t) else {
            return;
        };
        if !tr.graph.grad_guards.iter().any(|&(g, _)| g == c)
            && !tr.graph.grads.iter().any(|&(g, _)| g == c)
        {
            tr.graph.grad_guards.push((c, grad.is_none()));
        }
        if let Some(g) = grad {
            if !trace_ref(g).is_some_and(|(id, _)| id == tr.id) {
                tr.push(NodeKind::GradOf(c), g);
            }
        }
    });
}

/// `t.grad = grad` inside the trace: a tensor from outside is left with it after every run.
pub(crate) fn on_set_grad(t: &Tensor, grad: Option<&Tensor>) -> Result<()> {
    if !is_tracing() {
        return Ok(());
    }
    keep_old_grad(t);
    with_tracer(|tr| {
        if let Some(i) = tr.input_of(t) {
            let node = grad.map(|g| tr.node_of(g)).transpose()?;
            tr.graph.input_grads.retain(|&(g, _)| g != i);
            tr.graph.input_grads.push((i, node));
            return Ok(());
        }
        let Some(c) = tr.grad_owner(t) else {
            return Ok(());
        };
        let node = grad.map(|g| tr.node_of(g)).transpose()?;
        tr.graph.grads.retain(|&(g, _)| g != c);
        tr.graph.grads.push((c, node));
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// The error for reading the value of a traced tensor (`what`: `item`, `numpy`, `bool`, ...).
pub fn check_read(t: &Tensor, what: &str) -> Result<()> {
    if !is_tracing() {
        return Ok(());
    }
    let made_by = with_tracer(|tr| match trace_ref(t) {
        Some((id, mut n)) if id == tr.id => {
            // a detached handle's value was made by the op it detaches
            while let NodeKind::Detach(x) = tr.graph.nodes[n].kind {
                n = x;
            }
            Some(tr.graph.nodes[n].name().to_string())
        }
        _ => None,
    })
    .flatten();
    match made_by {
        None => Ok(()),
        Some(op) => Err(Error::Trace {
            op: what.to_string(),
            msg: format!(
                "cannot read the value of a tensor of shape {:?} computed by {op} inside a \
                 traced function: its value at trace time would be fixed into every later run \
                 (return it and read it after the call, or compute with tensor ops)",
                t.shape()
            ),
        }),
    }
}

/// `callable(inputs)` as a node run at this point of every run of the graph (a gradient
/// callback): at trace time it runs now, its own ops untraced. Outside a trace it just runs.
pub fn call(name: &str, callable: Callable, inputs: &[Tensor]) -> Result<Tensor> {
    if !is_tracing() {
        return callable(inputs);
    }
    STATE.with(|s| s.set(SUSPENDED));
    let out = callable(inputs);
    STATE.with(|s| s.set(TRACING));
    let out = out?;
    // a handle of its own: the node's value is not whatever tensor the callable returned
    let out = out.view(out.layout().clone());
    with_tracer(|tr| {
        let ins = inputs
            .iter()
            .map(|t| tr.node_of(t))
            .collect::<Result<Vec<_>>>()?;
        tr.push(
            NodeKind::Call {
                name: name.to_string(),
                callable,
                inputs: ins,
            },
            &out,
        );
        Ok(())
    })
    .unwrap_or(Ok(()))?;
    Ok(out)
}

/// A call of a function with its own gradient rule (a user's `Function`), inside a trace:
/// `outputs` are what its forward computed from `inputs` (traced as usual); the returned
/// handles stand for them, and the gradient pass applies `rule` at them instead of
/// differentiating the forward's ops.
pub fn custom(
    name: &str,
    inputs: &[Tensor],
    outputs: &[Tensor],
    rule: super::ir::CustomRule,
) -> Result<Vec<Tensor>> {
    active(name, |tr| {
        let ins = inputs
            .iter()
            .map(|t| tr.node_of(t))
            .collect::<Result<Vec<_>>>()?;
        let mut handles = Vec::with_capacity(outputs.len());
        for (index, o) in outputs.iter().enumerate() {
            let value = tr.node_of(o)?;
            let mut node_inputs = ins.clone();
            node_inputs.push(value);
            let h = o.view(o.layout().clone());
            tr.push(
                NodeKind::Custom {
                    name: name.to_string(),
                    rule: rule.clone(),
                    index,
                    n_outputs: outputs.len(),
                    inputs: node_inputs,
                },
                &h,
            );
            handles.push(h);
        }
        Ok(handles)
    })
}

/// Runs `f` on the active tracer, read-only (`f` must not trace).
pub(crate) fn with_tracer_ref<R>(f: impl FnOnce(&Tracer) -> Result<R>) -> Result<R> {
    TRACER.with(|t| match t.borrow().as_ref() {
        Some(tr) => f(tr),
        None => Err(Error::Trace {
            op: "trace".to_string(),
            msg: "no trace is active on this thread".to_string(),
        }),
    })
}

/// Runs `f` on the active tracer; an error when no trace is active (`op` names the caller).
pub(crate) fn active<R>(op: &str, f: impl FnOnce(&mut Tracer) -> Result<R>) -> Result<R> {
    if !is_tracing() {
        return Err(Error::Trace {
            op: op.to_string(),
            msg: "no trace is active on this thread".to_string(),
        });
    }
    with_tracer(f).unwrap_or_else(|| {
        Err(Error::Trace {
            op: op.to_string(),
            msg: "no trace is active on this thread".to_string(),
        })
    })
}

/// Marks the nodes added from now on as made by a gradient pass (or not); returns the old
/// setting.
pub(crate) fn set_grad_pass(on: bool, differentiable: bool) -> (bool, bool) {
    with_tracer(|tr| {
        (
            std::mem::replace(&mut tr.grad_pass, on),
            std::mem::replace(&mut tr.grad_pass_differentiable, differentiable),
        )
    })
    .unwrap_or((false, true))
}
