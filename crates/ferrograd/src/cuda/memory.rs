//! Moving data: uploads and downloads, fills, casts and copies, writes through views.

use super::launch::{kernel_name, strided, strided_full};
use super::{err, CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::CpuData;

/// Uploads a host buffer.
pub(crate) fn upload(g: &Gpu, d: &CpuData) -> Result<CudaData> {
    let s = &g.stream;
    let up = |e| err("to", e);
    Ok(match d {
        CpuData::F32(v) => CudaData::F32(s.clone_htod(v).map_err(up)?),
        CpuData::F64(v) => CudaData::F64(s.clone_htod(v).map_err(up)?),
        CpuData::I64(v) => CudaData::I64(s.clone_htod(v).map_err(up)?),
        CpuData::Bool(v) => {
            let bytes: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            CudaData::Bool(s.clone_htod(&bytes).map_err(up)?)
        }
        CpuData::F16(v) => {
            let bits: Vec<u16> = v.iter().map(|h| h.to_bits()).collect();
            CudaData::F16(s.clone_htod(&bits).map_err(up)?)
        }
        CpuData::BF16(v) => {
            let bits: Vec<u16> = v.iter().map(|h| h.to_bits()).collect();
            CudaData::BF16(s.clone_htod(&bits).map_err(up)?)
        }
        CpuData::I32(v) => CudaData::I32(s.clone_htod(v).map_err(up)?),
        CpuData::I16(v) => CudaData::I16(s.clone_htod(v).map_err(up)?),
        CpuData::I8(v) => CudaData::I8(s.clone_htod(v).map_err(up)?),
        CpuData::U8(v) => CudaData::U8(s.clone_htod(v).map_err(up)?),
    })
}

/// Downloads a view as a contiguous host buffer (synchronises with the stream).
pub(crate) fn download(g: &Gpu, d: &CudaData, l: &Layout) -> Result<CpuData> {
    let c = cast(g, d, l, d.dtype())?;
    let n = l.numel();
    let s = &g.stream;
    let down = |e| err("numpy", e);
    Ok(match &c {
        CudaData::F32(v) => CpuData::F32(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::F64(v) => CpuData::F64(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::I64(v) => CpuData::I64(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::Bool(v) => CpuData::Bool(
            s.clone_dtoh(v).map_err(down)?[..n]
                .iter()
                .map(|&b| b != 0)
                .collect(),
        ),
        CudaData::F16(v) => CpuData::F16(
            s.clone_dtoh(v).map_err(down)?[..n]
                .iter()
                .map(|&b| half::f16::from_bits(b))
                .collect(),
        ),
        CudaData::BF16(v) => CpuData::BF16(
            s.clone_dtoh(v).map_err(down)?[..n]
                .iter()
                .map(|&b| half::bf16::from_bits(b))
                .collect(),
        ),
        CudaData::I32(v) => CpuData::I32(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::I16(v) => CpuData::I16(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::I8(v) => CpuData::I8(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
        CudaData::U8(v) => CpuData::U8(s.clone_dtoh(v).map_err(down)?[..n].to_vec()),
    })
}

/// A buffer of `n` elements equal to `value`.
pub(crate) fn fill(g: &Gpu, n: usize, value: f64, dtype: DType) -> Result<CudaData> {
    let mut out = g.zeros(dtype, n)?;
    if value != 0.0 {
        let f = g.function(kernel_name!("fill", dtype))?;
        let len = n as i64;
        g.launch(&f, "full")
            .buf_mut(&mut out)
            .arg(&value)
            .arg(&len)
            .grid(n)?;
    }
    Ok(out)
}

/// The cast kernel from `from` to `to` (`kernels.cu`'s `cast_<from>_<to>`).
fn cast_kernel(from: DType, to: DType) -> &'static str {
    macro_rules! to {
        ($from:literal) => {
            match to {
                DType::F32 => concat!("cast_", $from, "_f32"),
                DType::F64 => concat!("cast_", $from, "_f64"),
                DType::I64 => concat!("cast_", $from, "_i64"),
                DType::Bool => concat!("cast_", $from, "_u8"),
                DType::F16 => concat!("cast_", $from, "_f16"),
                DType::BF16 => concat!("cast_", $from, "_bf16"),
                DType::I32 => concat!("cast_", $from, "_i32"),
                DType::I16 => concat!("cast_", $from, "_i16"),
                DType::I8 => concat!("cast_", $from, "_i8"),
                DType::U8 => concat!("cast_", $from, "_ui8"),
            }
        };
    }
    match from {
        DType::F32 => to!("f32"),
        DType::F64 => to!("f64"),
        DType::I64 => to!("i64"),
        DType::Bool => to!("u8"),
        DType::F16 => to!("f16"),
        DType::BF16 => to!("bf16"),
        DType::I32 => to!("i32"),
        DType::I16 => to!("i16"),
        DType::I8 => to!("i8"),
        DType::U8 => to!("ui8"),
    }
}

/// A contiguous copy of a view converted to `to` (a plain copy when `to` is its dtype).
pub(crate) fn cast(g: &Gpu, x: &CudaData, l: &Layout, to: DType) -> Result<CudaData> {
    let n = l.numel();
    if to == x.dtype() && l.is_contiguous() && n > 0 && l.offset() + n <= x.len() {
        return copy_run(g, x, l.offset(), n);
    }
    g.elementwise(cast_kernel(x.dtype(), to), "astype", &[(x, l)], None, to)
}

/// `n` consecutive elements of `x` from `offset`, copied by the driver's device-to-device
/// copy (the copy engines' bandwidth: a kernel reached about half of it on an H200).
fn copy_run(g: &Gpu, x: &CudaData, offset: usize, n: usize) -> Result<CudaData> {
    let mut out = g.alloc(x.dtype(), n)?;
    macro_rules! each {
        ($($v:ident),*) => {
            match (x, &mut out) {
                $((CudaData::$v(src), CudaData::$v(dst)) => copy_slice(g, src, offset, n, dst),)*
                _ => Err(Error::dtype("copy", "the copy's buffer has another dtype")),
            }
        };
    }
    each!(F32, F64, I64, Bool, F16, BF16, I32, I16, I8, U8)?;
    Ok(out)
}

#[cfg(not(feature = "cuda-emulator"))]
fn copy_slice<T: super::rt::driver::DeviceRepr>(
    g: &Gpu,
    src: &super::rt::driver::CudaSlice<T>,
    offset: usize,
    n: usize,
    dst: &mut super::rt::driver::CudaSlice<T>,
) -> Result<()> {
    g.stream
        .memcpy_dtod(&src.slice(offset..offset + n), dst)
        .map_err(|e| err("copy", e))
}

#[cfg(feature = "cuda-emulator")]
fn copy_slice<T: Copy>(
    _g: &Gpu,
    src: &super::rt::driver::CudaSlice<T>,
    offset: usize,
    n: usize,
    dst: &mut super::rt::driver::CudaSlice<T>,
) -> Result<()> {
    dst.as_mut_slice()[..n].copy_from_slice(&src.as_slice()[offset..offset + n]);
    Ok(())
}

/// Writes `src` (viewed by `ls`) into `dst` through the view `ld` (same shape, same dtype).
pub(crate) fn write(
    g: &Gpu,
    dst: &mut CudaData,
    ld: &Layout,
    src: &CudaData,
    ls: &Layout,
) -> Result<()> {
    if dst.dtype() != src.dtype() {
        return Err(Error::dtype(
            "assign",
            format!(
                "cannot write {} data into a {} tensor",
                src.dtype(),
                dst.dtype()
            ),
        ));
    }
    let n = ld.numel();
    let (sd, ss) = (strided_full("assign", ld)?, strided("assign", ls)?);
    let len = n as i64;
    let f = g.function(kernel_name!("write", dst.dtype()))?;
    g.launch(&f, "assign")
        .buf(src)
        .arg(&ss)
        .buf_mut(dst)
        .arg(&sd)
        .arg(&len)
        .grid(n)
}
