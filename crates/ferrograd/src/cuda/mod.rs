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
pub mod nccl;
mod norm;
pub(crate) mod optim;
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
    I16(CudaSlice<i16>),
    I8(CudaSlice<i8>),
    U8(CudaSlice<u8>),
}

/// cudarc frees a buffer (`cuMemFreeAsync`) without making its context current first: on a
/// thread that never used the device (a data-loading thread, a finaliser run elsewhere) the
/// free fails with `CUDA_ERROR_INVALID_CONTEXT`, the memory leaks and the error is reported
/// by a later, unrelated call. So the context is made current before the buffer goes.
impl Drop for CudaData {
    fn drop(&mut self) {
        #[cfg(not(feature = "cuda-emulator"))]
        {
            let ctx = match self {
                CudaData::F32(s) => s.stream().context(),
                CudaData::F64(s) => s.stream().context(),
                CudaData::I64(s) => s.stream().context(),
                CudaData::Bool(s) | CudaData::U8(s) => s.stream().context(),
                CudaData::F16(s) | CudaData::BF16(s) => s.stream().context(),
                CudaData::I32(s) => s.stream().context(),
                CudaData::I16(s) => s.stream().context(),
                CudaData::I8(s) => s.stream().context(),
            };
            // not `bind_to_thread`: it reports (and clears) an error recorded earlier instead
            // of binding, which would leave this free failing too
            use cudarc::driver::result::ctx as current;
            if current::get_current().ok().flatten() != Some(ctx.cu_ctx()) {
                // SAFETY: the context is alive: the buffer's stream holds it
                if let Err(e) = unsafe { current::set_current(ctx.cu_ctx()) } {
                    ctx.record_err::<()>(Err(e));
                }
            }
        }
    }
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
            CudaData::I16(_) => DType::I16,
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
            CudaData::I16(v) => v.len(),
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
/// error, without printing the panic. Nests: a `guarded` call inside another on the same
/// thread (the first use of a device compiles its kernels) runs under the outer one's silent
/// hook instead of waiting for the lock the outer one holds.
fn guarded<R>(op: &str, f: impl FnOnce() -> R) -> Result<R> {
    use std::cell::Cell;
    thread_local!(static DEPTH: Cell<u32> = const { Cell::new(0) });
    static HOOK: Mutex<()> = Mutex::new(());
    let outermost = DEPTH.with(|d| d.get()) == 0;
    let _one_at_a_time = outermost.then(|| HOOK.lock().unwrap_or_else(|e| e.into_inner()));
    let previous = outermost.then(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        previous
    });
    DEPTH.with(|d| d.set(d.get() + 1));
    let out = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    if let Some(previous) = previous {
        std::panic::set_hook(previous);
    }
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
        // SAFETY: every buffer of this device is made, used and freed on its one stream,
        // in order, so cudarc's per-buffer events (two made per allocation, recorded per
        // launch, for work spread over several streams) would only add driver calls to
        // every op.
        unsafe { ctx.disable_event_tracking() };
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

/// The kernels, compiled for the device's architecture (machine code, so the driver loads
/// them without compiling again).
#[cfg(not(feature = "cuda-emulator"))]
fn load_kernels(op: &str, ctx: &Arc<CudaContext>) -> Result<Arc<CudaModule>> {
    let (major, minor) = ctx.compute_capability().map_err(|e| err(op, e))?;
    let image = compile_cached(KERNEL_SOURCE, &format!("sm_{major}{minor}"), "the kernels")?;
    load_image(op, ctx, &image)
}

/// Loads a module image (CUBIN, or PTX ending in a NUL byte) into `ctx`.
#[cfg(not(feature = "cuda-emulator"))]
pub(crate) fn load_image(
    op: &str,
    ctx: &Arc<CudaContext>,
    image: &[u8],
) -> Result<Arc<CudaModule>> {
    ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec()))
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

/// The names of the kernels the op tables refer to (`unary_exp_f32`, `binary_add_i64`, ...):
/// each must be defined in `kernels.cu`.
pub fn table_kernel_names() -> Vec<&'static str> {
    elementwise::table_kernels()
}

/// What NVRTC made of a source for one architecture: the PTX and, for a real architecture
/// (`sm_XY`), the machine code the driver loads as it is.
struct Built {
    ptx: String,
    cubin: Option<Vec<u8>>,
}

fn check_arch(what: &str, arch: &str) -> Result<()> {
    if arch.is_empty() || !arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::invalid(
            what,
            format!("arch must be an architecture name such as \"sm_90\", got {arch:?}"),
        ));
    }
    Ok(())
}

/// The options every kernel is compiled with. `--split-compile=0` spreads the optimisation
/// over the host's cores (NVRTC 12.1 and later; an older NVRTC compiles without it).
fn nvrtc_options(arch: &str, split: bool) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++14".to_string(),
    ];
    if split {
        o.push("--split-compile=0".to_string());
    }
    o
}

/// Compiles `source` for `arch` with NVRTC; `what` names the source in errors.
fn nvrtc_build(source: &str, arch: &str, what: &str) -> Result<Built> {
    use cudarc::nvrtc::{result, sys};
    let c_src = std::ffi::CString::new(source)
        .map_err(|_| Error::invalid("nvrtc", format!("{what}: the source holds a NUL byte")))?;
    // NVRTC's NUL-ended text (PTX, the log) as a String
    let text = |t: Vec<std::ffi::c_char>| {
        let bytes: Vec<u8> = t.iter().map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes)
            .trim_end_matches('\0')
            .to_string()
    };
    let attempt = |split: bool| -> std::result::Result<Built, (sys::nvrtcResult, String)> {
        let prog = result::create_program(&c_src, None).map_err(|e| (e.0, String::new()))?;
        // SAFETY: `prog` was created above and is destroyed once, after its last use.
        unsafe {
            let out = (|| {
                if let Err(e) = result::compile_program(prog, &nvrtc_options(arch, split)) {
                    let log = result::get_program_log(prog).map(text).unwrap_or_default();
                    return Err((e.0, log));
                }
                let ptx = text(result::get_ptx(prog).map_err(|e| (e.0, String::new()))?);
                let mut size = 0usize;
                let cubin = if sys::nvrtcGetCUBINSize(prog, &mut size)
                    == sys::nvrtcResult::NVRTC_SUCCESS
                    && size > 0
                {
                    let mut buf = vec![0u8; size];
                    (sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                        == sys::nvrtcResult::NVRTC_SUCCESS)
                        .then_some(buf)
                } else {
                    None
                };
                Ok(Built { ptx, cubin })
            })();
            let _ = result::destroy_program(prog);
            out
        }
    };
    guarded("nvrtc", || match attempt(true) {
        Err((sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION, _)) => attempt(false),
        other => other,
    })?
    .map_err(|(code, log)| {
        Error::device(
            "nvrtc",
            format!("{what} failed to compile for {arch}: {code:?}\n{log}"),
        )
    })
}

/// Compiles every kernel for `arch` (e.g. `"sm_90"`) with NVRTC and returns the PTX.
pub fn compile_kernels(arch: &str) -> Result<String> {
    check_arch("compile_kernels", arch)?;
    nvrtc_build(KERNEL_SOURCE, arch, "the kernels").map(|b| b.ptx)
}

/// Compiles `source` (CUDA C, e.g. a generated fused kernel) for `arch` with the options of
/// the engine's kernels; returns the PTX.
pub fn compile_source(source: &str, arch: &str) -> Result<String> {
    check_arch("compile_source", arch)?;
    nvrtc_build(source, arch, "a generated kernel").map(|b| b.ptx)
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
/// The module image of `source` for `arch` (CUBIN for a real architecture, else NUL-ended
/// PTX), from memory, then the disk cache (keyed by source, options, architecture and NVRTC
/// version), then NVRTC (`what` names the source in errors). The first process on a machine
/// pays the compilation; later ones load the file.
pub(crate) fn compile_cached(source: &str, arch: &str, what: &str) -> Result<Arc<Vec<u8>>> {
    type Images = HashMap<(u64, String), Arc<Vec<u8>>>;
    static MEMORY: OnceLock<Mutex<Images>> = OnceLock::new();
    check_arch("compile", arch)?;
    let mut h = DefaultHasher::new();
    source.hash(&mut h);
    let key = (h.finish(), arch.to_string());
    let mem = MEMORY.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(p) = mem.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let version = guarded("nvrtc", || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two plain out-parameters.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        (major, minor)
    })?;
    format!("{:?} {version:?}", nvrtc_options(arch, true)).hash(&mut h);
    let file = cache_dir().map(|d| d.join(format!("{arch}-{:016x}.bin", h.finish())));
    let image = match file.as_ref().and_then(|f| std::fs::read(f).ok()) {
        Some(p) if !p.is_empty() => p,
        _ => {
            let built = nvrtc_build(source, arch, what)?;
            let image = built.cubin.unwrap_or_else(|| {
                let mut p = built.ptx.into_bytes();
                p.push(0);
                p
            });
            if let Some(f) = &file {
                if let Some(dir) = f.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, &image).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
            image
        }
    };
    let image = Arc::new(image);
    mem.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, image.clone());
    Ok(image)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The first use of a device compiles its kernels from inside `guarded`, which guards the
    /// compilation too: a nested call must run, not wait for the outer call's lock.
    #[test]
    fn guarded_calls_nest_and_still_catch_panics() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let inner = guarded("outer", || guarded("inner", || 7).unwrap()).unwrap();
            let caught = guarded("outer", || guarded("inner", || panic!("no library")));
            tx.send((inner, caught.map(|r| r.is_err()))).unwrap();
        });
        let (inner, caught) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a nested guarded call deadlocked");
        assert_eq!(inner, 7);
        assert!(caught.unwrap());
        // the hook was restored: later guarded calls work
        assert_eq!(guarded("again", || 1).unwrap(), 1);
    }
}
