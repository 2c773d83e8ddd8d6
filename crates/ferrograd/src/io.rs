//! Checkpoints in the safetensors format (the `safetensors` crate): named tensors of every
//! dtype, with string metadata, in files that PyTorch, JAX and Hugging Face tools read.
//!
//! ```
//! use ferrograd::{io, Tensor};
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
//! let bytes = io::to_safetensors(&[("w".to_string(), w)], None).unwrap();
//! let (tensors, _meta) = io::from_safetensors(&bytes).unwrap();
//! assert_eq!(tensors[0].0, "w");
//! assert_eq!(tensors[0].1.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
//! ```

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::storage::CpuData;
use crate::{DType, Error, Result, Tensor};

fn file_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::I64 => Dtype::I64,
        DType::Bool => Dtype::BOOL,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I16 => Dtype::I16,
        DType::I8 => Dtype::I8,
        DType::U8 => Dtype::U8,
    }
}

/// Little-endian bytes of the elements (booleans as one byte each).
fn le_bytes(data: &CpuData) -> Vec<u8> {
    match data {
        CpuData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        CpuData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuData::U8(v) => v.clone(),
    }
}

fn chunks<const N: usize, T>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    b.chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunks_exact gives N bytes")))
        .collect()
}

fn tensor_of(name: &str, view: &TensorView<'_>) -> Result<Tensor> {
    let b = view.data();
    let shape = view.shape();
    match view.dtype() {
        Dtype::F32 => Tensor::from_vec(chunks(b, f32::from_le_bytes), shape),
        Dtype::F64 => Tensor::from_vec(chunks(b, f64::from_le_bytes), shape),
        Dtype::I64 => Tensor::from_vec(chunks(b, i64::from_le_bytes), shape),
        Dtype::I32 => Tensor::from_vec(chunks(b, i32::from_le_bytes), shape),
        Dtype::I16 => Tensor::from_vec(chunks(b, i16::from_le_bytes), shape),
        Dtype::I8 => Tensor::from_vec(chunks(b, i8::from_le_bytes), shape),
        Dtype::U8 => Tensor::from_vec(b.to_vec(), shape),
        Dtype::F16 => Tensor::from_vec(chunks(b, half::f16::from_le_bytes), shape),
        Dtype::BF16 => Tensor::from_vec(chunks(b, half::bf16::from_le_bytes), shape),
        Dtype::BOOL => {
            if let Some(bad) = b.iter().find(|&&x| x > 1) {
                return Err(Error::invalid(
                    "load",
                    format!("tensor {name:?}: the bool byte {bad} is neither 0 nor 1"),
                ));
            }
            Tensor::from_vec(b.iter().map(|&x| x == 1).collect::<Vec<bool>>(), shape)
        }
        other => Err(Error::invalid(
            "load",
            format!("tensor {name:?} has dtype {other:?}, which ferrograd does not store"),
        )),
    }
}

/// The safetensors bytes of `tensors` (each copied to the host, row-major) with optional
/// string `metadata`. Names must be unique.
pub fn to_safetensors(
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let data = t
            .host_data()
            .map_err(|e| Error::invalid("save", format!("tensor {name:?}: {e}")))?;
        bytes.push((file_dtype(t.dtype()), le_bytes(&data)));
    }
    let mut views = Vec::with_capacity(tensors.len());
    for ((name, t), (dtype, b)) in tensors.iter().zip(&bytes) {
        let view = TensorView::new(*dtype, t.shape().to_vec(), b)
            .map_err(|e| Error::invalid("save", format!("tensor {name:?}: {e}")))?;
        views.push((name.as_str(), view));
    }
    let mut names: Vec<&str> = views.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::invalid(
            "save",
            format!("two tensors are named {:?}", w[0]),
        ));
    }
    safetensors::serialize(views, metadata).map_err(|e| Error::invalid("save", e.to_string()))
}

/// The tensors (on the CPU, in the file's order of data) and metadata of safetensors
/// bytes. A truncated or corrupt buffer is an `Invalid` error saying what is wrong.
pub type Loaded = (Vec<(String, Tensor)>, Option<HashMap<String, String>>);

/// Reads safetensors bytes: see [`Loaded`].
pub fn from_safetensors(bytes: &[u8]) -> Result<Loaded> {
    let bad = |e: safetensors::SafeTensorError| {
        Error::invalid(
            "load",
            format!("not a valid safetensors checkpoint (truncated or corrupt?): {e}"),
        )
    };
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(bad)?;
    let st = SafeTensors::deserialize(bytes).map_err(bad)?;
    let mut views: Vec<(&str, TensorView<'_>)> = st.iter().collect();
    views.sort_by_key(|(_, v)| v.data().as_ptr() as usize);
    let mut out = Vec::with_capacity(views.len());
    for (name, view) in views {
        out.push((name.to_string(), tensor_of(name, &view)?));
    }
    Ok((out, meta.metadata().clone()))
}

/// Writes `tensors` and `metadata` to a safetensors file at `path`.
pub fn save_safetensors(
    path: impl AsRef<Path>,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<()> {
    let bytes = to_safetensors(tensors, metadata)?;
    std::fs::write(path.as_ref(), bytes).map_err(|e| {
        Error::invalid(
            "save",
            format!("cannot write {}: {e}", path.as_ref().display()),
        )
    })
}

/// Reads a safetensors file at `path`: see [`Loaded`].
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<Loaded> {
    let bytes = std::fs::read(path.as_ref()).map_err(|e| {
        Error::invalid(
            "load",
            format!("cannot read {}: {e}", path.as_ref().display()),
        )
    })?;
    from_safetensors(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_bit_exact() {
        let f = Tensor::from_vec(vec![1.5f32, -0.0, f32::NAN, 3.25, 1e-40, 7.0], &[2, 3]).unwrap();
        let mut ts = vec![("f".to_string(), f.clone())];
        for d in DType::ALL {
            ts.push((format!("{d}"), f.astype(d).unwrap()));
        }
        ts.push(("t".to_string(), f.t().unwrap())); // a non-contiguous view
        let bytes = to_safetensors(&ts, None).unwrap();
        let (back, meta) = from_safetensors(&bytes).unwrap();
        assert!(meta.is_none());
        assert_eq!(back.len(), ts.len());
        for (name, t) in &ts {
            let got = &back.iter().find(|(n, _)| n == name).unwrap().1;
            assert_eq!(got.dtype(), t.dtype(), "{name}");
            assert_eq!(got.shape(), t.shape(), "{name}");
            let a = le_bytes(&got.host_data().unwrap());
            let b = le_bytes(&t.host_data().unwrap());
            assert_eq!(a, b, "{name}");
        }
    }

    #[test]
    fn truncated_and_corrupt_files_are_errors() {
        let t = Tensor::from_vec(vec![1.0f64; 10], &[10]).unwrap();
        let mut meta = HashMap::new();
        meta.insert("k".to_string(), "v".to_string());
        let bytes = to_safetensors(&[("x".to_string(), t)], Some(meta)).unwrap();
        let (_, m) = from_safetensors(&bytes).unwrap();
        assert_eq!(m.unwrap()["k"], "v");
        for cut in [0, 4, 8, 20, bytes.len() - 1] {
            let e = from_safetensors(&bytes[..cut]).unwrap_err();
            assert!(e.to_string().contains("not a valid safetensors"), "{e}");
        }
        let mut junk = bytes.clone();
        junk[10] = b'{';
        junk[12] = 0xff;
        assert!(from_safetensors(&junk).is_err());
    }

    #[test]
    fn duplicate_names_are_refused() {
        let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let e = to_safetensors(&[("a".into(), t.clone()), ("a".into(), t)], None).unwrap_err();
        assert!(e.to_string().contains("two tensors"), "{e}");
    }
}
