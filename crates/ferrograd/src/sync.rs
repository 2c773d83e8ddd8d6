//! The lock for the engine's small, hot, short-held state (a tensor's tape slots, a key's
//! tape, a record's gradients).
//!
//! Every recorded op takes several of these. Releasing a spin lock is a plain store, where
//! `std::sync::Mutex` releases with a locked exchange (it must look for sleeping waiters):
//! one locked instruction per critical section instead of two. The sections are a few
//! pushes and reads, never a kernel or a callback, so a waiter yields its time slice rather
//! than sleeping.

/// A lock that spins (yielding the thread) while another thread holds it.
pub(crate) type Lock<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;
pub(crate) type LockGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T>;
