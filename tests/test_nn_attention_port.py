"""PyTorch's attention, transformer and pruning tests, ported: ``nn.utils.prune`` (masking a
parameter through ``<name>_orig`` / ``<name>_mask`` and a forward pre-hook),
``F.multi_head_attention_forward``'s ``static_k`` / ``static_v``, ``MultiheadAttention``'s
shape errors (``AssertionError`` as PyTorch) and ``Transformer``'s input checks, each run
against torch where torch is installed."""

from __future__ import annotations

import pickle
from typing import Any
from unittest import mock

import ferrograd as fg
import numpy as np
import pytest

LIBS = ["fg", "torch"]


def _lib(name: str) -> Any:
    if name == "torch":
        torch = pytest.importorskip("torch")
        pytest.importorskip("torch.nn.utils.prune")  # a submodule torch does not import

        return torch
    return fg


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy()


# ----------------------------------------------------------------------------- pruning


def _by_hand_pruning(lib: Any) -> dict:
    """Torch's by-hand pruning cases (test_pruning.py), results as numpy."""
    prune, nn = lib.nn.utils.prune, lib.nn
    out: dict = {}
    m = nn.Linear(4, 2)
    m.weight = nn.Parameter(lib.tensor([[1, 2, 3, 4], [-4, -3, -2, -1]], dtype=lib.float32))
    prune.l1_unstructured(m, "weight", amount=2)
    out["l1_once"] = _np(m.weight).copy()
    prune.l1_unstructured(m, "weight", amount=2)
    out["l1_twice"] = _np(m.weight).copy()
    hook = next(iter(m._forward_pre_hooks.values()))
    out["hook"] = (type(hook).__name__, len(hook), hook._tensor_name)
    out["names"] = (
        [n for n, _ in m.named_parameters()],
        [n for n, _ in m.named_buffers()],
        list(m.state_dict()),
    )

    m = nn.Linear(4, 2)
    m.weight = nn.Parameter(lib.tensor([[1, 2, 3, 4], [-4, -3, -2, -1]], dtype=lib.float32))
    scores = lib.tensor([[4, 2, 1, 3], [-3, -1, -2, -4]], dtype=lib.float32)
    prune.l1_unstructured(m, "weight", amount=2, importance_scores=scores)
    prune.l1_unstructured(m, "weight", amount=2, importance_scores=scores)
    out["l1_scores"] = _np(m.weight).copy()

    t = lib.tensor([[1, 2, 3, 4], [5, 6, 7, 8]]).to(dtype=lib.float32)
    default = lib.tensor([[1, 1, 1, 0], [1, 1, 0, 1]])
    c = prune.PruningContainer()
    c._tensor_name = "test"
    for method in (
        prune.L1Unstructured(amount=2),
        prune.LnStructured(amount=1, n=2, dim=0),
        prune.LnStructured(amount=1, n=2, dim=1),
    ):
        method._tensor_name = "test"
        c.add_pruning_method(method)
        out[f"container{len(c)}"] = _np(c.compute_mask(t, default))
    p = prune.L1Unstructured(amount=2)
    out["prune"] = _np(p.prune(t, default))
    other = lib.tensor([[1, 2, 3, 4], [1.5, 1.6, 1.7, 1.8]])
    out["prune_scores"] = _np(p.prune(t, default, importance_scores=other))

    m = nn.Conv2d(3, 1, 2)
    m.weight.data = lib.tensor(
        [[[[1.0, 2.0], [1.0, 2.5]], [[0.5, 1.0], [0.1, 0.1]], [[-3.0, -5.0], [0.1, -1.0]]]]
    )
    prune.ln_structured(m, "weight", amount=1, n=2, dim=1)
    out["ln_dim1"] = _np(m.weight_mask).copy()
    prune.ln_structured(m, "weight", amount=1, n=1, dim=-1)
    out["ln_dim-1"] = _np(m.weight_mask).copy()
    prune.ln_structured(m, "weight", amount=1, n=float("inf"), dim=2)
    out["ln_inf"] = _np(m.weight_mask).copy()

    m, n = nn.Linear(4, 2), nn.Linear(3, 1)
    m.weight = nn.Parameter(lib.tensor([[1, 2, 3, 4], [-4, -3, -2, -1]], dtype=lib.float32))
    n.weight = nn.Parameter(lib.tensor([[0, 0.1, -2]], dtype=lib.float32))
    prune.global_unstructured(
        ((m, "weight"), (n, "weight")), pruning_method=prune.L1Unstructured, amount=4
    )
    out["global"] = (_np(m.weight).copy(), _np(n.weight).copy())

    mask = prune.CustomFromMask(mask=lib.tensor([[0, 1, 1, 0], [0, 0, 1, 1]])).compute_mask(
        lib.rand(2, 4), lib.tensor([[0, 0, 0, 0], [1, 1, 1, 1]])
    )
    out["custom"] = _np(mask)
    out["nparams"] = [
        prune._compute_nparams_toprune(a, s)
        for a, s in ((0, 15), (10, 15), (1, 15), (1.0, 15), (0.4, 17))
    ]
    return out


def test_prune_by_hand_matches_torch() -> None:
    """The masks, pruned weights, containers and names agree with torch's."""
    torch = _lib("torch")
    ours, theirs = _by_hand_pruning(fg), _by_hand_pruning(torch)
    assert ours.keys() == theirs.keys()
    for key, want in theirs.items():
        got = ours[key]
        if isinstance(want, tuple) and isinstance(want[0], np.ndarray):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=key)
        elif isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            assert got == want, key


def test_pruned_linear_trains_as_torch() -> None:
    """A pruned float64 layer: forward, the gradient of ``weight_orig`` (zero where
    masked), SGD steps and ``remove`` agree with torch."""
    torch = _lib("torch")
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 5)), rng.standard_normal(3)
    x = rng.standard_normal((4, 5))
    results = []
    for lib in (fg, torch):
        m = lib.nn.Linear(5, 3).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        lib.nn.utils.prune.l1_unstructured(m, "weight", amount=0.4)
        lib.nn.utils.prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
        grads = []
        for _ in range(3):
            opt.zero_grad()
            (m(lib.tensor(x)) ** 2).sum().backward()
            grads.append(_np(m.weight_orig.grad).copy())
            opt.step()
        out = _np(m(lib.tensor(x)))
        lib.nn.utils.prune.remove(m, "weight")
        results.append((grads, out, _np(m.weight), type(m.weight).__name__))
    (g1, o1, w1, t1), (g2, o2, w2, t2) = results
    for a, c in zip(g1, g2):
        np.testing.assert_allclose(a, c, rtol=1e-8)
    np.testing.assert_allclose(o1, o2, rtol=1e-8)
    np.testing.assert_allclose(w1, w2, rtol=1e-8)
    assert t1 == t2 == "Parameter"


@pytest.mark.parametrize("lib_name", LIBS)
def test_prune_reparametrization(lib_name: str) -> None:
    """``weight_orig`` is the same Parameter object, the mask a buffer, ``weight`` their
    product; ``remove`` restores the Parameter (same object) with the masked values."""
    lib = _lib(lib_name)
    prune = lib.nn.utils.prune
    m = lib.nn.Linear(5, 2, bias=False)
    param = next(iter(m.parameters()))
    prune.random_unstructured(m, name="weight", amount=0.5)
    assert next(iter(m.parameters())) is param
    assert m.weight_orig is param
    assert "weight" not in dict(m.named_parameters())
    assert "weight_mask" in dict(m.named_buffers())
    assert int((m.weight_mask == 0).sum()) == 5
    np.testing.assert_array_equal(_np(m.weight), _np(param) * _np(m.weight_mask))
    assert prune.is_pruned(lib.nn.Sequential(m))
    pruned = _np(m.weight).copy()
    prune.remove(m, "weight")
    assert m.weight is param
    np.testing.assert_array_equal(_np(m.weight), pruned)
    assert list(dict(m.named_parameters())) == ["weight"]
    assert not prune.is_pruned(m)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(m, "weight")


@pytest.mark.parametrize("lib_name", LIBS)
def test_prune_mask_of_ones_keeps_forward_and_backward(lib_name: str) -> None:
    """``identity`` and a mocked all-ones mask leave outputs and gradients unchanged."""
    lib = _lib(lib_name)
    prune = lib.nn.utils.prune
    x = lib.ones(1, 5)
    for how in ("identity", "mock"):
        m = lib.nn.Linear(5, 2)
        before = m(x)
        before.sum().backward()
        gw = _np(m.weight.grad).copy()
        m.zero_grad()
        if how == "identity":
            prune.identity(m, "weight")
        else:
            target = f"{lib.__name__}.nn.utils.prune.RandomUnstructured.compute_mask"
            with mock.patch(target) as compute_mask:
                compute_mask.return_value = lib.ones_like(m.weight)
                prune.random_unstructured(m, name="weight", amount=0.9)
        after = m(x)
        np.testing.assert_array_equal(_np(after), _np(before))
        after.sum().backward()
        np.testing.assert_array_equal(_np(m.weight_orig.grad), gw)


@pytest.mark.parametrize("lib_name", LIBS)
def test_prune_failure_rolls_back(lib_name: str) -> None:
    """A mask computation that raises leaves the module unpruned."""
    lib = _lib(lib_name)
    for m in (lib.nn.Linear(5, 7), lib.nn.Conv3d(2, 2, 2)):
        for name in ("weight", "bias"):
            target = f"{lib.__name__}.nn.utils.prune.L1Unstructured.compute_mask"
            with mock.patch(target) as compute_mask:
                compute_mask.side_effect = Exception("boom")
                with pytest.raises(Exception, match="boom"):
                    lib.nn.utils.prune.l1_unstructured(m, name=name, amount=0.9)
            assert name in dict(m.named_parameters())
            assert name + "_orig" not in dict(m.named_parameters())
            assert name + "_mask" not in dict(m.named_buffers())
            assert not lib.nn.utils.prune.is_pruned(m)


@pytest.mark.parametrize("lib_name", LIBS)
def test_prune_pickle_rnn_and_counts(lib_name: str) -> None:
    """A pruned module pickles; a pruned LSTM weight drops out of the Parameters in
    ``_flat_weights`` and comes back on ``remove``; amounts are validated as torch."""
    lib = _lib(lib_name)
    prune = lib.nn.utils.prune
    m = lib.nn.Conv3d(2, 2, 2)
    prune.random_unstructured(m, "bias", amount=0.5)
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(_np(m2.bias), _np(m.bias))
    assert prune.is_pruned(m2)

    lstm = lib.nn.LSTM(8, 8)
    prune.l1_unstructured(lstm, "weight_ih_l0", 0.5)
    assert sum(isinstance(p, lib.nn.Parameter) for p in lstm._flat_weights) == 3
    lstm(lib.ones(3, 2, 8))[0].sum().backward()
    assert lstm.weight_ih_l0_orig.grad is not None
    prune.remove(lstm, "weight_ih_l0")
    assert sum(isinstance(p, lib.nn.Parameter) for p in lstm._flat_weights) == 4

    with pytest.raises(TypeError):
        prune._validate_pruning_amount_init(amount="a string")
    for bad in (1.1, 20.0, -10):
        with pytest.raises(ValueError):
            prune._validate_pruning_amount_init(amount=bad)
    with pytest.raises(ValueError):
        prune._validate_pruning_amount(amount=20, tensor_size=19)
    mask = prune.RandomStructured(amount=0.6, dim=2).compute_mask(
        lib.ones(5, 4, 2), default_mask=lib.ones(5, 4, 2)
    )
    assert sorted(_np((mask == 0).sum(axis=(0, 1))).tolist()) == [0, 20]
    t = 2 * lib.randint(low=-1, high=2, size=(10, 7))
    mask = prune.L1Unstructured(amount=0.2).compute_mask(t, default_mask=lib.ones_like(t))
    assert int((mask == 0).sum()) == 14
    c = prune.PruningContainer()
    c._tensor_name = "test"
    q = prune.L1Unstructured(amount=2)
    q._tensor_name = "other"
    with pytest.raises(ValueError):
        c.add_pruning_method(q)
    with pytest.raises(TypeError):
        c.add_pruning_method(10)


@pytest.mark.parametrize("lib_name", LIBS)
def test_prune_shape_mismatches_are_assertion_errors(lib_name: str) -> None:
    """Importance scores or a custom mask of the wrong shape raise ``AssertionError`` as
    PyTorch's, and leave the module unpruned."""
    lib = _lib(lib_name)
    prune = lib.nn.utils.prune
    m = lib.nn.Linear(3, 2)
    with pytest.raises(AssertionError):
        prune.l1_unstructured(m, "weight", amount=1, importance_scores=lib.ones(2, 2))
    assert not prune.is_pruned(m)
    with pytest.raises(AssertionError):
        prune.custom_from_mask(m, "weight", mask=lib.ones(3, 2))
    assert "weight" in dict(m.named_parameters())
    with pytest.raises(AssertionError):
        prune.L1Unstructured(amount=1).prune(lib.ones(2, 3), importance_scores=lib.ones(3))


# ------------------------------------------------------------------ multi-head attention


@pytest.mark.parametrize("zero_attn", [False, True])
@pytest.mark.parametrize("use_kpm", [False, True])
def test_static_kv_matches_torch(zero_attn: bool, use_kpm: bool) -> None:
    """``F.multi_head_attention_forward`` with ``static_k`` / ``static_v`` (already
    projected, per head): outputs, weights and float64 gradients as torch's."""
    torch = _lib("torch")
    rng = np.random.default_rng(5)
    e, h, tgt, src, n = 8, 2, 3, 5, 2
    arrays = [
        rng.standard_normal((tgt, n, e)),
        rng.standard_normal((4, n, e)),
        rng.standard_normal((3 * e, e)) * 0.3,
        rng.standard_normal(3 * e) * 0.1,
        rng.standard_normal((e, e)) * 0.3,
        rng.standard_normal(e) * 0.1,
        rng.standard_normal((n * h, src, e // h)),
        rng.standard_normal((n * h, src, e // h)),
    ]
    kpm = np.zeros((n, src), bool)
    kpm[1, -1] = True
    results = []
    for lib in (fg, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out, w = lib.nn.functional.multi_head_attention_forward(
            *ts[:2], ts[1], e, h, ts[2], ts[3], None, None, zero_attn, 0.0, ts[4], ts[5],
            key_padding_mask=lib.tensor(kpm) if use_kpm else None,
            static_k=ts[6], static_v=ts[7],
        )  # fmt: skip
        (out.sum() + (w * w).sum()).backward()
        results.append([_np(out), _np(w)] + [None if t.grad is None else _np(t.grad) for t in ts])
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


def test_static_kv_with_bias_kv_is_refused() -> None:
    f = fg.nn.functional.multi_head_attention_forward
    x = fg.randn(3, 2, 4)
    with pytest.raises(AssertionError, match="bias cannot be added to static key"):
        f(
            x, x, x, 4, 2, fg.randn(12, 4), fg.randn(12), fg.randn(1, 1, 4),
            fg.randn(1, 1, 4), False, 0.0, fg.randn(4, 4), fg.randn(4),
            static_k=fg.randn(4, 3, 2), static_v=fg.randn(4, 3, 2),
        )  # fmt: skip


@pytest.mark.parametrize("lib_name", LIBS)
def test_mha_invalid_shapes_raise_assertion_error(lib_name: str) -> None:
    """Mismatched ranks of query / key / value and masks of the wrong rank or shape raise
    ``AssertionError`` (PyTorch's type), naming the argument."""
    lib = _lib(lib_name)
    mha = lib.nn.MultiheadAttention(4, 4)
    q3, q2 = lib.randn(4, 4, 4), lib.randn(4, 4)
    flags = lib.tensor([False, False, True, True])
    cases = [
        (lambda: mha(q3, lib.randn(4, 4), q3), "key"),
        (lambda: mha(q3, q3, lib.randn(4, 4)), "value"),
        (lambda: mha(q3, q3, q3, key_padding_mask=flags), "key_padding_mask"),
        (lambda: mha(q3, q3, q3, attn_mask=flags), "attn_mask"),
        (lambda: mha(q2, lib.randn(4, 4, 4), q2), "key"),
        (lambda: mha(q2, q2, q2, key_padding_mask=lib.zeros(1, 8, dtype=lib.bool)), "key_pad"),
        (lambda: mha(q2, q2, q2, attn_mask=lib.zeros(5, 4, 4, dtype=lib.bool)), "attn_mask"),
        (lambda: mha(lib.randn(4), lib.randn(4), lib.randn(4)), "query"),
    ]
    for call, word in cases:
        with pytest.raises(AssertionError, match=word):
            call()


@pytest.mark.parametrize("lib_name", LIBS)
def test_transformer_rejects_mismatched_src_tgt(lib_name: str) -> None:
    """``Transformer`` names the mismatch of src's and tgt's batch or feature sizes."""
    lib = _lib(lib_name)
    for batch_first in (False, True):
        t = lib.nn.Transformer(8, 2, 1, 1, 16, batch_first=batch_first)
        src = lib.randn(5, 3, 8)
        tgt = lib.randn(4, 2, 8) if batch_first else lib.randn(4, 4, 8)
        with pytest.raises(RuntimeError, match="batch number of src and tgt"):
            t(src, tgt)
        with pytest.raises(RuntimeError, match="feature number of src and tgt"):
            t(src, lib.randn(5, 3, 9))


@pytest.mark.parametrize("lib_name", LIBS)
def test_unknown_activation_is_runtime_error(lib_name: str) -> None:
    lib = _lib(lib_name)
    with pytest.raises(RuntimeError, match="activation should be"):
        lib.nn.TransformerEncoderLayer(8, 2, activation="foo")


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("dtype", ["uint8", "int64"])
def test_integer_padding_mask_is_assertion_error(lib_name: str, dtype: str) -> None:
    """An integer ``src_key_padding_mask`` is refused with ``AssertionError`` (PyTorch's
    type) in training and evaluation."""
    lib = _lib(lib_name)
    enc = lib.nn.TransformerEncoder(
        lib.nn.TransformerEncoderLayer(2, 2, 4, 0.0, batch_first=True),
        2,
        enable_nested_tensor=False,
    )
    mask = lib.tensor([[1, 1, 0, 0]]).to(getattr(lib, dtype))
    for training in (True, False):
        enc.train(training)
        with pytest.raises(AssertionError, match="only bool and floating types"):
            enc(lib.randn(1, 4, 2), src_key_padding_mask=mask)


# ---------------------------------------------------------------------- packed sequences


@pytest.mark.parametrize("lib_name", LIBS)
def test_packed_sequence_casts_and_to(lib_name: str) -> None:
    """Every cast PyTorch's ``PackedSequence`` has gives the padded dtype it names;
    ``to`` / ``cpu`` with nothing to change return the same object."""
    lib = _lib(lib_name)
    rnn = lib.nn.utils.rnn
    padded = rnn.pad_sequence([lib.tensor([1, 2, 3, 4]), lib.tensor([5, 6, 7]), lib.tensor([8])])
    casts = {
        "double": "float64",
        "float": "float32",
        "long": "int64",
        "int": "int32",
        "short": "int16",
        "char": "int8",
        "byte": "uint8",
    }
    for enforce_sorted in (True, False):
        packed = rnn.pack_padded_sequence(padded, [4, 3, 1], enforce_sorted=enforce_sorted)
        for cast, want in casts.items():
            unpacked, _ = rnn.pad_packed_sequence(getattr(packed, cast)())
            assert str(unpacked.dtype).replace("torch.", "") == want
            np.testing.assert_array_equal(_np(unpacked).astype(np.int64), _np(padded))
        packed = packed.int()
        dev = str(packed.data.device)  # (the CPU, or the device the suite runs on)
        assert packed.to(dev) is packed
        if dev == "cpu":
            assert packed.cpu() is packed
        assert packed.to(dev, dtype=lib.int32) is packed
        assert packed.to(lib.int64) is not packed
        assert not packed.is_pinned()


@pytest.mark.parametrize("lib_name", LIBS)
def test_packing_errors_are_runtime_errors(lib_name: str) -> None:
    """Bad arguments to ``pad_sequence`` / ``pack_padded_sequence`` raise ``RuntimeError``
    as PyTorch; a tensor of sequences pads as the list of its rows."""
    lib = _lib(lib_name)
    rnn = lib.nn.utils.rnn
    with pytest.raises(RuntimeError, match="Expected iterable for input sequences"):
        rnn.pad_sequence(5)
    with pytest.raises(RuntimeError):
        rnn.pad_sequence([lib.tensor([4, 5])], padding_side="middle")
    padded = rnn.pad_sequence([lib.tensor([1, 2, 3]), lib.tensor([4, 5]), lib.tensor([6])])
    with pytest.raises(RuntimeError):
        rnn.pack_padded_sequence(padded, [3, 2, 0])
    with pytest.raises(RuntimeError, match="You can pass `enforce_sorted=False`"):
        rnn.pack_padded_sequence(padded, [2, 3, 1], enforce_sorted=True)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn.pack_sequence([lib.tensor([4, 5]), lib.tensor([1, 2, 3])], enforce_sorted=True)
    got = rnn.pad_sequence(lib.tensor([[[7, 6]], [[-7, -1]]]))
    want = rnn.pad_sequence((lib.tensor([[7, 6]]), lib.tensor([[-7, -1]])))
    assert tuple(got.shape) == (1, 2, 2)
    np.testing.assert_array_equal(_np(got), _np(want))


# ------------------------------------------------------------ scaled_dot_product_attention


@pytest.mark.parametrize(("lq", "lk"), [(3, 5), (5, 3), (4, 4)])
@pytest.mark.parametrize("variant", ["causal_upper_left", "causal_lower_right"])
def test_causal_bias_matches_torch(lq: int, lk: int, variant: str) -> None:
    """``nn.attention.bias``'s causal masks as ``attn_mask``: the dense mask, the output
    and float64 gradients as torch's, rows that see no key included."""
    torch = _lib("torch")
    import importlib

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 2, n, 8)) for n in (lq, lk, lk)]
    results = []
    for lib in (fg, torch):
        bias_mod = importlib.import_module(lib.__name__ + ".nn.attention.bias")
        with pytest.warns(UserWarning) if variant[-5:] == "right" and lq > lk else _nowarn():
            bias = getattr(bias_mod, variant)(lq, lk)
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = lib.nn.functional.scaled_dot_product_attention(*ts, attn_mask=bias)
        (out * out).sum().backward()
        results.append([_np(bias._materialize()), _np(out)] + [_np(t.grad) for t in ts])
        with pytest.raises(ValueError, match="CausalBias"):
            lib.nn.functional.scaled_dot_product_attention(*ts, attn_mask=bias, is_causal=True)
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


def _nowarn() -> Any:
    import contextlib

    return contextlib.nullcontext()


# -------------------------------------------------------------------------- transformers


@pytest.mark.parametrize("lib_name", LIBS)
def test_stacks_call_layers_by_keyword(lib_name: str) -> None:
    """``TransformerEncoder`` / ``TransformerDecoder`` (and ``Transformer``) pass the masks
    to their layers by keyword, so a replacement layer that orders its arguments otherwise
    gets each mask under its own name."""
    lib = _lib(lib_name)
    x = lib.tensor(np.random.default_rng(0).standard_normal((1, 3, 2)).astype(np.float32))
    causal = lib.tensor(np.triu(np.ones((3, 3), bool), 1))
    pad = lib.tensor([[False, False, True]])

    class Encoder(lib.nn.Module):
        def forward(self, src, src_key_padding_mask=None, is_causal=None, src_mask=None):
            self.got = (src_mask, src_key_padding_mask)
            return src

    class Decoder(lib.nn.Module):
        self_attn = lib.nn.MultiheadAttention(2, 1, batch_first=True)  # read by torch's stack

        def forward(self, tgt, memory, memory_key_padding_mask=None, tgt_mask=None, **kw):
            self.got = (tgt_mask, memory_key_padding_mask)
            return tgt

    model = lib.nn.Transformer(2, 1, 2, 1, 4, 0.0, batch_first=True)
    model.encoder.layers[1] = Encoder()
    model.decoder.layers[0] = Decoder()
    model(x, x, src_mask=causal, src_key_padding_mask=pad, tgt_mask=causal)
    enc_mask, enc_pad = model.encoder.layers[1].got
    assert tuple(enc_mask.shape) == (3, 3)
    assert tuple(enc_pad.shape) == (1, 3)
    dec_mask, dec_pad = model.decoder.layers[0].got
    assert tuple(dec_mask.shape) == (3, 3)
    assert dec_pad is None


@pytest.mark.parametrize("lib_name", LIBS)
def test_sdpa_mask_with_is_causal_message(lib_name: str) -> None:
    """Both an explicit mask and ``is_causal`` is a ``RuntimeError`` worded as PyTorch's."""
    lib = _lib(lib_name)
    q = lib.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal"):
        lib.nn.functional.scaled_dot_product_attention(
            q, q, q, attn_mask=lib.ones(3, 3, dtype=lib.bool), is_causal=True
        )


@pytest.mark.parametrize("lib_name", LIBS)
def test_multihead_attention_is_causal_hint_needs_the_mask(lib_name: str) -> None:
    """``is_causal`` is only a hint that ``attn_mask`` is causal: without the mask it is a
    ``RuntimeError`` in the module and in the encoder layer built on it, as in PyTorch."""
    lib = _lib(lib_name)
    x = lib.randn(1, 3, 4)
    mha = lib.nn.MultiheadAttention(4, 2, batch_first=True)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)
    layer = lib.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, batch_first=True)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        layer(x, is_causal=True)
    mask = lib.nn.Transformer.generate_square_subsequent_mask(3)
    out, _ = mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)
    assert tuple(out.shape) == (1, 3, 4)
