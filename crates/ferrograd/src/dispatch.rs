//! The one dispatch point every op goes through, in forward and in backward alike: check the
//! inputs' devices, run the op's family forward, record it on the keys that track an input.

use crate::autograd::record_builtin;
use crate::error::{Error, Result};
use crate::op::{for_each_family, ElementwiseOp, MovementOp, Op, ReduceOp};
use crate::ops::Family;
use crate::tensor::Tensor;

/// Runs `op` on `inputs`, and records it on every recording key that tracks an input.
pub fn apply(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    Ok(vec![apply1(op, inputs)?])
}

/// [`apply`] for single-output ops (every builtin op has one output).
pub fn apply1(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    check_devices(op, inputs)?;
    let mut out = forward(op, inputs)?;
    if crate::graph::is_tracing() {
        if inputs.iter().any(|i| std::sync::Arc::ptr_eq(&i.0, &out.0)) {
            // an op that returned its input (a move to the device it is on): the node needs a
            // handle of its own
            out = out.view(out.layout().clone());
        }
        crate::graph::trace::on_op(op, inputs, &out)?;
    }
    if matches!(op, Op::Movement(_))
        && !inputs.is_empty()
        && std::sync::Arc::ptr_eq(out.storage(), inputs[0].storage())
        && !out.same(inputs[0])
        && out.dtype().is_float()
    {
        // a view: a recorded in-place write through it (or through what it views) rebases
        // the other (see `autograd::rebase`)
        out.storage().register_views(&[inputs[0], &out]);
    }
    record_builtin(op, inputs, std::slice::from_ref(&out))?;
    Ok(out)
}

/// Runs `op` on `inputs` without recording or tracing it (a graph's executor).
pub(crate) fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    check_devices(op, inputs)?;
    forward(op, inputs)
}

/// Runs the family forward of `op`. Kernels exist for the wide dtypes only (float32,
/// float64, int64, bool); an input of a storage-only dtype (float16, bfloat16, int32, int16,
/// int8, uint8) is widened to the dtype it computes in, the op runs there, and its result is
/// rounded back once, so every op rounds once, as PyTorch's. Ops that only move or convert
/// elements run on any dtype as it is (their views stay views).
fn forward(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    if let Some(out) = bool_logic(op, inputs) {
        return out;
    }
    if inputs.iter().all(|t| t.dtype().is_native()) || any_dtype(op) {
        return for_each_family!(op, f => f.forward(inputs));
    }
    let wide = inputs
        .iter()
        .map(|t| widen(t))
        .collect::<Result<smallvec::SmallVec<[Tensor; 3]>>>()?;
    let refs: smallvec::SmallVec<[&Tensor; 3]> = wide.iter().collect();
    let out = for_each_family!(op, f => f.forward(&refs))?;
    // integer sums stay int64, as PyTorch's
    let keeps_wide = matches!(op, Op::Reduce(ReduceOp::Sum { .. })) && out.dtype().is_int();
    let narrow = inputs
        .iter()
        .map(|t| t.dtype())
        .find(|d| !d.is_native() && d.compute() == out.dtype());
    match narrow {
        Some(d) if !keeps_wide => ElementwiseOp::Cast(d).forward(&[&out]),
        _ => Ok(out),
    }
}

/// PyTorch's arithmetic of two bool tensors: `+` and `maximum` are logical or, `*` and
/// `minimum` logical and (computed on int64 and read back as bool); `-` stays an error, as in
/// PyTorch.
fn bool_logic(op: &Op, inputs: &[&Tensor]) -> Option<Result<Tensor>> {
    use crate::op::BinaryOp;
    if let Op::Reduce(r) = op {
        return bool_reduce(op, r, inputs);
    }
    if let (Op::Unary(u), [x]) = (op, inputs) {
        use crate::op::UnaryOp;
        if x.dtype() != crate::DType::Bool {
            return None;
        }
        // PyTorch's: the sign and magnitude of a bool are itself; its square is int64
        return match u {
            UnaryOp::Sign | UnaryOp::Abs => Some(x.copy()),
            UnaryOp::Square => Some(
                ElementwiseOp::Cast(crate::DType::I64)
                    .forward(&[x])
                    .and_then(|w| u.forward(&[&w])),
            ),
            _ => None,
        };
    }
    let Op::Binary(b) = op else { return None };
    if !matches!(
        b,
        BinaryOp::Add | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum
    ) || inputs.len() != 2
        || inputs.iter().any(|t| t.dtype() != crate::DType::Bool)
    {
        return None;
    }
    let run = || {
        let wide = inputs
            .iter()
            .map(|t| ElementwiseOp::Cast(crate::DType::I64).forward(&[t]))
            .collect::<Result<smallvec::SmallVec<[Tensor; 2]>>>()?;
        let refs: smallvec::SmallVec<[&Tensor; 2]> = wide.iter().collect();
        let out = for_each_family!(op, f => f.forward(&refs))?;
        ElementwiseOp::Cast(crate::DType::Bool).forward(&[&out])
    };
    Some(run())
}

/// PyTorch's reductions of a bool tensor: `sum` counts the true elements (int64), `max` /
/// `min` are any / all (bool).
fn bool_reduce(op: &Op, r: &ReduceOp, inputs: &[&Tensor]) -> Option<Result<Tensor>> {
    let [x] = inputs else { return None };
    if x.dtype() != crate::DType::Bool {
        return None;
    }
    let back = match r {
        ReduceOp::Sum { .. } => false,
        ReduceOp::Max { .. } | ReduceOp::Min { .. } => true,
        _ => return None,
    };
    let run = || {
        let wide = ElementwiseOp::Cast(crate::DType::I64).forward(&[x])?;
        let out = for_each_family!(op, f => f.forward(&[&wide]))?;
        if back {
            ElementwiseOp::Cast(crate::DType::Bool).forward(&[&out])
        } else {
            Ok(out)
        }
    };
    Some(run())
}

/// Ops that run on every dtype as it is.
fn any_dtype(op: &Op) -> bool {
    match op {
        Op::Elementwise(ElementwiseOp::Cast(_) | ElementwiseOp::Copy) => true,
        Op::Movement(m) => matches!(
            m,
            MovementOp::ToDevice { .. }
                | MovementOp::Reshape(_)
                | MovementOp::Permute(_)
                | MovementOp::BroadcastTo(_)
                | MovementOp::Slice(_)
                | MovementOp::Diagonal { .. }
                | MovementOp::UnfoldView { .. }
                | MovementOp::AsStrided { .. }
                | MovementOp::SliceGrad { .. }
                | MovementOp::SetSlice(_)
                | MovementOp::Concat(_)
        ),
        _ => false,
    }
}

/// `t` in the dtype it computes in, unrecorded (the op that reads it is what is recorded).
fn widen(t: &Tensor) -> Result<Tensor> {
    let d = t.dtype();
    if d.is_native() {
        return Ok(t.clone());
    }
    ElementwiseOp::Cast(d.compute()).forward(&[t])
}

/// All inputs on one device; 0-d CPU tensors (Python scalars) may join tensors on any device.
fn check_devices(op: &Op, inputs: &[&Tensor]) -> Result<()> {
    let scalar = |t: &&Tensor| t.ndim() == 0 && t.device() == crate::Device::Cpu;
    if let Some(first) = inputs.iter().find(|t| !scalar(t)) {
        let dev = first.device();
        if let Some(other) = inputs.iter().find(|t| !scalar(t) && t.device() != dev) {
            return Err(Error::device(
                op.name(),
                format!(
                    "all inputs must be on one device, got {dev} and {}",
                    other.device()
                ),
            ));
        }
    }
    Ok(())
}
