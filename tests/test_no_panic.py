"""Bad and extreme inputs never take the interpreter down, never print, never hang and never
give silently wrong sizes or values.

Found by fuzzing the public API (see FUZZ_REPORT.md, not committed, for the root causes). Every
test here states the behaviour a user may rely on:

* a bad input raises an ``Exception`` subclass (never ``pyo3_runtime.PanicException``, which
  derives from ``BaseException``, nor a ``RuntimeError("internal error: ...")``), and nothing is
  written to stderr (a Rust panic prints its message there even when it is caught);
* a shape whose element count (or byte size) does not fit a machine word raises
  ``ShapeError``/``ValueError``/``MemoryError``/``OverflowError``/``IndexError`` instead of
  wrapping around to a wrong size;
* valid inputs give numpy's / PyTorch's result;
* error messages name the op and the offending argument or value.

Inputs that could abort the process, hang, or (in a build without overflow checks, where sizes
wrap around) allocate or write out of bounds run in child processes with an address-space limit
and a per-case alarm: see ``ISOLATED`` and ``isolated_results``. Everything else runs here, with
``capfd`` checking stderr.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import ferrograd as fg
import numpy as np
import pytest
from conftest import conv2d_reference
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

# hypothesis with capfd: the fixture is read (and so reset) in every example
FIXTURE_OK = settings(
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ]
)

#: exceptions an out-of-range size, index or value may raise
SIZE_ERRORS = (fg.ShapeError, ValueError, MemoryError, OverflowError, IndexError)
SIZE_ERROR_NAMES = ("ShapeError", "ValueError", "MemoryError", "OverflowError", "IndexError")

U64 = 2**64 - 1
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)

HAS_CUDA = fg.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (real or emulated)")


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def outcome(fn):
    """(value, exception) of fn(); a PanicException is returned, not raised."""
    try:
        return fn(), None
    except BaseException as e:  # noqa: BLE001 - PanicException is a BaseException
        return None, e


def describe(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__name__}: {e}"


def assert_proper(e: BaseException):
    """e is an ordinary exception, not a Rust panic reaching Python."""
    assert isinstance(e, Exception), f"a Rust panic reached Python: {describe(e)}"
    assert "internal error" not in str(e), f"a caught Rust panic: {describe(e)}"


def assert_quiet(capfd):
    err = capfd.readouterr().err
    assert err == "", f"wrote to stderr:\n{err[:2000]}"


def expect_raise(fn, capfd, allowed=SIZE_ERRORS):
    """fn() raises one of `allowed` (not a panic) and prints nothing."""
    value, e = outcome(fn)
    assert e is not None, (
        f"expected one of {[a.__name__ for a in allowed]}, got the value {value!r}"
    )
    assert_proper(e)
    assert isinstance(e, allowed), (
        f"expected one of {[a.__name__ for a in allowed]}, got {describe(e)}"
    )
    assert_quiet(capfd)
    return e


def expect_value(fn, capfd):
    """fn() returns normally, prints nothing; returns the value."""
    value, e = outcome(fn)
    assert e is None, f"expected a result, got {describe(e)}"
    assert_quiet(capfd)
    return value


def expect_value_or_raise(fn, capfd, allowed=SIZE_ERRORS):
    """fn() returns (value, None) or raises an allowed exception (None, e); no panic, no stderr."""
    value, e = outcome(fn)
    if e is not None:
        assert_proper(e)
        assert isinstance(e, allowed), f"unexpected {describe(e)}"
    assert_quiet(capfd)
    return value, e


def np_or_exc(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001
        return None, e


# --------------------------------------------------------------------------------------
# isolated cases: each runs in a child process with an address-space limit and an alarm
# --------------------------------------------------------------------------------------

#: the child's address-space limit above what it uses after importing ferrograd
CHILD_HEADROOM = 768 << 20
#: seconds a single isolated case may run
CASE_TIMEOUT = 8

_CHILD = r"""
import json, os, resource, signal, sys, tempfile
sys.path[:0] = PATHS
import numpy as np
import ferrograd as fg
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
limit = vm + HEADROOM
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
cases = json.loads(sys.stdin.read())
for cid, code, timeout in cases:
    print(json.dumps({"start": cid}), flush=True)
    sink = tempfile.TemporaryFile()
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)
    ns = {"fg": fg, "np": np, "result": None}
    rec = {"id": cid}
    signal.alarm(timeout)  # SIGALRM's default action ends the process: a hang is reported
    try:
        exec(code, ns)
        rec["status"] = "ok"
        rec["result"] = ns.get("result")
    except BaseException as e:
        rec["status"] = "exc"
        rec["mro"] = [c.__name__ for c in type(e).__mro__]
        rec["type"] = type(e).__module__ + "." + type(e).__name__
        rec["msg"] = str(e)[:2000]
    signal.alarm(0)
    sys.stderr.flush()
    os.dup2(saved, 2)
    sink.seek(0)
    rec["stderr"] = sink.read().decode("utf-8", "replace")[:4000]
    try:
        line = json.dumps(rec)
    except TypeError:
        rec["result"] = repr(rec["result"])
        line = json.dumps(rec)
    print(line, flush=True)
"""


def _run_group(cases):
    """Runs cases (id, code, timeout) in children; a child that dies takes only its current
    case with it: the rest run in a fresh child."""
    paths = [os.path.dirname(os.path.dirname(os.path.abspath(fg.__file__)))]
    src = _CHILD.replace("PATHS", repr(paths)).replace("HEADROOM", str(CHILD_HEADROOM))
    env = dict(os.environ, MALLOC_ARENA_MAX="2")
    results = {}
    todo = list(cases)
    while todo:
        budget = sum(t for _, _, t in todo) + 30
        try:
            p = subprocess.run(
                [sys.executable, "-c", src],
                check=False,
                input=json.dumps(todo),
                capture_output=True,
                text=True,
                timeout=budget,
                env=env,
            )
            out, rc, child_err = p.stdout, p.returncode, p.stderr
        except subprocess.TimeoutExpired as te:
            out = te.stdout.decode() if isinstance(te.stdout, bytes) else (te.stdout or "")
            rc, child_err = "timeout", ""
        started = None
        for line in out.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "start" in rec:
                started = rec["start"]
            else:
                results[rec["id"]] = rec
                started = None
        done = set(results)
        if started is not None:
            # the child died in this case: a signal (SIGSEGV, SIGABRT, SIGALRM = hang), or
            # an exit from native code
            how = "hang (killed by the per-case alarm)" if rc == -14 else f"child died, rc={rc}"
            results[started] = {
                "id": started,
                "status": "crash",
                "how": how,
                "stderr": child_err[-4000:],
            }
            done.add(started)
        remaining = [c for c in todo if c[0] not in done]
        if len(remaining) == len(todo):  # no progress: report the rest as failed to run
            for c in remaining:
                results[c[0]] = {
                    "id": c[0],
                    "status": "crash",
                    "how": f"child failed: rc={rc}",
                    "stderr": child_err[-4000:],
                }
            break
        todo = remaining
    return results


# Each case: (id, code, expectation). The code runs with `fg` and `np` in scope and may set
# `result` to a JSON value. Expectations:
#   "raise"            an exception from SIZE_ERRORS (by name: the child's classes)
#   ("value", v)       no exception, result == v
#   ("value~", v)      no exception, result close to v (floats)
#   ("raise|value", v) either of the two
#   "memory"           MemoryError
# In every case: the child survives, finishes in time, prints nothing and raises no panic.
ISOLATED = [
    # ---- factories whose element count overflows (known: zeros(2**32, 2**32) is 0 bytes)
    ("zeros_2p32_sq", "fg.zeros(2**32, 2**32)", "raise"),
    ("zeros_2p62p1_x4_reshape", "result = fg.zeros(2**62 + 1, 4).reshape(-1).shape", "raise"),
    ("zeros_64_axes_of_2", "fg.zeros(*([2] * 64))", "raise"),
    ("full_2p32_sq", "fg.full((2**32, 2**32), 1.0)", "raise"),
    (
        "ones_2p32_sq_cuda",
        "result = 'skip' if not fg.cuda.is_available() else fg.ones(2**32, 2**32, device='cuda')",
        "raise",
    ),
    # zero-size shapes whose other axes overflow the strides or numpy's byte limit
    ("zeros_0_2p62_4_strides", "fg.zeros(0, 2**62, 4)", "raise"),
    (
        "zeros_2p31_2p31_0_numpy",
        "t = fg.zeros(2**31, 2**31, 0); result = list(t.numpy().shape)",
        "raise",
    ),
    ("zeros_2p61_0_numpy", "t = fg.zeros(2**61, 0); result = list(t.numpy().shape)", "raise"),
    ("zeros_2p62_0_repr", "result = repr(fg.zeros(2**62, 0))", "raise"),
    # ---- reshape / broadcast_to
    ("reshape_empty_to_overflow", "fg.ones(0).reshape(2**32, 2**32, 0)", "raise"),
    ("reshape_infer_overflow", "fg.ones(6).reshape(-1, 2**32, 2**32)", "raise"),
    ("reshape_empty_strides_overflow", "fg.ones(0).reshape(0, 2**62, 4)", "raise"),
    (
        "broadcast_sum_overflow_known",
        "result = fg.ones(3).broadcast_to(2**32, 2**32, 3).sum().item()",
        "raise",
    ),
    ("broadcast_size_overflow", "result = fg.ones(1).broadcast_to(2**32, 2**32).size", "raise"),
    ("broadcast_add_overflow", "fg.ones(1).broadcast_to(2**32, 2**32) + 1", "raise"),
    ("broadcast_numpy_overflow", "fg.ones(1).broadcast_to(2**32, 2**32).numpy()", "raise"),
    ("broadcast_max_elems_i64", "result = fg.ones(3).broadcast_to(2**63 - 1, 3).size", "raise"),
    (
        "broadcast_cuda_sum_overflow",
        (
            "result = 'skip' if not fg.cuda.is_available() else "
            "fg.ones(3, device='cuda').broadcast_to(2**32, 2**32, 3).sum().item()"
        ),
        "raise",
    ),
    (
        "concat_len_overflow",
        "b = fg.ones(1).broadcast_to(2**62); result = list(fg.concat([b, b, b, b]).shape)",
        "raise",
    ),
    (
        "stack_len_overflow",
        "b = fg.ones(1).broadcast_to(2**62); result = list(fg.stack([b, b, b, b]).shape)",
        "raise",
    ),
    (
        "matmul_batch_overflow",
        (
            "a = fg.ones(1, 1).broadcast_to(2**32, 1, 1); b = fg.ones(1, 1).broadcast_to(2**32, 1, 1, 1)\n"
            "result = list(fg.matmul(a, b).shape)"
        ),
        "raise",
    ),
    (
        "matmul_rows_cols_overflow",
        "result = list((fg.ones(1, 1).broadcast_to(2**33, 1) @ fg.ones(1, 1).broadcast_to(1, 2**33)).shape)",
        "raise",
    ),
    (
        "matmul_batch_x_matrix_overflow",
        "result = list((fg.ones(2, 2).broadcast_to(2**62, 2, 2) @ fg.ones(2, 2)).shape)",
        "raise",
    ),
    # ---- slicing writes through a view whose length overflowed (release: out of bounds)
    (
        "setitem_step_i64max",
        "x = fg.ones(3); x[::2**63 - 1] = 2.0; result = x.numpy().tolist()",
        ("raise|value", [2.0, 1.0, 1.0]),
    ),
    (
        "setitem_neg_step_i64min",
        "x = fg.ones(3); x[::-2**63] = 2.0; result = x.numpy().tolist()",
        ("raise|value", [1.0, 1.0, 2.0]),
    ),
    (
        "setitem_stride_times_step",
        "x = fg.ones(3, 3); x[::2**62] = 2.0; result = x.numpy().tolist()",
        ("raise|value", [[2.0, 2.0, 2.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    ),
    # ---- convolution and pooling arithmetic
    (
        "conv2d_padding_2p63",
        "fg.conv2d(fg.ones(1,1,3,3), fg.ones(1,1,3,3), padding=2**63)",
        "raise",
    ),
    (
        "conv2d_padding_2p62",
        "result = list(fg.conv2d(fg.ones(1,1,1,1), fg.ones(1,1,1,1), padding=2**62).shape)",
        "raise",
    ),
    (
        "conv2d_dilation_2p63",
        "fg.conv2d(fg.ones(1,1,3,3), fg.ones(1,1,3,3), dilation=2**63)",
        "raise",
    ),
    (
        "conv2d_same_dilation_2p63",
        "fg.conv2d(fg.ones(1,1,3,3), fg.ones(1,1,3,3), padding='same', dilation=2**63)",
        "raise",
    ),
    (
        "conv2d_same_dilation_2p62",
        (
            "result = fg.conv2d(fg.ones(1,1,3,3), fg.ones(1,1,3,3), padding='same', dilation=2**62)"
            ".numpy().tolist()"
        ),
        ("raise|value", [[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]]),
    ),
    (
        "conv2d_work_estimate_overflow",
        (
            "x = fg.ones(1,1,1,1).broadcast_to(1,1,2**32,1); w = fg.ones(1,1,1,1).broadcast_to(1,1,2**32,1)\n"
            "result = fg.conv2d(x, w).numpy().tolist()"
        ),
        ("raise|value", [[[[4294967296.0]]]]),
    ),
    ("max_pool2d_padding_2p63", "fg.max_pool2d(fg.ones(1,1,3,3), 2, padding=2**63)", "raise"),
    ("max_pool2d_dilation_2p63", "fg.max_pool2d(fg.ones(1,1,3,3), 3, dilation=2**63)", "raise"),
    (
        "avg_pool2d_kernel_area_overflow",
        "result = fg.avg_pool2d(fg.ones(1,1,1,1, dtype='float64'), 2**32, padding=2**31).item()",
        ("raise|value~", 2.0**-64),
    ),
    (
        "avg_pool2d_kernel_2p63",
        "result = fg.avg_pool2d(fg.ones(1,1,3,3), 2**63, padding=2**62).item()",
        ("raise|value~", 9 * 2.0**-126),
    ),
    # ---- a huge window over a 1x1 image: PyTorch clips the window, ferrograd walks it (hang)
    (
        "max_pool2d_huge_kernel_hang",
        "result = fg.max_pool2d(fg.ones(1,1,1,1), 2**40, padding=2**39).numpy().tolist()",
        ("value", [[[[1.0]]]]),
    ),
    (
        "max_pool2d_2p63_kernel_hang",
        "result = fg.max_pool2d(fg.ones(1,1,3,3), 2**63, padding=2**62).numpy().tolist()",
        ("raise|value", [[[[1.0]]]]),
    ),
    # ---- a buffer too large for the address-space limit: MemoryError, silently
    ("oom_ones", "fg.ones(2**31)", "memory"),
    ("oom_binary", "x = fg.ones(1).broadcast_to(2**31); x + 1", "memory"),
    ("oom_astype", "fg.ones(1).broadcast_to(2**31).astype('float64')", "memory"),
    # (numpy() of a broadcast is a zero-stride view of its memory, as PyTorch's: nothing to
    # allocate; tolist() copies)
    (
        "oom_numpy",
        "result = fg.ones(1).broadcast_to(2**31).numpy().strides",
        ("value", [0]),
    ),
    ("oom_tolist", "fg.ones(1).broadcast_to(2**31).tolist()", "memory"),
    # (a broadcast reshaped along its own axes is a view, as PyTorch's: transposed, it copies)
    (
        "oom_reshape_copy",
        "fg.ones(1, 2).broadcast_to(2**30, 2).t().reshape(2**31)",
        "memory",
    ),
    ("oom_flatten", "fg.ones(3).broadcast_to(2**29, 3).flatten()", "memory"),
    ("oom_zeros_like", "fg.zeros_like(fg.ones(1).broadcast_to(2**31))", "memory"),
    ("oom_zero_", "fg.ones(1).broadcast_to(2**31).zero_()", "memory"),
    (
        "oom_to_cuda",
        "result = 'skip' if not fg.cuda.is_available() else fg.ones(1).broadcast_to(2**31).to('cuda')",
        "memory",
    ),
    ("oom_repr", "repr(fg.ones(1).broadcast_to(2**31))", "memory"),
    # an allocation failing inside backward (a slice's gradient is input-sized): today the
    # panic unwinds through the tape, whose destructors panic again, and the process aborts
    (
        "oom_in_backward",
        ("k = fg.GradKey(); x = fg.ones(1); k.attach(x)\nk.backward(x.broadcast_to(2**31)[0])"),
        "memory",
    ),
    (
        "oom_in_grad",
        (
            "k = fg.GradKey(); x = fg.ones(1); k.attach(x)\n"
            "k.grad(x.broadcast_to(2**31)[0], None, [x])"
        ),
        "memory",
    ),
]

# seeded random shapes whose element count overflows a 64-bit word, for factories and views
_MAKERS = [
    ("zeros", "fg.zeros"),
    ("ones", "fg.ones"),
    ("broadcast_to", "fg.ones(1).broadcast_to"),
    ("reshape_empty", "fg.zeros(0).reshape"),
]
_rng = np.random.default_rng(20240601)
for _i in range(8):
    _nd = int(_rng.integers(2, 5))
    _dims = [int(2 ** _rng.integers(16, 40)) for _ in range(_nd)]
    while math.prod(_dims) < 2**64:
        _dims[int(_rng.integers(0, _nd))] *= 2**8
    _dims = [min(d, I64_MAX) for d in _dims]
    _name, _make = _MAKERS[_i % len(_MAKERS)]
    if _name == "reshape_empty":
        _dims = _dims + [0]
    ISOLATED.append((f"random_overflow_{_i}_{_name}", f"result = {_make}(*{_dims}).size", "raise"))


@pytest.fixture(scope="module")
def isolated_results():
    if not sys.platform.startswith("linux"):
        pytest.skip("the isolation harness uses /proc, RLIMIT_AS and SIGALRM")
    cases = [(cid, code, CASE_TIMEOUT) for cid, code, _ in ISOLATED]
    workers = max(2, min(4, os.cpu_count() or 2))
    groups = [cases[i::workers] for i in range(workers)]
    out = {}
    with ThreadPoolExecutor(workers) as ex:
        for r in ex.map(_run_group, groups):
            out.update(r)
    return out


@pytest.mark.parametrize("cid,code,expect", ISOLATED, ids=[c[0] for c in ISOLATED])
def test_isolated(isolated_results, cid, code, expect):
    rec = isolated_results[cid]
    where = f"\ncode:\n{textwrap.indent(code, '    ')}\n"
    assert rec["status"] != "crash", f"{rec['how']}{where}stderr:\n{rec.get('stderr', '')}"
    if rec["status"] == "ok" and rec.get("result") == "skip":
        pytest.skip("needs a CUDA device")
    if rec["status"] == "exc":
        assert "PanicException" not in rec["mro"] and "Exception" in rec["mro"], (
            f"a Rust panic reached Python: {rec['type']}: {rec['msg']}{where}"
        )
        assert "internal error" not in rec["msg"], f"a caught Rust panic: {rec['msg']}{where}"
    assert rec["stderr"] == "", f"wrote to stderr:{where}{rec['stderr']}"
    kind, want = (expect, None) if isinstance(expect, str) else expect
    raised = rec["status"] == "exc"
    got = f"{rec['type']}: {rec['msg']}" if raised else f"the result {rec.get('result')!r}"
    if kind == "raise":
        assert raised and any(n in rec["mro"] for n in SIZE_ERROR_NAMES), (
            f"expected one of {SIZE_ERROR_NAMES}, got {got}{where}"
        )
    elif kind == "memory":
        assert raised and "MemoryError" in rec["mro"], f"expected MemoryError, got {got}{where}"
    elif kind in ("value", "value~"):
        assert not raised, f"expected {want!r}, got {got}{where}"
    if not raised and kind in ("value", "raise|value"):
        assert rec["result"] == want, f"expected {want!r}, got {got}{where}"
    if not raised and kind in ("value~", "raise|value~"):
        assert math.isclose(rec["result"], want, rel_tol=1e-6), (
            f"expected {want!r}, got {got}{where}"
        )
    if raised and kind.startswith("raise|"):
        assert any(n in rec["mro"] for n in SIZE_ERROR_NAMES), f"unexpected {got}{where}"


# --------------------------------------------------------------------------------------
# (a) panics and stderr output, in process
# --------------------------------------------------------------------------------------


def test_conv2d_dilated_kernel_column_outside_the_input_known(capfd):
    # PyTorch: [[[[1.]]]] (the middle tap reads the one pixel, the others read padding)
    y = expect_value(
        lambda: fg.conv2d(
            fg.ones(1, 1, 1, 1), fg.ones(1, 1, 1, 3), padding=(0, 2), dilation=(1, 2)
        ),
        capfd,
    )
    np.testing.assert_array_equal(y.numpy(), [[[[1.0]]]])


def conv2d_ref(x, w, stride, padding, dilation, groups):
    """PyTorch's conv2d (cross-correlation) in float64 numpy."""
    return conv2d_reference(x, w, None, stride, padding, dilation, groups)


@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 2))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    # small images with dilated kernels and wide padding: taps that miss the image entirely
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    # the window must fit the padded input (else ShapeError, checked elsewhere)
    if h + 2 * padding[0] < dilation[0] * (kh - 1) + 1:
        padding = (dilation[0] * (kh - 1), padding[1])
    if w + 2 * padding[1] < dilation[1] * (kw - 1) + 1:
        padding = (padding[0], dilation[1] * (kw - 1))
    return (1, groups * cg, h, w), (groups * og, cg, kh, kw), stride, padding, dilation, groups


@FIXTURE_OK
@given(conv_cases())
@example(((1, 1, 1, 1), (1, 1, 1, 3), (1, 1), (0, 2), (1, 2), 1))  # the known case
@example(((2, 1, 4, 1), (2, 1, 1, 3), (1, 1), (1, 2), (1, 2), 1))
@example(((1, 2, 3, 3), (2, 1, 1, 3), (3, 1), (2, 2), (2, 3), 2))  # groups, stride on h
@example(((1, 1, 2, 1), (1, 1, 3, 1), (1, 1), (2, 0), (2, 1), 1))  # along h: fine today
def test_conv2d_matches_pytorch_for_any_padding_and_dilation(capfd, case):
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = expect_value(
        lambda: fg.conv2d(fg.tensor(x), fg.tensor(w), None, stride, padding, dilation, groups),
        capfd,
    )
    np.testing.assert_allclose(
        y.numpy(), conv2d_ref(x, w, stride, padding, dilation, groups), atol=1e-10
    )


def test_int64_matmul_overflow_wraps_like_numpy(capfd):
    a, b = np.array([[2**62, 2**62]]), np.array([[1], [1]])
    y = expect_value(lambda: fg.tensor(a) @ fg.tensor(b), capfd)
    assert y.numpy().tolist() == (a @ b).tolist()  # numpy (and the engine's int64 add/mul) wrap
    y = expect_value(lambda: fg.tensor([2**62]) @ fg.tensor([4]), capfd)
    assert y.item() == 0


def unaligned_f64(n=2):
    return np.frombuffer(b"\x00" * (8 * n + 1), dtype=np.uint8)[1:].view(np.float64)


@pytest.mark.parametrize(
    "fn",
    [
        lambda: fg.tensor(unaligned_f64()).numpy().tolist(),
        lambda: fg.Tensor._from_numpy(unaligned_f64()).numpy().tolist(),
        lambda: (fg.ones(2, dtype="float64") + unaligned_f64()).numpy().tolist(),
    ],
    ids=["tensor", "_from_numpy", "as_operand"],
)
def test_unaligned_numpy_input(capfd, fn):
    value, e = expect_value_or_raise(fn, capfd, allowed=(TypeError, ValueError))
    if e is None:
        assert value in ([0.0, 0.0], [1.0, 1.0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda: fg.zeros(*([1] * 33)).numpy().shape,
        lambda: repr(fg.zeros(*([1] * 33))),
        lambda: fg.zeros(*([1] * 33)).tolist(),
        lambda: fg.tensor(np.zeros((1,) * 33)).shape,
        lambda: fg.tensor(np.zeros((1,) * 64)).numpy().shape,
        lambda: (fg.ones(2) + np.zeros((1,) * 40, np.float32)).shape,
    ],
    ids=["numpy_33", "repr_33", "tolist_33", "from_numpy_33", "roundtrip_64", "operand_40"],
)
def test_more_than_32_axes_known(capfd, fn):
    # numpy arrays have up to 64 axes
    _value, e = expect_value_or_raise(fn, capfd, allowed=(ValueError,))
    assert e is None, f"numpy supports this many axes, got {describe(e)}"


def test_more_than_64_axes_is_a_clean_error(capfd):
    # ferrograd makes a 65-axis tensor; numpy cannot hold it: a ValueError, not a panic
    _value, e = expect_value_or_raise(
        lambda: fg.zeros(*([1] * 65)).numpy(), capfd, allowed=(ValueError,)
    )
    assert e is not None


@pytest.mark.parametrize(
    "fn", [fg.memory_stats, fg.reset_peak_memory_stats, fg.empty_cache], ids=lambda f: f.__name__
)
def test_device_ordinal_usize_max(capfd, fn):
    value, e = expect_value_or_raise(
        lambda: fn("cuda:18446744073709551615"), capfd, allowed=(ValueError, RuntimeError)
    )
    if fn is fg.memory_stats and e is None:
        # not the CPU's figures (the slot of cuda:N is N + 1, which wraps to the CPU's 0)
        assert value == {"live_bytes": 0, "peak_bytes": 0, "live_buffers": 0, "live_tensors": 0}


# --------------------------------------------------------------------------------------
# slicing with extreme starts, stops and steps (views: no data is touched on a wrong shape)
# --------------------------------------------------------------------------------------

EXTREME = [
    0,
    1,
    -1,
    2,
    -2,
    3,
    2**31,
    2**32,
    2**62,
    -(2**62),
    I64_MAX,
    I64_MIN,
    I64_MAX - 1,
    I64_MIN + 1,
]
bound = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(EXTREME))
step = st.one_of(
    st.none(), st.integers(-4, 4).filter(bool), st.sampled_from([s for s in EXTREME if s])
)


@pytest.mark.parametrize(
    "shape,key",
    [
        ((3,), slice(None, None, I64_MIN)),  # known: length 2**64 - 1 in release builds
        ((3,), slice(None, None, I64_MAX)),
        ((3,), slice(1, 3, I64_MAX)),
        ((3,), slice(2, None, -I64_MAX)),
        ((3, 3), slice(None, None, 2**62)),  # the stride 3 * 2**62 overflows
        ((3, 3), (slice(None), slice(None, None, 2**62))),
    ],
    ids=[
        "step_i64min",
        "step_i64max",
        "start1_step_i64max",
        "neg_step_i64max",
        "stride_x_step",
        "inner_axis",
    ],
)
def test_getitem_extreme_step(capfd, shape, key):
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    t = expect_value(lambda: fg.tensor(a)[key], capfd)
    assert tuple(t.shape) == a[key].shape
    np.testing.assert_array_equal(t.numpy(), a[key])


@FIXTURE_OK
@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    slices=st.lists(st.tuples(bound, bound, step), min_size=1, max_size=3),
)
def test_getitem_slices_match_numpy(capfd, shape, slices):
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    key = tuple(slice(*s) for s in slices[: len(shape)])
    expected, np_err = np_or_exc(lambda: a[key])
    t, e = expect_value_or_raise(lambda: fg.tensor(a)[key], capfd)
    if np_err is None:
        assert e is None, f"numpy gives {expected.shape}, ferrograd raised {describe(e)}"
        assert tuple(t.shape) == expected.shape  # before reading any data
        np.testing.assert_array_equal(t.numpy(), expected)


@pytest.mark.parametrize("index", [True, False])
def test_bool_index_is_not_an_integer(capfd, index):
    a = np.arange(6.0).reshape(2, 3)
    t = expect_value(lambda: fg.tensor(a)[index], capfd)
    # numpy: x[True] adds an axis of length 1, x[False] one of length 0
    assert tuple(t.shape) == a[index].shape


def test_bool_setitem_is_not_an_integer(capfd):
    x = fg.ones(3)
    _value, e = expect_value_or_raise(
        lambda: x.__setitem__(True, 5.0), capfd, allowed=(IndexError, TypeError)
    )
    if e is None:
        a = np.ones(3, "f4")
        a[True] = 5.0
        np.testing.assert_array_equal(x.numpy(), a)  # numpy: every element


# --------------------------------------------------------------------------------------
# (b) silently wrong values
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn,expected",
    [
        (lambda: int(fg.tensor(2**62 + 1)), 2**62 + 1),
        (lambda: int(fg.tensor(I64_MIN + 1)), I64_MIN + 1),
        (lambda: int(fg.tensor(1e30, dtype="float64")), int(1e30)),
    ],
    ids=["int64_exact", "int64_min_plus_1", "float_beyond_int64"],
)
def test_int_of_tensor_is_exact(capfd, fn, expected):
    assert expect_value(fn, capfd) == expected


@pytest.mark.parametrize("v", [float("nan"), float("inf"), -float("inf")], ids=str)
def test_int_of_non_finite_raises(capfd, v):
    # like int(float('nan')) and int(np.float32('nan')): ValueError / OverflowError
    expect_raise(lambda: int(fg.tensor(v)), capfd, allowed=(ValueError, OverflowError))


@pytest.mark.parametrize(
    "fn",
    [
        lambda: fg.tensor(2**63).item(),
        lambda: fg.tensor([1, 2**63]).numpy().tolist(),
        lambda: fg.tensor(np.uint64(U64)).item(),
        lambda: fg.tensor(np.array([2**63], dtype=np.uint64)).item(),
        lambda: (fg.ones(2, dtype="int64") + np.uint64(2**63)).numpy().tolist(),
        lambda: fg.ones(3)[[2**63]],
    ],
    ids=[
        "int_2p63",
        "list_with_2p63",
        "uint64_max",
        "uint64_array",
        "uint64_operand",
        "index_list_2p63",
    ],
)
def test_unsigned_values_beyond_int64_do_not_wrap(capfd, fn):
    value, e = expect_value_or_raise(
        fn, capfd, allowed=(OverflowError, ValueError, TypeError, IndexError)
    )
    if e is None:
        # a float (as numpy promotes [1, 2**63]) is fine; a negative number is wraparound
        flat = np.ravel(np.asarray(value, dtype=object))
        assert all(v >= 0 for v in flat), f"wrapped around: {value!r}"
    elif isinstance(e, IndexError):
        assert "-9223372036854775808" not in str(e), f"the index wrapped around: {e}"


@pytest.mark.parametrize(
    "fn",
    [
        lambda: fg.full((), 2**63, dtype="int64").item(),
        lambda: fg.full((), -(2**63) - 1, dtype="int64").item(),
        lambda: fg.full((2,), float("nan"), dtype="int64").numpy().tolist(),
        lambda: fg.full((2,), float("inf"), dtype="int64").numpy().tolist(),
    ],
    ids=["full_2p63", "full_below_i64min", "full_nan", "full_inf"],
)
def test_full_int64_out_of_range_raises(capfd, fn):
    # numpy: OverflowError for an int out of range; NaN/inf cannot become an integer
    expect_raise(fn, capfd, allowed=(OverflowError, ValueError))


def test_full_int64_keeps_every_bit(capfd):
    v = 2**53 + 1  # not a float64
    assert expect_value(lambda: fg.full((), v, dtype="int64").item(), capfd) == v
    assert expect_value(lambda: fg.ones(2, dtype="int64").fill_(v).numpy().tolist(), capfd) == [
        v,
        v,
    ]


@pytest.mark.parametrize("op", ["iadd", "imul", "isub", "itruediv"])
def test_inplace_op_on_broadcast_view(capfd, op):
    # stride-0 axes share memory: numpy refuses (read-only), PyTorch raises; applying the op
    # once per logical element (2 rows -> twice) is wrong
    x = fg.ones(3).broadcast_to(2, 3)
    _value, e = expect_value_or_raise(
        lambda: getattr(x, f"__{op}__")(2.0), capfd, allowed=(ValueError, RuntimeError, TypeError)
    )
    if e is None:
        want = {"iadd": 3.0, "imul": 2.0, "isub": -1.0, "itruediv": 0.5}[op]
        np.testing.assert_array_equal(x.numpy(), np.full((2, 3), want))


def test_copy_into_broadcast_view_raises(capfd):
    x = fg.ones(3).broadcast_to(2, 3)
    src = fg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    # no value is right: row 0 and row 1 are the same memory (PyTorch raises)
    expect_raise(lambda: x.copy_(src), capfd, allowed=(ValueError, RuntimeError))


def maxpool_ref(x, k, s, p, d, ceil):
    """PyTorch's max_pool2d: a window with no element inside the input is -inf."""

    def size(n, k, s, p, d):
        eff = d * (k - 1) + 1
        if ceil:
            o = -(-(n + 2 * p - eff) // s) + 1
            if (o - 1) * s >= n + p:
                o -= 1
            return o
        return (n + 2 * p - eff) // s + 1

    n, c, h, w = x.shape
    oh, ow = size(h, k[0], s[0], p[0], d[0]), size(w, k[1], s[1], p[1], d[1])
    out = np.full((n, c, oh, ow), -np.inf)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    y, z = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= y < h and 0 <= z < w:
                        out[:, :, i, j] = np.maximum(out[:, :, i, j], x[:, :, y, z])
    return out


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_max_pool2d_window_entirely_in_padding_is_minus_inf(capfd, device):
    # kernel 2 with dilation 3 and padding 2 over one pixel: the only window reads columns
    # -2 and 1, both padding (PyTorch: -inf)
    x = -fg.ones(1, 1, 1, 1, device=device)
    y = expect_value(lambda: fg.max_pool2d(x, 2, dilation=3, padding=2), capfd)
    assert y.numpy().tolist() == [[[[-np.inf]]]]


@FIXTURE_OK
@given(
    hw=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    frac=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    ceil=st.booleans(),
)
@example(hw=(1, 1), k=(2, 2), s=(2, 2), d=(3, 3), frac=(1.0, 1.0), ceil=False)
@example(hw=(2, 4), k=(2, 1), s=(1, 3), d=(3, 2), frac=(1.0, 0.0), ceil=False)
@example(hw=(2, 2), k=(1, 2), s=(3, 3), d=(3, 3), frac=(0.0, 0.5), ceil=True)
def test_max_pool2d_matches_pytorch(capfd, hw, k, s, d, frac, ceil):
    eff = [d[i] * (k[i] - 1) + 1 for i in range(2)]
    p = tuple(int(frac[i] * (eff[i] // 2)) for i in range(2))  # PyTorch: at most half
    if any(hw[i] + 2 * p[i] < eff[i] for i in range(2)):
        return
    x = np.random.default_rng(1).standard_normal((1, 2) + hw)
    y = expect_value(lambda: fg.max_pool2d(fg.tensor(x), k, s, p, d, ceil), capfd)
    np.testing.assert_array_equal(y.numpy(), maxpool_ref(x, k, s, p, d, ceil))


@needs_cuda
def test_cuda_mean_over_an_empty_axis_is_nan(capfd):
    y = expect_value(lambda: fg.ones(0, 3, device="cuda").mean(axis=0).numpy(), capfd)
    assert np.isnan(y).all(), f"{y} (the CPU and numpy give nan)"


@FIXTURE_OK
@given(v=st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**63, -(2**63) - 1, 2**64])))
def test_python_int_operand_on_float_tensor(capfd, v):
    # numpy and PyTorch convert the int to the tensor's float dtype
    y = expect_value(lambda: fg.ones(2) + v, capfd)
    np.testing.assert_array_equal(y.numpy(), np.ones(2, "f4") + np.float32(float(v)))


@FIXTURE_OK
@given(v=st.one_of(st.integers(-(2**65), 2**65), st.sampled_from([2**63, I64_MIN - 1])))
def test_python_int_operand_on_int64_tensor(capfd, v):
    if I64_MIN <= v <= I64_MAX:
        y = expect_value(lambda: fg.ones(2, dtype="int64") * v, capfd)
        assert y.numpy().tolist() == (np.ones(2, np.int64) * np.int64(v)).tolist()
    else:
        e = expect_raise(lambda: fg.ones(2, dtype="int64") * v, capfd, allowed=(OverflowError,))
        assert "mul" in str(e) and str(v) in str(e), f"message names neither op nor value: {e}"


# --------------------------------------------------------------------------------------
# (d) messages name the op and the offending argument or value
# --------------------------------------------------------------------------------------


def backward_with_seed(seed):
    k, x = fg.GradKey(), fg.ones(3)
    k.attach(x)
    k.backward(x * 1.0, seed)


MESSAGES = [
    # (id, call, words the message must contain, words it must not contain)
    ("zeros_2p63", lambda: fg.zeros(2**63), ["zeros", "9223372036854775808"], []),
    ("reshape_2p63", lambda: fg.ones(3).reshape(2**63), ["reshape", "9223372036854775808"], []),
    (
        "broadcast_to_2p63",
        lambda: fg.ones(3).broadcast_to(2**63, 3),
        ["broadcast_to", "9223372036854775808"],
        [],
    ),
    ("getitem_2p63", lambda: fg.ones(3)[2**63], ["9223372036854775808"], ["C long"]),
    ("getitem_np_uint64", lambda: fg.ones(3)[np.uint64(2**63)], ["9223372036854775808"], []),
    (
        "add_int_2p63",
        lambda: fg.ones(3, dtype="int64") + 2**63,
        ["add", "9223372036854775808"],
        ["C long"],
    ),
    (
        "setitem_2p63",
        lambda: fg.ones(3, dtype="int64").__setitem__(0, 2**63),
        ["setitem", "9223372036854775808"],
        ["C long"],
    ),
    (
        "fill_2p63",
        lambda: fg.ones(3, dtype="int64").fill_(2**63),
        ["fill_", "9223372036854775808"],
        ["C long"],
    ),
    (
        "where_2p63",
        lambda: fg.where(fg.ones(3) > 0, fg.ones(3, dtype="int64"), 2**63),
        ["where", "9223372036854775808"],
        ["C long"],
    ),
    ("backward_seed_2p70", lambda: backward_with_seed(2**70), ["backward"], ["C long"]),
    ("softmax_axis", lambda: fg.softmax(fg.ones(3), axis=2**63), ["softmax", "axis"], []),
    ("log_softmax_axis_str", lambda: fg.ones(3).log_softmax(axis="a"), ["log_softmax", "axis"], []),
    ("expand_dims_axis", lambda: fg.ones(3).expand_dims(2**63), ["expand_dims", "axis"], []),
    ("concat_axis", lambda: fg.concat([fg.ones(3)], axis=2**63), ["concat", "axis"], []),
    ("stack_axis", lambda: fg.stack([fg.ones(3)], axis="a"), ["stack", "axis"], []),
    ("sum_keepdims", lambda: fg.ones(3).sum(keepdims=2), ["sum", "keepdims"], []),
    (
        "max_pool2d_ceil_mode",
        lambda: fg.max_pool2d(fg.ones(1, 1, 3, 3), 2, ceil_mode=2),
        ["max_pool2d", "ceil_mode"],
        [],
    ),
    (
        "conv2d_groups",
        lambda: fg.conv2d(fg.ones(1, 1, 3, 3), fg.ones(1, 1, 3, 3), groups=-1),
        ["conv2d", "groups"],
        [],
    ),
    (
        "avg_pool2d_divisor",
        lambda: fg.avg_pool2d(fg.ones(1, 1, 3, 3), 2, divisor_override=-1),
        ["avg_pool2d", "divisor_override"],
        [],
    ),
    (
        "conv2d_stride_0",
        lambda: fg.conv2d(fg.ones(1, 1, 3, 3), fg.ones(1, 1, 1, 1), stride=0),
        ["conv2d", "stride"],
        ["Window {", "ceil:"],
    ),
    (
        "max_pool2d_kernel_0",
        lambda: fg.max_pool2d(fg.ones(1, 1, 3, 3), 0),
        ["max_pool2d", "kernel"],
        ["Window {", "ceil:"],
    ),
    (
        "avg_pool2d_stride_0",
        lambda: fg.avg_pool2d(fg.ones(1, 1, 3, 3), 2, stride=0),
        ["avg_pool2d", "stride"],
        ["Window {", "dilation"],
    ),
    ("zeros_dtype_int", lambda: fg.zeros(3, dtype=123), ["zeros", "dtype"], []),
    ("astype_dtype_int", lambda: fg.ones(3).astype(5), ["astype", "dtype"], []),
    ("zeros_dtype_uint16", lambda: fg.zeros(3, dtype="uint16"), ["zeros", "uint16"], []),
    ("zeros_device_int", lambda: fg.zeros(3, device=5), ["zeros", "device"], []),
    ("add_ragged_list", lambda: fg.ones(2) + [[1.0, 2.0], [3.0]], ["add"], ["tensor:"]),
    (
        "cross_entropy_labels_2p64",
        lambda: fg.cross_entropy(fg.ones(2, 3), [0, 2**64]),
        ["cross_entropy", "labels"],
        ["tensor:"],
    ),
    ("linear_negative", lambda: fg.nn.Linear(-1, 3), ["Linear", "-1"], []),
    ("conv2d_module_groups_0", lambda: fg.nn.Conv2d(1, 1, 3, groups=0), ["Conv2d", "groups"], []),
    (
        "compile_kernels_nul",
        lambda: fg.cuda.compile_kernels("sm\x0090"),
        ["compile_kernels"],
        ["NulError", "unwrap()"],
    ),
]


@pytest.mark.parametrize(
    "call,must,must_not", [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES]
)
def test_error_message_names_op_and_value(capfd, call, must, must_not):
    e = expect_raise(call, capfd, allowed=(Exception,))
    msg = str(e)
    for w in must:
        assert w in msg, f"message does not mention {w!r}: {describe(e)}"
    for w in must_not:
        assert w not in msg, f"message shows {w!r}: {describe(e)}"


def test_out_of_memory_message_text():
    code = (
        "try:\n"
        # a view that exists (3 * 2**40 float32 elements) whose copy cannot be allocated
        "    fg.ones(3).broadcast_to(2**40, 3).reshape(-1)\n"
        "    result = 'no error'\n"
        "except BaseException as e:\n"
        "    result = [type(e).__name__, str(e), isinstance(e, (MemoryError, RuntimeError))]\n"
    )
    rec = _run_group([("oom_text", code, CASE_TIMEOUT)])["oom_text"]
    assert rec["status"] == "ok", rec
    name, msg, both = rec["result"]
    # OutOfMemoryError: a MemoryError and, as PyTorch's, a RuntimeError
    assert name == "OutOfMemoryError" and both, f"{name}: {msg}"
    assert "reshape" in msg, f"does not name the op: {msg}"
    assert "18446744073709551615" not in msg, f"a saturated size, not the real one: {msg}"
