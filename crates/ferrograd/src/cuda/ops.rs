//! Host side of the CUDA kernels: each function mirrors the CPU kernel of the same name.

use super::rt::cublas::{sys::cublasOperation_t, Gemm, GemmConfig, StridedBatchedConfig};
use super::rt::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};

use super::{err, CudaData, Gpu};
use crate::cpu::Window;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{numel, Layout, SliceSpec};
use crate::op::{BinaryOp, CmpOp, ReduceKind, UnaryOp};
use crate::storage::CpuData;

const MAX_DIMS: usize = 8;

/// A layout as the kernels read it (see `kernels.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided {
    ndim: i32,
    offset: i64,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}
unsafe impl DeviceRepr for Strided {}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct WindowArgs {
    c: i64,
    h: i64,
    w: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    dh: i64,
    dw: i64,
    oh: i64,
    ow: i64,
}
unsafe impl DeviceRepr for WindowArgs {}

fn strided_full(op: &str, l: &Layout) -> Result<Strided> {
    if l.ndim() > MAX_DIMS {
        return Err(Error::shape(
            op,
            format!(
                "CUDA kernels take at most {MAX_DIMS} dimensions, got {:?}",
                l.shape()
            ),
        ));
    }
    let mut s = Strided {
        ndim: l.ndim() as i32,
        offset: l.offset() as i64,
        shape: [1; MAX_DIMS],
        strides: [0; MAX_DIMS],
    };
    for d in 0..l.ndim() {
        s.shape[d] = l.shape()[d] as i64;
        s.strides[d] = l.strides()[d] as i64;
    }
    Ok(s)
}

/// Contiguous layouts take the kernels' fast path.
fn strided(op: &str, l: &Layout) -> Result<Strided> {
    if l.is_contiguous() {
        return Ok(Strided {
            ndim: -1,
            offset: l.offset() as i64,
            shape: [1; MAX_DIMS],
            strides: [0; MAX_DIMS],
        });
    }
    strided_full(op, l)
}

fn cfg(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 1 << 20) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// An allocation's failure: out of memory is a `MemoryError` in Python, as on the CPU.
fn alloc_err<T>(n: usize, e: impl std::fmt::Debug) -> Error {
    let text = format!("{e:?}");
    if text.contains("OUT_OF_MEMORY") {
        return Error::OutOfMemory {
            op: "alloc".to_string(),
            msg: format!(
                "out of memory: CUDA could not allocate {} bytes ({text})",
                n.saturating_mul(std::mem::size_of::<T>())
            ),
        };
    }
    err("alloc", e)
}

/// Zero-filled device memory (for outputs that kernels accumulate into).
fn zeros<T: DeviceRepr + ValidAsZeroBits>(g: &Gpu, n: usize) -> Result<CudaSlice<T>> {
    g.stream
        .alloc_zeros::<T>(n.max(1))
        .map_err(|e| alloc_err::<T>(n, e))
}

/// Device memory for outputs that kernels overwrite entirely.
fn alloc<T: DeviceRepr>(g: &Gpu, n: usize) -> Result<CudaSlice<T>> {
    // SAFETY: every caller launches a kernel that writes all `n` elements before anything
    // reads them.
    unsafe { g.stream.alloc::<T>(n.max(1)) }.map_err(|e| alloc_err::<T>(n, e))
}

/// The buffer itself when `l` reads it from its start in row-major order (kernels that take
/// contiguous rows need no copy then).
fn in_place<'a>(x: &'a CudaData, l: &Layout) -> Option<&'a CudaData> {
    (l.offset() == 0 && l.is_contiguous()).then_some(x)
}

/// Kernel names are static: look them up by family and dtype.
fn name(family: &str, d: DType) -> &'static str {
    macro_rules! table {
        ($($fam:literal),*) => {
            match (family, d) {
                $(
                    ($fam, DType::F32) => concat!($fam, "_f32"),
                    ($fam, DType::F64) => concat!($fam, "_f64"),
                    ($fam, DType::I64) => concat!($fam, "_i64"),
                    ($fam, DType::Bool) => concat!($fam, "_u8"),
                )*
                _ => "missing_kernel",
            }
        };
    }
    table!(
        "unary",
        "binary",
        "binary_assign",
        "act_grad",
        "compare",
        "where",
        "pow_scalar",
        "write",
        "fill",
        "reduce_rows",
        "softmax_rows",
        "gather",
        "scatter_add",
        "unfold",
        "fold",
        "pool_argmax"
    )
}

fn cast_name(from: DType, to: DType) -> &'static str {
    macro_rules! t {
        ($($a:ident $sa:literal),*) => {
            match (from, to) {
                $( (DType::$a, DType::F32) => concat!("cast_", $sa, "_f32"),
                   (DType::$a, DType::F64) => concat!("cast_", $sa, "_f64"),
                   (DType::$a, DType::I64) => concat!("cast_", $sa, "_i64"),
                   (DType::$a, DType::Bool) => concat!("cast_", $sa, "_u8"), )*
            }
        };
    }
    t!(F32 "f32", F64 "f64", I64 "i64", Bool "u8")
}

macro_rules! each {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            CudaData::F32($v) => CudaData::F32($body),
            CudaData::F64($v) => CudaData::F64($body),
            CudaData::I64($v) => CudaData::I64($body),
            CudaData::Bool($v) => CudaData::Bool($body),
        }
    };
}

/// Raw device pointer argument for a buffer of any dtype.
macro_rules! with_slice {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            CudaData::F32($v) => $body,
            CudaData::F64($v) => $body,
            CudaData::I64($v) => $body,
            CudaData::Bool($v) => $body,
        }
    };
}

/// Uploads a host buffer.
pub(crate) fn upload(g: &Gpu, d: &CpuData) -> Result<CudaData> {
    let s = &g.stream;
    Ok(match d {
        CpuData::F32(v) => CudaData::F32(s.clone_htod(v).map_err(|e| err("to", e))?),
        CpuData::F64(v) => CudaData::F64(s.clone_htod(v).map_err(|e| err("to", e))?),
        CpuData::I64(v) => CudaData::I64(s.clone_htod(v).map_err(|e| err("to", e))?),
        CpuData::Bool(v) => {
            let bytes: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            CudaData::Bool(s.clone_htod(&bytes).map_err(|e| err("to", e))?)
        }
    })
}

/// Downloads a view as a contiguous host buffer (synchronises with the stream).
pub(crate) fn download(g: &Gpu, d: &CudaData, l: &Layout) -> Result<CpuData> {
    let c = cast(g, d, l, d.dtype())?;
    let n = l.numel();
    let s = &g.stream;
    Ok(match &c {
        CudaData::F32(v) => {
            CpuData::F32(s.clone_dtoh(v).map_err(|e| err("numpy", e))?[..n].to_vec())
        }
        CudaData::F64(v) => {
            CpuData::F64(s.clone_dtoh(v).map_err(|e| err("numpy", e))?[..n].to_vec())
        }
        CudaData::I64(v) => {
            CpuData::I64(s.clone_dtoh(v).map_err(|e| err("numpy", e))?[..n].to_vec())
        }
        CudaData::Bool(v) => CpuData::Bool(
            s.clone_dtoh(v).map_err(|e| err("numpy", e))?[..n]
                .iter()
                .map(|&b| b != 0)
                .collect(),
        ),
    })
}

/// A buffer of `n` elements equal to `value`.
pub(crate) fn fill(g: &Gpu, n: usize, value: f64, dtype: DType) -> Result<CudaData> {
    let mut out = match dtype {
        DType::F32 => CudaData::F32(zeros(g, n)?),
        DType::F64 => CudaData::F64(zeros(g, n)?),
        DType::I64 => CudaData::I64(zeros(g, n)?),
        DType::Bool => CudaData::Bool(zeros(g, n)?),
    };
    if value != 0.0 && n > 0 {
        let f = g.function(name("fill", dtype))?;
        let len = n as i64;
        with_slice!(&mut out, o => unsafe {
            g.stream.launch_builder(&f).arg(o).arg(&value).arg(&len).launch(cfg(n)).map_err(|e| err("fill", e))?
        });
    }
    Ok(out)
}

pub(crate) fn unary(g: &Gpu, op: UnaryOp, x: &CudaData, l: &Layout) -> Result<CudaData> {
    let dt = x.dtype();
    let ok = match dt {
        DType::F32 | DType::F64 => true,
        DType::I64 => matches!(
            op,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Sign
        ),
        DType::Bool => false,
    };
    if !ok {
        return Err(Error::dtype(
            op.name(),
            format!("not defined for dtype {dt}"),
        ));
    }
    let code: i32 = match op {
        UnaryOp::Neg => 0,
        UnaryOp::Exp => 1,
        UnaryOp::Log => 2,
        UnaryOp::Sqrt => 3,
        UnaryOp::Abs => 4,
        UnaryOp::Tanh => 5,
        UnaryOp::Sigmoid => 6,
        UnaryOp::Relu => 7,
        UnaryOp::Sign => 8,
    };
    let n = l.numel();
    let lx = strided(op.name(), l)?;
    let f = g.function(name("unary", dt))?;
    let len = n as i64;
    Ok(each!(x, v => {
        let mut out = alloc(g, n)?;
        unsafe { g.stream.launch_builder(&f).arg(&code).arg(v).arg(&lx).arg(&mut out).arg(&len).launch(cfg(n)).map_err(|e| err(op.name(), e))? };
        out
    }))
}

/// A binary op's number in the kernels.
fn binary_code(op: BinaryOp) -> i32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Pow => 4,
        BinaryOp::Maximum => 5,
        BinaryOp::Minimum => 6,
    }
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
    let dt = dst.dtype();
    if dt == DType::Bool || (dt == DType::I64 && matches!(op, BinaryOp::Div | BinaryOp::Pow)) {
        return Err(Error::dtype(
            op.name(),
            format!("not defined for dtype {dt}"),
        ));
    }
    let n = ld.numel();
    if n == 0 {
        return Ok(());
    }
    let (sd, ss) = (strided(op.name(), ld)?, strided(op.name(), ls)?);
    let f = g.function(name("binary_assign", dt))?;
    let (code, len) = (binary_code(op), n as i64);
    macro_rules! go {
        ($d:expr, $s:expr) => {
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg(&code)
                    .arg($d)
                    .arg(&sd)
                    .arg($s)
                    .arg(&ss)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err(op.name(), e))?
            }
        };
    }
    match (dst, src) {
        (CudaData::F32(d), CudaData::F32(s)) => go!(d, s),
        (CudaData::F64(d), CudaData::F64(s)) => go!(d, s),
        (CudaData::I64(d), CudaData::I64(s)) => go!(d, s),
        _ => return Err(Error::dtype(op.name(), "dtype mismatch")),
    };
    Ok(())
}

pub(crate) fn binary(
    g: &Gpu,
    op: BinaryOp,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    let dt = a.dtype();
    let ok = match dt {
        DType::F32 | DType::F64 => true,
        DType::I64 => !matches!(op, BinaryOp::Div | BinaryOp::Pow),
        DType::Bool => false,
    };
    if !ok {
        return Err(Error::dtype(
            op.name(),
            format!("not defined for dtype {dt}"),
        ));
    }
    let code = binary_code(op);
    let n = la.numel();
    let (sa, sb) = (strided(op.name(), la)?, strided(op.name(), lb)?);
    let f = g.function(name("binary", dt))?;
    let len = n as i64;
    macro_rules! go {
        ($x:expr, $y:expr, $variant:ident) => {{
            let mut out = alloc(g, n)?;
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg(&code)
                    .arg($x)
                    .arg(&sa)
                    .arg($y)
                    .arg(&sb)
                    .arg(&mut out)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err(op.name(), e))?
            };
            CudaData::$variant(out)
        }};
    }
    Ok(match (a, b) {
        (CudaData::F32(x), CudaData::F32(y)) => go!(x, y, F32),
        (CudaData::F64(x), CudaData::F64(y)) => go!(x, y, F64),
        (CudaData::I64(x), CudaData::I64(y)) => go!(x, y, I64),
        _ => return Err(Error::dtype(op.name(), "dtype mismatch")),
    })
}

pub(crate) fn act_grad(
    g: &Gpu,
    op: UnaryOp,
    dy: &CudaData,
    ldy: &Layout,
    y: &CudaData,
    ly: &Layout,
) -> Result<CudaData> {
    let code: i32 = match op {
        UnaryOp::Tanh => 5,
        UnaryOp::Sigmoid => 6,
        _ => 7,
    };
    let n = ly.numel();
    let (sd, sy) = (strided("act_grad", ldy)?, strided("act_grad", ly)?);
    let f = g.function(name("act_grad", y.dtype()))?;
    let len = n as i64;
    macro_rules! go {
        ($d:expr, $v:expr, $variant:ident) => {{
            let mut out = alloc(g, n)?;
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg(&code)
                    .arg($d)
                    .arg(&sd)
                    .arg($v)
                    .arg(&sy)
                    .arg(&mut out)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err("act_grad", e))?
            };
            CudaData::$variant(out)
        }};
    }
    Ok(match (dy, y) {
        (CudaData::F32(d), CudaData::F32(v)) => go!(d, v, F32),
        (CudaData::F64(d), CudaData::F64(v)) => go!(d, v, F64),
        _ => return Err(Error::dtype(op.name(), "needs float tensors")),
    })
}

pub(crate) fn compare(
    g: &Gpu,
    op: CmpOp,
    a: &CudaData,
    la: &Layout,
    b: &CudaData,
    lb: &Layout,
) -> Result<CudaData> {
    let code: i32 = match op {
        CmpOp::Eq => 0,
        CmpOp::Ne => 1,
        CmpOp::Lt => 2,
        CmpOp::Le => 3,
        CmpOp::Gt => 4,
        CmpOp::Ge => 5,
    };
    let n = la.numel();
    let (sa, sb) = (strided(op.name(), la)?, strided(op.name(), lb)?);
    let f = g.function(name("compare", a.dtype()))?;
    let len = n as i64;
    let mut out: CudaSlice<u8> = alloc(g, n)?;
    macro_rules! go {
        ($x:expr, $y:expr) => {
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg(&code)
                    .arg($x)
                    .arg(&sa)
                    .arg($y)
                    .arg(&sb)
                    .arg(&mut out)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err(op.name(), e))?
            }
        };
    }
    match (a, b) {
        (CudaData::F32(x), CudaData::F32(y)) => go!(x, y),
        (CudaData::F64(x), CudaData::F64(y)) => go!(x, y),
        (CudaData::I64(x), CudaData::I64(y)) => go!(x, y),
        (CudaData::Bool(x), CudaData::Bool(y)) => go!(x, y),
        _ => return Err(Error::dtype(op.name(), "dtype mismatch")),
    };
    Ok(CudaData::Bool(out))
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
    let CudaData::Bool(cv) = c else {
        return Err(Error::dtype("where", "condition must be bool"));
    };
    let n = la.numel();
    let (sc, sa, sb) = (
        strided("where", lc)?,
        strided("where", la)?,
        strided("where", lb)?,
    );
    let f = g.function(name("where", a.dtype()))?;
    let len = n as i64;
    macro_rules! go {
        ($x:expr, $y:expr, $variant:ident) => {{
            let mut out = alloc(g, n)?;
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg(cv)
                    .arg(&sc)
                    .arg($x)
                    .arg(&sa)
                    .arg($y)
                    .arg(&sb)
                    .arg(&mut out)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err("where", e))?
            };
            CudaData::$variant(out)
        }};
    }
    Ok(match (a, b) {
        (CudaData::F32(x), CudaData::F32(y)) => go!(x, y, F32),
        (CudaData::F64(x), CudaData::F64(y)) => go!(x, y, F64),
        (CudaData::I64(x), CudaData::I64(y)) => go!(x, y, I64),
        (CudaData::Bool(x), CudaData::Bool(y)) => go!(x, y, Bool),
        _ => return Err(Error::dtype("where", "dtype mismatch")),
    })
}

pub(crate) fn pow_scalar(g: &Gpu, x: &CudaData, l: &Layout, p: f64) -> Result<CudaData> {
    let n = l.numel();
    let lx = strided("pow", l)?;
    let len = n as i64;
    let f = g.function(name("pow_scalar", x.dtype()))?;
    macro_rules! go {
        ($v:expr, $variant:ident) => {{
            let mut out = alloc(g, n)?;
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg($v)
                    .arg(&lx)
                    .arg(&p)
                    .arg(&mut out)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err("pow", e))?
            };
            CudaData::$variant(out)
        }};
    }
    Ok(match x {
        CudaData::F32(v) => go!(v, F32),
        CudaData::F64(v) => go!(v, F64),
        _ => {
            return Err(Error::dtype(
                "pow",
                format!("not defined for dtype {}", x.dtype()),
            ))
        }
    })
}

/// A contiguous copy of a view converted to `to` (a plain copy when `to` is its dtype).
pub(crate) fn cast(g: &Gpu, x: &CudaData, l: &Layout, to: DType) -> Result<CudaData> {
    let n = l.numel();
    let lx = strided("astype", l)?;
    let len = n as i64;
    let f = g.function(cast_name(x.dtype(), to))?;
    let mut out = match to {
        DType::F32 => CudaData::F32(alloc(g, n)?),
        DType::F64 => CudaData::F64(alloc(g, n)?),
        DType::I64 => CudaData::I64(alloc(g, n)?),
        DType::Bool => CudaData::Bool(alloc(g, n)?),
    };
    if n == 0 {
        return Ok(out);
    }
    with_slice!(x, src => with_slice!(&mut out, dst => unsafe {
        g.stream.launch_builder(&f).arg(src).arg(&lx).arg(dst).arg(&len).launch(cfg(n)).map_err(|e| err("astype", e))?
    }));
    Ok(out)
}

/// Writes `src` (viewed by `ls`) into `dst` through the view `ld` (same shape).
pub(crate) fn write_into(
    g: &Gpu,
    dst: &mut CudaData,
    ld: &Layout,
    src: &CudaData,
    ls: &Layout,
) -> Result<()> {
    let n = ld.numel();
    if n == 0 {
        return Ok(());
    }
    let (sd, ss) = (strided_full("write", ld)?, strided("write", ls)?);
    let len = n as i64;
    let f = g.function(name("write", dst.dtype()))?;
    macro_rules! go {
        ($s:expr, $d:expr) => {
            unsafe {
                g.stream
                    .launch_builder(&f)
                    .arg($s)
                    .arg(&ss)
                    .arg($d)
                    .arg(&sd)
                    .arg(&len)
                    .launch(cfg(n))
                    .map_err(|e| err("write", e))?
            }
        };
    }
    match (src, dst) {
        (CudaData::F32(s), CudaData::F32(d)) => go!(s, d),
        (CudaData::F64(s), CudaData::F64(d)) => go!(s, d),
        (CudaData::I64(s), CudaData::I64(d)) => go!(s, d),
        (CudaData::Bool(s), CudaData::Bool(d)) => go!(s, d),
        _ => return Err(Error::dtype("write", "dtype mismatch")),
    };
    Ok(())
}

/// Reduces `axes`; the result is contiguous in the keep-dims shape.
pub(crate) fn reduce(
    g: &Gpu,
    kind: ReduceKind,
    x: &CudaData,
    l: &Layout,
    axes: &[usize],
) -> Result<CudaData> {
    let dt = x.dtype();
    if dt == DType::Bool || (dt == DType::I64 && kind == ReduceKind::Mean) {
        return Err(Error::dtype(
            kind.name(),
            format!("not defined for dtype {dt}"),
        ));
    }
    let nd = l.ndim();
    let mut perm: Vec<usize> = (0..nd).filter(|d| !axes.contains(d)).collect();
    perm.extend_from_slice(axes);
    let moved = l.permute(&perm);
    let cols: usize = axes.iter().map(|&a| l.shape()[a]).product();
    // (not numel / cols: an empty reduced axis leaves every kept element)
    let rows: usize = perm[..nd - axes.len()]
        .iter()
        .map(|&d| l.shape()[d])
        .product();
    if cols == 0 && matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        return Err(Error::shape(
            kind.name(),
            format!("cannot reduce over an empty axis (shape {:?})", l.shape()),
        ));
    }
    let copied;
    let contiguous = match in_place(x, &moved) {
        Some(x) => x,
        None => {
            copied = cast(g, x, &moved, dt)?;
            &copied
        }
    };
    let code: i32 = match kind {
        ReduceKind::Sum | ReduceKind::Mean => 0,
        ReduceKind::Max => 1,
        ReduceKind::Min => 2,
    };
    let f = g.function(name("reduce_rows", dt))?;
    let (r, c) = (rows as i64, cols as i64);
    let lc = LaunchConfig {
        grid_dim: (rows.clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    macro_rules! go {
        ($v:expr, $t:ty, $variant:ident, $init:expr) => {{
            let mut out = alloc::<$t>(g, rows)?;
            let init: $t = $init;
            if rows > 0 {
                unsafe {
                    g.stream
                        .launch_builder(&f)
                        .arg(&code)
                        .arg($v)
                        .arg(&mut out)
                        .arg(&r)
                        .arg(&c)
                        .arg(&init)
                        .launch(lc)
                        .map_err(|e| err(kind.name(), e))?
                };
            }
            CudaData::$variant(out)
        }};
    }
    let out = match (contiguous, kind) {
        (CudaData::F32(v), ReduceKind::Max) => go!(v, f32, F32, f32::NEG_INFINITY),
        (CudaData::F32(v), ReduceKind::Min) => go!(v, f32, F32, f32::INFINITY),
        (CudaData::F32(v), _) => go!(v, f32, F32, 0.0),
        (CudaData::F64(v), ReduceKind::Max) => go!(v, f64, F64, f64::NEG_INFINITY),
        (CudaData::F64(v), ReduceKind::Min) => go!(v, f64, F64, f64::INFINITY),
        (CudaData::F64(v), _) => go!(v, f64, F64, 0.0),
        (CudaData::I64(v), ReduceKind::Max) => go!(v, i64, I64, i64::MIN),
        (CudaData::I64(v), ReduceKind::Min) => go!(v, i64, I64, i64::MAX),
        (CudaData::I64(v), _) => go!(v, i64, I64, 0),
        _ => unreachable!("bool was rejected above"),
    };
    if kind == ReduceKind::Mean {
        let scale = fill(g, 1, 1.0 / cols.max(1) as f64, dt)?;
        let shape = [rows];
        let ls = Layout::contiguous(&[]).broadcast_to(&shape);
        return binary(
            g,
            BinaryOp::Mul,
            &out,
            &Layout::contiguous(&shape),
            &scale,
            &ls,
        );
    }
    Ok(out)
}

/// Softmax or log-softmax along `axis`; the result is contiguous in the input's shape.
pub(crate) fn softmax(
    g: &Gpu,
    x: &CudaData,
    l: &Layout,
    axis: usize,
    log: bool,
) -> Result<CudaData> {
    let dt = x.dtype();
    if !dt.is_float() {
        return Err(Error::dtype(
            "softmax",
            format!("needs a float tensor, got {dt}"),
        ));
    }
    let nd = l.ndim();
    let mut perm: Vec<usize> = (0..nd).filter(|&d| d != axis).collect();
    perm.push(axis);
    let moved = l.permute(&perm);
    let copied;
    let rows_in = match in_place(x, &moved) {
        Some(x) => x,
        None => {
            copied = cast(g, x, &moved, dt)?;
            &copied
        }
    };
    let cols = l.shape()[axis];
    let rows = l.numel() / cols.max(1);
    let f = g.function(name("softmax_rows", dt))?;
    let (r, c, flag) = (rows as i64, cols as i64, log as i32);
    let lc = LaunchConfig {
        grid_dim: (rows.clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let out = each!(rows_in, v => {
        let mut out = alloc(g, l.numel())?;
        if rows > 0 {
            unsafe { g.stream.launch_builder(&f).arg(v).arg(&mut out).arg(&r).arg(&c).arg(&flag).launch(lc).map_err(|e| err("softmax", e))? };
        }
        out
    });
    if axis == nd - 1 {
        return Ok(out);
    }
    // back to the input's axis order
    let moved_shape: Vec<usize> = perm.iter().map(|&p| l.shape()[p]).collect();
    let mut inv = vec![0usize; nd];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    let back = Layout::contiguous(&moved_shape).permute(&inv);
    cast(g, &out, &back, dt)
}

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
            let mut out = if k == 0 {
                zeros::<$t>(g, batch * m * n)?
            } else {
                alloc::<$t>(g, batch * m * n)?
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
                unsafe {
                    g.blas
                        .gemm_strided_batched(cfg, $y, $x, &mut out)
                        .map_err(|e| err("matmul", e))?
                };
            }
            CudaData::$variant(out)
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
    let (CudaData::I64(x), CudaData::I64(y)) = (&ac, &bc) else {
        return Err(Error::dtype("matmul", "dtype mismatch"));
    };
    let total = batch * m * n;
    let mut out = zeros::<i64>(g, total)?;
    if total > 0 {
        let f = g.function("matmul_i64")?;
        let (sa, sb) = ((m * k) as i64, (k * n) as i64);
        let (mm, kk, nn, t) = (m as i64, k as i64, n as i64, total as i64);
        unsafe {
            g.stream
                .launch_builder(&f)
                .arg(x)
                .arg(&sa)
                .arg(y)
                .arg(&sb)
                .arg(&mut out)
                .arg(&mm)
                .arg(&kk)
                .arg(&nn)
                .arg(&t)
                .launch(cfg(total))
                .map_err(|e| err("matmul", e))?
        };
    }
    Ok(CudaData::I64(out))
}

pub(crate) fn concat(
    g: &Gpu,
    parts: &[(&CudaData, &Layout)],
    axis: usize,
    out_shape: &[usize],
) -> Result<CudaData> {
    let dt = parts[0].0.dtype();
    let mut out = fill(g, numel(out_shape), 0.0, dt)?;
    let full = Layout::contiguous(out_shape);
    let mut start = 0isize;
    for (data, l) in parts {
        let len = l.shape()[axis] as isize;
        let mut specs: Vec<SliceSpec> = out_shape
            .iter()
            .map(|&n| SliceSpec::Range {
                start: 0,
                stop: n as isize,
                step: 1,
            })
            .collect();
        specs[axis] = SliceSpec::Range {
            start,
            stop: start + len,
            step: 1,
        };
        write_into(g, &mut out, &full.slice(&specs), data, l)?;
        start += len;
    }
    Ok(out)
}

pub(crate) fn slice_grad(
    g: &Gpu,
    dy: &CudaData,
    ldy: &Layout,
    shape: &[usize],
    specs: &[SliceSpec],
) -> Result<CudaData> {
    let mut out = fill(g, numel(shape), 0.0, dy.dtype())?;
    write_into(
        g,
        &mut out,
        &Layout::contiguous(shape).slice(specs),
        dy,
        ldy,
    )?;
    Ok(out)
}

pub(crate) fn set_slice(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    v: &CudaData,
    lv: &Layout,
    specs: &[SliceSpec],
) -> Result<CudaData> {
    let mut out = cast(g, x, lx, x.dtype())?;
    write_into(
        g,
        &mut out,
        &Layout::contiguous(lx.shape()).slice(specs),
        v,
        lv,
    )?;
    Ok(out)
}

fn index_i64<'a>(op: &str, idx: &'a CudaData) -> Result<&'a CudaSlice<i64>> {
    match idx {
        CudaData::I64(v) => Ok(v),
        other => Err(Error::dtype(
            op,
            format!("indices must be int64, got {}", other.dtype()),
        )),
    }
}

pub(crate) fn gather(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    idx: &CudaData,
    li: &Layout,
    axis: usize,
) -> Result<CudaData> {
    let iv = index_i64("gather", idx)?;
    let n = li.numel();
    let (sx, si_full, si) = (
        strided_full("gather", lx)?,
        strided_full("gather", li)?,
        strided("gather", li)?,
    );
    let (ax, size, len) = (axis as i32, lx.shape()[axis] as i64, n as i64);
    let f = g.function(name("gather", x.dtype()))?;
    Ok(each!(x, v => {
        let mut out = alloc(g, n)?;
        if n > 0 {
            unsafe { g.stream.launch_builder(&f).arg(v).arg(&sx).arg(iv).arg(&si_full).arg(&si).arg(&ax).arg(&size).arg(&mut out).arg(&len).launch(cfg(n)).map_err(|e| err("gather", e))? };
        }
        out
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_add(
    g: &Gpu,
    src: &CudaData,
    ls: &Layout,
    idx: &CudaData,
    li: &Layout,
    axis: usize,
    out_shape: &[usize],
) -> Result<CudaData> {
    let iv = index_i64("scatter_add", idx)?;
    let n = li.numel();
    let lo = Layout::contiguous(out_shape);
    let (ss, si_full, si, so) = (
        strided("scatter_add", ls)?,
        strided_full("scatter_add", li)?,
        strided("scatter_add", li)?,
        strided_full("scatter_add", &lo)?,
    );
    let (ax, size, len) = (axis as i32, out_shape[axis] as i64, n as i64);
    let f = g.function(name("scatter_add", src.dtype()))?;
    macro_rules! go {
        ($v:expr, $t:ty, $variant:ident) => {{
            let mut out = zeros::<$t>(g, numel(out_shape))?;
            if n > 0 {
                unsafe {
                    g.stream
                        .launch_builder(&f)
                        .arg($v)
                        .arg(&ss)
                        .arg(iv)
                        .arg(&si_full)
                        .arg(&si)
                        .arg(&ax)
                        .arg(&size)
                        .arg(&mut out)
                        .arg(&so)
                        .arg(&len)
                        .launch(cfg(n))
                        .map_err(|e| err("scatter_add", e))?
                };
            }
            CudaData::$variant(out)
        }};
    }
    Ok(match src {
        CudaData::F32(v) => go!(v, f32, F32),
        CudaData::F64(v) => go!(v, f64, F64),
        CudaData::I64(v) => go!(v, i64, I64),
        CudaData::Bool(_) => {
            return Err(Error::dtype("scatter_add", "not defined for bool tensors"))
        }
    })
}

fn window_args(win: &Window, c: usize, h: usize, w: usize) -> WindowArgs {
    let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
    WindowArgs {
        c: c as i64,
        h: h as i64,
        w: w as i64,
        kh: win.kernel.0 as i64,
        kw: win.kernel.1 as i64,
        sh: win.stride.0 as i64,
        sw: win.stride.1 as i64,
        ph: win.padding.0 as i64,
        pw: win.padding.1 as i64,
        dh: win.dilation.0 as i64,
        dw: win.dilation.1 as i64,
        oh: oh as i64,
        ow: ow as i64,
    }
}

pub(crate) fn unfold(
    g: &Gpu,
    x: &CudaData,
    l: &Layout,
    win: &Window,
    pad: f64,
) -> Result<CudaData> {
    let s = l.shape();
    let args = window_args(win, s[1], s[2], s[3]);
    let n = s[0] * s[1] * win.kernel.0 * win.kernel.1 * (args.oh * args.ow) as usize;
    let lx = strided_full("unfold", l)?;
    let len = n as i64;
    let f = g.function(name("unfold", x.dtype()))?;
    macro_rules! go {
        ($v:expr, $t:ty, $variant:ident) => {{
            let mut out = alloc::<$t>(g, n)?;
            if n > 0 {
                unsafe {
                    g.stream
                        .launch_builder(&f)
                        .arg($v)
                        .arg(&lx)
                        .arg(&args)
                        .arg(&pad)
                        .arg(&mut out)
                        .arg(&len)
                        .launch(cfg(n))
                        .map_err(|e| err("unfold", e))?
                };
            }
            CudaData::$variant(out)
        }};
    }
    Ok(match x {
        CudaData::F32(v) => go!(v, f32, F32),
        CudaData::F64(v) => go!(v, f64, F64),
        _ => {
            return Err(Error::dtype(
                "unfold",
                "CUDA windows support float32 and float64",
            ))
        }
    })
}

pub(crate) fn fold(
    g: &Gpu,
    cols: &CudaData,
    l: &Layout,
    win: &Window,
    size: (usize, usize),
) -> Result<CudaData> {
    let s = l.shape();
    let args = window_args(win, s[2], size.0, size.1);
    let contiguous = cast(g, cols, l, cols.dtype())?;
    let n = l.numel();
    let len = n as i64;
    let f = g.function(name("fold", cols.dtype()))?;
    let out_n = s[0] * s[2] * size.0 * size.1;
    macro_rules! go {
        ($v:expr, $t:ty, $variant:ident) => {{
            let mut out = zeros::<$t>(g, out_n)?;
            if n > 0 {
                unsafe {
                    g.stream
                        .launch_builder(&f)
                        .arg($v)
                        .arg(&args)
                        .arg(&mut out)
                        .arg(&len)
                        .launch(cfg(n))
                        .map_err(|e| err("fold", e))?
                };
            }
            CudaData::$variant(out)
        }};
    }
    Ok(match &contiguous {
        CudaData::F32(v) => go!(v, f32, F32),
        CudaData::F64(v) => go!(v, f64, F64),
        _ => {
            return Err(Error::dtype(
                "fold",
                "CUDA windows support float32 and float64",
            ))
        }
    })
}

/// The flat `h * w` position of each max-pooling window's maximum of `x` `[n, c, h, w]`
/// (first on ties, NaN wins), as contiguous int64 `[n, c, oh * ow]`.
pub(crate) fn pool_argmax(g: &Gpu, x: &CudaData, l: &Layout, win: &Window) -> Result<CudaData> {
    let s = l.shape();
    let args = window_args(win, s[1], s[2], s[3]);
    let n = s[0] * s[1] * (args.oh * args.ow) as usize;
    let lx = strided_full("pool_argmax", l)?;
    let len = n as i64;
    let f = g.function(name("pool_argmax", x.dtype()))?;
    let mut out = zeros::<i64>(g, n)?;
    if n > 0 {
        with_slice!(x, v => unsafe {
            g.stream
                .launch_builder(&f)
                .arg(v)
                .arg(&lx)
                .arg(&args)
                .arg(&mut out)
                .arg(&len)
                .launch(cfg(n))
                .map_err(|e| err("pool_argmax", e))?
        });
    }
    Ok(CudaData::I64(out))
}
