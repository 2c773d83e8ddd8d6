//! The backend seam: [`Backend`] is what a device implements (the CPU in `cpu/`, CUDA in
//! `cuda/`), and [`with_backend!`] is the one place a [`Device`] becomes its backend. Ops call
//! kernels through [`on_device!`] (a new buffer from input buffers) or [`in_place!`] (writing
//! into an existing buffer); transfers and fills through [`with_backend!`] directly.
//!
//! Every kernel has a default that reports a `DeviceError`: a backend that lacks an op says so
//! clearly, and a new backend can start small.

use std::ops::Deref;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{numel, Layout, SliceSpec};
use crate::op::{Activation, BinaryOp, CmpOp, ReduceKind, UnaryOp};
use crate::storage::{CpuData, Storage, StorageData};
use crate::tensor::Tensor;
use crate::window::{ConvShape, Window};

/// A buffer of a backend, borrowed from a storage or made for the call (a Python scalar
/// uploaded to a device).
pub(crate) enum Held<'a, B> {
    Borrowed(&'a B),
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Owned(B),
}

impl<B> Deref for Held<'_, B> {
    type Target = B;
    fn deref(&self) -> &B {
        match self {
            Held::Borrowed(b) => b,
            Held::Owned(b) => b,
        }
    }
}

/// A buffer with the layout it is read through.
pub(crate) type View<'a, B> = (&'a B, &'a Layout);

/// The error for a kernel `op` that `device` does not have.
pub(crate) fn lacks(device: Device, op: &str) -> Error {
    Error::device(op, format!("{op} is not implemented on {device}"))
}

/// Kernels and transfers of one device. Kernels read buffers through layouts (any strides,
/// broadcast axes with stride 0) and return new contiguous buffers; shapes and dtypes were
/// checked by the op before.
#[allow(unused_variables, clippy::too_many_arguments)]
pub(crate) trait Backend {
    /// The device's buffer of any dtype.
    type Buf;

    fn device(&self) -> Device;
    /// A storage owning `buf`.
    fn storage(&self, buf: Self::Buf) -> Storage;
    /// The buffer of a storage, read by a kernel of this backend.
    fn view<'a>(&self, data: &'a StorageData) -> Result<Held<'a, Self::Buf>>;
    /// The buffer of a storage, written in place by a kernel of this backend.
    fn view_mut<'a>(&self, data: &'a mut StorageData) -> Result<&'a mut Self::Buf>;

    /// A copy of host data on this device.
    fn upload(&self, host: &CpuData) -> Result<Self::Buf> {
        Err(lacks(self.device(), "to"))
    }
    /// The elements of a view, in row-major order, on the host.
    fn download(&self, x: &Self::Buf, l: &Layout) -> Result<CpuData> {
        Err(lacks(self.device(), "numpy"))
    }
    /// `n` elements equal to `value`.
    fn fill(&self, n: usize, value: f64, dtype: DType) -> Result<Self::Buf> {
        Err(lacks(self.device(), "full"))
    }

    fn unary(&self, op: UnaryOp, x: &Self::Buf, l: &Layout) -> Result<Self::Buf> {
        Err(lacks(self.device(), op.name()))
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &Self::Buf,
        la: &Layout,
        b: &Self::Buf,
        lb: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), op.name()))
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &Self::Buf,
        la: &Layout,
        b: &Self::Buf,
        lb: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), op.name()))
    }
    /// The backward of an activation from its output `y`.
    fn act_grad(
        &self,
        act: Activation,
        dy: &Self::Buf,
        ldy: &Layout,
        y: &Self::Buf,
        ly: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), act.grad_name()))
    }
    fn pow_scalar(&self, x: &Self::Buf, l: &Layout, p: f64) -> Result<Self::Buf> {
        Err(lacks(self.device(), "pow"))
    }
    fn where_(
        &self,
        c: &Self::Buf,
        lc: &Layout,
        a: &Self::Buf,
        la: &Layout,
        b: &Self::Buf,
        lb: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "where"))
    }
    /// A contiguous copy converted to `to` (a plain copy when `to` is the buffer's dtype).
    fn cast(&self, x: &Self::Buf, l: &Layout, to: DType) -> Result<Self::Buf> {
        Err(lacks(self.device(), "astype"))
    }

    /// Writes `src` (viewed by `ls`, same shape) through the view `ld` of `dst`.
    fn write(&self, dst: &mut Self::Buf, ld: &Layout, src: &Self::Buf, ls: &Layout) -> Result<()> {
        Err(lacks(self.device(), "assign"))
    }
    /// `dst op= src` through the view `ld` of `dst` (`src` broadcast to its shape, not `dst`'s
    /// storage; no two elements of the view share memory).
    fn binary_assign(
        &self,
        op: BinaryOp,
        dst: &mut Self::Buf,
        ld: &Layout,
        src: &Self::Buf,
        ls: &Layout,
    ) -> Result<()> {
        Err(lacks(self.device(), op.name()))
    }

    /// Reduces `axes` (sorted, unique); the result is contiguous with those axes of size 1.
    fn reduce(
        &self,
        kind: ReduceKind,
        x: &Self::Buf,
        l: &Layout,
        axes: &[usize],
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), kind.name()))
    }
    /// Softmax (or log-softmax) along `axis`; contiguous in the input's shape.
    fn softmax(&self, x: &Self::Buf, l: &Layout, axis: usize, log: bool) -> Result<Self::Buf> {
        Err(lacks(self.device(), "softmax"))
    }
    /// Rows along the last axis normalised, `(x - mean) / sqrt(var + eps)`, then `* w + b`
    /// when `wb` (weight and bias along the last axis) is given; contiguous.
    fn normalize(
        &self,
        x: &Self::Buf,
        l: &Layout,
        wb: Option<(&Self::Buf, &Layout, &Self::Buf, &Layout)>,
        eps: f64,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "layer_norm"))
    }
    /// [`Backend::normalize`]'s gradients from the input, the weight (when there is an affine
    /// part) and the output gradient: the input's gradient, then with a weight the weight's
    /// and the bias's (one flat buffer).
    fn normalize_grad(
        &self,
        x: &Self::Buf,
        lx: &Layout,
        w: Option<(&Self::Buf, &Layout)>,
        dy: &Self::Buf,
        ldy: &Layout,
        eps: f64,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "layer_norm_grad"))
    }
    /// Scaled dot-product attention of `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]` (the
    /// same leading axes, `s >= 1`); `[.., l, ev]` contiguous.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        q: (&Self::Buf, &Layout),
        k: (&Self::Buf, &Layout),
        v: (&Self::Buf, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "scaled_dot_product_attention"))
    }
    /// [`Backend::attention`]'s gradients from its inputs, output and output gradient:
    /// `[dq | dk | dv]` in one flat buffer.
    #[allow(clippy::too_many_arguments)]
    fn attention_grad(
        &self,
        q: (&Self::Buf, &Layout),
        k: (&Self::Buf, &Layout),
        v: (&Self::Buf, &Layout),
        out: (&Self::Buf, &Layout),
        dout: (&Self::Buf, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "scaled_dot_product_attention_grad"))
    }
    /// Mean cross-entropy of `[n, c]` logits against `[n]` int64 labels (in range); one value.
    fn softmax_xent(
        &self,
        x: &Self::Buf,
        lx: &Layout,
        labels: &Self::Buf,
        ll: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "softmax_cross_entropy"))
    }
    /// [`Backend::softmax_xent`]'s logits gradient, `(softmax - onehot) * dy / n`.
    fn softmax_xent_grad(
        &self,
        x: &Self::Buf,
        lx: &Layout,
        labels: &Self::Buf,
        ll: &Layout,
        dy: &Self::Buf,
        ldy: &Layout,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "softmax_cross_entropy_grad"))
    }
    /// Products of `[batch..., m, k]` and `[batch..., k, n]` views of one batch shape.
    fn matmul(&self, a: &Self::Buf, la: &Layout, b: &Self::Buf, lb: &Layout) -> Result<Self::Buf> {
        Err(lacks(self.device(), "matmul"))
    }

    /// Zeros of `shape` with `x` written where `specs` selects (from [`Backend::fill`] and
    /// [`Backend::write`]: no backend needs a kernel of its own).
    fn slice_grad(
        &self,
        x: &Self::Buf,
        l: &Layout,
        dtype: DType,
        shape: &[usize],
        specs: &[SliceSpec],
    ) -> Result<Self::Buf> {
        let mut out = self.fill(numel(shape), 0.0, dtype)?;
        self.write(&mut out, &Layout::contiguous(shape).slice(specs), x, l)?;
        Ok(out)
    }
    /// A copy of `x` with the region `specs` selects replaced by `v` (broadcast to it).
    fn set_slice(
        &self,
        x: &Self::Buf,
        lx: &Layout,
        dtype: DType,
        v: &Self::Buf,
        lv: &Layout,
        specs: &[SliceSpec],
    ) -> Result<Self::Buf> {
        let mut out = self.cast(x, lx, dtype)?;
        self.write(
            &mut out,
            &Layout::contiguous(lx.shape()).slice(specs),
            v,
            lv,
        )?;
        Ok(out)
    }
    /// The parts (one dtype) joined along `axis` into a contiguous buffer of `shape`.
    fn concat(
        &self,
        parts: &[View<'_, Self::Buf>],
        dtype: DType,
        axis: usize,
        shape: &[usize],
    ) -> Result<Self::Buf> {
        let mut out = self.fill(numel(shape), 0.0, dtype)?;
        let full = Layout::contiguous(shape);
        let mut start = 0usize;
        for (data, l) in parts {
            let len = l.shape()[axis];
            let specs: Vec<SliceSpec> = shape
                .iter()
                .enumerate()
                .map(|(d, &n)| {
                    let (lo, hi) = if d == axis {
                        (start, start + len)
                    } else {
                        (0, n)
                    };
                    SliceSpec::Range {
                        start: lo as isize,
                        stop: hi as isize,
                        step: 1,
                    }
                })
                .collect();
            self.write(&mut out, &full.slice(&specs), data, l)?;
            start += len;
        }
        Ok(out)
    }
    /// `out[p] = x[p with axis replaced by idx[p]]` (negative indices wrap).
    fn gather(
        &self,
        x: &Self::Buf,
        lx: &Layout,
        idx: &Self::Buf,
        li: &Layout,
        axis: usize,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "gather"))
    }
    /// Zeros of `shape`, then `src[p]` added at `p with axis replaced by idx[p]`.
    fn scatter_add(
        &self,
        src: &Self::Buf,
        ls: &Layout,
        idx: &Self::Buf,
        li: &Layout,
        axis: usize,
        shape: &[usize],
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "scatter_add"))
    }

    /// im2col: `[n, c, h, w]` to contiguous `[n, oh*ow, c, kh*kw]`, padding reads `pad`.
    fn unfold(&self, x: &Self::Buf, l: &Layout, win: &Window, pad: f64) -> Result<Self::Buf> {
        Err(lacks(self.device(), "unfold"))
    }
    /// The transpose of `unfold` back to `[n, c, size.0, size.1]`.
    fn fold(
        &self,
        cols: &Self::Buf,
        l: &Layout,
        win: &Window,
        size: (usize, usize),
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "fold"))
    }
    /// The flat position of each pooling window's maximum, int64 `[n, c, oh * ow]`.
    fn pool_argmax(&self, x: &Self::Buf, l: &Layout, win: &Window) -> Result<Self::Buf> {
        Err(lacks(self.device(), "pool_argmax"))
    }
    fn conv2d(
        &self,
        x: View<'_, Self::Buf>,
        w: View<'_, Self::Buf>,
        bias: Option<View<'_, Self::Buf>>,
        s: &ConvShape,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "conv2d"))
    }
    fn conv2d_input_grad(
        &self,
        dy: View<'_, Self::Buf>,
        w: View<'_, Self::Buf>,
        s: &ConvShape,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "conv2d_input_grad"))
    }
    fn conv2d_weight_grad(
        &self,
        x: View<'_, Self::Buf>,
        dy: View<'_, Self::Buf>,
        s: &ConvShape,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "conv2d_weight_grad"))
    }
    fn max_pool2d(&self, x: &Self::Buf, l: &Layout, win: &Window) -> Result<Self::Buf> {
        Err(lacks(self.device(), "max_pool2d"))
    }
    fn max_pool2d_grad(
        &self,
        x: View<'_, Self::Buf>,
        dy: View<'_, Self::Buf>,
        win: &Window,
    ) -> Result<Self::Buf> {
        Err(lacks(self.device(), "max_pool2d_grad"))
    }
}

/// Evaluates `$body` with `$b` bound to the backend of `$device` (each arm is compiled for its
/// backend's types): the one place a device becomes a backend.
macro_rules! with_backend {
    ($device:expr, $op:expr, |$b:ident| $body:expr) => {
        match $device {
            $crate::device::Device::Cpu => {
                #[allow(unused_imports)]
                use $crate::backend::Backend as _;
                let $b = &$crate::cpu::Cpu;
                $body
            }
            #[cfg(feature = "cuda")]
            $crate::device::Device::Cuda(ordinal) => {
                #[allow(unused_imports)]
                use $crate::backend::Backend as _;
                let gpu = $crate::cuda::gpu($op, ordinal)?;
                let $b = &*gpu;
                $body
            }
            #[cfg(not(feature = "cuda"))]
            device @ $crate::device::Device::Cuda(_) => Err(device.unavailable($op)),
        }
    };
}
pub(crate) use with_backend;

/// Runs a kernel on the buffers of `inputs` on their device and returns the new storage:
/// `on_device!(op_name, inputs, |backend, buffers| backend.kernel(buffers[0], ...))`.
macro_rules! on_device {
    ($op:expr, $inputs:expr, |$b:ident, $d:ident| $body:expr) => {{
        let inputs: &[&$crate::tensor::Tensor] = $inputs;
        $crate::backend::with_backend!($crate::backend::target_device(inputs), $op, |$b| {
            $crate::backend::run($op, $b, inputs, |$b, $d| {
                use $crate::backend::Backend as _;
                $body
            })
        })
    }};
}
pub(crate) use on_device;

/// Runs an in-place kernel: `dst`'s buffer (written, its version bumped) and the buffers of
/// `srcs` (read; none may share `dst`'s storage), on `dst`'s device.
macro_rules! in_place {
    ($op:expr, $dst:expr, $srcs:expr, |$b:ident, $w:ident, $d:ident| $body:expr) => {{
        let dst: &$crate::tensor::Tensor = $dst;
        let srcs: &[&$crate::tensor::Tensor] = $srcs;
        $crate::backend::with_backend!(dst.device(), $op, |$b| {
            $crate::backend::run_mut($op, $b, dst, srcs, |$b, $w, $d| {
                use $crate::backend::Backend as _;
                $body
            })
        })
    }};
}
pub(crate) use in_place;

/// The device an op runs on: the first input not on the CPU (0-d CPU tensors, Python
/// scalars, mix with tensors on any device), else the CPU.
pub(crate) fn target_device(ts: &[&Tensor]) -> Device {
    ts.iter()
        .map(|t| t.device())
        .find(|d| *d != Device::Cpu)
        .unwrap_or(Device::Cpu)
}

/// An allocation that failed inside a kernel, reported as the op's.
pub(crate) fn named(op: &str, e: Error) -> Error {
    match e {
        Error::OutOfMemory { op: alloc, msg } if alloc == "alloc" => Error::OutOfMemory {
            op: op.to_string(),
            msg,
        },
        e => e,
    }
}

/// Holds the read locks of `ts`' storages while `f` runs on their buffers. One and two inputs
/// (nearly every op) take their locks without building vectors.
pub(crate) fn run<B: Backend>(
    op: &str,
    b: &B,
    ts: &[&Tensor],
    f: impl FnOnce(&B, &[&B::Buf]) -> Result<B::Buf>,
) -> Result<Storage> {
    let out = match ts {
        [x] => {
            let gx = x.storage().read();
            let vx = b.view(&gx)?;
            f(b, &[&*vx]).map_err(|e| named(op, e))?
        }
        [x, y] => {
            let (gx, gy) = (x.storage().read(), y.storage().read());
            let (vx, vy) = (b.view(&gx)?, b.view(&gy)?);
            f(b, &[&*vx, &*vy]).map_err(|e| named(op, e))?
        }
        _ => {
            let guards: smallvec::SmallVec<[_; 3]> =
                ts.iter().map(|t| t.storage().read()).collect();
            let held = guards
                .iter()
                .map(|g| b.view(g))
                .collect::<Result<smallvec::SmallVec<[_; 3]>>>()?;
            let bufs: smallvec::SmallVec<[&B::Buf; 3]> = held.iter().map(|h| &**h).collect();
            f(b, &bufs).map_err(|e| named(op, e))?
        }
    };
    Ok(b.storage(out))
}

/// Holds `dst`'s write lock (bumping its version) and the read locks of `srcs` while `f`
/// writes into `dst`'s buffer.
pub(crate) fn run_mut<B: Backend>(
    op: &str,
    b: &B,
    dst: &Tensor,
    srcs: &[&Tensor],
    f: impl FnOnce(&B, &mut B::Buf, &[&B::Buf]) -> Result<()>,
) -> Result<()> {
    if srcs
        .iter()
        .any(|t| std::sync::Arc::ptr_eq(t.storage(), dst.storage()))
    {
        // reading a buffer while writing it would deadlock on its lock
        return Err(Error::invalid(
            op,
            "an in-place source shares the destination's buffer",
        ));
    }
    let guards: smallvec::SmallVec<[_; 2]> = srcs.iter().map(|t| t.storage().read()).collect();
    let held = guards
        .iter()
        .map(|g| b.view(g))
        .collect::<Result<smallvec::SmallVec<[_; 2]>>>()?;
    let bufs: smallvec::SmallVec<[&B::Buf; 2]> = held.iter().map(|h| &**h).collect();
    let mut w = dst.storage().write(op)?;
    f(b, b.view_mut(&mut w)?, &bufs).map_err(|e| named(op, e))
}
