//! Backward mirroring with the whole step in view (MXNet's idea, decided on the schedule): a
//! forward value that backward reads can be recomputed right before backward first needs it
//! instead of being kept from the forward pass. That frees its memory between the two, at the
//! price of keeping alive what the recomputation reads.
//!
//! * `mirror="auto"` (or a policy): a node (with the chain of recomputable nodes it needs) is
//!   recomputed only where the bytes it releases exceed the bytes the recomputation keeps
//!   alive, both counted on the actual schedule; and never where the planned peak would rise.
//! * `memory_budget`: nodes are recomputed in order of least recompute cost per byte released,
//!   the fewest that bring the planned peak within the budget.

use std::collections::HashSet;
use std::sync::Arc;

use super::ir::{Graph, Node, NodeId, NodeKind};
use super::plan::may_alias;
use crate::error::Result;
use crate::op::{LinalgOp, Op, ReduceOp, WindowOp};

/// `policy(op_name)`: whether an op may be recomputed (an error fails the compilation).
pub type OpPolicy = Arc<dyn Fn(&str) -> Result<bool> + Send + Sync>;

/// Which forward nodes may be recomputed in backward.
#[derive(Clone, Default)]
pub enum Mirror {
    /// None: everything backward reads is kept.
    #[default]
    Off,
    /// Cheap elementwise ops, where the rule says it pays.
    Auto,
    /// Ops for which `policy(op_name)` is true, where the rule says it pays.
    Policy(OpPolicy),
}

/// Whether an op is cheap to recompute (what `Mirror::Auto` recomputes): elementwise ops and
/// views.
pub(crate) fn cheap(op: &Op) -> bool {
    matches!(op, Op::Unary(_) | Op::Binary(_) | Op::Elementwise(_)) || may_alias(op)
}

/// A rough cost of computing a node: its arithmetic, in element operations.
pub(crate) fn cost(g: &Graph, id: NodeId) -> f64 {
    let node = &g.nodes[id];
    let out: f64 = node.shape.iter().product::<usize>() as f64;
    let NodeKind::Op { op, inputs } = &node.kind else {
        return 0.0;
    };
    let numel = |i: NodeId| g.nodes[i].shape.iter().product::<usize>() as f64;
    match op {
        _ if may_alias(op) => 0.0,
        Op::Linalg(LinalgOp::MatMul) => {
            let a = &g.nodes[inputs[0]].shape;
            let k = a.last().copied().unwrap_or(1) as f64;
            2.0 * out * k
        }
        Op::Window(WindowOp::Conv2d { .. }) | Op::Window(WindowOp::Conv2dInputGrad { .. }) => {
            let w = &g.nodes[inputs[1]].shape;
            2.0 * out * w.iter().skip(1).product::<usize>() as f64
        }
        Op::Reduce(ReduceOp::Softmax { .. } | ReduceOp::LogSoftmax { .. }) => 4.0 * out,
        Op::Reduce(_) => numel(inputs[0]),
        _ => out.max(inputs.iter().map(|&i| numel(i)).fold(0.0, f64::max)),
    }
}

/// The schedule facts mirroring decides on.
struct Schedule {
    /// Each node's readers, in order.
    readers: Vec<Vec<NodeId>>,
    /// The storage each value lives in (a view: its source's).
    root: Vec<NodeId>,
    /// Last read of each storage, as decisions so far leave it.
    last: Vec<usize>,
    /// Kept to the end (read by the effects).
    pinned: Vec<bool>,
}

impl Schedule {
    fn new(g: &Graph) -> Schedule {
        let n = g.nodes.len();
        let mut readers = vec![Vec::new(); n];
        let mut root: Vec<NodeId> = (0..n).collect();
        let mut last: Vec<usize> = (0..n).collect();
        for (id, node) in g.nodes.iter().enumerate() {
            if let NodeKind::Op { op, inputs } = &node.kind {
                if may_alias(op) {
                    root[id] = root[inputs[0]];
                }
            }
            if let NodeKind::Detach(x) = node.kind {
                root[id] = root[x];
            }
            if let NodeKind::Custom { inputs, .. } = &node.kind {
                root[id] = root[*inputs.last().expect("a custom node reads its value")];
            }
            for &i in node.inputs() {
                if !readers[i].contains(&id) {
                    readers[i].push(id);
                }
                let r = root[i];
                last[r] = last[r].max(id);
            }
        }
        let mut pinned = vec![false; n];
        for r in g.roots() {
            pinned[root[r]] = true;
            last[root[r]] = n;
        }
        Schedule {
            readers,
            root,
            last,
            pinned,
        }
    }
}

/// One decision: the nodes to recompute together.
#[derive(Clone, Debug)]
pub(crate) struct Decision {
    pub(crate) nodes: Vec<NodeId>,
}

/// The decisions of the rule, in the order they were taken. `recomputable(id)` says which
/// nodes may be recomputed; `require_gain`: take only decisions that release more than they
/// keep alive.
pub(crate) fn decide(
    g: &Graph,
    recomputable: &dyn Fn(NodeId) -> Result<bool>,
    order_by_cost: bool,
) -> Result<Vec<Decision>> {
    let n = g.nodes.len();
    let mut s = Schedule::new(g);
    let forward = |id: NodeId| !g.nodes[id].grad_pass;
    let is_external = |id: NodeId| {
        matches!(
            g.nodes[id].kind,
            NodeKind::Input(_)
                | NodeKind::Capture(_)
                | NodeKind::Constant(_)
                | NodeKind::GradOf(_)
                | NodeKind::InputGrad(_)
        )
    };
    // the views of each storage (recomputed with it: they are free, and a view kept from
    // the forward pass would keep the whole storage)
    let mut views_of: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for id in 0..n {
        if s.root[id] != id && forward(id) && matches!(g.nodes[id].kind, NodeKind::Op { .. }) {
            views_of[s.root[id]].push(id);
        }
    }
    // candidates: forward ops (not views) whose storage backward reads
    let mut cands: Vec<NodeId> = Vec::new();
    for (id, node) in g.nodes.iter().enumerate() {
        if !forward(id)
            || !matches!(node.kind, NodeKind::Op { .. })
            || s.root[id] != id
            || s.pinned[id]
        {
            continue;
        }
        let read_in_backward = std::iter::once(&id)
            .chain(&views_of[id])
            .any(|&v| s.readers[v].iter().any(|&r| g.nodes[r].grad_pass));
        if !read_in_backward {
            continue;
        }
        if recomputable(id)? {
            cands.push(id);
        }
    }
    if order_by_cost {
        // least recompute cost per byte first (views and cheap ops before matmuls)
        cands.sort_by(|&a, &b| {
            let ka = cost(g, a) / (g.nodes[a].bytes().max(1) as f64);
            let kb = cost(g, b) / (g.nodes[b].bytes().max(1) as f64);
            ka.total_cmp(&kb).then(a.cmp(&b))
        });
    }
    let mut mirrored: HashSet<NodeId> = HashSet::new();
    // where backward first reads each recomputed node (its copy is made there, or earlier when
    // a recomputation made earlier needs it)
    let mut copy_at: Vec<usize> = vec![usize::MAX; n];
    let mut out = Vec::new();
    for &f in &cands {
        if mirrored.contains(&f) || s.root[f] != f {
            continue;
        }
        let family: Vec<NodeId> = std::iter::once(f)
            .chain(views_of[f].iter().copied())
            .collect();
        // the first backward read of the storage, and whether a forward read comes after it
        let Some(first_bwd) = family
            .iter()
            .flat_map(|&v| s.readers[v].iter().copied())
            .filter(|&r| g.nodes[r].grad_pass)
            .min()
        else {
            continue;
        };
        if family
            .iter()
            .flat_map(|&v| s.readers[v].iter().copied())
            .any(|r| !g.nodes[r].grad_pass && r > first_bwd)
        {
            continue;
        }
        if family.iter().any(|&v| s.pinned[s.root[v]]) {
            continue;
        }
        // the recomputation's closure
        let mut closure = vec![f];
        let mut kept = 0usize;
        let mut extend: Vec<NodeId> = Vec::new();
        let mut late: Vec<NodeId> = Vec::new();
        let mut stack = vec![f];
        let mut ok = true;
        while let Some(u) = stack.pop() {
            for &x in g.nodes[u].inputs() {
                if mirrored.contains(&x) {
                    // its copy must exist by now: made earlier than backward needs it, it
                    // lives longer by that much
                    if copy_at[x] > first_bwd && !late.contains(&x) {
                        late.push(x);
                    }
                    continue;
                }
                if closure.contains(&x) || is_external(x) {
                    continue;
                }
                let r = s.root[x];
                if s.last[r] >= first_bwd || s.pinned[r] {
                    continue;
                }
                let can = forward(x)
                    && matches!(g.nodes[x].kind, NodeKind::Op { .. })
                    && recomputable(x)?;
                if can {
                    closure.push(x);
                    stack.push(x);
                } else if matches!(g.nodes[x].kind, NodeKind::Op { .. } | NodeKind::Fill(_)) {
                    if !extend.contains(&r) {
                        extend.push(r);
                        kept += g.nodes[r].bytes();
                    }
                } else {
                    // a callback's value or a detach: not recomputed through
                    ok = false;
                }
            }
        }
        if !ok {
            continue;
        }
        // an expensive recomputation (a matmul, a convolution) reading values that are
        // recomputed later would pull their recomputation, and that of their own inputs, all
        // the way back: it pays for each such value
        let expensive = closure.iter().any(|&u| match &g.nodes[u].kind {
            NodeKind::Op { op, .. } => !cheap(op),
            _ => false,
        });
        if expensive {
            for &x in &late {
                kept += g.nodes[x].bytes();
                extend.push(x);
            }
        }
        let released = g.nodes[f].bytes();
        if released <= kept {
            continue;
        }
        // f's storage now dies at its last forward read; what the recomputation reads lives
        // until it runs
        let fwd_last = family
            .iter()
            .flat_map(|&v| s.readers[v].iter().copied())
            .filter(|&r| !g.nodes[r].grad_pass)
            .max()
            .unwrap_or(f);
        s.last[f] = fwd_last.max(f);
        for r in extend {
            if mirrored.contains(&r) {
                copy_at[r] = copy_at[r].min(first_bwd);
            } else {
                s.last[r] = s.last[r].max(first_bwd);
            }
        }
        for &m in closure.iter().chain(&views_of[f]) {
            copy_at[m] = copy_at[m].min(first_bwd);
        }
        closure.extend(views_of[f].iter().copied());
        closure.sort_unstable();
        closure.dedup();
        mirrored.extend(closure.iter().copied());
        out.push(Decision { nodes: closure });
    }
    Ok(out)
}

/// `g` with the nodes of `decisions` recomputed for backward: each gets a copy, placed right
/// before the first backward node that needs it, which every backward reader reads instead.
pub(crate) fn apply(g: &Graph, decisions: &[Decision]) -> Graph {
    let mut mirrored: Vec<bool> = vec![false; g.nodes.len()];
    for d in decisions {
        for &id in &d.nodes {
            mirrored[id] = true;
        }
    }
    if !mirrored.iter().any(|&m| m) {
        return g.clone();
    }
    let n = g.nodes.len();
    let mut out = Graph {
        nodes: Vec::with_capacity(n + decisions.len() * 2),
        ..g.clone()
    };
    let mut new_id = vec![usize::MAX; n];
    let mut copy_id = vec![usize::MAX; n];
    // emits the copy of `m` (after the copies it reads)
    fn emit(
        m: NodeId,
        g: &Graph,
        mirrored: &[bool],
        new_id: &[usize],
        copy_id: &mut [usize],
        out: &mut Vec<Node>,
    ) {
        if copy_id[m] != usize::MAX {
            return;
        }
        let ins: Vec<NodeId> = g.nodes[m].inputs().to_vec();
        for &x in &ins {
            if mirrored[x] {
                emit(x, g, mirrored, new_id, copy_id, out);
            }
        }
        let mut node = g.nodes[m].clone();
        let map = |x: NodeId| if mirrored[x] { copy_id[x] } else { new_id[x] };
        match &mut node.kind {
            NodeKind::Op { inputs, .. } => {
                for i in inputs.iter_mut() {
                    *i = map(*i);
                }
            }
            _ => unreachable!("only ops are mirrored"),
        }
        node.grad_pass = true;
        node.recompute = true;
        copy_id[m] = out.len();
        out.push(node);
    }
    for id in 0..n {
        let node = &g.nodes[id];
        if node.grad_pass {
            for &x in node.inputs() {
                if mirrored[x] {
                    emit(x, g, &mirrored, &new_id, &mut copy_id, &mut out.nodes);
                }
            }
        }
        let mut node = node.clone();
        let grad_pass = node.grad_pass;
        let map = |x: NodeId| {
            if grad_pass && mirrored[x] {
                copy_id[x]
            } else {
                new_id[x]
            }
        };
        match &mut node.kind {
            NodeKind::Op { inputs, .. }
            | NodeKind::Call { inputs, .. }
            | NodeKind::Custom { inputs, .. } => {
                for i in inputs.iter_mut() {
                    *i = map(*i);
                }
            }
            NodeKind::Detach(x) => *x = map(*x),
            _ => {}
        }
        new_id[id] = out.nodes.len();
        out.nodes.push(node);
    }
    for o in out.outputs.iter_mut() {
        *o = new_id[*o];
    }
    for (_, v) in out.writes.iter_mut() {
        *v = new_id[*v];
    }
    for v in out.grad_nodes_mut() {
        *v = new_id[*v];
    }
    out
}
