//! Ops that move or select data: reshape, permute, broadcast, slicing, concat, gather.
//! Reshape of contiguous data, permute, broadcast and slicing are views (no copy).

use super::{same_dtype, sum_to_shape, Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::{apply, apply1};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{
    broadcast_shapes, checked_numel, normalize_axes, normalize_axis, Layout, SliceSpec,
};
use crate::op::{MovementOp, Op};
use crate::tensor::Tensor;

/// A view with `shape` when only size-1 axes differ (expand_dims / squeeze of any layout).
fn unit_axes_view(l: &Layout, shape: &[usize]) -> Option<Layout> {
    let old: Vec<(usize, isize)> = l
        .shape()
        .iter()
        .copied()
        .zip(l.strides().iter().copied())
        .filter(|(n, _)| *n != 1)
        .collect();
    let new_big: Vec<usize> = shape.iter().copied().filter(|&n| n != 1).collect();
    if old.len() != new_big.len() || old.iter().zip(&new_big).any(|((a, _), b)| a != b) {
        return None;
    }
    let mut it = old.iter();
    let strides: Vec<isize> = shape
        .iter()
        .map(|&n| {
            if n == 1 {
                0
            } else {
                it.next().map(|p| p.1).unwrap_or(0)
            }
        })
        .collect();
    Some(Layout::new(shape, &strides, l.offset()))
}

impl Family for MovementOp {
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let name = self.name();
        let x = inputs[0];
        Ok(match self {
            MovementOp::ToDevice { to, .. } => x.to_device(*to)?,
            MovementOp::Reshape(shape) => {
                if checked_numel(shape, x.dtype().size_in_bytes()) != Some(x.numel()) {
                    return Err(Error::shape(
                        name,
                        format!(
                            "cannot reshape a tensor of shape {:?} ({} elements) into {shape:?}",
                            x.shape(),
                            x.numel()
                        ),
                    ));
                }
                // the same shape keeps the layout as it is (strides of size-1 axes included)
                let same = (shape.as_slice() == x.shape()).then(|| x.layout().clone());
                match same
                    .or_else(|| x.layout().reshape(shape))
                    .or_else(|| unit_axes_view(x.layout(), shape))
                {
                    Some(l) => x.view(l),
                    None => Tensor::from_storage(
                        on_device!(name, inputs, |b, d| b.cast(d[0], x.layout(), x.dtype()))?,
                        shape,
                    ),
                }
            }
            MovementOp::Permute(perm) => x.view(x.layout().permute(perm)),
            MovementOp::BroadcastTo(shape) => x.view(x.layout().broadcast_to(shape)),
            MovementOp::Slice(specs) => x.view(x.layout().slice(specs)),
            MovementOp::Diagonal { offset, dim1, dim2 } => {
                x.view(x.layout().diagonal(*offset, *dim1, *dim2))
            }
            MovementOp::UnfoldView { dim, size, step } => {
                x.view(x.layout().unfold(*dim, *size, *step))
            }
            MovementOp::AsStrided {
                shape,
                strides,
                offset,
                ..
            } => {
                let l = Layout::new(shape, strides, *offset);
                check_in_storage(name, x, &l)?;
                x.view(l)
            }
            MovementOp::SliceGrad { shape, specs } => Tensor::from_storage(
                on_device!(name, inputs, |b, d| {
                    b.slice_grad(d[0], x.layout(), x.dtype(), shape, specs)
                })?,
                shape,
            ),
            MovementOp::SetSlice(specs) => {
                let v = inputs[1];
                same_dtype(name, inputs)?;
                let region = x.layout().slice(specs);
                let ok = broadcast_shapes(name, v.shape(), region.shape())
                    .map(|s| s.as_slice() == region.shape())
                    .unwrap_or(false);
                if !ok {
                    return Err(Error::shape(
                        name,
                        format!(
                            "cannot assign a value of shape {:?} to a region of shape {:?}",
                            v.shape(),
                            region.shape()
                        ),
                    ));
                }
                let lv = v.layout().broadcast_to(region.shape());
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.set_slice(d[0], x.layout(), x.dtype(), d[1], &lv, specs)
                    })?,
                    x.shape(),
                )
            }
            MovementOp::Concat(axis) => {
                same_dtype(name, inputs)?;
                let mut shape = x.shape().to_vec();
                for t in &inputs[1..] {
                    let ok = t.ndim() == x.ndim()
                        && t.shape()
                            .iter()
                            .zip(x.shape())
                            .enumerate()
                            .all(|(d, (a, b))| d == *axis || a == b);
                    if !ok {
                        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
                        return Err(Error::shape(
                            name,
                            format!("all shapes must match except on axis {axis}, got {shapes:?}"),
                        ));
                    }
                    shape[*axis] = shape[*axis].checked_add(t.shape()[*axis]).ok_or_else(|| {
                        Error::shape(name, format!("the joined axis {axis} would be too long"))
                    })?;
                }
                crate::layout::checked_size(name, &shape, x.dtype().size_in_bytes())?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        let parts: Vec<_> = d
                            .iter()
                            .zip(inputs)
                            .map(|(d, t)| (*d, t.layout()))
                            .collect();
                        b.concat(&parts, x.dtype(), *axis, &shape)
                    })?,
                    &shape,
                )
            }
            MovementOp::Gather(axis) => {
                let idx = inputs[1];
                check_index(name, x, idx, *axis)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.gather(d[0], x.layout(), d[1], idx.layout(), *axis)
                    })?,
                    idx.shape(),
                )
            }
            MovementOp::ScatterAdd { axis, shape } => {
                let idx = inputs[1];
                if x.shape() != idx.shape() {
                    return Err(Error::shape(
                        name,
                        format!(
                            "source {:?} and indices {:?} must have one shape",
                            x.shape(),
                            idx.shape()
                        ),
                    ));
                }
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.scatter_add(d[0], x.layout(), d[1], idx.layout(), *axis, shape)
                    })?,
                    shape,
                )
            }
            MovementOp::Argsort { axis, descending } => argsort(x, *axis, *descending)?,
        })
    }

    fn saves(&self, _needs: &[bool]) -> SaveMask {
        let mut m = SaveMask::default();
        match self {
            // the indices
            MovementOp::Gather(_) | MovementOp::ScatterAdd { .. } => m.input(1, true),
            // shapes only
            MovementOp::ToDevice { .. }
            | MovementOp::Reshape(_)
            | MovementOp::Permute(_)
            | MovementOp::BroadcastTo(_)
            | MovementOp::Slice(_)
            | MovementOp::Diagonal { .. }
            | MovementOp::UnfoldView { .. }
            | MovementOp::AsStrided { .. }
            | MovementOp::SliceGrad { .. }
            | MovementOp::SetSlice(_)
            | MovementOp::Concat(_)
            | MovementOp::Argsort { .. } => {}
        }
        m
    }

    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
        let shape = ctx.shape(0);
        let movement = |op: MovementOp, inputs: &[&Tensor]| apply1(&Op::Movement(op), inputs);
        Ok(match self {
            MovementOp::ToDevice { from, to } => vec![Some(movement(
                MovementOp::ToDevice {
                    from: *to,
                    to: *from,
                },
                &[dy],
            )?)],
            MovementOp::Reshape(_) => vec![Some(dy.reshape(shape)?)],
            MovementOp::Permute(perm) => {
                let mut inv = vec![0isize; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inv[p] = i as isize;
                }
                vec![Some(dy.permute(&inv)?)]
            }
            MovementOp::BroadcastTo(_) => vec![Some(sum_to_shape(dy, shape)?)],
            MovementOp::Slice(specs) => vec![Some(movement(
                MovementOp::SliceGrad {
                    shape: shape.into(),
                    specs: specs.as_slice().into(),
                },
                &[dy],
            )?)],
            MovementOp::Diagonal { offset, dim1, dim2 } => {
                let base = Layout::contiguous(shape);
                let out = base.diagonal(*offset, *dim1, *dim2);
                vec![Some(strided_view_grad(dy, &base, &out)?)]
            }
            MovementOp::UnfoldView { dim, size, step } => {
                let base = Layout::contiguous(shape);
                let out = base.unfold(*dim, *size, *step);
                vec![Some(strided_view_grad(dy, &base, &out)?)]
            }
            MovementOp::AsStrided {
                shape: out_shape,
                strides,
                offset,
                base_strides,
                base_offset,
            } => {
                let base = Layout::new(shape, base_strides, *base_offset);
                let out = Layout::new(out_shape, strides, *offset);
                vec![Some(strided_view_grad(dy, &base, &out)?)]
            }
            MovementOp::SliceGrad { specs, .. } => {
                vec![Some(movement(MovementOp::Slice(specs.to_vec()), &[dy])?)]
            }
            MovementOp::SetSlice(specs) => vec![
                ctx.need(0, || {
                    movement(
                        MovementOp::SetSlice(specs.clone()),
                        &[dy, &dy.scalar_like(0.0)],
                    )
                })?,
                ctx.need(1, || {
                    sum_to_shape(
                        &movement(MovementOp::Slice(specs.clone()), &[dy])?,
                        ctx.shape(1),
                    )
                })?,
            ],
            MovementOp::Concat(axis) => {
                let mut start = 0usize;
                let mut out = Vec::with_capacity(ctx.n_inputs());
                for i in 0..ctx.n_inputs() {
                    let len = ctx.shape(i)[*axis];
                    out.push(ctx.need(i, || dy.narrow(*axis, start, len))?);
                    start += len;
                }
                out
            }
            MovementOp::Gather(axis) => {
                let idx = &ctx.input(1)?;
                vec![
                    Some(movement(
                        MovementOp::ScatterAdd {
                            axis: *axis,
                            shape: shape.to_vec(),
                        },
                        &[dy, idx],
                    )?),
                    None,
                ]
            }
            MovementOp::ScatterAdd { axis, .. } => {
                let idx = &ctx.input(1)?;
                vec![Some(movement(MovementOp::Gather(*axis), &[dy, idx])?), None]
            }
            MovementOp::Argsort { .. } => return Err(super::not_differentiable(self.name())),
        })
    }
}

/// A `layout` over `x`'s buffer must stay inside it.
fn check_in_storage(op: &str, x: &Tensor, layout: &Layout) -> Result<()> {
    let len = x.storage().bytes() / x.dtype().size_in_bytes().max(1);
    if layout.numel() == 0 {
        return Ok(());
    }
    let (lo, hi) = layout.storage_span();
    if layout.strides().iter().any(|&s| s < 0) || hi > len || lo > hi {
        return Err(Error::invalid(
            op,
            format!(
                "sizes {:?}, strides {:?} and storage offset {} reach outside the tensor's \
                 storage of {len} elements",
                layout.shape(),
                layout.strides(),
                layout.offset()
            ),
        ));
    }
    Ok(())
}

/// The gradient of a strided view `out` of an input of layout `base` (over one buffer): the
/// gradient of each of the view's elements goes to the input elements at its position in
/// memory (added where the view's elements overlap, shared equally among input elements that
/// overlap), built from recorded ops (a scatter-add and a gather), so it differentiates again.
fn strided_view_grad(dy: &Tensor, base: &Layout, out: &Layout) -> Result<Tensor> {
    let in_shape = base.shape();
    let n = out.numel();
    let m = base.numel();
    if n == 0 || m == 0 {
        return Tensor::full_on(in_shape, 0.0, dy.dtype(), dy.device());
    }
    let po = out.positions();
    let flat = dy.reshape(&[n])?;
    let o = base.offset() as isize;
    if base.is_contiguous() && po.iter().all(|&p| p >= o && p < o + m as isize) {
        let idx: Vec<i64> = po.iter().map(|&p| (p - o) as i64).collect();
        let idx = Tensor::from_vec(idx, &[n])?;
        return flat.scatter_add_to(&idx, 0, &[m])?.reshape(in_shape);
    }
    let pi = base.positions();
    let lo = *po.iter().chain(&pi).min().unwrap_or(&0);
    let hi = *po.iter().chain(&pi).max().unwrap_or(&0);
    let span = (hi - lo + 1) as usize;
    let idx: Vec<i64> = po.iter().map(|&p| (p - lo) as i64).collect();
    let in_storage = flat.scatter_add_to(&Tensor::from_vec(idx, &[n])?, 0, &[span])?;
    let mut count = vec![0u32; span];
    for &p in &pi {
        count[(p - lo) as usize] += 1;
    }
    let take: Vec<i64> = pi.iter().map(|&p| (p - lo) as i64).collect();
    let shared: Vec<f64> = pi
        .iter()
        .map(|&p| count[(p - lo) as usize] as f64)
        .collect();
    let mut g = in_storage.index_select(0, &Tensor::from_vec(take, &[m])?)?;
    if shared.iter().any(|&c| c > 1.0) {
        let c = Tensor::from_vec(shared, &[m])?
            .astype(dy.dtype())?
            .to_device(dy.device())?;
        g = g.div(&c)?;
    }
    g.reshape(in_shape)
}

/// [`MovementOp::Argsort`]: each line along `axis` sorted on the host, stably, with NaN
/// above every number; int64 positions moved to the input's device.
fn argsort(x: &Tensor, axis: usize, descending: bool) -> Result<Tensor> {
    use std::cmp::Ordering;
    const OP: &str = "argsort";
    if axis >= x.ndim().max(1) {
        return Err(Error::index(
            OP,
            format!("axis {axis} is out of range for shape {:?}", x.shape()),
        ));
    }
    let shape = x.shape().to_vec();
    let (outer, n, inner) = if shape.is_empty() {
        (1, 1, 1)
    } else {
        (
            shape[..axis].iter().product::<usize>(),
            shape[axis],
            shape[axis + 1..].iter().product::<usize>(),
        )
    };
    // (int64 keys compared as integers: above 2^53 a float64 would merge neighbours)
    fn lines<K: Copy + Send + Sync>(
        keys: &[K],
        outer: usize,
        n: usize,
        inner: usize,
        cmp: impl Fn(K, K) -> Ordering + Sync,
    ) -> Vec<i64> {
        let mut out = vec![0i64; outer * n * inner];
        let sort_line = |line: usize, order: &mut Vec<usize>| {
            let (o, i) = (line / inner.max(1), line % inner.max(1));
            let base = o * n * inner + i;
            order.clear();
            order.extend(0..n);
            order.sort_by(|&a, &b| cmp(keys[base + a * inner], keys[base + b * inner]));
            order.iter().map(|&k| k as i64).collect::<Vec<i64>>()
        };
        let n_lines = outer * inner;
        let sorted: Vec<Vec<i64>> = if n_lines * n >= 1 << 15 && n_lines > 1 {
            use rayon::prelude::*;
            (0..n_lines)
                .into_par_iter()
                .map_init(Vec::new, |order, line| sort_line(line, order))
                .collect()
        } else {
            let mut order = Vec::new();
            (0..n_lines)
                .map(|line| sort_line(line, &mut order))
                .collect()
        };
        for (line, pos) in sorted.iter().enumerate() {
            let (o, i) = (line / inner.max(1), line % inner.max(1));
            let base = o * n * inner + i;
            for (j, &p) in pos.iter().enumerate() {
                out[base + j * inner] = p;
            }
        }
        out
    }
    let idx = if x.dtype() == DType::I64 {
        let keys = {
            let _g = crate::autograd::no_grad();
            x.detach().to_vec::<i64>()?
        };
        lines(&keys, outer, n, inner, |a: i64, b: i64| {
            if descending {
                b.cmp(&a)
            } else {
                a.cmp(&b)
            }
        })
    } else {
        let keys = x.to_vec_f64()?;
        // NaN above everything; -0.0 equals 0.0
        let up = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        };
        lines(&keys, outer, n, inner, |a: f64, b: f64| {
            if descending {
                up(b, a)
            } else {
                up(a, b)
            }
        })
    };
    Tensor::from_cpu(crate::storage::CpuData::I64(idx), &shape).to_device(x.device())
}

/// `idx` itself after an `IndexError` naming `op` for any entry outside `-n..n`. Negative
/// entries stay as they are: the gather and scatter-add kernels count them from the end. (A
/// rewritten copy would be a new tensor made from values read on the host, which a trace
/// records as a constant: every later run of the graph would use the indices of the run that
/// traced it.)
pub(crate) fn wrap_indices(
    op: &str,
    idx: &Tensor,
    n: usize,
    axis: usize,
    shape: &[usize],
) -> Result<Tensor> {
    let v = idx.to_vec::<i64>()?;
    let n = n as i64;
    if let Some(&bad) = v.iter().find(|&&i| i < -n || i >= n) {
        return Err(Error::index(
            op,
            format!("index {bad} is out of bounds for axis {axis} with size {n} (shape {shape:?})"),
        ));
    }
    Ok(idx.clone())
}

fn check_index(op: &str, x: &Tensor, idx: &Tensor, axis: usize) -> Result<()> {
    if idx.dtype() != DType::I64 {
        return Err(Error::dtype(
            op,
            format!(
                "indices must be int64, got {} {:?}",
                idx.dtype(),
                idx.shape()
            ),
        ));
    }
    let ok = idx.ndim() == x.ndim()
        && idx
            .shape()
            .iter()
            .zip(x.shape())
            .enumerate()
            .all(|(d, (i, n))| d == axis || i <= n);
    if !ok {
        return Err(Error::shape(
            op,
            format!(
                "indices of shape {:?} do not fit a tensor of shape {:?} along axis {axis}",
                idx.shape(),
                x.shape()
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// Same data, another shape (a view when the layout allows, else a copy).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        apply1(&Op::Movement(MovementOp::Reshape(shape.to_vec())), &[self])
    }

    /// A new view of the whole of this tensor, with its shape (recorded as a reshape, so
    /// gradients flow through it): what a view op that changes nothing gives, as PyTorch's
    /// `x.view(x.shape)` is a new tensor viewing `x`.
    pub fn alias(&self) -> Result<Tensor> {
        apply1(
            &Op::Movement(MovementOp::Reshape(self.shape().to_vec())),
            &[self],
        )
    }

    /// [`Tensor::reshape`] where one entry may be `-1` (inferred).
    pub fn reshape_infer(&self, shape: &[isize]) -> Result<Tensor> {
        let bad = || {
            Error::shape(
                "reshape",
                format!(
                    "cannot reshape a tensor of shape {:?} ({} elements) into {shape:?}",
                    self.shape(),
                    self.numel()
                ),
            )
        };
        let unknown = shape.iter().filter(|&&d| d < 0).count();
        if unknown > 1 || shape.iter().any(|&d| d < -1) {
            return Err(bad());
        }
        // (a product that overflows cannot equal this tensor's element count)
        let known = shape
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
            .ok_or_else(bad)?;
        let resolved: Vec<usize> = if unknown == 1 {
            if known == 0 || self.numel() % known != 0 {
                return Err(bad());
            }
            shape
                .iter()
                .map(|&d| {
                    if d < 0 {
                        self.numel() / known
                    } else {
                        d as usize
                    }
                })
                .collect()
        } else {
            shape.iter().map(|&d| d as usize).collect()
        };
        self.reshape(&resolved)
    }

    /// Reorders the axes (a view).
    pub fn permute(&self, perm: &[isize]) -> Result<Tensor> {
        let n = self.ndim();
        let bad = || {
            Error::invalid(
                "permute",
                format!(
                    "{perm:?} is not a permutation of the {n} axes of shape {:?}",
                    self.shape()
                ),
            )
        };
        if perm.len() != n {
            return Err(bad());
        }
        let p: Vec<usize> = perm
            .iter()
            .map(|&a| normalize_axis("permute", a, n))
            .collect::<Result<_>>()?;
        let mut seen = vec![false; n];
        for &a in &p {
            if std::mem::replace(&mut seen[a], true) {
                return Err(bad());
            }
        }
        apply1(&Op::Movement(MovementOp::Permute(p)), &[self])
    }

    /// Swaps two axes (a view).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let n = self.ndim();
        if n == 0 && [a, b].iter().all(|&x| x == 0 || x == -1) {
            return self.permute(&[]); // a 0-d tensor takes axes 0 and -1, as PyTorch's
        }
        let (a, b) = (
            normalize_axis("transpose", a, n)?,
            normalize_axis("transpose", b, n)?,
        );
        let mut perm: Vec<isize> = (0..n as isize).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Reverses the axes (a view).
    pub fn t(&self) -> Result<Tensor> {
        let perm: Vec<isize> = (0..self.ndim() as isize).rev().collect();
        self.permute(&perm)
    }

    /// Broadcasts to `shape` with numpy rules (a view).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let ok = shape.len() >= self.ndim()
            && broadcast_shapes("broadcast_to", self.shape(), shape)
                .map(|s| s.as_slice() == shape)
                .unwrap_or(false);
        if !ok {
            return Err(Error::shape(
                "broadcast_to",
                format!("cannot broadcast shape {:?} to {shape:?}", self.shape()),
            ));
        }
        apply1(
            &Op::Movement(MovementOp::BroadcastTo(shape.to_vec())),
            &[self],
        )
    }

    /// Inserts a size-1 axis at `axis` (a view).
    pub fn expand_dims(&self, axis: isize) -> Result<Tensor> {
        let a = normalize_axis("expand_dims", axis, self.ndim() + 1)?;
        let mut shape = self.shape().to_vec();
        shape.insert(a, 1);
        self.reshape(&shape)
    }

    /// Removes size-1 axes: those listed (a listed axis of another size stays, as in
    /// PyTorch), or all of them.
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Result<Tensor> {
        let shape = self.shape();
        let remove: Vec<usize> = match axes {
            None => (0..shape.len()).filter(|&d| shape[d] == 1).collect(),
            Some(list) => normalize_axes("squeeze", Some(list), shape.len())?
                .into_iter()
                .filter(|&d| shape[d] == 1)
                .collect(),
        };
        let new: Vec<usize> = (0..shape.len())
            .filter(|d| !remove.contains(d))
            .map(|d| shape[d])
            .collect();
        self.reshape(&new)
    }

    /// Basic indexing: one spec per leading axis. Ranges are `start, stop, step` as returned by
    /// Python's `slice.indices`; indices may be negative (counted from the end).
    pub fn slice(&self, specs: &[SliceSpec]) -> Result<Tensor> {
        let norm = self.normalize_specs(specs)?;
        apply1(&Op::Movement(MovementOp::Slice(norm)), &[self])
    }

    /// `self` with the region `specs` selects replaced by `value` (broadcast, cast to this
    /// dtype): the functional form of `x[specs] = value`, differentiable in both.
    pub fn set_slice(&self, specs: &[SliceSpec], value: &Tensor) -> Result<Tensor> {
        let norm = self.normalize_specs(specs)?;
        let value = value.astype(self.dtype())?;
        apply1(&Op::Movement(MovementOp::SetSlice(norm)), &[self, &value])
    }

    fn normalize_specs(&self, specs: &[SliceSpec]) -> Result<Vec<SliceSpec>> {
        if specs.len() > self.ndim() {
            return Err(Error::index(
                "getitem",
                format!(
                    "too many indices ({}) for a tensor of shape {:?}",
                    specs.len(),
                    self.shape()
                ),
            ));
        }
        let mut norm = Vec::with_capacity(specs.len());
        for (d, spec) in specs.iter().enumerate() {
            let n = self.shape()[d] as isize;
            norm.push(match *spec {
                SliceSpec::Index(i) => {
                    let j = if i < 0 { i + n } else { i };
                    if j < 0 || j >= n {
                        return Err(Error::index(
                            "getitem",
                            format!("index {i} is out of bounds for axis {d} with size {n} (shape {:?})", self.shape()),
                        ));
                    }
                    SliceSpec::Index(j)
                }
                SliceSpec::Range { start, stop, step } => {
                    if step == 0 {
                        return Err(Error::invalid("getitem", "slice step cannot be zero"));
                    }
                    let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
                    SliceSpec::Range { start: start.clamp(lo, hi), stop: stop.clamp(lo, hi), step }
                }
            });
        }
        Ok(norm)
    }

    /// The diagonal `offset` of the planes of axes `dim1` and `dim2` as the last axis (a view,
    /// PyTorch's `diagonal`).
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
        const OP: &str = "diagonal";
        let n = self.ndim();
        if n < 2 {
            return Err(Error::shape(
                OP,
                format!(
                    "the input needs at least 2 axes, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        let (d1, d2) = (normalize_axis(OP, dim1, n)?, normalize_axis(OP, dim2, n)?);
        if d1 == d2 {
            return Err(Error::invalid(
                OP,
                format!("dim1 and dim2 cannot be the same axis, got {dim1} and {dim2}"),
            ));
        }
        apply1(
            &Op::Movement(MovementOp::Diagonal {
                offset,
                dim1: d1,
                dim2: d2,
            }),
            &[self],
        )
    }

    /// The windows of `size` elements `step` apart along `dim`, as a new last axis (a view,
    /// PyTorch's `Tensor.unfold`; a 0-d tensor unfolds as one element).
    pub fn unfold_view(&self, dim: isize, size: usize, step: usize) -> Result<Tensor> {
        const OP: &str = "unfold";
        let d = normalize_axis(OP, dim, self.ndim().max(1))?;
        let len = if self.ndim() == 0 { 1 } else { self.shape()[d] };
        if size > len {
            return Err(Error::invalid(
                OP,
                format!("maximum size for tensor at dimension {d} is {len} but size is {size}"),
            ));
        }
        if step == 0 {
            return Err(Error::invalid(OP, "step must be greater than zero"));
        }
        apply1(
            &Op::Movement(MovementOp::UnfoldView { dim: d, size, step }),
            &[self],
        )
    }

    /// The view of this tensor's buffer with `shape`, `strides` and storage `offset` (this
    /// tensor's own when `None`): PyTorch's `as_strided`. Differentiable: each element's
    /// gradient goes to the elements of this tensor at its place in memory.
    pub fn as_strided(
        &self,
        shape: &[usize],
        strides: &[isize],
        offset: Option<usize>,
    ) -> Result<Tensor> {
        const OP: &str = "as_strided";
        if shape.len() != strides.len() {
            return Err(Error::invalid(
                OP,
                format!(
                    "mismatch in length of strides and shape: {} sizes, {} strides",
                    shape.len(),
                    strides.len()
                ),
            ));
        }
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::invalid(OP, "negative strides are not supported"));
        }
        crate::layout::checked_size(OP, shape, self.dtype().size_in_bytes())?;
        apply1(
            &Op::Movement(MovementOp::AsStrided {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                offset: offset.unwrap_or(self.layout().offset()),
                base_strides: self.layout().strides().to_vec(),
                base_offset: self.layout().offset(),
            }),
            &[self],
        )
    }

    /// `len` elements along `axis` starting at `start` (a view).
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Result<Tensor> {
        let mut specs: Vec<SliceSpec> = self.shape()[..axis]
            .iter()
            .map(|&n| SliceSpec::Range {
                start: 0,
                stop: n as isize,
                step: 1,
            })
            .collect();
        specs.push(SliceSpec::Range {
            start: start as isize,
            stop: (start + len) as isize,
            step: 1,
        });
        self.slice(&specs)
    }

    /// `take_along_axis`: `out[p] = self[p with axis replaced by idx[p]]`.
    pub fn gather(&self, idx: &Tensor, axis: isize) -> Result<Tensor> {
        let axis = normalize_axis("gather", axis, self.ndim())?;
        apply1(&Op::Movement(MovementOp::Gather(axis)), &[self, idx])
    }

    /// The int64 positions that sort this tensor along `axis`, stably (equal values keep
    /// their order), NaN above every number: last ascending, first descending. The values in
    /// order are `self.gather(&idx, axis)`, which carries the gradient.
    pub fn argsort(&self, axis: isize, descending: bool) -> Result<Tensor> {
        let a = normalize_axis("argsort", axis, self.ndim().max(1))?;
        apply1(
            &Op::Movement(MovementOp::Argsort {
                axis: a,
                descending,
            }),
            &[self],
        )
    }

    /// [`Tensor::gather`] with negative indices counted from the end and every index checked
    /// against the axis length first (an `IndexError` naming `op`).
    pub fn take_along_axis(&self, idx: &Tensor, axis: isize) -> Result<Tensor> {
        let a = normalize_axis("take_along_axis", axis, self.ndim())?;
        check_index("take_along_axis", self, idx, a)?;
        let idx = wrap_indices("take_along_axis", idx, self.shape()[a], a, self.shape())?;
        self.gather(&idx.to_device(self.device())?, a as isize)
    }

    /// Zeros of `shape` with this tensor's entries added at `idx` along `axis` (`idx` has this
    /// tensor's shape): `out[p with axis replaced by idx[p]] += self[p]`, the transpose of
    /// [`Tensor::gather`]. Negative indices count from the end.
    pub fn scatter_add_to(&self, idx: &Tensor, axis: isize, shape: &[usize]) -> Result<Tensor> {
        let a = normalize_axis("scatter_add", axis, shape.len())?;
        if idx.dtype() != DType::I64 || idx.shape() != self.shape() || idx.ndim() != shape.len() {
            return Err(Error::shape(
                "scatter_add",
                format!(
                    "indices ({} {:?}) must be int64 of the source's shape {:?}, with as many \
                     axes as the output {shape:?}",
                    idx.dtype(),
                    idx.shape(),
                    self.shape()
                ),
            ));
        }
        if let Some(d) = (0..shape.len()).find(|&d| d != a && idx.shape()[d] > shape[d]) {
            return Err(Error::shape(
                "scatter_add",
                format!(
                    "indices of shape {:?} do not fit the output {shape:?} on axis {d}",
                    idx.shape()
                ),
            ));
        }
        crate::layout::checked_size("scatter_add", shape, self.dtype().size_in_bytes())?;
        let idx = wrap_indices("scatter_add", idx, shape[a], a, shape)?;
        apply1(
            &Op::Movement(MovementOp::ScatterAdd {
                axis: a,
                shape: shape.to_vec(),
            }),
            &[self, &idx.to_device(self.device())?],
        )
    }

    /// Selects entries `idx` (a 1-D int64 tensor) along `axis` (integer-array indexing);
    /// negative entries count from the end.
    pub fn index_select(&self, axis: isize, idx: &Tensor) -> Result<Tensor> {
        self.select_indices("index_select", axis, idx, true)
    }

    /// [`Tensor::index_select`] with errors naming `op`; `negative: false` refuses negative
    /// entries (an embedding lookup) instead of counting them from the end. The one host
    /// read of the indices is this bounds check.
    pub fn select_indices(
        &self,
        op: &str,
        axis: isize,
        idx: &Tensor,
        negative: bool,
    ) -> Result<Tensor> {
        let a = normalize_axis(op, axis, self.ndim())?;
        if idx.ndim() != 1 || idx.dtype() != DType::I64 {
            return Err(Error::index(
                op,
                format!(
                    "indices must be a 1-D int64 tensor, got {} {:?}",
                    idx.dtype(),
                    idx.shape()
                ),
            ));
        }
        let n = self.shape()[a] as i64;
        let low = if negative { -n } else { 0 };
        if let Some(&bad) = idx.to_vec::<i64>()?.iter().find(|&&v| v < low || v >= n) {
            let msg = if negative {
                format!(
                    "index {bad} is out of bounds for axis {a} with size {n} (shape {:?})",
                    self.shape()
                )
            } else {
                format!(
                    "index {bad} is out of range for {n} rows (shape {:?}; indices must be \
                     in 0..{n})",
                    self.shape()
                )
            };
            return Err(Error::index(op, msg));
        }
        let mut ishape = vec![1usize; self.ndim()];
        ishape[a] = idx.numel();
        let mut full = self.shape().to_vec();
        full[a] = idx.numel();
        let idx = idx
            .to_device(self.device())?
            .reshape(&ishape)?
            .broadcast_to(&full)?;
        self.gather(&idx, a as isize)
    }
}

/// Joins tensors along an existing axis.
pub fn concat(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
    // PyTorch's legacy rule: empty 1-D tensors (`torch.tensor([])`, a list's starting value)
    // are skipped beside tensors of other ranks
    let kept: Vec<&Tensor>;
    let tensors = if tensors.iter().any(|t| t.ndim() != 1)
        && tensors.iter().any(|t| t.ndim() == 1 && t.numel() == 0)
    {
        kept = tensors
            .iter()
            .copied()
            .filter(|t| !(t.ndim() == 1 && t.numel() == 0))
            .collect();
        if kept.is_empty() {
            tensors
        } else {
            &kept[..]
        }
    } else {
        tensors
    };
    let first = tensors
        .first()
        .ok_or_else(|| Error::invalid("concat", "needs at least one tensor"))?;
    let axis = normalize_axis("concat", axis, first.ndim().max(1))?;
    if first.ndim() == 0 {
        return Err(Error::shape(
            "concat",
            "zero-dimensional tensors cannot be concatenated",
        ));
    }
    Ok(apply(&Op::Movement(MovementOp::Concat(axis)), tensors)?.swap_remove(0))
}

/// Joins tensors of one shape along a new axis.
pub fn stack(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| Error::invalid("stack", "needs at least one tensor"))?;
    super::same_dtype("stack", tensors)?;
    if let Some(t) = tensors.iter().find(|t| t.shape() != first.shape()) {
        return Err(Error::shape(
            "stack",
            format!(
                "all tensors must have one shape, got {:?} and {:?}",
                first.shape(),
                t.shape()
            ),
        ));
    }
    let axis = normalize_axis("stack", axis, first.ndim() + 1)? as isize;
    let expanded: Vec<Tensor> = tensors
        .iter()
        .map(|t| t.expand_dims(axis))
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = expanded.iter().collect();
    concat(&refs, axis)
}
