//! In-place updates. Every write bumps the storage's version counter, so a tensor saved for
//! backward and changed afterwards is caught when backward reads it.

use std::sync::Arc;

use crate::autograd::no_grad;
use crate::backend::in_place;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::op::BinaryOp;
use crate::tensor::Tensor;

/// `value` on `device` when it is a 0-d CPU tensor (a Python scalar, which may join a tensor
/// on any device, as in [`crate::apply1`]); else `value` itself.
fn scalar_to(value: &Tensor, device: crate::Device) -> Result<Tensor> {
    if value.ndim() == 0 && value.device() == crate::Device::Cpu {
        value.to_device(device)
    } else {
        Ok(value.clone())
    }
}

/// Bool < int < float: an in-place arithmetic update may take an operand of its own kind or a
/// lower one (numpy's `same_kind` casting; `i *= 1.5` would truncate silently).
fn kind(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 => 1,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => 2,
    }
}

/// The raw in-place writes leave the caller's handle as it was, which a trace cannot follow:
/// inside one, in-place updates go through [`Tensor::update_`] (what the Python operators do).
fn untraceable(op: &str) -> Result<()> {
    if crate::graph::is_tracing() {
        return Err(Error::Trace {
            op: op.to_string(),
            msg: "a raw in-place write cannot be traced; compute the result and use update_"
                .to_string(),
        });
    }
    Ok(())
}

impl Tensor {
    /// Checks that an in-place `op` can write `value` into this tensor: its elements must not
    /// share memory (a broadcast view: PyTorch refuses too), the value must broadcast to its
    /// shape, live on its device and not be of a higher kind (float into int).
    fn check_write(&self, op: &str, value: &Tensor) -> Result<()> {
        let overlapping = self
            .shape()
            .iter()
            .zip(self.layout().strides())
            .any(|(&n, &s)| n > 1 && s == 0);
        if overlapping {
            return Err(Error::shape(
                op,
                format!(
                    "cannot write in place into a broadcast view (shape {:?}, strides {:?}): \
                     several of its elements are one element in memory; write into a copy \
                     (x = x.copy()) instead",
                    self.shape(),
                    self.layout().strides()
                ),
            ));
        }
        if value.device() != self.device() {
            return Err(Error::device(
                op,
                format!(
                    "cannot write a tensor on {} into one on {}",
                    value.device(),
                    self.device()
                ),
            ));
        }
        let fits = broadcast_shapes(op, value.shape(), self.shape())
            .map(|s| s.as_slice() == self.shape())
            .unwrap_or(false);
        if !fits {
            return Err(Error::shape(
                op,
                format!(
                    "cannot write a value of shape {:?} into a tensor of shape {:?}",
                    value.shape(),
                    self.shape()
                ),
            ));
        }
        Ok(())
    }

    /// PyTorch refuses a recorded in-place write into a leaf that requires grad (or a view of
    /// one): the leaf's gradient would be taken at a value it no longer holds.
    fn refuse_leaf_write(&self, op: &str) -> Result<()> {
        let leaf_key = self.storage().leaf_key();
        if leaf_key == 0 {
            return Ok(());
        }
        if self.is_recorded_by(leaf_key) {
            return Err(Error::autograd(format!(
                "{op}: a leaf tensor that requires grad (or a view of one), of shape {:?}, is \
                 being used in an in-place operation; update it under `with no_grad():` or \
                 through `.data`",
                self.shape()
            )));
        }
        Ok(())
    }

    /// `value` cast to this dtype, on this device, in a buffer of its own when it shares this
    /// tensor's (reading and writing one buffer at once could read half-written data).
    fn write_source(&self, value: &Tensor) -> Result<Tensor> {
        let _g = no_grad();
        let v = value.astype(self.dtype())?;
        if Arc::ptr_eq(v.storage(), self.storage()) {
            v.copy()
        } else {
            Ok(v)
        }
    }

    /// Writes `value` (broadcast to this shape, cast to this dtype) into this tensor's storage,
    /// through its view. No gradient flows through this raw write; see [`Tensor::update_`].
    pub fn assign_(&self, value: &Tensor) -> Result<()> {
        untraceable("assign_")?;
        let value = scalar_to(value, self.device())?;
        self.check_write("assign", &value)?;
        let src = self.write_source(&value)?;
        let ls = src.layout().broadcast_to(self.shape());
        in_place!("assign", self, &[&src], |b, dst, d| {
            b.write(dst, self.layout(), d[0], &ls)
        })
    }

    /// `self op= other` in place, without recording (for tensors no tape records): one pass
    /// over this tensor's storage, no temporary.
    pub fn binary_assign_(&self, op: BinaryOp, other: &Tensor) -> Result<()> {
        untraceable(op.name())?;
        let other = scalar_to(other, self.device())?;
        self.check_write(op.name(), &other)?;
        if kind(other.dtype()) > kind(self.dtype()) {
            return Err(Error::dtype(
                op.name(),
                format!(
                    "cannot update a {} tensor of shape {:?} in place with a {} operand (the \
                     result would be truncated); compute out of place or cast first",
                    self.dtype(),
                    self.shape(),
                    other.dtype()
                ),
            ));
        }
        if !self.dtype().is_native() || self.dtype() == DType::Bool {
            // no in-place kernels for storage-only dtypes and bool (`a += b` on bools is a
            // logical or, as PyTorch's): computed out of place (storage-only dtypes in the
            // wide dtype, rounded once) and written back
            let result = {
                let _g = no_grad();
                // an operand of another dtype meets this tensor in the dtype the storage-only
                // dtypes compute in (float32 for a float operand, as PyTorch's half kernels
                // do; int64 for integers): a wider float scalar, or a bool or integer mask
                // (`mask *= keep` on a float16 tensor)
                let (wide, other) = if other.dtype() == self.dtype() {
                    (self.clone(), other.clone())
                } else {
                    let c = if other.dtype().is_float() {
                        DType::F32
                    } else {
                        self.dtype().compute()
                    };
                    (self.astype(c)?, other.astype(c)?)
                };
                crate::dispatch::apply1(&crate::op::Op::Binary(op), &[&wide, &other])?
                    .astype(self.dtype())?
            };
            return in_place!(op.name(), self, &[&result], |b, dst, d| {
                b.write(dst, self.layout(), d[0], result.layout())
            });
        }
        let src = self.write_source(&other)?;
        let ls = src.layout().broadcast_to(self.shape());
        in_place!(op.name(), self, &[&src], |b, dst, d| {
            b.binary_assign(op, dst, self.layout(), d[0], &ls)
        })
    }

    /// The in-place form of an op whose out-of-place `result` was computed from this tensor:
    /// writes `result` into this storage and returns the handle this tensor continues as. When
    /// a gradient tape tracks either, that handle carries `result`'s tape state (so later ops
    /// differentiate through the update) and shares this tensor's `.grad`.
    pub fn update_(&self, op: &str, result: &Tensor) -> Result<Tensor> {
        // a wider result of the same kind (float64 into float32, int64 into int32) is cast to
        // this tensor's dtype, as PyTorch's in-place ops do
        let category = |d: DType| {
            if d.is_float() {
                2
            } else if d == DType::Bool {
                0
            } else {
                1
            }
        };
        if result.shape() == self.shape()
            && result.dtype() != self.dtype()
            && category(result.dtype()) == category(self.dtype())
        {
            return self.update_(op, &result.astype(self.dtype())?);
        }
        if result.shape() != self.shape() || result.dtype() != self.dtype() {
            return Err(Error::shape(
                op,
                format!(
                    "an in-place update of a {} tensor of shape {:?} cannot take a {} result of shape {:?}",
                    self.dtype(),
                    self.shape(),
                    result.dtype(),
                    result.shape()
                ),
            ));
        }
        self.check_write(op, result)?;
        self.refuse_leaf_write(op)?;
        // a recorded tensor overwritten with a value the tape does not track (`h.zero_()`,
        // `h.copy_(constant)`) still requires grad, as in PyTorch: what it held before gets a
        // zero gradient (not none), through a select that takes every element from `result`
        let linked;
        let result = if self.is_recorded() && self.is_tracked() && !result.is_tracked() {
            let all = Tensor::scalar_of(1.0, DType::Bool).to_device(self.device())?;
            linked = crate::ops::elementwise::where_cond(&all, result, self)?;
            &linked
        } else {
            result
        };
        crate::graph::trace::on_update(op, self, result)?;
        let src = self.write_source(result)?;
        in_place!(op, self, &[&src], |b, dst, d| {
            b.write(dst, self.layout(), d[0], src.layout())
        })?;
        let tracked = self.is_tracked() || result.is_tracked();
        if !tracked && !crate::graph::is_tracing() {
            return Ok(self.clone());
        }
        // a write through an untracked alias no view op made (`w.detach()`, `w.data`) is
        // PyTorch's write behind autograd's back: the alias takes the recorded value, the
        // tensors over the same memory keep their tape state (a saved value it changed is
        // still refused at backward, by the version check)
        let behind = tracked && !self.is_tracked() && !self.is_registered_view();
        if tracked && !behind {
            // other tracked handles over this buffer (views of it, the tensor it views) no
            // longer stand for what it holds
            let at = crate::storage::Footprint::of(self.layout());
            self.storage().note_tape_write(at);
        }
        let next = self.continued_as(result);
        if crate::graph::is_tracing() {
            // the traced graph is functional: the handles over this buffer that the write
            // changed (the tensor a view was taken from, other views of it) continue as
            // values computed from the write, so reading one later reads the new value
            // (`row = x[0]; row[1] = 5.0; x * 2`, `a[0][j] = v`) instead of a stale node
            self.set_successor(next.clone());
            crate::graph::trace::reading_stale(|| {
                crate::autograd::rebase::rebase_views(self, &next)
            })?;
            return Ok(next);
        }
        if tracked {
            // other holders of this very handle (an alias such as `b.view_as(b)`) follow too
            self.set_successor(next.clone());
            if !behind {
                crate::autograd::rebase::rebase_views(self, &next)?;
            }
            crate::autograd::rebase::move_retained(self, &next)?;
        }
        Ok(next)
    }
}
