//! In-place updates. Every write bumps the storage's version counter, so a tensor saved for
//! backward and changed afterwards is caught when backward reads it.

use std::sync::Arc;

use crate::autograd::no_grad;
use crate::cpu;
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::storage::{CpuData, StorageData};
use crate::tensor::Tensor;

/// `value` on `device` when it is a 0-d CPU tensor (a Python scalar, which may join a tensor
/// on any device, as in [`crate::op::apply1`]); else `value` itself.
fn scalar_to(value: &Tensor, device: crate::Device) -> Result<Tensor> {
    if value.ndim() == 0 && value.device() == crate::Device::Cpu {
        value.to_device(device)
    } else {
        Ok(value.clone())
    }
}

impl Tensor {
    /// Writes `value` (broadcast to this shape, cast to this dtype) into this tensor's storage,
    /// through its view. No gradient flows through this raw write; see [`Tensor::update_`].
    pub fn assign_(&self, value: &Tensor) -> Result<()> {
        let value = &scalar_to(value, self.device())?;
        if value.device() != self.device() {
            return Err(Error::device(
                "assign",
                format!(
                    "cannot write a tensor on {} into one on {}",
                    value.device(),
                    self.device()
                ),
            ));
        }
        let ok = broadcast_shapes("assign", value.shape(), self.shape())
            .map(|s| s.as_slice() == self.shape())
            .unwrap_or(false);
        if !ok {
            return Err(Error::shape(
                "assign",
                format!(
                    "cannot write a value of shape {:?} into a tensor of shape {:?}",
                    value.shape(),
                    self.shape()
                ),
            ));
        }
        let src = {
            let _g = no_grad();
            let v = value.astype(self.dtype())?;
            // reading and writing one buffer at once would deadlock and could read
            // half-written data: copy first
            if Arc::ptr_eq(v.storage(), self.storage()) {
                v.copy()?
            } else {
                v
            }
        };
        let lv = src.layout().broadcast_to(self.shape());
        let read = src.storage().read();
        let mut write = self.storage().write();
        match (&mut *write, &*read) {
            (StorageData::Cpu(dst), StorageData::Cpu(s)) => match (dst, s) {
                (CpuData::F32(d), CpuData::F32(s)) => cpu::write_into(d, self.layout(), s, &lv),
                (CpuData::F64(d), CpuData::F64(s)) => cpu::write_into(d, self.layout(), s, &lv),
                (CpuData::I64(d), CpuData::I64(s)) => cpu::write_into(d, self.layout(), s, &lv),
                (CpuData::Bool(d), CpuData::Bool(s)) => cpu::write_into(d, self.layout(), s, &lv),
                _ => return Err(Error::dtype("assign", "dtype mismatch after cast")),
            },
            #[cfg(feature = "cuda")]
            (StorageData::Cuda(dst), src_data) => {
                let crate::Device::Cuda(i) = self.device() else {
                    return Err(Error::device("assign", "device mismatch"));
                };
                let gpu = crate::cuda::gpu("assign", i)?;
                let up;
                let s = match src_data {
                    StorageData::Cuda(s) => s,
                    StorageData::Cpu(c) => {
                        up = crate::cuda::upload(&gpu, c)?;
                        &up
                    }
                };
                crate::cuda::write_into(&gpu, dst, self.layout(), s, &lv)?;
            }
            #[cfg(feature = "cuda")]
            (StorageData::Cpu(_), StorageData::Cuda(_)) => {
                return Err(Error::device(
                    "assign",
                    "cannot write a CUDA tensor into a CPU tensor in place",
                ))
            }
        }
        Ok(())
    }

    /// `self op= other` in place, without recording (for tensors no tape tracks): one pass
    /// over this tensor's storage, no temporary.
    pub fn binary_assign_(&self, op: crate::op::BinaryOp, other: &Tensor) -> Result<()> {
        let other = if other.dtype() != self.dtype() {
            let _g = no_grad();
            other.astype(self.dtype())?
        } else {
            other.clone()
        };
        let ok = broadcast_shapes(op.name(), other.shape(), self.shape())
            .map(|s| s.as_slice() == self.shape())
            .unwrap_or(false);
        if !ok {
            return Err(Error::shape(
                op.name(),
                format!(
                    "an in-place update of a tensor of shape {:?} cannot take an operand of shape {:?}",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        let aliased = Arc::ptr_eq(other.storage(), self.storage());
        #[cfg(feature = "cuda")]
        if let crate::Device::Cuda(i) = self.device() {
            // a view whose elements share memory (a broadcast) takes the general path below
            let other = scalar_to(&other, self.device())?;
            let distinct = self
                .shape()
                .iter()
                .zip(self.layout().strides())
                .all(|(&n, &s)| n <= 1 || s != 0);
            if !aliased && distinct && other.device() == self.device() {
                let gpu = crate::cuda::gpu(op.name(), i)?;
                let ls = other.layout().broadcast_to(self.shape());
                let read = other.storage().read();
                let mut write = self.storage().write();
                return match (&mut *write, &*read) {
                    (StorageData::Cuda(d), StorageData::Cuda(s)) => {
                        crate::cuda::binary_assign(&gpu, op, d, self.layout(), s, &ls)
                    }
                    _ => Err(Error::device(op.name(), "in-place update across devices")),
                };
            }
        }
        if aliased || self.device() != crate::Device::Cpu || other.device() != crate::Device::Cpu {
            let result = {
                let _g = no_grad();
                crate::op::apply1(&crate::op::Op::Binary(op), &[self, &other])?
            };
            return self.assign_(&result);
        }
        let ls = other.layout().broadcast_to(self.shape());
        let read = other.storage().read();
        let mut write = self.storage().write();
        match (&mut *write, &*read) {
            (StorageData::Cpu(d), StorageData::Cpu(s)) => {
                cpu::binary_assign(op, d, self.layout(), s, &ls)
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::device(op.name(), "in-place update across devices")),
        }
    }

    /// The in-place form of an op whose out-of-place `result` was computed from this tensor:
    /// writes `result` into this storage and returns the handle this tensor continues as. When
    /// a gradient tape tracks either, that handle carries `result`'s tape state (so later ops
    /// differentiate through the update) and shares this tensor's `.grad`.
    pub fn update_(&self, op: &str, result: &Tensor) -> Result<Tensor> {
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
        self.assign_(result)?;
        if !self.is_tracked() && !result.is_tracked() {
            return Ok(self.clone());
        }
        Ok(self.continued_as(result))
    }
}
