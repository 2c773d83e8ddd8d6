//! A reuse pool for large CPU buffers. Fresh large allocations come from the kernel as
//! untouched pages, and first-touch page faults cost more than the arithmetic of an
//! elementwise op; buffers of freed tensors are kept (up to a cap) and handed out again.
//! The engine's memory statistics count live tensors only, so they are unaffected.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::CpuData;
use crate::error::{Error, Result};

/// Buffers smaller than this come from the system allocator directly.
pub(crate) const MIN_POOLED_BYTES: usize = 256 * 1024;
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
    f16: HashMap<usize, Vec<Vec<half::f16>>>,
    bf16: HashMap<usize, Vec<Vec<half::bf16>>>,
    i32: HashMap<usize, Vec<Vec<i32>>>,
    i16: HashMap<usize, Vec<Vec<i16>>>,
    i8: HashMap<usize, Vec<Vec<i8>>>,
    u8: HashMap<usize, Vec<Vec<u8>>>,
    cached: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// Element types the pool holds.
pub(crate) trait Pooled: Sized + Copy + Send + Sync {
    fn shelf(p: &mut Pool) -> &mut HashMap<usize, Vec<Vec<Self>>>;
    fn arena_shelf(a: &mut Arena) -> &mut BTreeMap<usize, Vec<Vec<Self>>>;
}

macro_rules! pooled {
    ($t:ty, $field:ident) => {
        impl Pooled for $t {
            fn shelf(p: &mut Pool) -> &mut HashMap<usize, Vec<Vec<Self>>> {
                &mut p.$field
            }
            fn arena_shelf(a: &mut Arena) -> &mut BTreeMap<usize, Vec<Vec<Self>>> {
                &mut a.$field
            }
        }
    };
}

/// The buffers one graph's runs recycle (see `graph::exec`): while a run is on, every CPU
/// buffer freed on its thread goes here, whatever its size, and every buffer it allocates
/// comes from here when one fits (at least the size asked for, at most twice it). A run that
/// repeats the one before allocates nothing new.
#[derive(Default)]
pub struct Arena {
    f32: BTreeMap<usize, Vec<Vec<f32>>>,
    f64: BTreeMap<usize, Vec<Vec<f64>>>,
    i64: BTreeMap<usize, Vec<Vec<i64>>>,
    bool: BTreeMap<usize, Vec<Vec<bool>>>,
    f16: BTreeMap<usize, Vec<Vec<half::f16>>>,
    bf16: BTreeMap<usize, Vec<Vec<half::bf16>>>,
    i32: BTreeMap<usize, Vec<Vec<i32>>>,
    i16: BTreeMap<usize, Vec<Vec<i16>>>,
    i8: BTreeMap<usize, Vec<Vec<i8>>>,
    u8: BTreeMap<usize, Vec<Vec<u8>>>,
    /// Buffers taken from the system (neither the arena nor the pool had one) while runs
    /// were on: none in a repeated run.
    pub(crate) fresh: usize,
    /// Buffers handed out from the arena.
    pub(crate) reused: usize,
}

impl Arena {
    /// Bytes of the buffers it holds now.
    pub fn held_bytes(&self) -> usize {
        fn sum<T>(m: &BTreeMap<usize, Vec<Vec<T>>>) -> usize {
            m.iter()
                .map(|(cap, v)| cap * v.len() * std::mem::size_of::<T>())
                .sum()
        }
        sum(&self.f32)
            + sum(&self.f64)
            + sum(&self.i64)
            + sum(&self.bool)
            + sum(&self.f16)
            + sum(&self.bf16)
            + sum(&self.i32)
            + sum(&self.i16)
            + sum(&self.i8)
            + sum(&self.u8)
    }
}

thread_local! {
    static ARENA: std::cell::RefCell<Option<Box<Arena>>> = const { std::cell::RefCell::new(None) };
}

/// Makes `arena` this thread's arena until the guard is dropped (it goes back to `slot`).
pub(crate) fn install(slot: &mut Option<Box<Arena>>) -> ArenaGuard<'_> {
    let a = slot.take().unwrap_or_default();
    let prev = ARENA.with(|c| c.borrow_mut().replace(a));
    ArenaGuard { slot, prev }
}

/// Puts the arena back where it came from (and the thread's previous one back in place).
pub(crate) struct ArenaGuard<'a> {
    slot: &'a mut Option<Box<Arena>>,
    prev: Option<Box<Arena>>,
}

impl Drop for ArenaGuard<'_> {
    fn drop(&mut self) {
        let a = ARENA.with(|c| std::mem::replace(&mut *c.borrow_mut(), self.prev.take()));
        *self.slot = a;
    }
}

/// A buffer of at least `n` elements from the thread's arena, if one is on (`Some(None)`: on,
/// and none fits).
fn from_arena<T: Pooled>(n: usize) -> Option<Option<Vec<T>>> {
    ARENA.with(|c| {
        let mut c = c.borrow_mut();
        let a = c.as_mut()?;
        let hi = n.saturating_mul(2).max(n + 64);
        let shelf = T::arena_shelf(a);
        let cap = shelf
            .range(n..=hi)
            .find(|(_, v)| !v.is_empty())
            .map(|(&cap, _)| cap);
        let got = cap.and_then(|cap| shelf.get_mut(&cap).and_then(Vec::pop));
        match got {
            Some(mut v) => {
                a.reused += 1;
                v.clear();
                Some(Some(v))
            }
            None => Some(None),
        }
    })
}

/// Counts a buffer taken from the system while the thread's arena is on.
fn count_fresh() {
    ARENA.with(|c| {
        if let Some(a) = c.borrow_mut().as_mut() {
            a.fresh += 1;
        }
    })
}

/// Gives a freed buffer to the thread's arena, if one is on.
fn to_arena<T: Pooled>(v: Vec<T>) -> Option<Vec<T>> {
    ARENA.with(|c| match c.borrow_mut().as_mut() {
        Some(a) if v.capacity() > 0 => {
            T::arena_shelf(a).entry(v.capacity()).or_default().push(v);
            None
        }
        _ => Some(v),
    })
}
pooled!(f32, f32);
pooled!(f64, f64);
pooled!(i64, i64);
pooled!(bool, bool);
pooled!(half::f16, f16);
pooled!(half::bf16, bf16);
pooled!(i32, i32);
pooled!(i16, i16);
pooled!(i8, i8);
pooled!(u8, u8);

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
    // a run's arena first; a miss goes on to the pool (a buffer a caller kept from the last
    // run, such as a gradient, was freed to it)
    let arena_on = match from_arena::<T>(n) {
        Some(Some(v)) => return Ok(v),
        Some(None) => true,
        None => false,
    };
    if bytes < MIN_POOLED_BYTES {
        if arena_on {
            count_fresh();
        }
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
    if arena_on {
        count_fresh();
    }
    let mut v = Vec::new();
    v.try_reserve_exact(cap).map_err(|_| too_big())?;
    advise_huge_pages(v.as_ptr() as usize, cap * std::mem::size_of::<T>());
    Ok(v)
}

/// Buffers from this size on ask for transparent huge pages (numpy's threshold).
const HUGE_PAGE_BYTES: usize = 4 << 20;

/// Asks Linux to back a fresh buffer with transparent huge pages where the system leaves it
/// to the program (`/sys/kernel/mm/transparent_hugepage/enabled` set to `madvise`, a common
/// default): first touches then fault 2 MiB at a time instead of 4 KiB, and large copies
/// (MPI's included) walk far fewer pages. numpy does the same for its arrays. Advice only:
/// failure changes nothing.
fn advise_huge_pages(addr: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE_BYTES {
        const PAGE: usize = 4096;
        let start = addr.next_multiple_of(PAGE);
        let len = (addr + bytes).saturating_sub(start) / PAGE * PAGE;
        // SAFETY: the range lies inside an allocation this thread owns; MADV_HUGEPAGE changes
        // how pages are backed, never their contents
        unsafe {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (addr, bytes, HUGE_PAGE_BYTES);
}

/// `n` copies of `value`.
pub(crate) fn filled<T: Pooled>(n: usize, value: T) -> Result<Vec<T>> {
    let mut v = take(n)?;
    v.resize(n, value);
    Ok(v)
}

/// Takes back a scratch buffer from [`take`] (to the run's arena or the pool).
pub(crate) fn keep<T: Pooled>(v: Vec<T>) {
    let Some(v) = to_arena(v) else {
        return;
    };
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
        CpuData::F16(v) => keep(v),
        CpuData::BF16(v) => keep(v),
        CpuData::I32(v) => keep(v),
        CpuData::I16(v) => keep(v),
        CpuData::I8(v) => keep(v),
        CpuData::U8(v) => keep(v),
    }
}

/// Returns every cached buffer to the system.
pub fn empty_cache() {
    let taken = POOL.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(taken);
}
