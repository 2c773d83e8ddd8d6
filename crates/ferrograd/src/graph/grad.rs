//! The graph gradient pass (MXNet's semantics): inside a trace, the gradients of `ys` with
//! respect to `xs` are built by walking the traced nodes in reverse order and applying each
//! op's grad rule, the same rule the tape uses, to the op's traced values. The rules' own ops
//! run through `apply`, so they are traced too: the gradient graph is part of the step's graph
//! and can be differentiated again.
//!
//! * Only nodes on a path from an `x` to a `y` get a gradient; several contributions to one
//!   node are added.
//! * An `x` that no `y` depends on gets no gradient (`None`, not zeros), as on the tape.
//! * `on_final(i, grad)` runs as soon as `xs[i]`'s gradient is final: when the last op that
//!   reads it has passed its contribution back, before the rest of the walk (a callback traced
//!   there runs at that point of every run, so an allreduce can overlap the rest of backward).
//! * A gradient that must flow through an op without a grad rule is an error naming the op.

use super::ir::{NodeId, NodeKind};
use super::trace::{active, set_grad_pass, with_tracer_ref};
use crate::autograd::{rule_override, run_rule, RuleCtx};
use crate::error::{Error, Result};
use crate::op::Op;
use crate::tensor::Tensor;

/// What the pass needs to know of a node before it starts.
struct Shape {
    /// The inputs a gradient flows into through the node (none for a leaf, a `detach` or a
    /// callback).
    inputs: Vec<NodeId>,
    /// Whether a gradient can flow through the node (an op or a custom function's output).
    passes: bool,
    float: bool,
    /// For a custom function's output: its index and the call's output count.
    custom: Option<(usize, usize)>,
}

/// The gradients of `ys` (seeded with `dys`) with respect to `xs`, through the active trace.
/// `on_final(i, g)` is called once for each `xs[i]` a gradient reaches, as soon as it is
/// final. Errors when no trace is active. The gradient graph can be differentiated again.
pub fn gradients(
    ys: &[Tensor],
    dys: &[Tensor],
    xs: &[Tensor],
    on_final: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
) -> Result<Vec<Option<Tensor>>> {
    gradients_with(ys, dys, xs, true, on_final)
}

/// [`gradients`], with the gradient graph differentiable again only if `differentiable`
/// (`create_graph`): otherwise a later gradient pass treats its values as constants, as the
/// tape treats a backward nothing recorded, and the trace keeps none of them for one.
pub fn gradients_with(
    ys: &[Tensor],
    dys: &[Tensor],
    xs: &[Tensor],
    differentiable: bool,
    on_final: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
) -> Result<Vec<Option<Tensor>>> {
    if ys.len() != dys.len() {
        return Err(Error::autograd(format!(
            "gradients: got {} tensors and {} gradients",
            ys.len(),
            dys.len()
        )));
    }
    for (y, dy) in ys.iter().zip(dys) {
        if y.shape() != dy.shape() || y.dtype() != dy.dtype() {
            return Err(Error::shape(
                "gradients",
                format!(
                    "the gradient for a {} tensor of shape {:?} must match its dtype and shape, \
                     got {} {:?}",
                    y.dtype(),
                    y.shape(),
                    dy.dtype(),
                    dy.shape()
                ),
            ));
        }
    }
    let (y_nodes, x_nodes, shapes) = active("gradients", |tr| {
        let y_nodes = ys
            .iter()
            .map(|t| tr.node_of(t))
            .collect::<Result<Vec<_>>>()?;
        let x_nodes = xs
            .iter()
            .map(|t| tr.node_of(t))
            .collect::<Result<Vec<_>>>()?;
        let shapes: Vec<Shape> = tr
            .graph
            .nodes
            .iter()
            .map(|n| Shape {
                inputs: n.grad_inputs().to_vec(),
                passes: matches!(n.kind, NodeKind::Op { .. } | NodeKind::Custom { .. })
                    && !n.no_grad,
                float: n.dtype.is_float(),
                custom: match n.kind {
                    NodeKind::Custom {
                        index, n_outputs, ..
                    } => Some((index, n_outputs)),
                    _ => None,
                },
            })
            .collect();
        Ok((y_nodes, x_nodes, shapes))
    })?;
    let (was, was_differentiable) = set_grad_pass(true, differentiable);
    let out = walk(&y_nodes, &x_nodes, &shapes, dys, xs.len(), on_final);
    set_grad_pass(was, was_differentiable);
    out
}

/// The walk of [`gradients`] over the first `shapes.len()` nodes.
fn walk(
    y_nodes: &[NodeId],
    x_nodes: &[NodeId],
    shapes: &[Shape],
    dys: &[Tensor],
    n_xs: usize,
    on_final: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
) -> Result<Vec<Option<Tensor>>> {
    let n0 = shapes.len();

    // nodes some x reaches, then those of them that reach some y
    let mut from_x = vec![false; n0];
    for &x in x_nodes {
        from_x[x] = shapes[x].float;
    }
    for (n, s) in shapes.iter().enumerate() {
        if !from_x[n] && s.passes && s.float && s.inputs.iter().any(|&i| from_x[i]) {
            from_x[n] = true;
        }
    }
    let mut relevant = vec![false; n0];
    for &y in y_nodes {
        relevant[y] = from_x[y];
    }
    for n in (0..n0).rev() {
        if relevant[n] && shapes[n].passes {
            for &i in &shapes[n].inputs {
                if from_x[i] {
                    relevant[i] = true;
                }
            }
        }
    }
    // the outputs of one custom call pass their gradients together: all or none
    let mut n = 0;
    while n < n0 {
        if let Some((0, count)) = shapes[n].custom {
            let any = (n..n + count).any(|k| relevant[k]);
            for k in n..n + count {
                relevant[k] = any && shapes[k].float;
            }
            n += count;
        } else {
            n += 1;
        }
    }
    // how many reads of each node still have to pass their contribution back
    let mut pending = vec![0usize; n0];
    for (n, s) in shapes.iter().enumerate() {
        if relevant[n] && s.passes {
            for &i in &s.inputs {
                if relevant[i] {
                    pending[i] += 1;
                }
            }
        }
    }
    let mut x_of: Vec<Vec<usize>> = vec![Vec::new(); n0];
    for (i, &x) in x_nodes.iter().enumerate() {
        x_of[x].push(i);
    }

    let mut grads: Vec<Option<Tensor>> = vec![None; n0];
    for (&y, dy) in y_nodes.iter().zip(dys) {
        if relevant[y] {
            add_into(&mut grads[y], dy)?;
        }
    }
    let mut out: Vec<Option<Tensor>> = vec![None; n_xs];
    let mut finalize = |n: NodeId, g: &Option<Tensor>, out: &mut Vec<Option<Tensor>>| {
        if let Some(g) = g {
            for &i in &x_of[n] {
                out[i] = Some(g.clone());
                on_final(i, g)?;
            }
        }
        Ok::<(), Error>(())
    };
    // an x that nothing relevant reads is final once seeded
    let mut seen = vec![false; n0];
    for &x in x_nodes {
        if relevant[x] && pending[x] == 0 && !std::mem::replace(&mut seen[x], true) {
            finalize(x, &grads[x], &mut out)?;
        }
    }
    for n in (0..n0).rev() {
        if !relevant[n] || !shapes[n].passes {
            continue;
        }
        let take = |grads: &mut Vec<Option<Tensor>>, k: NodeId| {
            if x_of[k].is_empty() {
                grads[k].take()
            } else {
                grads[k].clone()
            }
        };
        if let Some((index, count)) = shapes[n].custom {
            // a custom function's rule runs once per call, at its last output (the call's
            // outputs are consecutive, all final by then)
            if index + 1 == count {
                let first = n + 1 - count;
                let dys: Vec<Option<Tensor>> = (first..=n).map(|k| take(&mut grads, k)).collect();
                if dys.iter().any(Option::is_some) {
                    let rule = with_tracer_ref(|tr| match &tr.graph.nodes[n].kind {
                        NodeKind::Custom { rule, .. } => Ok(rule.clone()),
                        _ => unreachable!("a custom node"),
                    })?;
                    let dxs = rule(&dys)?;
                    for (&i, dx) in shapes[n].inputs.iter().zip(dxs) {
                        if let (Some(dx), true) = (dx, relevant[i]) {
                            add_into(&mut grads[i], &dx)?;
                        }
                    }
                }
            }
        } else if let Some(dy) = take(&mut grads, n) {
            let (op, values, output, stale) = with_tracer_ref(|tr| {
                let NodeKind::Op { op, inputs } = &tr.graph.nodes[n].kind else {
                    unreachable!("only op nodes pass gradients")
                };
                // a value written in place since is refused only if the rule reads it
                let stale: Vec<Option<Error>> = inputs
                    .iter()
                    .chain(std::iter::once(&n))
                    .map(|&i| tr.check_fresh(i).err())
                    .collect();
                let values: Vec<Option<Tensor>> =
                    inputs.iter().map(|&i| tr.values[i].clone()).collect();
                Ok((op.clone(), values, tr.values[n].clone(), stale))
            })?;
            if !op.is_differentiable() {
                return Err(not_differentiable(&op));
            }
            let needs: Vec<bool> = shapes[n].inputs.iter().map(|&i| relevant[i]).collect();
            let dxs = apply_rule(&op, &values, output.as_ref(), &needs, &stale, &dy, n)?;
            for (&i, dx) in shapes[n].inputs.iter().zip(dxs) {
                if let Some(dx) = dx {
                    add_into(&mut grads[i], &dx)?;
                }
            }
        }
        for &i in &shapes[n].inputs {
            if relevant[i] {
                pending[i] -= 1;
                if pending[i] == 0 && !x_of[i].is_empty() {
                    finalize(i, &grads[i], &mut out)?;
                }
            }
        }
    }
    Ok(out)
}

/// The op's gradient rule on its traced values: a registered override when there is one
/// (and it does not decline), else the builtin rule.
fn apply_rule(
    op: &Op,
    values: &[Option<Tensor>],
    output: Option<&Tensor>,
    needs: &[bool],
    stale: &[Option<Error>],
    dy: &Tensor,
    n: NodeId,
) -> Result<Vec<Option<Tensor>>> {
    if let Some(custom) = rule_override(op.name()) {
        if let Some(e) = stale.iter().flatten().next() {
            // an override may read any of them
            return Err(e.clone_trace());
        }
        // (the trace keeps every value of an op with an override)
        let refs: Option<Vec<&Tensor>> = values.iter().map(Option::as_ref).collect();
        let (Some(refs), Some(output)) = (refs, output) else {
            return Err(Error::Trace {
                op: op.name().to_string(),
                msg: "a value its gradient rule override reads was released".to_string(),
            });
        };
        if let Some(rule) = custom.make(op, &refs, std::slice::from_ref(output), needs, 0)? {
            let mut dxs = rule.backward(&[Some(dy.clone())])?;
            dxs.resize(values.len(), None);
            for (dx, &need) in dxs.iter_mut().zip(needs) {
                if !need {
                    *dx = None;
                }
            }
            return Ok(dxs);
        }
    }
    let (in_shapes, out_shape, in_dtype) = with_tracer_ref(|tr| {
        let nodes = &tr.graph.nodes;
        let NodeKind::Op { inputs, .. } = &nodes[n].kind else {
            unreachable!("only op nodes pass gradients")
        };
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|&i| nodes[i].shape.clone()).collect();
        let dtype = inputs.first().map_or(nodes[n].dtype, |&i| nodes[i].dtype);
        Ok((shapes, nodes[n].shape.clone(), dtype))
    })?;
    let shape_refs: Vec<&[usize]> = in_shapes.iter().map(Vec::as_slice).collect();
    let ctx = RuleCtx::for_graph(
        op,
        values,
        &shape_refs,
        output,
        &out_shape,
        in_dtype,
        needs,
        stale,
    );
    run_rule(&ctx, dy, values.len())
}

fn add_into(slot: &mut Option<Tensor>, g: &Tensor) -> Result<()> {
    *slot = Some(match slot.take() {
        Some(old) => old.add(g)?,
        None => g.clone(),
    });
    Ok(())
}

fn not_differentiable(op: &Op) -> Error {
    Error::autograd(format!(
        "{}: has no gradient, and a gradient must flow through it (detach its input or its \
         output to stop the gradient there)",
        op.name()
    ))
}
