//! Whole-graph clean-up before planning: common-subexpression elimination (the same op on the
//! same inputs, the same fill, the same scalar constant: one node), then dead-code elimination
//! (only what the outputs, the effects and the callbacks need is kept).

use std::collections::HashMap;

use super::ir::{Graph, NodeId, NodeKind};

/// Merges nodes that compute the same value; the duplicates are left unread (for [`dce`]).
pub(crate) fn cse(g: &mut Graph) {
    let n = g.nodes.len();
    let mut repl: Vec<NodeId> = (0..n).collect();
    // candidates by a hash of what the node computes
    let mut seen: HashMap<String, Vec<NodeId>> = HashMap::new();
    for id in 0..n {
        let node = &mut g.nodes[id];
        match &mut node.kind {
            NodeKind::Op { inputs, .. }
            | NodeKind::Call { inputs, .. }
            | NodeKind::Custom { inputs, .. } => {
                for i in inputs.iter_mut() {
                    *i = repl[*i];
                }
            }
            NodeKind::Detach(x) => *x = repl[*x],
            _ => {}
        }
        let node = &g.nodes[id];
        let key = match &node.kind {
            NodeKind::Op { op, inputs } => format!("op {} {inputs:?}", op.name()),
            NodeKind::Fill(v) => format!(
                "fill {} {:?} {} {}",
                v.to_bits(),
                node.shape,
                node.dtype,
                node.device
            ),
            NodeKind::Detach(x) => format!("detach {x}"),
            NodeKind::Constant(t) if t.numel() == 1 && t.device() == crate::Device::Cpu => {
                match t.to_vec_f64() {
                    // a scalar's value and dtype say all (an int64 beyond 2^53 is kept apart)
                    Ok(v) if t.dtype() != crate::DType::I64 || v[0].abs() < 9.0e15 => {
                        format!("const {} {:?} {}", v[0].to_bits(), node.shape, node.dtype)
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        let same = seen.get(&key).and_then(|cands| {
            cands.iter().copied().find(|&c| {
                let other = &g.nodes[c];
                other.shape == node.shape
                    && other.dtype == node.dtype
                    && other.device == node.device
                    && other.grad_pass == node.grad_pass
                    && match (&other.kind, &node.kind) {
                        (NodeKind::Op { op: a, .. }, NodeKind::Op { op: b, .. }) => a == b,
                        _ => true,
                    }
            })
        });
        match same {
            Some(c) => repl[id] = c,
            None => seen.entry(key).or_default().push(id),
        }
    }
    for o in g.outputs.iter_mut() {
        *o = repl[*o];
    }
    for (_, v) in g.writes.iter_mut() {
        *v = repl[*v];
    }
    for v in g.grad_nodes_mut() {
        *v = repl[*v];
    }
}

/// Drops the nodes nothing needs: kept are the outputs, the effects' values, the callbacks
/// (they run for their effects) and what they read. Node ids are renumbered (in order).
pub(crate) fn dce(g: &mut Graph) {
    let n = g.nodes.len();
    let mut live = vec![false; n];
    for r in g.roots() {
        live[r] = true;
    }
    for (id, node) in g.nodes.iter().enumerate() {
        if matches!(node.kind, NodeKind::Call { .. }) {
            live[id] = true;
        }
    }
    for id in (0..n).rev() {
        if live[id] {
            for &i in g.nodes[id].inputs() {
                live[i] = true;
            }
        }
    }
    // a write of a captured tensor's own value changes nothing
    let capture_node: HashMap<usize, NodeId> = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(id, node)| match node.kind {
            NodeKind::Capture(c) => Some((c, id)),
            _ => None,
        })
        .collect();
    g.writes.retain(|&(c, v)| capture_node.get(&c) != Some(&v));
    g.input_writes
        .retain(|&(i, v)| !matches!(g.nodes[v].kind, NodeKind::Input(j) if j == i));
    retain(g, &live);
}

/// Keeps the nodes where `keep` is true, renumbering them and every reference to them.
pub(crate) fn retain(g: &mut Graph, keep: &[bool]) {
    let mut new_id = vec![usize::MAX; keep.len()];
    let mut nodes = Vec::with_capacity(keep.iter().filter(|&&k| k).count());
    for (id, node) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        if keep[id] {
            new_id[id] = nodes.len();
            nodes.push(node);
        }
    }
    for node in nodes.iter_mut() {
        match &mut node.kind {
            NodeKind::Op { inputs, .. }
            | NodeKind::Call { inputs, .. }
            | NodeKind::Custom { inputs, .. } => {
                for i in inputs.iter_mut() {
                    *i = new_id[*i];
                }
            }
            NodeKind::Detach(x) => *x = new_id[*x],
            _ => {}
        }
    }
    g.nodes = nodes;
    for o in g.outputs.iter_mut() {
        *o = new_id[*o];
    }
    for (_, v) in g.writes.iter_mut() {
        *v = new_id[*v];
    }
    for v in g.grad_nodes_mut() {
        *v = new_id[*v];
    }
}

/// Moves scalar constants (Python numbers, made on the CPU) to the accelerator whose
/// elementwise ops read them: once, when the step is compiled, so that every run reads them
/// where the op runs (a fused kernel reads its inputs from device memory) and no run copies
/// them over again. A constant is moved only when every reader is an elementwise op (which
/// takes a 0-d tensor of its own device as it takes a CPU scalar) on one device, and the
/// step does not return or store the constant itself (those keep their CPU tensor).
pub(crate) fn scalar_constants_to_device(g: &mut Graph) -> crate::Result<()> {
    use crate::op::{ElementwiseOp, Op};
    use crate::Device;
    let n = g.nodes.len();
    // per constant: None (no reader seen yet), Some(Some(device)) (move there), Some(None)
    let mut to: Vec<Option<Option<Device>>> = vec![None; n];
    for node in &g.nodes {
        let elementwise = match &node.kind {
            NodeKind::Op { op, .. } => match op {
                Op::Unary(_) | Op::Binary(_) | Op::Compare(_) => true,
                Op::Elementwise(e) => !matches!(e, ElementwiseOp::Random { .. }),
                _ => false,
            },
            _ => false,
        };
        for &i in node.inputs() {
            let c = &g.nodes[i];
            if !matches!(&c.kind, NodeKind::Constant(t) if t.numel() == 1) {
                continue;
            }
            let want = (elementwise && c.device == Device::Cpu && node.device != Device::Cpu)
                .then_some(node.device);
            to[i] = match to[i] {
                None => Some(want),
                Some(prev) if prev == want => Some(prev),
                Some(_) => Some(None),
            };
        }
    }
    for r in g.roots() {
        to[r] = Some(None);
    }
    for (id, target) in to.into_iter().enumerate() {
        let Some(Some(device)) = target else {
            continue;
        };
        let node = &mut g.nodes[id];
        if let NodeKind::Constant(t) = &mut node.kind {
            *t = t.to_device(device)?;
            node.device = device;
        }
    }
    Ok(())
}
