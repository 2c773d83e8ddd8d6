//! Compiling a traced graph (the passes, mirroring, fusion, the memory plan) and running it
//! whole in Rust: each step in order through the same forward kernels `apply` uses (nothing
//! recorded, nothing traced) or a fused group's program, values dropped after their last
//! read, captured tensors updated as soon as their old value is no longer read (in place when
//! the group computing the new value can write it there), then the `.grad`s left.
//!
//! CPU buffers come from the executable's arena: a run that repeats the previous one
//! allocates no new buffer (what it returns and leaves on `.grad` excepted, when the caller
//! keeps them).

use std::sync::{Arc, Mutex};

use super::fuse::{self, Group};
use super::ir::{Graph, NodeId, NodeKind};
use super::mirror::{self, Mirror};
use super::passes;
use super::plan::{self, MemoryReport, Plan, Step, Target};
use crate::error::{Error, Result};
use crate::storage::pool::{self, Arena};
use crate::tensor::Tensor;

/// How to compile a graph.
#[derive(Clone)]
pub struct Options {
    /// Which forward values backward recomputes instead of keeping.
    pub mirror: Mirror,
    /// Plan the step to peak at most this many bytes (everything the step holds at once:
    /// captured tensors, inputs, `.grad`s, values), recomputing the least that gets there.
    pub memory_budget: Option<usize>,
    /// Fuse elementwise chains (on by default).
    pub fuse: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mirror: Mirror::Off,
            memory_budget: None,
            fuse: true,
        }
    }
}

/// A graph ready to run.
pub struct Executable {
    graph: Graph,
    groups: Vec<Group>,
    plan: Plan,
    arena: Mutex<Option<Box<Arena>>>,
    /// Buffers taken from the system by the last run (0 for a repeated run).
    last_fresh: Mutex<usize>,
    /// What the last runs handed out (outputs, `.grad`s), with how many runs ago: a run
    /// starts by giving the arena the buffers of those the caller has dropped since, so that
    /// `loss = step(x, y)` (the old loss alive during the call) repeats with no new buffer.
    handed: Mutex<Vec<(Tensor, u8)>>,
}

/// Runs after which a handed-out tensor still held elsewhere is forgotten.
const HANDED_RUNS: u8 = 2;

impl Executable {
    /// Compiles `graph` with the default options (no mirroring, fusion on).
    pub fn new(graph: Graph) -> Result<Executable> {
        Executable::compile(graph, &Options::default())
    }

    /// Runs the passes on `graph` and plans it: common subexpressions merged, dead nodes
    /// dropped, mirroring decided, elementwise chains fused, memory planned.
    pub fn compile(mut graph: Graph, opts: &Options) -> Result<Executable> {
        passes::cse(&mut graph);
        passes::dce(&mut graph);
        passes::scalar_constants_to_device(&mut graph)?;
        let graph = choose_mirroring(graph, opts)?;
        let (groups, of) = fuse::groups(&graph, opts.fuse);
        let plan = plan::plan(&graph, &groups, &of);
        Ok(Executable {
            graph,
            groups,
            plan,
            arena: Mutex::new(None),
            last_fresh: Mutex::new(0),
            handed: Mutex::new(Vec::new()),
        })
    }

    /// The CUDA source (and kernel name) of each fused group of more than one op, as they run
    /// on CUDA devices (whatever device this graph is on): what the NVRTC test compiles.
    #[cfg(feature = "cuda")]
    pub fn cuda_sources(&self) -> Result<Vec<(String, String)>> {
        self.groups
            .iter()
            .filter(|g| g.members.len() > 1)
            .map(crate::cuda::fused::source)
            .collect()
    }

    /// The graph it runs (after the passes).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The plan's figures.
    pub fn memory_report(&self) -> MemoryReport {
        self.plan.report.clone()
    }

    /// Bytes of the free buffers the arena keeps for the next run.
    pub fn arena_bytes(&self) -> usize {
        let slot = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().map_or(0, |a| a.held_bytes())
    }

    /// Buffers the last run took from the system rather than from its arena.
    pub fn last_run_fresh_buffers(&self) -> usize {
        *self.last_fresh.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the graph cannot run now (a captured tensor's `.grad` is `None` where it was set
    /// when traced, or the other way round), or `None` when it can.
    pub fn guard_failure(&self) -> Option<String> {
        self.guard_failure_with(&[])
    }

    /// [`Executor::guard_failure`], also checking the `.grad` of the arguments `inputs` (when
    /// given) against what the trace read of them.
    pub fn guard_failure_with(&self, inputs: &[Tensor]) -> Option<String> {
        for &(i, was_none) in &self.graph.input_grad_guards {
            let Some(t) = inputs.get(i) else { continue };
            if t.grad().is_none() != was_none {
                return Some(format!(
                    "the .grad of argument {i} was {} when traced and is {} now",
                    if was_none { "None" } else { "set" },
                    if was_none { "set" } else { "None" },
                ));
            }
        }
        for &(c, was_none) in &self.graph.grad_guards {
            let t = &self.graph.captures[c];
            if t.grad().is_none() != was_none {
                return Some(format!(
                    "the .grad of a captured {} tensor of shape {:?} was {} when traced and is \
                     {} now",
                    t.dtype(),
                    t.shape(),
                    if was_none { "None" } else { "set" },
                    if was_none { "set" } else { "None" },
                ));
            }
        }
        None
    }

    /// Runs the graph on `inputs` (shaped as the traced ones): returns the outputs, and leaves
    /// the effects on the captured tensors.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        if inputs.len() != g.n_inputs {
            return Err(trace_error(format!(
                "the graph takes {} tensors, got {}",
                g.n_inputs,
                inputs.len()
            )));
        }
        if let Some(why) = self.guard_failure_with(inputs) {
            return Err(trace_error(why));
        }
        let mut slot = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        let mut handed = self.handed.lock().unwrap_or_else(|e| e.into_inner());
        let result = {
            let _arena = pool::install(&mut slot);
            // (a tensor only this list holds frees its buffer into the arena here)
            handed.retain_mut(|(t, age)| {
                *age += 1;
                !t.is_sole_handle() && *age <= HANDED_RUNS
            });
            self.steps(inputs)
        };
        if let Ok(outs) = &result {
            let g = &self.graph;
            let grads = g
                .grads
                .iter()
                .filter_map(|&(c, v)| v.and(g.captures[c].grad()));
            let input_grads = g
                .input_grads
                .iter()
                .filter_map(|&(i, v)| v.and(inputs[i].grad()));
            // (large buffers the caller drops go to the pool, where a run finds them too)
            let small = |t: &Tensor| t.numel() * t.dtype().size_in_bytes() < pool::MIN_POOLED_BYTES;
            handed.extend(
                outs.iter()
                    .cloned()
                    .chain(grads)
                    .chain(input_grads)
                    .filter(small)
                    .map(|t| (t, 0)),
            );
        }
        drop(handed);
        let fresh = slot.as_mut().map_or(0, |a| std::mem::take(&mut a.fresh));
        *self.last_fresh.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        result
    }

    fn steps(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        let mut vals: Vec<Option<Tensor>> = vec![None; g.nodes.len()];
        for (s, step) in self.plan.steps.iter().enumerate() {
            match *step {
                Step::Node(id) => {
                    let v = self.node(id, inputs, &vals)?;
                    vals[id] = Some(v);
                }
                Step::Group(gi) => self.group(gi, &mut vals)?,
            }
            self.write(&self.plan.writes[s], &vals)?;
            for &f in &self.plan.frees[s] {
                vals[f] = None;
            }
        }
        if let Some(w) = self.plan.writes.get(self.plan.steps.len()) {
            self.write(w, &vals)?;
        }
        for &(c, v) in &g.grads {
            let grad = v.map(|v| self.handed_out(&vals, v)).transpose()?;
            g.captures[c].set_grad(grad)?;
        }
        for &(i, v) in &g.input_grads {
            let grad = v.map(|v| self.handed_out(&vals, v)).transpose()?;
            inputs[i].set_grad(grad)?;
        }
        for &(i, v) in &g.input_writes {
            let src = value(&vals, v)?;
            if !Arc::ptr_eq(inputs[i].storage(), src.storage())
                || inputs[i].layout() != src.layout()
            {
                inputs[i].assign_(src)?;
            }
        }
        g.outputs
            .iter()
            .map(|&o| self.handed_out(&vals, o))
            .collect()
    }

    /// Runs one node.
    fn node(&self, id: NodeId, inputs: &[Tensor], vals: &[Option<Tensor>]) -> Result<Tensor> {
        let g = &self.graph;
        let node = &g.nodes[id];
        Ok(match &node.kind {
            NodeKind::Input(i) => {
                let t = &inputs[*i];
                if t.shape() != node.shape.as_slice()
                    || t.dtype() != node.dtype
                    || t.device() != node.device
                {
                    return Err(trace_error(format!(
                        "argument {i} is a {} tensor of shape {:?} on {}, traced as {} {:?} on {}",
                        t.dtype(),
                        t.shape(),
                        t.device(),
                        node.dtype,
                        node.shape,
                        node.device
                    )));
                }
                t.clone()
            }
            NodeKind::Capture(c) => g.captures[*c].clone(),
            NodeKind::GradOf(c) => g.captures[*c].grad().ok_or_else(|| {
                trace_error("a captured tensor's .grad is None at run time".to_string())
            })?,
            NodeKind::InputGrad(i) => inputs[*i]
                .grad()
                .ok_or_else(|| trace_error(format!("argument {i}'s .grad is None at run time")))?,
            NodeKind::Constant(t) => t.clone(),
            NodeKind::Fill(v) => Tensor::fill_raw(&node.shape, *v, node.dtype, node.device)?,
            NodeKind::Op { op, inputs } => {
                let ins = inputs
                    .iter()
                    .map(|&i| value(vals, i))
                    .collect::<Result<Vec<_>>>()?;
                check_index_range(op, &ins)?;
                crate::dispatch::eval(op, &ins)?
            }
            NodeKind::Detach(x) => value(vals, *x)?.clone(),
            NodeKind::Custom { inputs, .. } => {
                value(vals, *inputs.last().expect("a custom node reads its value"))?.clone()
            }
            NodeKind::Call {
                name,
                callable,
                inputs,
            } => {
                let ins = inputs
                    .iter()
                    .map(|&i| value(vals, i).cloned())
                    .collect::<Result<Vec<_>>>()?;
                let out = callable(&ins)?;
                if out.shape() != node.shape.as_slice() || out.dtype() != node.dtype {
                    return Err(trace_error(format!(
                        "{name} returned a {} tensor of shape {:?}; when traced it returned {} \
                         {:?}",
                        out.dtype(),
                        out.shape(),
                        node.dtype,
                        node.shape
                    )));
                }
                out
            }
        })
    }

    /// Runs fused group `gi`, writing its outputs where the plan says.
    fn group(&self, gi: usize, vals: &mut [Option<Tensor>]) -> Result<()> {
        let gr = &self.groups[gi];
        let ins = gr
            .inputs
            .iter()
            .map(|&i| value(vals, i).cloned())
            .collect::<Result<Vec<_>>>()?;
        let targets: Vec<Option<Tensor>> = self.plan.targets[gi]
            .iter()
            .map(|t| match *t {
                Some(Target::Input(k)) => {
                    let x = &ins[k];
                    // only a buffer no other value shares, laid out as the output
                    let whole = x.layout().offset() == 0
                        && x.layout().is_contiguous()
                        && x.storage().bytes() == x.numel() * x.dtype().size_in_bytes()
                        && Arc::strong_count(x.storage()) == 1;
                    whole.then(|| x.clone())
                }
                Some(Target::Capture(c)) => Some(self.graph.captures[c].clone()),
                None => None,
            })
            .collect();
        let outs = match gr.device {
            crate::Device::Cpu => crate::cpu::fused::run(gr, &ins, &targets)?,
            #[cfg(feature = "cuda")]
            crate::Device::Cuda(_) => crate::cuda::fused::run(gr, &ins, &targets)?,
            #[allow(unreachable_patterns)]
            d => return Err(Error::device("fused", format!("no fused kernels on {d}"))),
        };
        for (&o, t) in gr.outputs.iter().zip(outs) {
            vals[o] = Some(t);
        }
        Ok(())
    }

    /// Applies in-place updates of captured tensors.
    fn write(&self, writes: &[(usize, NodeId)], vals: &[Option<Tensor>]) -> Result<()> {
        for &(c, v) in writes {
            let dst = &self.graph.captures[c];
            let src = value(vals, v)?;
            if !Arc::ptr_eq(dst.storage(), src.storage()) || dst.layout() != src.layout() {
                dst.assign_(src)?;
            }
        }
        Ok(())
    }

    /// Node `v`'s value as handed to the caller: a constant of the graph is copied, so that
    /// writing into what a run returned cannot change later runs.
    fn handed_out(&self, vals: &[Option<Tensor>], v: NodeId) -> Result<Tensor> {
        let t = value(vals, v)?;
        match self.graph.nodes[v].kind {
            NodeKind::Constant(_) => t.copy(),
            _ => Ok(t.clone()),
        }
    }
}

/// Decides what backward recomputes (see [`mirror`]) and returns the graph with it.
fn choose_mirroring(g: Graph, opts: &Options) -> Result<Graph> {
    let peak = |g: &Graph| {
        let (groups, of) = fuse::groups(g, opts.fuse);
        plan::plan(g, &groups, &of).report.planned_peak_bytes
    };
    let op_name = |g: &Graph, id: NodeId| match &g.nodes[id].kind {
        NodeKind::Op { op, .. } => Some(op.clone()),
        _ => None,
    };
    let policy = |id: NodeId, all: bool| -> Result<bool> {
        let Some(op) = op_name(&g, id) else {
            return Ok(false);
        };
        match &opts.mirror {
            Mirror::Policy(p) => Ok(plan::may_alias(&op) || p(op.name())?),
            Mirror::Auto => Ok(all || mirror::cheap(&op)),
            Mirror::Off => Ok(all),
        }
    };
    match opts.memory_budget {
        Some(budget) => {
            let base = peak(&g);
            if base <= budget {
                return Ok(g);
            }
            let ds = mirror::decide(&g, &|id| policy(id, true), true)?;
            // the fewest decisions (in order) that fit: doubling, then bisection
            let fits = |k: usize| -> (bool, usize, Graph) {
                let m = mirror::apply(&g, &ds[..k]);
                let p = peak(&m);
                (p <= budget, p, m)
            };
            let mut best_peak = base;
            let mut hi = 1usize;
            let mut found: Option<(usize, Graph)> = None;
            while hi <= ds.len() {
                let (ok, p, m) = fits(hi);
                best_peak = best_peak.min(p);
                if ok {
                    found = Some((hi, m));
                    break;
                }
                if hi == ds.len() {
                    break;
                }
                hi = (hi * 2).min(ds.len());
            }
            let Some((mut k, mut m)) = found else {
                return Err(Error::invalid(
                    "trace",
                    format!(
                        "memory_budget={budget} bytes is below what any plan of this step \
                         reaches (recomputing everything it can, the planned peak is {best_peak} \
                         bytes): the smallest feasible budget is {best_peak} bytes"
                    ),
                ));
            };
            let mut lo = k / 2;
            while lo + 1 < k {
                let mid = (lo + k) / 2;
                let (ok, _, mm) = fits(mid);
                if ok {
                    k = mid;
                    m = mm;
                } else {
                    lo = mid;
                }
            }
            Ok(m)
        }
        None if matches!(opts.mirror, Mirror::Off) => Ok(g),
        None => {
            let ds = mirror::decide(&g, &|id| policy(id, false), false)?;
            if ds.is_empty() {
                return Ok(g);
            }
            let m = mirror::apply(&g, &ds);
            // never a higher planned peak than without mirroring
            if peak(&m) > peak(&g) {
                Ok(g)
            } else {
                Ok(m)
            }
        }
    }
}

/// Node `i`'s value (the plan runs a node's inputs before it and keeps them until their last
/// read: a missing value is a malformed plan).
/// An `IndexError` for a gather or scatter-add whose indices (this run's values) leave the
/// axis, read on the host as eager mode reads them. CPU kernels check as they go; device
/// kernels clamp (memory-safe) and would give a silently wrong result without this.
fn check_index_range(op: &crate::op::Op, ins: &[&Tensor]) -> Result<()> {
    use crate::op::{MovementOp, Op};
    let (name, axis, shape) = match op {
        Op::Movement(MovementOp::Gather(axis)) => ("gather", *axis, ins[0].shape()),
        Op::Movement(MovementOp::ScatterAdd { axis, shape }) => ("scatter_add", *axis, &shape[..]),
        _ => return Ok(()),
    };
    if ins[0].device() == crate::Device::Cpu || ins.len() < 2 {
        return Ok(());
    }
    crate::ops::movement::wrap_indices(name, ins[1], shape[axis], axis, shape).map(|_| ())
}

fn value(vals: &[Option<Tensor>], i: NodeId) -> Result<&Tensor> {
    vals.get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| trace_error(format!("malformed plan: node %{i} has no value here")))
}

fn trace_error(msg: String) -> Error {
    Error::Trace {
        op: "graph".to_string(),
        msg,
    }
}
