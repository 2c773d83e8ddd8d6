//! Matrix products: floats through cuBLAS (reading row-major and transposed views in place
//! through leading dimensions and its transpose flags), int64 through a kernel.

use super::memory::cast;
use super::rt::cublas::{sys::cublasOperation_t, Gemm, GemmConfig, StridedBatchedConfig};
use super::{err, CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// How cuBLAS can read a `[batch..., rows, cols]` view in place: `(transposed, leading
/// dimension, batch stride)`. Row-major matrices (a column slice too) are read as they are,
/// transposed views with cuBLAS's transpose flag; the batch dimensions must flatten to one
/// stride (0 for a matrix shared by the batch). None when the view needs a copy.
fn gemm_operand(l: &Layout) -> Option<(bool, i64, i64)> {
    let (s, st, nd) = (l.shape(), l.strides(), l.ndim());
    if l.offset() != 0 || st.iter().any(|&x| x < 0) {
        return None;
    }
    let (r, c) = (s[nd - 2], s[nd - 1]);
    let (sr, sc) = (st[nd - 2] as usize, st[nd - 1] as usize);
    let (transposed, ld) = if (c <= 1 || sc == 1) && (r <= 1 || sr >= c.max(1)) {
        (false, if r <= 1 { c.max(1) } else { sr })
    } else if (r <= 1 || sr == 1) && (c <= 1 || sc >= r.max(1)) {
        (true, if c <= 1 { r.max(1) } else { sc })
    } else {
        return None;
    };
    let (mut batch_stride, mut next) = (None, 0usize);
    for d in (0..nd - 2).rev() {
        if s[d] == 1 {
            continue;
        }
        let step = st[d] as usize;
        match batch_stride {
            None => batch_stride = Some(step),
            Some(_) if step != next => return None,
            Some(_) => {}
        }
        next = step * s[d];
    }
    Some((transposed, ld as i64, batch_stride.unwrap_or(0) as i64))
}

/// A matrix operand for cuBLAS: the buffer itself when [`gemm_operand`] can read it, else a
/// row-major copy (one matrix when the batch shares it).
struct Operand {
    copy: Option<CudaData>,
    transposed: bool,
    ld: i64,
    batch_stride: i64,
}

fn operand(g: &Gpu, x: &CudaData, l: &Layout) -> Result<Operand> {
    if let Some((transposed, ld, batch_stride)) = gemm_operand(l) {
        return Ok(Operand {
            copy: None,
            transposed,
            ld,
            batch_stride,
        });
    }
    let nd = l.ndim();
    let (r, c) = (l.shape()[nd - 2], l.shape()[nd - 1]);
    let shared = l.strides()[..nd - 2].iter().all(|&s| s == 0);
    let copy = if shared {
        let mat = Layout::new(&l.shape()[nd - 2..], &l.strides()[nd - 2..], l.offset());
        cast(g, x, &mat, x.dtype())?
    } else {
        cast(g, x, l, x.dtype())?
    };
    Ok(Operand {
        copy: Some(copy),
        transposed: false,
        ld: c.max(1) as i64,
        batch_stride: if shared { 0 } else { (r * c) as i64 },
    })
}

fn op_flag(transposed: bool) -> cublasOperation_t {
    if transposed {
        cublasOperation_t::CUBLAS_OP_T
    } else {
        cublasOperation_t::CUBLAS_OP_N
    }
}

/// Matrix products of `[batch..., m, k]` and `[batch..., k, n]` views (already broadcast to one
/// batch shape), floats through cuBLAS (reading row-major and transposed views in place), int64
/// through a kernel; the result is contiguous `[batch..., m, n]`.
pub(crate) fn matmul(
    g: &Gpu,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    let nd = la.ndim();
    let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
    let batch: usize = la.shape()[..nd - 2].iter().product();
    if a.dtype() != b.dtype() {
        return Err(Error::dtype("matmul", "dtype mismatch"));
    }
    if a.dtype() == DType::I64 {
        return matmul_i64(g, a, la, b, lb);
    }
    let (oa, ob) = (operand(g, a, la)?, operand(g, b, lb)?);
    let (abuf, bbuf) = (oa.copy.as_ref().unwrap_or(a), ob.copy.as_ref().unwrap_or(b));
    macro_rules! go {
        ($x:expr, $y:expr, $t:ty, $variant:ident) => {{
            let total = batch * m * n;
            let mut out = if k == 0 {
                g.zeros(DType::$variant, total)?
            } else {
                g.alloc(DType::$variant, total)?
            };
            let CudaData::$variant(out_slice) = &mut out else {
                return Err(Error::dtype("matmul", "output dtype"));
            };
            if batch * m * n > 0 && k > 0 {
                // row-major C = A B is column-major C^T = B^T A^T: a row-major operand is its
                // transpose in column-major terms, a transposed view is the matrix itself
                let cfg = StridedBatchedConfig {
                    gemm: GemmConfig {
                        transa: op_flag(ob.transposed),
                        transb: op_flag(oa.transposed),
                        m: n as i32,
                        n: m as i32,
                        k: k as i32,
                        alpha: 1.0 as $t,
                        lda: ob.ld as i32,
                        ldb: oa.ld as i32,
                        beta: 0.0 as $t,
                        ldc: n as i32,
                    },
                    batch_size: batch as i32,
                    stride_a: ob.batch_stride,
                    stride_b: oa.batch_stride,
                    stride_c: (m * n) as i64,
                };
                // SAFETY: the configuration describes buffers of these sizes (leading
                // dimensions and batch strides from `operand`).
                unsafe {
                    g.blas
                        .gemm_strided_batched(cfg, $y, $x, out_slice)
                        .map_err(|e| err("matmul", e))?
                };
            }
            out
        }};
    }
    Ok(match (abuf, bbuf) {
        (CudaData::F32(x), CudaData::F32(y)) => go!(x, y, f32, F32),
        (CudaData::F64(x), CudaData::F64(y)) => go!(x, y, f64, F64),
        _ => {
            return Err(Error::dtype(
                "matmul",
                "CUDA matmul supports float32, float64 and int64",
            ))
        }
    })
}

/// int64 matrix products (cuBLAS has none): contiguous copies and a kernel.
fn matmul_i64(g: &Gpu, a: &CudaData, la: &Layout, b: &CudaData, lb: &Layout) -> Result<CudaData> {
    let nd = la.ndim();
    let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
    let batch: usize = la.shape()[..nd - 2].iter().product();
    let (ac, bc) = (cast(g, a, la, DType::I64)?, cast(g, b, lb, DType::I64)?);
    let total = batch * m * n;
    let mut out = g.zeros(DType::I64, total)?;
    let f = g.function("matmul_i64")?;
    let (sa, sb) = ((m * k) as i64, (k * n) as i64);
    let (mm, kk, nn, t) = (m as i64, k as i64, n as i64, total as i64);
    g.launch(&f, "matmul")
        .buf(&ac)
        .arg(&sa)
        .buf(&bc)
        .arg(&sb)
        .buf_mut(&mut out)
        .arg(&mm)
        .arg(&kk)
        .arg(&nn)
        .arg(&t)
        .grid(total)?;
    Ok(out)
}
