//! The engine's one error type.
//!
//! Every variant names the op (or the `GradKey`) it comes from, so that a message read in a
//! Python traceback says what went wrong and where without a Rust backtrace.

/// Errors raised by the engine. Each kind maps to one Python exception class in the bindings.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// Shapes that cannot work together (broadcasting, matmul, reshape sizes, concat, ...).
    #[error("{op}: {msg}")]
    Shape { op: String, msg: String },
    /// Dtypes that cannot work together or are not supported by an op.
    #[error("{op}: {msg}")]
    DType { op: String, msg: String },
    /// Tensors on different devices, or a device that is not available.
    #[error("{op}: {msg}")]
    Device { op: String, msg: String },
    /// An argument value outside its domain (an axis out of range, a bad permutation, ...).
    #[error("{op}: {msg}")]
    Invalid { op: String, msg: String },
    /// A buffer the device could not allocate (Python `MemoryError`).
    #[error("{op}: {msg}")]
    OutOfMemory { op: String, msg: String },
    /// An index out of bounds.
    #[error("{op}: {msg}")]
    Index { op: String, msg: String },
    /// An axis out of range for a tensor's rank (Python: both an `IndexError`, as PyTorch
    /// raises, and a `ValueError`, as numpy's `AxisError` is).
    #[error("{op}: {msg}")]
    Axis { op: String, msg: String },
    /// Misuse of a `GradKey`: a finished key, a bad seed, a rule returning the wrong count.
    #[error("{msg}")]
    Autograd { msg: String },
    /// A tensor saved for backward was modified in place before backward ran.
    #[error(
        "{op}: a tensor of shape {shape:?} saved for backward was modified in place \
         (saved at version {saved}, now at version {current}); \
         clone it before changing it, or change it after backward"
    )]
    Version {
        op: String,
        shape: Vec<usize>,
        saved: u64,
        current: u64,
    },
    /// What a traced function cannot do (read a traced value, write into a view of a captured
    /// tensor): Python's `TraceError`.
    #[error("{op}: {msg}")]
    Trace { op: String, msg: String },
    /// An error raised by user code (a callback or a custom rule), carried through unchanged.
    #[error("{0}")]
    External(Box<dyn std::error::Error + Send + Sync>),
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn shape(op: &str, msg: impl Into<String>) -> Self {
        Error::Shape {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn dtype(op: &str, msg: impl Into<String>) -> Self {
        Error::DType {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn device(op: &str, msg: impl Into<String>) -> Self {
        Error::Device {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn invalid(op: &str, msg: impl Into<String>) -> Self {
        Error::Invalid {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn index(op: &str, msg: impl Into<String>) -> Self {
        Error::Index {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn axis(op: &str, msg: impl Into<String>) -> Self {
        Error::Axis {
            op: op.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn autograd(msg: impl Into<String>) -> Self {
        Error::Autograd { msg: msg.into() }
    }
}

impl Error {
    /// A copy of a trace error (other errors become a trace error with their message).
    pub(crate) fn clone_trace(&self) -> Error {
        match self {
            Error::Trace { op, msg } => Error::Trace {
                op: op.clone(),
                msg: msg.clone(),
            },
            e => Error::Trace {
                op: "trace".to_string(),
                msg: e.to_string(),
            },
        }
    }
}
