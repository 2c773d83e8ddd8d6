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
        let s = s.trim();
        if s == "cpu" {
            return Ok(Device::Cpu);
        }
        if s == "cuda" || s == "gpu" {
            return Ok(Device::Cuda(0));
        }
        if let Some(n) = s.strip_prefix("cuda:") {
            if let Ok(i) = n.parse::<usize>() {
                return Ok(Device::Cuda(i));
            }
        }
        Err(Error::invalid(
            "device",
            format!("unknown device {s:?}; expected \"cpu\", \"cuda\" or \"cuda:N\""),
        ))
    }

    /// A small index for per-device tables (CPU is 0, `cuda:N` is N + 1).
    pub(crate) fn slot(self) -> usize {
        match self {
            Device::Cpu => 0,
            Device::Cuda(i) => i + 1,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
