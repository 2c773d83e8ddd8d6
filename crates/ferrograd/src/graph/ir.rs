//! The graph: a traced step as a list of nodes in an order every node's inputs precede it
//! (the order they were made in), over the engine's own [`Op`] values, plus the step's
//! effects on tensors from outside it.

use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::Tensor;

/// A node's index in [`Graph::nodes`].
pub type NodeId = usize;

/// A function the graph calls at its point of every run (a gradient callback): given its
/// inputs' values, the node's value. It may run Python.
pub type Callable = Arc<dyn Fn(&[Tensor]) -> Result<Tensor> + Send + Sync>;

/// A custom gradient (a user's `Function`): given the gradients of the call's outputs (`None`
/// where an output got none), the gradients of its inputs.
pub type CustomRule = Arc<dyn Fn(&[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// What a node is.
#[derive(Clone)]
pub enum NodeKind {
    /// The traced function's `i`-th tensor argument.
    Input(usize),
    /// A tensor from outside the function (a parameter, optimizer state, a constant built
    /// before), read by reference: `captures[i]`.
    Capture(usize),
    /// The `.grad` of `captures[i]` when a run starts.
    GradOf(usize),
    /// The `.grad` of the `i`-th tensor argument when a run starts.
    InputGrad(usize),
    /// Data made inside the function (a Python scalar or array), kept by value.
    Constant(Tensor),
    /// A new tensor of the node's shape, dtype and device, every element `value`.
    Fill(f64),
    /// An op applied to earlier nodes.
    Op { op: Op, inputs: Vec<NodeId> },
    /// The input's value, through which no gradient flows (`detach`).
    Detach(NodeId),
    /// `callable(inputs)` at this point of every run.
    Call {
        name: String,
        callable: Callable,
        inputs: Vec<NodeId>,
    },
    /// Output `index` of a call of a function with its own gradient rule: the value of the
    /// last input (what the function computed), through which the gradient pass applies
    /// `rule` to the other inputs (the call's arguments) instead of differentiating the
    /// function's own ops. The `n_outputs` outputs of one call are consecutive nodes.
    Custom {
        name: String,
        rule: CustomRule,
        index: usize,
        n_outputs: usize,
        inputs: Vec<NodeId>,
    },
}

/// A node: what it is and the shape, dtype and device of its value.
#[derive(Clone)]
pub struct Node {
    pub kind: NodeKind,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub device: Device,
    /// Made by a gradient pass (backward), not by the function's own ops.
    pub grad_pass: bool,
    /// A recomputation, in backward, of a forward node (mirroring).
    pub recompute: bool,
    /// Made where the function had gradients disabled (`no_grad`): as on the tape, no
    /// gradient flows through it.
    pub no_grad: bool,
}

impl Node {
    /// The nodes this node reads.
    pub fn inputs(&self) -> &[NodeId] {
        match &self.kind {
            NodeKind::Op { inputs, .. }
            | NodeKind::Call { inputs, .. }
            | NodeKind::Custom { inputs, .. } => inputs,
            NodeKind::Detach(x) => std::slice::from_ref(x),
            NodeKind::Input(_)
            | NodeKind::Capture(_)
            | NodeKind::GradOf(_)
            | NodeKind::InputGrad(_)
            | NodeKind::Constant(_)
            | NodeKind::Fill(_) => &[],
        }
    }

    /// What the node computes, in a word: the op's name, or the kind of leaf.
    pub fn name(&self) -> &str {
        match &self.kind {
            NodeKind::Input(_) => "input",
            NodeKind::Capture(_) => "capture",
            NodeKind::GradOf(_) => "grad_of",
            NodeKind::InputGrad(_) => "input_grad",
            NodeKind::Constant(_) => "constant",
            NodeKind::Fill(_) => "fill",
            NodeKind::Op { op, .. } => op.name(),
            NodeKind::Detach(_) => "detach",
            NodeKind::Call { name, .. } | NodeKind::Custom { name, .. } => name,
        }
    }

    /// The inputs a gradient flows into through this node (a custom function's arguments,
    /// not the value it computed; none for leaves, detaches and callbacks).
    pub fn grad_inputs(&self) -> &[NodeId] {
        match &self.kind {
            NodeKind::Op { inputs, .. } => inputs,
            NodeKind::Custom { inputs, .. } => &inputs[..inputs.len() - 1],
            _ => &[],
        }
    }

    /// Bytes of the node's value.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_in_bytes()
    }
}

/// A traced step.
#[derive(Clone, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// How many tensor arguments the function takes.
    pub n_inputs: usize,
    /// Tensors from outside the function, by reference.
    pub captures: Vec<Tensor>,
    /// The function's results.
    pub outputs: Vec<NodeId>,
    /// In-place updates of captured tensors: at the end of a run, `captures[i]` takes the value
    /// of the node (in this order).
    pub writes: Vec<(usize, NodeId)>,
    /// In-place updates of the arguments: at the end of a run, argument `i` takes the value
    /// of the node (the last one for each argument).
    pub input_writes: Vec<(usize, NodeId)>,
    /// The `.grad` each captured tensor is left with (`None`: cleared).
    pub grads: Vec<(usize, Option<NodeId>)>,
    /// The `.grad` each tensor argument the function set one on is left with, by argument
    /// index (an argument attached to a `GradManager`).
    pub input_grads: Vec<(usize, Option<NodeId>)>,
    /// Whether each argument's `.grad` was `None` when traced, for those the function read:
    /// a run is valid only while that still holds for the tensors it is given.
    pub input_grad_guards: Vec<(usize, bool)>,
    /// Whether each captured tensor's `.grad` was `None` when it was traced, for those the
    /// function read: a run is valid only while that still holds.
    pub grad_guards: Vec<(usize, bool)>,
    /// Constants the engine built from shapes alone (the index maps that carry a write
    /// through a view to the tensors over the same memory), not from the function's data.
    pub shape_constants: Vec<NodeId>,
}

impl Graph {
    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// For each node, the nodes that read it.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (id, node) in self.nodes.iter().enumerate() {
            for &i in node.inputs() {
                if !out[i].contains(&id) {
                    out[i].push(id);
                }
            }
        }
        out
    }

    /// Nodes whose values leave the run: outputs, values written into captured tensors and
    /// gradients left on them.
    pub fn roots(&self) -> Vec<NodeId> {
        let mut roots: Vec<NodeId> = self.outputs.clone();
        roots.extend(self.writes.iter().map(|&(_, n)| n));
        roots.extend(self.input_writes.iter().map(|&(_, n)| n));
        roots.extend(self.grads.iter().filter_map(|&(_, n)| n));
        roots.extend(self.input_grads.iter().filter_map(|&(_, n)| n));
        roots
    }

    /// The nodes of every `.grad` left on a captured tensor or an argument, and of every
    /// value written into an argument (to renumber).
    pub(crate) fn grad_nodes_mut(&mut self) -> impl Iterator<Item = &mut NodeId> {
        self.grads
            .iter_mut()
            .chain(self.input_grads.iter_mut())
            .filter_map(|(_, v)| v.as_mut())
            .chain(self.input_writes.iter_mut().map(|(_, v)| v))
    }

    /// Graphviz source: one box per node, an edge per input.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph ferrograd {\n  node [shape=box, fontname=monospace];\n");
        for (id, node) in self.nodes.iter().enumerate() {
            s.push_str(&format!(
                "  n{id} [label=\"%{id} {}\\n{:?} {}\"];\n",
                node.name(),
                node.shape,
                node.dtype
            ));
            for &i in node.inputs() {
                s.push_str(&format!("  n{i} -> n{id};\n"));
            }
        }
        for (k, &o) in self.outputs.iter().enumerate() {
            s.push_str(&format!(
                "  out{k} [shape=ellipse, label=\"output {k}\"];\n  n{o} -> out{k};\n"
            ));
        }
        s.push_str("}\n");
        s
    }
}

impl fmt::Display for Graph {
    /// One line per node: `%id = op(%inputs) : shape dtype`, followed by `-> ...` where the
    /// node is an output, is written into a captured tensor or is a `.grad` (a `.grad` set to
    /// None is noted on the last line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut notes: Vec<Vec<String>> = vec![Vec::new(); self.nodes.len()];
        let mut unset = Vec::new();
        for (k, &o) in self.outputs.iter().enumerate() {
            notes[o].push(format!("output {k}"));
        }
        for &(c, n) in &self.writes {
            notes[n].push(format!("capture {c}"));
        }
        for &(i, n) in &self.input_writes {
            notes[n].push(format!("argument {i}"));
        }
        for (what, list) in [("capture", &self.grads), ("input", &self.input_grads)] {
            for &(i, n) in list {
                match n {
                    Some(n) => notes[n].push(format!("{what} {i}.grad")),
                    None => unset.push(format!("{what} {i}.grad <- None")),
                }
            }
        }
        if let Some(last) = notes.last_mut() {
            last.append(&mut unset);
        }
        for (id, node) in self.nodes.iter().enumerate() {
            let args: Vec<String> = match &node.kind {
                NodeKind::Input(i)
                | NodeKind::Capture(i)
                | NodeKind::GradOf(i)
                | NodeKind::InputGrad(i) => {
                    vec![i.to_string()]
                }
                NodeKind::Fill(v) => vec![v.to_string()],
                _ => node.inputs().iter().map(|i| format!("%{i}")).collect(),
            };
            write!(
                f,
                "%{id} = {}({}) : {:?} {}{}",
                node.name(),
                args.join(", "),
                node.shape,
                node.dtype,
                if node.device == Device::Cpu {
                    String::new()
                } else {
                    format!(" {}", node.device)
                }
            )?;
            if !notes[id].is_empty() {
                write!(f, "  -> {}", notes[id].join(", "))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
