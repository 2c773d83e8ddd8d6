//! Matrix products with numpy semantics (1-D operands, broadcast batch axes).

use super::{same_dtype, sum_to_shape, Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::op::{LinalgOp, Op};
use crate::tensor::Tensor;

impl Family for LinalgOp {
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        match self {
            LinalgOp::MatMul => matmul_forward(inputs),
        }
    }

    fn saves(&self, needs: &[bool]) -> SaveMask {
        let mut m = SaveMask::default();
        match self {
            // dA = dY @ B^T needs B; dB = A^T @ dY needs A
            LinalgOp::MatMul => {
                m.input(0, needs[1]);
                m.input(1, needs[0]);
            }
        }
        m
    }

    fn saves_for(&self, needs: &[bool], inputs: &[&Tensor]) -> SaveMask {
        let mut m = self.saves(needs);
        // a column-major B (a Linear weight used as W^T) is kept to choose dB's layout: a
        // view of a weight, alive anyway, so it costs no memory
        if needs[1] && column_major(inputs[1]) {
            m.input(1, true);
        }
        m
    }

    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
        match self {
            LinalgOp::MatMul => Ok(vec![
                ctx.need(0, || {
                    sum_to_shape(&dy.matmul(&ctx.input(1)?.transpose(-1, -2)?)?, ctx.shape(0))
                })?,
                ctx.need(1, || {
                    let a = ctx.input(0)?;
                    let b_cols = ctx.input(1).is_ok_and(|b| column_major(&b));
                    if b_cols && a.ndim() == 2 && dy.ndim() == 2 {
                        // B is a transposed view (a Linear weight used as W^T): (dY^T A)^T has
                        // B's own strides, so the gradient reaching the weight through the
                        // transpose is contiguous, as PyTorch arranges it
                        return dy.transpose(-1, -2)?.matmul(&a)?.transpose(-1, -2);
                    }
                    sum_to_shape(&a.transpose(-1, -2)?.matmul(dy)?, ctx.shape(1))
                })?,
            ]),
        }
    }
}

/// Whether a matrix is stored column by column (the transpose of a contiguous matrix).
fn column_major(t: &Tensor) -> bool {
    let (shape, strides) = (t.shape(), t.layout().strides());
    t.ndim() == 2
        && shape[0] > 1
        && shape[1] > 1
        && strides[0] == 1
        && strides[1] == shape[0] as isize
}

fn matmul_forward(inputs: &[&Tensor]) -> Result<Tensor> {
    let (a, b) = (inputs[0], inputs[1]);
    same_dtype("matmul", inputs)?;
    if a.dtype() == DType::Bool {
        return Err(Error::dtype("matmul", "not defined for bool tensors"));
    }
    let (sa, sb) = (a.shape(), b.shape());
    if sa.len() < 2 || sb.len() < 2 || sa[sa.len() - 1] != sb[sb.len() - 2] {
        return Err(Error::shape(
            "matmul",
            format!("shapes {sa:?} and {sb:?} are not aligned (inner dimensions must match)"),
        ));
    }
    let batch =
        broadcast_shapes("matmul", &sa[..sa.len() - 2], &sb[..sb.len() - 2]).map_err(|_| {
            Error::shape(
                "matmul",
                format!(
                    "batch dimensions of shapes {sa:?} and {sb:?} cannot be broadcast together"
                ),
            )
        })?;
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let full = |r: usize, c: usize| batch.iter().copied().chain([r, c]).collect::<Vec<_>>();
    let (la, lb) = (
        a.layout().broadcast_to(&full(m, k)),
        b.layout().broadcast_to(&full(k, n)),
    );
    crate::layout::checked_size("matmul", &full(m, n), a.dtype().size_in_bytes())?;
    let d = on_device!("matmul", inputs, |b, d| b.matmul(d[0], &la, d[1], &lb))?;
    Ok(Tensor::from_storage(d, &full(m, n)))
}

impl Tensor {
    /// Matrix product with numpy semantics: 1-D operands are promoted to matrices and the
    /// added axis removed from the result; leading axes broadcast as a batch.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() == 0 || other.ndim() == 0 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "operands need at least one dimension, got shapes {:?} and {:?}",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        let a = if self.ndim() == 1 {
            self.expand_dims(0)?
        } else {
            self.clone()
        };
        let b = if other.ndim() == 1 {
            other.expand_dims(1)?
        } else {
            other.clone()
        };
        let out = apply1(&Op::Linalg(LinalgOp::MatMul), &[&a, &b]).map_err(|e| match e {
            Error::Shape { op, .. } if self.ndim() == 1 || other.ndim() == 1 => Error::Shape {
                op,
                msg: format!(
                    "shapes {:?} and {:?} are not aligned (inner dimensions must match)",
                    self.shape(),
                    other.shape()
                ),
            },
            e => e,
        })?;
        let mut squeeze = Vec::new();
        if self.ndim() == 1 {
            squeeze.push(out.ndim() as isize - 2);
        }
        if other.ndim() == 1 {
            squeeze.push(out.ndim() as isize - 1);
        }
        if squeeze.is_empty() {
            Ok(out)
        } else {
            out.squeeze(Some(&squeeze))
        }
    }
}
