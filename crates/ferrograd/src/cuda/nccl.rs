//! NCCL collectives on device tensors: data-parallel training with one GPU per process.
//!
//! The library is loaded at run time from a path the caller names ([`load`]). The PyPI wheel
//! `nvidia-nccl-cu13` ships `libnccl.so.2`, a name cudarc's NCCL loader never tries, so the
//! Python package finds that file the way it finds NVRTC and cuBLAS and passes its path here;
//! only the dozen entry points below are bound. Every collective is queued on the device's one
//! stream, after the kernels that wrote its input and before those that read its output, so
//! nothing waits on the host; a buffer freed after the call is freed on the same stream, after
//! the collective has run.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `ncclUniqueId`: the bytes one rank makes ([`unique_id`]) and every rank passes to
/// [`Comm::new`] (sent to the others by the caller, over MPI).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId(pub [u8; 128]);

type Status = c_int;
type RawComm = *mut c_void;
type RawStream = *mut c_void;
type Collective = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    RawStream,
) -> Status;

struct Api {
    _lib: libloading::Library,
    version: c_int,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> Status,
    comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> Status,
    comm_destroy: unsafe extern "C" fn(RawComm) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    /// `(send, recv, count, dtype, op, comm, stream)`
    all_reduce: Collective,
    /// `(send, recv, count, dtype, root, comm, stream)`
    broadcast: Collective,
    /// `(send, recv, count, dtype, op, comm, stream)`, `count` elements received per rank
    reduce_scatter: Collective,
    /// `(send, recv, count per rank, dtype, comm, stream)`
    all_gather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        RawComm,
        RawStream,
    ) -> Status,
}

// SAFETY: the library handle and function pointers are immutable after loading, and NCCL's
// entry points may be called from any thread.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

static API: OnceLock<Api> = OnceLock::new();

/// Loads NCCL from `path` (a second call keeps the first library) and returns its version as
/// NCCL encodes it (`major * 10000 + minor * 100 + patch`, e.g. 23203 for 2.32.3).
pub fn load(path: &str) -> Result<i32> {
    if let Some(api) = API.get() {
        return Ok(api.version);
    }
    let op = "nccl";
    // SAFETY: loading NCCL runs only its own initialisers; each symbol is looked up with the
    // signature `nccl.h` declares for it.
    let api = unsafe {
        let lib = libloading::Library::new(path)
            .map_err(|e| Error::device(op, format!("cannot load NCCL from {path}: {e}")))?;
        fn sym<F: Copy>(lib: &libloading::Library, name: &str) -> Result<F> {
            let cname = format!("{name}\0");
            // SAFETY: the caller names the symbol's C signature as `F`
            unsafe { lib.get::<F>(cname.as_bytes()) }
                .map(|f| *f)
                .map_err(|e| Error::device("nccl", format!("the NCCL library has no {name}: {e}")))
        }
        let get_version: unsafe extern "C" fn(*mut c_int) -> Status = sym(&lib, "ncclGetVersion")?;
        let mut version = 0;
        if get_version(&mut version) != 0 {
            return Err(Error::device(op, format!("ncclGetVersion failed ({path})")));
        }
        Api {
            version,
            get_unique_id: sym(&lib, "ncclGetUniqueId")?,
            comm_init_rank: sym(&lib, "ncclCommInitRank")?,
            comm_destroy: sym(&lib, "ncclCommDestroy")?,
            error_string: sym(&lib, "ncclGetErrorString")?,
            all_reduce: sym(&lib, "ncclAllReduce")?,
            broadcast: sym(&lib, "ncclBroadcast")?,
            reduce_scatter: sym(&lib, "ncclReduceScatter")?,
            all_gather: sym(&lib, "ncclAllGather")?,
            _lib: lib,
        }
    };
    Ok(API.get_or_init(|| api).version)
}

fn api(op: &str) -> Result<&'static Api> {
    API.get().ok_or_else(|| {
        Error::device(
            op,
            "NCCL is not loaded: install nvidia-nccl-cu13 (pip) and call \
             init_process_group(\"nccl\")",
        )
    })
}

/// Turns an NCCL status into a result naming `op` and NCCL's own explanation.
fn check(api: &Api, op: &str, status: Status) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any status
    let text = unsafe { CStr::from_ptr((api.error_string)(status)) };
    Err(Error::device(
        op,
        format!("NCCL error {status}: {}", text.to_string_lossy()),
    ))
}

/// A new unique id for [`Comm::new`] (made by one rank; needs the library, not a GPU).
pub fn unique_id() -> Result<UniqueId> {
    let api = api("nccl unique_id")?;
    let mut id = UniqueId([0; 128]);
    // SAFETY: `id` is a writable ncclUniqueId
    check(api, "nccl unique_id", unsafe {
        (api.get_unique_id)(&mut id)
    })?;
    Ok(id)
}

/// A reduction, with NCCL's `ncclRedOp_t` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
    Avg = 4,
}

impl ReduceOp {
    /// `"sum"`, `"prod"` (or `"product"`), `"max"`, `"min"`, `"mean"` (or `"avg"`).
    pub fn parse(op: &str, name: &str) -> Result<ReduceOp> {
        Ok(match name {
            "sum" => ReduceOp::Sum,
            "prod" | "product" => ReduceOp::Prod,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            "mean" | "avg" => ReduceOp::Avg,
            _ => {
                return Err(Error::invalid(
                    op,
                    format!("op must be sum, prod, max, min or mean, got {name:?}"),
                ))
            }
        })
    }
}

/// NCCL's `ncclDataType_t` for `dtype`.
#[cfg_attr(feature = "cuda-emulator", allow(dead_code))]
fn nccl_dtype(op: &str, dtype: DType) -> Result<c_int> {
    Ok(match dtype {
        DType::I8 => 0,
        DType::U8 | DType::Bool => 1,
        DType::I32 => 2,
        DType::I64 => 4,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::F64 => 8,
        DType::BF16 => 9,
        d => {
            return Err(Error::dtype(
                op,
                format!("NCCL has no {d} collectives; cast the tensor first"),
            ))
        }
    })
}

/// A communicator: this process's rank among `size`, on CUDA device `ordinal`.
pub struct Comm {
    raw: RawComm,
    ordinal: usize,
    rank: usize,
    size: usize,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the engine
// issues collectives from the thread that holds the Python interpreter.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    /// Joins the communicator `id` as `rank` of `size`, on CUDA device `ordinal`. Every rank
    /// must call this with the same `id` and `size` (it returns when all have joined).
    pub fn new(id: &UniqueId, size: usize, rank: usize, ordinal: usize) -> Result<Comm> {
        let op = "init_process_group";
        if size == 0 || rank >= size {
            return Err(Error::invalid(
                op,
                format!("rank {rank} is not below the world size {size}"),
            ));
        }
        let api = api(op)?;
        imp::bind(op, ordinal)?;
        let mut raw: RawComm = std::ptr::null_mut();
        // SAFETY: `raw` receives the communicator; `id` is passed by value as nccl.h declares
        check(api, op, unsafe {
            (api.comm_init_rank)(&mut raw, size as c_int, *id, rank as c_int)
        })?;
        Ok(Comm {
            raw,
            ordinal,
            rank,
            size,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// Reduces `t` over every rank, in place.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<()> {
        self.in_place("all_reduce", t, |api| api.all_reduce, op as c_int)
    }

    /// Copies `t` of rank `root` into `t` on every other rank.
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Result<()> {
        self.check_rank("broadcast", root)?;
        self.in_place("broadcast", t, |api| api.broadcast, root as c_int)
    }

    /// Runs the collective `pick` chooses on `t` as both its input and its output, with `arg`
    /// (the reduction, or the root) as its fifth argument.
    fn in_place(
        &self,
        name: &str,
        t: &Tensor,
        pick: impl Fn(&Api) -> Collective,
        arg: c_int,
    ) -> Result<()> {
        let api = api(name)?;
        let b = imp::buffer(name, "tensor", t, self.ordinal, true)?;
        // SAFETY: `b.ptr` addresses `b.count` elements of `b.dtype` on this communicator's
        // device, alive until the stream has run the collective (see the module's notes)
        check(api, name, unsafe {
            pick(api)(
                b.ptr as *const c_void,
                b.ptr as *mut c_void,
                b.count,
                b.dtype,
                arg,
                self.raw,
                b.stream,
            )
        })
    }

    /// Writes every rank's `input` into `output` (`size` times its elements), in rank order.
    pub fn all_gather(&self, input: &Tensor, output: &Tensor) -> Result<()> {
        let name = "all_gather";
        let api = api(name)?;
        let i = imp::buffer(name, "input", input, self.ordinal, false)?;
        let o = imp::buffer(name, "output", output, self.ordinal, true)?;
        self.check_pair(name, &i, &o, i.count * self.size, o.count)?;
        // SAFETY: as in `in_place`; `output` holds `size * count` elements
        check(api, name, unsafe {
            (api.all_gather)(
                i.ptr as *const c_void,
                o.ptr as *mut c_void,
                i.count,
                i.dtype,
                self.raw,
                i.stream,
            )
        })
    }

    /// Reduces `input` (`size` blocks) over every rank and writes block `rank` to `output`.
    pub fn reduce_scatter(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<()> {
        let name = "reduce_scatter";
        let api = api(name)?;
        let i = imp::buffer(name, "input", input, self.ordinal, false)?;
        let o = imp::buffer(name, "output", output, self.ordinal, true)?;
        self.check_pair(name, &i, &o, i.count, o.count * self.size)?;
        // SAFETY: as in `all_gather`
        check(api, name, unsafe {
            (api.reduce_scatter)(
                i.ptr as *const c_void,
                o.ptr as *mut c_void,
                o.count,
                o.dtype,
                op as c_int,
                self.raw,
                o.stream,
            )
        })
    }

    fn check_rank(&self, op: &str, r: usize) -> Result<()> {
        if r >= self.size {
            return Err(Error::invalid(
                op,
                format!("rank {r} is out of range for world size {}", self.size),
            ));
        }
        Ok(())
    }

    fn check_pair(
        &self,
        op: &str,
        i: &imp::Buffer,
        o: &imp::Buffer,
        want: usize,
        got: usize,
    ) -> Result<()> {
        if i.dtype != o.dtype {
            return Err(Error::dtype(op, "input and output must have one dtype"));
        }
        if want != got {
            return Err(Error::shape(
                op,
                format!(
                    "output must hold world size ({}) times the input's elements: \
                     {want} != {got}",
                    self.size
                ),
            ));
        }
        Ok(())
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        if let (Some(api), false) = (API.get(), self.raw.is_null()) {
            // SAFETY: `raw` came from ncclCommInitRank and is destroyed once
            unsafe { (api.comm_destroy)(self.raw) };
        }
    }
}

#[cfg(not(feature = "cuda-emulator"))]
mod imp {
    use super::*;
    use cudarc::driver::DevicePtr;

    /// A device buffer as NCCL takes it.
    pub(super) struct Buffer {
        pub(super) ptr: u64,
        pub(super) count: usize,
        pub(super) dtype: c_int,
        pub(super) stream: RawStream,
    }

    /// Makes device `ordinal`'s context current on this thread (NCCL works on the current
    /// device).
    pub(super) fn bind(op: &str, ordinal: usize) -> Result<()> {
        let g = crate::cuda::gpu(op, ordinal)?;
        g.stream
            .context()
            .bind_to_thread()
            .map_err(|e| crate::cuda::err(op, e))
    }

    /// The address, element count and dtype of `t`, a contiguous tensor on device `ordinal`
    /// (`write`: it will be written, so it must not be read-only).
    pub(super) fn buffer(
        op: &str,
        arg: &str,
        t: &Tensor,
        ordinal: usize,
        write: bool,
    ) -> Result<Buffer> {
        if t.device() != Device::Cuda(ordinal) {
            return Err(Error::device(
                op,
                format!(
                    "{arg} must be on cuda:{ordinal} (this process's NCCL device), got {}",
                    t.device()
                ),
            ));
        }
        if !t.layout().is_contiguous() {
            return Err(Error::invalid(op, format!("{arg} must be contiguous")));
        }
        let dtype = nccl_dtype(op, t.dtype())?;
        if write {
            drop(t.storage().write(op)?);
        }
        bind(op, ordinal)?;
        let g = crate::cuda::gpu(op, ordinal)?;
        let data = t.storage().read();
        let crate::storage::StorageData::Cuda(d) = &*data else {
            return Err(Error::device(op, format!("{arg} is not in device memory")));
        };
        let s = &g.stream;
        use crate::cuda::CudaData as D;
        let base = match &**d {
            D::F32(v) => v.device_ptr(s).0,
            D::F64(v) => v.device_ptr(s).0,
            D::I64(v) => v.device_ptr(s).0,
            D::Bool(v) | D::U8(v) => v.device_ptr(s).0,
            D::F16(v) | D::BF16(v) => v.device_ptr(s).0,
            D::I32(v) => v.device_ptr(s).0,
            D::I16(v) => v.device_ptr(s).0,
            D::I8(v) => v.device_ptr(s).0,
        };
        Ok(Buffer {
            ptr: base + (t.layout().offset() * t.dtype().size_in_bytes()) as u64,
            count: t.numel(),
            dtype,
            stream: s.cu_stream() as RawStream,
        })
    }
}

/// The emulator keeps "device" buffers in host memory, which NCCL cannot address.
#[cfg(feature = "cuda-emulator")]
mod imp {
    use super::*;

    pub(super) struct Buffer {
        pub(super) ptr: u64,
        pub(super) count: usize,
        pub(super) dtype: c_int,
        pub(super) stream: RawStream,
    }

    fn no(op: &str) -> Error {
        Error::device(
            op,
            "NCCL needs a GPU; this build runs CUDA on the host emulator",
        )
    }

    pub(super) fn bind(op: &str, _ordinal: usize) -> Result<()> {
        Err(no(op))
    }

    pub(super) fn buffer(
        op: &str,
        _arg: &str,
        _t: &Tensor,
        _ordinal: usize,
        _write: bool,
    ) -> Result<Buffer> {
        Err(no(op))
    }
}
