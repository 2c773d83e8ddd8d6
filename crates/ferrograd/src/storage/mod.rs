//! Buffers behind tensors, with a version counter for in-place safety and exact accounting,
//! and the reuse pool large CPU buffers come from.

pub(crate) mod pool;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::device::Device;
use crate::dtype::DType;
use crate::memory;

/// The elements a view of a buffer covers, coarsely: its span `[lo, hi)`, its offset, and the
/// gcd of its strides (every element sits at `offset + k * step`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Footprint {
    lo: usize,
    hi: usize,
    offset: usize,
    step: usize,
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Footprint {
    pub(crate) fn of(layout: &crate::layout::Layout) -> Footprint {
        let (lo, hi) = layout.storage_span();
        let step = layout
            .shape()
            .iter()
            .zip(layout.strides())
            .filter(|(&n, _)| n > 1)
            .fold(0, |g, (_, &s)| gcd(g, s.unsigned_abs()));
        Footprint {
            lo,
            hi,
            offset: layout.offset(),
            step,
        }
    }

    /// False only when the two views cannot share an element: disjoint spans, or offsets
    /// that no common step joins (interleaved views such as `x[:, 0::2]` and `x[:, 1::2]`).
    pub(crate) fn may_overlap(&self, other: &Footprint) -> bool {
        if self.lo >= other.hi || other.lo >= self.hi {
            return false;
        }
        let g = gcd(self.step, other.step);
        g == 0 || self.offset.abs_diff(other.offset) % g == 0
    }
}

/// How many recorded in-place writes a buffer remembers the place of.
const TAPE_LOG: usize = 32;

/// A CPU buffer of one dtype.
#[derive(Debug, Clone)]
pub enum CpuData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
    F16(Vec<half::f16>),
    BF16(Vec<half::bf16>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
}

/// Evaluates `$body` with `$v` bound to the `Vec` inside a [`CpuData`], whatever its dtype.
#[macro_export]
#[doc(hidden)]
macro_rules! with_cpu_vec {
    ($d:expr, |$v:ident| $body:expr) => {
        match $d {
            $crate::storage::CpuData::F32($v) => $body,
            $crate::storage::CpuData::F64($v) => $body,
            $crate::storage::CpuData::I64($v) => $body,
            $crate::storage::CpuData::Bool($v) => $body,
            $crate::storage::CpuData::F16($v) => $body,
            $crate::storage::CpuData::BF16($v) => $body,
            $crate::storage::CpuData::I32($v) => $body,
            $crate::storage::CpuData::I16($v) => $body,
            $crate::storage::CpuData::I8($v) => $body,
            $crate::storage::CpuData::U8($v) => $body,
        }
    };
}

impl CpuData {
    pub fn dtype(&self) -> DType {
        match self {
            CpuData::F32(_) => DType::F32,
            CpuData::F64(_) => DType::F64,
            CpuData::I64(_) => DType::I64,
            CpuData::Bool(_) => DType::Bool,
            CpuData::F16(_) => DType::F16,
            CpuData::BF16(_) => DType::BF16,
            CpuData::I32(_) => DType::I32,
            CpuData::I16(_) => DType::I16,
            CpuData::I8(_) => DType::I8,
            CpuData::U8(_) => DType::U8,
        }
    }
    pub fn len(&self) -> usize {
        crate::with_cpu_vec!(self, |v| v.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Device data.
#[derive(Debug)]
pub enum StorageData {
    Cpu(CpuData),
    /// Boxed: a device buffer handle is several times the size of a host `Vec`, and every
    /// storage (most of them on the CPU) would carry its size.
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaData>),
}

/// What keeps memory ferrograd does not own alive (a numpy array, a DLPack producer's
/// tensor): a [`Storage`] over it holds this until it is dropped.
pub struct Owner(pub Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Owner(..)")
    }
}

/// A buffer shared by every view of it.
#[derive(Debug)]
pub struct Storage {
    data: RwLock<StorageData>,
    /// Set on a buffer over memory another library owns: its `Vec` is never freed,
    /// reallocated or given to the pool, and this is dropped after it is forgotten.
    owner: Option<Owner>,
    /// Memory its owner made read-only (a JAX array, a read-only numpy array): writes are
    /// refused.
    read_only: bool,
    version: AtomicU64,
    /// How many in-place writes a gradient tape recorded into this buffer: a tracked handle
    /// made before the last one no longer stands for what the buffer holds (see
    /// [`crate::Tensor::check_current`]).
    tape_writes: AtomicU64,
    /// Where each recent recorded in-place write went, with the count it took `tape_writes`
    /// to (the last [`TAPE_LOG`] of them).
    tape_log: std::sync::Mutex<Vec<(u64, Footprint)>>,
    /// Handles over this buffer that view ops made or viewed (and the handles they continue
    /// as): what a recorded in-place write through one of them rebases (see
    /// [`crate::autograd::rebase`]). Weak, so a dropped view is no longer followed.
    views: std::sync::Mutex<Vec<std::sync::Weak<crate::tensor::TensorImpl>>>,
    /// Whether `views` was ever non-empty: lets writes into buffers without views skip it.
    viewed: std::sync::atomic::AtomicBool,
    /// The id of the ambient key (PyTorch's `requires_grad`) that has a leaf over this buffer
    /// (0: none): recorded in-place writes into it are refused, as PyTorch refuses them.
    leaf_key: AtomicU64,
    device: Device,
    dtype: DType,
    bytes: usize,
}

impl Storage {
    pub fn cpu(data: CpuData) -> Storage {
        let dtype = data.dtype();
        let bytes = data.len() * dtype.size_in_bytes();
        memory::on_alloc(Device::Cpu, bytes);
        Storage {
            data: RwLock::new(StorageData::Cpu(data)),
            owner: None,
            read_only: false,
            version: AtomicU64::new(0),
            tape_writes: AtomicU64::new(0),
            tape_log: std::sync::Mutex::new(Vec::new()),
            views: std::sync::Mutex::new(Vec::new()),
            viewed: std::sync::atomic::AtomicBool::new(false),
            leaf_key: AtomicU64::new(0),
            device: Device::Cpu,
            dtype,
            bytes,
        }
    }

    /// A buffer on `device` (the data must live there).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_variables))]
    pub(crate) fn new(data: StorageData, device: Device) -> Storage {
        match data {
            StorageData::Cpu(d) => Storage::cpu(d),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(d) => {
                let dtype = d.dtype();
                let bytes = d.len() * dtype.size_in_bytes();
                memory::on_alloc(device, bytes);
                Storage {
                    data: RwLock::new(StorageData::Cuda(d)),
                    owner: None,
                    read_only: false,
                    version: AtomicU64::new(0),
                    tape_writes: AtomicU64::new(0),
                    tape_log: std::sync::Mutex::new(Vec::new()),
                    views: std::sync::Mutex::new(Vec::new()),
                    viewed: std::sync::atomic::AtomicBool::new(false),
                    leaf_key: AtomicU64::new(0),
                    device,
                    dtype,
                    bytes,
                }
            }
        }
    }

    /// A CPU buffer over memory that `owner` keeps alive (zero-copy import from numpy or
    /// DLPack). It is not counted as memory ferrograd allocated.
    ///
    /// # Safety
    ///
    /// `data`'s `Vec` must point to `len` initialised elements (for `bool`, each 0 or 1),
    /// aligned for its type, that stay valid until `owner` is dropped. It need not come from
    /// Rust's allocator: this storage never frees, grows or moves it.
    pub unsafe fn cpu_borrowed(data: CpuData, owner: Owner, read_only: bool) -> Storage {
        let dtype = data.dtype();
        let bytes = data.len() * dtype.size_in_bytes();
        Storage {
            data: RwLock::new(StorageData::Cpu(data)),
            owner: Some(owner),
            read_only,
            version: AtomicU64::new(0),
            tape_writes: AtomicU64::new(0),
            tape_log: std::sync::Mutex::new(Vec::new()),
            views: std::sync::Mutex::new(Vec::new()),
            viewed: std::sync::atomic::AtomicBool::new(false),
            leaf_key: AtomicU64::new(0),
            device: Device::Cpu,
            dtype,
            bytes,
        }
    }

    /// Whether this buffer is memory another library owns (see [`Storage::cpu_borrowed`]).
    pub fn is_borrowed(&self) -> bool {
        self.owner.is_some()
    }

    pub fn device(&self) -> Device {
        self.device
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Bytes this buffer holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Read access. A poisoned lock only means a panic elsewhere; the data is still whole.
    pub fn read(&self) -> RwLockReadGuard<'_, StorageData> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access for in-place ops (`op` names the one asking); bumps the version counter.
    /// Refused for read-only memory another library owns.
    pub fn write(&self, op: &str) -> crate::error::Result<RwLockWriteGuard<'_, StorageData>> {
        if self.read_only {
            return Err(crate::error::Error::invalid(
                op,
                "this tensor shares read-only memory with another library (a JAX array or a \
                 read-only numpy array): clone() it before writing",
            ));
        }
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(self.data.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether writes into this buffer are refused (see [`Storage::write`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// How many times this buffer has been written in place.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// How many in-place writes into this buffer a gradient tape recorded.
    pub(crate) fn tape_writes(&self) -> u64 {
        self.tape_writes.load(Ordering::Acquire)
    }

    /// Notes a recorded in-place write into the elements `at` covers.
    pub(crate) fn note_tape_write(&self, at: Footprint) {
        let mut log = self.tape_log.lock().unwrap_or_else(|e| e.into_inner());
        let count = self.tape_writes.fetch_add(1, Ordering::AcqRel) + 1;
        if log.len() == TAPE_LOG {
            log.remove(0);
        }
        log.push((count, at));
    }

    /// Whether a recorded in-place write after the `seen`-th one may have touched the
    /// elements `at` covers (true as well when the log no longer reaches back that far).
    pub(crate) fn written_since(&self, seen: u64, at: &Footprint) -> bool {
        if self.tape_writes() == seen {
            return false;
        }
        let log = self.tape_log.lock().unwrap_or_else(|e| e.into_inner());
        match log.first() {
            Some(&(first, _)) if first <= seen + 1 => {
                log.iter().any(|(c, w)| *c > seen && w.may_overlap(at))
            }
            _ => true,
        }
    }

    /// Remembers `handles` (views over this buffer, or the tensors they view) for
    /// [`crate::autograd::rebase`].
    pub(crate) fn register_views(&self, handles: &[&crate::Tensor]) {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        if views.len() >= 16 && views.len().is_power_of_two() {
            views.retain(|w| w.strong_count() > 0);
        }
        for h in handles {
            let weak = std::sync::Arc::downgrade(&h.0);
            if !views.iter().any(|w| w.ptr_eq(&weak)) {
                views.push(weak);
            }
        }
        self.viewed.store(true, Ordering::Release);
    }

    /// Whether view ops ever made a view of this buffer.
    pub(crate) fn has_views(&self) -> bool {
        self.viewed.load(Ordering::Acquire)
    }

    /// The registered handles that are still alive.
    pub(crate) fn views(&self) -> Vec<crate::Tensor> {
        let views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        views
            .iter()
            .filter_map(|w| w.upgrade().map(crate::Tensor))
            .collect()
    }

    pub(crate) fn leaf_key(&self) -> u64 {
        self.leaf_key.load(Ordering::Acquire)
    }

    pub(crate) fn set_leaf_key(&self, key_id: u64) {
        self.leaf_key.store(key_id, Ordering::Release);
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        let data = self.data.get_mut().unwrap_or_else(|e| e.into_inner());
        let data = std::mem::replace(data, StorageData::Cpu(CpuData::Bool(Vec::new())));
        if let Some(owner) = self.owner.take() {
            // memory another library owns: forgotten, then released by its owner
            #[allow(irrefutable_let_patterns)]
            if let StorageData::Cpu(d) = data {
                crate::with_cpu_vec!(d, |v| std::mem::forget(v));
            }
            drop(owner);
            return;
        }
        memory::on_free(self.device, self.bytes);
        #[allow(irrefutable_let_patterns)]
        if let StorageData::Cpu(d) = data {
            pool::give(d);
        }
    }
}

/// Conversion between `Vec<T>` and the dtype-tagged CPU buffer.
pub trait IntoCpuData: Sized {
    fn into_cpu_data(v: Vec<Self>) -> CpuData;
    fn from_cpu_data(d: &CpuData) -> Vec<Self>;
}

macro_rules! into_cpu {
    ($t:ty, $variant:ident) => {
        impl IntoCpuData for $t {
            fn into_cpu_data(v: Vec<Self>) -> CpuData {
                CpuData::$variant(v)
            }
            fn from_cpu_data(d: &CpuData) -> Vec<Self> {
                match d {
                    CpuData::$variant(v) => v.clone(),
                    _ => Vec::new(),
                }
            }
        }
    };
}
into_cpu!(f32, F32);
into_cpu!(f64, F64);
into_cpu!(i64, I64);
into_cpu!(bool, Bool);
into_cpu!(half::f16, F16);
into_cpu!(half::bf16, BF16);
into_cpu!(i32, I32);
into_cpu!(i16, I16);
into_cpu!(i8, I8);
into_cpu!(u8, U8);
