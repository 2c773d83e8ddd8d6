//! A reuse pool for large CPU buffers. Fresh large allocations come from the kernel as
//! untouched pages, and first-touch page faults cost more than the arithmetic of an
//! elementwise op; buffers of freed tensors are kept (up to a cap) and handed out again.
//! The engine's memory statistics count live tensors only, so they are unaffected.

use std::collections::HashMap;
use std::sync::Mutex;

use super::CpuData;
use crate::error::{Error, Result};

/// Buffers smaller than this come from the system allocator directly.
const MIN_POOLED_BYTES: usize = 256 * 1024;
/// At most this many bytes are kept for reuse.
const MAX_CACHED_BYTES: usize = 1 << 30;
/// Capacities are rounded up to a multiple of this many bytes so similar sizes share buffers.
const GRANULE_BYTES: usize = 64 * 1024;

#[derive(Default)]
pub(crate) struct Pool {
    f32: HashMap<usize, Vec<Vec<f32>>>,
    f64: HashMap<usize, Vec<Vec<f64>>>,
    i64: HashMap<usize, Vec<Vec<i64>>>,
    bool: HashMap<usize, Vec<Vec<bool>>>,
    cached: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// Element types the pool holds.
pub(crate) trait Pooled: Sized + Copy + Send + Sync {
    fn shelf(p: &mut Pool) -> &mut HashMap<usize, Vec<Vec<Self>>>;
}

macro_rules! pooled {
    ($t:ty, $field:ident) => {
        impl Pooled for $t {
            fn shelf(p: &mut Pool) -> &mut HashMap<usize, Vec<Vec<Self>>> {
                &mut p.$field
            }
        }
    };
}
pooled!(f32, f32);
pooled!(f64, f64);
pooled!(i64, i64);
pooled!(bool, bool);

fn capacity_for<T>(n: usize) -> usize {
    let size = std::mem::size_of::<T>().max(1);
    let granule = (GRANULE_BYTES / size).max(1);
    n.div_ceil(granule).saturating_mul(granule)
}

/// An empty vector with room for at least `n` elements; an error (Python's `MemoryError`)
/// when the memory cannot be had.
pub(crate) fn take<T: Pooled>(n: usize) -> Result<Vec<T>> {
    let too_big = || Error::OutOfMemory {
        // (the op is named where the kernel was called)
        op: "alloc".to_string(),
        msg: format!(
            "out of memory: cannot allocate {n} elements of {} bytes ({} bytes)",
            std::mem::size_of::<T>(),
            n as u128 * std::mem::size_of::<T>() as u128
        ),
    };
    let bytes = n
        .checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(too_big)?;
    if bytes < MIN_POOLED_BYTES {
        return Ok(Vec::with_capacity(n));
    }
    let cap = capacity_for::<T>(n);
    {
        let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let pool = guard.get_or_insert_with(Pool::default);
        if let Some(mut v) = T::shelf(pool).get_mut(&cap).and_then(|s| s.pop()) {
            pool.cached -= cap * std::mem::size_of::<T>();
            v.clear();
            return Ok(v);
        }
    }
    let mut v = Vec::new();
    v.try_reserve_exact(cap).map_err(|_| too_big())?;
    Ok(v)
}

/// `n` copies of `value`.
pub(crate) fn filled<T: Pooled>(n: usize, value: T) -> Result<Vec<T>> {
    let mut v = take(n)?;
    v.resize(n, value);
    Ok(v)
}

fn keep<T: Pooled>(v: Vec<T>) {
    let cap = v.capacity();
    let bytes = cap * std::mem::size_of::<T>();
    if bytes < MIN_POOLED_BYTES || cap != capacity_for::<T>(cap) {
        return;
    }
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = guard.get_or_insert_with(Pool::default);
    if pool.cached + bytes > MAX_CACHED_BYTES {
        return;
    }
    pool.cached += bytes;
    T::shelf(pool).entry(cap).or_default().push(v);
}

/// Takes back the buffer of a freed tensor.
pub(crate) fn give(d: CpuData) {
    match d {
        CpuData::F32(v) => keep(v),
        CpuData::F64(v) => keep(v),
        CpuData::I64(v) => keep(v),
        CpuData::Bool(v) => keep(v),
    }
}

/// Returns every cached buffer to the system.
pub fn empty_cache() {
    let taken = POOL.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(taken);
}
