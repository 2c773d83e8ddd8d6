//! Runs a fused elementwise group's program on the CPU: the output is cut into blocks; per
//! block each instruction runs over a register file small enough to stay in cache. A
//! contiguous input is read where it lies (a register then points into it), a broadcast or
//! strided one is gathered into its register, a one-element one stays a scalar; an
//! instruction whose result goes straight out writes it into the output. Large outputs are
//! split over the thread pool, each thread with its own registers.

use std::sync::Arc;

use rayon::prelude::*;

use super::elementwise::block;
use super::float::Float;
#[cfg(target_arch = "x86_64")]
use super::{wide_simd, widest_simd};
use crate::error::{Error, Result};
use crate::graph::fuse::{Group, Instr};
use crate::layout::Layout;
use crate::storage::{pool, CpuData, Storage, StorageData};
use crate::tensor::Tensor;

/// Elements per block: a register is 4 KiB in f64.
const BLOCK: usize = 512;
/// Outputs of at least this many elements are computed in parallel.
const PARALLEL_MIN: usize = 1 << 16;

/// Where a block of an input comes from.
#[derive(Clone)]
enum Src<T> {
    /// Row-major over the group's shape, from this element.
    Contig(*const T),
    /// One value everywhere.
    Scalar(T),
    /// Any other view (broadcast, permuted, sliced), through its layout.
    Strided(*const T, Layout),
    BoolContig(*const bool),
    BoolStrided(*const bool, Layout),
}

/// Raw pointers shared by the threads of one run: every thread reads the inputs and writes
/// its own disjoint blocks of the outputs.
pub(crate) struct Io<T> {
    inputs: Vec<Src<T>>,
    outputs: Vec<*mut T>,
}
// SAFETY: the pointers stay valid for the whole run (the buffers are locked or owned by the
// caller until it returns) and threads write disjoint element ranges.
unsafe impl<T: Send> Send for Io<T> {}
unsafe impl<T: Sync> Sync for Io<T> {}

/// The element types fused programs run on.
pub(crate) trait FusedFloat: Float + Send + Sync {
    fn slice(d: &CpuData) -> Option<&[Self]>;
    fn slice_mut(d: &mut CpuData) -> Option<&mut [Self]>;
    fn wrap(v: Vec<Self>) -> CpuData;
}
impl FusedFloat for f32 {
    fn slice(d: &CpuData) -> Option<&[f32]> {
        match d {
            CpuData::F32(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(d: &mut CpuData) -> Option<&mut [f32]> {
        match d {
            CpuData::F32(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<f32>) -> CpuData {
        CpuData::F32(v)
    }
}
impl FusedFloat for f64 {
    fn slice(d: &CpuData) -> Option<&[f64]> {
        match d {
            CpuData::F64(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(d: &mut CpuData) -> Option<&mut [f64]> {
        match d {
            CpuData::F64(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<f64>) -> CpuData {
        CpuData::F64(v)
    }
}

/// Runs `group` on its external input values `inputs`. Output `i` is written into
/// `targets[i]` when given (a contiguous tensor of the group's shape and dtype whose old
/// value the group may read as it overwrites it: an input dying here, or a captured tensor
/// taking its new value), else into a new buffer. Returns the outputs.
pub(crate) fn run(
    group: &Group,
    inputs: &[Tensor],
    targets: &[Option<Tensor>],
) -> Result<Vec<Tensor>> {
    match group.dtype {
        crate::DType::F32 => run_typed::<f32>(group, inputs, targets),
        crate::DType::F64 => run_typed::<f64>(group, inputs, targets),
        d => Err(Error::dtype("fused", format!("no fused kernels for {d}"))),
    }
}

fn run_typed<T: FusedFloat>(
    group: &Group,
    inputs: &[Tensor],
    targets: &[Option<Tensor>],
) -> Result<Vec<Tensor>> {
    let numel: usize = group.shape.iter().product();
    // distinct storages: written ones (targets) locked for writing, the others for reading
    let mut storages: Vec<(Arc<Storage>, bool)> = Vec::new();
    let index =
        |s: &Arc<Storage>, write: bool, storages: &mut Vec<(Arc<Storage>, bool)>| match storages
            .iter()
            .position(|(t, _)| Arc::ptr_eq(t, s))
        {
            Some(k) => {
                storages[k].1 |= write;
                k
            }
            None => {
                storages.push((s.clone(), write));
                storages.len() - 1
            }
        };
    let target_at: Vec<Option<usize>> = targets
        .iter()
        .map(|t| t.as_ref().map(|t| index(t.storage(), true, &mut storages)))
        .collect();
    let input_at: Vec<usize> = inputs
        .iter()
        .map(|t| index(t.storage(), false, &mut storages))
        .collect();
    enum Guard<'a> {
        R(std::sync::RwLockReadGuard<'a, StorageData>),
        W(std::sync::RwLockWriteGuard<'a, StorageData>),
    }
    let mut guards: Vec<Guard<'_>> = storages
        .iter()
        .map(|(s, w)| {
            Ok(if *w {
                Guard::W(s.write("fused")?)
            } else {
                Guard::R(s.read())
            })
        })
        .collect::<Result<_>>()?;
    // base pointers of each storage's elements
    let mut bases: Vec<(*const u8, usize)> = Vec::with_capacity(guards.len());
    for g in guards.iter_mut() {
        let data = match g {
            Guard::R(r) => match &**r {
                StorageData::Cpu(d) => d,
                #[allow(unreachable_patterns)]
                _ => {
                    return Err(Error::device(
                        "fused",
                        "a fused CPU group got a device buffer",
                    ))
                }
            },
            Guard::W(w) => match &mut **w {
                StorageData::Cpu(d) => &*d,
                #[allow(unreachable_patterns)]
                _ => {
                    return Err(Error::device(
                        "fused",
                        "a fused CPU group got a device buffer",
                    ))
                }
            },
        };
        bases.push(match data {
            CpuData::Bool(v) => (v.as_ptr() as *const u8, v.len()),
            d => match T::slice(d) {
                Some(s) => (s.as_ptr() as *const u8, s.len()),
                None => {
                    return Err(Error::dtype(
                        "fused",
                        format!("a {} buffer in a {} group", d.dtype(), group.dtype),
                    ))
                }
            },
        });
    }
    let srcs: Vec<Src<T>> = inputs
        .iter()
        .zip(&input_at)
        .map(|(t, &k)| {
            let l = t.layout().broadcast_to(&group.shape);
            let base = bases[k].0;
            if t.dtype() == crate::DType::Bool {
                let p = base as *const bool;
                if is_row_major(&l) {
                    // SAFETY: in bounds: the view lies inside its storage
                    Src::BoolContig(unsafe { p.add(l.offset()) })
                } else {
                    Src::BoolStrided(p, l)
                }
            } else {
                let p = base as *const T;
                if t.numel() == 1 {
                    // SAFETY: in bounds: the view lies inside its storage
                    Src::Scalar(unsafe { *p.add(t.layout().offset()) })
                } else if is_row_major(&l) {
                    // SAFETY: as above
                    Src::Contig(unsafe { p.add(l.offset()) })
                } else {
                    Src::Strided(p, l)
                }
            }
        })
        .collect();
    // outputs: the targets' memory, or new buffers
    let mut fresh: Vec<Option<Vec<T>>> = Vec::with_capacity(targets.len());
    let mut outs: Vec<*mut T> = Vec::with_capacity(targets.len());
    for (t, at) in targets.iter().zip(&target_at) {
        match (t, at) {
            (Some(t), Some(k)) => {
                let l = t.layout();
                if !is_row_major(l)
                    || l.shape() != group.shape.as_slice()
                    || t.dtype() != group.dtype
                {
                    return Err(Error::invalid(
                        "fused",
                        "an in-place target must be a contiguous tensor of the group's shape",
                    ));
                }
                // SAFETY: in bounds, and the storage is locked for writing
                outs.push(unsafe { (bases[*k].0 as *mut T).add(l.offset()) });
                fresh.push(None);
            }
            _ => {
                let mut v: Vec<T> = pool::take(numel)?;
                outs.push(v.as_mut_ptr());
                fresh.push(Some(v));
            }
        }
    }
    let io = Io {
        inputs: srcs,
        outputs: outs,
    };
    let plan = BlockPlan::new(group, &input_at, &target_at);
    let blocks = numel.div_ceil(BLOCK);
    let work = |range: std::ops::Range<usize>| {
        let mut regs = vec![T::ZERO; group.registers.max(1) * BLOCK];
        let mut vals = vec![Val::Scalar(T::ZERO); group.registers.max(1)];
        let blocks = Blocks {
            program: &group.program,
            stored_next: &group.stored_next,
            io: &io,
            plan: &plan,
            numel,
        };
        run_blocks(&blocks, range.start, range.end, &mut regs, &mut vals);
    };
    let threads = crate::cpu::threads().max(1);
    if numel >= PARALLEL_MIN && threads > 1 {
        let per = blocks.div_ceil(threads * 4).max(1);
        (0..blocks.div_ceil(per))
            .into_par_iter()
            .for_each(|c| work(c * per..((c + 1) * per).min(blocks)));
    } else {
        work(0..blocks);
    }
    drop(guards);
    let mut result = Vec::with_capacity(targets.len());
    for (t, v) in targets.iter().zip(fresh) {
        match (t, v) {
            (_, Some(mut v)) => {
                // SAFETY: every element was written by the stores above
                unsafe { v.set_len(numel) };
                result.push(Tensor::from_cpu(T::wrap(v), &group.shape));
            }
            (Some(t), None) => {
                result.push(Tensor::from_parts(t.storage().clone(), t.layout().clone()))
            }
            (None, None) => unreachable!("an output without a buffer"),
        }
    }
    Ok(result)
}

/// Whether a layout is row-major contiguous (at any offset).
fn is_row_major(l: &Layout) -> bool {
    let mut acc = 1isize;
    for d in (0..l.shape().len()).rev() {
        if l.shape()[d] != 1 && l.strides()[d] != acc {
            return false;
        }
        acc *= l.shape()[d] as isize;
    }
    true
}

/// Fills `dst` with elements `start..start + dst.len()` (row-major over `l`'s shape) of the
/// view `l` of `base`.
///
/// # Safety
/// `base` must be valid for every element the view addresses.
unsafe fn gather<E: Copy, T: Copy>(
    base: *const E,
    l: &Layout,
    start: usize,
    dst: &mut [T],
    conv: impl Fn(E) -> T,
) {
    let shape = l.shape();
    let strides = l.strides();
    let nd = shape.len();
    let mut idx = [0usize; 64];
    let mut rest = start;
    for d in (0..nd).rev() {
        idx[d] = rest % shape[d].max(1);
        rest /= shape[d].max(1);
    }
    let mut off = l.offset() as isize;
    for d in 0..nd {
        off += idx[d] as isize * strides[d];
    }
    // runs along the innermost axis: a copy (stride 1), a fill (stride 0) or a strided read
    let inner = nd.checked_sub(1);
    let mut done = 0;
    while done < dst.len() {
        let Some(last) = inner else {
            dst[done] = conv(*base.offset(off));
            done += 1;
            continue;
        };
        let n = (shape[last] - idx[last]).min(dst.len() - done);
        let run = &mut dst[done..done + n];
        match strides[last] {
            0 => run.fill(conv(*base.offset(off))),
            1 => {
                let src = std::slice::from_raw_parts(base.offset(off), n);
                for (d, &v) in run.iter_mut().zip(src) {
                    *d = conv(v);
                }
            }
            s => {
                for (i, d) in run.iter_mut().enumerate() {
                    *d = conv(*base.offset(off + i as isize * s));
                }
            }
        }
        done += n;
        // next index: the innermost axis moved by n, then carry outwards
        idx[last] += n;
        off += strides[last] * n as isize;
        let mut d = last + 1;
        while d > 0 {
            d -= 1;
            if idx[d] < shape[d] {
                break;
            }
            off -= strides[d] * shape[d] as isize;
            idx[d] = 0;
            if d > 0 {
                idx[d - 1] += 1;
                off += strides[d - 1];
            }
        }
    }
}

/// What a register holds in the current block.
#[derive(Clone, Copy)]
pub(crate) enum Val<T> {
    /// `len` elements from here: the register's own slot, an input where it lies, or the
    /// output it was written into.
    At(*const T),
    /// One value for every element (a one-element input, or ops on such).
    Scalar(T),
}

/// Per run of a group: which inputs are read where they lie, and which outputs may be written
/// straight from the instruction computing them.
pub(crate) struct BlockPlan {
    zero_copy: Vec<bool>,
    direct_ok: Vec<bool>,
}

impl BlockPlan {
    /// `input_at[k]` / `target_at[o]`: the storage (index) of input `k` and of output `o`'s
    /// target, where the group writes over an existing tensor.
    fn new(group: &Group, input_at: &[usize], target_at: &[Option<usize>]) -> BlockPlan {
        // an input sharing its storage with a target is read where it lies only if every read
        // of its register comes before the stores into that storage
        let zero_copy: Vec<bool> = (0..group.inputs.len())
            .map(|k| {
                let (_, last) = group.input_reads[k];
                (0..target_at.len())
                    .filter(|&o| target_at[o] == Some(input_at[k]))
                    .all(|o| last < group.store_pos[o])
            })
            .collect();
        // a result goes straight to its output from the instruction computing it (the one
        // before the store) when every input in the output's memory was loaded before that
        // instruction and, if read where it lies, is no longer read from there on
        let direct_ok = (0..target_at.len())
            .map(|o| {
                let at = group.store_pos[o].saturating_sub(1);
                (0..input_at.len())
                    .filter(|&k| target_at[o] == Some(input_at[k]))
                    .all(|k| {
                        let (load, last) = group.input_reads[k];
                        load < at && (!zero_copy[k] || last < at)
                    })
            })
            .collect();
        BlockPlan {
            zero_copy,
            direct_ok,
        }
    }
}

/// What every block of one run shares: the program, its buffers and the plan made for them.
pub(crate) struct Blocks<'a, T> {
    program: &'a [Instr],
    stored_next: &'a [Option<usize>],
    io: &'a Io<T>,
    plan: &'a BlockPlan,
    numel: usize,
}

multiversion! {
    /// Blocks `first..last` of a run, with this thread's registers (the block kernels are
    /// inlined here, so each is compiled for the widest vectors the CPU has).
    fn run_blocks<T: FusedFloat>(
        b: &Blocks<'_, T>,
        first: usize,
        last: usize,
        regs: &mut [T],
        vals: &mut [Val<T>]
    ) {
        for k in first..last {
            let start = k * BLOCK;
            let len = BLOCK.min(b.numel - start);
            // SAFETY: `run_typed` made `b.io` from buffers it holds locked for the whole run
            // and `b.plan` for them; the threads get disjoint block ranges.
            unsafe { run_block(b, start, len, regs, vals) };
        }
    }
}

/// One block of the program.
///
/// # Safety
/// The pointers of `io` must be valid for the group's shape; no other thread writes elements
/// `start..start + len` of the outputs; `plan` was made for this group and these buffers
/// (so no output written directly is read as an input, and an input read where it lies is
/// not overwritten before its last read).
#[inline(always)]
unsafe fn run_block<T: FusedFloat>(
    b: &Blocks<'_, T>,
    start: usize,
    len: usize,
    regs: &mut [T],
    vals: &mut [Val<T>],
) {
    let (io, plan) = (b.io, b.plan);
    let file = regs.as_mut_ptr();
    let slot = |r: usize| file.add(r * BLOCK);
    let src = |p: *const T| std::slice::from_raw_parts(p, len);
    // a register as a block (a scalar is spread over its own slot first)
    let block = |vals: &mut [Val<T>], r: usize| -> *const T {
        match vals[r] {
            Val::At(p) => p,
            Val::Scalar(v) => {
                std::slice::from_raw_parts_mut(slot(r), len).fill(v);
                vals[r] = Val::At(slot(r));
                slot(r)
            }
        }
    };
    for (ins, &next) in b.program.iter().zip(b.stored_next) {
        // where an instruction's result goes: its register's slot, or straight to the output
        let out = |dst: usize| match next {
            Some(o) if plan.direct_ok[o] => io.outputs[o].add(start),
            _ => slot(dst),
        };
        let dst_slice = |p: *mut T| std::slice::from_raw_parts_mut(p, len);
        // a one-input kernel `$f(x, out)` on register value `$v`: a scalar stays a scalar
        macro_rules! map1 {
            ($v:expr, $dst:expr, |$x:ident, $o:ident| $f:expr) => {
                match $v {
                    Val::Scalar(v) => {
                        let mut one = [T::ZERO];
                        let ($x, $o): (&[T], &mut [T]) = (&[v], &mut one);
                        $f;
                        Val::Scalar(one[0])
                    }
                    Val::At(p) => {
                        let to = out($dst);
                        let ($x, $o) = (src(p), dst_slice(to));
                        $f;
                        Val::At(to)
                    }
                }
            };
        }
        match *ins {
            Instr::Load { input, dst } => {
                vals[dst] = match &io.inputs[input] {
                    Src::Contig(p) if plan.zero_copy[input] => Val::At(p.add(start)),
                    Src::Contig(p) => {
                        std::ptr::copy_nonoverlapping(p.add(start), slot(dst), len);
                        Val::At(slot(dst))
                    }
                    Src::Scalar(v) => Val::Scalar(*v),
                    Src::Strided(p, l) => {
                        gather(*p, l, start, dst_slice(slot(dst)), |v: T| v);
                        Val::At(slot(dst))
                    }
                    Src::BoolContig(p) => {
                        for (k, x) in dst_slice(slot(dst)).iter_mut().enumerate() {
                            *x = if *p.add(start + k) { T::ONE } else { T::ZERO };
                        }
                        Val::At(slot(dst))
                    }
                    Src::BoolStrided(p, l) => {
                        let d = dst_slice(slot(dst));
                        gather(*p, l, start, d, |v: bool| if v { T::ONE } else { T::ZERO });
                        Val::At(slot(dst))
                    }
                };
            }
            Instr::Unary { op, x, dst } => {
                vals[dst] = map1!(vals[x], dst, |x, o| block::unary(op, x, o));
            }
            Instr::Binary { op, a, b, dst } => {
                vals[dst] = match (vals[a], vals[b]) {
                    (Val::Scalar(x), Val::Scalar(y)) => {
                        let mut o = [T::ZERO];
                        block::binary(op, &[x], &[y], &mut o);
                        Val::Scalar(o[0])
                    }
                    (Val::At(p), Val::Scalar(y)) => {
                        let o = out(dst);
                        block::binary_vs(op, src(p), y, dst_slice(o));
                        Val::At(o)
                    }
                    (Val::Scalar(x), Val::At(q)) => {
                        let o = out(dst);
                        block::binary_sv(op, x, src(q), dst_slice(o));
                        Val::At(o)
                    }
                    (Val::At(p), Val::At(q)) => {
                        let o = out(dst);
                        block::binary(op, src(p), src(q), dst_slice(o));
                        Val::At(o)
                    }
                };
            }
            Instr::Pow { p, x, dst } => {
                vals[dst] = map1!(vals[x], dst, |x, o| block::pow(p, x, o));
            }
            Instr::ActGrad { act, dy, y, dst } => {
                let (g, v) = (block(vals, dy), block(vals, y));
                let o = out(dst);
                block::act_grad(act, src(g), src(v), dst_slice(o));
                vals[dst] = Val::At(o);
            }
            Instr::Where { c, a, b, dst } => {
                let (c, a, b) = (block(vals, c), block(vals, a), block(vals, b));
                let o = out(dst);
                block::select(src(c), src(a), src(b), dst_slice(o));
                vals[dst] = Val::At(o);
            }
            Instr::Store { src: r, output } => {
                let o = io.outputs[output].add(start);
                match vals[r] {
                    Val::Scalar(v) => std::slice::from_raw_parts_mut(o, len).fill(v),
                    Val::At(p) if std::ptr::eq(p, o) => {}
                    Val::At(p) => std::ptr::copy_nonoverlapping(p, o, len),
                }
            }
        }
    }
}
