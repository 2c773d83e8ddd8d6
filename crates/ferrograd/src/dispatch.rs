//! The one dispatch point every op goes through, in forward and in backward alike: check the
//! inputs' devices, run the op's family forward, record it on the keys that track an input.

use crate::autograd::record_builtin;
use crate::error::{Error, Result};
use crate::op::{for_each_family, Op};
use crate::ops::Family;
use crate::tensor::Tensor;

/// Runs `op` on `inputs`, and records it on every recording key that tracks an input.
pub fn apply(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    Ok(vec![apply1(op, inputs)?])
}

/// [`apply`] for single-output ops (every builtin op has one output).
pub fn apply1(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    check_devices(op, inputs)?;
    let mut out = for_each_family!(op, f => f.forward(inputs))?;
    if crate::graph::is_tracing() {
        if inputs.iter().any(|i| std::sync::Arc::ptr_eq(&i.0, &out.0)) {
            // an op that returned its input (a move to the device it is on): the node needs a
            // handle of its own
            out = out.view(out.layout().clone());
        }
        crate::graph::trace::on_op(op, inputs, &out)?;
    }
    record_builtin(op, inputs, std::slice::from_ref(&out))?;
    Ok(out)
}

/// Runs `op` on `inputs` without recording or tracing it (a graph's executor).
pub(crate) fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    check_devices(op, inputs)?;
    for_each_family!(op, f => f.forward(inputs))
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
