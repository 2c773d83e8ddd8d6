"""Shared helpers for the ferrograd Python test suite.

The gradient checks compare ferrograd's reverse-mode gradients against central finite
differences. The finite differences evaluate the *same* ferrograd composite (fresh,
untracked float64 tensors, no GradKey), so a check exercises only the backward rules:
forward values are tested against numpy separately in ``test_ops_forward.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Callable

import ferrograd as fg
import numpy as np

# FERROGRAD_TEST_DEVICE=cuda runs the whole suite with tensors made on that device by default
TEST_DEVICE = os.environ.get("FERROGRAD_TEST_DEVICE", "cpu")
if TEST_DEVICE != "cpu":
    fg.set_default_device(TEST_DEVICE)

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ferrograd",
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=True,  # the same examples on every run: no flaky CI
    )
    # HYPOTHESIS_PROFILE=explore draws fresh random examples on every run
    settings.register_profile(
        "explore",
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=False,
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ferrograd"))
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass


# --------------------------------------------------------------------------------------
# finite differences
# --------------------------------------------------------------------------------------


def numeric_grad(
    f: Callable[..., float], arrays: Sequence[np.ndarray], eps: float = 1e-6
) -> list[np.ndarray]:
    """Central finite differences of the scalar function ``f(*arrays)``, in float64.

    Returns one gradient array per input, each of that input's shape.
    """
    arrays = [np.array(a, dtype=np.float64, copy=True) for a in arrays]
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        flat = a.reshape(-1)  # a view: a is a fresh contiguous copy
        gflat = g.reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            fp = float(f(*arrays))
            flat[j] = orig - eps
            fm = float(f(*arrays))
            flat[j] = orig
            gflat[j] = (fp - fm) / (2.0 * eps)
        grads.append(g)
    return grads


def weights_for(shape: tuple, seed: int = 0) -> np.ndarray:
    """A fixed random float64 weight array (values in [0.5, 1.5] with random signs)."""
    rng = np.random.default_rng(seed + 7919)
    mag = rng.uniform(0.5, 1.5, size=shape)
    sign = rng.choice([-1.0, 1.0], size=shape)
    return np.asarray(mag * sign, dtype=np.float64)


def analytic_grad(
    fn_fg: Callable[..., fg.Tensor],
    arrays: Sequence[np.ndarray],
    w: np.ndarray,
    dtype=np.float64,
) -> tuple[list[fg.Tensor], fg.Tensor]:
    """Gradients of ``sum(fn_fg(*xs) * w)`` from ferrograd, with every input attached to one
    fresh GradKey. Returns (the gradients as Tensors, the output y)."""
    xs = [fg.tensor(np.asarray(a, dtype=dtype)) for a in arrays]
    key = fg.GradKey("check_grad")
    for x in xs:
        key.attach(x)
    y = fn_fg(*xs)
    assert isinstance(y, fg.Tensor), f"fn returned {type(y).__name__}, not a Tensor"
    wt = fg.tensor(np.asarray(w, dtype=dtype))
    loss = (y * wt).sum()
    assert loss.shape == (), f"loss should be 0-d, got {loss.shape}"
    key.backward(loss)
    assert key.is_finished
    # an input with no gradient path (e.g. x ** 0) may be left with .grad None: that
    # stands for a zero gradient, which check_grad verifies against finite differences
    return [x.grad for x in xs], y


def check_grad(
    fn_fg: Callable[..., fg.Tensor],
    arrays: Sequence[np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-6,
    eps: float = 1e-6,
    seed: int = 0,
) -> list[np.ndarray]:
    """Checks ferrograd's gradients of ``fn_fg`` against central finite differences.

    ``arrays`` are float64 numpy arrays (the differentiable inputs). The output of
    ``fn_fg`` is reduced with a fixed random float64 weight tensor, ``sum(y * w)``, so that
    a backward rule that, say, transposes or mis-orders its gradient does not pass by
    symmetry. Returns the analytic gradients as numpy arrays.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    # forward once (untracked) to learn the output shape
    y0 = fn_fg(*[fg.tensor(a) for a in arrays])
    assert y0.dtype == fg.float64, f"float64 inputs gave a {y0.dtype} output"
    w = weights_for(tuple(y0.shape), seed)

    grads, y = analytic_grad(fn_fg, arrays, w, np.float64)
    np.testing.assert_array_equal(
        y.numpy(), y0.numpy(), err_msg="tracked and untracked forward differ"
    )

    def f(*arrs):
        out = fn_fg(*[fg.tensor(a) for a in arrs]).numpy()
        return float(np.sum(out * w))

    expected = numeric_grad(f, arrays, eps=eps)
    out = []
    for i, (g, e, a) in enumerate(zip(grads, expected, arrays)):
        if g is None:
            assert np.all(np.abs(e) <= atol), (
                f"input {i}: .grad is None after backward, but finite differences give a "
                f"non-zero gradient:\n{e}"
            )
            out.append(np.zeros_like(a))
            continue
        assert tuple(g.shape) == a.shape, (
            f"input {i}: grad shape {g.shape} != input shape {a.shape}"
        )
        assert g.dtype == fg.float64, f"input {i}: grad dtype {g.dtype} != float64"
        gn = g.numpy()
        np.testing.assert_allclose(
            gn, e, rtol=rtol, atol=atol, err_msg=f"gradient of input {i} (shape {a.shape})"
        )
        out.append(gn)
    return out


# --------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------


def conv2d_reference(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """PyTorch's conv2d (cross-correlation) as a direct sum in float64 numpy."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph : ph + h, pw : pw + wd] = x
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * sh : i * sh + dh * (kh - 1) + 1 : dh,
                    j * sw : j * sw + dw * (kw - 1) + 1 : dw,
                ]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out
