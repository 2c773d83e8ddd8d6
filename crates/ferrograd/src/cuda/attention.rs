//! Scaled dot-product attention as one op: the scores go through cuBLAS, a row kernel turns
//! them into probabilities (scale, causal mask and softmax in one pass), and cuBLAS applies
//! them. The `[L, S]` probabilities are scratch, freed when the op returns; the backward
//! recomputes them from `q` and `k` instead of keeping them.

use super::launch::not_for;
use super::linalg::matmul;
use super::memory::write;
use super::reduce::rows_of as heads;
use super::{CudaData, Gpu};
use crate::cpu::attention::Dims;
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;

fn kernel(op: &'static str, base: &str, dt: DType) -> Result<&'static str> {
    Ok(match (base, dt) {
        ("softmax", DType::F32) => "attn_softmax_rows_f32",
        ("softmax", DType::F64) => "attn_softmax_rows_f64",
        ("grad", DType::F32) => "attn_grad_rows_f32",
        ("grad", DType::F64) => "attn_grad_rows_f64",
        _ => return Err(not_for(op, dt)),
    })
}

/// `[h, a, b]` row-major, optionally read transposed as `[h, b, a]`.
fn mat(h: usize, a: usize, b: usize, transposed: bool) -> Layout {
    let l = Layout::contiguous(&[h, a, b]);
    if transposed {
        l.permute(&[0, 2, 1])
    } else {
        l
    }
}

/// The probabilities `softmax(scale * q k^T)` (causal-masked), `[heads, l, s]` contiguous.
fn probabilities(
    g: &Gpu,
    op: &'static str,
    q: &CudaData,
    k: &CudaData,
    d: &Dims,
    scale: f64,
    causal: bool,
) -> Result<CudaData> {
    let mut p = matmul(
        g,
        q,
        &mat(d.heads, d.l, d.e, false),
        k,
        &mat(d.heads, d.s, d.e, true),
    )?;
    let f = g.function(kernel(op, "softmax", q.dtype())?)?;
    let rows = d.heads * d.l;
    let (r, l, s, c) = (rows as i64, d.l as i64, d.s as i64, causal as i32);
    g.launch(&f, op)
        .buf_mut(&mut p)
        .arg(&r)
        .arg(&l)
        .arg(&s)
        .arg(&scale)
        .arg(&c)
        .rows(rows)?;
    Ok(p)
}

/// Attention of `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]`; `[.., l, ev]` contiguous.
pub(crate) fn attention(
    g: &Gpu,
    q: (&CudaData, &Layout),
    k: (&CudaData, &Layout),
    v: (&CudaData, &Layout),
    scale: f64,
    causal: bool,
) -> Result<CudaData> {
    const OP: &str = "scaled_dot_product_attention";
    let d = Dims::new(q.1, k.1, v.1, scale, causal);
    let (mut cq, mut ck, mut cv) = (None, None, None);
    let qc = heads(g, q.0, q.1, &mut cq)?;
    let kc = heads(g, k.0, k.1, &mut ck)?;
    let vc = heads(g, v.0, v.1, &mut cv)?;
    let p = probabilities(g, OP, qc, kc, &d, scale, causal)?;
    matmul(
        g,
        &p,
        &mat(d.heads, d.l, d.s, false),
        vc,
        &mat(d.heads, d.s, d.ev, false),
    )
}

/// Attention's gradients `[dq | dk | dv]` in one flat buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_grad(
    g: &Gpu,
    q: (&CudaData, &Layout),
    k: (&CudaData, &Layout),
    v: (&CudaData, &Layout),
    dout: (&CudaData, &Layout),
    scale: f64,
    causal: bool,
) -> Result<CudaData> {
    const OP: &str = "scaled_dot_product_attention_grad";
    let d = Dims::new(q.1, k.1, v.1, scale, causal);
    let (mut cq, mut ck, mut cv, mut cd) = (None, None, None, None);
    let qc = heads(g, q.0, q.1, &mut cq)?;
    let kc = heads(g, k.0, k.1, &mut ck)?;
    let vc = heads(g, v.0, v.1, &mut cv)?;
    let doc = heads(g, dout.0, dout.1, &mut cd)?;
    let p = probabilities(g, OP, qc, kc, &d, scale, causal)?;
    let (h, l, s, e, ev) = (d.heads, d.l, d.s, d.e, d.ev);
    // dv = p^T do, dp = do v^T
    let dv = matmul(g, &p, &mat(h, l, s, true), doc, &mat(h, l, ev, false))?;
    let mut dp = matmul(g, doc, &mat(h, l, ev, false), vc, &mat(h, s, ev, true))?;
    let f = g.function(kernel(OP, "grad", q.0.dtype())?)?;
    let rows = h * l;
    let (r, sn) = (rows as i64, s as i64);
    g.launch(&f, OP)
        .buf(&p)
        .buf_mut(&mut dp)
        .arg(&r)
        .arg(&sn)
        .arg(&scale)
        .rows(rows)?;
    // dq = ds k, dk = ds^T q
    let dq = matmul(g, &dp, &mat(h, l, s, false), kc, &mat(h, s, e, false))?;
    let dk = matmul(g, &dp, &mat(h, l, s, true), qc, &mat(h, l, e, false))?;
    let (nq, nk, nv) = (h * l * e, h * s * e, h * s * ev);
    let mut out = g.alloc(q.0.dtype(), nq + nk + nv)?;
    for (part, n, at) in [(&dq, nq, 0), (&dk, nk, nq), (&dv, nv, nq + nk)] {
        write(
            g,
            &mut out,
            &Layout::new(&[n], &[1], at),
            part,
            &Layout::contiguous(&[n]),
        )?;
    }
    Ok(out)
}
