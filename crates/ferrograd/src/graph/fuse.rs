//! Elementwise fusion: chains (and trees) of elementwise ops of one shape and float dtype
//! become one group, run as one loop over the data in blocks: per block, each op of the
//! group runs over the block in a register file that stays in cache, and only the values
//! used outside the group are written out. No intermediate buffer exists.
//!
//! Groups are formed in schedule order. A node joins the group of one of its inputs while
//! that group is open; a group closes as soon as a node outside it reads one of its members,
//! so a group runs at its last member and every value it reads from outside exists by then.

use super::ir::{Graph, NodeId, NodeKind};
use crate::device::Device;
use crate::dtype::DType;
use crate::op::{Activation, BinaryOp, ElementwiseOp, Op, UnaryOp};

/// A register of a group's program (one block of values).
pub(crate) type Reg = usize;

/// One instruction of a fused program, over one block of elements.
#[derive(Clone, Debug)]
pub(crate) enum Instr {
    /// External input `input` (broadcast to the group's shape) into a register.
    Load {
        input: usize,
        dst: Reg,
    },
    Unary {
        op: UnaryOp,
        x: Reg,
        dst: Reg,
    },
    Binary {
        op: BinaryOp,
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    Pow {
        p: f64,
        x: Reg,
        dst: Reg,
    },
    ActGrad {
        act: Activation,
        dy: Reg,
        y: Reg,
        dst: Reg,
    },
    Where {
        c: Reg,
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    /// A register out to output `output`.
    Store {
        src: Reg,
        output: usize,
    },
}

impl Instr {
    /// The registers the instruction reads.
    pub(crate) fn reads(&self) -> [Option<Reg>; 3] {
        match *self {
            Instr::Load { .. } => [None; 3],
            Instr::Unary { x, .. } | Instr::Pow { x, .. } => [Some(x), None, None],
            Instr::Binary { a, b, .. } => [Some(a), Some(b), None],
            Instr::ActGrad { dy, y, .. } => [Some(dy), Some(y), None],
            Instr::Where { c, a, b, .. } => [Some(c), Some(a), Some(b)],
            Instr::Store { src, .. } => [Some(src), None, None],
        }
    }

    /// The register the instruction writes.
    pub(crate) fn writes(&self) -> Option<Reg> {
        match *self {
            Instr::Load { dst, .. }
            | Instr::Unary { dst, .. }
            | Instr::Pow { dst, .. }
            | Instr::Binary { dst, .. }
            | Instr::ActGrad { dst, .. }
            | Instr::Where { dst, .. } => Some(dst),
            Instr::Store { .. } => None,
        }
    }
}

/// A fused group: its members (in schedule order), the values it reads from outside, the
/// members it writes out, and the program that computes them.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) members: Vec<NodeId>,
    pub(crate) inputs: Vec<NodeId>,
    /// The dtype of each input (the group's, or bool for a `where` condition).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) input_dtypes: Vec<DType>,
    pub(crate) outputs: Vec<NodeId>,
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    pub(crate) program: Vec<Instr>,
    pub(crate) registers: usize,
    /// Per instruction: the output its result is stored to by the next instruction (a CPU
    /// run may write it there directly).
    pub(crate) stored_next: Vec<Option<usize>>,
    /// Per input: the position of its load and of the last read of the register it is
    /// loaded into (before the register is reused).
    pub(crate) input_reads: Vec<(usize, usize)>,
    /// Per output: the position of its store.
    pub(crate) store_pos: Vec<usize>,
    /// The group's CUDA kernel once made (so later runs neither generate its source nor look
    /// it up).
    #[cfg(feature = "cuda")]
    pub(crate) cuda_kernel: std::sync::OnceLock<crate::cuda::rt::driver::CudaFunction>,
}

impl Group {
    /// The position in the program of input `i`'s load (its first read of the block).
    pub(crate) fn load_at(&self, i: usize) -> Option<usize> {
        self.input_reads.get(i).map(|&(load, _)| load)
    }

    /// The position in the program of output `o`'s store.
    pub(crate) fn store_at(&self, o: usize) -> Option<usize> {
        self.store_pos.get(o).copied()
    }
}

/// Whether node `n` can be a member of a fused group (an elementwise op of float dtype, on a
/// device that runs fused programs).
pub(crate) fn fusible(g: &Graph, n: NodeId) -> bool {
    let node = &g.nodes[n];
    let NodeKind::Op { op, inputs } = &node.kind else {
        return false;
    };
    if !matches!(node.dtype, DType::F32 | DType::F64) || !runs_fused(node.device) {
        return false;
    }
    let same = |i: &NodeId| g.nodes[*i].dtype == node.dtype;
    match op {
        Op::Unary(_) | Op::Binary(_) => inputs.iter().all(same),
        Op::Elementwise(e) => match e {
            ElementwiseOp::PowScalar(_)
            | ElementwiseOp::TanhGrad
            | ElementwiseOp::SigmoidGrad
            | ElementwiseOp::ReluGrad => inputs.iter().all(same),
            ElementwiseOp::Where => {
                g.nodes[inputs[0]].dtype == DType::Bool && inputs[1..].iter().all(same)
            }
            ElementwiseOp::Cast(_) | ElementwiseOp::Copy | ElementwiseOp::Random { .. } => false,
        },
        _ => false,
    }
}

/// Devices with a fused-program runner.
fn runs_fused(device: Device) -> bool {
    match device {
        Device::Cpu => true,
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => crate::cuda::fused::enabled(),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// The fused groups of `g` (`enabled: false`: none), and each node's group.
pub(crate) fn groups(g: &Graph, enabled: bool) -> (Vec<Group>, Vec<Option<usize>>) {
    let n = g.nodes.len();
    let mut of: Vec<Option<usize>> = vec![None; n];
    let mut members: Vec<Vec<NodeId>> = Vec::new();
    let mut open: Vec<bool> = Vec::new();
    if enabled {
        for id in 0..n {
            let inputs = g.nodes[id].inputs();
            let mut joined = None;
            if fusible(g, id) {
                let node = &g.nodes[id];
                // the open groups of its inputs, of this node's shape and dtype: the node
                // joins them, merged into one (none of their members was read outside yet,
                // and a group runs at its last member, so all of them can run here)
                let mut joins: Vec<usize> = Vec::new();
                for &i in inputs {
                    if let Some(gi) = of[i] {
                        let first = &g.nodes[members[gi][0]];
                        if open[gi]
                            && first.shape == node.shape
                            && first.dtype == node.dtype
                            && !joins.contains(&gi)
                        {
                            joins.push(gi);
                        }
                    }
                }
                let gi = match joins.iter().copied().min() {
                    Some(gi) => {
                        for &other in &joins {
                            if other != gi {
                                let moved = std::mem::take(&mut members[other]);
                                for &m in &moved {
                                    of[m] = Some(gi);
                                }
                                members[gi].extend(moved);
                                open[other] = false;
                            }
                        }
                        // members in schedule order
                        members[gi].sort_unstable();
                        gi
                    }
                    None => {
                        members.push(Vec::new());
                        open.push(true);
                        members.len() - 1
                    }
                };
                members[gi].push(id);
                of[id] = Some(gi);
                joined = Some(gi);
            }
            // reading a member of another group from outside closes that group
            for &i in inputs {
                if let Some(gi) = of[i] {
                    if Some(gi) != joined {
                        open[gi] = false;
                    }
                }
            }
        }
    }
    // effects read values at the end: nothing to close
    let mut read_outside = vec![false; n];
    for (id, node) in g.nodes.iter().enumerate() {
        for &i in node.inputs() {
            if of[i].is_some() && of[i] != of[id] {
                read_outside[i] = true;
            }
        }
    }
    for r in g.roots() {
        read_outside[r] = true;
    }
    // groups merged into others are empty: number the rest densely
    let mut index = vec![usize::MAX; members.len()];
    let mut kept = Vec::new();
    for (gi, m) in members.into_iter().enumerate() {
        if !m.is_empty() {
            index[gi] = kept.len();
            kept.push(m);
        }
    }
    for o in of.iter_mut() {
        if let Some(gi) = *o {
            *o = Some(index[gi]);
        }
    }
    let groups = kept
        .into_iter()
        .map(|m| build(g, m, &of, &read_outside))
        .collect();
    (groups, of)
}

/// A group's inputs, outputs and program.
fn build(g: &Graph, members: Vec<NodeId>, of: &[Option<usize>], read_outside: &[bool]) -> Group {
    let gid = of[members[0]];
    let first = &g.nodes[members[0]];
    let mut inputs: Vec<NodeId> = Vec::new();
    let mut outputs: Vec<NodeId> = Vec::new();
    // each value's register, and how many reads of it inside the program remain
    let mut reg_of: std::collections::HashMap<NodeId, Reg> = std::collections::HashMap::new();
    let mut reads_left: std::collections::HashMap<NodeId, usize> = std::collections::HashMap::new();
    for &m in &members {
        for &i in g.nodes[m].inputs() {
            *reads_left.entry(i).or_default() += 1;
        }
    }
    let mut free: Vec<Reg> = Vec::new();
    let mut registers = 0;
    let mut program = Vec::new();
    let mut alloc = |free: &mut Vec<Reg>| {
        free.pop().unwrap_or_else(|| {
            registers += 1;
            registers - 1
        })
    };
    for &m in &members {
        let ins = g.nodes[m].inputs().to_vec();
        let mut regs = Vec::with_capacity(ins.len());
        for &i in &ins {
            let r = match reg_of.get(&i) {
                Some(&r) => r,
                None => {
                    // an external input, loaded at its first read
                    debug_assert!(of[i] != gid);
                    let k = inputs.len();
                    inputs.push(i);
                    let r = alloc(&mut free);
                    program.push(Instr::Load { input: k, dst: r });
                    reg_of.insert(i, r);
                    r
                }
            };
            regs.push(r);
        }
        let dst = alloc(&mut free);
        let NodeKind::Op { op, .. } = &g.nodes[m].kind else {
            unreachable!("fused members are ops")
        };
        program.push(match op {
            Op::Unary(u) => Instr::Unary {
                op: *u,
                x: regs[0],
                dst,
            },
            Op::Binary(b) => Instr::Binary {
                op: *b,
                a: regs[0],
                b: regs[1],
                dst,
            },
            Op::Elementwise(ElementwiseOp::PowScalar(p)) => Instr::Pow {
                p: *p,
                x: regs[0],
                dst,
            },
            Op::Elementwise(ElementwiseOp::Where) => Instr::Where {
                c: regs[0],
                a: regs[1],
                b: regs[2],
                dst,
            },
            Op::Elementwise(e) => Instr::ActGrad {
                act: e.activation().expect("an activation's gradient"),
                dy: regs[0],
                y: regs[1],
                dst,
            },
            _ => unreachable!("fusible ops only"),
        });
        reg_of.insert(m, dst);
        if read_outside[m] {
            let k = outputs.len();
            outputs.push(m);
            program.push(Instr::Store {
                src: dst,
                output: k,
            });
        }
        // registers whose last read this was are free for the next instruction
        for &i in &ins {
            let left = reads_left.get_mut(&i).expect("counted above");
            *left -= 1;
            if *left == 0 {
                if let Some(r) = reg_of.remove(&i) {
                    free.push(r);
                }
            }
        }
        if !reads_left.contains_key(&m) {
            // nothing in the group reads it
            if let Some(r) = reg_of.remove(&m) {
                free.push(r);
            }
        }
    }
    let stored_next = (0..program.len())
        .map(|i| {
            let d = program[i].writes()?;
            if matches!(program[i], Instr::Load { .. }) {
                return None;
            }
            match program.get(i + 1) {
                Some(&Instr::Store { src, output }) if src == d => Some(output),
                _ => None,
            }
        })
        .collect();
    let mut input_reads = vec![(0, 0); inputs.len()];
    let mut store_pos = vec![0; outputs.len()];
    for (l, ins) in program.iter().enumerate() {
        match *ins {
            Instr::Load { input, dst } => {
                let mut last = l;
                for (j, later) in program.iter().enumerate().skip(l + 1) {
                    if later.reads().contains(&Some(dst)) {
                        last = j;
                    }
                    if later.writes() == Some(dst) {
                        break;
                    }
                }
                input_reads[input] = (l, last);
            }
            Instr::Store { output, .. } => store_pos[output] = l,
            _ => {}
        }
    }
    Group {
        stored_next,
        input_reads,
        store_pos,
        input_dtypes: inputs.iter().map(|&i| g.nodes[i].dtype).collect(),
        shape: first.shape.clone(),
        dtype: first.dtype,
        device: first.device,
        members,
        inputs,
        outputs,
        program,
        registers,
        #[cfg(feature = "cuda")]
        cuda_kernel: std::sync::OnceLock::new(),
    }
}
