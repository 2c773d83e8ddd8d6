"""Public PyTorch programs (mamba-minimal, Pytorch-UNet, TCN, CLIP, perceiver/performer,
transformer-xl) ported by renaming ``torch`` to ``ferrograd``: compact float64 versions of
their models and training steps, run on both libraries from the same weights (outputs, losses,
every gradient, the parameters after three optimizer steps, train and eval, eager and under
``fg.trace``), and the ferrograd bugs the ports ran into."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, Callable

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _host_default_device():
    # the programs run as published, next to torch on its default device, the CPU (performer
    # moves a QR result `.to(None)`, which keeps it where it is: on the host)
    prev = fg.get_default_device()
    fg.set_default_device("cpu")
    try:
        yield
    finally:
        fg.set_default_device(prev)


einops = pytest.importorskip("einops")

RTOL, ATOL = 1e-8, 1e-10


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(what: str, a: Any, b: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert (a is None) == (b is None), what
    if a is not None:
        np.testing.assert_allclose(_np(b), _np(a), rtol=rtol, atol=atol, err_msg=what)


def _copy_weights(src: Any, dst: Any) -> None:
    dst.load_state_dict({k: fg.tensor(_np(v).copy()) for k, v in src.state_dict().items()})


def _same_state(tag: str, tm: Any, fm: Any, grads: bool = True) -> None:
    fp = dict(fm.named_parameters())
    for k, p in tm.named_parameters():
        _close(f"{tag}: parameter {k}", p, fp[k])
        if grads:
            _close(f"{tag}: gradient of {k}", p.grad, fp[k].grad)
    fb = dict(fm.named_buffers())
    for k, b in tm.named_buffers():
        _close(f"{tag}: buffer {k}", b, fb[k])


def _bound(step: Callable[..., Any], model: Any, opt: Any) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return step(fg, model, opt, *args)

    return run


def _train_alike(
    build: Callable[[Any], Any],
    make_opt: Callable[[Any, Any], Any],
    step: Callable[..., Any],
    inputs: tuple[np.ndarray, ...],
    modes: tuple[str, ...] = ("train", "eval"),
    steps: int = 3,
) -> None:
    """``build(lib)`` the model for torch, eager ferrograd and traced ferrograd from the same
    weights; ``steps`` of ``step(lib, model, opt, *inputs)`` -> (output, loss) must agree."""
    for mode in modes:
        torch.manual_seed(0)
        fg.manual_seed(0)
        tm = build(torch)
        fm, pm = build(fg), build(fg)
        _copy_weights(tm, fm)
        _copy_weights(tm, pm)
        for m in (tm, fm, pm):
            getattr(m, mode)()
        topt, fopt, popt = make_opt(torch, tm), make_opt(fg, fm), make_opt(fg, pm)
        traced = fg.trace(_bound(step, pm, popt))
        for i in range(steps):
            to, tl = step(torch, tm, topt, *(torch.tensor(v) for v in inputs))
            fo, fl = step(fg, fm, fopt, *(fg.tensor(v) for v in inputs))
            po, pl = traced(*(fg.tensor(v) for v in inputs))
            for what, a, b in (("output", to, fo), ("loss", tl, fl)):
                _close(f"{mode} step {i}: {what}", a, b)
            for what, a, b in (("output", to, po), ("loss", tl, pl)):
                _close(f"{mode} step {i}: traced {what}", a, b)
            if i == 0:
                _same_state(f"{mode} step 0", tm, fm)
        _same_state(f"{mode} after {steps} steps", tm, fm)
        _same_state(f"{mode} after {steps} traced steps", tm, pm, grads=False)


# ----------------------------------------------------------------------------- mamba-minimal


def _mamba(lib: Any) -> Any:
    """mamba-minimal's model at d_model=8: selective scan over einsum'd discretisations,
    softplus step sizes, a causal depthwise conv1d (padding, then cut), RMSNorm, a head tied
    to the embedding."""
    nn, F = lib.nn, lib.nn.functional
    d, d_in, n, r, vocab, k = 8, 16, 4, 1, 16, 4

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(lib.ones(d))

        def forward(self, x):
            return x * lib.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.in_proj = nn.Linear(d, 2 * d_in, bias=False)
            self.conv1d = nn.Conv1d(d_in, d_in, k, groups=d_in, padding=k - 1)
            self.x_proj = nn.Linear(d_in, r + 2 * n, bias=False)
            self.dt_proj = nn.Linear(r, d_in)
            a = einops.repeat(lib.arange(1, n + 1), "n -> d n", d=d_in)
            self.A_log = nn.Parameter(lib.log(a))
            self.D = nn.Parameter(lib.ones(d_in))
            self.out_proj = nn.Linear(d_in, d, bias=False)
            self.norm = RMSNorm()

        def ssm(self, u):
            a = -lib.exp(self.A_log.double())
            delta, b, c = self.x_proj(u).split(split_size=[r, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            da = lib.exp(einops.einsum(delta, a, "b l d, d n -> b l d n"))
            dbu = einops.einsum(delta, b, u, "b l d, b l n, b l d -> b l d n")
            x = lib.zeros((u.shape[0], d_in, n), dtype=u.dtype)
            ys = []
            for i in range(u.shape[1]):
                x = da[:, i] * x + dbu[:, i]
                ys.append(einops.einsum(x, c[:, i, :], "b d n, b n -> b d"))
            return lib.stack(ys, dim=1) + u * self.D

        def forward(self, h):
            length = h.shape[1]
            x, res = self.in_proj(self.norm(h)).split(split_size=[d_in, d_in], dim=-1)
            x = einops.rearrange(x, "b l d -> b d l")
            x = einops.rearrange(self.conv1d(x)[:, :, :length], "b d l -> b l d")
            y = self.ssm(F.silu(x)) * F.silu(res)
            return self.out_proj(y) + h

    class Mamba(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList([Block()])
            self.norm_f = RMSNorm()
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.embedding.weight

        def forward(self, ids):
            x = self.embedding(ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    return Mamba().double()


def _lm_step(lib: Any, m: Any, opt: Any, ids: Any, target: Any) -> tuple[Any, Any]:
    out = m(ids)
    loss = lib.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return out, loss


def test_mamba_minimal_trains_as_in_torch() -> None:
    rng = np.random.default_rng(0)
    ids, target = rng.integers(0, 16, (2, 4)), rng.integers(0, 16, (2, 4))
    _train_alike(
        _mamba, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=1e-2), _lm_step, (ids, target)
    )


# --------------------------------------------------------------------------- Pytorch-UNet


def _unet(lib: Any, bilinear: bool, n_classes: int) -> Any:
    """Pytorch-UNet's network at widths 4..16 (two levels): double 3x3 conv + BatchNorm +
    in-place ReLU, max-pool down, bilinear Upsample (align_corners) or ConvTranspose2d up,
    ``F.pad`` to the skip's odd size, concatenation, 1x1 head."""
    nn, F = lib.nn, lib.nn.functional

    def double_conv(cin: int, cout: int, mid: int | None = None) -> Any:
        mid = mid or cout
        return nn.Sequential(
            nn.Conv2d(cin, mid, 3, padding=1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    class Up(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            if bilinear:
                self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
                self.conv = double_conv(cin, cout, cin // 2)
            else:
                self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
                self.conv = double_conv(cin, cout)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            dy, dx = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
            return self.conv(lib.cat([x2, x1], dim=1))

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            f = 2 if bilinear else 1
            self.inc = double_conv(3, 4)
            self.down1 = nn.Sequential(nn.MaxPool2d(2), double_conv(4, 8))
            self.down2 = nn.Sequential(nn.MaxPool2d(2), double_conv(8, 16 // f))
            self.up1 = Up(16, 8 // f)
            self.up2 = Up(8, 4)
            self.outc = nn.Conv2d(4, n_classes, kernel_size=1)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.down1(x1)
            x = self.up1(self.down2(x2), x2)
            return self.outc(self.up2(x, x1))

    return UNet().double()


def _dice_loss(lib: Any, inp: Any, target: Any) -> Any:
    """Pytorch-UNet's dice loss, averaged over the batch (and classes, flattened in)."""
    inter = 2 * (inp * target).sum(dim=(-1, -2, -3))
    sets = inp.sum(dim=(-1, -2, -3)) + target.sum(dim=(-1, -2, -3))
    sets = lib.where(sets == 0, inter, sets)
    return 1 - ((inter + 1e-6) / (sets + 1e-6)).mean()


def _unet_step(n_classes: int) -> Callable[..., Any]:
    def step(lib: Any, m: Any, opt: Any, images: Any, masks: Any) -> tuple[Any, Any]:
        F = lib.nn.functional
        images = images.to(dtype=lib.float64, memory_format=lib.channels_last)
        pred = m(images)
        if n_classes == 1:
            loss = lib.nn.BCEWithLogitsLoss()(pred.squeeze(1), masks.double())
            loss += _dice_loss(lib, F.sigmoid(pred.squeeze(1))[None], masks.double()[None])
        else:
            loss = lib.nn.CrossEntropyLoss()(pred, masks)
            onehot = F.one_hot(masks, n_classes).permute(0, 3, 1, 2).double()
            loss += _dice_loss(lib, F.softmax(pred, dim=1).flatten(0, 1), onehot.flatten(0, 1))
        opt.zero_grad(set_to_none=True)
        scaler = lib.amp.GradScaler(enabled=False)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return pred, loss

    return step


@pytest.mark.parametrize(("bilinear", "n_classes"), [(False, 3), (True, 1)])
def test_pytorch_unet_trains_as_in_torch(bilinear: bool, n_classes: int) -> None:
    rng = np.random.default_rng(1)
    images = rng.standard_normal((2, 3, 6, 7))
    masks = rng.integers(0, max(n_classes, 2), (2, 6, 7))

    def opt(lib: Any, m: Any) -> Any:
        return lib.optim.RMSprop(
            m.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.9, foreach=True
        )

    _train_alike(
        lambda lib: _unet(lib, bilinear, n_classes), opt, _unet_step(n_classes), (images, masks)
    )


# ------------------------------------------------------------------------------------ TCN


def _tcn(lib: Any) -> Any:
    """locuslab TCN (the adding-problem model): weight-normed dilated causal Conv1d blocks
    (pad, then chomp the tail), a 1x1 downsample residual, a linear head on the last step."""
    nn = lib.nn
    weight_norm = lib.nn.utils.weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, size: int) -> None:
            super().__init__()
            self.size = size

        def forward(self, x):
            return x[:, :, : -self.size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, cin: int, cout: int, dilation: int) -> None:
            super().__init__()
            pad = 2 * dilation
            self.conv1 = weight_norm(nn.Conv1d(cin, cout, 3, padding=pad, dilation=dilation))
            self.conv2 = weight_norm(nn.Conv1d(cout, cout, 3, padding=pad, dilation=dilation))
            self.net = nn.Sequential(
                self.conv1, Chomp1d(pad), nn.ReLU(), nn.Dropout(0.0),
                self.conv2, Chomp1d(pad), nn.ReLU(), nn.Dropout(0.0),
            )  # fmt: skip
            self.downsample = nn.Conv1d(cin, cout, 1) if cin != cout else None
            self.relu = nn.ReLU()
            self.conv1.weight.data.normal_(0, 0.01)
            self.conv2.weight.data.normal_(0, 0.01)

        def forward(self, x):
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(self.net(x) + res)

    class TCN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            chans = [2, 5, 5, 6]
            self.tcn = nn.Sequential(
                *[TemporalBlock(chans[i], chans[i + 1], 2**i) for i in range(3)]
            )
            self.linear = nn.Linear(6, 1)

        def forward(self, x):
            return self.linear(self.tcn(x)[:, :, -1])

    return TCN().double()


def test_tcn_weight_normed_dilated_convs_train_as_in_torch() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 2, 12)), rng.standard_normal((3, 1))

    def step(lib: Any, m: Any, opt: Any, x: Any, y: Any) -> tuple[Any, Any]:
        opt.zero_grad()
        out = m(x)
        loss = lib.nn.functional.mse_loss(out, y)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return out, loss

    _train_alike(_tcn, lambda lib, m: lib.optim.Adam(m.parameters(), lr=4e-3), step, (x, y))


# ----------------------------------------------------------------------------------- CLIP


def _clip(lib: Any, ln_dtype: Any = None) -> Any:
    """CLIP at toy sizes: a ModifiedResNet-style image tower (anti-aliased Bottleneck with an
    avg-pool downsample, AttentionPool2d through ``F.multi_head_attention_forward`` with
    separate q/k/v weights), a causal text transformer (``nn.MultiheadAttention`` with an
    additive -inf mask, QuickGELU), the end-of-text pooling, and the logit-scaled cosine
    similarities. ``ln_dtype``: the dtype CLIP's LayerNorm subclass computes in (float32 in
    CLIP; None: the input's)."""
    nn, F = lib.nn, lib.nn.functional
    width, ctx, vocab, embed = 16, 5, 12, 8

    class LayerNorm(nn.LayerNorm):
        def forward(self, x):
            if ln_dtype is None:
                return super().forward(x)
            return super().forward(x.type(ln_dtype)).type(x.dtype)

    class QuickGELU(nn.Module):
        def forward(self, x):
            return x * lib.sigmoid(1.702 * x)

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, planes: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.avgpool = nn.AvgPool2d(2)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = nn.Sequential(
                OrderedDict(
                    [
                        ("-1", nn.AvgPool2d(2)),
                        ("0", nn.Conv2d(cin, planes * 4, 1, bias=False)),
                        ("1", nn.BatchNorm2d(planes * 4)),
                    ]
                )
            )

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.avgpool(self.relu(self.bn2(self.conv2(out))))
            out = self.bn3(self.conv3(out))
            out += self.downsample(x)
            return self.relu(out)

    class AttentionPool2d(nn.Module):
        def __init__(self, spacial: int, dim: int, heads: int, out: int) -> None:
            super().__init__()
            self.positional_embedding = nn.Parameter(lib.randn(spacial**2 + 1, dim) / dim**0.5)
            self.k_proj, self.q_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.v_proj, self.c_proj = nn.Linear(dim, dim), nn.Linear(dim, out)
            self.num_heads = heads

        def forward(self, x):
            x = x.flatten(start_dim=2).permute(2, 0, 1)
            x = lib.cat([x.mean(dim=0, keepdim=True), x], dim=0)
            x = x + self.positional_embedding[:, None, :].to(x.dtype)
            x, _ = F.multi_head_attention_forward(
                query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1],
                num_heads=self.num_heads, q_proj_weight=self.q_proj.weight,
                k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
                in_proj_weight=None,
                in_proj_bias=lib.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
                bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0,
                out_proj_weight=self.c_proj.weight, out_proj_bias=self.c_proj.bias,
                use_separate_proj_weight=True, training=self.training, need_weights=False,
            )  # fmt: skip
            return x.squeeze(0)

    class Block(nn.Module):
        def __init__(self, mask: Any) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(width, 2)
            self.ln_1, self.ln_2 = LayerNorm(width), LayerNorm(width)
            self.mlp = nn.Sequential(
                OrderedDict(
                    [
                        ("c_fc", nn.Linear(width, width * 4)),
                        ("gelu", QuickGELU()),
                        ("c_proj", nn.Linear(width * 4, width)),
                    ]
                )
            )
            self.attn_mask = mask

        def forward(self, x):
            mask = self.attn_mask.to(dtype=x.dtype, device=x.device)
            h = self.ln_1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
            return x + self.mlp(self.ln_2(x))

    class CLIP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(4),
                nn.ReLU(inplace=True), nn.AvgPool2d(2),
            )  # fmt: skip
            self.layer = Bottleneck(4, 4)
            self.attnpool = AttentionPool2d(2, 16, 4, embed)
            mask = lib.empty(ctx, ctx)
            mask.fill_(float("-inf"))
            mask.triu_(1)
            self.transformer = nn.Sequential(Block(mask), Block(mask))
            self.token_embedding = nn.Embedding(vocab, width)
            self.positional_embedding = nn.Parameter(lib.empty(ctx, width))
            self.ln_final = LayerNorm(width)
            self.text_projection = nn.Parameter(lib.empty(width, embed))
            self.logit_scale = nn.Parameter(lib.ones([]) * np.log(1 / 0.07))
            nn.init.normal_(self.positional_embedding, std=0.01)
            nn.init.normal_(self.text_projection, std=width**-0.5)

        def encode_text(self, text):
            x = self.token_embedding(text) + self.positional_embedding
            x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
            x = self.ln_final(x)
            return x[lib.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

        def forward(self, image, text):
            img = self.attnpool(self.layer(self.stem(image.type(self.stem[0].weight.dtype))))
            txt = self.encode_text(text)
            img = img / img.norm(dim=1, keepdim=True)
            txt = txt / txt.norm(dim=1, keepdim=True)
            logits = self.logit_scale.exp() * img @ txt.t()
            return logits, logits.t()

    return CLIP().double()


def _clip_step(lib: Any, m: Any, opt: Any, image: Any, text: Any) -> tuple[Any, Any]:
    opt.zero_grad()
    per_image, per_text = m(image, text)
    labels = lib.arange(per_image.shape[0])
    F = lib.nn.functional
    loss = (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2
    loss.backward()
    opt.step()
    with lib.no_grad():
        m.logit_scale.clamp_(0, 4.6052)
    return per_image, loss


def test_clip_contrastive_step_trains_as_in_torch() -> None:
    # (SGD: Adam divides the key bias's gradient, zero up to rounding since softmax ignores
    # a shift shared by all keys, by its own root mean square, so rounding noise of 1e-17
    # becomes steps of lr's size in either library)
    rng = np.random.default_rng(3)
    image, text = rng.standard_normal((3, 3, 16, 16)), rng.integers(0, 12, (3, 5))
    _train_alike(
        _clip,
        lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
        _clip_step,
        (image, text),
    )


def test_clip_float32_layer_norm_of_a_double_model_raises_as_torch() -> None:
    # CLIP's LayerNorm subclass runs in float32; after .double() its parameters are float64,
    # which PyTorch refuses. ferrograd computed the normalisation in float64 instead
    rng = np.random.default_rng(4)
    image, text = rng.standard_normal((2, 3, 16, 16)), rng.integers(0, 12, (2, 5))
    for lib in (torch, fg):
        m = _clip(lib, ln_dtype=lib.float32)
        with pytest.raises(RuntimeError, match="dtype"):
            m(lib.tensor(image), lib.tensor(text))


_NORMS = {
    "layer_norm": lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (3,), w[:3], b[:3]),
    "group_norm": lambda lib, x, w, b: lib.nn.functional.group_norm(x, 2, w, b),
    "batch_norm": lambda lib, x, w, b: lib.nn.functional.batch_norm(
        x, None, None, w, b, training=True
    ),
    "batch_norm_eval": lambda lib, x, w, b: lib.nn.functional.batch_norm(x, b, w, training=False),
    "instance_norm": lambda lib, x, w, b: lib.nn.functional.instance_norm(x, weight=w, bias=b),
}


@pytest.mark.parametrize("op", sorted(_NORMS))
@pytest.mark.parametrize(
    ("xdt", "pdt", "ok"),
    [
        ("float32", "float64", False),
        ("float64", "float32", False),
        ("float32", "float16", False),
        ("float16", "float64", False),
        ("float16", "float32", True),
        ("bfloat16", "float32", True),
        ("float64", "float64", True),
    ],
)
def test_normalisation_parameters_must_share_the_input_dtype(op, xdt, pdt, ok) -> None:
    # a float16/bfloat16 input takes float32 parameters; any other mix raises, as PyTorch's
    xv = np.random.default_rng(5).standard_normal((2, 4, 3))
    for lib in (torch, fg):
        x = lib.tensor(xv).to(getattr(lib, xdt))
        w, b = lib.ones(4, dtype=getattr(lib, pdt)), lib.zeros(4, dtype=getattr(lib, pdt)) + 0.5
        if ok:
            assert str(_NORMS[op](lib, x, w, b).dtype).endswith(xdt)
        else:
            with pytest.raises(RuntimeError, match="dtype|type"):
                _NORMS[op](lib, x, w, b)
    if not ok:
        name = op.replace("_eval", "")
        with pytest.raises(fg.DTypeError, match=rf"{name}: \w+ has dtype {pdt}, expected"):
            _NORMS[op](fg, fg.tensor(xv).to(getattr(fg, xdt)), w, b)


def test_rms_norm_result_keeps_the_input_dtype_under_a_wider_weight() -> None:
    xv = np.random.default_rng(6).standard_normal((2, 5))
    wv = np.random.default_rng(7).standard_normal(5)
    out = {}
    for lib in (torch, fg):
        x = lib.tensor(xv, dtype=lib.float32, requires_grad=True)
        w = lib.tensor(wv, requires_grad=True)
        y = lib.nn.functional.rms_norm(x, (5,), w)
        (y * y).sum().backward()
        out[lib] = y, x.grad, w.grad
    assert out[fg][0].dtype == fg.float32
    for a, b in zip(out[torch], out[fg], strict=True):
        assert str(a.dtype).endswith(str(b.dtype).split(".")[-1])
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------ perceiver-pytorch


def _perceiver(lib: Any) -> Any:
    """perceiver-pytorch's Perceiver at toy sizes: Fourier-encoded pixel positions, masked
    cross-attention (``masked_fill_`` of the similarities in place), inverted attention
    (softmax over queries, then an L1 ``F.normalize``), GEGLU feed-forwards, weight-tied
    latent blocks, einops' ``Reduce`` layer (``einops.layers.ferrograd`` in the port)."""
    nn, F = lib.nn, lib.nn.functional
    reduce_layer = __import__(f"einops.layers.{lib.__name__}", fromlist=["Reduce"]).Reduce
    rearrange, repeat = einops.rearrange, einops.repeat
    bands, latent, nlat = 2, 8, 3

    class GEGLU(nn.Module):
        def forward(self, x):
            x, gates = x.chunk(2, dim=-1)
            return x * F.gelu(gates)

    class PreNorm(nn.Module):
        def __init__(self, dim: int, fn: Any, context_dim: int | None = None) -> None:
            super().__init__()
            self.fn, self.norm = fn, nn.LayerNorm(dim)
            self.norm_context = nn.LayerNorm(context_dim) if context_dim else None

        def forward(self, x, **kwargs):
            if self.norm_context is not None:
                kwargs.update(context=self.norm_context(kwargs["context"]))
            return self.fn(self.norm(x), **kwargs)

    def ff() -> Any:
        return PreNorm(
            latent,
            nn.Sequential(nn.Linear(latent, latent * 4), GEGLU(), nn.Linear(latent * 2, latent)),
        )

    class Attention(nn.Module):
        def __init__(self, context_dim: int, heads: int) -> None:
            super().__init__()
            self.heads, self.scale = heads, 4**-0.5
            self.to_q = nn.Linear(latent, 4 * heads, bias=False)
            self.to_kv = nn.Linear(context_dim, 8 * heads, bias=False)
            self.to_out = nn.Linear(4 * heads, latent)

        def forward(self, x, context=None, mask=None, inverted=False):
            context = x if context is None else context
            k, v = self.to_kv(context).chunk(2, dim=-1)
            q, k, v = (
                rearrange(t, "b n (h d) -> (b h) n d", h=self.heads) for t in (self.to_q(x), k, v)
            )
            sim = lib.einsum("b i d, b j d -> b i j", q, k) * self.scale
            if mask is not None:
                mask = repeat(
                    rearrange(mask, "b ... -> b (...)"), "b j -> (b h) () j", h=self.heads
                )
                sim.masked_fill_(~mask, -lib.finfo(sim.dtype).max)
            if inverted:
                attn = sim.softmax(dim=-2)
                if mask is not None:
                    attn = attn.masked_fill(~mask, 0.0)
                attn = F.normalize(attn, p=1, dim=-1, eps=1e-8)
            else:
                attn = sim.softmax(dim=-1)
            out = lib.einsum("b i j, b j d -> b i d", attn, v)
            return self.to_out(rearrange(out, "(b h) n d -> b n (h d)", h=self.heads))

    class Perceiver(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cdim = 2 * (2 * bands + 1) + 3
            self.latents = nn.Parameter(lib.randn(nlat, latent))
            latent_attn, latent_ff = PreNorm(latent, Attention(latent, 2)), ff()
            self.layers = nn.ModuleList(
                [
                    nn.ModuleList(
                        [PreNorm(latent, Attention(cdim, 1), cdim), ff(), latent_attn, latent_ff]
                    )
                    for _ in range(2)
                ]
            )
            self.to_logits = nn.Sequential(
                reduce_layer("b n d -> b d", "mean"), nn.LayerNorm(latent), nn.Linear(latent, 5)
            )

        def forward(self, data, mask=None):
            b, *axis, _ = data.shape
            pos = lib.stack(
                lib.meshgrid(
                    *[lib.linspace(-1.0, 1.0, steps=n, dtype=data.dtype) for n in axis],
                    indexing="ij",
                ),
                dim=-1,
            )
            x = rearrange(pos, "... -> ... 1")
            scales = lib.linspace(1.0, 5 / 2, bands, dtype=x.dtype)[
                (*((None,) * (x.ndim - 1)), Ellipsis)
            ]
            enc = lib.cat([(x * scales * np.pi).sin(), (x * scales * np.pi).cos(), x], dim=-1)
            enc = repeat(rearrange(enc, "... n d -> ... (n d)"), "... -> b ...", b=b)
            data = rearrange(lib.cat((data, enc), dim=-1), "b ... d -> b (...) d")
            x = repeat(self.latents, "n d -> b n d", b=b)
            for i, (cross, cross_ff, attn, attn_ff) in enumerate(self.layers):
                x = cross(x, context=data, mask=mask, inverted=i == 1) + x
                x = cross_ff(x) + x
                x = attn(x) + x
                x = attn_ff(x) + x
            return self.to_logits(x)

    return Perceiver().double()


def test_perceiver_masked_and_inverted_cross_attention_trains_as_in_torch() -> None:
    rng = np.random.default_rng(8)
    data, labels = rng.standard_normal((2, 3, 4, 3)), rng.integers(0, 5, (2,))
    mask = rng.random((2, 3, 4)) > 0.3

    def step(lib: Any, m: Any, opt: Any, data: Any, labels: Any, mask: Any) -> tuple[Any, Any]:
        out = m(data, mask=mask)
        loss = lib.nn.functional.cross_entropy(out, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return out, loss

    _train_alike(
        _perceiver,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3),
        step,
        (data, labels, mask),
    )


# ----------------------------------------------------------------------- performer-pytorch


def _orthogonal_features(lib: Any, rows: int, cols: int, device: Any = None) -> Any:
    """performer-pytorch's Gaussian orthogonal random matrix: QR of Gaussian blocks, moved
    ``.to(device)`` with its default ``device=None``, rows scaled by Gaussian norms."""
    blocks = []
    for _ in range(-(-rows // cols)):
        q, _r = lib.linalg.qr(lib.randn((cols, cols), device=device).cpu(), mode="reduced")
        blocks.append(q.to(device).t())
    final = lib.cat(blocks)[:rows]
    return lib.diag(lib.randn((rows, cols), device=device).norm(dim=1)) @ final


def _performer(lib: Any) -> Any:
    """performer-pytorch's PerformerLM at toy sizes: FAVOR+ softmax-kernel linear attention
    over a random orthogonal projection (a buffer, copied across with the weights), rotary
    position embeddings, GEGLU feed-forward, a masked value fill in place, tied embeddings."""
    nn = lib.nn
    rearrange, repeat = einops.rearrange, einops.repeat
    dim, heads, dh, nf, vocab, seq = 8, 2, 4, 6, 11, 8

    def softmax_kernel(data, proj, is_query, eps=1e-4):
        norm = data.shape[-1] ** -0.25
        projection = repeat(proj, "j d -> b h j d", b=data.shape[0], h=data.shape[1]).type_as(data)
        dash = lib.einsum("...id,...jd->...ij", norm * data, projection)
        diag = ((data**2).sum(dim=-1) / 2.0 * norm**2).unsqueeze(dim=-1)
        dims = -1 if is_query else (-1, -2)
        peak = lib.amax(dash, dim=dims, keepdim=True).detach()
        return (nf**-0.5 * (lib.exp(dash - diag - peak) + eps)).type_as(data)

    def rotate_every_two(x):
        x1, x2 = rearrange(x, "... (d j) -> ... d j", j=2).unbind(dim=-1)
        return rearrange(lib.stack((-x2, x1), dim=-1), "... d j -> ... (d j)")

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("projection_matrix", _orthogonal_features(lib, nf, dh))
            self.to_q, self.to_k = nn.Linear(dim, heads * dh), nn.Linear(dim, heads * dh)
            self.to_v, self.to_out = nn.Linear(dim, heads * dh), nn.Linear(heads * dh, dim)

        def forward(self, x, pos_emb, mask):
            q, k, v = (
                rearrange(f(x), "b n (h d) -> b h n d", h=heads)
                for f in (self.to_q, self.to_k, self.to_v)
            )
            v.masked_fill_(~mask[:, None, :, None], 0.0)
            sin, cos = rearrange(pos_emb, "() n (j d) -> n j d", j=2).unbind(dim=-2)
            sin, cos = (repeat(t, "b n -> b (n j)", j=2) for t in (sin, cos))
            q, k = ((t * cos) + (rotate_every_two(t) * sin) for t in (q, k))
            q = softmax_kernel(q, self.projection_matrix, True)
            k = softmax_kernel(k, self.projection_matrix, False)
            d_inv = 1.0 / lib.einsum("...nd,...d->...n", q, k.sum(dim=-2).type_as(q))
            context = lib.einsum("...nd,...ne->...de", k, v)
            out = lib.einsum("...de,...nd,...n->...ne", context, q, d_inv)
            return self.to_out(rearrange(out, "b h n d -> b n (h d)"))

    class FeedForward(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.w2, self.act = nn.Linear(dim, dim * 8), nn.Linear(dim * 4, dim), nn.GELU()

        def forward(self, x):
            x, v = self.w1(x).chunk(2, dim=-1)
            return self.w2(self.act(x) * v)

    def sinusoid(d: int) -> Any:
        inv_freq = 1.0 / (10000 ** (lib.arange(0, d, 2).double() / d))
        inp = lib.einsum("i,j->ij", lib.arange(0, seq, dtype=lib.float64), inv_freq)
        return lib.cat((inp.sin(), inp.cos()), dim=-1)

    class PerformerLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token_emb = nn.Embedding(vocab, dim)
            self.register_buffer("pos", sinusoid(dim))
            self.register_buffer("layer_pos", sinusoid(dh))
            self.layers = nn.ModuleList(
                [
                    nn.ModuleList(
                        [nn.LayerNorm(dim), Attention(), nn.LayerNorm(dim), FeedForward()]
                    )
                    for _ in range(2)
                ]
            )
            self.norm = nn.LayerNorm(dim)

        def forward(self, ids, mask):
            x = self.token_emb(ids)
            x += self.pos[None, : x.shape[1], :].to(x)
            pos_emb = self.layer_pos[None, : x.shape[1], :].to(x)
            for n1, attn, n2, ff in self.layers:
                x = attn(n1(x), pos_emb, mask) + x
                x = ff(n2(x)) + x
            return self.norm(x) @ self.token_emb.weight.t()

    return PerformerLM().double()


def test_performer_favor_attention_trains_as_in_torch() -> None:
    rng = np.random.default_rng(9)
    ids, target = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))
    mask = rng.random((2, 6)) > 0.2

    def step(lib: Any, m: Any, opt: Any, ids: Any, target: Any, mask: Any) -> tuple[Any, Any]:
        out = m(ids, mask)
        loss = lib.nn.functional.cross_entropy(out.reshape(-1, 11), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return out, loss

    _train_alike(
        _performer,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3),
        step,
        (ids, target, mask),
    )


def test_orthogonal_features_match_torch_from_the_same_draws() -> None:
    # with the Gaussian draws fixed (copied across), the QR-built projection agrees
    rng = np.random.default_rng(10)
    draws = [rng.standard_normal((4, 4)) for _ in range(2)] + [rng.standard_normal((6, 4))]
    out = []
    for lib in (torch, fg):
        it = iter(draws)
        randn = lambda shape, device=None, lib=lib, it=it: lib.tensor(next(it), device=device)
        shim = type("Lib", (), {"randn": staticmethod(randn)})
        for name in ("linalg", "cat", "diag"):
            setattr(shim, name, getattr(lib, name))
        out.append(_np(_orthogonal_features(shim, 6, 4)))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("args", [(None,), (None, None), ("cpu", None), (None, "float16")])
def test_tensor_to_none_changes_nothing_as_torch(args: tuple) -> None:
    # performer-pytorch calls q.to(device) with device=None: PyTorch keeps the tensor as it
    # is, ferrograd read the None as a dtype (NumPy's default) and cast to float64
    for lib in (torch, fg):
        a = lib.ones(3, dtype=lib.float32)
        call = tuple(getattr(lib, v) if v == "float16" else v for v in args)
        y = a.to(*call)
        assert str(y.dtype).endswith("float16" if "float16" in args else "float32")
        np.testing.assert_array_equal(_np(y.float()), np.ones(3))


# ------------------------------------------------------------------------- transformer-xl


def _transformer_xl(lib: Any) -> Any:
    """transformer-xl's MemTransformerLM (attn_type 0) at toy sizes: relative positional
    attention with the zero-pad-and-view ``_rel_shift``, a bool causal mask filled through
    ``.float()`` and back, memories concatenated in front and updated under ``no_grad``, an
    adaptive embedding (``index_copy_`` of per-cluster projections, scaled in place) and a
    projected adaptive log-softmax (head with cluster logits, ``nonzero().squeeze()``
    gathers, a projected tail)."""
    nn, F = lib.nn, lib.nn.functional
    cutoffs, d, nh, dh, mem_len = [8, 20], 8, 2, 4, 4
    ends = [0] + cutoffs

    class RelAttn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv_net = nn.Linear(d, 3 * nh * dh, bias=False)
            self.r_net = nn.Linear(d, nh * dh, bias=False)
            self.o_net = nn.Linear(nh * dh, d, bias=False)
            self.layer_norm = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 16), nn.ReLU(inplace=True), nn.Linear(16, d))
            self.ff_norm = nn.LayerNorm(d)

        @staticmethod
        def _rel_shift(x):
            zero_pad = lib.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
            padded = lib.cat([zero_pad, x], dim=1).view(x.size(1) + 1, x.size(0), *x.size()[2:])
            return padded[1:].view_as(x)

        def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
            qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
            heads = self.qkv_net(lib.cat([mems, w], 0))
            q, k, v = lib.chunk(heads, 3, dim=-1)
            q, klen = q[-qlen:].view(qlen, bsz, nh, dh), k.size(0)
            k, v = k.view(klen, bsz, nh, dh), v.view(klen, bsz, nh, dh)
            r_k = self.r_net(r).view(rlen, nh, dh)
            ac = lib.einsum("ibnd,jbnd->ijbn", (q + r_w_bias, k))
            bd = self._rel_shift(lib.einsum("ibnd,jnd->ijbn", (q + r_r_bias, r_k)))
            score = ac + bd
            score.mul_(dh**-0.5)
            if attn_mask.any().item():
                score = score.float().masked_fill(attn_mask[:, :, :, None], -float("inf"))
                score = score.type_as(ac)
            prob = F.softmax(score, dim=1)
            vec = lib.einsum("ijbn,jbnd->ibnd", (prob, v)).contiguous().view(qlen, bsz, nh * dh)
            out = self.layer_norm(w + self.o_net(vec))
            return self.ff_norm(out + self.ff(out))

    class MemTransformerLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb_layers = nn.ModuleList()
            self.emb_projs, self.out_projs = nn.ParameterList(), nn.ParameterList()
            self.out_layers = nn.ModuleList()
            for i in range(len(cutoffs)):
                di = d // 2**i
                self.emb_layers.append(nn.Embedding(ends[i + 1] - ends[i], di))
                self.emb_projs.append(nn.Parameter(lib.randn(d, di) * 0.1))
                self.out_layers.append(nn.Linear(di, ends[i + 1] - ends[i]))
                self.out_layers[i].weight = self.emb_layers[i].weight
                self.out_projs.append(
                    self.emb_projs[i] if i else nn.Parameter(lib.randn(d, di) * 0.1)
                )
            self.cluster_weight = nn.Parameter(lib.randn(1, d) * 0.1)
            self.cluster_bias = nn.Parameter(lib.zeros(1))
            self.layers = nn.ModuleList([RelAttn(), RelAttn()])
            self.register_buffer("inv_freq", 1 / (10000 ** (lib.arange(0.0, d, 2.0) / d)))
            self.r_w_bias = nn.Parameter(lib.randn(nh, dh) * 0.1)
            self.r_r_bias = nn.Parameter(lib.randn(nh, dh) * 0.1)

        def embed(self, inp):
            flat = inp.view(-1)
            out = lib.zeros([flat.size(0), d], dtype=self.cluster_weight.dtype)
            for i in range(len(cutoffs)):
                idx = ((flat >= ends[i]) & (flat < ends[i + 1])).nonzero().squeeze()
                if idx.numel() == 0:
                    continue
                e = self.emb_layers[i](flat.index_select(0, idx) - ends[i])
                out.index_copy_(0, idx, F.linear(e, self.emb_projs[i]))
            out = out.view(*inp.size(), d)
            out.mul_(d**0.5)
            return out

        def crit(self, hidden, target):
            def logit(h, weight, bias, proj):
                return F.linear(F.linear(h, proj.t().contiguous()), weight, bias=bias)

            w0 = lib.cat([self.out_layers[0].weight, self.cluster_weight], dim=0)
            b0 = lib.cat([self.out_layers[0].bias, self.cluster_bias], dim=0)
            head = F.log_softmax(logit(hidden, w0, b0, self.out_projs[0]), dim=1)
            nll = lib.zeros_like(target, dtype=hidden.dtype, device=hidden.device)
            offset = 0
            for i in range(len(cutoffs)):
                idx = ((target >= ends[i]) & (target < ends[i + 1])).nonzero().squeeze()
                if idx.numel() == 0:
                    continue
                t_i, head_i = target.index_select(0, idx) - ends[i], head.index_select(0, idx)
                if i == 0:
                    lp = head_i.gather(1, t_i[:, None]).squeeze(1)
                else:
                    layer = self.out_layers[i]
                    tail = logit(
                        hidden.index_select(0, idx), layer.weight, layer.bias, self.out_projs[i]
                    )
                    lp = head_i[:, -i] + F.log_softmax(tail, dim=1).gather(1, t_i[:, None]).squeeze(
                        1
                    )
                nll[offset : offset + lp.size(0)].copy_(-lp)
                offset += lp.size(0)
            return nll

        def forward(self, data, target, *mems):
            if not mems:
                mems = [lib.empty(0, dtype=self.r_w_bias.dtype) for _ in range(3)]
            qlen, mlen = data.size(0), mems[0].size(0)
            klen = mlen + qlen
            x = self.embed(data)
            mask = lib.triu(x.new_ones(qlen, klen), diagonal=1 + mlen).bool()[:, :, None]
            pos = lib.ger(lib.arange(klen - 1, -1, -1.0, dtype=x.dtype), self.inv_freq)
            pos = lib.cat([pos.sin(), pos.cos()], dim=-1)[:, None, :]
            hids = [x]
            for i, layer in enumerate(self.layers):
                x = layer(x, pos, self.r_w_bias, self.r_r_bias, mask, mems[i])
                hids.append(x)
            with lib.no_grad():
                end = mlen + qlen
                new_mems = [
                    lib.cat([m, h], dim=0)[max(0, end - mem_len) : end].detach()
                    for m, h in zip(mems, hids)
                ]
            loss = self.crit(x.view(-1, d), target.view(-1)).view(qlen, -1)
            return [loss, *new_mems]

    return MemTransformerLM().double()


def test_transformer_xl_trains_with_memories_as_in_torch() -> None:
    # (not under fg.trace: the attention reads attn_mask.any().item() to choose a branch)
    seq = np.random.default_rng(11).integers(0, 20, (13, 2))
    for mode in ("train", "eval"):
        torch.manual_seed(0)
        tm, fm = _transformer_xl(torch), _transformer_xl(fg)
        _copy_weights(tm, fm)
        state = {}
        for lib, m in ((torch, tm), (fg, fm)):
            getattr(m, mode)()
            opt = lib.optim.Adam(m.parameters(), lr=1e-3)
            state[lib] = m, opt, lib.optim.lr_scheduler.CosineAnnealingLR(opt, 10), ()
        for i in range(3):
            got = {}
            for lib in (torch, fg):
                m, opt, sched, mems = state[lib]
                ret = m(
                    lib.tensor(seq[4 * i : 4 * i + 4]),
                    lib.tensor(seq[4 * i + 1 : 4 * i + 5]),
                    *mems,
                )
                loss = ret[0].mean()
                opt.zero_grad()
                loss.backward()
                lib.nn.utils.clip_grad_norm_(m.parameters(), 0.25)
                opt.step()
                sched.step()
                state[lib] = m, opt, sched, tuple(ret[1:])
                got[lib] = [ret[0], *ret[1:]]
            for j, (a, b) in enumerate(zip(got[torch], got[fg], strict=True)):
                _close(f"{mode} step {i}: output {j}", a, b)
            if i == 0:
                _same_state(f"{mode} step 0", tm, fm)
        _same_state(f"{mode} after 3 steps", tm, fm)


@pytest.mark.parametrize(
    ("mode", "align_corners"),
    [
        ("bilinear", True),
        ("bilinear", False),
        ("bicubic", False),
        ("nearest", None),
        ("area", None),
    ],
)
def test_traced_upsample_does_not_report_its_resampling_matrices_as_fixed_data(
    mode: str, align_corners: bool | None
) -> None:
    # Pytorch-UNet's bilinear Upsample under fg.trace warned that the function "builds
    # tensors from Python data", pointing at interpolate's own shape-derived matrices
    xv = np.random.default_rng(12).standard_normal((1, 2, 5, 40))
    up = fg.nn.Upsample(scale_factor=2, mode=mode, align_corners=align_corners)
    traced = fg.trace(lambda x: up(x) * 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.TraceWarning)
        got = [traced(fg.tensor(v)).numpy() for v in (xv, 2 * xv)]
    tup = torch.nn.Upsample(scale_factor=2, mode=mode, align_corners=align_corners)
    for v, g in zip((xv, 2 * xv), got, strict=True):
        np.testing.assert_allclose(g, tup(torch.tensor(v)).numpy(), rtol=1e-10, atol=1e-12)


def test_conversions_that_change_nothing_return_the_tensor_itself() -> None:
    # PyTorch returns self: a Parameter moved to its own device stays that Parameter (and
    # stays registered when assigned back); ferrograd returned a new plain Tensor
    for lib in (torch, fg):
        m = lib.nn.Linear(2, 2)
        w = m.weight
        for call in (("cpu",), (lib.float32,), (w,), (None,), ()):
            assert w.to(*call) is w
        assert w.to("cpu", copy=True) is not w
        assert w.to(lib.float64) is not w
        m.weight = m.weight.to("cpu")
        assert isinstance(m.weight, lib.nn.Parameter)
        assert len(list(m.parameters())) == 2
        for name in ("cpu", "float", "contiguous"):
            assert getattr(w, name)() is w
        assert w.type(lib.float32) is w and w.type_as(w) is w and w.double() is not w
        i = lib.ones(2, dtype=lib.int64)
        assert i.long() is i and i.int() is not i
        m.bias = m.bias.float()
        assert isinstance(m.bias, lib.nn.Parameter)


def test_where_takes_a_uint8_condition_with_a_warning_as_torch() -> None:
    # transformer-era masks are uint8 (``.byte()``): PyTorch's where reads them as bool with
    # a deprecation warning; ferrograd raised, naming the condition's dtype as int64
    cv, xv = np.array([[0, 3], [1, 0]], dtype=np.uint8), np.array([[1.0, 2.0], [3.0, 4.0]])
    got = {}
    for lib in (torch, fg):
        c, x = lib.tensor(cv), lib.tensor(xv, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = lib.where(c, x, 2 * x)
            z = x.where(c, -x)
        # (PyTorch warns once per process)
        assert lib is torch or len([w for w in caught if "uint8 condition" in str(w.message)]) == 2
        (y * z).sum().backward()
        got[lib] = y, z, x.grad
        with pytest.raises(RuntimeError, match="condition"):
            lib.where(x, x, x)
    for a, b in zip(got[torch], got[fg], strict=True):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-12)
