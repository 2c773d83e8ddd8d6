//! An optional BLAS for large float matrix products: the OpenBLAS that numpy's wheels bundle
//! (its ILP64 CBLAS, `scipy_cblas_sgemm64_` / `scipy_cblas_dgemm64_`), loaded at run time from
//! a path the caller names ([`set_library`]; the Python package passes numpy's). The `gemm`
//! crate stays the default where it measured as fast or faster (CPUs with AVX-512); on CPUs
//! without AVX-512 OpenBLAS measured faster (see benches/README.md), so a loaded OpenBLAS
//! takes the single large products there. `FERROGRAD_BLAS=gemm` or `=openblas` overrides the
//! choice. Products whose operands are neither row- nor column-contiguous stay with `gemm`.

use std::any::TypeId;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

type Gemm<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    i64,
    i64,
    i64,
    T,
    *const T,
    i64,
    *const T,
    i64,
    T,
    *mut T,
    i64,
);
type SetThreads = unsafe extern "C" fn(c_int);

struct Blas {
    _lib: libloading::Library,
    sgemm: Gemm<f32>,
    dgemm: Gemm<f64>,
    set_threads: Option<SetThreads>,
    threads: AtomicUsize,
}

static BLAS: OnceLock<Blas> = OnceLock::new();

/// Loads the OpenBLAS at `path` for large products. Returns whether it is loaded (a library
/// without the ILP64 CBLAS symbols is refused); a second call keeps the first library.
pub fn set_library(path: &str) -> bool {
    if BLAS.get().is_some() {
        return true;
    }
    // SAFETY: loading a shared library runs its initialisers; OpenBLAS's only set up its
    // thread pool. The symbols are looked up with the CBLAS signatures they have.
    let loaded = unsafe {
        libloading::Library::new(path).ok().and_then(|lib| {
            let sgemm = *lib.get::<Gemm<f32>>(b"scipy_cblas_sgemm64_\0").ok()?;
            let dgemm = *lib.get::<Gemm<f64>>(b"scipy_cblas_dgemm64_\0").ok()?;
            let set_threads = lib
                .get::<SetThreads>(b"scipy_openblas_set_num_threads64_\0")
                .ok()
                .map(|f| *f);
            Some(Blas {
                _lib: lib,
                sgemm,
                dgemm,
                set_threads,
                threads: AtomicUsize::new(0),
            })
        })
    };
    match loaded {
        Some(b) => {
            let _ = BLAS.set(b);
            true
        }
        None => false,
    }
}

/// Whether large products go to the loaded OpenBLAS (see the module's notes).
pub fn in_use() -> bool {
    static CHOICE: OnceLock<Option<bool>> = OnceLock::new();
    if BLAS.get().is_none() {
        return false;
    }
    let forced = *CHOICE.get_or_init(|| match std::env::var("FERROGRAD_BLAS").as_deref() {
        Ok("openblas") => Some(true),
        Ok("gemm") => Some(false),
        _ => None,
    });
    forced.unwrap_or_else(|| {
        #[cfg(target_arch = "x86_64")]
        {
            !std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// How BLAS reads one operand of `rows x cols` with strides `(rs, cs)`: (transposed, leading
/// dimension), or None when neither stride is 1.
fn operand(rows: usize, cols: usize, rs: isize, cs: isize) -> Option<(bool, i64)> {
    if cs == 1 && (rows == 1 || rs >= cols.max(1) as isize) {
        Some((false, rs.max(cols.max(1) as isize) as i64))
    } else if rs == 1 && (cols == 1 || cs >= rows.max(1) as isize) {
        Some((true, cs.max(rows.max(1) as isize) as i64))
    } else {
        None
    }
}

/// `dst (m x n, row-major, contiguous) = a (m x k) @ b (k x n)` through OpenBLAS, with
/// `threads` threads. Returns false (and writes nothing) when BLAS is not in use, `T` is not
/// f32/f64 or an operand's layout does not suit BLAS.
///
/// # Safety
/// `a` and `b` must address element (0, 0) of views whose every element, at the given
/// strides, is readable; `dst` must have room for `m * n` elements and not alias them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product<T: 'static>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    a: *const T,
    (ars, acs): (isize, isize),
    b: *const T,
    (brs, bcs): (isize, isize),
    threads: usize,
) -> bool {
    let Some(blas) = BLAS.get() else {
        return false;
    };
    let (Some((ta, lda)), Some((tb, ldb))) = (operand(m, k, ars, acs), operand(k, n, brs, bcs))
    else {
        return false;
    };
    if let Some(set) = blas.set_threads {
        if blas.threads.swap(threads, Ordering::Relaxed) != threads {
            set(threads as c_int);
        }
    }
    let flag = |t: bool| if t { TRANS } else { NO_TRANS };
    let (m, n, k) = (m as i64, n as i64, k as i64);
    macro_rules! call {
        ($f:expr, $t:ty) => {
            ($f)(
                ROW_MAJOR,
                flag(ta),
                flag(tb),
                m,
                n,
                k,
                1.0,
                a.cast::<$t>(),
                lda,
                b.cast::<$t>(),
                ldb,
                0.0,
                dst.cast::<$t>(),
                n.max(1),
            )
        };
    }
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        call!(blas.sgemm, f32);
    } else if TypeId::of::<T>() == TypeId::of::<f64>() {
        call!(blas.dgemm, f64);
    } else {
        return false;
    }
    true
}
