//! Element types.

use std::fmt;

/// The element type of a tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    I64,
    Bool,
    /// IEEE half precision: stored as such, computed in float32 (each op rounds once).
    F16,
    /// bfloat16: stored as such, computed in float32 (each op rounds once).
    BF16,
    /// Stored as such, computed in int64 (results wrap to 32 bits, as PyTorch's).
    I32,
    /// Stored as such, computed in int64 (results wrap to 16 bits, as PyTorch's).
    I16,
    I8,
    U8,
}

/// The float dtype an integer or bool operand becomes where an op needs a float (a Python
/// float meeting an int tensor, true division, `sin` of ints): PyTorch's default dtype,
/// float32 unless [`set_default_float`] changed it.
static DEFAULT_FLOAT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The default float dtype (see [`set_default_float`]).
pub fn default_float() -> DType {
    match DEFAULT_FLOAT.load(std::sync::atomic::Ordering::Relaxed) {
        1 => DType::F64,
        2 => DType::F16,
        3 => DType::BF16,
        _ => DType::F32,
    }
}

/// Sets the default float dtype (PyTorch's `set_default_dtype`); `None` for a dtype that is
/// not a float.
pub fn set_default_float(d: DType) -> Option<()> {
    let code = match d {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        _ => return None,
    };
    DEFAULT_FLOAT.store(code, std::sync::atomic::Ordering::Relaxed);
    Some(())
}

impl DType {
    /// The numpy-style name: `float32`, `float64`, `int64`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I64 => "int64",
            DType::Bool => "bool",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U8 => "uint8",
        }
    }

    /// Every dtype.
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::I64,
        DType::Bool,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
    ];

    /// Parses a numpy-style name (`float32`, `f32`, `float`, `int64`, `bool`, ...).
    pub fn parse(name: &str) -> Option<DType> {
        Some(match name {
            "float32" | "f32" | "float" => DType::F32,
            "float64" | "f64" | "double" => DType::F64,
            "int64" | "i64" | "long" | "int" => DType::I64,
            "bool" | "bool_" => DType::Bool,
            "float16" | "f16" | "half" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "int32" | "i32" => DType::I32,
            "int16" | "i16" | "short" => DType::I16,
            "int8" | "i8" => DType::I8,
            "uint8" | "u8" => DType::U8,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::Bool | DType::I8 | DType::U8 => 1,
        }
    }

    /// Whether gradients can flow through values of this type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// The dtype kernels compute this one in: float16 and bfloat16 in float32, the narrow
    /// integers in int64; every other dtype in itself.
    pub fn compute(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            DType::I32 | DType::I16 | DType::I8 | DType::U8 => DType::I64,
            d => d,
        }
    }

    /// Whether kernels compute in this dtype directly (see [`DType::compute`]).
    pub fn is_native(self) -> bool {
        self.compute() == self
    }

    /// Integer dtypes (not bool).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rust element types that a tensor can hold.
pub trait Element:
    Copy + Send + Sync + 'static + fmt::Debug + PartialOrd + crate::storage::IntoCpuData
{
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

macro_rules! element {
    ($t:ty, $d:ident, |$a:ident| $to:expr, |$v:ident| $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                let $a = self;
                $to
            }
            fn from_f64($v: f64) -> Self {
                $from
            }
        }
    };
}
// (through float32, as PyTorch's and the CUDA kernels' conversions: a float64 rounds twice)
element!(half::f16, F16, |a| a.to_f64(), |v| half::f16::from_f32(
    v as f32
));
element!(half::bf16, BF16, |a| a.to_f64(), |v| half::bf16::from_f32(
    v as f32
));
element!(i32, I32, |a| a as f64, |v| v as i64 as i32);
element!(i16, I16, |a| a as f64, |v| v as i64 as i16);
element!(i8, I8, |a| a as f64, |v| v as i64 as i8);
element!(u8, U8, |a| a as f64, |v| v as i64 as u8);
