//! Graph mode: a training step traced into a graph of the engine's own ops, differentiated by
//! a graph gradient pass (MXNet's semantics, with the same grad rules the tape uses), and run
//! whole in Rust.
//!
//! * [`trace`]: while a trace is active, [`crate::apply`] also adds each op to a graph (the op
//!   still runs: the first call of a traced function is an ordinary step).
//! * [`grad`]: backward inside a trace: each op's rule applied to its traced values in reverse
//!   order, contributions to one gradient added, callbacks run as each gradient is final.
//! * [`exec`]: compiling a graph (common subexpressions, dead code, [`mirror`]ing, elementwise
//!   fusion, the memory [`plan`]) and running it again on new inputs.

pub mod exec;
pub(crate) mod fuse;
pub mod grad;
mod ir;
pub mod mirror;
mod passes;
pub mod plan;
pub mod trace;

pub use exec::{Executable, Options};
pub use grad::{gradients, gradients_with};
pub use ir::{Callable, CustomRule, Graph, Node, NodeId, NodeKind};
pub use mirror::Mirror;
pub use plan::MemoryReport;
pub use trace::{
    abort, begin, call, check_read, custom, end, guard_writes, is_tracing, keep_undo,
    keys_recording, set_shape_data, undo,
};
