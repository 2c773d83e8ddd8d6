//! A host-memory stand-in for the parts of `cudarc` the CUDA backend uses, built only with the
//! `cuda-emulator` feature (a testing aid, never for users). Buffers live in host memory,
//! kernel launches run `kernels.cu` compiled as C++ on the CPU (`emulator.cpp`), and the
//! strided-batched GEMM follows cuBLAS's column-major contract. With it, every CUDA code path
//! of the engine (layouts, launch arguments, grids, reductions, cuBLAS calls) runs and can be
//! compared with the CPU backend on a machine without a GPU. What it cannot show: the real
//! driver and libraries, concurrency between the device and the host, and speed.

use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::sync::Arc;

/// An error from the emulated driver or cuBLAS.
#[derive(Debug)]
pub struct EmulatorError(pub String);

impl fmt::Display for EmulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

extern "C" {
    fn ferrograd_emulator_launch(
        name: *const c_char,
        grid: *const u32,
        block: *const u32,
        shared_bytes: u32,
        args: *mut *mut c_void,
        nargs: i32,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}

pub mod driver {
    use super::*;

    /// Types a kernel may take by value.
    ///
    /// # Safety
    /// The type's bytes must be what the kernel's parameter of that type reads (`repr(C)`).
    pub unsafe trait DeviceRepr {}
    macro_rules! repr {
        ($($t:ty),*) => { $(unsafe impl DeviceRepr for $t {})* };
    }
    repr!(i8, u8, i16, u16, i32, u32, i64, u64, isize, usize, f32, f64, bool);

    /// Types whose all-zero bit pattern is a valid value.
    ///
    /// # Safety
    /// All-zero bytes must be a valid value of the type.
    pub unsafe trait ValidAsZeroBits {}
    macro_rules! zero {
        ($($t:ty),*) => { $(unsafe impl ValidAsZeroBits for $t {})* };
    }
    zero!(i8, u8, i16, u16, i32, u32, i64, u64, isize, usize, f32, f64, bool);

    /// A "device" buffer: host memory at a fixed address, which kernels address directly.
    pub struct CudaSlice<T> {
        ptr: *mut T,
        len: usize,
    }

    // SAFETY: the buffer is owned, like a `Box<[T]>`; kernels write it only during a launch,
    // which the engine orders like work on one stream.
    unsafe impl<T: Send> Send for CudaSlice<T> {}
    unsafe impl<T: Sync> Sync for CudaSlice<T> {}

    impl<T> CudaSlice<T> {
        fn from_vec(v: Vec<T>) -> Self {
            let len = v.len();
            let ptr = Box::into_raw(v.into_boxed_slice()) as *mut T;
            CudaSlice { ptr, len }
        }
        pub fn len(&self) -> usize {
            self.len
        }
        pub fn is_empty(&self) -> bool {
            self.len == 0
        }
        pub(crate) fn as_slice(&self) -> &[T] {
            // SAFETY: ptr/len come from a boxed slice that this value owns
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
        pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
            // SAFETY: as above, and `&mut self` makes the access unique
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }
        fn address(&self) -> u64 {
            self.ptr as u64
        }
    }

    impl<T> Drop for CudaSlice<T> {
        fn drop(&mut self) {
            // SAFETY: reassembles the boxed slice made in `from_vec`
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
        }
    }

    impl<T> fmt::Debug for CudaSlice<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "CudaSlice(emulated, {} elements)", self.len)
        }
    }

    /// Room for `n` elements, or the driver's out-of-memory error.
    fn reserve<T>(n: usize) -> Result<Vec<T>, EmulatorError> {
        let mut v = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|e| EmulatorError(format!("CUDA_ERROR_OUT_OF_MEMORY: {n} elements: {e}")))?;
        Ok(v)
    }

    /// Grid and block dimensions of a launch.
    #[derive(Clone, Copy, Debug)]
    pub struct LaunchConfig {
        pub grid_dim: (u32, u32, u32),
        pub block_dim: (u32, u32, u32),
        pub shared_mem_bytes: u32,
    }

    /// A kernel, by name.
    #[derive(Clone, Debug)]
    pub struct CudaFunction {
        name: CString,
    }

    /// The emulated stream: every operation completes before it returns.
    #[derive(Debug)]
    pub struct CudaStream;

    impl CudaStream {
        pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
            &self,
            n: usize,
        ) -> Result<CudaSlice<T>, EmulatorError> {
            let mut v = reserve::<T>(n)?;
            // SAFETY: ValidAsZeroBits, and the capacity is there
            unsafe {
                std::ptr::write_bytes(v.as_mut_ptr(), 0, n);
                v.set_len(n);
            }
            Ok(CudaSlice::from_vec(v))
        }

        /// Memory a kernel must write before anything reads it: filled with 0xff bytes (NaN
        /// for floats, -1 for integers) so that a kernel which leaves elements unwritten
        /// shows up in comparisons.
        ///
        /// # Safety
        /// As cudarc's: the contents are not meaningful values.
        pub unsafe fn alloc<T: DeviceRepr>(&self, n: usize) -> Result<CudaSlice<T>, EmulatorError> {
            let mut v = reserve::<T>(n)?;
            std::ptr::write_bytes(v.as_mut_ptr(), 0xff, n);
            v.set_len(n);
            Ok(CudaSlice::from_vec(v))
        }

        pub fn clone_htod<T: DeviceRepr + Clone, S: AsRef<[T]> + ?Sized>(
            &self,
            src: &S,
        ) -> Result<CudaSlice<T>, EmulatorError> {
            Ok(CudaSlice::from_vec(src.as_ref().to_vec()))
        }

        pub fn clone_dtoh<T: DeviceRepr + Clone>(
            &self,
            src: &CudaSlice<T>,
        ) -> Result<Vec<T>, EmulatorError> {
            Ok(src.as_slice().to_vec())
        }

        pub fn synchronize(&self) -> Result<(), EmulatorError> {
            Ok(())
        }

        pub fn launch_builder<'a>(&'a self, f: &'a CudaFunction) -> LaunchArgs<'a> {
            LaunchArgs {
                func: f,
                args: Vec::new(),
                pointers: Vec::new(),
            }
        }
    }

    enum Arg {
        Value(*const c_void),
        Pointer(usize),
    }

    /// A launch being assembled, as cudarc's: arguments in the kernel's parameter order.
    pub struct LaunchArgs<'a> {
        func: &'a CudaFunction,
        args: Vec<Arg>,
        pointers: Vec<u64>,
    }

    pub trait PushKernelArg<T> {
        fn arg(&mut self, arg: T) -> &mut Self;
    }

    impl<'a, 'b: 'a, T: DeviceRepr> PushKernelArg<&'b T> for LaunchArgs<'a> {
        fn arg(&mut self, arg: &'b T) -> &mut Self {
            self.args.push(Arg::Value(arg as *const T as *const c_void));
            self
        }
    }

    impl<'a, 'b: 'a, T> PushKernelArg<&'b CudaSlice<T>> for LaunchArgs<'a> {
        fn arg(&mut self, arg: &'b CudaSlice<T>) -> &mut Self {
            self.args.push(Arg::Pointer(self.pointers.len()));
            self.pointers.push(arg.address());
            self
        }
    }

    impl<'a, 'b: 'a, T> PushKernelArg<&'b mut CudaSlice<T>> for LaunchArgs<'a> {
        fn arg(&mut self, arg: &'b mut CudaSlice<T>) -> &mut Self {
            self.args.push(Arg::Pointer(self.pointers.len()));
            self.pointers.push(arg.address());
            self
        }
    }

    impl LaunchArgs<'_> {
        /// Runs the kernel on the host.
        ///
        /// # Safety
        /// As on a device: the arguments must match the kernel's parameters.
        pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), EmulatorError> {
            let mut raw: Vec<*mut c_void> = self
                .args
                .iter()
                .map(|a| match a {
                    Arg::Value(p) => *p as *mut c_void,
                    Arg::Pointer(i) => &self.pointers[*i] as *const u64 as *mut c_void,
                })
                .collect();
            let grid = [cfg.grid_dim.0, cfg.grid_dim.1, cfg.grid_dim.2];
            let block = [cfg.block_dim.0, cfg.block_dim.1, cfg.block_dim.2];
            let mut msg = vec![0u8; 512];
            let rc = ferrograd_emulator_launch(
                self.func.name.as_ptr(),
                grid.as_ptr(),
                block.as_ptr(),
                cfg.shared_mem_bytes,
                raw.as_mut_ptr(),
                raw.len() as i32,
                msg.as_mut_ptr() as *mut c_char,
                msg.len(),
            );
            if rc == 0 {
                return Ok(());
            }
            let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
            Err(EmulatorError(
                String::from_utf8_lossy(&msg[..end]).into_owned(),
            ))
        }
    }

    /// The emulated module holds every kernel of `kernels.cu`.
    #[derive(Debug)]
    pub struct CudaModule;

    impl CudaModule {
        pub fn load_function(&self, name: &str) -> Result<CudaFunction, EmulatorError> {
            Ok(CudaFunction {
                name: CString::new(name).map_err(|e| EmulatorError(e.to_string()))?,
            })
        }
    }

    /// One emulated device.
    #[derive(Debug)]
    pub struct CudaContext;

    impl CudaContext {
        pub fn device_count() -> Result<i32, EmulatorError> {
            Ok(1)
        }
        pub fn new(_ordinal: usize) -> Result<Arc<Self>, EmulatorError> {
            Ok(Arc::new(CudaContext))
        }
        /// cudarc's switch for per-buffer events (the emulator has one stream and none).
        ///
        /// # Safety
        /// Always safe here; unsafe to match cudarc's signature.
        pub unsafe fn disable_event_tracking(&self) {}

        pub fn default_stream(&self) -> Arc<CudaStream> {
            Arc::new(CudaStream)
        }
        pub fn module(&self) -> Arc<CudaModule> {
            Arc::new(CudaModule)
        }
    }
}

pub mod cublas {
    use super::driver::{CudaSlice, CudaStream};
    use super::*;

    pub mod sys {
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum cublasOperation_t {
            CUBLAS_OP_N,
            CUBLAS_OP_T,
        }
    }
    use sys::cublasOperation_t;

    #[derive(Clone, Copy, Debug)]
    pub struct GemmConfig<T> {
        pub transa: cublasOperation_t,
        pub transb: cublasOperation_t,
        pub m: i32,
        pub n: i32,
        pub k: i32,
        pub alpha: T,
        pub lda: i32,
        pub ldb: i32,
        pub beta: T,
        pub ldc: i32,
    }

    #[derive(Clone, Copy, Debug)]
    pub struct StridedBatchedConfig<T> {
        pub gemm: GemmConfig<T>,
        pub batch_size: i32,
        pub stride_a: i64,
        pub stride_b: i64,
        pub stride_c: i64,
    }

    pub struct CudaBlas;

    impl CudaBlas {
        pub fn new(_stream: Arc<CudaStream>) -> Result<Self, EmulatorError> {
            Ok(CudaBlas)
        }
    }

    /// cuBLAS's strided-batched GEMM: column-major `C = alpha op(A) op(B) + beta C` for each
    /// batch, with leading dimensions and batch strides as given; out-of-bounds reads are
    /// errors (a device would read garbage or fault).
    pub trait Gemm<T> {
        /// # Safety
        /// As cuBLAS's: the configuration must describe the buffers.
        unsafe fn gemm_strided_batched(
            &self,
            cfg: StridedBatchedConfig<T>,
            a: &CudaSlice<T>,
            b: &CudaSlice<T>,
            c: &mut CudaSlice<T>,
        ) -> Result<(), EmulatorError>;
    }

    macro_rules! gemm {
        ($t:ty) => {
            impl Gemm<$t> for CudaBlas {
                unsafe fn gemm_strided_batched(
                    &self,
                    cfg: StridedBatchedConfig<$t>,
                    a: &CudaSlice<$t>,
                    b: &CudaSlice<$t>,
                    c: &mut CudaSlice<$t>,
                ) -> Result<(), EmulatorError> {
                    let g = cfg.gemm;
                    let (m, n, k) = (g.m as i64, g.n as i64, g.k as i64);
                    let ta = g.transa == cublasOperation_t::CUBLAS_OP_T;
                    let tb = g.transb == cublasOperation_t::CUBLAS_OP_T;
                    // stored rows of A and B (column-major: rows are the leading dimension)
                    let (a_rows, b_rows) = (if ta { k } else { m }, if tb { n } else { k });
                    if m < 0 || n < 0 || k < 0 || (g.lda as i64) < a_rows.max(1)
                        || (g.ldb as i64) < b_rows.max(1) || (g.ldc as i64) < m.max(1)
                    {
                        return Err(EmulatorError(format!("gemm: invalid configuration {g:?}")));
                    }
                    let (lda, ldb, ldc) = (g.lda as i64, g.ldb as i64, g.ldc as i64);
                    let (av, bv) = (a.as_slice(), b.as_slice());
                    let cv = c.as_mut_slice();
                    let read = |v: &[$t], i: i64, what: &str| -> Result<$t, EmulatorError> {
                        v.get(i as usize).copied().filter(|_| i >= 0).ok_or_else(|| {
                            EmulatorError(format!(
                                "gemm reads {what}[{i}] of {} elements ({g:?}, batch {}, strides {} {} {})",
                                v.len(), cfg.batch_size, cfg.stride_a, cfg.stride_b, cfg.stride_c
                            ))
                        })
                    };
                    for bi in 0..cfg.batch_size as i64 {
                        let (oa, ob, oc) = (bi * cfg.stride_a, bi * cfg.stride_b, bi * cfg.stride_c);
                        for j in 0..n {
                            for i in 0..m {
                                let mut acc: $t = 0.0;
                                for p in 0..k {
                                    let x = if ta { read(av, oa + i * lda + p, "A")? } else { read(av, oa + p * lda + i, "A")? };
                                    let y = if tb { read(bv, ob + p * ldb + j, "B")? } else { read(bv, ob + j * ldb + p, "B")? };
                                    acc += x * y;
                                }
                                let at = (oc + j * ldc + i) as usize;
                                let old = *cv.get(at).ok_or_else(|| {
                                    EmulatorError(format!("gemm writes C[{at}] of {} elements", cv.len()))
                                })?;
                                // beta == 0 ignores C's old contents (they may be NaN)
                                cv[at] = if g.beta == 0.0 { g.alpha * acc } else { g.alpha * acc + g.beta * old };
                            }
                        }
                    }
                    Ok(())
                }
            }
        };
    }
    gemm!(f32);
    gemm!(f64);
}
