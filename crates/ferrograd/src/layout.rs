//! Shape, strides and offset: how a tensor views its storage.
//!
//! Views (reshape of contiguous data, permute, broadcast, slicing) only build a new `Layout`
//! over the same storage; nothing is copied.

use smallvec::SmallVec;

use crate::error::{Error, Result};

/// Shape storage: inline up to 4 axes (the common case), so making a view
/// allocates nothing and a tensor stays small; more axes spill to the heap.
pub type Dims = SmallVec<[usize; 4]>;
/// Stride storage, inline like [`Dims`].
pub type Strides = SmallVec<[isize; 4]>;

/// A view of a flat buffer: element `idx` lives at `offset + sum(idx[d] * strides[d])`.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Dims,
    strides: Strides,
    offset: usize,
}

/// One axis of a basic-indexing expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceSpec {
    /// `start:stop:step` with numpy semantics, already clamped to the axis.
    Range {
        start: isize,
        stop: isize,
        step: isize,
    },
    /// A single integer: the axis is removed.
    Index(isize),
}

/// Row-major strides of a contiguous tensor of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut strides: Strides = smallvec::smallvec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc *= shape[d].max(1) as isize;
    }
    strides
}

/// Number of elements of a shape (of a tensor that exists: its count was checked when it was
/// made, see [`checked_size`]).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Number of elements of a shape, or `None` when its size cannot be addressed: numpy's rule,
/// the product of the non-zero dimensions times the element size (`item_bytes`) must fit in
/// an `isize` (so strides and offsets of any view of it fit too).
pub fn checked_numel(shape: &[usize], item_bytes: usize) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))?;
    if nonzero.checked_mul(item_bytes.max(1))? > isize::MAX as usize {
        return None;
    }
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// The element count of a tensor of `shape` with elements of `item_bytes` bytes, checked
/// ([`checked_numel`]): a size that cannot be addressed is a `ShapeError`, as numpy's "array
/// is too big".
pub fn checked_size(op: &str, shape: &[usize], item_bytes: usize) -> Result<usize> {
    checked_numel(shape, item_bytes).ok_or_else(|| {
        Error::shape(
            op,
            format!(
                "a tensor of shape {shape:?} with {item_bytes}-byte elements is too big: its \
                 size cannot be addressed"
            ),
        )
    })
}

/// Numpy broadcasting of two shapes (the result's element count checked).
pub fn broadcast_shapes(op: &str, a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out: Dims = smallvec::smallvec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::shape(
                op,
                format!("shapes {a:?} and {b:?} cannot be broadcast together"),
            ));
        };
    }
    // (bytes unknown here: 8, the largest element, so any dtype's view can be addressed)
    if checked_numel(&out, 8).is_none() {
        return Err(Error::shape(
            op,
            format!(
                "shapes {a:?} and {b:?} broadcast to {:?}, which is too big: its size cannot \
                 be addressed",
                out.as_slice()
            ),
        ));
    }
    Ok(out)
}

/// Normalises a possibly negative axis against `ndim`.
pub fn normalize_axis(op: &str, axis: isize, ndim: usize) -> Result<usize> {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(Error::axis(
            op,
            format!("axis {axis} is out of range for a tensor of {ndim} dimension(s)"),
        ));
    }
    Ok(a as usize)
}

/// Normalises a list of axes (`None` means all), sorted, without repeats.
/// A 0-d tensor takes axis 0 and -1, as PyTorch's (reducing over them reduces nothing).
pub fn normalize_axes(op: &str, axes: Option<&[isize]>, ndim: usize) -> Result<Vec<usize>> {
    if ndim == 0 {
        if let Some(&bad) = axes
            .unwrap_or_default()
            .iter()
            .find(|&&a| a != 0 && a != -1)
        {
            return Err(Error::axis(
                op,
                format!("axis {bad} is out of range for a 0-d tensor (expected 0 or -1)"),
            ));
        }
        return Ok(Vec::new());
    }
    let mut out: Vec<usize> = match axes {
        None => (0..ndim).collect(),
        Some(list) => list
            .iter()
            .map(|&a| normalize_axis(op, a, ndim))
            .collect::<Result<_>>()?,
    };
    out.sort_unstable();
    let before = out.len();
    out.dedup();
    if out.len() != before {
        return Err(Error::invalid(
            op,
            format!("repeated axis in {:?}", axes.unwrap_or_default()),
        ));
    }
    Ok(out)
}

impl Clone for Layout {
    // a copy of the inline arrays (the derived clone pushes element by element)
    fn clone(&self) -> Layout {
        Layout {
            shape: Dims::from_slice(&self.shape),
            strides: Strides::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// A contiguous row-major layout of `shape` starting at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: Dims::from_slice(shape),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// The contiguous layout of this shape at offset 0 (a copy, for a layout that is
    /// contiguous already).
    pub(crate) fn packed(&self) -> Layout {
        let mut acc = 1isize;
        let mut canonical = self.offset == 0;
        for d in (0..self.shape.len()).rev() {
            canonical &= self.strides[d] == acc;
            acc *= self.shape[d].max(1) as isize;
        }
        if canonical {
            self.clone()
        } else {
            Layout::contiguous(&self.shape)
        }
    }

    pub(crate) fn new(shape: &[usize], strides: &[isize], offset: usize) -> Layout {
        Layout {
            shape: Dims::from_slice(shape),
            strides: Strides::from_slice(strides),
            offset,
        }
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// Row-major contiguous (size-1 axes may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1isize;
        for d in (0..self.shape.len()).rev() {
            if self.shape[d] != 1 && self.strides[d] != acc {
                return false;
            }
            acc *= self.shape[d] as isize;
        }
        true
    }

    /// A view of the same elements with another shape, where that needs no copy.
    /// Returns `None` when the data must be copied first.
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() || self.numel() == 0 {
            return Some(Layout {
                shape: Dims::from_slice(shape),
                strides: contiguous_strides(shape),
                offset: self.offset,
            });
        }
        // PyTorch's rule: each run of axes that is contiguous within itself (a "chunk") may be
        // split or merged into new axes, as long as no new axis spans two chunks
        let (old, olds) = (&self.shape[..], &self.strides[..]);
        let mut strides: Strides = smallvec::smallvec![0; shape.len()];
        let mut view_d = shape.len() as isize - 1;
        let mut base = *olds.last()?;
        let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
        for d in (0..old.len()).rev() {
            tensor_numel *= old[d];
            let chunk_ends =
                d == 0 || (old[d - 1] != 1 && olds[d - 1] != tensor_numel as isize * base);
            if chunk_ends {
                while view_d >= 0 && (view_numel < tensor_numel || shape[view_d as usize] == 1) {
                    strides[view_d as usize] = view_numel as isize * base;
                    view_numel *= shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if d > 0 {
                    base = olds[d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(Layout {
            shape: Dims::from_slice(shape),
            strides,
            offset: self.offset,
        })
    }

    /// Reorders the axes.
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// A broadcast view to `shape` (stride 0 on broadcast axes). The caller checks compatibility.
    /// As PyTorch's `expand`: a new leading axis of length 1 takes the stride a contiguous
    /// layout would give it (the next axis' length times its stride).
    pub fn broadcast_to(&self, shape: &[usize]) -> Layout {
        let n = shape.len();
        let k = self.shape.len();
        let mut strides: Strides = smallvec::smallvec![0isize; n];
        for d in (0..n).rev() {
            strides[d] = if d + k >= n {
                let i = d + k - n;
                if self.shape[i] == shape[d] {
                    self.strides[i]
                } else {
                    0
                }
            } else if shape[d] == 1 {
                match shape.get(d + 1) {
                    Some(&next) => next as isize * strides[d + 1],
                    None => 0, // (PyTorch's, for a 0-d tensor expanded)
                }
            } else {
                0
            };
        }
        Layout {
            shape: Dims::from_slice(shape),
            strides,
            offset: self.offset,
        }
    }

    /// The diagonal `offset` of the `(d1, d2)` planes as the last axis (PyTorch's
    /// `diagonal`: the other axes in order, then the diagonal, of stride
    /// `stride(d1) + stride(d2)`). The caller checks that `d1 != d2` are axes.
    pub fn diagonal(&self, offset: isize, d1: usize, d2: usize) -> Layout {
        let (n1, n2) = (self.shape[d1] as isize, self.shape[d2] as isize);
        let len = if offset >= 0 {
            n1.min(n2 - offset)
        } else {
            (n1 + offset).min(n2)
        }
        .max(0) as usize;
        let mut start = self.offset as isize;
        if len > 0 {
            start += if offset >= 0 {
                offset * self.strides[d2]
            } else {
                -offset * self.strides[d1]
            };
        }
        let mut shape = Dims::new();
        let mut strides = Strides::new();
        for d in (0..self.shape.len()).filter(|&d| d != d1 && d != d2) {
            shape.push(self.shape[d]);
            strides.push(self.strides[d]);
        }
        shape.push(len);
        strides.push(self.strides[d1] + self.strides[d2]);
        Layout {
            shape,
            strides,
            offset: start as usize,
        }
    }

    /// PyTorch's `unfold(dim, size, step)`: the windows of `size` elements `step` apart
    /// along `dim` (which becomes the window count, of stride `stride(dim) * step`), each a
    /// new last axis of stride `stride(dim)`. A 0-d layout unfolds as one of shape `[1]`.
    /// The caller checks that `size` fits and `step > 0`.
    pub fn unfold(&self, dim: usize, size: usize, step: usize) -> Layout {
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        if shape.is_empty() {
            shape.push(size);
            strides.push(1);
        } else {
            let s = strides[dim];
            shape[dim] = (shape[dim] - size) / step + 1;
            strides[dim] = s * step as isize;
            shape.push(size);
            strides.push(s);
        }
        Layout {
            shape,
            strides,
            offset: self.offset,
        }
    }

    /// The storage position of every element, in row-major order.
    pub fn positions(&self) -> Vec<isize> {
        let mut out = Vec::with_capacity(self.numel());
        for_each_run(self, |base, stride, len| {
            out.extend((0..len as isize).map(|k| base as isize + k * stride));
        });
        out
    }

    /// Basic indexing: one spec per leading axis (missing trailing axes are kept whole).
    pub fn slice(&self, specs: &[SliceSpec]) -> Layout {
        let mut shape = Dims::new();
        let mut strides = Strides::new();
        let mut offset = self.offset as isize;
        for (d, (&n, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            match specs.get(d) {
                None => {
                    shape.push(n);
                    strides.push(s);
                }
                Some(SliceSpec::Index(i)) => offset += i * s,
                Some(SliceSpec::Range { start, stop, step }) => {
                    let len = slice_len(*start, *stop, *step);
                    if len > 0 {
                        offset += start * s;
                    }
                    shape.push(len);
                    // (a step beyond the axis selects at most one element, whose stride is
                    // never used: no product that could overflow)
                    strides.push(if len > 1 { s * step } else { s });
                }
            }
        }
        // (an empty view stays where it was: positions past an empty storage's end would be
        // sliced by kernels that read nothing)
        let offset = if numel(&shape) == 0 {
            self.offset
        } else {
            offset.max(0) as usize
        };
        Layout {
            shape,
            strides,
            offset,
        }
    }

    /// The smallest and one-past-largest storage positions this view touches.
    pub fn storage_span(&self) -> (usize, usize) {
        if self.numel() == 0 {
            return (self.offset, self.offset);
        }
        let mut lo = self.offset as isize;
        let mut hi = self.offset as isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let ext = (n as isize - 1) * s;
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo as usize, hi as usize + 1)
    }
}

/// Number of elements selected by `start:stop:step` (already clamped to the axis; computed
/// without overflow for any step, `isize::MIN` included).
pub fn slice_len(start: isize, stop: isize, step: isize) -> usize {
    let (start, stop, step) = (start as i128, stop as i128, step as i128);
    let len = if step > 0 && stop > start {
        (stop - start + step - 1) / step
    } else if step < 0 && start > stop {
        (start - stop - step - 1) / -step
    } else {
        0
    };
    len as usize
}

/// Visits the storage position of every element of `layout` in row-major order, in runs:
/// `f(base, stride, len)` covers positions `base, base + stride, ...` (`len` of them).
/// The last axis forms the run, so inner loops stay tight.
pub fn for_each_run(layout: &Layout, mut f: impl FnMut(usize, isize, usize)) {
    let shape = layout.shape();
    let strides = layout.strides();
    let n = layout.numel();
    if n == 0 {
        return;
    }
    if shape.is_empty() {
        f(layout.offset(), 1, 1);
        return;
    }
    if layout.is_contiguous() {
        f(layout.offset(), 1, n);
        return;
    }
    let nd = shape.len();
    let inner = shape[nd - 1];
    let inner_stride = strides[nd - 1];
    let mut idx = vec![0usize; nd - 1];
    let mut base = layout.offset() as isize;
    loop {
        f(base as usize, inner_stride, inner);
        // advance the outer multi-index
        let mut d = nd - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            base += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            base -= strides[d] * shape[d] as isize;
            idx[d] = 0;
        }
    }
}

/// Like [`for_each_run`] but over several layouts of one shape at once:
/// `f(bases, strides, len)` with one base and inner stride per layout.
pub fn for_each_run_multi<const N: usize>(
    layouts: [&Layout; N],
    mut f: impl FnMut([usize; N], [isize; N], usize),
) {
    let shape = layouts[0].shape();
    let n = numel(shape);
    if n == 0 {
        return;
    }
    if shape.is_empty() {
        f(layouts.map(|l| l.offset()), [1; N], 1);
        return;
    }
    if layouts.iter().all(|l| l.is_contiguous()) {
        f(layouts.map(|l| l.offset()), [1; N], n);
        return;
    }
    let nd = shape.len();
    let inner = shape[nd - 1];
    let inner_strides = layouts.map(|l| l.strides()[nd - 1]);
    let mut idx = vec![0usize; nd - 1];
    let mut base = layouts.map(|l| l.offset() as isize);
    loop {
        f(base.map(|b| b as usize), inner_strides, inner);
        let mut d = nd - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                base[k] += layouts[k].strides()[d];
            }
            if idx[d] < shape[d] {
                break;
            }
            for k in 0..N {
                base[k] -= layouts[k].strides()[d] * shape[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes("t", &[3, 1], &[4]).unwrap().as_slice(),
            [3, 4]
        );
        assert_eq!(
            broadcast_shapes("t", &[], &[2, 2]).unwrap().as_slice(),
            [2, 2]
        );
        assert!(broadcast_shapes("t", &[3], &[4]).is_err());
    }

    #[test]
    fn runs_visit_a_transposed_view_in_logical_order() {
        let l = Layout::contiguous(&[2, 3]).permute(&[1, 0]);
        let mut seen = vec![];
        for_each_run(&l, |b, s, n| {
            for i in 0..n {
                seen.push((b as isize + s * i as isize) as usize);
            }
        });
        assert_eq!(seen, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn diagonal_and_unfold_are_strided_views() {
        let l = Layout::contiguous(&[2, 3, 4]);
        let d = l.diagonal(1, 1, 2);
        assert_eq!(
            (d.shape(), d.strides(), d.offset()),
            (&[2, 3][..], &[12, 5][..], 1)
        );
        let d = l.diagonal(-2, 1, 2);
        assert_eq!(
            (d.shape(), d.strides(), d.offset()),
            (&[2, 1][..], &[12, 5][..], 8)
        );
        let d = l.diagonal(9, 1, 2);
        assert_eq!((d.shape(), d.offset()), (&[2, 0][..], 0));
        let u = Layout::contiguous(&[10]).unfold(0, 3, 2);
        assert_eq!(u.positions(), vec![0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8]);
        let u = Layout::contiguous(&[]).unfold(0, 1, 1);
        assert_eq!((u.shape(), u.strides()), (&[1][..], &[1][..]));
    }

    #[test]
    fn broadcasting_keeps_unit_axis_strides_as_pytorch_expand() {
        let l = Layout::contiguous(&[5]).broadcast_to(&[1, 1, 5]);
        assert_eq!(l.strides(), &[5, 5, 1]);
        let l = Layout::contiguous(&[3, 1]).broadcast_to(&[2, 3, 4]);
        assert_eq!(l.strides(), &[0, 1, 0]);
        let l = Layout::contiguous(&[]).broadcast_to(&[1, 1]);
        assert_eq!(l.strides(), &[0, 0]);
    }

    #[test]
    fn negative_step_slices_walk_backwards() {
        let l = Layout::contiguous(&[5]).slice(&[SliceSpec::Range {
            start: 4,
            stop: -1,
            step: -2,
        }]);
        assert_eq!(l.shape(), &[3]);
        let mut seen = vec![];
        for_each_run(&l, |b, s, n| {
            for i in 0..n {
                seen.push((b as isize + s * i as isize) as usize);
            }
        });
        assert_eq!(seen, vec![4, 2, 0]);
    }
}
