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
            LinalgOp::Attention { scale, causal } => {
                let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
                check_attention(q, k, v)?;
                let d = on_device!(self.name(), inputs, |bk, d| bk.attention(
                    (d[0], q.layout()),
                    (d[1], k.layout()),
                    (d[2], v.layout()),
                    *scale,
                    *causal
                ))?;
                let mut shape = q.shape().to_vec();
                *shape.last_mut().unwrap() = v.shape()[v.ndim() - 1];
                Ok(Tensor::from_storage(d, &shape))
            }
            LinalgOp::AttentionGrad { scale, causal } => {
                let (q, k, v, o, g) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs[4]);
                check_attention(q, k, v)?;
                same_dtype(self.name(), inputs)?;
                if o.shape() != g.shape() {
                    return Err(Error::shape(
                        self.name(),
                        format!("out {:?} and dout {:?} differ", o.shape(), g.shape()),
                    ));
                }
                let d = on_device!(self.name(), inputs, |bk, d| bk.attention_grad(
                    (d[0], q.layout()),
                    (d[1], k.layout()),
                    (d[2], v.layout()),
                    (d[3], o.layout()),
                    (d[4], g.layout()),
                    *scale,
                    *causal
                ))?;
                Ok(Tensor::from_storage(
                    d,
                    &[q.numel() + k.numel() + v.numel()],
                ))
            }
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
            // the probabilities are recomputed from q and k; the output gives each row's
            // `dout . out`
            LinalgOp::Attention { .. } => {
                for i in 0..3 {
                    m.input(i, true);
                }
                m.outputs = true;
            }
            LinalgOp::AttentionGrad { .. } => {}
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
                    let (a, dy) =
                        if ctx.shape(1).len() == 2 && a.ndim() > 2 && dy.ndim() == a.ndim() {
                            // a stack of rows times one matrix (a Linear layer on (B, T, K)): the
                            // batch axes merge into the rows, so B's gradient is one product, not
                            // a batched product summed over the batch
                            let k = a.shape()[a.ndim() - 1];
                            let n = dy.shape()[dy.ndim() - 1];
                            let rows: usize = a.shape()[..a.ndim() - 1].iter().product();
                            (a.reshape(&[rows, k])?, dy.reshape(&[rows, n])?)
                        } else {
                            (a, dy.clone())
                        };
                    if b_cols && a.ndim() == 2 && dy.ndim() == 2 {
                        // B is a transposed view (a Linear weight used as W^T): (dY^T A)^T has
                        // B's own strides, so the gradient reaching the weight through the
                        // transpose is contiguous, as PyTorch arranges it
                        return dy.transpose(-1, -2)?.matmul(&a)?.transpose(-1, -2);
                    }
                    sum_to_shape(&a.transpose(-1, -2)?.matmul(&dy)?, ctx.shape(1))
                })?,
            ]),
            LinalgOp::Attention { scale, causal } => {
                let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
                let (dq, dk, dv) =
                    attention_backward(&q, &k, &v, &ctx.output()?, dy, *scale, *causal)?;
                Ok(vec![Some(dq), Some(dk), Some(dv)])
            }
            LinalgOp::AttentionGrad { .. } => Err(super::not_differentiable(self.name())),
        }
    }
}

/// The shapes fused attention takes: `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]` with the
/// same leading axes, `s >= 1`, one float dtype.
fn check_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<()> {
    const OP: &str = "scaled_dot_product_attention";
    same_dtype(OP, &[q, k, v])?;
    if !q.dtype().is_float() {
        return Err(Error::dtype(
            OP,
            format!("needs float tensors, got {}", q.dtype()),
        ));
    }
    let (sq, sk, sv) = (q.shape(), k.shape(), v.shape());
    let nd = sq.len();
    if nd < 2
        || sk.len() != nd
        || sv.len() != nd
        || sq[..nd - 2] != sk[..nd - 2]
        || sq[..nd - 2] != sv[..nd - 2]
        || sq[nd - 1] != sk[nd - 1]
        || sk[nd - 2] != sv[nd - 2]
        || sk[nd - 2] == 0
    {
        return Err(Error::shape(
            OP,
            format!(
                "query {sq:?}, key {sk:?} and value {sv:?} must be (..., L, E), (..., S, E) and \
                 (..., S, Ev) with the same leading axes and S >= 1"
            ),
        ));
    }
    Ok(())
}

/// Attention's gradients: one fused op (cut from its flat result), or, where this backward
/// is itself recorded, the same formulas with differentiable ops:
/// `P = softmax(scale q k^T)`, `dv = P^T dout`, `dS = P * (dP - rowsum(dP * P))` with
/// `dP = dout v^T`, `dq = scale dS k`, `dk = scale dS^T q`.
fn attention_backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    dy: &Tensor,
    scale: f64,
    causal: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    if [q, k, v, out, dy].iter().any(|t| t.is_recorded()) {
        let mut scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(scale)?;
        if causal {
            let (l, s) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
            let mask: Vec<f64> = (0..l * s)
                .map(|i| {
                    if i % s <= i / s {
                        0.0
                    } else {
                        f64::NEG_INFINITY
                    }
                })
                .collect();
            let mask = Tensor::from_vec(mask, &[l, s])?
                .astype(q.dtype())?
                .to_device(q.device())?;
            scores = scores.add(&mask)?;
        }
        let p = scores.softmax(-1)?;
        let dv = p.transpose(-1, -2)?.matmul(dy)?;
        let dp = dy.matmul(&v.transpose(-1, -2)?)?;
        let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum(Some(&[-1]), true)?)?)?;
        let dq = ds.matmul(k)?.mul_scalar(scale)?;
        let dk = ds.transpose(-1, -2)?.matmul(q)?.mul_scalar(scale)?;
        return Ok((dq, dk, dv));
    }
    let flat = apply1(
        &Op::Linalg(LinalgOp::AttentionGrad { scale, causal }),
        &[q, k, v, out, dy],
    )?;
    let (nq, nk, nv) = (q.numel(), k.numel(), v.numel());
    Ok((
        flat.narrow(0, 0, nq)?.reshape(q.shape())?,
        flat.narrow(0, nq, nk)?.reshape(k.shape())?,
        flat.narrow(0, nq + nk, nv)?.reshape(v.shape())?,
    ))
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
    /// Scaled dot-product attention, `softmax(scale * q k^T) v`, of `q [.., l, e]`,
    /// `k [.., s, e]` and `v [.., s, ev]` (the same leading axes; `scale` defaults to
    /// `1 / sqrt(e)`; with `causal`, query `i` sees keys `<= i`), as one op: its `[l, s]`
    /// probabilities are never stored (CPU, float32 and float64).
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        scale: Option<f64>,
        causal: bool,
    ) -> Result<Tensor> {
        check_attention(self, key, value)?;
        let e = self.shape()[self.ndim() - 1];
        let scale = scale.unwrap_or(1.0 / (e.max(1) as f64).sqrt());
        if !scale.is_finite() {
            return Err(Error::invalid(
                "scaled_dot_product_attention",
                format!("scale must be finite, got {scale}"),
            ));
        }
        apply1(
            &Op::Linalg(LinalgOp::Attention { scale, causal }),
            &[self, key, value],
        )
    }
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
