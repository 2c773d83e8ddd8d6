//! Float math for the f32 and f64 kernels: what the op tables' kernel expressions
//! (`ops/unary.rs`, `ops/binary.rs`) call on an element `v: T`.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use crate::storage::pool::Pooled;

/// The element math of the float kernels. NaN propagates through every function, as in
/// numpy and PyTorch. (Functions no table row calls yet are kept: a new op's kernel
/// expression can call any of them.)
#[allow(dead_code)]
pub(crate) trait Float:
    Copy
    + PartialOrd
    + Pooled
    + Neg<Output = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;

    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    std_math! { declare }

    /// `1 / (1 + e^-v)`, split by sign so neither branch overflows.
    #[inline(always)]
    fn sigmoid(self) -> Self {
        if self >= Self::ZERO {
            Self::ONE / (Self::ONE + (-self).exp())
        } else {
            let e = self.exp();
            e / (Self::ONE + e)
        }
    }

    /// `v * Phi(v)` with the normal CDF `Phi(v) = (1 + erf(v / sqrt 2)) / 2` (PyTorch's
    /// exact GELU).
    #[inline(always)]
    fn gelu(self) -> Self {
        let half = Self::from_f64(0.5);
        half * self * (Self::ONE + (self * Self::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf())
    }

    /// The slope of [`Float::gelu`]: `Phi(v) + v * phi(v)`, `phi` the normal density.
    #[inline(always)]
    fn gelu_slope(self) -> Self {
        let half = Self::from_f64(0.5);
        let cdf =
            half * (Self::ONE + (self * Self::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf());
        let pdf = (-half * self * self).exp() * Self::from_f64(0.398_942_280_401_432_7);
        cdf + self * pdf
    }

    /// `max(v, 0)`; NaN stays NaN and -0.0 stays -0.0 (as PyTorch's relu, which replaces
    /// only what compares below 0).
    #[inline(always)]
    fn relu(self) -> Self {
        if self < Self::ZERO {
            Self::ZERO
        } else {
            self
        }
    }

    /// `log(1 + e^v)`, and `v` itself above 20 (PyTorch's default threshold; the two differ
    /// by 2e-9 there).
    #[inline(always)]
    fn softplus(self) -> Self {
        if self > Self::from_f64(20.0) {
            self
        } else {
            self.exp().ln_1p()
        }
    }

    /// -1, 0 or 1; both zeros and NaN give +0.0 (as PyTorch's `sign`, `(0 < v) - (v < 0)`).
    #[inline(always)]
    fn sign(self) -> Self {
        if self > Self::ZERO {
            Self::ONE
        } else if self < Self::ZERO {
            -Self::ONE
        } else {
            Self::ZERO
        }
    }

    /// C's `fmod`: `self - trunc(self / other) * other`, exact, with the sign of `self`.
    #[inline(always)]
    fn fmod(self, other: Self) -> Self {
        self % other
    }

    /// The remainder of the floored division (Python's `%`): [`Float::fmod`], with `other`
    /// added where the signs differ, so the result has the sign of `other`.
    #[inline(always)]
    fn floor_mod(self, other: Self) -> Self {
        let m = self % other;
        if m != Self::ZERO && ((other < Self::ZERO) != (m < Self::ZERO)) {
            m + other
        } else {
            m
        }
    }

    /// The larger of two values; NaN wins (numpy's `maximum`).
    #[inline(always)]
    fn maximum(self, other: Self) -> Self {
        if self >= other || self.is_nan() {
            self
        } else {
            other
        }
    }

    /// The smaller of two values; NaN wins (numpy's `minimum`).
    #[inline(always)]
    fn minimum(self, other: Self) -> Self {
        if self <= other || self.is_nan() {
            self
        } else {
            other
        }
    }
}

/// The functions of std's float types, declared in [`Float`] and forwarded to the inherent
/// methods of f32 and f64 (an op's kernel expression may call any of them).
macro_rules! std_math {
    (declare) => {
        std_math!(@each declare);
    };
    (forward $t:ty) => {
        std_math!(@each forward $t);
    };
    (@each $($how:tt)*) => {
        std_math!(@one ($($how)*) unary exp ln sqrt abs exp2 exp_m1 ln_1p log2 log10 cbrt recip
            sin cos tan asin acos atan sinh cosh asinh acosh atanh floor ceil round round_ties_even
            trunc);
        std_math!(@one ($($how)*) binary powf atan2 copysign);
    };
    (@one (declare) unary $($f:ident)*) => { $( fn $f(self) -> Self; )* };
    (@one (declare) binary $($f:ident)*) => { $( fn $f(self, other: Self) -> Self; )* };
    (@one (forward $t:ty) unary $($f:ident)*) => {
        $( #[inline(always)] fn $f(self) -> Self { <$t>::$f(self) } )*
    };
    (@one (forward $t:ty) binary $($f:ident)*) => {
        $( #[inline(always)] fn $f(self, other: Self) -> Self { <$t>::$f(self, other) } )*
    };
}
use std_math;

macro_rules! impl_float {
    ($t:ty, $tanh:expr, $erf:path, $erfc:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn erfc(self) -> Self {
                $erfc(self)
            }
            std_math! { forward $t }
        }
    };
}
impl_float!(f32, tanh_f32, libm::erff, libm::erfcf);
impl_float!(f64, f64::tanh, libm::erf, libm::erfc);

/// `2^n exp(r)` for `x = n ln2 + r`, `|r| <= ln2/2`: Cephes' degree-6 polynomial for
/// `exp(r)`, `2^n` built from its bits (`-126 <= n <= 127`); within about 1 ulp. Branch free,
/// so loops over the callers vectorise.
#[inline(always)]
fn exp_parts_f32(x: f32, n: i32) -> f32 {
    let nf = n as f32;
    // ln2 split in two, so `n * ln2` is exact enough
    let r = x - nf * 0.693_359_4 + nf * 2.121_944_4e-4;
    let z = r * r;
    let y = (((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2)
        * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    y * f32::from_bits(((n + 127) as u32) << 23)
}

/// float32 `exp` for `0 <= x <= 20`, the range `tanh_f32` uses (see [`exp_parts_f32`]).
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    // SAFETY: for 0 <= x <= 20 the value is in [0.5, 29.4]: truncation is floor, in range
    let n = unsafe { (x * std::f32::consts::LOG2_E + 0.5).to_int_unchecked::<i32>() };
    exp_parts_f32(x, n)
}

/// float32 `exp(x)` for `x <= 0` (softmax's shifted logits; see [`exp_parts_f32`]). Below
/// -87.3, where float32's normal range ends, the result is 0; NaN stays NaN.
#[inline(always)]
pub(crate) fn exp_nonpositive_f32(x: f32) -> f32 {
    let c = if x > -87.3 { x } else { -87.3 };
    // SAFETY: c is in [-87.3, 0] (a NaN compares false above and is replaced by -87.3): the
    // value is in [-126.5, -0.5], truncation toward zero is the nearest integer, in range
    let n = unsafe { (c * std::f32::consts::LOG2_E - 0.5).to_int_unchecked::<i32>() };
    let e = exp_parts_f32(c, n);
    let e = if x > -87.3 { e } else { 0.0 };
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// float32 tanh, within 1.3 ulp of the exact value: an odd polynomial near zero (Cephes'
/// coefficients), else `1 - 2 / (exp(2|x|) + 1)`. Both are computed and one is selected, and
/// signs, clamping and NaN are handled with bits and compares rather than `copysign`/`min`
/// calls, so a loop over it vectorises even on baseline x86-64; `|x|` is clamped at 10, where
/// tanh is 1.0 in float32, and NaN passes through.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    const ABS: u32 = 0x7fff_ffff;
    let sign = x.to_bits() & !ABS;
    let with_sign = |v: f32| f32::from_bits((v.to_bits() & ABS) | sign);
    let a = f32::from_bits(x.to_bits() & ABS);
    let z = x * x;
    let p = (((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
        - 3.333_328e-1;
    // (the sign restored: -0.0 would come out +0.0)
    let small = with_sign(x + x * z * p);
    // a NaN compares false: clamped to 10 here, and passed through below
    let c = if a < 10.0 { a } else { 10.0 };
    let e = exp_f32(2.0 * c);
    let large = with_sign(1.0 - 2.0 / (e + 1.0));
    let r = if a < 0.625 { small } else { large };
    if x.is_nan() {
        x
    } else {
        r
    }
}
