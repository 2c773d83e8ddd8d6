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
        // "cuda", "cuda:N"; PyTorch's "cpu:N"; MegEngine's "cpuN", "cpux", "gpuN", "gpux" and
        // "xpuN"/"xpux" (a GPU when one is present, else the CPU)
        let index = |rest: &str| -> Option<usize> {
            let rest = rest.strip_prefix(':').unwrap_or(rest);
            match rest {
                "" | "x" => Some(0),
                n => n
                    .parse::<u32>()
                    .ok()
                    .filter(|&i| i <= i32::MAX as u32)
                    .map(|i| i as usize),
            }
        };
        if let Some(rest) = t.strip_prefix("cpu") {
            if index(rest).is_some() {
                return Ok(Device::Cpu);
            }
        }
        for prefix in ["cuda", "gpu"] {
            if let Some(rest) = t.strip_prefix(prefix) {
                if let Some(i) = index(rest).filter(|_| !(prefix == "cuda" && rest == "x")) {
                    return Ok(Device::Cuda(i));
                }
            }
        }
        if let Some(rest) = t.strip_prefix("xpu") {
            if let Some(i) = index(rest) {
                let gpu = Device::Cuda(i);
                return Ok(if gpu.check_available(op).is_ok() {
                    gpu
                } else {
                    Device::Cpu
                });
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
