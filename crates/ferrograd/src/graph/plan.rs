//! The static memory plan (NNVM's PlanMemory idea) over the schedule: which step makes each
//! value, when each value is dropped (after its last read), where a fused group writes its
//! outputs in place (into an input that dies at that step, or into the captured tensor the
//! output becomes), when each in-place update of a captured tensor is applied (as early as
//! every read of its old value allows), and what the plan costs: its peak, the buffers a run
//! recycles, the bytes kept from forward for backward.
//!
//! Values are tracked by the storage they may live in (a view lives in its source's storage),
//! conservatively: a storage is dead only once every value that may live in it is.

use std::collections::HashMap;

use super::fuse::Group;
use super::ir::{Graph, NodeId, NodeKind};
use crate::op::{MovementOp, Op};

/// One step of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Step {
    /// A node run on its own (a leaf, an unfused op, a callback).
    Node(NodeId),
    /// A fused group, at its last member.
    Group(usize),
}

/// Where a fused group's output is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Target {
    /// Into the storage of the group's input `k`, which dies at this step.
    Input(usize),
    /// Into captured tensor `c`, whose new value the output is.
    Capture(usize),
}

/// The figures of a plan (see `Executable::memory_report`).
#[derive(Clone, Debug, Default)]
pub struct MemoryReport {
    /// Bytes live at the plan's peak: what the run holds (captured tensors, inputs, constants
    /// and `.grad`s) plus the most its values hold at once.
    pub planned_peak_bytes: usize,
    /// Of which what the run holds whatever the plan: captured tensors (parameters,
    /// optimizer state), inputs, constants and `.grad`s read.
    pub held_bytes: usize,
    /// The same, for the graph run op by op (no fusion, no in-place outputs).
    pub unplanned_peak_bytes: usize,
    /// Bytes of values computed before backward that backward reads (kept for it).
    pub saved_bytes: usize,
    /// Nodes recomputed in backward (mirrored) instead of kept.
    pub recomputed_nodes: usize,
    /// Buffers the run's values occupy (reused by size as values die), and their bytes.
    pub buffers: usize,
    pub buffer_bytes: usize,
    /// Nodes in the planned graph.
    pub nodes: usize,
    /// Fused groups of more than one op, and the ops in them.
    pub fused_chains: usize,
    pub fused_nodes: usize,
    /// Fused outputs written in place (into a dying input or a captured tensor).
    pub inplace_outputs: usize,
}

/// A plan.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(crate) steps: Vec<Step>,
    /// For each step, the values that no later step reads (dropped after it).
    pub(crate) frees: Vec<Vec<NodeId>>,
    /// For each step, the in-place updates of captured tensors applied after it.
    pub(crate) writes: Vec<Vec<(usize, NodeId)>>,
    /// For each group, where each output goes (`None`: a new buffer).
    pub(crate) targets: Vec<Vec<Option<Target>>>,
    pub(crate) report: MemoryReport,
}

/// Whether an op's output may be a view of its first input.
pub(crate) fn may_alias(op: &Op) -> bool {
    matches!(
        op,
        Op::Movement(
            MovementOp::Reshape(_)
                | MovementOp::Permute(_)
                | MovementOp::BroadcastTo(_)
                | MovementOp::Slice(_)
                | MovementOp::Diagonal { .. }
                | MovementOp::UnfoldView { .. }
                | MovementOp::AsStrided { .. }
                | MovementOp::ToDevice { .. }
        )
    )
}

/// Plans `g` with fused `groups` (`of[n]`: node `n`'s group).
pub(crate) fn plan(g: &Graph, groups: &[Group], of: &[Option<usize>]) -> Plan {
    let n = g.nodes.len();
    // the step of each node's value
    let mut steps = Vec::new();
    let mut step_of = vec![usize::MAX; n];
    let last_member: Vec<NodeId> = groups
        .iter()
        .map(|gr| *gr.members.last().expect("groups are not empty"))
        .collect();
    for id in 0..n {
        match of[id] {
            Some(gi) if last_member[gi] == id => {
                let s = steps.len();
                steps.push(Step::Group(gi));
                for &m in &groups[gi].members {
                    step_of[m] = s;
                }
            }
            Some(_) => {}
            None => {
                step_of[id] = steps.len();
                steps.push(Step::Node(id));
            }
        }
    }
    let end = steps.len();
    let reads = |s: &Step| -> Vec<NodeId> {
        match *s {
            Step::Node(id) => g.nodes[id].inputs().to_vec(),
            Step::Group(gi) => groups[gi].inputs.clone(),
        }
    };

    // the storages each value may live in: a computed node of its own, or an external one
    let mut canon_capture: HashMap<usize, NodeId> = HashMap::new();
    let mut roots: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for (id, node) in g.nodes.iter().enumerate() {
        roots[id] = match &node.kind {
            NodeKind::Capture(c) => {
                let key = std::sync::Arc::as_ptr(g.captures[*c].storage()) as usize;
                vec![*canon_capture.entry(key).or_insert(id)]
            }
            NodeKind::Op { op, inputs } if may_alias(op) => roots[inputs[0]].clone(),
            NodeKind::Detach(x) => roots[*x].clone(),
            NodeKind::Custom { inputs, .. } => roots[*inputs.last().expect("its value")].clone(),
            NodeKind::Call { inputs, .. } => {
                let mut r: Vec<NodeId> = inputs.iter().flat_map(|&i| roots[i].clone()).collect();
                r.push(id);
                r.sort_unstable();
                r.dedup();
                r
            }
            _ => vec![id],
        };
    }
    let external = |r: NodeId| {
        matches!(
            g.nodes[r].kind,
            NodeKind::Input(_)
                | NodeKind::Capture(_)
                | NodeKind::Constant(_)
                | NodeKind::GradOf(_)
                | NodeKind::InputGrad(_)
        )
    };

    // last read of each value and of each storage (effects read at the end)
    let mut last_val = vec![None::<usize>; n];
    let mut last_root = vec![None::<usize>; n];
    for (s, st) in steps.iter().enumerate() {
        for v in reads(st) {
            last_val[v] = Some(s);
            for &r in &roots[v] {
                last_root[r] = Some(s);
            }
        }
    }
    let mut at_end = vec![false; n];
    for &o in &g.outputs {
        at_end[o] = true;
        for &r in &roots[o] {
            // a captured tensor returned is returned by reference: not a read of its old value
            if !matches!(g.nodes[r].kind, NodeKind::Capture(_)) {
                last_root[r] = Some(end);
            }
        }
    }
    let written = g.input_writes.iter().map(|&(_, v)| (0, Some(v)));
    for (_, v) in g.grads.iter().chain(&g.input_grads).copied().chain(written) {
        if let Some(v) = v {
            at_end[v] = true;
            for &r in &roots[v] {
                last_root[r] = Some(end);
            }
        }
    }

    // the last write into each captured tensor, applied when its value exists and every read
    // of the tensor's old value is done (or done in place by the group making the value)
    let mut final_write: Vec<(usize, NodeId)> = Vec::new();
    for &(c, v) in g.writes.iter().rev() {
        if !final_write.iter().any(|&(w, _)| w == c) {
            final_write.push((c, v));
        }
    }
    final_write.reverse();
    let capture_root = |c: usize| -> Option<NodeId> {
        let key = std::sync::Arc::as_ptr(g.captures[c].storage()) as usize;
        canon_capture.get(&key).copied()
    };
    let mut targets: Vec<Vec<Option<Target>>> = groups
        .iter()
        .map(|gr| vec![None; gr.outputs.len()])
        .collect();
    let mut writes: Vec<Vec<(usize, NodeId)>> = vec![Vec::new(); end + 1];
    let mut written_in_place = vec![false; n];
    let mut taken = vec![false; n];
    for &(c, v) in &final_write {
        let made = step_of[v];
        let root = capture_root(c);
        let old_read = root.and_then(|r| last_root[r]);
        if let (Some(gi), Some(r)) = (of[v], root) {
            let gr = &groups[gi];
            let t = &g.captures[c];
            let oi = gr.outputs.iter().position(|&o| o == v);
            let fits = t.shape() == gr.shape.as_slice()
                && t.dtype() == gr.dtype
                && t.device() == gr.device
                && t.layout().offset() == 0
                && t.layout().is_contiguous();
            // the group may read the old value only as the whole tensor, loaded before the store
            let reads_ok = oi.is_some_and(|oi| {
                gr.inputs.iter().enumerate().all(|(k, &x)| {
                    !roots[x].contains(&r)
                        || (matches!(g.nodes[x].kind, NodeKind::Capture(_))
                            && gr.load_at(k) < gr.store_at(oi))
                })
            });
            if let (Some(oi), true, true) = (oi, fits, reads_ok) {
                if old_read.map_or(true, |s| s <= made) && !taken[r] && !at_end[r] {
                    targets[gi][oi] = Some(Target::Capture(c));
                    taken[r] = true;
                    written_in_place[v] = true;
                    // the value lives in the captured tensor from now on
                    roots[v] = vec![r];
                    continue;
                }
            }
        }
        let at = old_read.map_or(made, |s| s.max(made)).min(end);
        writes[at].push((c, v));
        last_val[v] = Some(last_val[v].map_or(at, |s| s.max(at)));
        for &rv in &roots[v].clone() {
            last_root[rv] = Some(last_root[rv].map_or(at, |s| s.max(at)));
        }
    }

    // fused outputs in place of an input that dies at the group's step
    for (gi, gr) in groups.iter().enumerate() {
        let s = step_of[gr.members[0]];
        for (oi, &o) in gr.outputs.iter().enumerate() {
            if targets[gi][oi].is_some() {
                continue;
            }
            let pick = gr.inputs.iter().enumerate().find(|&(k, &x)| {
                roots[x] == [x]
                    && !external(x)
                    && !matches!(g.nodes[x].kind, NodeKind::Call { .. })
                    && !taken[x]
                    && !at_end[x]
                    && last_root[x] == Some(s)
                    && g.nodes[x].shape == gr.shape
                    && g.nodes[x].dtype == gr.dtype
                    && gr.inputs.iter().filter(|&&y| roots[y].contains(&x)).count() == 1
                    && gr.load_at(k) < gr.store_at(oi)
            });
            if let Some((k, &x)) = pick {
                targets[gi][oi] = Some(Target::Input(k));
                taken[x] = true;
                roots[o] = vec![x];
                let lo = last_root[o].max(last_val[o]);
                last_root[x] = lo.or(Some(s));
            }
        }
    }
    // a value written in place lives on in its target: later reads keep that storage alive
    for id in 0..n {
        if roots[id] != [id] && last_val[id].is_some() {
            for &r in &roots[id].clone() {
                last_root[r] = last_root[r].max(last_val[id]);
            }
        }
    }

    // values dropped after their last read (never read: after their own step)
    let mut frees: Vec<Vec<NodeId>> = vec![Vec::new(); end];
    for id in 0..n {
        let materialized = of[id].map_or(true, |gi| groups[gi].outputs.contains(&id));
        if !materialized || at_end[id] || step_of[id] == usize::MAX {
            continue;
        }
        let at = last_val[id].unwrap_or(step_of[id]).max(step_of[id]);
        if at < end {
            frees[at].push(id);
        }
    }

    let mut report = simulate(
        g, groups, of, &steps, &step_of, &roots, &last_root, &targets,
    );
    report.unplanned_peak_bytes = unplanned_peak(g, base_bytes(g));
    report.inplace_outputs = targets.iter().flatten().filter(|t| t.is_some()).count();
    let _ = written_in_place;
    Plan {
        steps,
        frees,
        writes,
        targets,
        report,
    }
}

/// Bytes the run holds whatever the plan: captured tensors (each storage once), their
/// `.grad`s, constants, inputs.
fn base_bytes(g: &Graph) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0;
    for t in &g.captures {
        if seen.insert(std::sync::Arc::as_ptr(t.storage()) as usize) {
            bytes += t.storage().bytes();
        }
    }
    for node in &g.nodes {
        match &node.kind {
            NodeKind::Input(_) => bytes += node.bytes(),
            NodeKind::Constant(t) if seen.insert(std::sync::Arc::as_ptr(t.storage()) as usize) => {
                bytes += t.storage().bytes();
            }
            NodeKind::GradOf(c) => {
                if let Some(gr) = g.captures[*c].grad() {
                    if seen.insert(std::sync::Arc::as_ptr(gr.storage()) as usize) {
                        bytes += gr.storage().bytes();
                    }
                }
            }
            _ => {}
        }
    }
    bytes
}

/// Live bytes along the schedule, the buffers a recycling allocator needs, and the bytes kept
/// from before backward for it.
#[allow(clippy::too_many_arguments)]
fn simulate(
    g: &Graph,
    groups: &[Group],
    of: &[Option<usize>],
    steps: &[Step],
    step_of: &[usize],
    roots: &[Vec<NodeId>],
    last_root: &[Option<usize>],
    targets: &[Vec<Option<Target>>],
) -> MemoryReport {
    let n = g.nodes.len();
    let base = base_bytes(g);
    // storages born at each step (computed values with a storage of their own)
    let mut born: Vec<Vec<NodeId>> = vec![Vec::new(); steps.len()];
    let mut dies: Vec<Vec<NodeId>> = vec![Vec::new(); steps.len() + 1];
    for id in 0..n {
        let own = roots[id] == [id]
            && !matches!(
                g.nodes[id].kind,
                NodeKind::Input(_)
                    | NodeKind::Capture(_)
                    | NodeKind::Constant(_)
                    | NodeKind::GradOf(_)
                    | NodeKind::InputGrad(_)
            );
        let materialized = of[id].map_or(true, |gi| groups[gi].outputs.contains(&id));
        if !own || !materialized || step_of[id] == usize::MAX {
            continue;
        }
        // an in-place output has no storage of its own
        if let Some(gi) = of[id] {
            let oi = groups[gi].outputs.iter().position(|&o| o == id);
            if oi.is_some_and(|oi| targets[gi][oi].is_some()) {
                continue;
            }
        }
        born[step_of[id]].push(id);
        let d = last_root[id].unwrap_or(step_of[id]).max(step_of[id]);
        dies[d.min(steps.len())].push(id);
    }
    let mut live = 0usize;
    let mut peak = 0usize;
    // a recycling allocator: free buffers by dtype and byte size, best fit up to twice the size
    let mut free: HashMap<crate::DType, Vec<usize>> = HashMap::new();
    let mut held: HashMap<NodeId, usize> = HashMap::new();
    let mut buffers = 0;
    let mut buffer_bytes = 0;
    for s in 0..steps.len() {
        for &id in &born[s] {
            let b = g.nodes[id].bytes();
            live += b;
            let list = free.entry(g.nodes[id].dtype).or_default();
            let fit = list
                .iter()
                .enumerate()
                .filter(|(_, &c)| c >= b && c <= b.saturating_mul(2).max(64))
                .min_by_key(|(_, &c)| c)
                .map(|(i, _)| i);
            let cap = match fit {
                Some(i) => list.swap_remove(i),
                None => {
                    buffers += 1;
                    buffer_bytes += b;
                    b
                }
            };
            held.insert(id, cap);
        }
        peak = peak.max(live);
        for &id in &dies[s] {
            live -= g.nodes[id].bytes();
            if let Some(cap) = held.remove(&id) {
                free.entry(g.nodes[id].dtype).or_default().push(cap);
            }
        }
    }
    // kept for backward: values made before the gradient pass that a gradient-pass step reads
    let mut saved = std::collections::HashSet::new();
    for st in steps {
        let (reader_in_grad, reads): (bool, Vec<NodeId>) = match *st {
            Step::Node(id) => (g.nodes[id].grad_pass, g.nodes[id].inputs().to_vec()),
            Step::Group(gi) => (
                groups[gi].members.iter().any(|&m| g.nodes[m].grad_pass),
                groups[gi].inputs.clone(),
            ),
        };
        if !reader_in_grad {
            continue;
        }
        for v in reads {
            for &r in &roots[v] {
                let node = &g.nodes[r];
                if !node.grad_pass && matches!(node.kind, NodeKind::Op { .. } | NodeKind::Fill(_)) {
                    saved.insert(r);
                }
            }
        }
    }
    let saved_bytes = saved.iter().map(|&r| g.nodes[r].bytes()).sum();
    let multi: Vec<&Group> = groups.iter().filter(|gr| gr.members.len() > 1).collect();
    MemoryReport {
        planned_peak_bytes: base + peak,
        held_bytes: base,
        unplanned_peak_bytes: 0,
        saved_bytes,
        recomputed_nodes: g.nodes.iter().filter(|n| n.recompute).count(),
        buffers,
        buffer_bytes,
        nodes: n,
        fused_chains: multi.len(),
        fused_nodes: multi.iter().map(|gr| gr.members.len()).sum(),
        inplace_outputs: 0,
    }
}

/// The peak of the graph run op by op, each value dropped after its last read.
fn unplanned_peak(g: &Graph, base: usize) -> usize {
    let n = g.nodes.len();
    let none: Vec<Option<usize>> = vec![None; n];
    let mut p = plan_unfused(g, &none);
    p += base;
    p
}

/// Live-bytes peak of `g` run node by node (no groups).
fn plan_unfused(g: &Graph, of: &[Option<usize>]) -> usize {
    let n = g.nodes.len();
    let mut roots: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut last = vec![0usize; n];
    for (id, node) in g.nodes.iter().enumerate() {
        roots[id] = match &node.kind {
            NodeKind::Op { op, inputs } if may_alias(op) => roots[inputs[0]].clone(),
            NodeKind::Detach(x) => roots[*x].clone(),
            NodeKind::Custom { inputs, .. } => roots[*inputs.last().expect("its value")].clone(),
            _ => vec![id],
        };
        last[id] = id;
    }
    for (id, node) in g.nodes.iter().enumerate() {
        for &i in node.inputs() {
            for &r in &roots[i] {
                last[r] = last[r].max(id);
            }
        }
    }
    for r in g.roots() {
        for &x in &roots[r] {
            last[x] = n;
        }
    }
    let _ = of;
    let mut delta = vec![0isize; n + 2];
    for (id, node) in g.nodes.iter().enumerate() {
        let own = roots[id] == [id]
            && matches!(
                node.kind,
                NodeKind::Op { .. } | NodeKind::Fill(_) | NodeKind::Call { .. }
            );
        if own {
            delta[id] += node.bytes() as isize;
            delta[last[id] + 1] -= node.bytes() as isize;
        }
    }
    let mut live = 0isize;
    let mut peak = 0isize;
    for d in delta {
        live += d;
        peak = peak.max(live);
    }
    peak as usize
}
