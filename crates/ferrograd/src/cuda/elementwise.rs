//! Elementwise kernels: the unary, binary and comparison tables' kernels (found by the op's
//! name), the activations' gradients, powers and `where`.

use super::launch::{kernel_name, not_for, strided};
use super::{CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{Activation, BinaryOp, CmpOp, UnaryOp};

/// `unary_<name>_<dtype>`, for the dtypes the op's table row has kernels for.
macro_rules! unary_names {
    ($($op:ident $name:ident $float:tt $int:tt $grad:tt),* $(,)?) => {
        fn unary_kernel(op: UnaryOp, dtype: DType) -> Option<&'static str> {
            match (op, dtype) {
                $(
                    (UnaryOp::$op, DType::F32) => Some(concat!("unary_", stringify!($name), "_f32")),
                    (UnaryOp::$op, DType::F64) => Some(concat!("unary_", stringify!($name), "_f64")),
                    (UnaryOp::$op, DType::I64) => {
                        op.has_int_kernel().then_some(concat!("unary_", stringify!($name), "_i64"))
                    }
                    (UnaryOp::$op, _) => None,
                )*
            }
        }
    };
}
crate::unary_ops!(unary_names);

/// `binary_<name>_<dtype>` and `binary_assign_<name>_<dtype>`.
macro_rules! binary_names {
    ($($op:ident $name:ident $float:tt $int:tt $da:tt $db:tt),* $(,)?) => {
        fn binary_kernel(op: BinaryOp, dtype: DType, assign: bool) -> Option<&'static str> {
            let (out, inplace) = match (op, dtype) {
                $(
                    (BinaryOp::$op, DType::F32) => (
                        concat!("binary_", stringify!($name), "_f32"),
                        concat!("binary_assign_", stringify!($name), "_f32"),
                    ),
                    (BinaryOp::$op, DType::F64) => (
                        concat!("binary_", stringify!($name), "_f64"),
                        concat!("binary_assign_", stringify!($name), "_f64"),
                    ),
                    (BinaryOp::$op, DType::I64) if op.has_int_kernel() => (
                        concat!("binary_", stringify!($name), "_i64"),
                        concat!("binary_assign_", stringify!($name), "_i64"),
                    ),
                    (BinaryOp::$op, _) => return None,
                )*
            };
            Some(if assign { inplace } else { out })
        }
    };
}
crate::binary_ops!(binary_names);

/// `compare_<name>_<dtype>`.
macro_rules! compare_names {
    ($($op:ident $method:ident $name:ident $kernel:tt),* $(,)?) => {
        fn compare_kernel(op: CmpOp, dtype: DType) -> Option<&'static str> {
            match (op, dtype) {
                $(
                    (CmpOp::$op, DType::F32) => concat!("compare_", stringify!($name), "_f32"),
                    (CmpOp::$op, DType::F64) => concat!("compare_", stringify!($name), "_f64"),
                    (CmpOp::$op, DType::I64) => concat!("compare_", stringify!($name), "_i64"),
                    (CmpOp::$op, DType::Bool) => concat!("compare_", stringify!($name), "_u8"),
                    // computed in their wide dtypes (see `dispatch`)
                    (CmpOp::$op, _) => return None,
                )*
            }.into()
        }
    };
}
crate::compare_ops!(compare_names);

/// Every kernel the unary, binary and comparison tables refer to.
pub(crate) fn table_kernels() -> Vec<&'static str> {
    let dtypes = [DType::F32, DType::F64, DType::I64, DType::Bool];
    let mut names = Vec::new();
    for &d in &dtypes {
        names.extend(UnaryOp::ALL.iter().filter_map(|&op| unary_kernel(op, d)));
        for assign in [false, true] {
            names.extend(
                BinaryOp::ALL
                    .iter()
                    .filter_map(|&op| binary_kernel(op, d, assign)),
            );
        }
        names.extend(CmpOp::ALL.iter().filter_map(|&op| compare_kernel(op, d)));
    }
    names
}

fn same_dtype(op: &str, a: &CudaData, b: &CudaData) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("dtype mismatch: {} vs {}", a.dtype(), b.dtype()),
        ));
    }
    Ok(())
}

pub(crate) fn unary(g: &Gpu, op: UnaryOp, x: &CudaData, l: &Layout) -> Result<CudaData> {
    let name = unary_kernel(op, x.dtype()).ok_or_else(|| not_for(op.name(), x.dtype()))?;
    g.elementwise(name, op.name(), &[(x, l)], None, x.dtype())
}

pub(crate) fn binary(
    g: &Gpu,
    op: BinaryOp,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    same_dtype(op.name(), a, b)?;
    let name = binary_kernel(op, a.dtype(), false).ok_or_else(|| not_for(op.name(), a.dtype()))?;
    g.elementwise(name, op.name(), &[(a, la), (b, lb)], None, a.dtype())
}

/// `dst op= src` through `dst`'s view in one pass (`src` already broadcast to its shape, not
/// `dst`'s storage; no two elements of `dst`'s view overlap).
pub(crate) fn binary_assign(
    g: &Gpu,
    op: BinaryOp,
    dst: &mut CudaData,
    ld: &Layout,
    src: &CudaData,
    ls: &Layout,
) -> Result<()> {
    same_dtype(op.name(), dst, src)?;
    let name =
        binary_kernel(op, dst.dtype(), true).ok_or_else(|| not_for(op.name(), dst.dtype()))?;
    let n = ld.numel();
    let (sd, ss) = (strided(op.name(), ld)?, strided(op.name(), ls)?);
    let len = n as i64;
    let f = g.function(name)?;
    g.launch(&f, op.name())
        .buf_mut(dst)
        .arg(&sd)
        .buf(src)
        .arg(&ss)
        .arg(&len)
        .grid(n)
}

pub(crate) fn compare(
    g: &Gpu,
    op: CmpOp,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    same_dtype(op.name(), a, b)?;
    let name = compare_kernel(op, a.dtype()).ok_or_else(|| not_for(op.name(), a.dtype()))?;
    g.elementwise(name, op.name(), &[(a, la), (b, lb)], None, DType::Bool)
}

pub(crate) fn act_grad(
    g: &Gpu,
    act: Activation,
    dy: &CudaData,
    ldy: &Layout,
    y: &CudaData,
    ly: &Layout,
) -> Result<CudaData> {
    let op = act.grad_name();
    same_dtype(op, dy, y)?;
    let name = match (act, y.dtype()) {
        (Activation::Tanh, DType::F32) => "tanh_grad_f32",
        (Activation::Tanh, DType::F64) => "tanh_grad_f64",
        (Activation::Sigmoid, DType::F32) => "sigmoid_grad_f32",
        (Activation::Sigmoid, DType::F64) => "sigmoid_grad_f64",
        (Activation::Relu, DType::F32) => "relu_grad_f32",
        (Activation::Relu, DType::F64) => "relu_grad_f64",
        _ => return Err(not_for(op, y.dtype())),
    };
    g.elementwise(name, op, &[(dy, ldy), (y, ly)], None, y.dtype())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn where_(
    g: &Gpu,
    c: &CudaData,
    lc: &Layout,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    if c.dtype() != DType::Bool {
        return Err(Error::dtype(
            "where",
            format!("condition must be bool, got {}", c.dtype()),
        ));
    }
    same_dtype("where", a, b)?;
    let name = kernel_name!("where", a.dtype());
    g.elementwise(name, "where", &[(c, lc), (a, la), (b, lb)], None, a.dtype())
}

pub(crate) fn pow_scalar(g: &Gpu, x: &CudaData, l: &Layout, p: f64) -> Result<CudaData> {
    if !x.dtype().is_float() {
        return Err(not_for("pow", x.dtype()));
    }
    let name = kernel_name!("pow_scalar", x.dtype());
    g.elementwise(name, "pow", &[(x, l)], Some(&p), x.dtype())
}
