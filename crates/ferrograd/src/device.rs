//! Devices. CPU is implemented; CUDA is a second backend behind the same `Storage` enum.

use std::fmt;

use crate::error::{Error, Result};

/// Where a tensor's storage lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Cuda(usize),
}

impl Device {
    /// Parses `"cpu"`, `"cuda"` or `"cuda:N"`.
    pub fn parse(s: &str) -> Result<Device> {
        Device::parse_for("device", s)
    }

    /// [`Device::parse`], with errors naming `op`. CUDA ordinals are C ints.
    pub fn parse_for(op: &str, s: &str) -> Result<Device> {
        let t = s.trim();
        if t == "cpu" {
            return Ok(Device::Cpu);
        }
        if t == "cuda" || t == "gpu" {
            return Ok(Device::Cuda(0));
        }
        if let Some(n) = t.strip_prefix("cuda:") {
            if let Ok(i) = n.parse::<u32>() {
                if i <= i32::MAX as u32 {
                    return Ok(Device::Cuda(i as usize));
                }
            }
        }
        Err(Error::invalid(
            op,
            format!("unknown device {s:?}; expected \"cpu\", \"cuda\" or \"cuda:N\""),
        ))
    }

    /// A small index for per-device tables (CPU is 0, `cuda:N` is N + 1).
    pub fn slot(self) -> usize {
        match self {
            Device::Cpu => 0,
            Device::Cuda(i) => i.saturating_add(1),
        }
    }

    /// The device whose [`Device::slot`] is `slot`.
    pub fn from_slot(slot: usize) -> Device {
        match slot {
            0 => Device::Cpu,
            n => Device::Cuda(n - 1),
        }
    }

    /// Ok when this device can be used (the CPU always; `cuda:N` when the driver reports more
    /// than N devices), else an error for `op` saying why.
    pub fn check_available(self, op: &str) -> Result<()> {
        match self {
            Device::Cuda(i) if i >= cuda_count() => Err(self.unavailable(op)),
            _ => Ok(()),
        }
    }

    /// The error for `op` on a device that cannot be used, saying why.
    pub(crate) fn unavailable(self, op: &str) -> Error {
        let count = cuda_count();
        Error::device(
            op,
            if cfg!(not(feature = "cuda")) {
                format!("{self} is not available: this build has no CUDA backend")
            } else if count == 0 {
                format!("{self} is not available: no CUDA driver or device was found")
            } else {
                format!("{self} is not available: there are {count} CUDA device(s)")
            },
        )
    }
}

fn cuda_count() -> usize {
    #[cfg(feature = "cuda")]
    return crate::cuda::device_count();
    #[cfg(not(feature = "cuda"))]
    0
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
