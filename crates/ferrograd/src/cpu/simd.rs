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
