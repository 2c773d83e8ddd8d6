"""Names PyTorch programs import from torch.autograd and torch.utils.data: the grad-mode
context managers under ``autograd`` (and its ``grad_mode``/``anomaly_mode`` modules),
``ChainDataset`` and ``StackDataset``, each against PyTorch."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils.data import (
    ChainDataset,
    DataLoader,
    IterableDataset,
    StackDataset,
    TensorDataset,
)


def test_grad_modes_importable_from_autograd():
    from ferrograd.autograd import enable_grad, inference_mode, no_grad, set_grad_enabled
    from ferrograd.autograd.anomaly_mode import detect_anomaly
    from ferrograd.autograd.grad_mode import no_grad as no_grad2

    assert no_grad2 is no_grad is fg.no_grad and detect_anomaly is fg.autograd.detect_anomaly
    x = fg.ones(2, requires_grad=True)
    with no_grad():
        assert not (x * 2).requires_grad
        with enable_grad():
            assert (x * 2).requires_grad
    with set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with inference_mode():
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


class _Stream(IterableDataset):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def test_chain_dataset_matches_torch():
    torch = pytest.importorskip("torch")

    class TStream(torch.utils.data.IterableDataset):
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

        def __len__(self):
            return len(self.items)

    ours, theirs = _Stream([1, 2]) + _Stream([3]), TStream([1, 2]) + TStream([3])
    assert isinstance(ours, ChainDataset)
    assert list(ours) == list(theirs) == [1, 2, 3]
    assert len(ours) == len(theirs) == 3
    chained = ChainDataset([_Stream(range(3)), _Stream(range(10, 12))])
    assert [int(b[0]) for b in DataLoader(chained, batch_size=1)] == [0, 1, 2, 10, 11]
    with pytest.raises(AssertionError, match="IterableDataset"):
        list(ChainDataset([_Stream([1]), [2, 3]]))


def test_stack_dataset_tuples_and_dicts_match_torch():
    torch = pytest.importorskip("torch")
    a, b = np.arange(5.0), np.arange(5) * 10
    ours = StackDataset(TensorDataset(fg.tensor(a)), list("abcde"))
    theirs = torch.utils.data.StackDataset(
        torch.utils.data.TensorDataset(torch.tensor(a)), list("abcde")
    )
    assert len(ours) == len(theirs) == 5
    for i in range(5):
        (x,), s = ours[i]
        (tx,), ts = theirs[i]
        assert float(x) == float(tx) and s == ts
    named = StackDataset(x=list(a), y=list(b))
    tnamed = torch.utils.data.StackDataset(x=list(a), y=list(b))
    assert named[2] == tnamed[2] == {"x": 2.0, "y": 20}
    assert named.__getitems__([4, 0]) == tnamed.__getitems__([4, 0])
    batches = list(DataLoader(StackDataset(fg.tensor(a), fg.tensor(b)), batch_size=2))
    np.testing.assert_array_equal(batches[1][0].numpy(), a[2:4])
    np.testing.assert_array_equal(batches[1][1].numpy(), b[2:4])
    for bad in (lambda: StackDataset(), lambda: StackDataset([1], y=[2])):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError, match="size mismatch"):
        StackDataset([1, 2], [1])


def test_cuda_streams_and_events_run_programs_that_time_with_them():
    if not fg.cuda.is_available():
        pytest.skip("no CUDA device (or emulator) in this build")
    s = fg.cuda.current_stream()
    assert s == fg.cuda.default_stream() == fg.cuda.Stream()
    assert str(s.device) == "cuda:0"
    start, end = fg.cuda.Event(enable_timing=True), fg.cuda.Event(enable_timing=True)
    x = fg.ones(64, 64, device="cuda")
    start.record()
    y = x @ x
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    with pytest.raises(RuntimeError, match="enable_timing"):
        fg.cuda.Event().elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        fg.cuda.Event(enable_timing=True).elapsed_time(end)
    side = fg.cuda.Stream()
    side.wait_stream(fg.cuda.current_stream())
    with fg.cuda.stream(side):
        z = y + 1.0
    fg.cuda.current_stream().wait_stream(side)
    ev = side.record_event()
    ev.wait()
    assert ev.query()
    np.testing.assert_array_equal(z.numpy(), np.full((64, 64), 65.0, dtype=np.float32))
    with fg.cuda.device(0):
        assert fg.cuda.current_device() == 0


def test_nn_utils_submodules_programs_import_from():
    from ferrograd.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
    from ferrograd.nn.utils.init import skip_init
    from ferrograd.nn.utils.memory_format import convert_conv2d_weight_memory_format

    w = fg.tensor([3.0, 4.0], requires_grad=True)
    (w * w).sum().backward()  # grad (6, 8), norm 10
    total = clip_grad_norm_([w], 5.0)
    assert float(total) == pytest.approx(10.0)
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 4.0], rtol=1e-6)
    clip_grad_value_([w], 3.5, foreach=None)
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 3.5], rtol=1e-6)
    lin = skip_init(fg.nn.Linear, 3, 4)
    assert tuple(lin.weight.shape) == (4, 3)
    conv = fg.nn.Conv2d(2, 3, 3)
    assert convert_conv2d_weight_memory_format(conv, fg.channels_last) is conv
