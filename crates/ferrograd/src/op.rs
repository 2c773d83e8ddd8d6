//! What an op is: its name, its parameters and whether it has a gradient. Nothing here runs
//! an op or knows the tape; `dispatch` runs ops, `ops/<family>.rs` hold their forward passes
//! and grad rules, and the backends (`cpu/`, `cuda/`) import these names for their kernels.
//!
//! Ops come in families. `Op` has one variant per family and each family is an enum of its
//! ops, so every place that must answer for each op (the router [`for_each_family!`], each
//! family's forward, save mask and rule) is an exhaustive `match`: an op added without its
//! forward or its rule does not compile. The elementwise families are generated from the op
//! tables [`crate::unary_ops!`] and [`crate::binary_ops!`]; the others are declared below with
//! [`op_family!`], which gives each op its name and says whether it is differentiable.

use crate::device::Device;
use crate::dtype::DType;
use crate::layout::SliceSpec;
use crate::window::Window;

/// Declares the enum of a family of ops with, per op, its name and whether it has a gradient
/// (`nondiff` after the name for ops without one).
macro_rules! op_family {
    (
        $(#[$meta:meta])*
        pub enum $family:ident {
            $(
                $(#[$vmeta:meta])*
                $op:ident $(( $($tuple:ty),* ))? $({ $($field:ident : $fty:ty),* $(,)? })?
                    => $name:literal $($nondiff:ident)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        pub enum $family {
            $( $(#[$vmeta])* $op $(( $($tuple),* ))? $({ $($field: $fty),* })? ),*
        }

        impl $family {
            /// Every op name of the family.
            pub const NAMES: &'static [&'static str] = &[$($name),*];
            /// Whether each op of [`Self::NAMES`] has a gradient.
            pub const DIFFERENTIABLE: &'static [bool] =
                &[$( op_family!(@differentiable $($nondiff)?) ),*];

            /// The name used in errors, reports and rule registration.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Self::$op { .. } => $name ),*
                }
            }

            /// Whether a gradient can flow through the op.
            pub fn is_differentiable(&self) -> bool {
                match self {
                    $( Self::$op { .. } => op_family!(@differentiable $($nondiff)?) ),*
                }
            }
        }
    };
    (@differentiable) => { true };
    (@differentiable nondiff) => { false };
}

/// Declares `UnaryOp` from the rows of [`crate::unary_ops!`].
macro_rules! declare_unary {
    ($($op:ident $name:ident $float:tt $int:tt $grad:tt),* $(,)?) => {
        /// Elementwise functions of one tensor: the rows of [`crate::unary_ops!`].
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $( #[doc = concat!("`", stringify!($name), "`")] $op ),*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$op),*];
            /// Every unary op's name.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
            /// Whether each op of [`Self::NAMES`] has a gradient.
            pub const DIFFERENTIABLE: &'static [bool] =
                &[$( declare_unary!(@differentiable $grad) ),*];

            pub fn name(self) -> &'static str {
                match self {
                    $( UnaryOp::$op => stringify!($name) ),*
                }
            }

            /// Whether a gradient flows through the op (rows whose rule is `nondiff` have none).
            pub fn is_differentiable(self) -> bool {
                match self {
                    $( UnaryOp::$op => declare_unary!(@differentiable $grad) ),*
                }
            }

            /// Whether the op is defined on int64 tensors (its row has an int64 kernel).
            pub fn has_int_kernel(self) -> bool {
                match self {
                    $( UnaryOp::$op => declare_unary!(@has $int) ),*
                }
            }
        }
    };
    (@differentiable nondiff) => { false };
    (@differentiable ($($rule:tt)*)) => { true };
    (@has ()) => { false };
    (@has ($($kernel:tt)*)) => { true };
}
crate::unary_ops!(declare_unary);

/// Declares `BinaryOp` from the rows of [`crate::binary_ops!`].
macro_rules! declare_binary {
    ($($op:ident $name:ident $float:tt $int:tt $da:tt $db:tt),* $(,)?) => {
        /// Elementwise functions of two tensors, with numpy broadcasting: the rows of
        /// [`crate::binary_ops!`].
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $( #[doc = concat!("`", stringify!($name), "`")] $op ),*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: &'static [BinaryOp] = &[$(BinaryOp::$op),*];
            /// Every binary op's name.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
            /// Every binary op has a gradient.
            pub const DIFFERENTIABLE: &'static [bool] = &[$( declare_binary!(@yes $op) ),*];

            pub fn name(self) -> &'static str {
                match self {
                    $( BinaryOp::$op => stringify!($name) ),*
                }
            }

            /// Every binary op has a gradient.
            pub fn is_differentiable(self) -> bool {
                true
            }

            /// Whether the op is defined on int64 tensors (its row has an int64 kernel).
            pub fn has_int_kernel(self) -> bool {
                match self {
                    $( BinaryOp::$op => declare_unary!(@has $int) ),*
                }
            }
        }
    };
    (@yes $op:ident) => { true };
}
crate::binary_ops!(declare_binary);

/// Declares `CmpOp` from the rows of [`crate::compare_ops!`].
macro_rules! declare_compare {
    ($($op:ident $method:ident $name:ident $kernel:tt),* $(,)?) => {
        /// Comparisons: bool results, no gradient. The rows of [`crate::compare_ops!`].
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum CmpOp {
            $( #[doc = concat!("`", stringify!($name), "`")] $op ),*
        }

        impl CmpOp {
            /// Every comparison, in table order.
            pub const ALL: &'static [CmpOp] = &[$(CmpOp::$op),*];
            /// Every comparison's name.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
            /// Comparisons have no gradient.
            pub const DIFFERENTIABLE: &'static [bool] = &[$( declare_compare!(@no $op) ),*];

            pub fn name(self) -> &'static str {
                match self {
                    $( CmpOp::$op => stringify!($name) ),*
                }
            }

            /// Comparisons have no gradient.
            pub fn is_differentiable(self) -> bool {
                false
            }
        }
    };
    (@no $op:ident) => { false };
}
crate::compare_ops!(declare_compare);

/// Which activation an [`ElementwiseOp`] gradient op belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    Tanh,
    Sigmoid,
    Relu,
}

op_family! {
    /// Elementwise ops that are not rows of the unary and binary tables.
    pub enum ElementwiseOp {
        /// `x ** p` with a constant exponent.
        PowScalar(f64) => "pow",
        /// The backward of tanh from its output: inputs `(dy, y)`, `dy * (1 - y^2)`; one pass
        /// instead of a chain of ops.
        TanhGrad => "tanh_grad",
        /// The backward of sigmoid from its output: `dy * y * (1 - y)`.
        SigmoidGrad => "sigmoid_grad",
        /// The backward of relu from its output: `dy * (y > 0)`.
        ReluGrad => "relu_grad",
        /// `where(cond, a, b)`.
        Where => "where",
        /// A conversion to another dtype (a gradient flows back between float dtypes).
        Cast(DType) => "astype",
        /// A contiguous copy.
        Copy => "copy",
        /// Random numbers of `shape` and `dtype` (float32 or float64), uniform in `[0, 1)` or
        /// standard normal, from a counter-based generator keyed by the value of the input
        /// (an int64 scalar) and `salt`: the same inputs give the same numbers, so a graph
        /// that advances the counter draws fresh numbers on every run.
        Random { shape: Vec<usize>, dtype: DType, salt: u64, normal: bool } => "random" nondiff,
    }
}

/// How a reduction combines the elements of its axes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
}

op_family! {
    /// Reductions over a set of axes (sorted, unique), and softmax along one axis.
    pub enum ReduceOp {
        Sum { axes: Vec<usize>, keepdims: bool } => "sum",
        Mean { axes: Vec<usize>, keepdims: bool } => "mean",
        /// Ties share the gradient.
        Max { axes: Vec<usize>, keepdims: bool } => "max",
        /// Ties share the gradient.
        Min { axes: Vec<usize>, keepdims: bool } => "min",
        Softmax(usize) => "softmax",
        LogSoftmax(usize) => "log_softmax",
        /// Each row along the last axis shifted to mean 0 and scaled to variance 1 (biased),
        /// `(x - mean) / sqrt(var + eps)`, in one pass: layer norm, with its affine part
        /// `* w + b` when given the weight and bias as second and third inputs.
        Normalize { eps: f64 } => "layer_norm",
        /// Normalize's gradients in one pass (first order; the rule of Normalize writes them
        /// with ops instead where its own backward is recorded): from `(x, dy)` the input's;
        /// from `(x, w, dy)` the input's, the weight's and the bias's in one flat tensor.
        NormalizeGrad { eps: f64 } => "layer_norm_grad" nondiff,
        /// Mean cross-entropy of `[n, c]` logits against `[n]` int64 labels, one pass per row
        /// (log-sum-exp and the label's logit); a 0-d result.
        SoftmaxCrossEntropy => "softmax_cross_entropy",
        /// Its logits' gradient from `(logits, labels, dy)`, `(softmax - onehot) * dy / n`, in
        /// one pass (first order; see `Normalize` for how higher orders are served).
        SoftmaxCrossEntropyGrad => "softmax_cross_entropy_grad" nondiff,
    }
}

op_family! {
    /// Linear algebra.
    pub enum LinalgOp {
        /// Matrix product of `[..., m, k]` and `[..., k, n]` with broadcast batch axes.
        MatMul => "matmul",
        /// `softmax(scale * q k^T) v` of `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]`
        /// (the same leading axes), with `causal` row `i` seeing keys `<= i`: one op whose
        /// `[l, s]` probabilities never exist whole (computed per block of rows).
        Attention { scale: f64, causal: bool } => "scaled_dot_product_attention",
        /// Attention's gradients from `(q, k, v, out, dout)`, `[dq | dk | dv]` flat, in one
        /// pass that recomputes the probabilities (first order; Attention's rule writes them
        /// with differentiable ops where its own backward is recorded).
        AttentionGrad { scale: f64, causal: bool } => "scaled_dot_product_attention_grad" nondiff,
    }
}

op_family! {
    /// Ops that move or select data. Reshape of contiguous data, permute, broadcast and basic
    /// slicing are views.
    pub enum MovementOp {
        /// A copy on another device (`Tensor::to`); its gradient goes back the other way.
        ToDevice { from: Device, to: Device } => "to",
        Reshape(Vec<usize>) => "reshape",
        Permute(Vec<usize>) => "permute",
        BroadcastTo(Vec<usize>) => "broadcast_to",
        /// Basic indexing (a view).
        Slice(Vec<SliceSpec>) => "getitem",
        /// Zeros of `shape` with the input written where `specs` selects: slicing's gradient.
        SliceGrad { shape: Box<[usize]>, specs: Box<[SliceSpec]> } => "getitem_grad",
        /// A copy of the first input with the region `specs` selects replaced by the second
        /// (broadcast): the functional form of `x[specs] = v`.
        SetSlice(Vec<SliceSpec>) => "setitem",
        Concat(usize) => "concat",
        /// The diagonal `offset` of the `(dim1, dim2)` planes as the last axis (a view).
        Diagonal { offset: isize, dim1: usize, dim2: usize } => "diagonal",
        /// The windows of `size` elements `step` apart along `dim`, as a new last axis (a
        /// view: PyTorch's `Tensor.unfold`).
        UnfoldView { dim: usize, size: usize, step: usize } => "unfold_view",
        /// The view of the input's buffer with `shape`, `strides` and storage `offset`
        /// (PyTorch's `as_strided`); `base_strides` and `base_offset` are the input's own, for
        /// the gradient.
        AsStrided {
            shape: Vec<usize>,
            strides: Vec<isize>,
            offset: usize,
            base_strides: Vec<isize>,
            base_offset: usize,
        } => "as_strided",
        /// `take_along_axis(x, idx, axis)`.
        Gather(usize) => "gather",
        /// Zeros of `shape`, then `src` added at `idx` along `axis`: gather's gradient.
        ScatterAdd { axis: usize, shape: Vec<usize> } => "scatter_add",
        /// The int64 positions that sort each line along `axis` (stable: equal values keep
        /// their order; NaN sorts above every number, so last ascending and first
        /// descending). Computed on the host; the result goes to the input's device.
        Argsort { axis: usize, descending: bool } => "argsort" nondiff,
    }
}

op_family! {
    /// Ops over 2-D windows of NCHW tensors: im2col, convolution, pooling.
    pub enum WindowOp {
        /// im2col: `[n, c, h, w]` to `[n, oh*ow, c, kh*kw]`, padding reads `pad`.
        Unfold { window: Box<Window>, pad: f64 } => "unfold",
        /// The transpose of `Unfold` (overlapping windows are summed) back to `size`.
        Fold { window: Box<Window>, size: (usize, usize) } => "fold",
        /// For each pooling window of `[n, c, h, w]`, the flat `h * w` position of its maximum
        /// (first one on ties, NaN wins; -1 for a window entirely in the padding), as int64
        /// `[n, c, oh * ow]`. The second derivative of max pooling gathers with these indices.
        PoolArgmax(Box<Window>) => "pool_argmax" nondiff,
        /// 2-D convolution (cross-correlation) of `[n, c, h, w]` with `[o, c / groups, kh, kw]`,
        /// plus an optional bias `[o]` as a third input.
        Conv2d { window: Box<Window>, groups: usize } => "conv2d",
        /// The convolution's input gradient from `(dy, weight)`, back to spatial `size`; its
        /// own gradients are a convolution and a weight gradient.
        Conv2dInputGrad { window: Box<Window>, groups: usize, size: (usize, usize) }
            => "conv2d_input_grad",
        /// The convolution's weight gradient from `(x, dy)`.
        Conv2dWeightGrad { window: Box<Window>, groups: usize } => "conv2d_weight_grad",
        /// 2-D max pooling (padding never wins).
        MaxPool2d(Box<Window>) => "max_pool2d",
        /// Max pooling's input gradient from `(x, dy)`: `dy` added at each window's maximum.
        MaxPool2dGrad(Box<Window>) => "max_pool2d_grad",
    }
}

/// An op: its family and, in it, the op with its parameters. Inputs are passed to
/// [`crate::apply`] separately.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Elementwise(ElementwiseOp),
    Reduce(ReduceOp),
    Linalg(LinalgOp),
    Movement(MovementOp),
    Window(WindowOp),
}

/// Evaluates `$body` with `$f` bound to the family op inside `$op` (an `&Op`): the one
/// router from an op to its family, exhaustive over the families.
#[macro_export]
#[doc(hidden)]
macro_rules! for_each_family {
    ($op:expr, $f:ident => $body:expr) => {
        match $op {
            $crate::op::Op::Unary($f) => $body,
            $crate::op::Op::Binary($f) => $body,
            $crate::op::Op::Compare($f) => $body,
            $crate::op::Op::Elementwise($f) => $body,
            $crate::op::Op::Reduce($f) => $body,
            $crate::op::Op::Linalg($f) => $body,
            $crate::op::Op::Movement($f) => $body,
            $crate::op::Op::Window($f) => $body,
        }
    };
}
pub use for_each_family;

impl Op {
    /// The name used in errors and reports, and to register grad rules.
    pub fn name(&self) -> &'static str {
        for_each_family!(self, f => f.name())
    }

    /// Whether any gradient can flow through this op.
    pub fn is_differentiable(&self) -> bool {
        for_each_family!(self, f => f.is_differentiable())
    }

    /// Every op name (for rule registration), without repeats.
    pub fn names() -> &'static [&'static str] {
        static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| Op::name_table().iter().map(|(n, _)| *n).collect())
    }

    /// Every op name with whether the op has a gradient, family by family, without repeats.
    pub fn name_table() -> &'static [(&'static str, bool)] {
        static TABLE: std::sync::OnceLock<Vec<(&'static str, bool)>> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            let families: [(&[&str], &[bool]); 8] = [
                (UnaryOp::NAMES, UnaryOp::DIFFERENTIABLE),
                (BinaryOp::NAMES, BinaryOp::DIFFERENTIABLE),
                (CmpOp::NAMES, CmpOp::DIFFERENTIABLE),
                (ElementwiseOp::NAMES, ElementwiseOp::DIFFERENTIABLE),
                (ReduceOp::NAMES, ReduceOp::DIFFERENTIABLE),
                (LinalgOp::NAMES, LinalgOp::DIFFERENTIABLE),
                (MovementOp::NAMES, MovementOp::DIFFERENTIABLE),
                (WindowOp::NAMES, WindowOp::DIFFERENTIABLE),
            ];
            let mut table: Vec<(&'static str, bool)> = Vec::new();
            for (names, diff) in families {
                for (n, d) in names.iter().zip(diff) {
                    if !table.iter().any(|(m, _)| m == n) {
                        table.push((n, *d));
                    }
                }
            }
            table
        })
    }
}

macro_rules! into_op {
    ($($family:ident => $variant:ident),*) => {
        $(
            impl From<$family> for Op {
                fn from(op: $family) -> Op {
                    Op::$variant(op)
                }
            }
        )*
    };
}
into_op!(UnaryOp => Unary, BinaryOp => Binary, CmpOp => Compare, ElementwiseOp => Elementwise,
    ReduceOp => Reduce, LinalgOp => Linalg, MovementOp => Movement, WindowOp => Window);

impl ReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Mean => "mean",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
        }
    }
}

impl Activation {
    /// The name of the activation's gradient op.
    pub fn grad_name(self) -> &'static str {
        match self {
            Activation::Tanh => "tanh_grad",
            Activation::Sigmoid => "sigmoid_grad",
            Activation::Relu => "relu_grad",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_per_family_and_listed() {
        let names = Op::names();
        for n in [
            "exp",
            "add",
            "equal",
            "tanh_grad",
            "sum",
            "matmul",
            "getitem",
            "conv2d",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(Op::Unary(UnaryOp::Sign).is_differentiable());
        assert!(!Op::Compare(CmpOp::Lt).is_differentiable());
        assert!(!Op::Window(WindowOp::PoolArgmax(Box::new(Window {
            kernel: (1, 1),
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            ceil: false,
        })))
        .is_differentiable());
        assert!(Op::Linalg(LinalgOp::MatMul).is_differentiable());
    }
}
