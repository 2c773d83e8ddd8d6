//! Exact memory accounting per device, kept by the engine's own allocation points.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use crate::device::Device;

const MAX_DEVICES: usize = 17;

struct Counters {
    live_bytes: AtomicUsize,
    peak_bytes: AtomicUsize,
    live_buffers: AtomicUsize,
    live_tensors: AtomicI64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Counters = Counters {
    live_bytes: AtomicUsize::new(0),
    peak_bytes: AtomicUsize::new(0),
    live_buffers: AtomicUsize::new(0),
    live_tensors: AtomicI64::new(0),
};

static COUNTERS: [Counters; MAX_DEVICES] = [ZERO; MAX_DEVICES];

fn counters(device: Device) -> &'static Counters {
    &COUNTERS[device.slot().min(MAX_DEVICES - 1)]
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
    let c = counters(device);
    MemoryStats {
        live_bytes: c.live_bytes.load(Ordering::Relaxed),
        peak_bytes: c.peak_bytes.load(Ordering::Relaxed),
        live_buffers: c.live_buffers.load(Ordering::Relaxed),
        live_tensors: c.live_tensors.load(Ordering::Relaxed).max(0) as usize,
    }
}

/// Sets the peak to the current live figure.
pub fn reset_peak(device: Device) {
    let c = counters(device);
    c.peak_bytes
        .store(c.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
}

pub(crate) fn on_alloc(device: Device, bytes: usize) {
    let c = counters(device);
    let live = c.live_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
    c.peak_bytes.fetch_max(live, Ordering::Relaxed);
    c.live_buffers.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn on_free(device: Device, bytes: usize) {
    let c = counters(device);
    c.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
    c.live_buffers.fetch_sub(1, Ordering::Relaxed);
}

pub(crate) fn on_tensor(device: Device, delta: i64) {
    counters(device)
        .live_tensors
        .fetch_add(delta, Ordering::Relaxed);
}

/// Returns the CPU buffers kept for reuse to the system (live tensors are unaffected).
pub fn empty_cpu_cache() {
    crate::cpu::pool::empty_cache();
}
