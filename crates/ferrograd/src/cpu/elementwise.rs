//! Elementwise kernels: the unary, binary and comparison tables' kernels, the activations'
//! gradients, powers, `where`, casts and in-place updates.

use super::float::Float;
use super::{at, map1, map2, map3};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{Activation, BinaryOp, CmpOp, UnaryOp};
use crate::storage::{pool, CpuData, IntoCpuData};

fn not_for(op: &str, x: &CpuData) -> Error {
    Error::dtype(op, format!("not defined for {} tensors", x.dtype()))
}

/// The unary kernels, from the table's kernel columns.
macro_rules! unary_kernels {
    ($($op:ident $name:ident (|$v:ident| $f:expr) $int:tt $grad:tt),* $(,)?) => {
        fn unary_float<T: Float>(op: UnaryOp, x: &[T], l: &Layout) -> Result<Vec<T>> {
            match op {
                $( UnaryOp::$op => map1(x, l, |$v: T| $f), )*
            }
        }

        /// `None` where the op has no int64 kernel.
        fn unary_int(op: UnaryOp, x: &[i64], l: &Layout) -> Option<Result<Vec<i64>>> {
            match op {
                $( UnaryOp::$op => unary_kernels!(@int x, l, $int), )*
            }
        }
    };
    (@int $x:ident, $l:ident, ()) => { None };
    (@int $x:ident, $l:ident, (|$v:ident| $f:expr)) => { Some(map1($x, $l, |$v: i64| $f)) };
}
crate::unary_ops!(unary_kernels);

/// A unary op on one buffer.
pub(crate) fn unary(op: UnaryOp, x: &CpuData, l: &Layout) -> Result<CpuData> {
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(unary_float(op, v, l)?),
        CpuData::F64(v) => CpuData::F64(unary_float(op, v, l)?),
        CpuData::I64(v) => CpuData::I64(unary_int(op, v, l).ok_or_else(|| not_for(op.name(), x))??),
        _ => return Err(not_for(op.name(), x)),
    })
}

/// Applies `f` to each element of `dst`'s view and the matching element of `src`, in place.
fn zip_assign<T: Copy + Send + Sync>(
    dst: &mut [T],
    ld: &Layout,
    src: &[T],
    ls: &Layout,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    let n = ld.numel();
    let scalar = ls.strides().iter().all(|&s| s == 0);
    if n >= 4 * super::PAR_CHUNK
        && crate::cpu::threads() > 1
        && ld.is_contiguous()
        && (ls.is_contiguous() || scalar)
    {
        // a large update of a whole buffer: chunks across threads (one thread alone does not
        // reach the memory bandwidth)
        use rayon::prelude::*;
        let (od, os) = (ld.offset(), ls.offset());
        dst[od..od + n]
            .par_chunks_mut(super::PAR_CHUNK)
            .enumerate()
            .for_each(|(c, d)| {
                let start = c * super::PAR_CHUNK;
                if scalar {
                    let s = src[os];
                    super::assign1(d, &|x| f(x, s));
                } else {
                    super::assign2(d, &src[os + start..], &f);
                }
            });
        return;
    }
    crate::layout::for_each_run_multi([ld, ls], |[bd, bs], [sd, ss], n| {
        if sd == 1 && ss == 1 {
            super::assign2(&mut dst[bd..bd + n], &src[bs..bs + n], &f);
        } else if sd == 1 && ss == 0 {
            let s = src[bs];
            super::assign1(&mut dst[bd..bd + n], &|x| f(x, s));
        } else {
            for i in 0..n {
                let p = at(bd, sd, i);
                dst[p] = f(dst[p], src[at(bs, ss, i)]);
            }
        }
    });
}

/// The binary kernels (out of place and in place), from the table's kernel columns.
macro_rules! binary_kernels {
    ($($op:ident $name:ident (|$p:ident, $q:ident| $f:expr) $int:tt $da:tt $db:tt),* $(,)?) => {
        fn binary_float<T: Float + Send + Sync>(
            op: BinaryOp,
            a: &[T],
            la: &Layout,
            b: &[T],
            lb: &Layout,
        ) -> Result<Vec<T>> {
            match op {
                $( BinaryOp::$op => map2(a, la, b, lb, |$p: T, $q: T| $f), )*
            }
        }

        fn assign_float<T: Float + Send + Sync>(
            op: BinaryOp,
            d: &mut [T],
            ld: &Layout,
            s: &[T],
            ls: &Layout,
        ) {
            match op {
                $( BinaryOp::$op => zip_assign(d, ld, s, ls, |$p: T, $q: T| $f), )*
            }
        }

        /// `None` where the op has no int64 kernel.
        fn binary_int(
            op: BinaryOp,
            a: &[i64],
            la: &Layout,
            b: &[i64],
            lb: &Layout,
        ) -> Option<Result<Vec<i64>>> {
            match op {
                $( BinaryOp::$op => binary_kernels!(@int a, la, b, lb, $int), )*
            }
        }

        /// `false` where the op has no int64 kernel.
        fn assign_int(op: BinaryOp, d: &mut [i64], ld: &Layout, s: &[i64], ls: &Layout) -> bool {
            match op {
                $( BinaryOp::$op => binary_kernels!(@assign_int (d, ld, s, ls), $int), )*
            }
        }
    };
    (@int $a:ident, $la:ident, $b:ident, $lb:ident, ()) => { None };
    (@int $a:ident, $la:ident, $b:ident, $lb:ident, (|$p:ident, $q:ident| $f:expr)) => {
        Some(map2($a, $la, $b, $lb, |$p: i64, $q: i64| $f))
    };
    (@assign_int ($($args:tt)*), ()) => { false };
    (@assign_int ($d:ident, $ld:ident, $s:ident, $ls:ident), (|$p:ident, $q:ident| $f:expr)) => {{
        zip_assign($d, $ld, $s, $ls, |$p: i64, $q: i64| $f);
        true
    }};
}
crate::binary_ops!(binary_kernels);

/// A binary op on two views already broadcast to the output shape.
pub(crate) fn binary(
    op: BinaryOp,
    a: &CpuData,
    la: &Layout,
    b: &CpuData,
    lb: &Layout,
) -> Result<CpuData> {
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(binary_float(op, x, la, y, lb)?),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(binary_float(op, x, la, y, lb)?),
        (CpuData::I64(x), CpuData::I64(y)) => {
            CpuData::I64(binary_int(op, x, la, y, lb).ok_or_else(|| not_for(op.name(), a))??)
        }
        _ => return Err(not_for(op.name(), a)),
    })
}

/// `dst op= src` through `dst`'s view (`src` already broadcast to its shape).
pub(crate) fn binary_assign(
    op: BinaryOp,
    dst: &mut CpuData,
    ld: &Layout,
    src: &CpuData,
    ls: &Layout,
) -> Result<()> {
    match (dst, src) {
        (CpuData::F32(d), CpuData::F32(s)) => assign_float(op, d, ld, s, ls),
        (CpuData::F64(d), CpuData::F64(s)) => assign_float(op, d, ld, s, ls),
        (CpuData::I64(d), CpuData::I64(s)) => {
            if !assign_int(op, d, ld, s, ls) {
                return Err(Error::dtype(op.name(), "not defined for int64 tensors"));
            }
        }
        (d, _) => return Err(not_for(op.name(), d)),
    }
    Ok(())
}

/// The comparison kernels, from the table.
macro_rules! compare_kernels {
    ($($op:ident $method:ident $name:ident (|$p:ident, $q:ident| $f:expr)),* $(,)?) => {
        fn compare_any<T: PartialOrd + Copy + Send + Sync>(
            op: CmpOp,
            a: &[T],
            la: &Layout,
            b: &[T],
            lb: &Layout,
        ) -> Result<Vec<bool>> {
            match op {
                $( CmpOp::$op => map2(a, la, b, lb, |$p: T, $q: T| $f), )*
            }
        }
    };
}
crate::compare_ops!(compare_kernels);

/// A comparison; the result is bool.
pub(crate) fn compare(
    op: CmpOp,
    a: &CpuData,
    la: &Layout,
    b: &CpuData,
    lb: &Layout,
) -> Result<CpuData> {
    Ok(CpuData::Bool(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => compare_any(op, x, la, y, lb)?,
        (CpuData::F64(x), CpuData::F64(y)) => compare_any(op, x, la, y, lb)?,
        (CpuData::I64(x), CpuData::I64(y)) => compare_any(op, x, la, y, lb)?,
        (CpuData::Bool(x), CpuData::Bool(y)) => compare_any(op, x, la, y, lb)?,
        _ => return Err(not_for(op.name(), a)),
    }))
}

/// The element functions of `x ** p` for a scalar exponent, chosen once per call: small
/// integer and half exponents are exact products (and far cheaper than powf). `$then!(f)` is
/// given the function; the eager kernel and the fused block kernel both use it.
macro_rules! with_pow {
    ($T:ty, $p:expr, $then:ident ! ($($args:tt)*)) => {
        match $p {
            1.0 => $then!($($args)*, |v: $T| v),
            2.0 => $then!($($args)*, |v: $T| v * v),
            3.0 => $then!($($args)*, |v: $T| v * v * v),
            4.0 => $then!($($args)*, |v: $T| (v * v) * (v * v)),
            0.5 => $then!($($args)*, |v: $T| v.sqrt()),
            -1.0 => $then!($($args)*, |v: $T| <$T>::ONE / v),
            -2.0 => $then!($($args)*, |v: $T| <$T>::ONE / (v * v)),
            p => {
                let e = <$T>::from_f64(p);
                $then!($($args)*, |v: $T| v.powf(e))
            }
        }
    };
}

/// `x ** p` for a scalar exponent.
pub(crate) fn pow_scalar(x: &CpuData, l: &Layout, p: f64) -> Result<CpuData> {
    fn pw<T: Float + Send + Sync>(x: &[T], l: &Layout, p: f64) -> Result<Vec<T>> {
        macro_rules! run {
            ($x:expr, $l:expr, $f:expr) => {
                map1($x, $l, $f)
            };
        }
        with_pow!(T, p, run!(x, l))
    }
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(pw(v, l, p)?),
        CpuData::F64(v) => CpuData::F64(pw(v, l, p)?),
        _ => return Err(not_for("pow", x)),
    })
}

/// `where(cond, a, b)` over three views broadcast to one shape.
pub(crate) fn where_(
    c: &CpuData,
    lc: &Layout,
    a: &CpuData,
    la: &Layout,
    b: &CpuData,
    lb: &Layout,
) -> Result<CpuData> {
    let CpuData::Bool(c) = c else {
        return Err(Error::dtype(
            "where",
            format!("condition must be bool, got {}", c.dtype()),
        ));
    };
    fn pick<T>(c: bool, x: T, y: T) -> T {
        if c {
            x
        } else {
            y
        }
    }
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(map3(c, lc, x, la, y, lb, pick)?),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(map3(c, lc, x, la, y, lb, pick)?),
        (CpuData::I64(x), CpuData::I64(y)) => CpuData::I64(map3(c, lc, x, la, y, lb, pick)?),
        (CpuData::Bool(x), CpuData::Bool(y)) => CpuData::Bool(map3(c, lc, x, la, y, lb, pick)?),
        _ => return Err(not_for("where", a)),
    })
}

/// A contiguous copy of a view.
pub(crate) fn copy(x: &CpuData, l: &Layout) -> Result<CpuData> {
    Ok(crate::with_cpu_vec!(x, |v| IntoCpuData::into_cpu_data(
        map1(v, l, |a| a)?
    )))
}

/// An element's value on the way from one dtype to another: integers and bools travel as
/// `i64` (exact), floats as `f64` (exact for every float dtype).
trait Convert: Copy + Sync + Send + IntoCpuData + pool::Pooled {
    const INT: bool;
    fn to_i64(self) -> i64;
    fn to_f64(self) -> f64;
    fn from_i64(v: i64) -> Self;
    fn from_f64(v: f64) -> Self;
}

macro_rules! convert {
    ($t:ty, $int:expr, |$a:ident| $to_i:expr, $to_f:expr, |$v:ident| $from_i:expr, |$w:ident| $from_f:expr) => {
        impl Convert for $t {
            const INT: bool = $int;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                let $a = self;
                $to_i
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                let $a = self;
                $to_f
            }
            #[inline(always)]
            fn from_i64($v: i64) -> Self {
                $from_i
            }
            #[inline(always)]
            fn from_f64($w: f64) -> Self {
                $from_f
            }
        }
    };
}
// floats to integers truncate toward zero (saturating), integers wrap to narrower ones,
// anything to bool is `!= 0`; floats reach the narrow integers through int64 (so they wrap
// as the integers do, as PyTorch's)
convert!(f32, false, |a| a as i64, a as f64, |v| v as f32, |w| w
    as f32);
convert!(f64, false, |a| a as i64, a, |v| v as f64, |w| w);
convert!(
    half::f16,
    false,
    |a| a.to_f64() as i64,
    a.to_f64(),
    |v| half::f16::from_f32(v as f32),
    |w| half::f16::from_f32(w as f32)
);
convert!(
    half::bf16,
    false,
    |a| a.to_f64() as i64,
    a.to_f64(),
    |v| half::bf16::from_f32(v as f32),
    |w| half::bf16::from_f32(w as f32)
);
convert!(i64, true, |a| a, a as f64, |v| v, |w| w as i64);
convert!(
    i32,
    true,
    |a| a as i64,
    a as f64,
    |v| v as i32,
    |w| w as i64 as i32
);
convert!(
    i16,
    true,
    |a| a as i64,
    a as f64,
    |v| v as i16,
    |w| w as i64 as i16
);
convert!(i8, true, |a| a as i64, a as f64, |v| v as i8, |w| w as i64
    as i8);
convert!(u8, true, |a| a as i64, a as f64, |v| v as u8, |w| w as i64
    as u8);
convert!(bool, true, |a| a as i64, a as i64 as f64, |v| v != 0, |w| w
    != 0.0);

fn convert<S: Convert, D: Convert>(x: &[S], l: &Layout) -> Result<CpuData> {
    let out: Vec<D> = if S::INT {
        map1(x, l, |a| D::from_i64(a.to_i64()))?
    } else {
        // a float to bool is `!= 0` (also for values in (-1, 1) that truncate to zero)
        map1(x, l, |a| D::from_f64(a.to_f64()))?
    };
    Ok(D::into_cpu_data(out))
}

/// Converts to another dtype (floats to int truncate toward zero, like numpy's `astype`).
pub(crate) fn cast(x: &CpuData, l: &Layout, to: crate::DType) -> Result<CpuData> {
    use crate::DType;
    if x.dtype() == to {
        return copy(x, l);
    }
    fn to_dtype<S: Convert>(v: &[S], l: &Layout, to: DType) -> Result<CpuData> {
        match to {
            DType::F32 => convert::<S, f32>(v, l),
            DType::F64 => convert::<S, f64>(v, l),
            DType::I64 => convert::<S, i64>(v, l),
            DType::Bool => convert::<S, bool>(v, l),
            DType::F16 => convert::<S, half::f16>(v, l),
            DType::BF16 => convert::<S, half::bf16>(v, l),
            DType::I32 => convert::<S, i32>(v, l),
            DType::I16 => convert::<S, i16>(v, l),
            DType::I8 => convert::<S, i8>(v, l),
            DType::U8 => convert::<S, u8>(v, l),
        }
    }
    crate::with_cpu_vec!(x, |v| to_dtype(v, l, to))
}

#[inline(always)]
fn tanh_grad<T: Float>(g: T, v: T) -> T {
    g * (T::ONE - v * v)
}
#[inline(always)]
fn sigmoid_grad<T: Float>(g: T, v: T) -> T {
    g * v * (T::ONE - v)
}
#[inline(always)]
fn relu_grad<T: Float>(g: T, v: T) -> T {
    // a NaN output passes the gradient (PyTorch zeroes it only where the output is <= 0)
    if v > T::ZERO || v.is_nan() {
        g
    } else {
        T::ZERO
    }
}

/// The backward of tanh, sigmoid or relu from the activation's output `y`.
pub(crate) fn act_grad(
    act: Activation,
    dy: &CpuData,
    ldy: &Layout,
    y: &CpuData,
    ly: &Layout,
) -> Result<CpuData> {
    fn go<T: Float + Send + Sync>(
        act: Activation,
        dy: &[T],
        ldy: &Layout,
        y: &[T],
        ly: &Layout,
    ) -> Result<Vec<T>> {
        match act {
            Activation::Tanh => map2(dy, ldy, y, ly, tanh_grad),
            Activation::Sigmoid => map2(dy, ldy, y, ly, sigmoid_grad),
            Activation::Relu => map2(dy, ldy, y, ly, relu_grad),
        }
    }
    Ok(match (dy, y) {
        (CpuData::F32(d), CpuData::F32(v)) => CpuData::F32(go(act, d, ldy, v, ly)?),
        (CpuData::F64(d), CpuData::F64(v)) => CpuData::F64(go(act, d, ldy, v, ly)?),
        _ => return Err(not_for(act.grad_name(), dy)),
    })
}

/// Kernels over one block of contiguous elements, for fused elementwise chains (`graph`):
/// each applies the same element function as the op's own kernel above (so a fused chain
/// computes bit for bit what the ops one by one compute), over slices of equal length. They
/// are inlined into the fused block loop (`cpu::fused`), which is compiled for the widest
/// vectors the CPU has.
pub(crate) mod block {
    use super::{relu_grad, sigmoid_grad, tanh_grad};
    use crate::cpu::float::Float;
    use crate::op::{Activation, BinaryOp, UnaryOp};

    macro_rules! unary_blocks {
        ($($op:ident $name:ident (|$v:ident| $f:expr) $int:tt $grad:tt),* $(,)?) => {
            /// `out[i] = op(x[i])`.
            #[inline(always)]
            pub(crate) fn unary<T: Float>(op: UnaryOp, x: &[T], out: &mut [T]) {
                match op {
                    $( UnaryOp::$op => {
                        for (o, &$v) in out.iter_mut().zip(x) {
                            *o = $f;
                        }
                    } )*
                }
            }
        };
    }
    crate::unary_ops!(unary_blocks);

    macro_rules! binary_blocks {
        ($($op:ident $name:ident (|$p:ident, $q:ident| $f:expr) $int:tt $da:tt $db:tt),* $(,)?) => {
            /// `out[i] = op(a[i], b[i])`.
            #[inline(always)]
            pub(crate) fn binary<T: Float>(op: BinaryOp, a: &[T], b: &[T], out: &mut [T]) {
                match op {
                    $( BinaryOp::$op => {
                        for ((o, &$p), &$q) in out.iter_mut().zip(a).zip(b) {
                            *o = $f;
                        }
                    } )*
                }
            }

            /// `out[i] = op(a[i], s)`.
            #[inline(always)]
            pub(crate) fn binary_vs<T: Float>(op: BinaryOp, a: &[T], s: T, out: &mut [T]) {
                match op {
                    $( BinaryOp::$op => {
                        let $q = s;
                        for (o, &$p) in out.iter_mut().zip(a) {
                            *o = $f;
                        }
                    } )*
                }
            }

            /// `out[i] = op(s, b[i])`.
            #[inline(always)]
            pub(crate) fn binary_sv<T: Float>(op: BinaryOp, s: T, b: &[T], out: &mut [T]) {
                match op {
                    $( BinaryOp::$op => {
                        let $p = s;
                        for (o, &$q) in out.iter_mut().zip(b) {
                            *o = $f;
                        }
                    } )*
                }
            }
        };
    }
    crate::binary_ops!(binary_blocks);

    /// `out[i] = x[i] ** p`.
    #[inline(always)]
    pub(crate) fn pow<T: Float>(p: f64, x: &[T], out: &mut [T]) {
        macro_rules! run {
            ($x:expr, $out:expr, $f:expr) => {{
                let f = $f;
                for (o, &v) in $out.iter_mut().zip($x) {
                    *o = f(v);
                }
            }};
        }
        with_pow!(T, p, run!(x, out))
    }

    /// The activation's backward from its output: `out[i] = grad(dy[i], y[i])`.
    #[inline(always)]
    pub(crate) fn act_grad<T: Float>(act: Activation, dy: &[T], y: &[T], out: &mut [T]) {
        macro_rules! run {
            ($f:expr) => {
                for ((o, &g), &v) in out.iter_mut().zip(dy).zip(y) {
                    *o = $f(g, v);
                }
            };
        }
        match act {
            Activation::Tanh => run!(tanh_grad),
            Activation::Sigmoid => run!(sigmoid_grad),
            Activation::Relu => run!(relu_grad),
        }
    }

    /// `out[i] = c[i] != 0 ? a[i] : b[i]` (the condition loaded as 0 or 1).
    #[inline(always)]
    pub(crate) fn select<T: Float>(c: &[T], a: &[T], b: &[T], out: &mut [T]) {
        for (((o, &c), &a), &b) in out.iter_mut().zip(c).zip(a).zip(b) {
            *o = if c != T::ZERO { a } else { b };
        }
    }
}
