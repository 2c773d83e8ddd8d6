//! The element loops of the fused optimizer updates (`crate::optim`): pieces of the
//! parameter and its state, in parallel, each loop compiled for the widest vectors.

// (the loops index the parameter and its state buffers together)
#![allow(clippy::needless_range_loop)]

use super::float::Float;
#[cfg(target_arch = "x86_64")]
use super::{wide_simd, widest_simd};

/// Adam's per-element constants, in the parameter's dtype.
pub(crate) struct AdamConsts<T> {
    pub(crate) b1: T,
    pub(crate) b2: T,
    pub(crate) one_b1: T,
    pub(crate) one_b2: T,
    pub(crate) wd: T,
    pub(crate) decay: T,
    pub(crate) bc2: T,
    pub(crate) eps: T,
    pub(crate) step: T,
    pub(crate) l2: bool,
    pub(crate) decoupled: bool,
}

/// Elements per parallel piece of an update.
const CHUNK: usize = 1 << 15;

/// Runs `f` over matching pieces of the parameter, the gradient and up to three state
/// buffers (each either as long as the parameter or empty: its pieces are empty then), in
/// parallel when large.
pub(crate) fn chunked4<T: Send + Sync>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    x: &mut [T],
    f: impl Fn(&mut [T], &[T], &mut [T], &mut [T], &mut [T]) + Sync + Send,
) {
    use rayon::prelude::*;
    let n = p.len();
    if n >= 4 * CHUNK && crate::cpu::threads() > 1 {
        let pieces = n.div_ceil(CHUNK);
        fn split<T>(b: &mut [T], pieces: usize) -> Vec<&mut [T]> {
            if b.is_empty() {
                (0..pieces).map(|_| <&mut [T]>::default()).collect()
            } else {
                b.chunks_mut(CHUNK).collect()
            }
        }
        let states: Vec<_> = split(m, pieces)
            .into_iter()
            .zip(split(v, pieces))
            .zip(split(x, pieces))
            .collect();
        p.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .zip(states.into_par_iter())
            .for_each(|((p, g), ((m, v), x))| f(p, g, m, v, x));
    } else {
        f(p, g, m, v, x);
    }
}

multiversion! {
    /// One piece of an Adam step (see `crate::optim::adam_step`); the element loop has no
    /// branch that changes from element to element, so it vectorises.
    fn adam_chunk<T: Float>(
        ps: &mut [T],
        gs: &[T],
        ms: &mut [T],
        vs: &mut [T],
        xs: Option<&mut [T]>,
        k: &AdamConsts<T>
    ) {
    let n = ps.len();
    let (gs, ms, vs) = (&gs[..n], &mut ms[..n], &mut vs[..n]);
    let update = |pi: T, gi: T, m: &mut T, v: &mut T| -> (T, T) {
        let mut pi = pi;
        let mut gi = gi;
        if k.decoupled {
            pi = pi * k.decay;
        }
        if k.l2 {
            gi = gi + k.wd * pi;
        }
        let mi = *m * k.b1 + k.one_b1 * gi;
        let vi = *v * k.b2 + k.one_b2 * (gi * gi);
        *m = mi;
        *v = vi;
        (pi, vi)
    };
    match xs {
        Some(xs) => {
            let xs = &mut xs[..n];
            for i in 0..n {
                let (pi, vi) = update(ps[i], gs[i], &mut ms[i], &mut vs[i]);
                // (NaN wins, as `maximum`)
                let mx = if vi > xs[i] || vi.is_nan() { vi } else { xs[i] };
                xs[i] = mx;
                ps[i] = pi - k.step * (ms[i] / (mx.sqrt() / k.bc2 + k.eps));
            }
        }
        None => {
            for i in 0..n {
                let (pi, vi) = update(ps[i], gs[i], &mut ms[i], &mut vs[i]);
                ps[i] = pi - k.step * (ms[i] / (vi.sqrt() / k.bc2 + k.eps));
            }
        }
    }
}
}

/// SGD's per-element constants, in the parameter's dtype.
pub(crate) struct SgdConsts<T> {
    pub(crate) lr: T,
    pub(crate) wd: T,
    pub(crate) momentum: T,
    /// The factor on the gradient added to the buffer (dampening; 1 on the first step).
    pub(crate) keep: T,
    pub(crate) dampened: bool,
    pub(crate) l2: bool,
    pub(crate) nesterov: bool,
}

multiversion! {
    /// One piece of an SGD step (see `crate::optim::sgd_step`).
    fn sgd_chunk<T: Float>(ps: &mut [T], gs: &[T], bs: Option<&mut [T]>, k: &SgdConsts<T>) {
        let n = ps.len();
        let gs = &gs[..n];
        let grad = |i: usize, p: T| if k.l2 { gs[i] + k.wd * p } else { gs[i] };
        match bs {
            Some(bs) => {
                let bs = &mut bs[..n];
                for i in 0..n {
                    let gi = grad(i, ps[i]);
                    let add = if k.dampened { gi * k.keep } else { gi };
                    let buf = bs[i] * k.momentum + add;
                    bs[i] = buf;
                    let d = if k.nesterov { gi + k.momentum * buf } else { buf };
                    ps[i] = ps[i] - k.lr * d;
                }
            }
            None => {
                for i in 0..n {
                    let gi = grad(i, ps[i]);
                    ps[i] = ps[i] - k.lr * gi;
                }
            }
        }
    }
}

/// RMSprop's per-element constants, in the parameter's dtype.
pub(crate) struct RmspropConsts<T> {
    pub(crate) lr: T,
    pub(crate) alpha: T,
    pub(crate) one_alpha: T,
    pub(crate) eps: T,
    pub(crate) wd: T,
    pub(crate) momentum: T,
    pub(crate) l2: bool,
}

multiversion! {
    /// One piece of an RMSprop step (see `crate::optim::rmsprop_step`): the momentum buffer
    /// and the gradient's running mean when given.
    fn rmsprop_chunk<T: Float>(
        ps: &mut [T],
        gs: &[T],
        sq: &mut [T],
        buf: Option<&mut [T]>,
        ga: Option<&mut [T]>,
        k: &RmspropConsts<T>
    ) {
        let n = ps.len();
        let (gs, sq) = (&gs[..n], &mut sq[..n]);
        // one element: g (with L2 decay), E[g^2] (and E[g]), the denominator, the buffer;
        // each loop below passes constant `Some`/`None`s, so its body has no branch
        #[inline(always)]
        fn one<T: Float>(
            k: &RmspropConsts<T>,
            p: &mut T,
            g: T,
            sq: &mut T,
            buf: Option<&mut T>,
            ga: Option<&mut T>,
        ) {
            let g = if k.l2 { g + k.wd * *p } else { g };
            let s = *sq * k.alpha + k.one_alpha * (g * g);
            *sq = s;
            let avg = match ga {
                Some(ga) => {
                    let a = *ga * k.alpha + k.one_alpha * g;
                    *ga = a;
                    (s - a * a).sqrt() + k.eps
                }
                None => s.sqrt() + k.eps,
            };
            match buf {
                Some(b) => {
                    let m = *b * k.momentum + g / avg;
                    *b = m;
                    *p = *p - k.lr * m;
                }
                None => *p = *p - k.lr * (g / avg),
            }
        }
        match (buf, ga) {
            (None, None) => {
                for i in 0..n {
                    one(k, &mut ps[i], gs[i], &mut sq[i], None, None);
                }
            }
            (Some(b), None) => {
                let b = &mut b[..n];
                for i in 0..n {
                    one(k, &mut ps[i], gs[i], &mut sq[i], Some(&mut b[i]), None);
                }
            }
            (None, Some(a)) => {
                let a = &mut a[..n];
                for i in 0..n {
                    one(k, &mut ps[i], gs[i], &mut sq[i], None, Some(&mut a[i]));
                }
            }
            (Some(b), Some(a)) => {
                let (b, a) = (&mut b[..n], &mut a[..n]);
                for i in 0..n {
                    one(k, &mut ps[i], gs[i], &mut sq[i], Some(&mut b[i]), Some(&mut a[i]));
                }
            }
        }
    }
}

/// Adagrad's per-element constants, in the parameter's dtype.
pub(crate) struct AdagradConsts<T> {
    /// The step's decayed learning rate.
    pub(crate) lr: T,
    pub(crate) eps: T,
    pub(crate) wd: T,
    pub(crate) l2: bool,
}

multiversion! {
    /// One piece of an Adagrad step (see `crate::optim::adagrad_step`).
    fn adagrad_chunk<T: Float>(ps: &mut [T], gs: &[T], sum: &mut [T], k: &AdagradConsts<T>) {
        let n = ps.len();
        let (gs, sum) = (&gs[..n], &mut sum[..n]);
        for i in 0..n {
            let gi = if k.l2 { gs[i] + k.wd * ps[i] } else { gs[i] };
            let s = sum[i] + gi * gi;
            sum[i] = s;
            ps[i] = ps[i] - k.lr * (gi / (s.sqrt() + k.eps));
        }
    }
}

/// Adadelta's per-element constants, in the parameter's dtype.
pub(crate) struct AdadeltaConsts<T> {
    pub(crate) lr: T,
    pub(crate) rho: T,
    pub(crate) one_rho: T,
    pub(crate) eps: T,
    pub(crate) wd: T,
    pub(crate) l2: bool,
}

multiversion! {
    /// One piece of an Adadelta step (see `crate::optim::adadelta_step`).
    fn adadelta_chunk<T: Float>(
        ps: &mut [T],
        gs: &[T],
        sq: &mut [T],
        acc: &mut [T],
        k: &AdadeltaConsts<T>
    ) {
        let n = ps.len();
        let (gs, sq, acc) = (&gs[..n], &mut sq[..n], &mut acc[..n]);
        for i in 0..n {
            let gi = if k.l2 { gs[i] + k.wd * ps[i] } else { gs[i] };
            let s = sq[i] * k.rho + k.one_rho * (gi * gi);
            sq[i] = s;
            let delta = (acc[i] + k.eps).sqrt() / (s + k.eps).sqrt() * gi;
            acc[i] = acc[i] * k.rho + k.one_rho * (delta * delta);
            ps[i] = ps[i] - k.lr * delta;
        }
    }
}
