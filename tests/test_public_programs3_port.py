"""Public PyTorch programs (karpathy/nanoGPT, lucidrains' vit-pytorch, denoising-diffusion-pytorch
and mlp-mixer-pytorch, facebookresearch's ConvNeXt) ported by renaming ``torch`` to
``ferrograd``: compact float64 versions of their models and training steps, run on both
libraries from the same weights (outputs, losses, every gradient, the parameters after three
optimizer steps, train and eval, eager and under ``fg.trace``), and the ferrograd bugs the
ports ran into. Random draws the programs make (multinomial sampling, diffusion noise and
times, DropPath masks) are passed in fixed so both libraries see the same numbers."""

from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable

import ferrograd as fg
import numpy as np
import pytest
from test_public_programs_port import _close, _copy_weights, _np, _same_state

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")


@pytest.fixture(autouse=True)
def _host_default_device():
    prev = fg.get_default_device()
    fg.set_default_device("cpu")
    try:
        yield
    finally:
        fg.set_default_device(prev)


@pytest.fixture(autouse=True, scope="module")
def _torch_single_thread():
    # torch's reference runs of these small models: several threads only wait on each other
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _layers(lib: Any) -> Any:
    return __import__(f"einops.layers.{lib.__name__}", fromlist=["Rearrange", "Reduce"])


def _run_alike(
    build: Callable[[Any], Any],
    make_opt: Callable[[Any, Any], Any],
    step: Callable[..., Any],
    inputs: tuple[np.ndarray, ...],
    modes: tuple[str, ...] = ("train", "eval"),
    steps: int = 3,
    schedule: Callable[[Any, int], None] | None = None,
    prepare: Callable[[Any, Any], None] | None = None,
    rtol: float = 1e-8,
) -> None:
    """``build(lib)`` for torch, eager ferrograd and traced ferrograd from the same weights;
    ``steps`` of ``step(lib, model, opt, *inputs)`` -> (output, loss) agree, as do every
    gradient after the first step and the parameters after the last. ``schedule(opt, i)``
    sets the learning rate before step ``i`` (as the programs' loops do, outside the step)."""
    for mode in modes:
        torch.manual_seed(0)
        fg.manual_seed(0)
        tm = build(torch)
        fm, pm = build(fg), build(fg)
        _copy_weights(tm, fm)
        _copy_weights(tm, pm)
        for lib, m in ((torch, tm), (fg, fm), (fg, pm)):
            getattr(m, mode)()
            if prepare is not None:
                prepare(lib, m)
        topt, fopt, popt = make_opt(torch, tm), make_opt(fg, fm), make_opt(fg, pm)
        traced = fg.trace(lambda *a, m=pm, o=popt: step(fg, m, o, *a))
        for i in range(steps):
            if schedule is not None:
                for o in (topt, fopt, popt):
                    schedule(o, i)
            to, tl = step(torch, tm, topt, *(torch.tensor(v) for v in inputs))
            fo, fl = step(fg, fm, fopt, *(fg.tensor(v) for v in inputs))
            po, pl = traced(*(fg.tensor(v) for v in inputs))
            for what, a, b in (("output", to, fo), ("loss", tl, fl)):
                _close(f"{mode} step {i}: {what}", a, b, rtol=rtol)
            for what, a, b in (("output", to, po), ("loss", tl, pl)):
                _close(f"{mode} step {i}: traced {what}", a, b, rtol=rtol)
            if i == 0:
                _same_state(f"{mode} step 0", tm, fm)
        _same_state(f"{mode} after {steps} steps", tm, fm)
        _same_state(f"{mode} after {steps} traced steps", tm, pm, grads=False)


@contextmanager
def _default_double():
    # the diffusion programs run in float32 (the time embedding comes from an int64 ``t``
    # times a default-dtype ``arange``): run them with float64 as the default dtype
    prev = torch.get_default_dtype(), fg.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    fg.set_default_dtype(fg.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(prev[0])
        fg.set_default_dtype(prev[1])


# ------------------------------------------------------------- EMA updates of the programs

_EMA_UPDATES = {
    # (what ema_pytorch / timm's ModelEma / the diffusion Trainer do to a frozen copy, here
    # outside no_grad, so the writes are recorded)
    "lerp_": lambda lib, e, m: e.lerp_(m, 0.25),
    "mul_": lambda lib, e, m: e.mul_(m),
    "add_": lambda lib, e, m: e.add_(m, alpha=0.5),
    "copy_": lambda lib, e, m: e.copy_(m * 2),
    "copy_ a leaf": lambda lib, e, m: e.copy_(m, non_blocking=True),
    "_foreach_lerp_": lambda lib, e, m: lib._foreach_lerp_([e], [m], 0.25),
    "_foreach_mul_": lambda lib, e, m: lib._foreach_mul_([e], [m]),
    "_foreach_add_": lambda lib, e, m: lib._foreach_add_([e], [m], alpha=0.5),
    "_foreach_sub_": lambda lib, e, m: lib._foreach_sub_([e], [m]),
    "_foreach_div_": lambda lib, e, m: lib._foreach_div_([e], [m]),
    "_foreach_abs_": lambda lib, e, m: (e.copy_(m), lib._foreach_abs_([e])),
    "_foreach_sqrt_": lambda lib, e, m: (e.copy_(m * m), lib._foreach_sqrt_([e])),
    "_foreach_exp_": lambda lib, e, m: (e.copy_(m), lib._foreach_exp_([e])),
}


@pytest.mark.parametrize("frozen", ["parameter", "requires_grad_false", "tensor"])
@pytest.mark.parametrize("update", sorted(_EMA_UPDATES))
def test_recorded_writes_into_a_frozen_tensor_pass_gradients_as_torch(update, frozen) -> None:
    # a Parameter made with requires_grad=False (or switched off) that an in-place op writes
    # a tracked value into: PyTorch makes it a non-leaf that requires grad; ferrograd kept
    # reporting requires_grad False (the gradient still flowed). _foreach_mul_ /
    # _foreach_abs_ overwrote an input their gradient needs: backward raised InplaceError.
    # copy_ of a leaf made the tensor a second handle on that leaf (is_leaf, no grad_fn, and
    # a later in-place op on it raised); copy_ took no non_blocking. A second write into a
    # tensor whose requires_grad was switched off after being on raised as a write into a
    # leaf that requires grad
    got = {}
    for lib in (torch, fg):
        ev = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        if frozen == "parameter":
            e = lib.nn.Parameter(ev, requires_grad=False)
        elif frozen == "requires_grad_false":
            e = lib.nn.Parameter(ev).requires_grad_(False)
        else:
            e = ev
        m = lib.nn.Parameter(lib.tensor([4.0, 5.0, -6.0], dtype=lib.float64))
        assert not e.requires_grad
        _EMA_UPDATES[update](lib, e, m)
        assert e.requires_grad and not e.is_leaf and e.grad_fn is not None
        (e * e).sum().backward()
        assert e.requires_grad
        got[lib] = e, m.grad
    for a, b in zip(got[torch], got[fg], strict=True):
        _close(update, a, b, rtol=1e-14, atol=1e-14)
    for lib in (torch, fg):
        e = lib.nn.Parameter(lib.ones(3, dtype=lib.float64), requires_grad=False)
        with lib.no_grad():
            _EMA_UPDATES[update](lib, e, lib.nn.Parameter(lib.ones(3, dtype=lib.float64)))
        assert not e.requires_grad and e.is_leaf


# -------------------------------------------------------------------------------- nanoGPT


class GPTConfig:
    def __init__(self, **kw: Any) -> None:
        self.block_size, self.vocab_size, self.n_layer, self.n_head = 8, 16, 2, 2
        self.n_embd, self.dropout, self.bias = 8, 0.0, True
        self.__dict__.update(kw)


def _gpt(lib: Any, flash: bool = True, **kw: Any) -> Any:
    """nanoGPT's model.py: LayerNorm with optional bias, CausalSelfAttention through
    ``F.scaled_dot_product_attention(is_causal=True)`` or the manual path with a registered
    tril ``bias`` buffer, tied wte/lm_head, ``_init_weights`` with the scaled c_proj init,
    ``configure_optimizers``, ``crop_block_size``, ``generate``, ``estimate_mfu``."""
    nn, F = lib.nn, lib.nn.functional
    config = GPTConfig(**kw)

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(ndim))
            self.bias = nn.Parameter(lib.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
            self.flash = flash and hasattr(lib.nn.functional, "scaled_dot_product_attention")
            if not self.flash:
                bs = config.block_size
                self.register_buffer("bias", lib.tril(lib.ones(bs, bs)).view(1, 1, bs, bs))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = lib.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=None,
                    dropout_p=self.dropout if self.training else 0, is_causal=True,
                )  # fmt: skip
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(
                dict(  # noqa: C408
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.dropout),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=LayerNorm(config.n_embd, bias=config.bias),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    lib.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                lib.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    lib.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                lib.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()  # noqa: RUF059
            assert t <= self.config.block_size
            pos = lib.arange(0, t, dtype=lib.long, device=device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def crop_block_size(self, block_size):
            assert block_size <= self.config.block_size
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, "bias"):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            fused_available = "fused" in inspect.signature(lib.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            extra_args = dict(fused=True) if use_fused else dict()  # noqa: C408
            return lib.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

        def estimate_mfu(self, fwdbwd_per_iter, dt):
            N = self.get_num_params()
            cfg = self.config
            L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
            flops_per_token = 6 * N + 12 * L * H * Q * T
            flops_per_iter = flops_per_token * T * fwdbwd_per_iter
            return flops_per_iter * (1.0 / dt) / 312e12

        @lib.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, draws=None):
            # ``draws`` (max_new_tokens, b) uniform numbers replace torch.multinomial by an
            # inverse-CDF pick, so both libraries sample the same tokens; None: argmax
            for i in range(max_new_tokens):
                bs = self.config.block_size
                idx_cond = idx if idx.size(1) <= bs else idx[:, -bs:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = lib.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                if draws is None:
                    idx_next = lib.argmax(probs, dim=-1, keepdim=True)
                else:
                    below = probs.cumsum(-1) < draws[i][:, None]
                    idx_next = below.sum(-1, keepdim=True).clamp(max=probs.size(-1) - 1)
                idx = lib.cat((idx, idx_next), dim=1)
            return idx

    return GPT(config).double()


def _nanogpt_lr(it: int, warmup: int = 2, lr_decay_iters: int = 6) -> float:
    # train.py's get_lr: linear warmup, then cosine decay to min_lr
    learning_rate, min_lr = 6e-3, 6e-4
    if it < warmup:
        return learning_rate * (it + 1) / (warmup + 1)
    ratio = (it - warmup) / (lr_decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def _nanogpt_step(lib: Any, model: Any, opt: Any, X: Any, Y: Any) -> tuple[Any, Any]:
    # train.py's inner step (GradScaler disabled outside float16, grad_clip 1.0)
    scaler = lib.amp.GradScaler(enabled=False)
    opt.zero_grad(set_to_none=True)
    logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    return logits, loss


def _nanogpt_schedule(opt: Any, it: int) -> None:
    for param_group in opt.param_groups:
        param_group["lr"] = _nanogpt_lr(it)


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_nanogpt_trains_as_in_torch(flash: bool, bias: bool) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 16, (2, 8)), rng.integers(0, 16, (2, 8))
    y[0, :2] = -1  # ignore_index

    def opt(lib: Any, m: Any) -> Any:
        return m.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")

    _run_alike(
        lambda lib: _gpt(lib, flash, bias=bias),
        opt,
        _nanogpt_step,
        (x, y),
        schedule=_nanogpt_schedule,
    )


@pytest.mark.parametrize("flash", [True, False])
def test_nanogpt_with_dropout_in_eval_mode_matches_torch(flash: bool) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 16, (3, 6)), rng.integers(0, 16, (3, 6))
    _run_alike(
        lambda lib: _gpt(lib, flash, dropout=0.2),
        lambda lib, m: m.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu"),
        _nanogpt_step,
        (x, y),
        modes=("eval",),
    )


def test_nanogpt_model_bookkeeping_matches_torch() -> None:
    # tied weights count once; configure_optimizers splits by p.dim(); crop_block_size
    # replaces a Parameter and slices the registered mask buffer
    got = {}
    for lib in (torch, fg):
        lib.manual_seed(0)
        m = _gpt(lib, flash=False)
        opt = m.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
        groups = [(len(g["params"]), sum(p.numel() for p in g["params"])) for g in opt.param_groups]
        assert m.transformer.wte.weight is m.lm_head.weight
        info = [
            m.get_num_params(),
            m.get_num_params(False),
            m.estimate_mfu(4, 0.5),
            groups,
            [g["weight_decay"] for g in opt.param_groups],
            sorted(m.state_dict()),
            "fused" in opt.defaults,
        ]
        m.crop_block_size(5)
        assert isinstance(m.transformer.wpe.weight, lib.nn.Parameter)
        assert m.transformer.h[0].attn.bias.shape == (1, 1, 5, 5)
        info += [
            sorted((k, tuple(v.shape)) for k, v in m.state_dict().items()),
            sorted(n for n, _ in m.named_buffers()),
            m.get_num_params(),
        ]
        got[lib] = info
    assert got[fg] == got[torch]


@pytest.mark.parametrize("flash", [True, False])
def test_nanogpt_crop_block_size_then_train_and_generate_as_torch(flash: bool) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 16, (2, 5)), rng.integers(0, 16, (2, 5))
    prompt = rng.integers(0, 16, (2, 3))
    draws = rng.random((6, 2))
    out = {}
    torch.manual_seed(0)
    tm, fm = _gpt(torch, flash), _gpt(fg, flash)
    _copy_weights(tm, fm)
    for lib, m in ((torch, tm), (fg, fm)):
        m.crop_block_size(5)
        opt = m.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
        res = []
        for i in range(2):
            _nanogpt_schedule(opt, i)
            res += list(_nanogpt_step(lib, m, opt, lib.tensor(x), lib.tensor(y)))
        m.eval()
        p = lib.tensor(prompt)
        for kw in (
            {},
            {"top_k": 3},
            {"temperature": 0.7, "top_k": 4, "draws": lib.tensor(draws)},
            {"temperature": 1.3, "draws": lib.tensor(draws)},
        ):
            g = m.generate(p, 6, **kw)
            assert not g.requires_grad and g.dtype == lib.int64
            res.append(g)
        res.append(m(p)[0])
        out[lib] = res
    for i, (a, b) in enumerate(zip(out[torch], out[fg], strict=True)):
        _close(f"result {i}", a, b)
    _same_state("after cropping and training", tm, fm)


def test_nanogpt_resumes_a_checkpoint_saved_by_torch(tmp_path: Any) -> None:
    # train.py's checkpoint (a compiled model's '_orig_mod.' keys, AdamW state, model_args,
    # a tensor best_val_loss) written by torch.save resumes in ferrograd as in torch
    rng = np.random.default_rng(15)
    x, y = rng.integers(0, 16, (2, 8)), rng.integers(0, 16, (2, 8))
    torch.manual_seed(0)
    tm = _gpt(torch, flash=False)
    topt = tm.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    _nanogpt_step(torch, tm, topt, torch.tensor(x), torch.tensor(y))
    checkpoint = {
        "model": {"_orig_mod." + k: v for k, v in tm.state_dict().items()},
        "optimizer": topt.state_dict(),
        "model_args": {"n_layer": 2, "n_head": 2, "n_embd": 8, "block_size": 8},
        "iter_num": 1,
        "best_val_loss": torch.tensor(2.5),
    }
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    checkpoint = fg.load(tmp_path / "ckpt.pt", map_location="cpu")
    fm = _gpt(fg, flash=False, **checkpoint["model_args"])
    state_dict = checkpoint["model"]
    unwanted_prefix = "_orig_mod."
    for k in list(state_dict):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix) :]] = state_dict.pop(k)
    fm.load_state_dict(state_dict)
    assert fm.transformer.wte.weight is fm.lm_head.weight
    fopt = fm.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    fopt.load_state_dict(checkpoint["optimizer"])
    assert float(checkpoint["best_val_loss"]) == 2.5 and checkpoint["iter_num"] == 1
    for i in range(1, 3):
        for lib, m, o in ((torch, tm, topt), (fg, fm, fopt)):
            _nanogpt_schedule(o, i)
            _nanogpt_step(lib, m, o, lib.tensor(x), lib.tensor(y))
    _same_state("resumed", tm, fm)
    _close(
        "step count", topt.state_dict()["state"][0]["step"], fopt.state_dict()["state"][0]["step"]
    )


def test_nanogpt_top_k_sampling_never_draws_a_cut_token() -> None:
    # generate's own torch.multinomial on the top-k-masked probabilities (-inf logits: 0)
    fg.manual_seed(0)
    logits = fg.tensor(np.random.default_rng(3).standard_normal((4, 16)))
    v, _ = fg.topk(logits, 3)
    logits[logits < v[:, [-1]]] = -float("Inf")
    probs = fg.nn.functional.softmax(logits, dim=-1)
    allowed = (probs > 0).numpy()
    assert allowed.sum(-1).tolist() == [3, 3, 3, 3]
    for _ in range(20):
        idx = fg.multinomial(probs, num_samples=1)
        assert idx.shape == (4, 1) and idx.dtype == fg.int64
        assert allowed[np.arange(4), idx.numpy()[:, 0]].all()


# ---------------------------------------------------------------------------- vit-pytorch


def pair(t: Any) -> tuple:
    return t if isinstance(t, tuple) else (t, t)


def _vit_parts(lib: Any) -> Any:
    nn = lib.nn
    rearrange = einops.rearrange

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden_dim, dropout=0.0):
            super().__init__()
            self.net = nn.Sequential(
                nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
                nn.Linear(hidden_dim, dim), nn.Dropout(dropout),
            )  # fmt: skip

        def forward(self, x):
            return self.net(x)

    class Attention(nn.Module):
        def __init__(self, dim, heads=8, dim_head=64, dropout=0.0):
            super().__init__()
            inner_dim = dim_head * heads
            project_out = not (heads == 1 and dim_head == dim)
            self.heads, self.scale = heads, dim_head**-0.5
            self.norm = nn.LayerNorm(dim)
            self.attend = nn.Softmax(dim=-1)
            self.dropout = nn.Dropout(dropout)
            self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
            self.to_out = (
                nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(dropout))
                if project_out
                else nn.Identity()
            )

        def forward(self, x):
            x = self.norm(x)
            qkv = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)  # noqa: C417
            dots = lib.matmul(q, k.transpose(-1, -2)) * self.scale
            attn = self.dropout(self.attend(dots))
            out = rearrange(lib.matmul(attn, v), "b h n d -> b n (h d)")
            return self.to_out(out)

    class Transformer(nn.Module):
        def __init__(self, dim, depth, heads, dim_head, mlp_dim, dropout=0.0):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.layers = nn.ModuleList([])
            for _ in range(depth):
                self.layers.append(
                    nn.ModuleList(
                        [
                            Attention(dim, heads=heads, dim_head=dim_head, dropout=dropout),
                            FeedForward(dim, mlp_dim, dropout=dropout),
                        ]
                    )
                )

        def forward(self, x):
            for attn, ff in self.layers:
                x = attn(x) + x
                x = ff(x) + x
            return self.norm(x)

    return FeedForward, Attention, Transformer


def _vit(lib: Any, pool: str = "cls", dropout: float = 0.0, heads: int = 2) -> Any:
    """vit-pytorch's ViT: Rearrange patch embedding with LayerNorms, a cls token (an empty
    (0, dim) parameter under pool='mean'), learned positions, pre-norm transformer."""
    nn = lib.nn
    Rearrange = _layers(lib).Rearrange
    _, _, Transformer = _vit_parts(lib)

    class ViT(nn.Module):
        def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads,
                     mlp_dim, pool="cls", channels=3, dim_head=64, dropout=0.0,
                     emb_dropout=0.0):  # fmt: skip
            super().__init__()
            image_height, image_width = pair(image_size)
            patch_height, patch_width = pair(patch_size)
            num_patches = (image_height // patch_height) * (image_width // patch_width)
            patch_dim = channels * patch_height * patch_width
            num_cls_tokens = 1 if pool == "cls" else 0
            self.to_patch_embedding = nn.Sequential(
                Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_height, p2=patch_width),
                nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim),
            )  # fmt: skip
            self.cls_token = nn.Parameter(lib.randn(num_cls_tokens, dim))
            self.pos_embedding = nn.Parameter(lib.randn(num_patches + num_cls_tokens, dim))
            self.dropout = nn.Dropout(emb_dropout)
            self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, dropout)
            self.pool = pool
            self.to_latent = nn.Identity()
            self.mlp_head = nn.Linear(dim, num_classes) if num_classes > 0 else None

        def forward(self, img):
            batch = img.shape[0]
            x = self.to_patch_embedding(img)
            cls_tokens = einops.repeat(self.cls_token, "... d -> b ... d", b=batch)
            x = lib.cat((cls_tokens, x), dim=1)
            x = x + self.pos_embedding[: x.shape[1]]
            x = self.transformer(self.dropout(x))
            if self.mlp_head is None:
                return x
            x = x.mean(dim=1) if self.pool == "mean" else x[:, 0]
            return self.mlp_head(self.to_latent(x))

    return ViT(
        image_size=8, patch_size=4, num_classes=5, dim=8, depth=2, heads=heads, mlp_dim=16,
        pool=pool, dim_head=4, dropout=dropout, emb_dropout=dropout,
    ).double()  # fmt: skip


def posemb_sincos_2d(lib: Any, h, w, dim, temperature: int = 10000, dtype=None):
    y, x = lib.meshgrid(lib.arange(h), lib.arange(w), indexing="ij")
    omega = lib.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    pe = lib.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    return pe.type(dtype or lib.float32)


def _simple_vit(lib: Any) -> Any:
    """vit-pytorch's SimpleViT: fixed 2-d sin-cos positions (made in float32, added with
    ``x += pos.to(device, dtype=x.dtype)``), mean pooling, bias-free attention."""
    nn = lib.nn
    rearrange, Rearrange = einops.rearrange, _layers(lib).Rearrange
    FeedForward, _, _ = _vit_parts(lib)

    class Attention(nn.Module):
        def __init__(self, dim, heads=8, dim_head=64):
            super().__init__()
            inner_dim = dim_head * heads
            self.heads, self.scale = heads, dim_head**-0.5
            self.norm = nn.LayerNorm(dim)
            self.attend = nn.Softmax(dim=-1)
            self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
            self.to_out = nn.Linear(inner_dim, dim, bias=False)

        def forward(self, x):
            x = self.norm(x)
            qkv = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)  # noqa: C417
            attn = self.attend(lib.matmul(q, k.transpose(-1, -2)) * self.scale)
            return self.to_out(rearrange(lib.matmul(attn, v), "b h n d -> b n (h d)"))

    class Transformer(nn.Module):
        def __init__(self, dim, depth, heads, dim_head, mlp_dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.layers = nn.ModuleList(
                [
                    nn.ModuleList(
                        [Attention(dim, heads=heads, dim_head=dim_head), FeedForward(dim, mlp_dim)]
                    )
                    for _ in range(depth)
                ]
            )

        def forward(self, x):
            for attn, ff in self.layers:
                x = attn(x) + x
                x = ff(x) + x
            return self.norm(x)

    class SimpleViT(nn.Module):
        def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads,
                     mlp_dim, channels=3, dim_head=64):  # fmt: skip
            super().__init__()
            image_height, image_width = pair(image_size)
            patch_height, patch_width = pair(patch_size)
            patch_dim = channels * patch_height * patch_width
            self.to_patch_embedding = nn.Sequential(
                Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_height, p2=patch_width),
                nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim),
            )  # fmt: skip
            self.pos_embedding = posemb_sincos_2d(
                lib, h=image_height // patch_height, w=image_width // patch_width, dim=dim
            )
            self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim)
            self.pool = "mean"
            self.to_latent = nn.Identity()
            self.linear_head = nn.Linear(dim, num_classes)

        def forward(self, img):
            device = img.device
            x = self.to_patch_embedding(img)
            x += self.pos_embedding.to(device, dtype=x.dtype)
            x = self.transformer(x).mean(dim=1)
            return self.linear_head(self.to_latent(x))

    m = SimpleViT(
        image_size=(8, 12), patch_size=4, num_classes=5, dim=8, depth=2, heads=2, mlp_dim=16,
        dim_head=4,
    ).double()  # fmt: skip
    # the float32 table as torch makes it: float32 sin/cos may round differently in the last
    # place (test_posemb_sincos_2d_matches_torch compares the tables themselves)
    m.pos_embedding = lib.tensor(_np(posemb_sincos_2d(torch, h=2, w=3, dim=8)))
    return m


def _cait(lib: Any, dropout: float = 0.0) -> Any:
    """vit-pytorch's CaiT: LayerScale (per-depth init eps), talking-heads attention (the
    head-mixing einsums before and after the softmax), a class-attention transformer over
    the patch tokens as context, ``repeat(cls, '() n d -> b n d')``."""
    nn = lib.nn
    rearrange, Rearrange = einops.rearrange, _layers(lib).Rearrange
    einsum = lib.einsum
    FeedForward, _, _ = _vit_parts(lib)

    class LayerScale(nn.Module):
        def __init__(self, dim, fn, depth):
            super().__init__()
            init_eps = 0.1 if depth <= 18 else 1e-5 if depth <= 24 else 1e-6
            self.scale = nn.Parameter(lib.zeros(1, 1, dim).fill_(init_eps))
            self.fn = fn

        def forward(self, x, **kwargs):
            return self.fn(x, **kwargs) * self.scale

    class Attention(nn.Module):
        def __init__(self, dim, heads=8, dim_head=64, dropout=0.0):
            super().__init__()
            inner_dim = dim_head * heads
            self.heads, self.scale = heads, dim_head**-0.5
            self.norm = nn.LayerNorm(dim)
            self.to_q = nn.Linear(dim, inner_dim, bias=False)
            self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
            self.attend = nn.Softmax(dim=-1)
            self.dropout = nn.Dropout(dropout)
            self.mix_heads_pre_attn = nn.Parameter(lib.randn(heads, heads))
            self.mix_heads_post_attn = nn.Parameter(lib.randn(heads, heads))
            self.to_out = nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(dropout))

        def forward(self, x, context=None):
            b, n, _, h = *x.shape, self.heads  # noqa: F841
            x = self.norm(x)
            context = x if context is None else lib.cat((x, context), dim=1)
            qkv = (self.to_q(x), *self.to_kv(context).chunk(2, dim=-1))
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), qkv)  # noqa: C417
            dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
            dots = einsum("b h i j, h g -> b g i j", dots, self.mix_heads_pre_attn)
            attn = self.dropout(self.attend(dots))
            attn = einsum("b h i j, h g -> b g i j", attn, self.mix_heads_post_attn)
            out = einsum("b h i j, b h j d -> b h i d", attn, v)
            return self.to_out(rearrange(out, "b h n d -> b n (h d)"))

    class Transformer(nn.Module):
        def __init__(self, dim, depth, heads, dim_head, mlp_dim, dropout=0.0):
            super().__init__()
            self.layers = nn.ModuleList([])
            for ind in range(depth):
                attn = Attention(dim, heads=heads, dim_head=dim_head, dropout=dropout)
                ff = FeedForward(dim, mlp_dim, dropout=dropout)
                self.layers.append(
                    nn.ModuleList(
                        [LayerScale(dim, attn, depth=ind + 1), LayerScale(dim, ff, depth=ind + 1)]
                    )
                )

        def forward(self, x, context=None):
            for attn, ff in self.layers:
                x = attn(x, context=context) + x
                x = ff(x) + x
            return x

    class CaiT(nn.Module):
        def __init__(self, *, image_size, patch_size, num_classes, dim, depth, cls_depth,
                     heads, mlp_dim, dim_head=64, dropout=0.0, emb_dropout=0.0):  # fmt: skip
            super().__init__()
            num_patches = (image_size // patch_size) ** 2
            patch_dim = 3 * patch_size**2
            self.to_patch_embedding = nn.Sequential(
                Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
                nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim),
            )  # fmt: skip
            self.pos_embedding = nn.Parameter(lib.randn(1, num_patches, dim))
            self.cls_token = nn.Parameter(lib.randn(1, 1, dim))
            self.dropout = nn.Dropout(emb_dropout)
            self.patch_transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, dropout)
            self.cls_transformer = Transformer(dim, cls_depth, heads, dim_head, mlp_dim, dropout)
            self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

        def forward(self, img):
            x = self.to_patch_embedding(img)
            b, n, _ = x.shape
            x += self.pos_embedding[:, :n]
            x = self.patch_transformer(self.dropout(x))
            cls_tokens = einops.repeat(self.cls_token, "() n d -> b n d", b=b)
            x = self.cls_transformer(cls_tokens, context=x)
            return self.mlp_head(x[:, 0])

    return CaiT(
        image_size=8, patch_size=4, num_classes=5, dim=8, depth=2, cls_depth=1, heads=3,
        mlp_dim=16, dim_head=4, dropout=dropout, emb_dropout=dropout,
    ).double()  # fmt: skip


def _mae(lib: Any) -> Any:
    """vit-pytorch's MAE around a pool='mean' ViT (the variant whose 2-d positions MAE
    indexes as published): argsort'ed uniform draws pick the masked patches (the draws are
    passed in), advanced-index gathers, index_put of the decoder tokens into a zeros tensor,
    ``repeat(mask_token, 'd -> b n d')``, a Transformer decoder, MSE on the masked pixels."""
    nn, F = lib.nn, lib.nn.functional
    _, _, Transformer = _vit_parts(lib)

    class MAE(nn.Module):
        def __init__(self, *, encoder, decoder_dim, masking_ratio=0.75, decoder_depth=1,
                     decoder_heads=8, decoder_dim_head=64):  # fmt: skip
            super().__init__()
            self.masking_ratio = masking_ratio
            self.encoder = encoder
            num_patches, encoder_dim = encoder.pos_embedding.shape[-2:]
            self.to_patch = encoder.to_patch_embedding[0]
            self.patch_to_emb = nn.Sequential(*encoder.to_patch_embedding[1:])
            pixel_values_per_patch = encoder.to_patch_embedding[2].weight.shape[-1]
            self.decoder_dim = decoder_dim
            self.enc_to_dec = (
                nn.Linear(encoder_dim, decoder_dim) if encoder_dim != decoder_dim else nn.Identity()
            )
            self.mask_token = nn.Parameter(lib.randn(decoder_dim))
            self.decoder = Transformer(
                dim=decoder_dim, depth=decoder_depth, heads=decoder_heads,
                dim_head=decoder_dim_head, mlp_dim=decoder_dim * 4,
            )  # fmt: skip
            self.decoder_pos_emb = nn.Embedding(num_patches, decoder_dim)
            self.to_pixels = nn.Linear(decoder_dim, pixel_values_per_patch)

        def forward(self, img, rand):
            device = img.device
            patches = self.to_patch(img)
            batch, num_patches, *_ = patches.shape
            tokens = self.patch_to_emb(patches)
            tokens += self.encoder.pos_embedding.to(device, dtype=tokens.dtype)
            num_masked = int(self.masking_ratio * num_patches)
            rand_indices = rand.argsort(dim=-1)
            masked_indices, unmasked_indices = (
                rand_indices[:, :num_masked],
                rand_indices[:, num_masked:],
            )
            batch_range = lib.arange(batch, device=device)[:, None]
            tokens = tokens[batch_range, unmasked_indices]
            masked_patches = patches[batch_range, masked_indices]
            encoded_tokens = self.encoder.transformer(tokens)
            decoder_tokens = self.enc_to_dec(encoded_tokens)
            unmasked_decoder_tokens = decoder_tokens + self.decoder_pos_emb(unmasked_indices)
            mask_tokens = einops.repeat(self.mask_token, "d -> b n d", b=batch, n=num_masked)
            mask_tokens = mask_tokens + self.decoder_pos_emb(masked_indices)
            decoder_tokens = lib.zeros(batch, num_patches, self.decoder_dim, device=device)
            decoder_tokens[batch_range, unmasked_indices] = unmasked_decoder_tokens
            decoder_tokens[batch_range, masked_indices] = mask_tokens
            decoded_tokens = self.decoder(decoder_tokens)
            mask_tokens = decoded_tokens[batch_range, masked_indices]
            pred_pixel_values = self.to_pixels(mask_tokens)
            return F.mse_loss(pred_pixel_values, masked_patches)

    encoder = _vit(lib, pool="mean")
    return MAE(
        encoder=encoder, decoder_dim=6, masking_ratio=0.5, decoder_heads=2, decoder_dim_head=3
    ).double()


def test_mae_trains_as_in_torch() -> None:
    # (float64 as the default dtype: MAE scatters its tokens into a default-dtype zeros)
    rng = np.random.default_rng(13)
    img, rand = rng.standard_normal((3, 3, 8, 8)), rng.random((3, 4))

    def step(lib: Any, m: Any, opt: Any, img: Any, rand: Any) -> tuple[Any, Any]:
        loss = m(img, rand)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, loss

    with _default_double():
        _run_alike(_mae, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=3e-3), step, (img, rand))


def _classify_step(lib: Any, m: Any, opt: Any, img: Any, label: Any) -> tuple[Any, Any]:
    out = m(img)
    loss = lib.nn.functional.cross_entropy(out, label, label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return out, loss


@pytest.mark.parametrize(
    "build",
    [
        partial(_vit, pool="cls"),
        partial(_vit, pool="mean"),
        partial(_vit, pool="cls", heads=1),
        _simple_vit,
        _cait,
    ],
    ids=["vit_cls", "vit_mean", "vit_one_head", "simple_vit", "cait"],
)
def test_vit_family_trains_as_in_torch(build: Callable[[Any], Any]) -> None:
    rng = np.random.default_rng(4)
    w = 12 if build is _simple_vit else 8
    img, label = rng.standard_normal((3, 3, 8, w)), rng.integers(0, 5, 3)
    _run_alike(
        build, lambda lib, m: lib.optim.Adam(m.parameters(), lr=3e-3), _classify_step, (img, label)
    )


@pytest.mark.parametrize("build", [_vit, _cait], ids=["vit", "cait"])
def test_vit_family_with_dropout_in_eval_mode_matches_torch(build: Callable[..., Any]) -> None:
    rng = np.random.default_rng(5)
    img, label = rng.standard_normal((2, 3, 8, 8)), rng.integers(0, 5, 2)
    _run_alike(
        lambda lib: build(lib, dropout=0.3),
        lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
        _classify_step,
        (img, label),
        modes=("eval",),
    )


def test_posemb_sincos_2d_matches_torch() -> None:
    # made in float32 as published, then cast: both within a float32 rounding of the exact
    # table (torch's float32 cos(1) is 0.54030234, one unit above the nearest float32)
    y, x = np.meshgrid(np.arange(3), np.arange(5), indexing="ij")
    omega = 1.0 / 10000 ** (np.arange(3) / 2)
    y, x = y.reshape(-1, 1) * omega, x.reshape(-1, 1) * omega
    exact = np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)
    for lib in (torch, fg):
        for dtype in ("float32", "float64"):
            pe = posemb_sincos_2d(lib, 3, 5, 12, dtype=getattr(lib, dtype))
            assert pe.dtype == getattr(lib, dtype) and pe.shape == (15, 12)
            np.testing.assert_allclose(_np(pe), exact, rtol=0, atol=1.2e-7)


# -------------------------------------------------------------- denoising-diffusion-pytorch


def _ddpm_unet(lib: Any, learned: bool = False, random_ff: bool = False,
               flash: bool = False) -> Any:  # fmt: skip
    """denoising-diffusion-pytorch's Unet at dim 8, two levels: RMSNorm (``F.normalize``
    over channels), ResnetBlock with a time-embedding scale/shift, SinusoidalPosEmb or
    RandomOrLearnedSinusoidalPosEmb (a frozen Parameter when random), LinearAttention and
    Attention with memory key/values, Rearrange-based Downsample, nearest Upsample."""
    nn, F = lib.nn, lib.nn.functional
    Rearrange = _layers(lib).Rearrange
    rearrange, repeat = einops.rearrange, einops.repeat

    def Upsample(dim, dim_out=None):
        return nn.Sequential(
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.Conv2d(dim, dim_out or dim, 3, padding=1),
        )

    def Downsample(dim, dim_out=None):
        return nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (c p1 p2) h w", p1=2, p2=2),
            nn.Conv2d(dim * 4, dim_out or dim, 1),
        )

    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.scale = dim**0.5
            self.g = nn.Parameter(lib.ones(1, dim, 1, 1))

        def forward(self, x):
            return F.normalize(x, dim=1) * self.g * self.scale

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim, theta=10000):
            super().__init__()
            self.dim, self.theta = dim, theta

        def forward(self, x):
            half_dim = self.dim // 2
            emb = math.log(self.theta) / (half_dim - 1)
            emb = lib.exp(lib.arange(half_dim, device=x.device) * -emb)
            emb = x[:, None] * emb[None, :]
            return lib.cat((emb.sin(), emb.cos()), dim=-1)

    class RandomOrLearnedSinusoidalPosEmb(nn.Module):
        def __init__(self, dim, is_random=False):
            super().__init__()
            self.weights = nn.Parameter(lib.randn(dim // 2), requires_grad=not is_random)

        def forward(self, x):
            x = rearrange(x, "b -> b 1")
            freqs = x * rearrange(self.weights, "d -> 1 d") * 2 * math.pi
            fouriered = lib.cat((freqs.sin(), freqs.cos()), dim=-1)
            return lib.cat((x, fouriered), dim=-1)

    class Block(nn.Module):
        def __init__(self, dim, dim_out, dropout=0.0):
            super().__init__()
            self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
            self.norm = RMSNorm(dim_out)
            self.act = nn.SiLU()
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, scale_shift=None):
            x = self.norm(self.proj(x))
            if scale_shift is not None:
                scale, shift = scale_shift
                x = x * (scale + 1) + shift
            return self.dropout(self.act(x))

    class ResnetBlock(nn.Module):
        def __init__(self, dim, dim_out, *, time_emb_dim=None, dropout=0.0):
            super().__init__()
            self.mlp = (
                nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2))
                if time_emb_dim is not None
                else None
            )
            self.block1 = Block(dim, dim_out, dropout=dropout)
            self.block2 = Block(dim_out, dim_out)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x, time_emb=None):
            scale_shift = None
            if self.mlp is not None and time_emb is not None:
                time_emb = rearrange(self.mlp(time_emb), "b c -> b c 1 1")
                scale_shift = time_emb.chunk(2, dim=1)
            h = self.block1(x, scale_shift=scale_shift)
            return self.block2(h) + self.res_conv(x)

    class LinearAttention(nn.Module):
        def __init__(self, dim, heads=4, dim_head=32, num_mem_kv=4):
            super().__init__()
            self.scale, self.heads = dim_head**-0.5, heads
            hidden_dim = dim_head * heads
            self.norm = RMSNorm(dim)
            self.mem_kv = nn.Parameter(lib.randn(2, heads, dim_head, num_mem_kv))
            self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
            self.to_out = nn.Sequential(nn.Conv2d(hidden_dim, dim, 1), RMSNorm(dim))

        def forward(self, x):
            b, c, h, w = x.shape  # noqa: RUF059
            x = self.norm(x)
            qkv = self.to_qkv(x).chunk(3, dim=1)
            q, k, v = map(lambda t: rearrange(t, "b (h c) x y -> b h c (x y)", h=self.heads), qkv)  # noqa: C417
            mk, mv = map(lambda t: repeat(t, "h c n -> b h c n", b=b), self.mem_kv)  # noqa: C417
            k, v = map(partial(lib.cat, dim=-1), ((mk, k), (mv, v)))
            q = q.softmax(dim=-2)
            k = k.softmax(dim=-1)
            q = q * self.scale
            context = lib.einsum("b h d n, b h e n -> b h d e", k, v)
            out = lib.einsum("b h d e, b h d n -> b h e n", context, q)
            out = rearrange(out, "b h c (x y) -> b (h c) x y", h=self.heads, x=h, y=w)
            return self.to_out(out)

    class Attend(nn.Module):
        def __init__(self, dropout=0.0, flash=False, scale=None):
            super().__init__()
            self.dropout, self.scale, self.flash = dropout, scale, flash
            self.attn_dropout = nn.Dropout(dropout)
            SDPBackend = lib.nn.attention.SDPBackend
            self.cpu_config = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH,
                               SDPBackend.EFFICIENT_ATTENTION]  # fmt: skip

        def forward(self, q, k, v):
            if self.flash:
                q, k, v = map(lambda t: t.contiguous(), (q, k, v))  # noqa: C417
                with lib.nn.attention.sdpa_kernel(backends=self.cpu_config):
                    return F.scaled_dot_product_attention(
                        q, k, v, dropout_p=self.dropout if self.training else 0.0
                    )
            scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
            sim = lib.einsum("b h i d, b h j d -> b h i j", q, k) * scale
            attn = self.attn_dropout(sim.softmax(dim=-1))
            return lib.einsum("b h i j, b h j d -> b h i d", attn, v)

    class Attention(nn.Module):
        def __init__(self, dim, heads=4, dim_head=32, num_mem_kv=4, flash=False):
            super().__init__()
            self.heads = heads
            hidden_dim = dim_head * heads
            self.norm = RMSNorm(dim)
            self.attend = Attend(flash=flash)
            self.mem_kv = nn.Parameter(lib.randn(2, heads, num_mem_kv, dim_head))
            self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
            self.to_out = nn.Conv2d(hidden_dim, dim, 1)

        def forward(self, x):
            b, c, h, w = x.shape  # noqa: RUF059
            x = self.norm(x)
            qkv = self.to_qkv(x).chunk(3, dim=1)
            q, k, v = map(lambda t: rearrange(t, "b (h c) x y -> b h (x y) c", h=self.heads), qkv)  # noqa: C417
            mk, mv = map(lambda t: repeat(t, "h n d -> b h n d", b=b), self.mem_kv)  # noqa: C417
            k, v = map(partial(lib.cat, dim=-2), ((mk, k), (mv, v)))
            out = self.attend(q, k, v)
            out = rearrange(out, "b h (x y) d -> b (h d) x y", x=h, y=w)
            return self.to_out(out)

    class Unet(nn.Module):
        def __init__(self, dim, dim_mults=(1, 2), channels=3, learned_sinusoidal_cond=False,
                     random_fourier_features=False, learned_sinusoidal_dim=6, dropout=0.0,
                     attn_dim_head=4, attn_heads=2, flash_attn=False):  # fmt: skip
            super().__init__()
            self.channels, self.self_condition = channels, False
            init_dim = dim
            self.init_conv = nn.Conv2d(channels, init_dim, 7, padding=3)
            dims = [init_dim, *map(lambda m: dim * m, dim_mults)]  # noqa: C417
            in_out = list(zip(dims[:-1], dims[1:]))
            time_dim = dim * 4
            self.random_or_learned_sinusoidal_cond = (
                learned_sinusoidal_cond or random_fourier_features
            )
            if self.random_or_learned_sinusoidal_cond:
                sinu_pos_emb = RandomOrLearnedSinusoidalPosEmb(
                    learned_sinusoidal_dim, random_fourier_features
                )
                fourier_dim = learned_sinusoidal_dim + 1
            else:
                sinu_pos_emb, fourier_dim = SinusoidalPosEmb(dim), dim
            self.time_mlp = nn.Sequential(
                sinu_pos_emb, nn.Linear(fourier_dim, time_dim), nn.GELU(),
                nn.Linear(time_dim, time_dim),
            )  # fmt: skip
            full_attn = (*((False,) * (len(dim_mults) - 1)), True)
            FullAttention = partial(Attention, flash=flash_attn)
            resnet_block = partial(ResnetBlock, time_emb_dim=time_dim, dropout=dropout)
            self.downs, self.ups = nn.ModuleList([]), nn.ModuleList([])
            for ind, ((dim_in, dim_out), full) in enumerate(zip(in_out, full_attn)):
                is_last = ind >= len(in_out) - 1
                attn_klass = FullAttention if full else LinearAttention
                self.downs.append(
                    nn.ModuleList(
                        [
                            resnet_block(dim_in, dim_in),
                            resnet_block(dim_in, dim_in),
                            attn_klass(dim_in, dim_head=attn_dim_head, heads=attn_heads),
                            Downsample(dim_in, dim_out)
                            if not is_last
                            else nn.Conv2d(dim_in, dim_out, 3, padding=1),
                        ]
                    )
                )
            mid_dim = dims[-1]
            self.mid_block1 = resnet_block(mid_dim, mid_dim)
            self.mid_attn = FullAttention(mid_dim, heads=attn_heads, dim_head=attn_dim_head)
            self.mid_block2 = resnet_block(mid_dim, mid_dim)
            for ind, ((dim_in, dim_out), full) in enumerate(
                zip(*map(reversed, (in_out, full_attn)))
            ):
                is_last = ind == len(in_out) - 1
                attn_klass = FullAttention if full else LinearAttention
                self.ups.append(
                    nn.ModuleList(
                        [
                            resnet_block(dim_out + dim_in, dim_out),
                            resnet_block(dim_out + dim_in, dim_out),
                            attn_klass(dim_out, dim_head=attn_dim_head, heads=attn_heads),
                            Upsample(dim_out, dim_in)
                            if not is_last
                            else nn.Conv2d(dim_out, dim_in, 3, padding=1),
                        ]
                    )
                )
            self.out_dim = channels
            self.final_res_block = resnet_block(init_dim * 2, init_dim)
            self.final_conv = nn.Conv2d(init_dim, self.out_dim, 1)

        def forward(self, x, time, x_self_cond=None):
            x = self.init_conv(x)
            r = x.clone()
            t = self.time_mlp(time)
            h = []
            for block1, block2, attn, downsample in self.downs:
                x = block1(x, t)
                h.append(x)
                x = block2(x, t)
                x = attn(x) + x
                h.append(x)
                x = downsample(x)
            x = self.mid_block1(x, t)
            x = self.mid_attn(x) + x
            x = self.mid_block2(x, t)
            for block1, block2, attn, upsample in self.ups:
                x = block1(lib.cat((x, h.pop()), dim=1), t)
                x = block2(lib.cat((x, h.pop()), dim=1), t)
                x = attn(x) + x
                x = upsample(x)
            x = self.final_res_block(lib.cat((x, r), dim=1), t)
            return self.final_conv(x)

    return Unet(
        8, learned_sinusoidal_cond=learned, random_fourier_features=random_ff, flash_attn=flash
    )


def extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


def _ddpm(lib: Any, objective: str = "pred_v", schedule: str = "cosine", flash: bool = False,
          timesteps: int = 20) -> Any:  # fmt: skip
    """denoising-diffusion-pytorch's GaussianDiffusion: the linear / cosine / sigmoid beta
    schedules in float64, buffers registered as float32 (then ``.double()``'d with the
    model), q_sample and p_losses with the ``extract`` gather and the SNR loss weights, and
    one ancestral p_sample step (clamped x_start, posterior mean and log variance)."""
    nn, F = lib.nn, lib.nn.functional

    def linear_beta_schedule(timesteps):
        scale = 1000 / timesteps
        return lib.linspace(scale * 0.0001, scale * 0.02, timesteps, dtype=lib.float64)

    def cosine_beta_schedule(timesteps, s=0.008):
        steps = timesteps + 1
        t = lib.linspace(0, timesteps, steps, dtype=lib.float64) / timesteps
        alphas_cumprod = lib.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
        return lib.clip(betas, 0, 0.999)

    def sigmoid_beta_schedule(timesteps, start=-3, end=3, tau=1):
        steps = timesteps + 1
        t = lib.linspace(0, timesteps, steps, dtype=lib.float64) / timesteps
        v_start = lib.tensor(start / tau).sigmoid()
        v_end = lib.tensor(end / tau).sigmoid()
        alphas_cumprod = (-((t * (end - start) + start) / tau).sigmoid() + v_end) / (
            v_end - v_start
        )
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
        return lib.clip(betas, 0, 0.999)

    class GaussianDiffusion(nn.Module):
        def __init__(self, model, *, timesteps, objective, beta_schedule, min_snr_gamma=5):
            super().__init__()
            self.model, self.objective = model, objective
            self.channels = model.channels
            fn = {"linear": linear_beta_schedule, "cosine": cosine_beta_schedule,
                  "sigmoid": sigmoid_beta_schedule}[beta_schedule]  # fmt: skip
            betas = fn(timesteps)
            alphas = 1.0 - betas
            alphas_cumprod = lib.cumprod(alphas, dim=0)
            alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
            (timesteps,) = betas.shape
            self.num_timesteps = int(timesteps)

            def register_buffer(name, val):
                self.register_buffer(name, val.to(lib.float32))

            register_buffer("betas", betas)
            register_buffer("alphas_cumprod", alphas_cumprod)
            register_buffer("alphas_cumprod_prev", alphas_cumprod_prev)
            register_buffer("sqrt_alphas_cumprod", lib.sqrt(alphas_cumprod))
            register_buffer("sqrt_one_minus_alphas_cumprod", lib.sqrt(1.0 - alphas_cumprod))
            register_buffer("log_one_minus_alphas_cumprod", lib.log(1.0 - alphas_cumprod))
            register_buffer("sqrt_recip_alphas_cumprod", lib.sqrt(1.0 / alphas_cumprod))
            register_buffer("sqrt_recipm1_alphas_cumprod", lib.sqrt(1.0 / alphas_cumprod - 1))
            posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
            register_buffer("posterior_variance", posterior_variance)
            register_buffer(
                "posterior_log_variance_clipped", lib.log(posterior_variance.clamp(min=1e-20))
            )
            register_buffer(
                "posterior_mean_coef1",
                betas * lib.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod),
            )
            register_buffer(
                "posterior_mean_coef2",
                (1.0 - alphas_cumprod_prev) * lib.sqrt(alphas) / (1.0 - alphas_cumprod),
            )
            snr = alphas_cumprod / (1 - alphas_cumprod)
            maybe_clipped_snr = snr.clone()
            maybe_clipped_snr.clamp_(max=min_snr_gamma)
            if objective == "pred_noise":
                register_buffer("loss_weight", maybe_clipped_snr / snr)
            elif objective == "pred_x0":
                register_buffer("loss_weight", maybe_clipped_snr)
            else:
                register_buffer("loss_weight", maybe_clipped_snr / (snr + 1))

        def predict_start_from_noise(self, x_t, t, noise):
            return (
                extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape) * noise
            )

        def predict_noise_from_start(self, x_t, t, x0):
            return (extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t - x0) / extract(
                self.sqrt_recipm1_alphas_cumprod, t, x_t.shape
            )

        def predict_v(self, x_start, t, noise):
            return (
                extract(self.sqrt_alphas_cumprod, t, x_start.shape) * noise
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * x_start
            )

        def predict_start_from_v(self, x_t, t, v):
            return (
                extract(self.sqrt_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_t.shape) * v
            )

        def q_posterior(self, x_start, x_t, t):
            mean = (
                extract(self.posterior_mean_coef1, t, x_t.shape) * x_start
                + extract(self.posterior_mean_coef2, t, x_t.shape) * x_t
            )
            var = extract(self.posterior_variance, t, x_t.shape)
            log_var = extract(self.posterior_log_variance_clipped, t, x_t.shape)
            return mean, var, log_var

        def model_predictions(self, x, t, clip_x_start=False):
            model_output = self.model(x, t)
            maybe_clip = partial(lib.clamp, min=-1.0, max=1.0) if clip_x_start else (lambda t: t)
            if self.objective == "pred_noise":
                pred_noise = model_output
                x_start = maybe_clip(self.predict_start_from_noise(x, t, pred_noise))
            elif self.objective == "pred_x0":
                x_start = maybe_clip(model_output)
                pred_noise = self.predict_noise_from_start(x, t, x_start)
            else:
                x_start = maybe_clip(self.predict_start_from_v(x, t, model_output))
                pred_noise = self.predict_noise_from_start(x, t, x_start)
            return pred_noise, x_start

        @lib.inference_mode()
        def p_sample(self, x, t: int, noise):
            b = x.shape[0]
            batched_times = lib.full((b,), t, device=x.device, dtype=lib.long)
            _, x_start = self.model_predictions(x, batched_times)
            x_start.clamp_(-1.0, 1.0)
            mean, _, log_var = self.q_posterior(x_start=x_start, x_t=x, t=batched_times)
            noise = noise if t > 0 else 0.0
            return mean + (0.5 * log_var).exp() * noise, x_start

        def q_sample(self, x_start, t, noise):
            return (
                extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
            )

        def p_losses(self, x_start, t, noise):
            x = self.q_sample(x_start=x_start, t=t, noise=noise)
            model_out = self.model(x, t)
            if self.objective == "pred_noise":
                target = noise
            elif self.objective == "pred_x0":
                target = x_start
            else:
                target = self.predict_v(x_start, t, noise)
            loss = F.mse_loss(model_out, target, reduction="none")
            loss = einops.reduce(loss, "b ... -> b", "mean")
            loss = loss * extract(self.loss_weight, t, loss.shape)
            return loss.mean()

        def forward(self, img, times, noise):
            img = img * 2 - 1  # normalize_to_neg_one_to_one
            return self.p_losses(img, times, noise)

    return GaussianDiffusion(
        _ddpm_unet(lib, flash=flash), timesteps=timesteps, objective=objective,
        beta_schedule=schedule,
    ).double()  # fmt: skip


def _diffusion_step(lib: Any, m: Any, opt: Any, img: Any, t: Any, noise: Any) -> tuple[Any, Any]:
    # the Trainer's step: loss.backward(), clip_grad_norm_ 1.0, opt.step(), opt.zero_grad()
    loss = m(img, t, noise)
    loss.backward()
    lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    return m.model.final_conv.weight.sum(), loss


@pytest.mark.parametrize(
    ("objective", "schedule", "flash"),
    [
        ("pred_v", "cosine", False),
        ("pred_noise", "linear", True),
        ("pred_x0", "sigmoid", False),
    ],
)
def test_gaussian_diffusion_unet_trains_as_in_torch(objective, schedule, flash) -> None:
    rng = np.random.default_rng(6)
    img, noise = rng.random((2, 3, 8, 8)), rng.standard_normal((2, 3, 8, 8))
    t = np.array([3, 17])
    with _default_double():
        _run_alike(
            lambda lib: _ddpm(lib, objective, schedule, flash),
            lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.99)),
            _diffusion_step,
            (img, t, noise),
            steps=2,
        )


def test_gaussian_diffusion_schedules_and_p_sample_match_torch() -> None:
    rng = np.random.default_rng(7)
    x, noise = rng.standard_normal((2, 3, 8, 8)), rng.standard_normal((2, 3, 8, 8))
    for schedule in ("linear", "cosine", "sigmoid"):
        with _default_double():
            _p_sample_alike(schedule, x, noise)


def _p_sample_alike(schedule: str, x: np.ndarray, noise: np.ndarray) -> None:
    if True:
        torch.manual_seed(0)
        tm, fm = _ddpm(torch, "pred_noise", schedule), _ddpm(fg, "pred_noise", schedule)
        _copy_weights(tm, fm)
        _same_state(schedule, tm, fm, grads=False)
        got = {}
        for lib, m in ((torch, tm), (fg, fm)):
            m.eval()
            res = []
            for step in (7, 0):
                img, x_start = m.p_sample(lib.tensor(x), step, lib.tensor(noise))
                assert not img.requires_grad and not x_start.requires_grad
                res += [img, x_start]
            got[lib] = res
        for i, (a, b) in enumerate(zip(got[torch], got[fg], strict=True)):
            _close(f"{schedule} p_sample result {i}", a, b)


@pytest.mark.parametrize("random_ff", [False, True])
def test_unet_with_learned_or_random_fourier_features_trains_as_in_torch(random_ff) -> None:
    # RandomOrLearnedSinusoidalPosEmb: the random variant keeps a Parameter with
    # requires_grad=False, which must get no gradient and stay put
    rng = np.random.default_rng(8)
    x, t, target = (
        rng.standard_normal((2, 3, 4, 4)),
        rng.random(2) * 10,
        rng.standard_normal((2, 3, 4, 4)),
    )

    def step(lib: Any, m: Any, opt: Any, x: Any, t: Any, target: Any) -> tuple[Any, Any]:
        out = m(x, t)
        loss = lib.nn.functional.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return out, loss

    _run_alike(
        lambda lib: _ddpm_unet(lib, learned=True, random_ff=random_ff).double(),
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3),
        step,
        (x, t, target),
        steps=2,
    )
    m = _ddpm_unet(fg, learned=True, random_ff=random_ff)
    w = m.time_mlp[0].weights
    assert isinstance(w, fg.nn.Parameter) and w.requires_grad is (not random_ff)


# ------------------------------------------------------------------------------- ConvNeXt


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True,
              mask=None):  # fmt: skip
    """timm's drop_path; ``mask`` (when given) stands for the Bernoulli draw."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    if mask is None:
        random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    else:
        random_tensor = x.new_empty(shape).copy_(mask.reshape(shape))
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


def _convnext(lib: Any, drop_path_rate: float = 0.0, depths=(1, 1, 2, 1), dims=(4, 8, 8, 8),
              layer_scale_init_value: float = 1e-6, head_init_scale: float = 1.0) -> Any:  # fmt: skip
    """facebookresearch ConvNeXt: the channels_first LayerNorm written out (mean, biased
    variance, sqrt), 7x7 depthwise conv, inverted bottleneck on permuted NHWC with Linear
    layers, layer-scale gamma, DropPath with linspace'd rates, trunc_normal_ init, the
    head_init_scale ``.data.mul_``."""
    nn, F = lib.nn, lib.nn.functional

    class DropPath(nn.Module):
        def __init__(self, drop_prob=None):
            super().__init__()
            self.drop_prob = drop_prob
            self.mask = None  # (test hook) a fixed Bernoulli draw

        def forward(self, x):
            return drop_path(x, self.drop_prob, self.training, mask=self.mask)

    class LayerNorm(nn.Module):
        def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(normalized_shape))
            self.bias = nn.Parameter(lib.zeros(normalized_shape))
            self.eps, self.data_format = eps, data_format
            self.normalized_shape = (normalized_shape,)

        def forward(self, x):
            if self.data_format == "channels_last":
                return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / lib.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    class Block(nn.Module):
        def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
            self.norm = LayerNorm(dim, eps=1e-6)
            self.pwconv1 = nn.Linear(dim, 4 * dim)
            self.act = nn.GELU()
            self.pwconv2 = nn.Linear(4 * dim, dim)
            self.gamma = (
                nn.Parameter(layer_scale_init_value * lib.ones(dim), requires_grad=True)
                if layer_scale_init_value > 0
                else None
            )
            self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

        def forward(self, x):
            input = x
            x = self.dwconv(x).permute(0, 2, 3, 1)
            x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
            if self.gamma is not None:
                x = self.gamma * x
            x = x.permute(0, 3, 1, 2)
            return input + self.drop_path(x)

    class ConvNeXt(nn.Module):
        def __init__(self, in_chans=3, num_classes=5):
            super().__init__()
            self.downsample_layers = nn.ModuleList()
            stem = nn.Sequential(
                nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
                LayerNorm(dims[0], eps=1e-6, data_format="channels_first"),
            )
            self.downsample_layers.append(stem)
            for i in range(3):
                self.downsample_layers.append(
                    nn.Sequential(
                        LayerNorm(dims[i], eps=1e-6, data_format="channels_first"),
                        nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2),
                    )
                )
            self.stages = nn.ModuleList()
            dp_rates = [x.item() for x in lib.linspace(0, drop_path_rate, sum(depths))]
            cur = 0
            for i in range(4):
                self.stages.append(
                    nn.Sequential(
                        *[
                            Block(dims[i], dp_rates[cur + j], layer_scale_init_value)
                            for j in range(depths[i])
                        ]
                    )
                )
                cur += depths[i]
            self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
            self.head = nn.Linear(dims[-1], num_classes)
            self.apply(self._init_weights)
            self.head.weight.data.mul_(head_init_scale)
            self.head.bias.data.mul_(head_init_scale)

        def _init_weights(self, m):
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                lib.nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.constant_(m.bias, 0)

        def forward(self, x):
            for i in range(4):
                x = self.stages[i](self.downsample_layers[i](x))
            return self.head(self.norm(x.mean([-2, -1])))

    return ConvNeXt().double()


def _fixed_drop_masks(lib: Any, m: Any) -> None:
    # a fixed Bernoulli draw per DropPath (batch of 3), the same in both libraries
    rng = np.random.default_rng(9)
    for mod in m.modules():
        if type(mod).__name__ == "DropPath":
            mod.mask = lib.tensor((rng.random(3) < 0.6).astype(np.float64))


@pytest.mark.parametrize("drop_path_rate", [0.0, 0.5])
def test_convnext_trains_as_in_torch(drop_path_rate: float) -> None:
    rng = np.random.default_rng(10)
    img, label = rng.standard_normal((3, 3, 32, 32)), rng.integers(0, 5, 3)

    def build(lib: Any) -> Any:
        return _convnext(lib, drop_path_rate, layer_scale_init_value=0.5, head_init_scale=3.0)

    def opt(lib: Any, m: Any) -> Any:
        return lib.optim.AdamW(m.parameters(), lr=4e-3, weight_decay=0.05)

    _run_alike(
        build,
        opt,
        _classify_step,
        (img, label),
        prepare=_fixed_drop_masks,
        schedule=lambda o, i: [
            g.__setitem__("lr", 4e-3 * (0.5 + 0.5 * math.cos(i))) for g in o.param_groups
        ],
    )


def test_convnext_init_and_drop_path_draws_behave_as_torch() -> None:
    # trunc_normal_(std=.02) keeps timm's absolute cut at [-2, 2] (no clipping at 2 std),
    # layer-scale gamma and head scaling; DropPath's own bernoulli_ draw zeroes whole
    # samples and scales the rest by 1/keep_prob, differently per call, also under trace
    fg.manual_seed(0)
    m = _convnext(fg, 0.5, depths=(1, 1, 1, 1), dims=(8, 8, 8, 64), head_init_scale=0.1)
    w = m.stages[3][0].pwconv1.weight.detach().numpy()
    assert np.abs(w).max() <= 2.0 and 0.015 < w.std() < 0.025
    assert (m.head.bias.detach().numpy() == 0).all()
    assert np.allclose(m.stages[0][0].gamma.detach().numpy(), 1e-6)
    x = fg.tensor(np.random.default_rng(11).standard_normal((64, 3, 2, 2)) + 3)

    def run(x: Any) -> Any:
        return drop_path(x, 0.25, training=True)

    traced = fg.trace(run)
    outs = [run(x), run(x), traced(x), traced(x)]
    for y in outs:
        ratio = (y / x).numpy().reshape(64, -1)
        assert np.allclose(ratio, ratio[:, :1])
        kept = ratio[:, 0]
        assert set(np.round(kept, 12)) <= {0.0, round(1 / 0.75, 12)}
        assert 0 < (kept == 0).sum() < 64
    assert not np.array_equal(outs[0].numpy(), outs[1].numpy())
    assert not np.array_equal(outs[2].numpy(), outs[3].numpy())
    assert drop_path(x, 0.25, training=False) is x


_INITS = {
    "trunc_normal_": lambda lib, t: lib.nn.init.trunc_normal_(t, std=0.02),
    "normal_": lambda lib, t: lib.nn.init.normal_(t, std=0.02),
    "uniform_": lambda lib, t: lib.nn.init.uniform_(t),
    "xavier_uniform_": lambda lib, t: lib.nn.init.xavier_uniform_(t),
    "kaiming_normal_": lambda lib, t: lib.nn.init.kaiming_normal_(t),
    "orthogonal_": lambda lib, t: lib.nn.init.orthogonal_(t),
    "sparse_": lambda lib, t: lib.nn.init.sparse_(t, 0.5),
    "Tensor.normal_": lambda lib, t: t.normal_(),
    "Tensor.uniform_": lambda lib, t: t.uniform_(),
    "Tensor.log_normal_": lambda lib, t: t.log_normal_(),
    "Tensor.exponential_": lambda lib, t: t.exponential_(),
    "Tensor.cauchy_": lambda lib, t: t.cauchy_(),
}


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("init", sorted(_INITS))
def test_continuous_random_fills_of_integer_tensors_raise_as_torch(init: str, dtype: str) -> None:
    # ConvNeXt's _init_weights runs trunc_normal_ on whatever module.weight is: PyTorch
    # refuses an integer or bool tensor; ferrograd wrote the samples truncated to integers
    # (0, -1, ...) without a word
    for lib in (torch, fg):
        t = lib.ones(3, 4, dtype=getattr(lib, dtype))
        with pytest.raises((NotImplementedError, RuntimeError)) as info:
            _INITS[init](lib, t)
        assert t.tolist() == [[1 if dtype != "bool" else True] * 4] * 3
    assert init.split(".")[-1] in str(info.value) and dtype in str(info.value)
    t = fg.ones(3, 4, dtype=fg.float64)
    assert _INITS[init](fg, t) is t and not (t.numpy() == 1).all()


# ----------------------------------------------------------------------------- MLP-Mixer


def _mlp_mixer(lib: Any, dropout: float = 0.0) -> Any:
    """lucidrains' MLPMixer: Rearrange patches, token mixing with kernel-size-1 Conv1d over
    the patch axis, channel mixing with Linear, pre-norm residuals, einops' Reduce mean."""
    nn = lib.nn
    Rearrange, Reduce = _layers(lib).Rearrange, _layers(lib).Reduce

    class PreNormResidual(nn.Module):
        def __init__(self, dim, fn):
            super().__init__()
            self.fn, self.norm = fn, nn.LayerNorm(dim)

        def forward(self, x):
            return self.fn(self.norm(x)) + x

    def FeedForward(dim, dim_hidden, dropout=0.0, dense=nn.Linear):
        return nn.Sequential(
            dense(dim, dim_hidden), nn.GELU(), nn.Dropout(dropout),
            dense(dim_hidden, dim), nn.Dropout(dropout),
        )  # fmt: skip

    def MLPMixer(*, image_size, channels, patch_size, dim, depth, num_classes,
                 expansion_factor=4, expansion_factor_token=0.5, dropout=0.0):  # fmt: skip
        image_h, image_w = pair(image_size)
        num_patches = (image_h // patch_size) * (image_w // patch_size)
        chan_first, chan_last = partial(nn.Conv1d, kernel_size=1), nn.Linear
        return nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
            nn.Linear((patch_size**2) * channels, dim),
            *[
                nn.Sequential(
                    PreNormResidual(
                        dim,
                        FeedForward(num_patches, int(expansion_factor * dim), dropout, chan_first),
                    ),
                    PreNormResidual(
                        dim,
                        FeedForward(dim, int(expansion_factor_token * dim), dropout, chan_last),
                    ),
                )
                for _ in range(depth)
            ],
            nn.LayerNorm(dim),
            Reduce("b n c -> b c", "mean"),
            nn.Linear(dim, num_classes),
        )

    return MLPMixer(
        image_size=(8, 12), channels=3, patch_size=4, dim=8, depth=2, num_classes=5,
        dropout=dropout,
    ).double()  # fmt: skip


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_mlp_mixer_trains_as_in_torch(dropout: float) -> None:
    rng = np.random.default_rng(12)
    img, label = rng.standard_normal((3, 3, 8, 12)), rng.integers(0, 5, 3)

    def opt(lib: Any, m: Any) -> Any:
        o = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        return o

    _run_alike(
        lambda lib: _mlp_mixer(lib, dropout),
        opt,
        _classify_step,
        (img, label),
        modes=("train", "eval") if dropout == 0 else ("eval",),
    )


def _permutator(lib: Any) -> Any:
    """mlp-mixer-pytorch's Permutator (Vision Permutator): height / width / channel mixing
    through Rearrange'd Linear layers summed by ParallelSum (``sum(map(...))``)."""
    nn = lib.nn
    Rearrange, Reduce = _layers(lib).Rearrange, _layers(lib).Reduce

    class PreNormResidual(nn.Module):
        def __init__(self, dim, fn):
            super().__init__()
            self.fn, self.norm = fn, nn.LayerNorm(dim)

        def forward(self, x):
            return self.fn(self.norm(x)) + x

    class ParallelSum(nn.Module):
        def __init__(self, *fns):
            super().__init__()
            self.fns = nn.ModuleList(fns)

        def forward(self, x):
            return sum(map(lambda fn: fn(x), self.fns))  # noqa: C417

    image_size, patch_size, dim, depth, num_classes, s, e = 8, 4, 8, 2, 5, 2, 2
    height = width = image_size // patch_size
    return nn.Sequential(
        Rearrange("b c (h p1) (w p2) -> b h w (p1 p2 c)", p1=patch_size, p2=patch_size),
        nn.Linear((patch_size**2) * 3, dim),
        *[
            nn.Sequential(
                PreNormResidual(dim, nn.Sequential(
                    ParallelSum(
                        nn.Sequential(
                            Rearrange("b h w (c s) -> b w c (h s)", s=s),
                            nn.Linear(height * s, height * s),
                            Rearrange("b w c (h s) -> b h w (c s)", s=s),
                        ),
                        nn.Sequential(
                            Rearrange("b h w (c s) -> b h c (w s)", s=s),
                            nn.Linear(width * s, width * s),
                            Rearrange("b h c (w s) -> b h w (c s)", s=s),
                        ),
                        nn.Linear(dim, dim),
                    ),
                    nn.Linear(dim, dim),
                )),
                PreNormResidual(dim, nn.Sequential(
                    nn.Linear(dim, dim * e), nn.GELU(), nn.Dropout(0.0),
                    nn.Linear(dim * e, dim), nn.Dropout(0.0),
                )),
            )
            for _ in range(depth)
        ],
        nn.LayerNorm(dim),
        Reduce("b h w c -> b c", "mean"),
        nn.Linear(dim, num_classes),
    ).double()  # fmt: skip


def test_permutator_trains_as_in_torch() -> None:
    rng = np.random.default_rng(14)
    img, label = rng.standard_normal((3, 3, 8, 8)), rng.integers(0, 5, 3)
    _run_alike(
        _permutator,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=3e-3),
        _classify_step,
        (img, label),
        modes=("train",),
    )


def test_traced_models_follow_the_batch_size_and_image_size() -> None:
    # one fg.trace'd forward per program, called with changing shapes, agrees with eager
    rng = np.random.default_rng(16)
    cases = [(_vit, (8, 8)), (_cait, (8, 8)), (_mlp_mixer, (8, 12)), (_convnext, (32, 32))]
    for build, hw in cases:
        fg.manual_seed(0)
        m = build(fg).eval()
        traced = fg.trace(lambda x, m=m: m(x))
        for bs in (3, 1, 2, 3):
            x = fg.tensor(rng.standard_normal((bs, 3, *hw)))
            _close(f"{build.__name__} batch {bs}", m(x), traced(x), rtol=1e-13, atol=1e-13)
    with _default_double():
        fg.manual_seed(0)
        m = _ddpm(fg)
        traced = fg.trace(lambda x, t, n: m(x, t, n))
        for bs, hw in ((2, 8), (3, 8), (2, 4)):
            x, n = rng.random((bs, 3, hw, hw)), rng.standard_normal((bs, 3, hw, hw))
            args = (fg.tensor(x), fg.tensor(rng.integers(0, 20, bs)), fg.tensor(n))
            _close(f"diffusion {bs}x{hw}", m(*args), traced(*args), rtol=1e-13, atol=1e-13)
