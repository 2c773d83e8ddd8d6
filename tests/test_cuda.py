"""The CUDA backend. Kernel compilation needs only NVRTC (installed from PyPI in CI); the
behaviour suite needs a GPU and is skipped, with a reason, where there is none."""

import ferrograd as fg
import numpy as np
import pytest

HAS_GPU = fg.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device on this machine")


def test_every_kernel_compiles_with_nvrtc_for_sm90():
    try:
        size = fg.cuda.compile_kernels("sm_90")
    except fg.DeviceError as e:
        if "not available" in str(e):
            pytest.skip(f"NVRTC is not installed: {e}")
        raise
    assert size > 100_000


def test_cuda_queries_never_crash():
    assert isinstance(fg.cuda.is_available(), bool)
    assert fg.cuda.device_count() >= 0
    assert fg.cuda.device_count() > 0 or not fg.cuda.is_available()


@pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
def test_cuda_without_a_device_is_a_readable_error():
    with pytest.raises(fg.DeviceError, match="CUDA"):
        fg.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(fg.DeviceError, match="CUDA"):
        fg.zeros(3).to("cuda")
    # the process keeps working
    assert (fg.tensor([1.0]) * 2.0).item() == 2.0


def test_empty_cache_and_cuda_memory_stats_are_safe_without_a_used_device():
    # like torch.cuda.empty_cache(): nothing was cached on a device never used
    if not HAS_GPU:
        fg.cuda.empty_cache()
        fg.empty_cache("cuda")
    stats = fg.memory_stats("cuda")
    assert stats["live_bytes"] >= 0 and stats["peak_bytes"] >= stats["live_bytes"]


def test_default_device():
    before = fg.get_default_device()
    try:
        fg.set_default_device("cpu")
        assert fg.get_default_device() == "cpu"
        assert fg.zeros(2).device == "cpu" and fg.tensor([1.0]).device == "cpu"
        with pytest.raises((ValueError, fg.DeviceError), match="device"):
            fg.set_default_device("tpu")
        missing = f"cuda:{fg.cuda.device_count()}"
        with pytest.raises(fg.DeviceError, match="not available"):
            fg.set_default_device(missing)
        assert fg.get_default_device() == "cpu"  # unchanged by the failures
        if HAS_GPU:
            fg.set_default_device("cuda")
            assert fg.get_default_device() == "cuda:0"
            assert fg.ones(2, 2).device == "cuda:0" and fg.tensor([1.0]).device == "cuda:0"
            assert fg.tensor([1.0], device="cpu").device == "cpu"
    finally:
        fg.set_default_device(before)


def both(arr):
    return fg.tensor(arr), fg.tensor(arr, device="cuda")


OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1.0),
    "maximum": lambda a, b: fg.maximum(a, b),
    "where": lambda a, b: fg.where(a > b, a, b),
    "exp_tanh_sigmoid": lambda a, b: a.exp() + b.tanh() + a.sigmoid() + b.relu(),
    "log_sqrt": lambda a, b: (a.abs() + 1.0).log() + (b * b + 1.0).sqrt(),
    "pow": lambda a, b: a**2 + (a.abs() + 0.5) ** b,
    "sum": lambda a, b: a.sum(axis=1, keepdims=True) + b.mean(axis=0),
    "max_min": lambda a, b: a.max(axis=0) - b.min(axis=1).sum(),
    "matmul": lambda a, b: a @ b.T,
    "batched_matmul": lambda a, b: a.reshape(2, 3, 4) @ b.reshape(2, 4, 3),
    "softmax": lambda a, b: a.softmax(axis=1) + b.log_softmax(axis=0),
    "views": lambda a, b: a.T[1:, ::2] + b.T[:-1, 1::2],
    "concat": lambda a, b: fg.concat([a, b[:2]], axis=0),
    "index": lambda a, b: a[[0, 5, 2]] * b[1],
    "cross_entropy": lambda a, b: fg.cross_entropy(
        a, fg.tensor([0, 1, 2, 3, 0, 1], device=a.device)
    ),
    "cross_entropy_strided": lambda a, b: fg.cross_entropy(
        a.T[:, :5] * b.T[:, 1:], fg.tensor([0, 4, 2, 3], device=a.device)
    ),
    "layer_norm": lambda a, b: fg.nn.functional.layer_norm(a, (4,), b[0], b[1]),
    "layer_norm_plain": lambda a, b: fg.nn.functional.layer_norm(a.T[:, 1:] + b[1:].T, (5,)),
    "layer_norm_2d": lambda a, b: fg.nn.functional.layer_norm(
        a.reshape(3, 2, 4), (2, 4), b.reshape(3, 2, 4)[0], None
    ),
    "attention": lambda a, b: fg.nn.functional.scaled_dot_product_attention(
        a.reshape(2, 3, 4), b.reshape(2, 3, 4), (a * b).reshape(2, 3, 4)
    ),
    "attention_causal_strided": lambda a, b: fg.nn.functional.scaled_dot_product_attention(
        a.T.reshape(2, 2, 6)[:, :, :5],
        b.T.reshape(2, 2, 6)[:, :, 1:],
        a.reshape(2, 2, 6),
        is_causal=True,
    ),
}


@needs_gpu
@pytest.mark.parametrize("name", sorted(OPS))
def test_cuda_forward_and_gradients_match_cpu(name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    y = rng.normal(size=(6, 4)).astype(np.float32)
    results = []
    for device in ("cpu", "cuda"):
        a, b = fg.tensor(x, device=device), fg.tensor(y, device=device)
        gm = fg.GradManager().attach([a, b])
        with gm:
            out = OPS[name](a, b)
            gm.backward((out * out).sum())
        grads = [t.grad.numpy() if t.grad is not None else np.zeros_like(x) for t in (a, b)]
        assert out.device == ("cpu" if device == "cpu" else "cuda:0")
        results.append((out.numpy(), grads))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-4, atol=1e-5)
    for gc, gg in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(gg, gc, rtol=1e-4, atol=1e-5)


def assert_cuda_matches_cpu(x, w, fn, loss):
    """`fn(x, w)`, and the gradients of `loss(fn(x, w))`, agree on CPU and CUDA (float64)."""
    outs = []
    for device in ("cpu", "cuda"):
        xt, wt = fg.tensor(x, device=device), fg.tensor(w, device=device)
        gm = fg.GradManager().attach([xt, wt])
        with gm:
            y = fn(xt, wt)
            gm.backward(loss(y))
        outs.append((y.numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for c, g in zip(outs[0], outs[1]):
        np.testing.assert_allclose(g, c, rtol=1e-9, atol=1e-9)


@needs_gpu
def test_cuda_conv_and_pool_match_cpu():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 8, 8))
    w = rng.normal(size=(4, 3, 3, 3))
    assert_cuda_matches_cpu(
        x,
        w,
        lambda xt, wt: fg.max_pool2d(fg.conv2d(xt, wt, padding=1).relu(), 2),
        lambda y: y.sum(),
    )


CONV_POOL_VARIANTS = {
    "strided_dilated_groups": lambda x, w: fg.conv2d(
        x, w, stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=3
    ),
    "same_even_kernel": lambda x, w: fg.conv2d(x, w[:, :, :2, :], padding="same", groups=3),
    "max_ceil_dilated": lambda x, w: fg.max_pool2d(
        fg.conv2d(x, w, groups=3), 3, 2, 1, dilation=2, ceil_mode=True
    ),
    "avg_exclude_pad_ceil": lambda x, w: (
        fg.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False) * w.sum()
    ),
}


@needs_gpu
@pytest.mark.parametrize("name", sorted(CONV_POOL_VARIANTS))
def test_cuda_conv_and_pool_variants_match_cpu(name):
    # the CPU runs fused convolution and pooling ops, CUDA composes im2col and cuBLAS
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 9, 8))
    w = rng.normal(size=(6, 2, 3, 3))
    assert_cuda_matches_cpu(x, w, CONV_POOL_VARIANTS[name], lambda y: (y * y).sum())


@needs_gpu
def test_cuda_memory_stats_and_empty_cache():
    before = fg.memory_stats("cuda")["live_bytes"]
    t = fg.zeros(1024, 256, device="cuda")
    assert fg.memory_stats("cuda")["live_bytes"] - before == 1024 * 256 * 4
    del t
    fg.cuda.empty_cache()
    assert fg.memory_stats("cuda")["live_bytes"] == before


@needs_gpu
def test_mixing_devices_raises():
    with pytest.raises(fg.DeviceError, match="device"):
        fg.tensor([1.0, 2.0], device="cpu") + fg.tensor([1.0, 2.0], device="cuda")


@needs_gpu
def test_gradients_flow_through_to_and_cpu():
    rng = np.random.default_rng(3)
    x0, w0 = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    grads = []
    for move in (True, False):
        x = fg.tensor(x0, device="cpu")
        gm = fg.GradManager().attach(x)
        with gm:
            w = fg.tensor(w0, device="cuda" if move else "cpu")
            h = x.to("cuda") if move else x
            y = (h @ w).tanh()
            loss = (y.cpu() if move else y).sum()
            gm.backward(loss)
        assert x.grad.device == "cpu"
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
    t = fg.tensor([1.0])
    assert t.to("cpu") is not None and t.to(t.device).device == t.device


def test_module_to_moves_parameters_and_keeps_sharing():
    rng = np.random.default_rng(0)
    lin = fg.nn.Linear(3, 3, rng=rng)
    model = fg.nn.Sequential(lin, fg.nn.ReLU(), lin)  # one Linear used twice
    before = [p.numpy() for p in model.parameters()]
    assert model.to("cpu") is model
    assert all(p.device == "cpu" for p in model.parameters())
    if not HAS_GPU:
        with pytest.raises(fg.DeviceError):
            model.to("cuda")
        return
    model.to("cuda")
    params = model.parameters()
    assert len(params) == 2 and all(p.device == "cuda:0" for p in params)
    assert all(isinstance(p, fg.nn.Parameter) for p in params)
    assert model[0] is model[2] and model[0].weight is model[2].weight
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.numpy(), b)
    gm = fg.GradManager().attach(params)
    with gm:
        gm.backward(model(fg.tensor(np.ones((4, 3), "f4"), device="cuda")).sum())
    assert all(p.grad is not None and p.grad.device == "cuda:0" for p in params)


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_fused_layer_norm_and_cross_entropy_run_as_one_op(dtype):
    """On CUDA as on the CPU, layer norm and softmax cross-entropy are single fused ops
    (the tape records one op each), with the CPU's values and gradients."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(7, 33)).astype(dtype)
    w = rng.normal(size=(33,)).astype(dtype)
    labels = rng.integers(0, 33, size=7)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-12}
    results = []
    for device in ("cpu", "cuda"):
        xt, wt = fg.tensor(x, device=device), fg.tensor(w, device=device)
        bt = fg.tensor(w[::-1].copy(), device=device)
        key = fg.GradKey("fused")
        for t in (xt, wt, bt):
            key.attach(t)
        y = fg.nn.functional.layer_norm(xt, (33,), wt, bt)
        loss = fg.cross_entropy(y, fg.tensor(labels, device=device))
        assert [n for n, _ in key.saved_tensors_report()] == [
            "layer_norm",
            "softmax_cross_entropy",
        ]
        key.backward(loss)
        results.append([loss.numpy(), y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for c, g in zip(*results):
        np.testing.assert_allclose(g, c, **tol)


@needs_gpu
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_fused_attention_runs_as_one_op(causal):
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(2, 3, n, 8)) for n in (5, 7, 7))
    results = []
    for device in ("cpu", "cuda"):
        ts = [fg.tensor(a, device=device) for a in (q, k, v)]
        key = fg.GradKey("attention")
        for t in ts:
            key.attach(t)
        out = fg.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
        assert [n for n, _ in key.saved_tensors_report()] == ["scaled_dot_product_attention"]
        key.backward((out * out).sum())
        results.append([out.numpy()] + [t.grad.numpy() for t in ts])
    for c, g in zip(*results):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)


class _CudaArray:
    """A stand-in for another library's GPU array: DLPack says CUDA, and it hands out a host
    copy only when asked for one (as PyTorch and CuPy do for ``dl_device=(kDLCPU, 0)``)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is None or int(dl_device[0]) != 1 or copy is False:
            raise BufferError("the data lives on the GPU")
        return self.a.copy().__dlpack__(max_version=max_version)


@needs_gpu
def test_from_dlpack_imports_cuda_data_onto_the_same_device():
    a = np.arange(6.0).reshape(2, 3)
    t = fg.from_dlpack(_CudaArray(a))
    assert t.device == "cuda:0" and t.dtype == "float64"
    np.testing.assert_array_equal(t.numpy(), a)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        src = torch.arange(5, dtype=torch.float32, device="cuda") * 2
        u = fg.from_dlpack(src)
        assert u.device == "cuda:0" and u.dtype == "float32"
        np.testing.assert_array_equal(u.numpy(), src.cpu().numpy())


def test_from_dlpack_names_a_device_it_cannot_import():
    class Elsewhere:
        def __dlpack_device__(self):
            return (4, 0)  # kDLOpenCL

        def __dlpack__(self, **kw):
            raise BufferError("no")

    with pytest.raises(fg.DeviceError, match=r"from_dlpack: only CPU and CUDA .*\(4, 0\)"):
        fg.from_dlpack(Elsewhere())


@needs_gpu
def test_a_tensor_freed_on_another_thread_is_freed_without_an_error():
    """Buffers freed on a thread that never used the device (a data-loading thread, a
    finaliser) are returned to the device, and no error surfaces at a later call."""
    import threading

    fg.cuda.synchronize()
    before = fg.memory_stats("cuda")["live_bytes"]
    box = [fg.ones(1 << 20, device="cuda")]
    assert fg.memory_stats("cuda")["live_bytes"] >= before + (4 << 20)
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    fg.cuda.synchronize()
    assert fg.memory_stats("cuda")["live_bytes"] <= before
    assert (fg.ones(3, device="cuda") * 2).tolist() == [2.0, 2.0, 2.0]


@needs_gpu
@pytest.mark.parametrize(
    "dtype",
    ["float32", "float64", "int64", "bool", "float16", "bfloat16", "int32", "int8", "uint8"],
)
def test_copies_of_contiguous_runs_and_strided_views_on_cuda(dtype):
    # contiguous runs (whole tensors, rows, slices at an offset) take the driver's copy,
    # strided views the copy kernel: both give exactly the source's values
    a = (np.arange(60) % 7).reshape(6, 10)
    src = fg.tensor(a).astype(dtype).to("cuda")
    want = src.cpu().numpy()
    for view, ref in [
        (src, want),
        (src[2:5], want[2:5]),
        (src[3], want[3]),
        (src.reshape(-1)[7:41], want.reshape(-1)[7:41]),
        (src[:, 1:4], want[:, 1:4]),
        (src.T, want.T),
    ]:
        c = view.copy()
        assert c.device == src.device and c.dtype == src.dtype
        np.testing.assert_array_equal(c.cpu().numpy(), ref)
        c.reshape(-1)[:1] = 0  # a copy, not an alias
        np.testing.assert_array_equal(view.cpu().numpy(), ref)
    e = src[2:2].copy()
    assert e.shape == (0, 10)


@needs_gpu
@pytest.mark.parametrize("shape", [(1000, 300), (64, 3), (33, 257), (0, 5)])
def test_cuda_layer_norm_weight_and_bias_gradients_over_many_rows(shape):
    # the weight and bias gradients are column sums over every row, taken in chunks of rows
    # and then over the chunks: many chunks, several column blocks, and no rows at all
    rng = np.random.default_rng(3)
    x, dy = rng.normal(size=shape), rng.normal(size=shape)
    w, b = rng.normal(size=shape[1:]), rng.normal(size=shape[1:])
    grads = []
    for device in ("cpu", "cuda"):
        ts = [fg.tensor(a, device=device) for a in (x, w, b)]
        key = fg.GradKey()
        for t in ts:
            key.attach(t)
        key.backward(
            fg.nn.functional.layer_norm(ts[0], shape[1:], ts[1], ts[2]),
            fg.tensor(dy, device=device),
        )
        grads.append([t.grad.numpy() for t in ts])
    for c, g in zip(*grads):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-10)
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(grads[1][1], (dy * xhat).sum(0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grads[1][2], dy.sum(0), rtol=1e-10, atol=1e-10)


def test_import_without_a_driver_does_not_load_the_cuda_libraries():
    # cuBLAS and NVRTC (hundreds of MB) are loaded at import only where a driver can use them
    import ctypes
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs Linux's /proc")
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("an NVIDIA driver is installed here")
    except OSError:
        pass
    code = (
        "import ferrograd, sys; maps = open('/proc/self/maps').read(); "
        "sys.exit('libcublas' in maps or 'libnvrtc' in maps)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("FERROGRAD_PRELOAD_CUDA_LIBS", None)
    assert subprocess.run([sys.executable, "-c", code], check=False, env=env).returncode == 0


@needs_gpu
def test_a_slice_of_a_gpu_tensor_takes_values_from_the_cpu():
    # (PyTorch-YOLOv3: gain[2:6] = torch.tensor(p.shape)[[3, 2, 3, 2]] into a CUDA tensor)
    g = fg.zeros(6, device="cuda")
    g[2:6] = fg.tensor([1.0, 2.0, 3.0, 4.0], device="cpu")
    assert g.device.type == "cuda"
    np.testing.assert_array_equal(g.cpu().numpy(), [0, 0, 1, 2, 3, 4])
    with pytest.raises(fg.DeviceError, match="setitem"):  # a recorded value cannot cross
        g[2:4] = fg.tensor([1.0, 2.0], device="cpu", requires_grad=True)
