//! Elementwise kernels: unary, binary with broadcasting, comparisons, where, casts.

use super::{map1, map2, map3};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{BinaryOp, CmpOp, UnaryOp};
use crate::storage::CpuData;

/// Float math shared by the f32 and f64 kernels.
pub(crate) trait Float:
    Copy + PartialOrd + std::ops::Neg<Output = Self> + super::pool::Pooled
{
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn signum0(self) -> Self;
    fn zero() -> Self;
    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! impl_float {
    ($t:ty, $tanh:expr) => {
        impl Float for $t {
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn sigmoid(self) -> Self {
                // split by sign so neither branch overflows
                if self >= 0.0 {
                    1.0 / (1.0 + (-self).exp())
                } else {
                    let e = self.exp();
                    e / (1.0 + e)
                }
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn signum0(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self * 0.0
                }
            }
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
impl_float!(f32, tanh_f32);
impl_float!(f64, f64::tanh);

/// float32 `exp` without branches (so loops over it vectorise): `x = n ln2 + r` with
/// `|r| <= ln2/2`, `exp(r)` by Cephes' degree-6 polynomial, `2^n` built from its bits. For
/// the range `tanh_f32` uses (0..=20), within about 1 ulp.
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    // ln2 split in two, so `n * ln2` is exact enough
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let y = (((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2)
        * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// float32 tanh, within 1.3 ulp of the exact value: an odd polynomial near zero (Cephes'
/// coefficients), else `1 - 2 / (exp(2|x|) + 1)`. Both are computed and one is selected, so a
/// loop over it vectorises (twice as fast as a branch per element); `|x|` is clamped at 10,
/// where tanh is 1.0 in float32, and NaN passes through.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let p = (((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
        - 3.333_328e-1;
    // (the sign restored: -0.0 would come out +0.0)
    let small = (x + x * z * p).copysign(x);
    let e = exp_f32(2.0 * a.min(10.0));
    let large = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    let r = if a < 0.625 { small } else { large };
    if x.is_nan() {
        x
    } else {
        r
    }
}

fn unary_float<T: Float>(op: UnaryOp, x: &[T], l: &Layout) -> Vec<T> {
    match op {
        UnaryOp::Neg => map1(x, l, |v| -v),
        UnaryOp::Exp => map1(x, l, T::exp),
        UnaryOp::Log => map1(x, l, T::ln),
        UnaryOp::Sqrt => map1(x, l, T::sqrt),
        UnaryOp::Abs => map1(x, l, T::abs),
        UnaryOp::Tanh => map1(x, l, T::tanh),
        UnaryOp::Sigmoid => map1(x, l, T::sigmoid),
        UnaryOp::Relu => map1(x, l, |v| if v > T::zero() { v } else { T::zero() }),
        UnaryOp::Sign => map1(x, l, T::signum0),
    }
}

/// A unary op on one buffer.
pub(crate) fn unary(op: UnaryOp, x: &CpuData, l: &Layout) -> Result<CpuData> {
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(unary_float(op, v, l)),
        CpuData::F64(v) => CpuData::F64(unary_float(op, v, l)),
        CpuData::I64(v) => CpuData::I64(match op {
            UnaryOp::Neg => map1(v, l, |a: i64| a.wrapping_neg()),
            UnaryOp::Abs => map1(v, l, |a: i64| a.wrapping_abs()),
            UnaryOp::Sign => map1(v, l, |a: i64| a.signum()),
            UnaryOp::Relu => map1(v, l, |a: i64| a.max(0)),
            _ => return Err(not_for(op.name(), x)),
        }),
        CpuData::Bool(_) => return Err(not_for(op.name(), x)),
    })
}

fn not_for(op: &str, x: &CpuData) -> Error {
    Error::dtype(op, format!("not defined for dtype {}", x.dtype()))
}

fn binary_float<T>(op: BinaryOp, a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<T>
where
    T: Float
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>
        + std::ops::Div<Output = T>,
{
    match op {
        BinaryOp::Add => map2(a, la, b, lb, |x, y| x + y),
        BinaryOp::Sub => map2(a, la, b, lb, |x, y| x - y),
        BinaryOp::Mul => map2(a, la, b, lb, |x, y| x * y),
        BinaryOp::Div => map2(a, la, b, lb, |x, y| x / y),
        BinaryOp::Pow => map2(a, la, b, lb, T::powf),
        BinaryOp::Maximum => map2(
            a,
            la,
            b,
            lb,
            |x, y| if x >= y || x.is_nan() { x } else { y },
        ),
        BinaryOp::Minimum => map2(
            a,
            la,
            b,
            lb,
            |x, y| if x <= y || x.is_nan() { x } else { y },
        ),
    }
}

/// A binary arithmetic op on two views already broadcast to the output shape.
pub(crate) fn binary(
    op: BinaryOp,
    a: &CpuData,
    la: &Layout,
    b: &CpuData,
    lb: &Layout,
) -> Result<CpuData> {
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(binary_float(op, x, la, y, lb)),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(binary_float(op, x, la, y, lb)),
        (CpuData::I64(x), CpuData::I64(y)) => CpuData::I64(match op {
            BinaryOp::Add => map2(x, la, y, lb, |p: i64, q: i64| p.wrapping_add(q)),
            BinaryOp::Sub => map2(x, la, y, lb, |p: i64, q: i64| p.wrapping_sub(q)),
            BinaryOp::Mul => map2(x, la, y, lb, |p: i64, q: i64| p.wrapping_mul(q)),
            BinaryOp::Maximum => map2(x, la, y, lb, |p: i64, q: i64| p.max(q)),
            BinaryOp::Minimum => map2(x, la, y, lb, |p: i64, q: i64| p.min(q)),
            BinaryOp::Div | BinaryOp::Pow => {
                return Err(Error::dtype(
                    op.name(),
                    "not defined for int64 tensors; cast to a float dtype first",
                ))
            }
        }),
        _ => return Err(not_for(op.name(), a)),
    })
}

/// A comparison; the result is bool.
pub(crate) fn compare(
    op: CmpOp,
    a: &CpuData,
    la: &Layout,
    b: &CpuData,
    lb: &Layout,
) -> Result<CpuData> {
    fn cmp<T: PartialOrd + Copy + Send + Sync>(
        op: CmpOp,
        a: &[T],
        la: &Layout,
        b: &[T],
        lb: &Layout,
    ) -> Vec<bool> {
        match op {
            CmpOp::Eq => map2(a, la, b, lb, |x, y| x == y),
            CmpOp::Ne => map2(a, la, b, lb, |x, y| x != y),
            CmpOp::Lt => map2(a, la, b, lb, |x, y| x < y),
            CmpOp::Le => map2(a, la, b, lb, |x, y| x <= y),
            CmpOp::Gt => map2(a, la, b, lb, |x, y| x > y),
            CmpOp::Ge => map2(a, la, b, lb, |x, y| x >= y),
        }
    }
    Ok(CpuData::Bool(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => cmp(op, x, la, y, lb),
        (CpuData::F64(x), CpuData::F64(y)) => cmp(op, x, la, y, lb),
        (CpuData::I64(x), CpuData::I64(y)) => cmp(op, x, la, y, lb),
        (CpuData::Bool(x), CpuData::Bool(y)) => cmp(op, x, la, y, lb),
        _ => return Err(not_for(op.name(), a)),
    }))
}

/// `x ** p` for a scalar exponent.
pub(crate) fn pow_scalar(x: &CpuData, l: &Layout, p: f64) -> Result<CpuData> {
    fn pw<T>(x: &[T], l: &Layout, p: f64) -> Vec<T>
    where
        T: Float + std::ops::Mul<Output = T> + std::ops::Div<Output = T>,
    {
        // small integer and half exponents are exact products (and far cheaper than powf)
        match p {
            1.0 => map1(x, l, |v| v),
            2.0 => map1(x, l, |v| v * v),
            3.0 => map1(x, l, |v| v * v * v),
            4.0 => map1(x, l, |v| (v * v) * (v * v)),
            0.5 => map1(x, l, T::sqrt),
            -1.0 => map1(x, l, |v| T::from_f64(1.0) / v),
            -2.0 => map1(x, l, |v| T::from_f64(1.0) / (v * v)),
            _ => {
                let e = T::from_f64(p);
                map1(x, l, |v| v.powf(e))
            }
        }
    }
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(pw(v, l, p)),
        CpuData::F64(v) => CpuData::F64(pw(v, l, p)),
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
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(map3(c, lc, x, la, y, lb, pick)),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(map3(c, lc, x, la, y, lb, pick)),
        (CpuData::I64(x), CpuData::I64(y)) => CpuData::I64(map3(c, lc, x, la, y, lb, pick)),
        (CpuData::Bool(x), CpuData::Bool(y)) => CpuData::Bool(map3(c, lc, x, la, y, lb, pick)),
        _ => return Err(not_for("where", a)),
    })
}

/// A contiguous copy of a view.
pub(crate) fn copy(x: &CpuData, l: &Layout) -> CpuData {
    match x {
        CpuData::F32(v) => CpuData::F32(map1(v, l, |a| a)),
        CpuData::F64(v) => CpuData::F64(map1(v, l, |a| a)),
        CpuData::I64(v) => CpuData::I64(map1(v, l, |a| a)),
        CpuData::Bool(v) => CpuData::Bool(map1(v, l, |a| a)),
    }
}

/// Converts to another dtype (floats to int truncate toward zero, like numpy's `astype`).
pub(crate) fn cast(x: &CpuData, l: &Layout, to: crate::DType) -> CpuData {
    use crate::DType;
    macro_rules! conv {
        ($v:expr, $f:expr) => {
            match to {
                DType::F32 => CpuData::F32(map1($v, l, |a| $f(a) as f32)),
                DType::F64 => CpuData::F64(map1($v, l, |a| $f(a) as f64)),
                DType::I64 => CpuData::I64(map1($v, l, |a| $f(a) as i64)),
                DType::Bool => CpuData::Bool(map1($v, l, |a| $f(a) != 0.0)),
            }
        };
    }
    match x {
        CpuData::F32(v) => conv!(v, |a: f32| a as f64),
        CpuData::F64(v) => conv!(v, |a: f64| a),
        CpuData::I64(v) => match to {
            DType::I64 => CpuData::I64(map1(v, l, |a| a)),
            DType::Bool => CpuData::Bool(map1(v, l, |a| a != 0)),
            _ => conv!(v, |a: i64| a as f64),
        },
        CpuData::Bool(v) => conv!(v, |a: bool| if a { 1.0f64 } else { 0.0 }),
    }
}

fn zip_assign<T: Copy>(dst: &mut [T], ld: &Layout, src: &[T], ls: &Layout, f: impl Fn(T, T) -> T) {
    crate::layout::for_each_run_multi([ld, ls], |[bd, bs], [sd, ss], n| {
        if sd == 1 && ss == 1 {
            for (d, &s) in dst[bd..bd + n].iter_mut().zip(&src[bs..bs + n]) {
                *d = f(*d, s);
            }
        } else if sd == 1 && ss == 0 {
            let s = src[bs];
            for d in dst[bd..bd + n].iter_mut() {
                *d = f(*d, s);
            }
        } else {
            for i in 0..n {
                let p = super::at(bd, sd, i);
                dst[p] = f(dst[p], src[super::at(bs, ss, i)]);
            }
        }
    });
}

/// `dst op= src` through `dst`'s view (`src` already broadcast to its shape).
pub(crate) fn binary_assign(
    op: BinaryOp,
    dst: &mut CpuData,
    ld: &Layout,
    src: &CpuData,
    ls: &Layout,
) -> Result<()> {
    macro_rules! float {
        ($d:expr, $s:expr) => {
            match op {
                BinaryOp::Add => zip_assign($d, ld, $s, ls, |x, y| x + y),
                BinaryOp::Sub => zip_assign($d, ld, $s, ls, |x, y| x - y),
                BinaryOp::Mul => zip_assign($d, ld, $s, ls, |x, y| x * y),
                BinaryOp::Div => zip_assign($d, ld, $s, ls, |x, y| x / y),
                BinaryOp::Pow => zip_assign($d, ld, $s, ls, |x, y| x.powf(y)),
                BinaryOp::Maximum => {
                    zip_assign(
                        $d,
                        ld,
                        $s,
                        ls,
                        |x, y| if x >= y || x.is_nan() { x } else { y },
                    )
                }
                BinaryOp::Minimum => {
                    zip_assign(
                        $d,
                        ld,
                        $s,
                        ls,
                        |x, y| if x <= y || x.is_nan() { x } else { y },
                    )
                }
            }
        };
    }
    match (dst, src) {
        (CpuData::F32(d), CpuData::F32(s)) => float!(d, s),
        (CpuData::F64(d), CpuData::F64(s)) => float!(d, s),
        (CpuData::I64(d), CpuData::I64(s)) => match op {
            BinaryOp::Add => zip_assign(d, ld, s, ls, |x: i64, y| x.wrapping_add(y)),
            BinaryOp::Sub => zip_assign(d, ld, s, ls, |x: i64, y| x.wrapping_sub(y)),
            BinaryOp::Mul => zip_assign(d, ld, s, ls, |x: i64, y| x.wrapping_mul(y)),
            BinaryOp::Maximum => zip_assign(d, ld, s, ls, |x: i64, y| x.max(y)),
            BinaryOp::Minimum => zip_assign(d, ld, s, ls, |x: i64, y| x.min(y)),
            BinaryOp::Div | BinaryOp::Pow => {
                return Err(Error::dtype(
                    op.name(),
                    "not defined for int64 tensors; cast to a float dtype first",
                ))
            }
        },
        (d, _) => return Err(not_for(op.name(), d)),
    }
    Ok(())
}

/// The backward of tanh, sigmoid or relu from the activation's output `y`.
pub(crate) fn act_grad(
    op: UnaryOp,
    dy: &CpuData,
    ldy: &Layout,
    y: &CpuData,
    ly: &Layout,
) -> Result<CpuData> {
    fn go<T>(op: UnaryOp, dy: &[T], ldy: &Layout, y: &[T], ly: &Layout) -> Vec<T>
    where
        T: Float
            + std::ops::Add<Output = T>
            + std::ops::Sub<Output = T>
            + std::ops::Mul<Output = T>,
    {
        let (one, zero) = (T::from_f64(1.0), T::zero());
        match op {
            UnaryOp::Tanh => map2(dy, ldy, y, ly, |g, v| g * (one - v * v)),
            UnaryOp::Sigmoid => map2(dy, ldy, y, ly, |g, v| g * v * (one - v)),
            _ => map2(dy, ldy, y, ly, |g, v| if v > zero { g } else { zero }),
        }
    }
    Ok(match (dy, y) {
        (CpuData::F32(d), CpuData::F32(v)) => CpuData::F32(go(op, d, ldy, v, ly)),
        (CpuData::F64(d), CpuData::F64(v)) => CpuData::F64(go(op, d, ldy, v, ly)),
        _ => return Err(not_for(op.name(), dy)),
    })
}
