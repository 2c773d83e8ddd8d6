"""MegEngine's official classification models and training step (ResNet's BasicBlock,
ShuffleNetV2's blocks, GradManager + SGD + cross_entropy) ported by renaming the imports
only, checked against the same program in PyTorch from identical float64 weights; and the
MegEngine names such a port meets at import time (``hub.pretrained``, ``logger``) and in
its layers (``conv_mode``/``compute_mode``, ConvTranspose2d's argument order)."""

import io
import logging

import ferrograd as mge
import ferrograd.functional as F
import ferrograd.module as M
import ferrograd.optimizer as optim
import numpy as np
import pytest
from ferrograd import autodiff, hub, jit


@pytest.fixture
def float64_default():
    old = mge.get_default_dtype()
    mge.set_default_dtype(mge.float64)
    try:
        yield
    finally:
        mge.set_default_dtype(old)


# --------------------------------------------------- the model, as MegEngine's sources write it


class ShuffleV2Block(M.Module):
    def __init__(self, inp, oup, mid_channels, *, ksize, stride):
        super().__init__()
        self.stride = stride
        pad = ksize // 2
        outputs = oup - inp
        self.branch_main = M.Sequential(
            M.Conv2d(inp, mid_channels, 1, 1, 0, bias=False),
            M.BatchNorm2d(mid_channels),
            M.ReLU(),
            M.Conv2d(
                mid_channels, mid_channels, ksize, stride, pad, groups=mid_channels, bias=False
            ),
            M.BatchNorm2d(mid_channels),
            M.Conv2d(mid_channels, outputs, 1, 1, 0, bias=False),
            M.BatchNorm2d(outputs),
            M.ReLU(),
        )
        if stride == 2:
            self.branch_proj = M.Sequential(
                M.Conv2d(inp, inp, ksize, stride, pad, groups=inp, bias=False),
                M.BatchNorm2d(inp),
                M.Conv2d(inp, inp, 1, 1, 0, bias=False),
                M.BatchNorm2d(inp),
                M.ReLU(),
            )
        else:
            self.branch_proj = None

    def forward(self, old_x):
        if self.stride == 1:
            x_proj, x = self.channel_shuffle(old_x)
            return F.concat((x_proj, self.branch_main(x)), 1)
        return F.concat((self.branch_proj(old_x), self.branch_main(old_x)), 1)

    def channel_shuffle(self, x):
        batchsize, num_channels, height, width = x.shape
        x = x.reshape(batchsize * num_channels // 2, 2, height * width)
        x = F.transpose(x, (1, 0, 2))
        x = x.reshape(2, -1, num_channels // 2, height, width)
        return x[0], x[1]


class BasicBlock(M.Module):
    def __init__(self, in_channels, channels, stride=1, norm=M.BatchNorm2d):
        super().__init__()
        self.conv1 = M.Conv2d(in_channels, channels, 3, stride, padding=1, bias=False)
        self.bn1 = norm(channels)
        self.conv2 = M.Conv2d(channels, channels, 3, 1, padding=1, bias=False)
        self.bn2 = norm(channels)
        self.downsample = M.Identity()

    def forward(self, x):
        identity = x
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        x += self.downsample(identity)
        return F.relu(x)


class Net(M.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.first_conv = M.Sequential(
            M.Conv2d(3, 8, 3, 2, 1, bias=False), M.BatchNorm2d(8), M.ReLU()
        )
        self.maxpool = M.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.features = M.Sequential(
            ShuffleV2Block(8, 16, mid_channels=8, ksize=3, stride=2),
            ShuffleV2Block(8, 16, mid_channels=8, ksize=3, stride=1),
        )
        self.res = BasicBlock(16, 16)
        self.fc = M.Linear(16, num_classes)

    def forward(self, x):
        x = self.maxpool(self.first_conv(x))
        x = self.res(self.features(x))
        x = F.avg_pool2d(x, 2)
        x = F.flatten(x, 1)
        return self.fc(x)


def _torch_net(torch):
    nn = torch.nn

    class TShuffle(nn.Module):
        def __init__(self, inp, oup, mid, stride):
            super().__init__()
            self.stride = stride
            out = oup - inp
            self.branch_main = nn.Sequential(
                nn.Conv2d(inp, mid, 1, 1, 0, bias=False),
                nn.BatchNorm2d(mid),
                nn.ReLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                nn.BatchNorm2d(mid),
                nn.Conv2d(mid, out, 1, 1, 0, bias=False),
                nn.BatchNorm2d(out),
                nn.ReLU(),
            )
            if stride == 2:
                self.branch_proj = nn.Sequential(
                    nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
                    nn.BatchNorm2d(inp),
                    nn.Conv2d(inp, inp, 1, 1, 0, bias=False),
                    nn.BatchNorm2d(inp),
                    nn.ReLU(),
                )

        def forward(self, x):
            if self.stride == 1:
                n, c, h, w = x.shape
                x = x.reshape(n * c // 2, 2, h * w).permute(1, 0, 2).reshape(2, -1, c // 2, h, w)
                return torch.cat((x[0], self.branch_main(x[1])), 1)
            return torch.cat((self.branch_proj(x), self.branch_main(x)), 1)

    class TBasic(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, 1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + x)

    class TNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.first_conv = nn.Sequential(
                nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
            )
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.features = nn.Sequential(TShuffle(8, 16, 8, 2), TShuffle(8, 16, 8, 1))
            self.res = TBasic(16)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.res(self.features(self.maxpool(self.first_conv(x))))
            return self.fc(torch.flatten(torch.nn.functional.avg_pool2d(x, 2), 1))

    return TNet().double()


def _copy_to_torch(model, tmodel, torch):
    tsd = tmodel.state_dict()
    msd = model.state_dict()
    assert list(msd) == list(tsd)
    with torch.no_grad():
        for k, v in msd.items():
            tsd[k].copy_(torch.from_numpy(v.numpy().reshape(tuple(tsd[k].shape))))


def _assert_same_state(model, tmodel):
    tsd = tmodel.state_dict()
    for k, v in model.state_dict().items():
        want = tsd[k].numpy()
        np.testing.assert_allclose(
            v.numpy().reshape(want.shape), want, rtol=1e-8, atol=1e-12, err_msg=k
        )


def _batches(n):
    rng = np.random.RandomState(0)
    return [(rng.randn(4, 3, 16, 16), rng.randint(0, 10, size=4)) for _ in range(n)]


def test_batchnorm_parameters_and_statistics_follow_the_default_dtype(float64_default):
    bn = M.BatchNorm2d(3)
    for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var):
        assert t.dtype == mge.float64
        assert tuple(t.shape) == (1, 3, 1, 1)
    assert M.PReLU(3).weight.dtype == mge.float64


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "jit.trace"])
def test_renamed_megengine_training_step_matches_torch(float64_default, tmp_path, traced):
    torch = pytest.importorskip("torch")
    mge.manual_seed(0)
    model = Net()
    tmodel = _torch_net(torch)
    _copy_to_torch(model, tmodel, torch)

    gm = autodiff.GradManager().attach(model.parameters())
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def train_step(image, label):
        with gm:
            logits = model(image)
            loss = F.nn.cross_entropy(logits, label, label_smooth=0.1)
            gm.backward(loss)
            grads = [p.grad.detach() * 1 for p in model.parameters()]
            opt.step().clear_grad()
        return logits, loss, grads

    if traced:
        train_step = jit.trace(train_step, symbolic=True)

    for image, label in _batches(3):
        logits, loss, grads = train_step(mge.tensor(image), mge.tensor(label, dtype="int32"))

        tlogits = tmodel(torch.from_numpy(image))
        tloss = torch.nn.functional.cross_entropy(
            tlogits, torch.from_numpy(label), label_smoothing=0.1
        )
        topt.zero_grad()
        tloss.backward()
        topt.step()

        np.testing.assert_allclose(logits.numpy(), tlogits.detach().numpy(), rtol=1e-8)
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
        for g, (n, p) in zip(grads, tmodel.named_parameters()):
            want = p.grad.numpy()
            np.testing.assert_allclose(
                g.numpy().reshape(want.shape), want, rtol=1e-8, atol=1e-12, err_msg=n
            )
        _assert_same_state(model, tmodel)

    model.eval()
    tmodel.eval()
    x = np.random.RandomState(1).randn(2, 3, 16, 16)
    np.testing.assert_allclose(
        model(mge.tensor(x)).numpy(), tmodel(torch.from_numpy(x)).detach().numpy(), rtol=1e-8
    )

    # the checkpoint MegEngine's train.py writes, read back into a fresh model
    path = str(tmp_path / "checkpoint.pkl")
    mge.save({"epoch": 1, "state_dict": model.state_dict()}, path)
    ckpt = mge.load(path)
    fresh = Net()
    fresh.load_state_dict(ckpt["state_dict"])
    fresh.eval()
    assert ckpt["epoch"] == 1
    np.testing.assert_array_equal(fresh(mge.tensor(x)).numpy(), model(mge.tensor(x)).numpy())


# ------------------------------------------------------------- names met at import time


def test_hub_pretrained_adds_the_pretrained_keyword(tmp_path):
    @hub.pretrained(str(tmp_path / "weights.pkl"))
    def small(**kwargs):
        """Builds a small model."""
        return M.Linear(3, 2, **kwargs)

    assert small.__name__ == "small" and small.__doc__ == "Builds a small model."
    fresh = small(bias=False)
    assert fresh.bias is None

    trained = M.Linear(3, 2)
    mge.save(trained.state_dict(), str(tmp_path / "weights.pkl"))
    loaded = small(pretrained=True)
    np.testing.assert_array_equal(loaded.weight.numpy(), trained.weight.numpy())
    np.testing.assert_array_equal(loaded.bias.numpy(), trained.bias.numpy())


def test_logger_get_logger_and_set_log_file():
    log = mge.logger.get_logger("ferrograd_port_test")
    assert isinstance(log, logging.Logger)
    assert mge.logger.get_logger("ferrograd_port_test") is log
    assert not log.propagate and len(log.handlers) == 1
    out = io.StringIO()
    mge.logger.set_log_file(out)
    try:
        log.info("Epoch %d Step %d, LR %.4f", 1, 20, 0.1)
        log.warning("slow step")
    finally:
        mge.logger.set_log_file(None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("Epoch 1 Step 20, LR 0.1000")
    assert lines[1].endswith("WRN slow step")
    old = mge.logger.set_log_level(logging.ERROR)
    try:
        assert log.level == logging.ERROR
    finally:
        mge.logger.set_log_level(old)


# ------------------------------------------------------------------ layer arguments


def test_conv_and_linear_accept_megengine_modes():
    c = M.Conv2d(4, 6, 3, 1, 1, 1, 2, False, conv_mode="cross_correlation", compute_mode="default")
    assert tuple(c.weight.shape) == (6, 2, 3, 3) and c.bias is None and c.groups == 2
    assert tuple(M.Conv1d(2, 3, 3, compute_mode="float32")(mge.randn(1, 2, 5)).shape) == (1, 3, 3)
    assert tuple(M.Conv3d(2, 3, 3, conv_mode="CROSS_CORRELATION").weight.shape) == (3, 2, 3, 3, 3)
    lin = M.Linear(3, 4, compute_mode="default")
    assert tuple(lin.weight.shape) == (4, 3)
    with pytest.raises(ValueError, match="conv_mode"):
        M.Conv2d(2, 2, 3, conv_mode="convolution")
    with pytest.raises(ValueError, match="compute_mode"):
        M.Linear(2, 2, compute_mode="float16")


def test_conv_transpose2d_takes_dilation_before_groups():
    torch = pytest.importorskip("torch")
    # MegEngine's order: stride, padding, output_padding, dilation, groups, bias
    m = M.ConvTranspose2d(4, 6, 3, 2, 1, 1, 2, 2, False)
    assert m.groups == 2 and m.bias is None
    t = torch.nn.ConvTranspose2d(4, 6, 3, 2, 1, 1, groups=2, bias=False, dilation=2).double()
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(m.weight.numpy().astype(np.float64)))
    x = np.random.RandomState(0).randn(1, 4, 5, 5)
    got = m(mge.tensor(x.astype(np.float32))).numpy()
    want = t(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    m3 = M.ConvTranspose3d(2, 4, 3, 1, 0, 0, 2, 2)
    assert m3.groups == 2 and m3.bias is not None
    # dilation 2 widens the 3-wide kernel to 5: 4 + 5 - 1
    assert tuple(m3(mge.randn(1, 2, 4, 4, 4)).shape) == (1, 4, 8, 8, 8)


# ------------------------------------------------- the training scripts' data transforms


def test_random_resized_crop_windows_and_resize():
    from ferrograd.data import transform as T

    img = (np.random.RandomState(0).rand(40, 60, 3) * 255).astype(np.uint8)
    # the whole image at its own ratio: the same as resizing it
    whole = T.RandomResizedCrop((10, 20), scale_range=(1, 1), ratio_range=(1.5, 1.5))
    np.testing.assert_array_equal(whole.apply(img), T.Resize((10, 20)).apply(img))
    # no square of the full area fits: the centred square of the image's height
    square = T.RandomResizedCrop(8, scale_range=(1, 1), ratio_range=(1, 1))
    got = square.apply(img)
    np.testing.assert_array_equal(got, T.Resize((8, 8)).apply(img[:, 10:50]))
    coords = np.array([[10.0, 0.0], [50.0, 40.0]])
    np.testing.assert_allclose(square._apply_coords(coords), [[0.0, 0.0], [8.0, 8.0]])
    # random windows stay inside the image and come out at the asked size
    crop = T.RandomResizedCrop(16)
    for _ in range(20):
        assert crop.apply(img).shape == (16, 16, 3)
        x, y, w, h = crop._window
        assert 0 <= x and x + w <= 60 and 0 <= y and y + h <= 40
    with pytest.raises(ValueError, match="scale_range"):
        T.RandomResizedCrop(8, scale_range=(1.0, 0.5))


def test_color_jitter_blends_with_gray_references():
    from ferrograd.data import transform as T

    img = np.full((2, 2, 3), 100, np.uint8)
    img[0, 0] = [0, 0, 250]  # BGR: pure red
    np.random.seed(3)
    alpha = np.float32(np.random.uniform(0.5, 1.5))
    gray = (img.astype(np.float32) @ np.array([0.114, 0.587, 0.299], np.float32))[..., None]
    np.random.seed(3)
    got = T.SaturationTransform(0.5).apply(img)
    want = (img * alpha + gray * (1 - alpha)).clip(0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    np.random.seed(3)
    got = T.ContrastTransform(0.5).apply(img)
    want = (img * alpha + gray.mean() * (1 - alpha)).clip(0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    np.random.seed(3)
    got = T.BrightnessTransform(0.5).apply(img)
    np.testing.assert_array_equal(got, (img * alpha).clip(0, 255).astype(np.uint8))

    jitter = T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4)
    out = jitter.apply(img)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert T.ColorJitter().apply(img) is img
    with pytest.raises(NotImplementedError, match="hue"):
        T.ColorJitter(hue=0.1)
    with pytest.raises(ValueError, match="non-negative"):
        T.BrightnessTransform(-1)


# ------------------------------------------------------------------------ optimizers


def test_sgd_takes_megengine_argument_order():
    torch = pytest.importorskip("torch")
    w0 = np.random.RandomState(0).randn(5)
    p = mge.Parameter(mge.tensor(w0, dtype="float64"))
    # MegEngine's order: lr, momentum, nesterov, weight_decay
    opt = optim.SGD([p], 0.1, 0.9, True, 1e-2)
    tp = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)
    for t in range(3):
        g = np.cos(np.arange(5.0) + t)
        p.grad = mge.tensor(g, dtype="float64")
        opt.step().clear_grad()
        tp.grad = torch.from_numpy(g)
        topt.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12)
    with pytest.raises(TypeError):
        optim.SGD([p])  # MegEngine's lr has no default


def test_adagrad_puts_eps_inside_the_square_root():
    w0 = np.random.RandomState(0).randn(5)
    p = mge.Parameter(mge.tensor(w0, dtype="float64"))
    # MegEngine's order: lr, lr_decay, eps, weight_decay
    opt = optim.Adagrad([p], 0.1, 0.01, 1e-3, 0.05)
    want, total = w0.copy(), np.zeros(5)
    for t in range(1, 4):
        g = 0.01 * np.arange(5.0) * t
        p.grad = mge.tensor(g, dtype="float64")
        opt.step().clear_grad()
        g = g + 0.05 * want
        total += g * g
        want = want - 0.1 / (1 + (t - 1) * 0.01) * g / np.sqrt(total + 1e-3)
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-12)


def test_tensor_flatten_takes_megengine_keywords():
    torch = pytest.importorskip("torch")
    a = np.arange(24.0).reshape(2, 3, 4)
    x = mge.tensor(a)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(x.flatten(start_axis=1).numpy(), t.flatten(1).numpy())
    np.testing.assert_array_equal(
        x.flatten(start_axis=0, end_axis=1).numpy(), t.flatten(0, 1).numpy()
    )
    np.testing.assert_array_equal(
        F.flatten(x, start_axis=1).numpy(), x.flatten(start_dim=1).numpy()
    )


# ------------------------------------------------------------------ vision datasets


def _idx(path, magic, arr):
    import gzip

    header = np.array([magic, *arr.shape], dtype=">i4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_mnist_reads_idx_files(tmp_path):
    from ferrograd import data
    from ferrograd.data import transform as T

    rng = np.random.RandomState(0)
    imgs = {n: rng.randint(0, 256, size=(n, 28, 28)) for n in (5, 3)}
    labs = {n: rng.randint(0, 10, size=n) for n in (5, 3)}
    _idx(tmp_path / "train-images-idx3-ubyte.gz", 0x803, imgs[5])
    _idx(tmp_path / "train-labels-idx1-ubyte.gz", 0x801, labs[5])
    _idx(tmp_path / "t10k-images-idx3-ubyte.gz", 0x803, imgs[3])
    _idx(tmp_path / "t10k-labels-idx1-ubyte.gz", 0x801, labs[3])
    for train, n in ((True, 5), (False, 3)):
        ds = data.dataset.MNIST(str(tmp_path), train=train, download=False)
        assert len(ds) == n
        image, label = ds[1]
        assert image.shape == (28, 28, 1) and image.dtype == np.uint8
        np.testing.assert_array_equal(image[..., 0], imgs[n][1])
        assert label == labs[n][1] and label.dtype == np.int32

    ds = data.dataset.MNIST(str(tmp_path))
    loader = data.DataLoader(
        ds,
        sampler=data.SequentialSampler(ds, batch_size=2),
        transform=T.Compose([T.Normalize(mean=0.1307 * 255, std=0.3081 * 255), T.ToMode("CHW")]),
    )
    image, label = next(iter(loader))
    assert image.shape == (2, 1, 28, 28) and image.dtype == np.float32
    np.testing.assert_allclose(image[1, 0], (imgs[5][1] - 0.1307 * 255) / (0.3081 * 255), rtol=1e-5)
    np.testing.assert_array_equal(label, labs[5][:2])

    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz"):
        data.dataset.MNIST(str(tmp_path / "nowhere"))


def test_cifar_reads_pickled_batches_as_bgr(tmp_path):
    import pickle

    from ferrograd import data

    rng = np.random.RandomState(0)
    d10 = tmp_path / "cifar-10-batches-py"
    d10.mkdir()
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batches[name] = {
            b"data": rng.randint(0, 256, size=(2, 3 * 32 * 32)).astype(np.uint8),
            b"labels": list(rng.randint(0, 10, size=2)),
        }
        with open(d10 / name, "wb") as f:
            pickle.dump(batches[name], f)
    ds = data.dataset.CIFAR10(str(tmp_path), download=False)
    assert len(ds) == 10
    image, label = ds[3]  # data_batch_2, second image
    rgb = batches["data_batch_2"][b"data"][1].reshape(3, 32, 32)
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, rgb.transpose(1, 2, 0)[..., ::-1])
    assert label == batches["data_batch_2"][b"labels"][1] and label.dtype == np.int32
    assert len(data.dataset.CIFAR10(str(tmp_path), train=False)) == 2

    d100 = tmp_path / "cifar-100-python"
    d100.mkdir()
    test = {
        b"data": rng.randint(0, 256, size=(3, 3 * 32 * 32)).astype(np.uint8),
        b"fine_labels": [5, 60, 99],
        b"coarse_labels": [1, 2, 19],
    }
    with open(d100 / "test", "wb") as f:
        pickle.dump(test, f)
    image, fine, coarse = data.dataset.CIFAR100(str(tmp_path), train=False)[2]
    assert (fine, coarse) == (99, 19)
    with pytest.raises(ValueError, match="train"):
        data.dataset.CIFAR100(str(tmp_path), train=True)


# ------------------------------------------------------------ functional convolutions


def test_conv2d_takes_megengine_grouped_weights():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(0)
    x = rng.randn(2, 4, 6, 6)
    w = rng.randn(2, 3, 2, 3, 3)  # (groups, out / groups, in / groups, kh, kw)
    xt = torch.from_numpy(x)
    wt = torch.from_numpy(w).requires_grad_()
    want = torch.nn.functional.conv2d(xt, wt.reshape(6, 2, 3, 3), padding=1, groups=2)
    want.square().sum().backward()

    wf = mge.Parameter(mge.tensor(w))
    gm = autodiff.GradManager().attach([wf])
    with gm:
        got = F.conv2d(mge.tensor(x), wf, padding=1, groups=2)
        gm.backward(got.square().sum())
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert tuple(wf.grad.shape) == w.shape
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-10, atol=1e-12)

    # transposed: (groups, in / groups, out / groups, kh, kw)
    wt2 = rng.randn(2, 2, 3, 3, 3)
    got = F.conv_transpose2d(mge.tensor(x), mge.tensor(wt2), stride=2, groups=2).numpy()
    want = torch.nn.functional.conv_transpose2d(
        xt, torch.from_numpy(wt2.reshape(4, 3, 3, 3)), stride=2, groups=2
    ).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

    with pytest.raises(mge.ShapeError, match="group count"):
        F.conv2d(mge.tensor(x), mge.tensor(w), groups=4)
    with pytest.raises(ValueError, match="conv_mode"):
        F.conv2d(mge.tensor(x), mge.tensor(w), groups=2, conv_mode="convolution")


# ------------------------------------------------------------- MegEngine's checkpoints


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_load_reads_megengine_pickled_checkpoints(tmp_path, protocol):
    import pickle
    from collections import OrderedDict

    rng = np.random.RandomState(0)
    state = OrderedDict(
        weight=rng.randn(2, 3).astype(np.float32), bias=rng.randn(2).astype(np.float32)
    )
    path = tmp_path / "checkpoint.pkl"
    with open(path, "wb") as f:
        pickle.dump({"epoch": 3, "state_dict": state, "lr": np.float32(0.1)}, f, protocol)
    ckpt = mge.load(str(path))
    assert ckpt["epoch"] == 3 and ckpt["lr"] == np.float32(0.1)
    model = M.Linear(3, 2)
    model.load_state_dict(ckpt["state_dict"])
    np.testing.assert_array_equal(model.weight.numpy(), state["weight"])
    np.testing.assert_array_equal(model.bias.numpy(), state["bias"])

    # MegEngine's published weights load through hub.pretrained the same way
    @hub.pretrained(str(tmp_path / "weights.pkl"))
    def linear(**kwargs):
        return M.Linear(3, 2)

    with open(tmp_path / "weights.pkl", "wb") as f:
        pickle.dump(state, f, protocol)
    np.testing.assert_array_equal(linear(pretrained=True).bias.numpy(), state["bias"])


class _Runs:
    def __reduce__(self):
        return (print, ("ran",))


def test_load_refuses_code_in_a_pickle_unless_trusted(tmp_path, capsys):
    import pickle

    path = tmp_path / "evil.pkl"
    with open(path, "wb") as f:
        pickle.dump({"x": _Runs()}, f)
    with pytest.raises(pickle.UnpicklingError, match="builtins.print"):
        mge.load(str(path))
    assert capsys.readouterr().out == ""
    assert mge.load(str(path), weights_only=False) == {"x": None}
    assert capsys.readouterr().out == "ran\n"
    with pytest.raises(ValueError, match="corrupt"):
        mge.load(io.BytesIO(b"\x80\x04\x95truncated"))


def test_conv_loads_megengine_grouped_weights_and_biases():
    rng = np.random.RandomState(0)
    block = M.Sequential(
        M.Conv2d(4, 4, 3, 1, 1, groups=4, bias=False),  # depthwise, as in ShuffleNetV2
        M.Conv2d(4, 6, 3, 1, 1, groups=2),
        M.ConvTranspose2d(6, 4, 2, 2, groups=2),
    )
    megengine_state = {
        "0.weight": rng.randn(4, 1, 1, 3, 3).astype(np.float32),
        "1.weight": rng.randn(2, 3, 2, 3, 3).astype(np.float32),
        "1.bias": rng.randn(1, 6, 1, 1).astype(np.float32),
        "2.weight": rng.randn(2, 3, 2, 2, 2).astype(np.float32),
        "2.bias": rng.randn(1, 4, 1, 1).astype(np.float32),
    }
    block.load_state_dict(megengine_state)
    assert tuple(block[1].weight.shape) == (6, 2, 3, 3) and tuple(block[1].bias.shape) == (6,)

    x = mge.tensor(rng.randn(1, 4, 5, 5).astype(np.float32))
    s = {k: mge.tensor(v) for k, v in megengine_state.items()}
    want = F.conv2d(x, s["0.weight"], padding=1, groups=4)
    want = F.conv2d(want, s["1.weight"], s["1.bias"], padding=1, groups=2)
    want = F.conv_transpose2d(want, s["2.weight"], s["2.bias"], stride=2, groups=2)
    np.testing.assert_allclose(block(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)

    wrong = dict(megengine_state, **{"1.weight": rng.randn(3, 2, 2, 3, 3)})
    with pytest.raises(mge.ShapeError, match="size mismatch for 1.weight"):
        block.load_state_dict(wrong)
