//! Starting kernels: layouts as the kernels read them, launch grids, device allocations, and
//! [`Launch`], the one way a kernel is started.

use super::rt::driver::{CudaFunction, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg};
use super::{err, CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// The most axes a strided kernel argument describes.
pub(crate) const MAX_DIMS: usize = 8;

/// A layout as the kernels read it (`struct Strided` in `kernels.cu`): `ndim == -1` is
/// contiguous from `offset`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided {
    ndim: i32,
    offset: i64,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}
// SAFETY: `repr(C)` with the field layout of `struct Strided` in kernels.cu.
unsafe impl DeviceRepr for Strided {}

/// The full description of a layout (kernels that need every axis, contiguous or not).
pub(crate) fn strided_full(op: &str, l: &Layout) -> Result<Strided> {
    if l.ndim() > MAX_DIMS {
        return Err(Error::shape(
            op,
            format!(
                "CUDA kernels take at most {MAX_DIMS} dimensions, got shape {:?}",
                l.shape()
            ),
        ));
    }
    let mut s = Strided {
        ndim: l.ndim() as i32,
        offset: l.offset() as i64,
        shape: [1; MAX_DIMS],
        strides: [0; MAX_DIMS],
    };
    for d in 0..l.ndim() {
        s.shape[d] = l.shape()[d] as i64;
        s.strides[d] = l.strides()[d] as i64;
    }
    Ok(s)
}

/// A layout for elementwise kernels: contiguous ones take the kernels' fast path; others are
/// described with their axes coalesced (size-1 axes dropped, axes that step as one merged), so
/// views of any rank whose memory pattern has at most [`MAX_DIMS`] axes can be read.
pub(crate) fn strided(op: &str, l: &Layout) -> Result<Strided> {
    if l.is_contiguous() {
        return Ok(Strided {
            ndim: -1,
            offset: l.offset() as i64,
            shape: [1; MAX_DIMS],
            strides: [0; MAX_DIMS],
        });
    }
    let mut shape: Vec<usize> = Vec::with_capacity(l.ndim());
    let mut strides: Vec<isize> = Vec::with_capacity(l.ndim());
    for (&n, &st) in l.shape().iter().zip(l.strides()) {
        if n == 1 {
            continue;
        }
        match (shape.last_mut(), strides.last_mut()) {
            // the outer axis steps exactly over the inner one: one axis
            (Some(outer_n), Some(outer_s)) if *outer_s == st * n as isize => {
                *outer_n *= n;
                *outer_s = st;
            }
            _ => {
                shape.push(n);
                strides.push(st);
            }
        }
    }
    strided_full(op, &Layout::new(&shape, &strides, l.offset()))
}

/// The suffix of a dtype's kernels (`kernels.cu` stores bool as bytes).
macro_rules! kernel_name {
    ($family:literal, $dtype:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => concat!($family, "_f32"),
            $crate::dtype::DType::F64 => concat!($family, "_f64"),
            $crate::dtype::DType::I64 => concat!($family, "_i64"),
            $crate::dtype::DType::Bool => concat!($family, "_u8"),
            $crate::dtype::DType::F16 => concat!($family, "_f16"),
            $crate::dtype::DType::BF16 => concat!($family, "_bf16"),
            $crate::dtype::DType::I32 => concat!($family, "_i32"),
            $crate::dtype::DType::I16 => concat!($family, "_i16"),
            $crate::dtype::DType::I8 => concat!($family, "_i8"),
            $crate::dtype::DType::U8 => concat!($family, "_ui8"),
        }
    };
}
pub(crate) use kernel_name;

/// The error for a kernel of `op` that does not exist for `dtype`.
pub(crate) fn not_for(op: &str, dtype: DType) -> Error {
    Error::dtype(op, format!("not defined for {dtype} tensors on CUDA"))
}

/// An allocation's failure: out of memory is a `MemoryError` in Python, as on the CPU.
fn alloc_err(n: usize, dtype: DType, e: impl std::fmt::Debug) -> Error {
    let text = format!("{e:?}");
    if text.contains("OUT_OF_MEMORY") {
        return Error::OutOfMemory {
            op: "alloc".to_string(),
            msg: format!(
                "out of memory: CUDA could not allocate {} bytes ({text})",
                n.saturating_mul(dtype.size_in_bytes())
            ),
        };
    }
    err("alloc", e)
}

impl Gpu {
    /// Device memory of `n` elements that a kernel overwrites entirely before it is read.
    pub(crate) fn alloc(&self, dtype: DType, n: usize) -> Result<CudaData> {
        let s = &self.stream;
        let n1 = n.max(1);
        // SAFETY: callers launch a kernel that writes all `n` elements before anything reads
        // them (the emulator fills fresh memory with NaN to catch any that does not).
        let r = unsafe {
            match dtype {
                DType::F32 => s.alloc::<f32>(n1).map(CudaData::F32),
                DType::F64 => s.alloc::<f64>(n1).map(CudaData::F64),
                DType::I64 => s.alloc::<i64>(n1).map(CudaData::I64),
                DType::Bool => s.alloc::<u8>(n1).map(CudaData::Bool),
                DType::F16 => s.alloc::<u16>(n1).map(CudaData::F16),
                DType::BF16 => s.alloc::<u16>(n1).map(CudaData::BF16),
                DType::I32 => s.alloc::<i32>(n1).map(CudaData::I32),
                DType::I16 => s.alloc::<i16>(n1).map(CudaData::I16),
                DType::I8 => s.alloc::<i8>(n1).map(CudaData::I8),
                DType::U8 => s.alloc::<u8>(n1).map(CudaData::U8),
            }
        };
        r.map_err(|e| alloc_err(n, dtype, e))
    }

    /// Zero-filled device memory (for outputs that kernels accumulate into).
    pub(crate) fn zeros(&self, dtype: DType, n: usize) -> Result<CudaData> {
        let s = &self.stream;
        let n1 = n.max(1);
        let r = match dtype {
            DType::F32 => s.alloc_zeros::<f32>(n1).map(CudaData::F32),
            DType::F64 => s.alloc_zeros::<f64>(n1).map(CudaData::F64),
            DType::I64 => s.alloc_zeros::<i64>(n1).map(CudaData::I64),
            DType::Bool => s.alloc_zeros::<u8>(n1).map(CudaData::Bool),
            DType::F16 => s.alloc_zeros::<u16>(n1).map(CudaData::F16),
            DType::BF16 => s.alloc_zeros::<u16>(n1).map(CudaData::BF16),
            DType::I32 => s.alloc_zeros::<i32>(n1).map(CudaData::I32),
            DType::I16 => s.alloc_zeros::<i16>(n1).map(CudaData::I16),
            DType::I8 => s.alloc_zeros::<i8>(n1).map(CudaData::I8),
            DType::U8 => s.alloc_zeros::<u8>(n1).map(CudaData::U8),
        };
        r.map_err(|e| alloc_err(n, dtype, e))
    }

    /// Runs the elementwise kernel `name`, whose parameters are each input with its layout,
    /// then `scalar` (if any), then the output and the element count (kernels.cu's form for
    /// unary, binary, comparison, activation-gradient, power, where and cast kernels): a new
    /// contiguous buffer of `dtype` with the inputs' (common) element count.
    pub(crate) fn elementwise(
        &self,
        name: &'static str,
        op: &'static str,
        inputs: &[(&CudaData, &Layout)],
        scalar: Option<&f64>,
        dtype: DType,
    ) -> Result<CudaData> {
        let n = inputs.first().map_or(0, |(_, l)| l.numel());
        let layouts = inputs
            .iter()
            .map(|(_, l)| strided(op, l))
            .collect::<Result<Vec<Strided>>>()?;
        let f = self.function(name)?;
        let mut out = self.alloc(dtype, n)?;
        let len = n as i64;
        {
            let mut launch = self.launch(&f, op);
            for ((x, _), lx) in inputs.iter().zip(&layouts) {
                launch.buf(x).arg(lx);
            }
            if let Some(p) = scalar {
                launch.arg(p);
            }
            launch.buf_mut(&mut out).arg(&len).grid(n)?;
        }
        Ok(out)
    }

    /// A launch of `f` for `op` (named in errors): push the arguments in the kernel's order,
    /// then start it with [`Launch::grid`] or [`Launch::rows`].
    pub(crate) fn launch<'a>(&'a self, f: &'a CudaFunction, op: &'static str) -> Launch<'a> {
        Launch {
            args: self.stream.launch_builder(f),
            op,
        }
    }
}

/// A kernel launch being assembled.
pub(crate) struct Launch<'a> {
    args: LaunchArgs<'a>,
    op: &'static str,
}

impl<'a> Launch<'a> {
    /// A buffer argument of any dtype (the kernel's pointer parameter).
    pub(crate) fn buf(&mut self, d: &'a CudaData) -> &mut Self {
        match d {
            CudaData::F32(s) => self.args.arg(s),
            CudaData::F64(s) => self.args.arg(s),
            CudaData::I64(s) => self.args.arg(s),
            CudaData::Bool(s) => self.args.arg(s),
            CudaData::F16(s) | CudaData::BF16(s) => self.args.arg(s),
            CudaData::I32(s) => self.args.arg(s),
            CudaData::I16(s) => self.args.arg(s),
            CudaData::I8(s) => self.args.arg(s),
            CudaData::U8(s) => self.args.arg(s),
        };
        self
    }

    /// A buffer the kernel writes.
    pub(crate) fn buf_mut(&mut self, d: &'a mut CudaData) -> &mut Self {
        match d {
            CudaData::F32(s) => self.args.arg(s),
            CudaData::F64(s) => self.args.arg(s),
            CudaData::I64(s) => self.args.arg(s),
            CudaData::Bool(s) => self.args.arg(s),
            CudaData::F16(s) | CudaData::BF16(s) => self.args.arg(s),
            CudaData::I32(s) => self.args.arg(s),
            CudaData::I16(s) => self.args.arg(s),
            CudaData::I8(s) => self.args.arg(s),
            CudaData::U8(s) => self.args.arg(s),
        };
        self
    }

    /// A value argument.
    pub(crate) fn arg<T: DeviceRepr>(&mut self, v: &'a T) -> &mut Self {
        self.args.arg(v);
        self
    }

    /// Starts the kernel over `n` elements: 256 threads a block, grid-stride loops in the
    /// kernels for grids beyond the launch limit. Nothing runs for `n == 0`.
    pub(crate) fn grid(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let blocks = n.div_ceil(256).clamp(1, 1 << 20) as u32;
        self.start(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    /// Starts the kernel with one block of 256 threads per row (up to 65535 blocks, which
    /// loop over the rest). Nothing runs for `rows == 0`.
    pub(crate) fn rows(&mut self, rows: usize) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        self.start(LaunchConfig {
            grid_dim: (rows.clamp(1, 65535) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    fn start(&mut self, cfg: LaunchConfig) -> Result<()> {
        // SAFETY: the arguments were pushed in the order and with the types of the kernel's
        // parameters in kernels.cu, and every buffer outlives the launch (they are borrowed
        // for 'a, and the stream orders later frees after the kernel).
        unsafe { self.args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| err(self.op, e))
    }
}
