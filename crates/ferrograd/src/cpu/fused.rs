//! Runs a fused elementwise group's program on the CPU: the output is cut into blocks; per
//! block each instruction runs over a register file small enough to stay in cache, inputs are
//! loaded (broadcast) into registers at their first read and outputs stored from them. Large
//! outputs are split over the thread pool, each thread with its own registers.

use std::sync::Arc;

use rayon::prelude::*;

use super::elementwise::block;
use super::float::Float;
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
struct Io<T> {
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
    let blocks = numel.div_ceil(BLOCK);
    let work = |range: std::ops::Range<usize>| {
        let mut regs = vec![T::ZERO; group.registers.max(1) * BLOCK];
        for b in range {
            let start = b * BLOCK;
            let len = BLOCK.min(numel - start);
            // SAFETY: see `Io`
            unsafe { run_block(&group.program, &io, &group.shape, start, len, &mut regs) };
        }
    };
    if numel >= PARALLEL_MIN {
        let threads = rayon::current_num_threads().max(1);
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

/// Register `r` of the file, as a block of `len`.
fn reg<T>(regs: &[T], r: usize, len: usize) -> &[T] {
    &regs[r * BLOCK..r * BLOCK + len]
}

/// The destination register and the source registers of one instruction (the destination is
/// never one of its sources: registers are allocated before the sources are freed).
fn split<T, const N: usize>(
    regs: &mut [T],
    dst: usize,
    srcs: [usize; N],
    len: usize,
) -> ([&[T]; N], &mut [T]) {
    debug_assert!(srcs.iter().all(|&s| s != dst));
    let ptr = regs.as_mut_ptr();
    // SAFETY: registers are disjoint ranges of the file, and `dst` is none of `srcs`
    unsafe {
        let d = std::slice::from_raw_parts_mut(ptr.add(dst * BLOCK), len);
        let s = srcs.map(|r| std::slice::from_raw_parts(ptr.add(r * BLOCK) as *const T, len));
        (s, d)
    }
}

/// One block of the program.
///
/// # Safety
/// The pointers of `io` must be valid for the group's shape; no other thread writes elements
/// `start..start + len` of the outputs.
unsafe fn run_block<T: FusedFloat>(
    program: &[Instr],
    io: &Io<T>,
    shape: &[usize],
    start: usize,
    len: usize,
    regs: &mut [T],
) {
    for ins in program {
        match *ins {
            Instr::Load { input, dst } => {
                let d = &mut regs[dst * BLOCK..dst * BLOCK + len];
                match &io.inputs[input] {
                    Src::Contig(p) => {
                        std::ptr::copy_nonoverlapping(p.add(start), d.as_mut_ptr(), len)
                    }
                    Src::Scalar(v) => d.fill(*v),
                    Src::Strided(p, l) => gather(*p, l, start, d, |v: T| v),
                    Src::BoolContig(p) => {
                        for (i, x) in d.iter_mut().enumerate() {
                            *x = if *p.add(start + i) { T::ONE } else { T::ZERO };
                        }
                    }
                    Src::BoolStrided(p, l) => {
                        gather(*p, l, start, d, |v: bool| if v { T::ONE } else { T::ZERO })
                    }
                }
                let _ = shape;
            }
            Instr::Unary { op, x, dst } => {
                let ([x], d) = split(regs, dst, [x], len);
                block::unary(op, x, d);
            }
            Instr::Binary { op, a, b, dst } => {
                let ([a, b], d) = split(regs, dst, [a, b], len);
                block::binary(op, a, b, d);
            }
            Instr::Pow { p, x, dst } => {
                let ([x], d) = split(regs, dst, [x], len);
                block::pow(p, x, d);
            }
            Instr::ActGrad { act, dy, y, dst } => {
                let ([dy, y], d) = split(regs, dst, [dy, y], len);
                block::act_grad(act, dy, y, d);
            }
            Instr::Where { c, a, b, dst } => {
                let ([c, a, b], d) = split(regs, dst, [c, a, b], len);
                block::select(c, a, b, d);
            }
            Instr::Store { src, output } => {
                let s = reg(regs, src, len);
                std::ptr::copy_nonoverlapping(s.as_ptr(), io.outputs[output].add(start), len);
            }
        }
    }
}
