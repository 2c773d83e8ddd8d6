"""fg.Generator (torch.Generator's API): independent reproducible streams given as
``generator=`` to every draw, leaving the global stream of fg.manual_seed untouched."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils.data import DataLoader, RandomSampler, TensorDataset, random_split

DRAWS = {
    "rand": lambda g: fg.rand(4, 3, generator=g),
    "randn": lambda g: fg.randn(5, generator=g),
    "randint": lambda g: fg.randint(0, 10, (6,), generator=g),
    "randperm": lambda g: fg.randperm(9, generator=g),
    "normal": lambda g: fg.normal(1.0, 2.0, (4,), generator=g),
    "bernoulli": lambda g: fg.bernoulli(fg.full((8,), 0.5), generator=g),
    "multinomial": lambda g: fg.multinomial(fg.tensor([0.2, 0.3, 0.5]), 5, True, generator=g),
    "uniform_": lambda g: fg.empty(5).uniform_(-1, 1, generator=g),
    "normal_": lambda g: fg.empty(5).normal_(0, 1, generator=g),
    "random_": lambda g: fg.empty(5).random_(0, 7, generator=g),
    "init": lambda g: fg.nn.init.kaiming_uniform_(fg.empty(4, 4), generator=g),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_seeded_generator_repeats_its_draws_and_leaves_the_global_stream_alone(name):
    draw = DRAWS[name]
    fg.manual_seed(11)
    reference_global = fg.rand(6).numpy()
    fg.manual_seed(11)
    a = draw(fg.Generator().manual_seed(123)).numpy()
    # the global stream did not move
    assert np.array_equal(fg.rand(6).numpy(), reference_global)
    b = draw(fg.Generator().manual_seed(123)).numpy()
    assert np.array_equal(a, b)
    # another seed gives other numbers (the generator is really used)
    others = [draw(fg.Generator().manual_seed(s)).numpy() for s in (1, 2, 3)]
    assert any(not np.array_equal(a, o) for o in others)


def test_get_state_and_set_state_replay_a_stream():
    g = fg.Generator().manual_seed(5)
    fg.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype == fg.uint8
    first = fg.randn(4, generator=g).numpy()
    g.set_state(state)
    assert np.array_equal(fg.randn(4, generator=g).numpy(), first)
    assert g.initial_seed() == 5
    with pytest.raises(ValueError, match="set_state"):
        g.set_state(fg.tensor(np.array([1, 2, 3], dtype=np.uint8)))
    with pytest.raises(TypeError, match="seed"):
        g.manual_seed(1.5)


def test_data_utilities_take_a_generator():
    split = lambda: [
        s.indices
        for s in random_split(range(20), [0.5, 0.5], generator=fg.Generator().manual_seed(42))
    ]
    assert split() == split()
    ds = TensorDataset(fg.arange(12))
    order = lambda: [
        b[0].tolist()
        for b in DataLoader(ds, batch_size=5, shuffle=True, generator=fg.Generator().manual_seed(7))
    ]
    assert order() == order()
    assert sorted(i for b in order() for i in b) == list(range(12))
    s = list(RandomSampler(range(10), generator=fg.Generator().manual_seed(3)))
    assert s == list(RandomSampler(range(10), generator=fg.Generator().manual_seed(3)))


def test_default_generator_is_the_global_stream():
    # (PyTorch's default_generator is the CPU's)
    fg.default_generator.manual_seed(9)
    assert fg.initial_seed() == 9
    a = fg.rand(3, device="cpu").numpy()
    fg.manual_seed(9)
    assert np.array_equal(fg.rand(3, generator=fg.default_generator, device="cpu").numpy(), a)
    state = fg.default_generator.get_state()
    b = fg.rand(3, device="cpu").numpy()
    fg.default_generator.set_state(state)
    assert np.array_equal(fg.rand(3, device="cpu").numpy(), b)


def test_a_generator_draw_inside_a_trace_raises_trace_error():
    g = fg.Generator().manual_seed(0)

    @fg.trace
    def f(x):
        return x + fg.rand(3, generator=g)

    with pytest.raises(fg.TraceError, match="Generator"):
        f(fg.zeros(3))


def test_a_wrong_generator_type_is_named():
    with pytest.raises(TypeError, match="randn: generator"):
        fg.randn(3, generator="seed")


def test_a_generator_seeded_like_the_global_stream_draws_the_same_numbers():
    # torch.Generator().manual_seed(n) and torch.manual_seed(n) give one stream: a script
    # that moves its draws onto a generator keeps its numbers
    def draws(generator):
        kw = {} if generator is None else {"generator": generator}
        return [
            fg.randn(3, **kw),
            fg.rand(2, 2, dtype=fg.float64, **kw),
            fg.randperm(7, **kw),
            fg.randint(0, 10, (4,), **kw),
            fg.normal(0.0, 2.0, (3,), **kw),
            fg.bernoulli(fg.full((5,), 0.5), **kw),
            fg.multinomial(fg.ones(6), 3, **kw),
        ]

    fg.manual_seed(123)
    want = draws(None)
    got = draws(fg.Generator().manual_seed(123))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    # and a state saved mid-stream replays what follows
    g = fg.Generator().manual_seed(5)
    fg.randn(2, generator=g)
    state = g.get_state()
    first = draws(g)
    g.set_state(state)
    for a, b in zip(first, draws(g)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
