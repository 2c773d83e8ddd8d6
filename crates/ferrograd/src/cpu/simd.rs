//! Explicit AVX2/FMA vectors for the row kernels whose reductions the compiler does not
//! vectorise well by itself (it interleaves the running sums across iterations and shuffles
//! lanes). One trait over float32 (8 lanes) and float64 (4 lanes), so a kernel is written once.
//!
//! Every function here is `unsafe` and must only run inside a function compiled with
//! `#[target_feature(enable = "avx2,fma")]` on a CPU that has both (see `super::wide_simd`);
//! they are `#[inline(always)]` so they compile into that function with its features.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::float::Float;

/// A float type and its AVX2 vector.
pub(crate) trait Lanes: Float {
    type V: Copy;
    /// Elements per vector.
    const W: usize;
    unsafe fn vsplat(v: Self) -> Self::V;
    /// Loads `W` elements from `p` (no alignment needed).
    unsafe fn vload(p: *const Self) -> Self::V;
    /// Stores `W` elements to `p` (no alignment needed).
    unsafe fn vstore(p: *mut Self, v: Self::V);
    unsafe fn vadd(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn vsub(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn vmul(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`, rounded once.
    unsafe fn vfma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// The sum of the lanes.
    unsafe fn vhsum(v: Self::V) -> Self;
}

impl Lanes for f32 {
    type V = __m256;
    const W: usize = 8;
    #[inline(always)]
    unsafe fn vsplat(v: f32) -> __m256 {
        _mm256_set1_ps(v)
    }
    #[inline(always)]
    unsafe fn vload(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn vstore(p: *mut f32, v: __m256) {
        _mm256_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn vadd(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn vsub(a: __m256, b: __m256) -> __m256 {
        _mm256_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn vmul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn vfma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn vhsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
}

impl Lanes for f64 {
    type V = __m256d;
    const W: usize = 4;
    #[inline(always)]
    unsafe fn vsplat(v: f64) -> __m256d {
        _mm256_set1_pd(v)
    }
    #[inline(always)]
    unsafe fn vload(p: *const f64) -> __m256d {
        _mm256_loadu_pd(p)
    }
    #[inline(always)]
    unsafe fn vstore(p: *mut f64, v: __m256d) {
        _mm256_storeu_pd(p, v)
    }
    #[inline(always)]
    unsafe fn vadd(a: __m256d, b: __m256d) -> __m256d {
        _mm256_add_pd(a, b)
    }
    #[inline(always)]
    unsafe fn vsub(a: __m256d, b: __m256d) -> __m256d {
        _mm256_sub_pd(a, b)
    }
    #[inline(always)]
    unsafe fn vmul(a: __m256d, b: __m256d) -> __m256d {
        _mm256_mul_pd(a, b)
    }
    #[inline(always)]
    unsafe fn vfma(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        _mm256_fmadd_pd(a, b, c)
    }
    #[inline(always)]
    unsafe fn vhsum(v: __m256d) -> f64 {
        let s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
        _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)))
    }
}

/// `sum(f(x[i]))` over a slice with four vector accumulators, so the adds overlap (`fv` on
/// whole vectors, `fs` on the scalar tail).
#[inline(always)]
pub(crate) unsafe fn sum_map<T: Lanes>(
    x: &[T],
    fv: impl Fn(T::V) -> T::V,
    fs: impl Fn(T) -> T,
) -> T {
    let n = x.len();
    let p = x.as_ptr();
    let z = T::vsplat(T::ZERO);
    let mut acc = [z; 4];
    let mut i = 0;
    while i + 4 * T::W <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = T::vadd(*a, fv(T::vload(p.add(i + k * T::W))));
        }
        i += 4 * T::W;
    }
    while i + T::W <= n {
        acc[0] = T::vadd(acc[0], fv(T::vload(p.add(i))));
        i += T::W;
    }
    let mut s = T::vhsum(T::vadd(T::vadd(acc[0], acc[1]), T::vadd(acc[2], acc[3])));
    for &v in &x[i..] {
        s = s + fs(v);
    }
    s
}

/// A row's mean and `1 / sqrt(var + eps)` (biased variance, two passes).
#[inline(always)]
pub(crate) unsafe fn row_stats<T: Lanes>(x: &[T], eps: T) -> (T, T) {
    let n = T::from_f64(x.len() as f64);
    let mean = sum_map(x, |v| v, |v| v) / n;
    let m = T::vsplat(mean);
    let var = sum_map(
        x,
        |v| {
            let d = T::vsub(v, m);
            T::vmul(d, d)
        },
        |v| (v - mean) * (v - mean),
    ) / n;
    (mean, T::ONE / (var + eps).sqrt())
}

/// float32 `exp(x)` for `x <= 0` on 8 lanes: `2^n exp(r)` with `x = n ln2 + r`, Cephes'
/// polynomial evaluated with FMA (within about 1 ulp, as the scalar form in `float.rs`).
/// Below -87.3 the result is 0; NaN stays NaN.
#[inline(always)]
pub(crate) unsafe fn exp_le0_ps(x: __m256) -> __m256 {
    let lo = _mm256_set1_ps(-87.3);
    // (a NaN lane takes `lo` here and is put back at the end)
    let c = _mm256_max_ps(x, lo);
    let n = _mm256_round_ps(
        _mm256_mul_ps(c, _mm256_set1_ps(std::f32::consts::LOG2_E)),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
    );
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), c);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut y = _mm256_set1_ps(1.987_569_1e-4);
    for k in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(k));
    }
    let y = _mm256_add_ps(
        _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r),
        _mm256_set1_ps(1.0),
    );
    let bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
        23,
    );
    let e = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
    // 0 where x <= -87.3 (and NaN lanes, restored next)
    let e = _mm256_and_ps(e, _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
    _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
}

/// The largest element of a non-empty float32 row (NaNs skipped, as `max8` does).
#[inline(always)]
pub(crate) unsafe fn max_ps(x: &[f32]) -> f32 {
    let n = x.len();
    let p = x.as_ptr();
    let mut acc = [_mm256_set1_ps(x[0]); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            // (max_ps returns the second operand when the first is NaN)
            *a = _mm256_max_ps(_mm256_loadu_ps(p.add(i + 8 * k)), *a);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_max_ps(_mm256_loadu_ps(p.add(i)), acc[0]);
        i += 8;
    }
    let m = _mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3]));
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), m);
    let mut mx = lanes[0];
    for &v in lanes[1..].iter().chain(&x[i..]) {
        mx = if v > mx { v } else { mx };
    }
    mx
}

/// `sum(exp(x - shift))` over a float32 row whose elements are at most `shift`, each exp
/// also written to `out` when given.
#[inline(always)]
pub(crate) unsafe fn exp_sum_ps(x: &[f32], shift: f32, mut out: Option<&mut [f32]>) -> f32 {
    let n = x.len();
    if let Some(o) = &out {
        assert!(o.len() >= n);
    }
    let p = x.as_ptr();
    let vs = _mm256_set1_ps(shift);
    let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 8 <= n {
        let e = exp_le0_ps(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), vs));
        if let Some(o) = &mut out {
            _mm256_storeu_ps(o.as_mut_ptr().add(i), e);
        }
        // two sums, alternating, so consecutive adds do not wait on each other
        if (i / 8) % 2 == 0 {
            a = _mm256_add_ps(a, e);
        } else {
            b = _mm256_add_ps(b, e);
        }
        i += 8;
    }
    let mut s = f32::vhsum(_mm256_add_ps(a, b));
    for j in i..n {
        let e = super::float::exp_nonpositive_f32(x[j] - shift);
        if let Some(o) = &mut out {
            o[j] = e;
        }
        s += e;
    }
    s
}

/// `o[i] *= k` over a float32 row.
#[inline(always)]
pub(crate) unsafe fn scale_ps(o: &mut [f32], k: f32) {
    let n = o.len();
    let p = o.as_mut_ptr();
    let vk = _mm256_set1_ps(k);
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(p.add(i), _mm256_mul_ps(_mm256_loadu_ps(p.add(i)), vk));
        i += 8;
    }
    for v in &mut o[i..] {
        *v *= k;
    }
}

/// `o[i] = exp(o[i] - shift)` over a float32 row whose elements are at most `shift`; returns
/// the sum of the exps.
#[inline(always)]
pub(crate) unsafe fn exp_sum_inplace_ps(o: &mut [f32], shift: f32) -> f32 {
    let n = o.len();
    let p = o.as_mut_ptr();
    let vs = _mm256_set1_ps(shift);
    let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 16 <= n {
        let e0 = exp_le0_ps(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), vs));
        let e1 = exp_le0_ps(_mm256_sub_ps(_mm256_loadu_ps(p.add(i + 8)), vs));
        _mm256_storeu_ps(p.add(i), e0);
        _mm256_storeu_ps(p.add(i + 8), e1);
        a = _mm256_add_ps(a, e0);
        b = _mm256_add_ps(b, e1);
        i += 16;
    }
    if i + 8 <= n {
        let e0 = exp_le0_ps(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), vs));
        _mm256_storeu_ps(p.add(i), e0);
        a = _mm256_add_ps(a, e0);
        i += 8;
    }
    let mut s = f32::vhsum(_mm256_add_ps(a, b));
    for v in &mut o[i..] {
        *v = super::float::exp_nonpositive_f32(*v - shift);
        s += *v;
    }
    s
}
