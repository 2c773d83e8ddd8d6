//! `Tensor`: a cheap handle (one `Arc`) to a view of shared storage plus autodiff metadata.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::autograd::GradInfo;
use crate::backend::with_backend;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::{numel, Layout};
use crate::memory;
use crate::storage::{CpuData, Storage, StorageData};

/// An n-dimensional array that can take part in automatic differentiation.
///
/// Cloning a `Tensor` clones the handle: both refer to the same tensor, with the same
/// gradient slots and `.grad`. Views made by ops (reshape, permute, slicing) are new tensors
/// over the same storage.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

pub(crate) struct TensorImpl {
    storage: Arc<Storage>,
    layout: Layout,
    meta: crate::sync::Lock<Meta>,
    /// Set on tensors computed inside the backward of a key at this level while keys above
    /// it were not allowed to record; those keys must refuse to differentiate them.
    hidden_from: AtomicU64,
    /// Whether `meta.infos` may be non-empty: lets recording skip the lock of untracked
    /// inputs. Set while the lock is held, whenever a slot is added or the last one removed.
    tracked: AtomicBool,
    /// Set once `meta.successor` is: a recorded in-place write through another view of this
    /// memory rebased this handle (see [`Tensor::current`]).
    rebased: AtomicBool,
    /// The storage's count of recorded in-place writes when this handle was made.
    seen_writes: u64,
}

/// Where `.grad` lives. Shared by a tensor, the snapshot a key takes when it is attached, and
/// the handles in-place ops rebind it to, so gradients reach the tensor the user holds.
pub(crate) type GradCell = Arc<Mutex<Option<Tensor>>>;

/// Per-tensor autodiff state: one entry per `GradKey` that tracks this tensor, and `.grad`.
#[derive(Default)]
pub(crate) struct Meta {
    pub(crate) infos: smallvec::SmallVec<[GradInfo; 1]>,
    pub(crate) grad: Option<GradCell>,
    /// How to recompute this tensor, on a key that mirrors.
    pub(crate) recipe: Option<Arc<crate::autograd::Recipe>>,
    /// This tensor's node in an active trace (see `graph::trace`).
    pub(crate) trace: Option<crate::graph::trace::TraceRef>,
    /// The handle this one continues as after a recorded in-place write through another
    /// view of its memory (see [`Tensor::current`]).
    pub(crate) successor: Option<Tensor>,
}

impl Drop for TensorImpl {
    fn drop(&mut self) {
        memory::on_tensor(self.storage.device(), -1);
    }
}

impl TensorImpl {
    /// False only if no key tracks this tensor (see the field).
    pub(crate) fn maybe_tracked(&self) -> bool {
        self.tracked.load(Ordering::Acquire)
    }

    pub(crate) fn set_tracked(&self, tracked: bool) {
        self.tracked.store(tracked, Ordering::Release);
    }

    pub(crate) fn meta(&self) -> crate::sync::LockGuard<'_, Meta> {
        self.meta.lock()
    }

    /// False when a recorded in-place write went into this handle's elements through another
    /// handle (a view of it, or the tensor it views) after this one was made.
    pub(crate) fn is_current(&self) -> bool {
        if self.storage.tape_writes() == self.seen_writes {
            return true;
        }
        let at = crate::storage::Footprint::of(&self.layout);
        !self.storage.written_since(self.seen_writes, &at)
    }
}

impl Tensor {
    pub(crate) fn from_parts(storage: Arc<Storage>, layout: Layout) -> Tensor {
        memory::on_tensor(storage.device(), 1);
        let seen_writes = storage.tape_writes();
        Tensor(Arc::new(TensorImpl {
            seen_writes,
            storage,
            layout,
            meta: crate::sync::Lock::new(Meta::default()),
            hidden_from: AtomicU64::new(u64::MAX),
            tracked: AtomicBool::new(false),
            rebased: AtomicBool::new(false),
        }))
    }

    /// A CPU tensor over `len` elements at `ptr` that another library owns (zero-copy
    /// import), viewed through `shape`, `strides` and `offset` (in elements); `owner` keeps
    /// the memory alive and is dropped with the last view. Writes go to that memory, or are
    /// refused when `read_only`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` initialised elements of `T` (for `bool`, each 0 or 1),
    /// aligned for `T`, valid until `owner` is dropped; ferrograd never frees or moves them.
    pub unsafe fn from_borrowed<T: crate::storage::IntoCpuData>(
        ptr: *mut T,
        len: usize,
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        owner: crate::storage::Owner,
        read_only: bool,
    ) -> Result<Tensor> {
        let layout = Layout::new(shape, strides, offset);
        let (_, end) = layout.storage_span();
        if shape.len() != strides.len() || ptr.is_null() || len == 0 || end > len {
            return Err(Error::invalid(
                "from_borrowed",
                format!(
                    "a view of shape {shape:?}, strides {strides:?} and offset {offset} does \
                     not fit in {len} elements"
                ),
            ));
        }
        // SAFETY: the caller's contract; the storage never frees or grows this Vec
        let v = unsafe { Vec::from_raw_parts(ptr, len, len) };
        let storage = unsafe { Storage::cpu_borrowed(T::into_cpu_data(v), owner, read_only) };
        Ok(Tensor::from_parts(Arc::new(storage), layout))
    }

    /// A contiguous tensor of `shape` over a new buffer.
    pub(crate) fn from_storage(storage: Storage, shape: &[usize]) -> Tensor {
        Tensor::from_parts(Arc::new(storage), Layout::contiguous(shape))
    }

    pub(crate) fn from_cpu(data: CpuData, shape: &[usize]) -> Tensor {
        debug_assert_eq!(data.len(), numel(shape));
        Tensor::from_parts(Arc::new(Storage::cpu(data)), Layout::contiguous(shape))
    }

    /// A tensor owning `data`, laid out row-major in `shape`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        if data.len() != numel(shape) {
            return Err(Error::shape(
                "tensor",
                format!(
                    "{} values cannot fill shape {shape:?} ({} elements)",
                    data.len(),
                    numel(shape)
                ),
            ));
        }
        let t = Tensor::from_cpu(T::into_cpu_data(data), shape);
        crate::graph::trace::on_constant(&t);
        Ok(t)
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        let t = Tensor::from_cpu(T::into_cpu_data(vec![v]), &[]);
        crate::graph::trace::on_constant(&t);
        t
    }

    /// A CPU tensor of `shape` filled with `value` converted to `dtype`.
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        Tensor::full_on(shape, value, dtype, Device::Cpu)
    }

    /// CPU zeros of `shape`.
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full(shape, 0.0, dtype)
    }

    /// CPU ones of `shape`.
    pub fn ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype)
    }

    /// A 0-d CPU tensor holding `value` converted to `dtype`.
    pub fn scalar_of(value: f64, dtype: DType) -> Tensor {
        let data = match dtype {
            DType::F32 => CpuData::F32(vec![value as f32]),
            DType::F64 => CpuData::F64(vec![value]),
            DType::I64 => CpuData::I64(vec![value as i64]),
            DType::Bool => CpuData::Bool(vec![value != 0.0]),
            DType::F16 => CpuData::F16(vec![half::f16::from_f32(value as f32)]),
            DType::BF16 => CpuData::BF16(vec![half::bf16::from_f32(value as f32)]),
            DType::I32 => CpuData::I32(vec![value as i64 as i32]),
            DType::I16 => CpuData::I16(vec![value as i64 as i16]),
            DType::I8 => CpuData::I8(vec![value as i64 as i8]),
            DType::U8 => CpuData::U8(vec![value as i64 as u8]),
        };
        let t = Tensor::from_cpu(data, &[]);
        crate::graph::trace::on_constant(&t);
        t
    }

    /// A 0-d tensor holding `value` in this tensor's dtype (for mixing Python scalars).
    pub fn scalar_like(&self, value: f64) -> Tensor {
        Tensor::scalar_of(value, self.dtype())
    }

    /// Ones with this tensor's shape, dtype and device.
    pub fn ones_like(&self) -> Result<Tensor> {
        Tensor::full_on(self.shape(), 1.0, self.dtype(), self.device())
    }

    /// Zeros with this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::full_on(self.shape(), 0.0, self.dtype(), self.device())
    }

    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }
    pub fn ndim(&self) -> usize {
        self.0.layout.ndim()
    }
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    pub fn dtype(&self) -> DType {
        self.0.storage.dtype()
    }
    pub fn device(&self) -> Device {
        self.0.storage.device()
    }
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    pub fn storage(&self) -> &Arc<Storage> {
        &self.0.storage
    }
    /// Whether this handle is the only one to the tensor and the tensor the only one on its
    /// storage (dropping it frees the buffer).
    pub fn is_sole_handle(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && Arc::strong_count(&self.0.storage) == 1
    }
    /// Whether two handles refer to the same tensor.
    pub fn same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// A stable identity for the life of the tensor.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The handle that stands for this tensor now: itself, or, after a recorded in-place
    /// write through another view of the same memory (`v = x[:2]; v.mul_(3)` rebases `x`;
    /// `x.mul_(3)` rebases `v`), the handle it continues as, whose tape state includes that
    /// write, as PyTorch's views follow their base. The Python binding follows it on every
    /// access; Rust code holding a handle across such a write calls this before using it.
    pub fn current(&self) -> Tensor {
        let mut t = self.clone();
        while t.0.rebased.load(Ordering::Acquire) {
            let next = t.0.meta().successor.clone();
            match next {
                Some(n) => t = n,
                None => break,
            }
        }
        t
    }

    /// Whether [`Tensor::current`] is another handle.
    pub fn is_rebased(&self) -> bool {
        self.0.rebased.load(Ordering::Acquire)
    }

    pub(crate) fn set_successor(&self, next: Tensor) {
        self.0.meta().successor = Some(next);
        self.0.rebased.store(true, Ordering::Release);
    }

    /// A new tensor over the same storage with another layout and no autodiff state.
    pub(crate) fn view(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(self.0.storage.clone(), layout)
    }

    /// The same data, cut off from every gradient tape (in a trace: a node through which no
    /// gradient flows).
    pub fn detach(&self) -> Tensor {
        let t = self.view(self.0.layout.clone());
        crate::graph::trace::on_detach(self, &t);
        t
    }

    /// The accumulated gradient, if backward has produced one.
    pub fn grad(&self) -> Option<Tensor> {
        let cell = self.0.meta().grad.clone();
        let g = cell.and_then(|c| c.lock().unwrap_or_else(|e| e.into_inner()).clone());
        crate::graph::trace::on_get_grad(self, g.as_ref());
        g
    }

    /// Replaces the accumulated gradient (`None` clears it). Inside a trace, fails for a
    /// gradient the trace cannot follow (see [`crate::graph`]).
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        crate::graph::trace::on_set_grad(self, grad.as_ref())?;
        let cell = self.grad_cell();
        let old = std::mem::replace(&mut *cell.lock().unwrap_or_else(|e| e.into_inner()), grad);
        drop(old);
        Ok(())
    }

    pub(crate) fn grad_cell(&self) -> GradCell {
        self.0
            .meta()
            .grad
            .get_or_insert_with(GradCell::default)
            .clone()
    }

    /// A handle over the same data that shares this tensor's `.grad` but no tape state.
    pub(crate) fn snapshot(&self) -> Tensor {
        let s = self.view(self.0.layout.clone());
        s.0.meta().grad = Some(self.grad_cell());
        if crate::graph::is_tracing() {
            // the same node of the trace: not whatever other node shares its storage and layout
            let node = self.0.meta().trace;
            s.0.meta().trace = node;
        }
        s
    }

    pub(crate) fn hidden_from(&self) -> u64 {
        self.0.hidden_from.load(Ordering::Relaxed)
    }

    pub(crate) fn set_hidden_from(&self, level: u64) {
        self.0.hidden_from.fetch_min(level, Ordering::Relaxed);
    }

    /// The elements as a contiguous host buffer (device data is copied to the host, which
    /// waits for the device's queued work).
    pub fn host_data(&self) -> Result<CpuData> {
        with_backend!(self.device(), "numpy", |b| {
            let g = self.0.storage.read();
            b.download(&*b.view(&g)?, self.layout())
                .map_err(|e| crate::backend::named("numpy", e))
        })
    }

    /// The elements in row-major order, converted to `T`'s dtype only if it matches.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype() != T::DTYPE {
            return Err(Error::dtype(
                "to_vec",
                format!("tensor has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            ));
        }
        Ok(T::from_cpu_data(&self.host_data()?))
    }

    /// The elements as `f64`, whatever the dtype.
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let data = {
            let _g = crate::autograd::no_grad();
            self.detach().astype(DType::F64)?
        };
        data.to_vec::<f64>()
    }

    /// The single value of a one-element tensor.
    pub fn item(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                format!(
                    "only one-element tensors can be converted to a scalar, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        Ok(self.to_vec_f64()?[0])
    }

    /// Runs `f` with the data as a CPU buffer and its layout (device data is copied first).
    pub fn with_cpu_data<R>(&self, f: impl FnOnce(&CpuData, &Layout) -> R) -> Result<R> {
        #[allow(irrefutable_let_patterns)]
        if let StorageData::Cpu(d) = &*self.0.storage.read() {
            return Ok(f(d, self.layout()));
        }
        let d = self.host_data()?;
        Ok(f(&d, &Layout::contiguous(self.shape())))
    }

    /// This tensor on `device`: itself when it is there already, else a copy that a
    /// `GradKey` records, so gradients flow back to this device (as PyTorch's `Tensor.to`).
    pub fn to(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        crate::dispatch::apply1(
            &crate::op::Op::Movement(crate::op::MovementOp::ToDevice {
                from: self.device(),
                to: device,
            }),
            &[self],
        )
    }

    /// A copy on `device` (the same tensor when it is there already). Not recorded: see
    /// [`Tensor::to`].
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let host = self.host_data()?;
        with_backend!(device, "to", |b| {
            let buf = b
                .upload(&host)
                .map_err(|e| crate::backend::named("to", e))?;
            Ok(Tensor::from_storage(b.storage(buf), self.shape()))
        })
    }

    /// A tensor of `shape` filled with `value` on `device`.
    pub fn full_on(shape: &[usize], value: f64, dtype: DType, device: Device) -> Result<Tensor> {
        let t = Tensor::fill_raw(shape, value, dtype, device)?;
        crate::graph::trace::on_fill(&t, value);
        Ok(t)
    }

    /// [`Tensor::full_on`] without tracing (a graph's executor).
    pub(crate) fn fill_raw(
        shape: &[usize],
        value: f64,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let n = crate::layout::checked_size("full", shape, dtype.size_in_bytes())?;
        with_backend!(device, "full", |b| {
            let buf = b
                .fill(n, value, dtype)
                .map_err(|e| crate::backend::named("full", e))?;
            Ok(Tensor::from_storage(b.storage(buf), shape))
        })
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={})",
            self.shape(),
            self.dtype(),
            self.device()
        )
    }
}
