//! Exact memory accounting per device, kept by the engine's own allocation points.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::device::Device;

/// The CPU and up to 64 CUDA devices are counted; devices beyond (which cannot exist on any
/// machine the engine runs on) report zeros.
const MAX_DEVICES: usize = 65;

/// Bytes are counted in shared atomics, since the peak needs the exact global total at every
/// allocation. Buffer and tensor counts need no peak: each thread keeps its own (written only
/// by that thread, so no locked instruction on the hot path) and [`stats`] sums them.
struct Counters {
    live_bytes: AtomicUsize,
    peak_bytes: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Counters = Counters {
    live_bytes: AtomicUsize::new(0),
    peak_bytes: AtomicUsize::new(0),
};

static COUNTERS: [Counters; MAX_DEVICES] = [ZERO; MAX_DEVICES];

fn counters(device: Device) -> Option<&'static Counters> {
    COUNTERS.get(device.slot())
}

/// One thread's buffer and tensor counts per device (deltas: a tensor made on one thread and
/// dropped on another leaves +1 and -1 that cancel in the sum).
struct ThreadCounts {
    buffers: [AtomicI64; MAX_DEVICES],
    tensors: [AtomicI64; MAX_DEVICES],
}

/// Every thread's counts (kept after the thread ends, so its deltas stay in the sums).
static THREADS: Mutex<Vec<Arc<ThreadCounts>>> = Mutex::new(Vec::new());
/// Counts of work done while a thread's own counts are being torn down.
static LATE: ThreadCounts = ThreadCounts {
    buffers: [const { AtomicI64::new(0) }; MAX_DEVICES],
    tensors: [const { AtomicI64::new(0) }; MAX_DEVICES],
};

thread_local! {
    static MINE: Arc<ThreadCounts> = {
        let c = Arc::new(ThreadCounts {
            buffers: [const { AtomicI64::new(0) }; MAX_DEVICES],
            tensors: [const { AtomicI64::new(0) }; MAX_DEVICES],
        });
        THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        c
    };
}

fn bump(device: Device, delta: i64, pick: fn(&ThreadCounts) -> &[AtomicI64; MAX_DEVICES]) {
    let slot = device.slot();
    if slot >= MAX_DEVICES {
        return;
    }
    let mine = MINE.try_with(|c| {
        // only this thread writes its own counter: a plain load and store suffice
        let a = &pick(c)[slot];
        a.store(a.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
    });
    if mine.is_err() {
        pick(&LATE)[slot].fetch_add(delta, Ordering::Relaxed);
    }
}

fn total(device: Device, pick: fn(&ThreadCounts) -> &[AtomicI64; MAX_DEVICES]) -> usize {
    let slot = device.slot();
    if slot >= MAX_DEVICES {
        return 0;
    }
    let mut threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    // threads that have ended (only the registry holds their counts): fold them into LATE
    threads.retain(|c| {
        if Arc::strong_count(c) > 1 {
            return true;
        }
        // pairs with the release of the ended thread's last reference
        std::sync::atomic::fence(Ordering::Acquire);
        for d in 0..MAX_DEVICES {
            LATE.buffers[d].fetch_add(c.buffers[d].load(Ordering::Relaxed), Ordering::Relaxed);
            LATE.tensors[d].fetch_add(c.tensors[d].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        false
    });
    let sum: i64 = threads
        .iter()
        .map(|c| pick(c)[slot].load(Ordering::Relaxed))
        .sum::<i64>()
        + pick(&LATE)[slot].load(Ordering::Relaxed);
    sum.max(0) as usize
}

/// A snapshot of one device's accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live buffers.
    pub live_bytes: usize,
    /// Highest `live_bytes` since start or the last [`reset_peak`].
    pub peak_bytes: usize,
    /// Live buffers (views share one).
    pub live_buffers: usize,
    /// Live tensor handles (views and saved copies count separately).
    pub live_tensors: usize,
}

/// Current figures for `device`.
pub fn stats(device: Device) -> MemoryStats {
    let bytes = |pick: fn(&Counters) -> &AtomicUsize| {
        counters(device).map_or(0, |c| pick(c).load(Ordering::Relaxed))
    };
    MemoryStats {
        live_bytes: bytes(|c| &c.live_bytes),
        peak_bytes: bytes(|c| &c.peak_bytes),
        live_buffers: total(device, |c| &c.buffers),
        live_tensors: total(device, |c| &c.tensors),
    }
}

/// Sets the peak to the current live figure.
pub fn reset_peak(device: Device) {
    if let Some(c) = counters(device) {
        c.peak_bytes
            .store(c.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

pub(crate) fn on_alloc(device: Device, bytes: usize) {
    let Some(c) = counters(device) else {
        return;
    };
    let live = c.live_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // below the peak (the usual case) a load is enough
    if live > c.peak_bytes.load(Ordering::Relaxed) {
        c.peak_bytes.fetch_max(live, Ordering::Relaxed);
    }
    bump(device, 1, |c| &c.buffers);
}

pub(crate) fn on_free(device: Device, bytes: usize) {
    if let Some(c) = counters(device) {
        c.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
    bump(device, -1, |c| &c.buffers);
}

pub(crate) fn on_tensor(device: Device, delta: i64) {
    bump(device, delta, |c| &c.tensors);
}

/// Returns the CPU buffers kept for reuse to the system (live tensors are unaffected).
pub fn empty_cpu_cache() {
    crate::storage::pool::empty_cache();
}
