#!/usr/bin/env bash
# Runs the CUDA checks on a machine with an NVIDIA GPU, each step under its own time limit:
# driver and device facts, tests/test_cuda.py, the digits demo on the GPU, the benchmarks
# against PyTorch/JAX on the same GPU, then the whole test suite with tensors made on the GPU.
#
#     bash benches/gpu_check.sh [PKG_DIR] [OUT_DIR] [STEPS]
#
# PKG_DIR holds an installed ferrograd (the default: the importable one), e.g. a copy of
# python/ferrograd with target/release/lib_core.so as ferrograd/_core.abi3.so, built by
# `cargo build --release -p ferrograd-python --features pyo3/extension-module` (without that
# feature the library links libpython and imports only where the same Python is installed),
# or a wheel from `maturin build --release` installed with `pip install --target`.
# OUT_DIR receives one
# log per step and summary.txt; STEPS is a comma-separated subset of
# env,cuda_tests,digits,bench,nn_ops,optim,suite (all by default); T_ENV, T_CUDA_TESTS,
# T_DIGITS, T_BENCH, T_NN_OPS, T_OPTIM and T_SUITE set their time limits in seconds. Extra pytest arguments for the suite
# step come from $SUITE_ARGS (for instance a -k expression to rerun what failed).
set -u
PKG=${1:-}
OUTDIR=${2:-${OUT:-/tmp/gpu_check}}
STEPS=${3:-env,cuda_tests,digits,bench,nn_ops,optim,suite}
mkdir -p "$OUTDIR"
[ -n "$PKG" ] && export PYTHONPATH="$PKG"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PYTHON:-python3}

# step NAME SECONDS CMD...: runs CMD with a time limit, its output in NAME.log
step() {
    local name=$1 limit=$2
    shift 2
    case ",$STEPS," in *",$name,"*) ;; *) return ;; esac
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$OUTDIR/summary.txt"
    tail -n "${TAIL:-12}" "$OUTDIR/$name.log"
}

step env "${T_ENV:-60}" bash -c "nvidia-smi; $PY - <<'EOF'
import platform, ferrograd as fg, numpy as np
print('python', platform.python_version(), 'ferrograd from', fg.__file__)
print('cuda available', fg.cuda.is_available(), 'devices', fg.cuda.device_count())
import time
t = time.time()
x = fg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device='cuda')
print(f'first tensor on the GPU (kernels compiled or loaded) in {time.time() - t:.1f} s')
print('x*2+1 on', x.device, (x * 2 + 1).numpy().tolist())
print('matmul', (x @ x.T).numpy().tolist())
try:
    import torch
    print('torch', torch.__version__, torch.cuda.get_device_name(0))
except Exception as e:
    print('torch:', e)
EOF"
step cuda_tests "${T_CUDA_TESTS:-90}" "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py
# NCCL (from the nvidia-nccl-cu13 wheel PyTorch depends on): load, unique id, a world of one
step nccl "${T_NCCL:-60}" "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_distributed.py \
    -k "nccl or backends"
step digits "${T_DIGITS:-60}" "$PY" examples/train_digits.py --device cuda --epochs 5
step bench "${T_BENCH:-200}" "$PY" benches/run.py --device cuda --json "$OUTDIR/cuda.json"
step nn_ops "${T_NN_OPS:-60}" "$PY" benches/nn_ops.py --device cuda
step optim "${T_OPTIM:-90}" "$PY" benches/optim.py --device cuda --tensors 64
# shellcheck disable=SC2086
step suite "${T_SUITE:-300}" env FERROGRAD_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    -n "${WORKERS:-12}" --timeout 60 --tb=short -rf ${SUITE_ARGS:-} tests
cat "$OUTDIR/summary.txt"
