//! Views follow in-place writes, as PyTorch's do.
//!
//! A recorded in-place write through one handle changes the memory other handles over the same
//! buffer read: the tensor a view was taken from (`v = x[:2]; v.mul_(3)` changes `x`), or a
//! view taken before the tensor it views was written (`v = x[1:3]; x.mul_(2)` changes `v`).
//! Their tape state no longer describes what they hold. Every handle a view op made or viewed
//! is remembered by its buffer (weakly); after such a write, each one that overlaps the written
//! elements gets a successor (see [`Tensor::current`]): a handle over the same memory whose tape
//! state is "the old value with the written elements taken from the writer", built from the
//! engine's own recorded ops (a flat `index_select` of the written handle and a `where` over the
//! old value), so gradients flow to both the old value and whatever the write computed from.
//! Handles not made by view ops (`detach()`) are not followed: using them on a tape after such
//! a write is refused, as before.

use super::key::GradKey;
use crate::error::Result;
use crate::layout::for_each_run;
use crate::ops::where_cond;
use crate::storage::Footprint;
use crate::tensor::Tensor;

/// Rebases the remembered handles over `next`'s buffer that overlap its elements, after a
/// recorded write through `written` that continues as `next`.
pub(crate) fn rebase_views(written: &Tensor, next: &Tensor) -> Result<()> {
    let storage = next.storage();
    if !storage.has_views() || !next.dtype().is_float() {
        return Ok(());
    }
    let handles = storage.views();
    if handles.iter().any(|h| h.same(written)) {
        // the handle the writer continues as stands for the same view
        storage.register_views(&[next]);
    }
    let at = Footprint::of(next.layout());
    let (lo, hi) = next.layout().storage_span();
    // storage position -> index of the written element there (-1: not written)
    let mut map: Option<Vec<i64>> = None;
    let mut flat: Option<Tensor> = None;
    for h in handles {
        if h.same(written)
            || h.same(next)
            || h.is_rebased()
            || h.dtype() != next.dtype()
            || h.numel() == 0
            || !Footprint::of(h.layout()).may_overlap(&at)
        {
            continue;
        }
        let map = map.get_or_insert_with(|| {
            let mut m = vec![-1i64; hi - lo];
            let mut j = 0i64;
            for_each_run(next.layout(), |base, stride, len| {
                for k in 0..len {
                    let p = (base as isize + k as isize * stride) as usize;
                    m[p - lo] = j;
                    j += 1;
                }
            });
            m
        });
        let n = h.numel();
        let mut idx = Vec::with_capacity(n);
        let mut mask = Vec::with_capacity(n);
        let mut covered = 0usize;
        for_each_run(h.layout(), |base, stride, len| {
            for k in 0..len {
                let p = (base as isize + k as isize * stride) as usize;
                let j = if (lo..hi).contains(&p) {
                    map[p - lo]
                } else {
                    -1
                };
                mask.push(j >= 0);
                idx.push(j.max(0));
                covered += usize::from(j >= 0);
            }
        });
        if covered == 0 {
            continue;
        }
        if crate::graph::is_tracing() && crate::graph::trace::held_only_by_trace(&h, 1) {
            // (a view only the trace still holds, for a gradient rule: left as it was, so a
            // rule reading it after the write is refused, as on the tape)
            continue;
        }
        let device = next.device();
        let src = match &flat {
            Some(f) => f.clone(),
            None => flat.insert(next.reshape(&[next.numel()])?).clone(),
        };
        let idx = Tensor::from_vec(idx, &[n])?.to_device(device)?;
        let taken = src.index_select(0, &idx)?.reshape(h.shape())?;
        let value = if covered == n {
            taken
        } else {
            // `h`'s own tape state over what it holds now (its unwritten elements are as
            // they were)
            let old = h.continued_as(&h);
            let mask = Tensor::from_vec(mask, h.shape())?.to_device(device)?;
            where_cond(&mask, &taken, &old)?
        };
        let succ = h.continued_as(&value);
        move_retained(&h, &succ)?;
        storage.register_views(&[&succ]);
        h.set_successor(succ);
    }
    Ok(())
}

/// Moves `retain_grad` from `old` to `next`, the value an in-place write through `old`
/// continues as: PyTorch's retained `.grad` is the gradient of the newest value of the
/// tensor. Callbacks (tensor hooks) stay with the value they were registered on.
pub(crate) fn move_retained(old: &Tensor, next: &Tensor) -> Result<()> {
    if !old.0.maybe_tracked() {
        return Ok(());
    }
    let infos = old.0.meta().infos.to_vec();
    for info in infos {
        if info.func.is_attach_record() {
            continue;
        }
        let retained = {
            let mut st = info.func.state();
            match st.slots[info.idx].attached.as_mut() {
                Some(a) if a.accumulate => {
                    a.accumulate = false;
                    true
                }
                _ => false,
            }
        };
        if let (true, Some(key)) = (retained, info.key().upgrade()) {
            GradKey(key).attach_with(next, None, true)?;
        }
    }
    Ok(())
}

impl Tensor {
    /// Whether a view op made this handle or took a view of it (so writes through it rebase
    /// the other handles over its memory).
    pub(crate) fn is_registered_view(&self) -> bool {
        let storage = self.storage();
        storage.has_views() && storage.views().iter().any(|h| h.same(self))
    }
}
