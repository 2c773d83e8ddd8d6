//! # ferrograd
//!
//! A reverse-mode automatic differentiation engine.
//!
//! * [`Tensor`]: shape, strides and offset over shared storage; reshape of contiguous data,
//!   permute, broadcast and basic slicing are views. Dtypes `float32`, `float64`, `int64`,
//!   `bool`; devices (CPU, CUDA) behind one [`Device`] enum.
//! * Every op, in forward and in backward, goes through one function, [`apply`]. Grad rules
//!   are written with ops, so a backward pass is itself recordable.
//! * [`GradKey`]: a tape of weak references to recorded ops with MegEngine's *producer lists*,
//!   so a tensor's callback runs the moment its gradient is final.
//! * Ops come in families (the [`op`] enums); each family's forward, save mask and grad rule
//!   sit side by side in [`ops`], behind exhaustive matches. Adding an op: see the [`ops`]
//!   module (a unary elementwise op is a row in four files). Devices implement one backend
//!   trait (`backend.rs`).
//!
//! ```
//! use ferrograd::{GradKey, Tensor};
//!
//! let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).unwrap();
//! let key = GradKey::new("example");
//! key.attach(&x, None).unwrap();
//! let y = x.mul(&x).unwrap().sum(None, false).unwrap(); // y = sum(x^2)
//! key.backward(&[y.clone()], &[y.ones_like().unwrap()]).unwrap();
//! assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
//! ```

pub mod autograd;
mod backend;
mod cpu;
/// The optional OpenBLAS for large CPU matrix products.
pub use cpu::blas;
/// The CPU worker pool's size.
pub use cpu::{join_pool_here, num_threads, set_num_threads};
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod dispatch;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod io;
pub mod layout;
pub mod memory;
pub mod op;
pub mod ops;
pub mod optim;
pub mod storage;
mod sync;
mod tensor;
pub mod window;

pub use autograd::{GradCallback, GradKey, GradRule};
pub use device::Device;
pub use dispatch::{apply, apply1};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use layout::{Layout, SliceSpec};
pub use op::Op;
pub use ops::{
    avg_pool2d, concat, conv2d, conv2d_same, cross_entropy, max_pool2d, stack, sum_to_shape,
    where_cond, AvgDivisor,
};
pub use tensor::Tensor;
pub use window::Window;
