//! The CUDA backend: devices through `cudarc` (libraries loaded at run time, so the crate
//! builds and runs where no CUDA exists), kernels compiled by NVRTC for each device's
//! architecture and cached in memory and on disk, matrix products through cuBLAS, memory from
//! the driver's stream-ordered pool (frees are queued on the stream, never synchronous).
//!
//! One stream per device: work is queued and only a read by the host synchronises.

mod attention;
mod elementwise;
#[cfg(feature = "cuda-emulator")]
pub(crate) mod emulator;
pub(crate) mod fused;
mod index;
mod launch;
mod linalg;
mod memory;
mod norm;
mod reduce;
mod window;

// the driver and cuBLAS: cudarc's, or host-memory stand-ins that run the kernels on the CPU
#[cfg(not(feature = "cuda-emulator"))]
pub(crate) use cudarc as rt;
#[cfg(feature = "cuda-emulator")]
pub(crate) use emulator as rt;

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nvrtc::CompileOptions;
use rt::cublas::CudaBlas;
use rt::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};

use crate::backend::{Backend, Held};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{Activation, BinaryOp, CmpOp, ReduceKind, UnaryOp};
use crate::storage::{CpuData, Storage, StorageData};
use crate::window::Window;

/// Every kernel's CUDA C source.
pub const KERNEL_SOURCE: &str = include_str!("kernels.cu");

/// A device buffer of one dtype (bool is stored as bytes).
#[derive(Debug)]
pub enum CudaData {
    F32(CudaSlice<f32>),
    F64(CudaSlice<f64>),
    I64(CudaSlice<i64>),
    Bool(CudaSlice<u8>),
    /// float16 and bfloat16 as their bits (kernels convert to and from float)
    F16(CudaSlice<u16>),
    BF16(CudaSlice<u16>),
    I32(CudaSlice<i32>),
    I8(CudaSlice<i8>),
    U8(CudaSlice<u8>),
}

impl CudaData {
    pub fn dtype(&self) -> DType {
        match self {
            CudaData::F32(_) => DType::F32,
            CudaData::F64(_) => DType::F64,
            CudaData::I64(_) => DType::I64,
            CudaData::Bool(_) => DType::Bool,
            CudaData::F16(_) => DType::F16,
            CudaData::BF16(_) => DType::BF16,
            CudaData::I32(_) => DType::I32,
            CudaData::I8(_) => DType::I8,
            CudaData::U8(_) => DType::U8,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            CudaData::F32(v) => v.len(),
            CudaData::F64(v) => v.len(),
            CudaData::I64(v) => v.len(),
            CudaData::Bool(v) => v.len(),
            CudaData::F16(v) | CudaData::BF16(v) => v.len(),
            CudaData::I32(v) => v.len(),
            CudaData::I8(v) => v.len(),
            CudaData::U8(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub(crate) fn err(op: &str, e: impl std::fmt::Debug) -> Error {
    Error::device(op, format!("CUDA error: {e:?}"))
}

/// Runs `f`, turning a panic (cudarc panics when a CUDA library cannot be loaded) into an
/// error, without printing the panic.
fn guarded<R>(op: &str, f: impl FnOnce() -> R) -> Result<R> {
    static HOOK: Mutex<()> = Mutex::new(());
    let _one_at_a_time = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    out.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".to_string());
        Error::device(op, format!("CUDA is not available: {msg}"))
    })
}

/// How many CUDA devices the driver reports (0 when there is no driver).
pub fn device_count() -> usize {
    guarded("cuda", || CudaContext::device_count().unwrap_or(0))
        .unwrap_or(0)
        .max(0) as usize
}

/// Whether at least one CUDA device can be used.
pub fn is_available() -> bool {
    device_count() > 0
}

/// One device: its context, stream, cuBLAS handle and compiled kernels.
pub(crate) struct Gpu {
    ordinal: usize,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) blas: CudaBlas,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
}

// the cuBLAS handle is used from one stream only and guarded by the engine's call structure
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

static GPUS: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();

/// The device `ordinal` if it has been initialised.
fn initialised(ordinal: usize) -> Option<Arc<Gpu>> {
    GPUS.get()?
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&ordinal)
        .cloned()
}

/// The device `ordinal`, initialised on first use.
pub(crate) fn gpu(op: &str, ordinal: usize) -> Result<Arc<Gpu>> {
    if let Some(g) = initialised(ordinal) {
        return Ok(g);
    }
    crate::Device::Cuda(ordinal).check_available(op)?;
    let g = guarded(op, || -> Result<Gpu> {
        let ctx = CudaContext::new(ordinal).map_err(|e| err(op, e))?;
        let module = load_kernels(op, &ctx)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(|e| err(op, e))?;
        Ok(Gpu {
            ordinal,
            stream,
            blas,
            module,
            functions: Mutex::new(HashMap::new()),
        })
    })??;
    let g = Arc::new(g);
    GPUS.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ordinal, g.clone());
    Ok(g)
}

/// The kernels, compiled for the device's architecture.
#[cfg(not(feature = "cuda-emulator"))]
fn load_kernels(op: &str, ctx: &Arc<CudaContext>) -> Result<Arc<CudaModule>> {
    let (major, minor) = ctx.compute_capability().map_err(|e| err(op, e))?;
    let ptx = compile_cached(&format!("sm_{major}{minor}"))?;
    ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx))
        .map_err(|e| err(op, e))
}

/// The emulator runs the kernels compiled for the host.
#[cfg(feature = "cuda-emulator")]
fn load_kernels(_op: &str, ctx: &Arc<CudaContext>) -> Result<Arc<CudaModule>> {
    Ok(ctx.module())
}

impl Gpu {
    /// The kernel `name` of `kernels.cu` (looked up once, then cached).
    pub(crate) fn function(&self, name: &'static str) -> Result<CudaFunction> {
        let mut f = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(func) = f.get(name) {
            return Ok(func.clone());
        }
        let func = self.module.load_function(name).map_err(|e| err(name, e))?;
        f.insert(name, func.clone());
        Ok(func)
    }
}

fn compile_options(arch: &str) -> CompileOptions {
    CompileOptions {
        arch: Some(Box::leak(arch.to_string().into_boxed_str())),
        options: vec!["--std=c++14".to_string()],
        ..Default::default()
    }
}

/// The names of the kernels the op tables refer to (`unary_exp_f32`, `binary_add_i64`, ...):
/// each must be defined in `kernels.cu`.
pub fn table_kernel_names() -> Vec<&'static str> {
    elementwise::table_kernels()
}

/// Compiles every kernel for `arch` (e.g. `"sm_90"`) with NVRTC and returns the PTX.
pub fn compile_kernels(arch: &str) -> Result<String> {
    if arch.is_empty() || !arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::invalid(
            "compile_kernels",
            format!("arch must be an architecture name such as \"sm_90\", got {arch:?}"),
        ));
    }
    guarded("nvrtc", || {
        cudarc::nvrtc::compile_ptx_with_opts(KERNEL_SOURCE, compile_options(arch))
            .map(|p| p.to_src())
            .map_err(|e| {
                Error::device("nvrtc", format!("kernels do not compile for {arch}: {e:?}"))
            })
    })?
}

/// Compiles `source` (CUDA C, e.g. a generated fused kernel) for `arch` with the options of
/// the engine's kernels; returns the PTX.
pub fn compile_source(source: &str, arch: &str) -> Result<String> {
    if arch.is_empty() || !arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::invalid(
            "compile_source",
            format!("arch must be an architecture name such as \"sm_90\", got {arch:?}"),
        ));
    }
    guarded("nvrtc", || {
        cudarc::nvrtc::compile_ptx_with_opts(source, compile_options(arch))
            .map(|p| p.to_src())
            .map_err(|e| {
                Error::device(
                    "nvrtc",
                    format!("a kernel does not compile for {arch}: {e:?}"),
                )
            })
    })?
}

fn cache_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("FERROGRAD_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .ok()
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("ferrograd").join("kernels"))
}

#[cfg_attr(feature = "cuda-emulator", allow(dead_code))]
/// PTX for `arch`, from memory, then the disk cache (keyed by source, options and
/// architecture), then NVRTC.
fn compile_cached(arch: &str) -> Result<String> {
    static MEMORY: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let mem = MEMORY.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(p) = mem.lock().unwrap_or_else(|e| e.into_inner()).get(arch) {
        return Ok(p.clone());
    }
    let mut h = DefaultHasher::new();
    KERNEL_SOURCE.hash(&mut h);
    format!("{:?}", compile_options(arch).options).hash(&mut h);
    arch.hash(&mut h);
    let file = cache_dir().map(|d| d.join(format!("{arch}-{:016x}.ptx", h.finish())));
    let ptx = match file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        Some(p) => p,
        None => {
            let p = compile_kernels(arch)?;
            if let Some(f) = &file {
                if let Some(dir) = f.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, &p).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
            p
        }
    };
    mem.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(arch.to_string(), ptx.clone());
    Ok(ptx)
}

/// Waits for all queued work on `cuda:ordinal`.
pub fn synchronize(ordinal: usize) -> Result<()> {
    let g = gpu("synchronize", ordinal)?;
    g.stream.synchronize().map_err(|e| err("synchronize", e))
}

/// Returns cached device memory to the driver (the engine's own figures are unaffected:
/// they count live buffers). A device that was never used has nothing cached: then this does
/// nothing, also where there is no CUDA at all.
pub fn empty_cache(ordinal: usize) -> Result<()> {
    let Some(g) = initialised(ordinal) else {
        return Ok(());
    };
    g.stream.synchronize().map_err(|e| err("empty_cache", e))?;
    #[cfg(feature = "cuda-emulator")]
    return Ok(());
    #[cfg(not(feature = "cuda-emulator"))]
    guarded("empty_cache", || unsafe {
        let mut dev = 0;
        let mut pool = std::ptr::null_mut();
        if cudarc::driver::sys::cuDeviceGet(&mut dev, ordinal as i32)
            == cudarc::driver::sys::CUresult::CUDA_SUCCESS
            && cudarc::driver::sys::cuDeviceGetDefaultMemPool(&mut pool, dev)
                == cudarc::driver::sys::CUresult::CUDA_SUCCESS
        {
            cudarc::driver::sys::cuMemPoolTrimTo(pool, 0);
        }
    })
}

impl Backend for Gpu {
    type Buf = CudaData;

    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }
    fn storage(&self, buf: CudaData) -> Storage {
        Storage::new(StorageData::Cuda(Box::new(buf)), self.device())
    }
    /// CUDA buffers as they are; 0-d CPU tensors (Python scalars) are uploaded.
    fn view<'a>(&self, data: &'a StorageData) -> Result<Held<'a, CudaData>> {
        match data {
            StorageData::Cuda(d) => Ok(Held::Borrowed(d)),
            StorageData::Cpu(c) if c.len() <= 1 => Ok(Held::Owned(memory::upload(self, c)?)),
            StorageData::Cpu(_) => Err(Error::device("cuda", "a CPU buffer reached a CUDA kernel")),
        }
    }
    fn view_mut<'a>(&self, data: &'a mut StorageData) -> Result<&'a mut CudaData> {
        match data {
            StorageData::Cuda(d) => Ok(d),
            StorageData::Cpu(_) => Err(Error::device("cuda", "a CPU buffer reached a CUDA kernel")),
        }
    }

    fn upload(&self, host: &CpuData) -> Result<CudaData> {
        memory::upload(self, host)
    }
    fn download(&self, x: &CudaData, l: &Layout) -> Result<CpuData> {
        memory::download(self, x, l)
    }
    fn fill(&self, n: usize, value: f64, dtype: DType) -> Result<CudaData> {
        memory::fill(self, n, value, dtype)
    }
    fn unary(&self, op: UnaryOp, x: &CudaData, l: &Layout) -> Result<CudaData> {
        elementwise::unary(self, op, x, l)
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &CudaData,
        la: &Layout,
        b: &CudaData,
        lb: &Layout,
    ) -> Result<CudaData> {
        elementwise::binary(self, op, a, la, b, lb)
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &CudaData,
        la: &Layout,
        b: &CudaData,
        lb: &Layout,
    ) -> Result<CudaData> {
        elementwise::compare(self, op, a, la, b, lb)
    }
    fn act_grad(
        &self,
        act: Activation,
        dy: &CudaData,
        ldy: &Layout,
        y: &CudaData,
        ly: &Layout,
    ) -> Result<CudaData> {
        elementwise::act_grad(self, act, dy, ldy, y, ly)
    }
    fn pow_scalar(&self, x: &CudaData, l: &Layout, p: f64) -> Result<CudaData> {
        elementwise::pow_scalar(self, x, l, p)
    }
    fn where_(
        &self,
        c: &CudaData,
        lc: &Layout,
        a: &CudaData,
        la: &Layout,
        b: &CudaData,
        lb: &Layout,
    ) -> Result<CudaData> {
        elementwise::where_(self, c, lc, a, la, b, lb)
    }
    fn cast(&self, x: &CudaData, l: &Layout, to: DType) -> Result<CudaData> {
        memory::cast(self, x, l, to)
    }
    fn write(&self, dst: &mut CudaData, ld: &Layout, src: &CudaData, ls: &Layout) -> Result<()> {
        memory::write(self, dst, ld, src, ls)
    }
    fn binary_assign(
        &self,
        op: BinaryOp,
        dst: &mut CudaData,
        ld: &Layout,
        src: &CudaData,
        ls: &Layout,
    ) -> Result<()> {
        elementwise::binary_assign(self, op, dst, ld, src, ls)
    }
    fn reduce(
        &self,
        kind: ReduceKind,
        x: &CudaData,
        l: &Layout,
        axes: &[usize],
    ) -> Result<CudaData> {
        reduce::reduce(self, kind, x, l, axes)
    }
    fn softmax(&self, x: &CudaData, l: &Layout, axis: usize, log: bool) -> Result<CudaData> {
        reduce::softmax(self, x, l, axis, log)
    }
    fn normalize(
        &self,
        x: &CudaData,
        l: &Layout,
        wb: Option<(&CudaData, &Layout, &CudaData, &Layout)>,
        eps: f64,
    ) -> Result<CudaData> {
        norm::layer_norm(self, x, l, wb, eps)
    }
    fn normalize_grad(
        &self,
        x: &CudaData,
        lx: &Layout,
        w: Option<(&CudaData, &Layout)>,
        dy: &CudaData,
        ldy: &Layout,
        eps: f64,
    ) -> Result<CudaData> {
        norm::layer_norm_grad(self, x, lx, w, dy, ldy, eps)
    }
    fn attention(
        &self,
        q: (&CudaData, &Layout),
        k: (&CudaData, &Layout),
        v: (&CudaData, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<CudaData> {
        attention::attention(self, q, k, v, scale, causal)
    }
    fn attention_grad(
        &self,
        q: (&CudaData, &Layout),
        k: (&CudaData, &Layout),
        v: (&CudaData, &Layout),
        _out: (&CudaData, &Layout),
        dout: (&CudaData, &Layout),
        scale: f64,
        causal: bool,
    ) -> Result<CudaData> {
        attention::attention_grad(self, q, k, v, dout, scale, causal)
    }
    fn softmax_xent(
        &self,
        x: &CudaData,
        lx: &Layout,
        labels: &CudaData,
        ll: &Layout,
    ) -> Result<CudaData> {
        norm::softmax_xent(self, x, lx, labels, ll)
    }
    fn softmax_xent_grad(
        &self,
        x: &CudaData,
        lx: &Layout,
        labels: &CudaData,
        ll: &Layout,
        dy: &CudaData,
        ldy: &Layout,
    ) -> Result<CudaData> {
        norm::softmax_xent_grad(self, x, lx, labels, ll, dy, ldy)
    }
    fn matmul(&self, a: &CudaData, la: &Layout, b: &CudaData, lb: &Layout) -> Result<CudaData> {
        linalg::matmul(self, a, la, b, lb)
    }
    fn gather(
        &self,
        x: &CudaData,
        lx: &Layout,
        idx: &CudaData,
        li: &Layout,
        axis: usize,
    ) -> Result<CudaData> {
        index::gather(self, x, lx, idx, li, axis)
    }
    fn scatter_add(
        &self,
        src: &CudaData,
        ls: &Layout,
        idx: &CudaData,
        li: &Layout,
        axis: usize,
        shape: &[usize],
    ) -> Result<CudaData> {
        index::scatter_add(self, src, ls, idx, li, axis, shape)
    }
    fn unfold(&self, x: &CudaData, l: &Layout, win: &Window, pad: f64) -> Result<CudaData> {
        window::unfold(self, x, l, win, pad)
    }
    fn fold(
        &self,
        cols: &CudaData,
        l: &Layout,
        win: &Window,
        size: (usize, usize),
    ) -> Result<CudaData> {
        window::fold(self, cols, l, win, size)
    }
    fn pool_argmax(&self, x: &CudaData, l: &Layout, win: &Window) -> Result<CudaData> {
        window::pool_argmax(self, x, l, win)
    }
}
