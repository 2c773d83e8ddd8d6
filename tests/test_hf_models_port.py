"""Code ported from Hugging Face ``transformers`` modeling files, checked against PyTorch:
the calls those models make with the arguments they pass, including the mistakes a port
makes (a raw 0/1 padding mask handed to ``scaled_dot_product_attention``)."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _qkv(lib, dtype="float64"):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.standard_normal((2, 4, 5, 8)).astype(dtype)) for _ in range(3)]


def _sdpa(lib, *args, **kwargs):
    return lib.nn.functional.scaled_dot_product_attention(*args, **kwargs)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float16"])
def test_sdpa_refuses_a_mask_that_is_not_bool_or_float(dtype):
    # Llama's attention_mask is int64 0/1; added to the scores it would only shift them by 1
    mask = np.ones((2, 1, 5, 5), dtype=dtype)
    with pytest.raises(RuntimeError):
        _sdpa(torch, *_qkv(torch), attn_mask=torch.tensor(mask))
    with pytest.raises(TypeError, match=f"attn_mask.*{dtype}"):
        _sdpa(fg, *_qkv(fg), attn_mask=fg.tensor(mask))
    # a float32 mask goes with any query, as in PyTorch
    f32 = np.zeros((5, 5), dtype="float32")
    for lib in (torch, fg):
        assert _sdpa(lib, *_qkv(lib), attn_mask=lib.tensor(f32)).dtype == lib.float64


def test_sdpa_refuses_a_mask_that_would_grow_the_output():
    mask = np.ones((3, 1, 1, 5, 5), dtype=bool)
    with pytest.raises(RuntimeError):
        _sdpa(torch, *_qkv(torch), attn_mask=torch.tensor(mask))
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[3, 1, 1, 5, 5\]"):
        _sdpa(fg, *_qkv(fg), attn_mask=fg.tensor(mask))
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[5, 7\]"):
        _sdpa(fg, *_qkv(fg), attn_mask=fg.tensor(np.ones((5, 7), dtype=bool)))


def test_sdpa_mask_with_is_causal_raises_runtime_error():
    mask = np.zeros((5, 5))
    with pytest.raises(RuntimeError):
        _sdpa(torch, *_qkv(torch), attn_mask=torch.tensor(mask), is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask or is_causal"):
        _sdpa(fg, *_qkv(fg), attn_mask=fg.tensor(mask), is_causal=True)


@pytest.mark.parametrize("p", [-0.5, 1.5])
def test_sdpa_dropout_p_out_of_range_raises(p):
    with pytest.raises(RuntimeError):
        _sdpa(torch, *_qkv(torch), dropout_p=p)
    with pytest.raises(RuntimeError, match=f"dropout_p.*{p}"):
        _sdpa(fg, *_qkv(fg), dropout_p=p)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int16", "int32", "uint8"])
@pytest.mark.parametrize("op", ["mul_", "add_"])
def test_inplace_update_of_narrow_dtype_with_bool_mask(dtype, op):
    # Llama's causal mask in half precision: causal_mask *= arange(n) > positions
    out = []
    for lib in (torch, fg):
        m = lib.triu(lib.full((4, 4), 3, dtype=getattr(lib, dtype)), diagonal=1)
        keep = lib.arange(4) > lib.tensor([[0], [2], [1], [3]])
        getattr(m, op)(keep)
        assert m.dtype == getattr(lib, dtype)
        out.append(np.asarray(m.float().numpy()))
    np.testing.assert_array_equal(out[1], out[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_causal_mask_in_place_matches_torch(dtype):
    out = []
    for lib in (torch, fg):
        dt = getattr(lib, dtype)
        mask = lib.full((5, 5), lib.finfo(dt).min, dtype=dt)
        mask = lib.triu(mask, diagonal=1)
        mask *= lib.arange(5) > lib.arange(5).reshape(-1, 1)
        mask += lib.tensor([[1, 0, 1, 1, 0]], dtype=lib.int64)
        out.append(np.asarray(mask.float().numpy()))
    np.testing.assert_array_equal(out[1], out[0])


def test_traced_gather_and_scatter_add_follow_negative_indices_of_each_call():
    @fg.trace
    def step(x, i):
        return fg.gather(x, 1, i), fg.zeros(2, 4).scatter_add(1, i, fg.ones(2, 3))

    x = np.arange(8.0).reshape(2, 4)
    for idx in ([[-1, 0, 2], [1, -4, -4]], [[0, 1, 2], [3, 3, 0]], [[-2, -2, -1], [0, 0, 0]]):
        got = step(fg.tensor(x), fg.tensor(idx))
        want = (
            torch.gather(torch.tensor(x), 1, torch.tensor(idx) % 4),
            torch.zeros(2, 4).scatter_add(1, torch.tensor(idx) % 4, torch.ones(2, 3)),
        )
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a.numpy()), b.numpy())


def _top_p(lib, scores, top_p=0.8):
    # transformers' TopPLogitsWarper
    sorted_logits, sorted_indices = lib.sort(scores, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -1:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(
        1, sorted_indices, sorted_indices_to_remove
    )
    return scores.masked_fill(indices_to_remove, -float("inf"))


def test_top_p_filter_runs_under_trace_and_matches_torch():
    step = fg.trace(lambda s: _top_p(fg, s))
    rng = np.random.default_rng(0)
    for _ in range(3):
        s = rng.standard_normal((3, 11)) * 2
        want = _top_p(torch, torch.tensor(s)).numpy()
        np.testing.assert_array_equal(np.asarray(step(fg.tensor(s)).numpy()), want)
        np.testing.assert_array_equal(np.asarray(_top_p(fg, fg.tensor(s)).numpy()), want)


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_traced_scatter_takes_the_last_write_of_a_repeated_target_as_eager(dtype):
    @fg.trace
    def step(x, i, s):
        return x.scatter(1, i, s), x.scatter(0, i[:, :2], 7)

    rng = np.random.default_rng(1)
    for _ in range(4):
        x = rng.standard_normal((3, 5)).astype(dtype)
        s = rng.standard_normal((3, 4)).astype(dtype)
        idx = rng.integers(-3, 3, (3, 4))
        got = step(fg.tensor(x), fg.tensor(idx), fg.tensor(s))
        want = (
            fg.tensor(x).scatter(1, fg.tensor(idx), fg.tensor(s)),
            fg.tensor(x).scatter(0, fg.tensor(idx[:, :2]), 7),
        )
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))
        # PyTorch (no negative indices there) writes the last repeat on the CPU too
        t = torch.tensor(x).scatter(1, torch.tensor(idx % 5), torch.tensor(s))
        e = fg.tensor(x).scatter(1, fg.tensor(idx % 5), fg.tensor(s))
        np.testing.assert_array_equal(np.asarray(e.numpy()), t.numpy())


def test_traced_scatter_gradients_match_eager():
    x0 = np.random.default_rng(2).standard_normal((3, 5))
    s0 = np.random.default_rng(3).standard_normal((3, 4))
    idx = fg.tensor([[0, 1, 0, 4], [2, 2, 2, 2], [4, 3, 1, 0]])
    w = fg.tensor(np.arange(15.0).reshape(3, 5))

    def grads(x, s):
        return fg.autograd.grad((x.scatter(1, idx, s) * w).sum(), [x, s])

    traced = fg.trace(grads)
    for _ in range(2):
        a = traced(fg.tensor(x0, requires_grad=True), fg.tensor(s0, requires_grad=True))
        b = grads(fg.tensor(x0, requires_grad=True), fg.tensor(s0, requires_grad=True))
        for p, q in zip(a, b):
            np.testing.assert_allclose(np.asarray(p.numpy()), np.asarray(q.numpy()))


@pytest.mark.parametrize(
    ("probs", "n", "replacement"),
    [([[1.0, 2.0]], 3, False), ([1.0, 2.0], 0, True), ([1.0, 2.0], -1, False), ([[]], 1, False)],
)
def test_multinomial_bad_sample_counts_raise_runtime_error(probs, n, replacement):
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor(probs), n, replacement)
    with pytest.raises(RuntimeError, match="multinomial"):
        fg.multinomial(fg.tensor(probs), n, replacement)
