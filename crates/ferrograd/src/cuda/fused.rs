//! Fused elementwise groups on CUDA: one kernel generated per group and compiled by NVRTC.
//! The element functions come from the same lines of `kernels.cu` the single-op kernels are
//! made from (the `UNARY_FLOAT`, `BINARY_FLOAT` and `ACT_GRAD` lines, turned into device
//! functions here), so a fused group computes what its ops compute one by one.
//!
//! Kernel: one thread per output element (grid-strided), each input read through its layout
//! (broadcast views included), the program's instructions as statements on registers, the
//! outputs stored. An output may be written over an input of the same shape that dies at this
//! step: each thread reads its element before it writes it.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

#[cfg(not(feature = "cuda-emulator"))]
use super::err;
use super::launch::strided;
use super::rt::driver::CudaFunction;
use super::{CudaData, Gpu, KERNEL_SOURCE};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::fuse::{Group, Instr};
use crate::storage::StorageData;
use crate::tensor::Tensor;

/// The kernel's name for a group: from a hash of its source body.
fn kernel_name(body: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("fused_{:016x}", h.finish())
}

/// The part of `kernels.cu` every kernel needs (layouts, `pos`, the grid loop, `sgn`), then
/// the table lines as device functions.
fn prelude() -> String {
    let head = KERNEL_SOURCE
        .split("// ---- unary ops")
        .next()
        .unwrap_or(KERNEL_SOURCE);
    let mut s = String::from(head);
    s.push_str(
        "#define UNARY_FLOAT(name, EXPR) template <typename T> __device__ __forceinline__ T \
         u_##name(T v) { return (EXPR); }\n\
         #define UNARY_INT(name, EXPR)\n\
         #define BINARY_FLOAT(name, EXPR) template <typename T> __device__ __forceinline__ T \
         b_##name(T a, T b) { return (EXPR); }\n\
         #define BINARY_INT(name, EXPR)\n\
         #define ACT_GRAD(name, EXPR) template <typename T> __device__ __forceinline__ T \
         g_##name(T g, T v) { return (EXPR); }\n",
    );
    for line in KERNEL_SOURCE.lines() {
        let l = line.trim_start();
        if l.starts_with("UNARY_FLOAT(")
            || l.starts_with("BINARY_FLOAT(")
            || l.starts_with("ACT_GRAD(")
        {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

/// A C literal of `v` for type `t`.
fn literal(v: f64, t: &str) -> String {
    if v.is_finite() {
        format!("(({t}){v:?})")
    } else {
        format!("(({t})__longlong_as_double({}LL))", v.to_bits() as i64)
    }
}

/// The CUDA source of `group`'s kernel, and its name.
pub(crate) fn source(group: &Group) -> Result<(String, String)> {
    let t = match group.dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        d => return Err(Error::dtype("fused", format!("no fused kernels for {d}"))),
    };
    let mut params: Vec<String> = Vec::new();
    let mut body = String::new();
    // which inputs are bool (loaded as 0 or 1)
    let bool_input: Vec<bool> = group
        .input_dtypes
        .iter()
        .map(|&d| d == DType::Bool)
        .collect();
    for (k, &b) in bool_input.iter().enumerate() {
        let ty = if b { "u8" } else { t };
        params.push(format!("const {ty}* in{k}, Strided l{k}"));
    }
    for o in 0..group.outputs.len() {
        params.push(format!("{t}* out{o}"));
    }
    params.push("long long n".to_string());
    let _ = writeln!(body, "    GRID_LOOP(i, n) {{");
    if group.registers > 0 {
        let regs: Vec<String> = (0..group.registers).map(|r| format!("r{r}")).collect();
        let _ = writeln!(body, "        {t} {};", regs.join(", "));
    }
    for ins in &group.program {
        let line = match *ins {
            Instr::Load { input, dst } => {
                if bool_input[input] {
                    format!("r{dst} = in{input}[pos(l{input}, i)] ? ({t})1 : ({t})0;")
                } else {
                    format!("r{dst} = in{input}[pos(l{input}, i)];")
                }
            }
            Instr::Unary { op, x, dst } => format!("r{dst} = u_{}<{t}>(r{x});", op.name()),
            Instr::Binary { op, a, b, dst } => {
                format!("r{dst} = b_{}<{t}>(r{a}, r{b});", op.name())
            }
            Instr::Pow { p, x, dst } => format!("r{dst} = pow(r{x}, {});", literal(p, t)),
            Instr::ActGrad { act, dy, y, dst } => {
                format!("r{dst} = g_{}<{t}>(r{dy}, r{y});", act.grad_name())
            }
            Instr::Where { c, a, b, dst } => {
                format!("r{dst} = r{c} != ({t})0 ? r{a} : r{b};")
            }
            Instr::Store { src, output } => format!("out{output}[i] = r{src};"),
        };
        let _ = writeln!(body, "        {line}");
    }
    let _ = writeln!(body, "    }}");
    let signature = params.join(", ");
    let name = kernel_name(&format!("{signature}\n{body}"));
    let src = format!(
        "{}\nextern \"C\" __global__ void {name}({signature}) {{\n{body}}}\n",
        prelude()
    );
    Ok((name, src))
}

/// Compiled fused kernels, by name.
type Compiled = Mutex<HashMap<String, CudaFunction>>;

impl Gpu {
    /// The kernel of `group`, compiled for this device on first use.
    fn fused_function(&self, group: &Group) -> Result<CudaFunction> {
        static CACHE: std::sync::OnceLock<Compiled> = std::sync::OnceLock::new();
        let (name, src) = source(group)?;
        let key = format!("{}:{name}", self.ordinal);
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(f) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(f.clone());
        }
        let f = self.load_generated(&name, &src)?;
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, f.clone());
        Ok(f)
    }

    #[cfg(not(feature = "cuda-emulator"))]
    fn load_generated(&self, name: &str, src: &str) -> Result<CudaFunction> {
        let ctx = self.stream.context();
        let (major, minor) = ctx.compute_capability().map_err(|e| err("fused", e))?;
        let image =
            super::compile_cached(src, &format!("sm_{major}{minor}"), "a generated kernel")?;
        let module = super::load_image("fused", ctx, &image)?;
        module.load_function(name).map_err(|e| err("fused", e))
    }

    #[cfg(feature = "cuda-emulator")]
    fn load_generated(&self, _name: &str, _src: &str) -> Result<CudaFunction> {
        Err(Error::device(
            "fused",
            "the CUDA emulator runs only the kernels compiled into it, not generated ones",
        ))
    }
}

/// Whether fused groups run on CUDA devices: yes, unless `FERROGRAD_CUDA_FUSION=0` turns the
/// generated kernels off (every op then runs its own kernel); never on the emulator, which
/// runs only the kernels compiled into it.
pub(crate) fn enabled() -> bool {
    !cfg!(feature = "cuda-emulator")
        && std::env::var("FERROGRAD_CUDA_FUSION").map_or(true, |v| v != "0")
}

/// Runs `group` on its CUDA device (see `cpu::fused::run` for `targets`).
pub(crate) fn run(
    group: &Group,
    inputs: &[Tensor],
    targets: &[Option<Tensor>],
) -> Result<Vec<Tensor>> {
    let crate::Device::Cuda(ordinal) = group.device else {
        return Err(Error::device("fused", "a CUDA group on another device"));
    };
    let g = super::gpu("fused", ordinal)?;
    let f = match group.cuda_kernel.get() {
        Some(f) => f.clone(),
        None => {
            let f = g.fused_function(group)?;
            group.cuda_kernel.get_or_init(|| f.clone()).clone()
        }
    };
    let n: usize = group.shape.iter().product();
    let layouts = inputs
        .iter()
        .map(|t| strided("fused", &t.layout().broadcast_to(&group.shape)))
        .collect::<Result<Vec<_>>>()?;
    // each distinct storage locked once: written ones (targets that are no input) for
    // writing, the others for reading
    let in_guards: Vec<_> = inputs.iter().map(|t| t.storage().read()).collect();
    let input_of = |t: &Tensor| {
        inputs
            .iter()
            .position(|i| Arc::ptr_eq(i.storage(), t.storage()))
    };
    let mut write_guards: Vec<Option<std::sync::RwLockWriteGuard<'_, StorageData>>> = targets
        .iter()
        .map(|t| match t {
            Some(t) if input_of(t).is_none() => t.storage().write("fused").map(Some),
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let mut fresh: Vec<Option<CudaData>> = targets
        .iter()
        .map(|t| match t {
            None => g.alloc(group.dtype, n).map(Some),
            Some(_) => Ok(None),
        })
        .collect::<Result<_>>()?;
    let len = n as i64;
    {
        let mut launch = g.launch(&f, "fused");
        for (guard, l) in in_guards.iter().zip(&layouts) {
            match &**guard {
                StorageData::Cuda(d) => {
                    launch.buf(d).arg(l);
                }
                _ => return Err(Error::device("fused", "a CPU buffer reached a CUDA kernel")),
            }
        }
        for ((t, buf), wg) in targets
            .iter()
            .zip(fresh.iter_mut())
            .zip(write_guards.iter_mut())
        {
            match (buf, wg, t) {
                (Some(buf), _, _) => {
                    launch.buf_mut(buf);
                }
                (None, Some(wg), _) => match &mut **wg {
                    StorageData::Cuda(d) => {
                        launch.buf_mut(d);
                    }
                    _ => return Err(Error::device("fused", "a CPU buffer reached a CUDA kernel")),
                },
                (None, None, Some(t)) => {
                    // written over one of the inputs: the same pointer (each thread reads its
                    // element before writing it)
                    let k = input_of(t).expect("a target that is no input has a write guard");
                    match &*in_guards[k] {
                        StorageData::Cuda(d) => {
                            launch.buf(d);
                        }
                        _ => {
                            return Err(Error::device(
                                "fused",
                                "a CPU buffer reached a CUDA kernel",
                            ))
                        }
                    }
                }
                (None, None, None) => unreachable!("an output without a buffer"),
            }
        }
        launch.arg(&len).grid(n)?;
    }
    drop(write_guards);
    drop(in_guards);
    let mut out = Vec::with_capacity(targets.len());
    for (t, buf) in targets.iter().zip(fresh) {
        out.push(match (t, buf) {
            (_, Some(buf)) => {
                Tensor::from_storage(crate::backend::Backend::storage(&*g, buf), &group.shape)
            }
            (Some(t), None) => Tensor::from_parts(t.storage().clone(), t.layout().clone()),
            (None, None) => unreachable!("an output without a buffer"),
        });
    }
    Ok(out)
}
