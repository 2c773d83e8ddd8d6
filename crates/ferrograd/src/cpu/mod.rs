//! The CPU backend: kernels take buffers with their layouts and return new contiguous
//! buffers; shape checks happen before, in the ops. [`Cpu`] implements the backend seam.

pub(crate) mod attention;
pub mod blas;

/// How many threads CPU kernels use (the size of the worker pool; made on first use).
pub fn num_threads() -> usize {
    threads()
}

/// Sizes the worker pool CPU kernels use to `n` threads, where it is not made yet (it is
/// made on first use); returns the size it has after the call.
pub fn set_num_threads(n: usize) -> usize {
    *POOL.get_or_init(|| make_pool(n.max(1)))
}

/// Makes the calling thread one of the worker pool's threads when the pool is made on it
/// (by [`set_num_threads`] or by the first large op), for a thread that lives as long as the
/// process and runs most ops (the Python bindings call it on the interpreter's main thread).
/// A thread outside the pool hands a parallel op to the workers and sleeps until they are
/// done; a thread in it takes the first part itself and only waits for the rest, which saves
/// a sleep and a wake-up per op (tens of microseconds on small machines, as much as a
/// 256K-element add takes).
pub fn join_pool_here() {
    HOME.with(|h| h.set(true));
}

static POOL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

thread_local! {
    static HOME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Threads large ops split over: the worker pool's size (made here on first use).
#[inline]
pub(crate) fn threads() -> usize {
    match POOL.get() {
        Some(&n) => n,
        None => *POOL.get_or_init(|| make_pool(0)),
    }
}

/// Makes the global worker pool with `n` threads (0: `RAYON_NUM_THREADS` or one per logical
/// CPU, rayon's default); the calling thread is one of them where [`join_pool_here`] was
/// called on it. Something else may have made the pool first: then it is used as it is.
fn make_pool(n: usize) -> usize {
    let n = if n > 0 {
        n
    } else {
        std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&v| v > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |v| v.get()))
    };
    let mut b = rayon::ThreadPoolBuilder::new().num_threads(n);
    // a pool of one thread that is the caller would leave jobs sent from other threads
    // with no one to run them
    if n >= 2 && HOME.with(|h| h.get()) {
        b = b.use_current_thread();
    }
    let _ = b.build_global();
    rayon::current_num_threads()
}
mod conv;
mod convolution;
pub(crate) mod float;
mod index;
mod norm;
mod reduce;
mod simd;
mod transpose;

use crate::backend::{Backend, Held, View};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{for_each_run, for_each_run_multi, Layout};
use crate::op::{Activation, BinaryOp, CmpOp, ReduceKind, UnaryOp};
use crate::storage::pool;
use crate::storage::{CpuData, Storage, StorageData};
use crate::window::{ConvShape, Window};

/// The CPU backend.
pub(crate) struct Cpu;

impl Backend for Cpu {
    type Buf = CpuData;

    fn device(&self) -> Device {
        Device::Cpu
    }
    fn storage(&self, buf: CpuData) -> Storage {
        Storage::cpu(buf)
    }
    fn view<'a>(&self, data: &'a StorageData) -> Result<Held<'a, CpuData>> {
        match data {
            StorageData::Cpu(d) => Ok(Held::Borrowed(d)),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(_) => Err(Error::device("cpu", "a CUDA buffer reached a CPU kernel")),
        }
    }
    fn view_mut<'a>(&self, data: &'a mut StorageData) -> Result<&'a mut CpuData> {
        match data {
            StorageData::Cpu(d) => Ok(d),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(_) => Err(Error::device("cpu", "a CUDA buffer reached a CPU kernel")),
        }
    }

    fn upload(&self, host: &CpuData) -> Result<CpuData> {
        Ok(host.clone())
    }
    fn download(&self, x: &CpuData, l: &Layout) -> Result<CpuData> {
        elementwise::copy(x, l)
    }
    fn fill(&self, n: usize, value: f64, dtype: DType) -> Result<CpuData> {
        Ok(match dtype {
            DType::F32 => CpuData::F32(pool::filled(n, value as f32)?),
            DType::F64 => CpuData::F64(pool::filled(n, value)?),
            DType::I64 => CpuData::I64(pool::filled(n, value as i64)?),
            DType::Bool => CpuData::Bool(pool::filled(n, value != 0.0)?),
            DType::F16 => CpuData::F16(pool::filled(n, half::f16::from_f32(value as f32))?),
            DType::BF16 => CpuData::BF16(pool::filled(n, half::bf16::from_f32(value as f32))?),
            DType::I32 => CpuData::I32(pool::filled(n, value as i64 as i32)?),
            DType::I16 => CpuData::I16(pool::filled(n, value as i64 as i16)?),
            DType::I8 => CpuData::I8(pool::filled(n, value as i64 as i8)?),
            DType::U8 => CpuData::U8(pool::filled(n, value as i64 as u8)?),
        })
    }

    fn unary(&self, op: UnaryOp, x: &CpuData, l: &Layout) -> Result<CpuData> {
        elementwise::unary(op, x, l)
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &CpuData,
        la: &Layout,
        b: &CpuData,
        lb: &Layout,
    ) -> Result<CpuData> {
        elementwise::binary(op, a, la, b, lb)
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &CpuData,
        la: &Layout,
        b: &CpuData,
        lb: &Layout,
    ) -> Result<CpuData> {
        elementwise::compare(op, a, la, b, lb)
    }
    fn act_grad(
        &self,
        act: Activation,
        dy: &CpuData,
        ldy: &Layout,
        y: &CpuData,
        ly: &Layout,
    ) -> Result<CpuData> {
        elementwise::act_grad(act, dy, ldy, y, ly)
    }
    fn pow_scalar(&self, x: &CpuData, l: &Layout, p: f64) -> Result<CpuData> {
        elementwise::pow_scalar(x, l, p)
    }
    fn where_(
        &self,
        c: &CpuData,
        lc: &Layout,
        a: &CpuData,
        la: &Layout,
        b: &CpuData,
        lb: &Layout,
    ) -> Result<CpuData> {
        elementwise::where_(c, lc, a, la, b, lb)
    }
    fn cast(&self, x: &CpuData, l: &Layout, to: DType) -> Result<CpuData> {
        elementwise::cast(x, l, to)
    }
    fn write(&self, dst: &mut CpuData, ld: &Layout, src: &CpuData, ls: &Layout) -> Result<()> {
        match (dst, src) {
            (CpuData::F32(d), CpuData::F32(s)) => write_into(d, ld, s, ls),
            (CpuData::F64(d), CpuData::F64(s)) => write_into(d, ld, s, ls),
            (CpuData::I64(d), CpuData::I64(s)) => write_into(d, ld, s, ls),
            (CpuData::Bool(d), CpuData::Bool(s)) => write_into(d, ld, s, ls),
            (CpuData::F16(d), CpuData::F16(s)) => write_into(d, ld, s, ls),
            (CpuData::BF16(d), CpuData::BF16(s)) => write_into(d, ld, s, ls),
            (CpuData::I32(d), CpuData::I32(s)) => write_into(d, ld, s, ls),
            (CpuData::I16(d), CpuData::I16(s)) => write_into(d, ld, s, ls),
            (CpuData::I8(d), CpuData::I8(s)) => write_into(d, ld, s, ls),
            (CpuData::U8(d), CpuData::U8(s)) => write_into(d, ld, s, ls),
            (d, s) => {
                return Err(Error::dtype(
                    "assign",
                    format!(
                        "cannot write {} data into a {} tensor",
                        s.dtype(),
                        d.dtype()
                    ),
                ))
            }
        }
        Ok(())
    }
    fn binary_assign(
        &self,
        op: BinaryOp,
        dst: &mut CpuData,
        ld: &Layout,
        src: &CpuData,
        ls: &Layout,
    ) -> Result<()> {
        elementwise::binary_assign(op, dst, ld, src, ls)
    }
    fn reduce(&self, kind: ReduceKind, x: &CpuData, l: &Layout, axes: &[usize]) -> Result<CpuData> {
        reduce::reduce(kind, x, l, axes)
    }
    fn softmax(&self, x: &CpuData, l: &Layout, axis: usize, log: bool) -> Result<CpuData> {
        reduce::softmax(x, l, axis, log)
    }
    fn normalize(
        &self,
        x: &CpuData,
        l: &Layout,
        wb: Option<(&CpuData, &Layout, &CpuData, &Layout)>,
        eps: f64,
    ) -> Result<CpuData> {
        norm::layer_norm(x, l, wb, eps)
    }
    fn normalize_grad(
        &self,
        x: &CpuData,
        lx: &Layout,
        w: Option<(&CpuData, &Layout)>,
        dy: &CpuData,
        ldy: &Layout,
        eps: f64,
    ) -> Result<CpuData> {
        norm::layer_norm_grad(x, lx, w, dy, ldy, eps)
    }
    fn attention(
        &self,
        q: (&CpuData, &Layout),
        k: (&CpuData, &Layout),
        v: (&CpuData, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<CpuData> {
        attention::attention(q, k, v, attention::Dims::new(q.1, k.1, v.1, scale, causal))
    }
    fn attention_grad(
        &self,
        q: (&CpuData, &Layout),
        k: (&CpuData, &Layout),
        v: (&CpuData, &Layout),
        out: (&CpuData, &Layout),
        dout: (&CpuData, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<CpuData> {
        let d = attention::Dims::new(q.1, k.1, v.1, scale, causal);
        attention::attention_grad(q, k, v, out, dout, d)
    }
    fn softmax_xent(
        &self,
        x: &CpuData,
        lx: &Layout,
        labels: &CpuData,
        ll: &Layout,
    ) -> Result<CpuData> {
        reduce::softmax_xent(x, lx, labels, ll)
    }
    fn softmax_xent_grad(
        &self,
        x: &CpuData,
        lx: &Layout,
        labels: &CpuData,
        ll: &Layout,
        dy: &CpuData,
        ldy: &Layout,
    ) -> Result<CpuData> {
        reduce::softmax_xent_grad(x, lx, labels, ll, dy, ldy)
    }
    fn matmul(&self, a: &CpuData, la: &Layout, b: &CpuData, lb: &Layout) -> Result<CpuData> {
        matmul::matmul(a, la, b, lb)
    }
    fn gather(
        &self,
        x: &CpuData,
        lx: &Layout,
        idx: &CpuData,
        li: &Layout,
        axis: usize,
    ) -> Result<CpuData> {
        index::gather(x, lx, idx, li, axis)
    }
    fn scatter_add(
        &self,
        src: &CpuData,
        ls: &Layout,
        idx: &CpuData,
        li: &Layout,
        axis: usize,
        shape: &[usize],
    ) -> Result<CpuData> {
        index::scatter_add(src, ls, idx, li, axis, shape)
    }
    fn unfold(&self, x: &CpuData, l: &Layout, win: &Window, pad: f64) -> Result<CpuData> {
        conv::unfold(x, l, win, pad)
    }
    fn fold(
        &self,
        cols: &CpuData,
        l: &Layout,
        win: &Window,
        size: (usize, usize),
    ) -> Result<CpuData> {
        conv::fold(cols, l, win, size)
    }
    fn pool_argmax(&self, x: &CpuData, l: &Layout, win: &Window) -> Result<CpuData> {
        convolution::pool_argmax(x, l, win)
    }
    fn conv2d(
        &self,
        x: View<'_, CpuData>,
        w: View<'_, CpuData>,
        bias: Option<View<'_, CpuData>>,
        s: &ConvShape,
    ) -> Result<CpuData> {
        convolution::conv2d(x, w, bias, s)
    }
    fn conv2d_input_grad(
        &self,
        dy: View<'_, CpuData>,
        w: View<'_, CpuData>,
        s: &ConvShape,
    ) -> Result<CpuData> {
        convolution::conv2d_input_grad(dy, w, s)
    }
    fn conv2d_weight_grad(
        &self,
        x: View<'_, CpuData>,
        dy: View<'_, CpuData>,
        s: &ConvShape,
    ) -> Result<CpuData> {
        convolution::conv2d_weight_grad(x, dy, s)
    }
    fn max_pool2d(&self, x: &CpuData, l: &Layout, win: &Window) -> Result<CpuData> {
        convolution::max_pool2d(x, l, win)
    }
    fn max_pool2d_grad(
        &self,
        x: View<'_, CpuData>,
        dy: View<'_, CpuData>,
        win: &Window,
    ) -> Result<CpuData> {
        convolution::max_pool2d_grad(x, dy, win)
    }
}

/// Whether the CPU has AVX2 and FMA (the wheel is built for plain x86-64, so the hot
/// elementwise loops are compiled twice and the wider form is picked at run time). On other
/// architectures the loops are compiled for the target's own vectors (NEON on aarch64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn wide_simd() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Whether the CPU also has AVX-512 (F, BW, VL): the elementwise loops have a third form
/// for it, with 512-bit vectors.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn widest_simd() -> bool {
    wide_simd()
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
}

use std::mem::MaybeUninit;

/// Defines `pub(crate) fn $name<generics>($args)` that runs `$body` compiled three times,
/// for AVX-512, for AVX2+FMA and for the baseline, and picks the widest the CPU has at run
/// time (the loops inside are plain, so the compiler vectorises each for its features).
macro_rules! multiversion {
    (
        $(#[$m:meta])*
        fn $name:ident<$($g:ident $(: $b:path)?),*>($($a:ident: $t:ty),*) $body:block
    ) => {
        $(#[$m])*
        pub(crate) fn $name<$($g $(: $b)?),*>($($a: $t),*) {
            #[inline(always)]
            fn body<$($g $(: $b)?),*>($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
                fn widest<$($g $(: $b)?),*>($($a: $t),*) {
                    body($($a),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn wide<$($g $(: $b)?),*>($($a: $t),*) {
                    body($($a),*)
                }
                if widest_simd() {
                    // SAFETY: the CPU has the features `widest` is compiled for.
                    return unsafe { widest($($a),*) };
                }
                if wide_simd() {
                    // SAFETY: the CPU has the features `wide` is compiled for.
                    return unsafe { wide($($a),*) };
                }
            }
            body($($a),*)
        }
    };
}

// (after the macro they use)
mod elementwise;
pub(crate) mod fused;
mod matmul;
pub(crate) mod optim;

multiversion! {
    /// `dst[i] = f(a[i])` over `min(dst, a)` elements.
    fn fill1<T: Copy, U: Sized, F: Fn(T) -> U>(dst: &mut [MaybeUninit<U>], a: &[T], f: &F) {
        for (o, &x) in dst.iter_mut().zip(a) {
            o.write(f(x));
        }
    }
}

multiversion! {
    /// `dst[i] = f(a[i], b[i])` over the shortest of the three.
    fn fill2<T: Copy, U: Copy, V: Sized, F: Fn(T, U) -> V>(
        dst: &mut [MaybeUninit<V>],
        a: &[T],
        b: &[U],
        f: &F
    ) {
        for ((o, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            o.write(f(x, y));
        }
    }
}

multiversion! {
    /// `dst[i] = f(dst[i], src[i])` over the shorter of the two (an in-place update).
    fn assign2<T: Copy, U: Copy, F: Fn(T, U) -> T>(dst: &mut [T], src: &[U], f: &F) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f(*d, s);
        }
    }
}

multiversion! {
    /// `dst[i] = f(dst[i])` (an in-place update by a scalar).
    fn assign1<T: Copy, F: Fn(T) -> T>(dst: &mut [T], f: &F) {
        for d in dst.iter_mut() {
            *d = f(*d);
        }
    }
}

/// Appends `n` elements written by `fill` to `out` (which has the capacity).
#[inline(always)]
fn extend_with<V>(out: &mut Vec<V>, n: usize, fill: impl FnOnce(&mut [MaybeUninit<V>])) {
    let len = out.len();
    fill(&mut out.spare_capacity_mut()[..n]);
    // SAFETY: `fill` wrote the `n` slots after `len` (the fill helpers write every slot of
    // a destination no longer than their sources, and callers pass sources of length n).
    unsafe { out.set_len(len + n) };
}

/// Position of element `i` of a run starting at `base` with `stride`.
#[inline(always)]
pub(crate) fn at(base: usize, stride: isize, i: usize) -> usize {
    (base as isize + stride * i as isize) as usize
}

/// Elements per task when a large contiguous elementwise op is split across threads.
pub(crate) const PAR_CHUNK: usize = 1 << 16;

/// Fills `out` (empty, with capacity for `n`) with `f(i-th chunk)` in parallel chunks.
fn par_fill<V: Send>(
    out: &mut Vec<V>,
    n: usize,
    f: impl Fn(usize, &mut [std::mem::MaybeUninit<V>]) + Sync + Send,
) {
    use rayon::prelude::*;
    out.spare_capacity_mut()[..n]
        .par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(c, dst)| f(c * PAR_CHUNK, dst));
    // SAFETY: every chunk of the first `n` slots was written by `f`.
    unsafe { out.set_len(n) };
}

/// The elements of a view in row-major order: borrowed when the view is contiguous, else
/// copied once.
pub(crate) fn contiguous<'a, T: Copy + Sync + pool::Pooled + Send>(
    x: &'a [T],
    l: &Layout,
) -> Result<std::borrow::Cow<'a, [T]>> {
    Ok(if l.is_contiguous() {
        std::borrow::Cow::Borrowed(&x[l.offset()..l.offset() + l.numel()])
    } else {
        std::borrow::Cow::Owned(map1(x, l, |a| a)?)
    })
}

/// Applies `f` to every element of a strided view, in row-major order.
pub(crate) fn map1<T: Copy + Sync, U: pool::Pooled + Send>(
    x: &[T],
    l: &Layout,
    f: impl Fn(T) -> U + Sync + Send,
) -> Result<Vec<U>> {
    let n = l.numel();
    let mut out = pool::take(n)?;
    if n >= 4 * PAR_CHUNK && l.is_contiguous() && crate::cpu::threads() > 1 {
        let src = &x[l.offset()..l.offset() + n];
        par_fill(&mut out, n, |start, dst| fill1(dst, &src[start..], &f));
        return Ok(out);
    }
    if let Some(j) = transpose::transposed_axis(l) {
        transpose::fill_transposed(x, l, j, &mut out.spare_capacity_mut()[..n], &f);
        // SAFETY: fill_transposed wrote every one of the n slots
        unsafe { out.set_len(n) };
        return Ok(out);
    }
    for_each_run(l, |b, s, n| {
        if s == 1 {
            extend_with(&mut out, n, |dst| fill1(dst, &x[b..b + n], &f));
        } else if s == 0 {
            // a broadcast run: one value repeated
            let v = f(x[b]);
            out.extend(std::iter::repeat(v).take(n));
        } else {
            out.extend((0..n).map(|i| f(x[at(b, s, i)])));
        }
    });
    Ok(out)
}

/// Applies `f` elementwise to two views of one shape (broadcast views have stride 0).
pub(crate) fn map2<T: Copy + Sync, U: Copy + Sync, V: pool::Pooled + Send>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    f: impl Fn(T, U) -> V + Sync + Send,
) -> Result<Vec<V>> {
    let n = la.numel();
    let mut out = pool::take(n)?;
    if n >= 4 * PAR_CHUNK && crate::cpu::threads() > 1 {
        let scalar_b = lb.strides().iter().all(|&s| s == 0);
        if la.is_contiguous() && (lb.is_contiguous() || scalar_b) {
            let xa = &a[la.offset()..la.offset() + n];
            let ob = lb.offset();
            par_fill(&mut out, n, |start, dst| {
                if scalar_b {
                    let y = b[ob];
                    fill1(dst, &xa[start..], &|x| f(x, y));
                } else {
                    fill2(dst, &xa[start..], &b[ob + start..], &f);
                }
            });
            return Ok(out);
        }
    }
    for_each_run_multi([la, lb], |[ba, bb], [sa, sb], n| match (sa, sb) {
        (1, 1) => extend_with(&mut out, n, |dst| {
            fill2(dst, &a[ba..ba + n], &b[bb..bb + n], &f)
        }),
        (1, 0) => {
            let y = b[bb];
            extend_with(&mut out, n, |dst| fill1(dst, &a[ba..ba + n], &|x| f(x, y)))
        }
        (0, 1) => {
            let x = a[ba];
            extend_with(&mut out, n, |dst| fill1(dst, &b[bb..bb + n], &|y| f(x, y)))
        }
        _ => out.extend((0..n).map(|i| f(a[at(ba, sa, i)], b[at(bb, sb, i)]))),
    });
    Ok(out)
}

/// Applies `f` elementwise to three views of one shape.
pub(crate) fn map3<T: Copy, U: Copy, W: Copy, V: pool::Pooled>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    c: &[W],
    lc: &Layout,
    f: impl Fn(T, U, W) -> V,
) -> Result<Vec<V>> {
    let mut out = pool::take(la.numel())?;
    for_each_run_multi([la, lb, lc], |[ba, bb, bc], [sa, sb, sc], n| {
        out.extend((0..n).map(|i| f(a[at(ba, sa, i)], b[at(bb, sb, i)], c[at(bc, sc, i)])))
    });
    Ok(out)
}

/// Writes the elements of `src` (viewed by `ls`) into the positions of `out` viewed by `lo`.
pub(crate) fn write_into<T: Copy>(out: &mut [T], lo: &Layout, src: &[T], ls: &Layout) {
    for_each_run_multi([lo, ls], |[bo, bs], [so, ss], n| {
        if so == 1 && ss == 1 {
            out[bo..bo + n].copy_from_slice(&src[bs..bs + n]);
        } else {
            for i in 0..n {
                out[at(bo, so, i)] = src[at(bs, ss, i)];
            }
        }
    });
}
