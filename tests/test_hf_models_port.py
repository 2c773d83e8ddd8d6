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
