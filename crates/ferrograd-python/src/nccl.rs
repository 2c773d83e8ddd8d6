//! NCCL for `ferrograd.distributed`'s `"nccl"` backend: loading the library, unique ids and a
//! communicator whose collectives work in place on CUDA tensors.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{str_arg, tensor_arg, usize_arg};
#[cfg(feature = "cuda")]
use crate::errors::ResultExt;

#[cfg(not(feature = "cuda"))]
fn no_cuda(op: &str) -> PyErr {
    crate::errors::to_pyerr(ferrograd::Error::Device {
        op: op.to_string(),
        msg: "this build of ferrograd has no CUDA support, so no NCCL".to_string(),
    })
}

/// Loads NCCL from `path`; returns its version code (e.g. 23203 for 2.32.3).
#[pyfunction]
fn _nccl_load(path: &Bound<'_, PyAny>) -> PyResult<i32> {
    let path = str_arg("init_process_group", "path", path)?;
    #[cfg(feature = "cuda")]
    return ferrograd::cuda::nccl::load(&path).py();
    #[cfg(not(feature = "cuda"))]
    {
        let _ = path;
        Err(no_cuda("init_process_group"))
    }
}

/// A new NCCL unique id (128 bytes) for the ranks of one communicator.
#[pyfunction]
fn _nccl_unique_id(py: Python<'_>) -> PyResult<Bound<'_, PyBytes>> {
    #[cfg(feature = "cuda")]
    {
        let id = ferrograd::cuda::nccl::unique_id().py()?;
        Ok(PyBytes::new(py, &id.0))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = py;
        Err(no_cuda("init_process_group"))
    }
}

/// An NCCL communicator: this process's rank on one CUDA device.
#[pyclass(name = "_NcclComm", module = "ferrograd._core", frozen)]
pub struct PyNcclComm {
    #[cfg(feature = "cuda")]
    comm: ferrograd::cuda::nccl::Comm,
}

#[cfg(feature = "cuda")]
fn reduce_op(op: &Bound<'_, PyAny>, name: &str) -> PyResult<ferrograd::cuda::nccl::ReduceOp> {
    let s = str_arg(name, "op", op)?;
    ferrograd::cuda::nccl::ReduceOp::parse(name, &s).py()
}

#[pymethods]
impl PyNcclComm {
    /// Joins the communicator `unique_id` as `rank` of `size` on device `cuda:ordinal`.
    #[new]
    fn new(
        py: Python<'_>,
        unique_id: &[u8],
        size: &Bound<'_, PyAny>,
        rank: &Bound<'_, PyAny>,
        ordinal: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let op = "init_process_group";
        let size = usize_arg(op, "world_size", size)?;
        let rank = usize_arg(op, "rank", rank)?;
        let ordinal = usize_arg(op, "device", ordinal)?;
        #[cfg(feature = "cuda")]
        {
            let id: [u8; 128] = unique_id.try_into().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "{op}: an NCCL unique id has 128 bytes, got {}",
                    unique_id.len()
                ))
            })?;
            let id = ferrograd::cuda::nccl::UniqueId(id);
            let comm = py
                .detach(|| ferrograd::cuda::nccl::Comm::new(&id, size, rank, ordinal))
                .py()?;
            Ok(PyNcclComm { comm })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (py, unique_id, size, rank, ordinal);
            Err(no_cuda(op))
        }
    }

    /// Reduces `tensor` over every rank in place (`op`: sum, prod, max, min, mean).
    fn all_reduce(&self, tensor: &Bound<'_, PyAny>, op: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = tensor_arg("all_reduce", "tensor", tensor)?;
        #[cfg(feature = "cuda")]
        return self.comm.all_reduce(&t, reduce_op(op, "all_reduce")?).py();
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (t, op);
            Err(no_cuda("all_reduce"))
        }
    }

    /// Copies `tensor` of rank `src` into `tensor` on every rank.
    fn broadcast(&self, tensor: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = tensor_arg("broadcast", "tensor", tensor)?;
        let src = usize_arg("broadcast", "src", src)?;
        #[cfg(feature = "cuda")]
        return self.comm.broadcast(&t, src).py();
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (t, src);
            Err(no_cuda("broadcast"))
        }
    }

    /// Writes every rank's `input` into `output` (world size times as many elements).
    fn all_gather(&self, input: &Bound<'_, PyAny>, output: &Bound<'_, PyAny>) -> PyResult<()> {
        let i = tensor_arg("all_gather", "input", input)?;
        let o = tensor_arg("all_gather", "output", output)?;
        #[cfg(feature = "cuda")]
        return self.comm.all_gather(&i, &o).py();
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (i, o);
            Err(no_cuda("all_gather"))
        }
    }

    /// Reduces `input` over every rank and writes this rank's block into `output`.
    fn reduce_scatter(
        &self,
        input: &Bound<'_, PyAny>,
        output: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let i = tensor_arg("reduce_scatter", "input", input)?;
        let o = tensor_arg("reduce_scatter", "output", output)?;
        #[cfg(feature = "cuda")]
        return self
            .comm
            .reduce_scatter(&i, &o, reduce_op(op, "reduce_scatter")?)
            .py();
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (i, o, op);
            Err(no_cuda("reduce_scatter"))
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_nccl_load, m)?)?;
    m.add_function(wrap_pyfunction!(_nccl_unique_id, m)?)?;
    m.add_class::<PyNcclComm>()?;
    Ok(())
}
