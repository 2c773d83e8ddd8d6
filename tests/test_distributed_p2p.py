"""``shard`` and ``DistributedSampler`` dealing PyTorch's shuffled indices (seed + epoch, the
same permutation as ``torch.randperm`` on a generator seeded with it)."""

from __future__ import annotations

import ferrograd.distributed as dist
import pytest


@pytest.mark.parametrize("n_items", [0, 1, 2, 7, 16, 33])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_shuffled_shard_and_sampler_deal_torch_indices(n_items, world):
    pytest.importorskip("torch")
    from ferrograd.utils.data import DistributedSampler as FgSampler
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(n_items))
    for seed, epoch in ((0, 0), (3, 1), (2**32 + 5, 2), (123456789, 7)):
        for rank in range(world):
            for drop_last in (False, True):
                want = DistributedSampler(
                    data, world, rank, shuffle=True, seed=seed, drop_last=drop_last
                )
                want.set_epoch(epoch)
                ours = FgSampler(data, world, rank, shuffle=True, seed=seed, drop_last=drop_last)
                ours.set_epoch(epoch)
                assert list(ours) == list(want), (seed, epoch, rank, drop_last)
            want = DistributedSampler(data, world, rank, shuffle=True, seed=seed)
            want.set_epoch(epoch)
            got = dist.shard(n_items, rank, world, shuffle=True, seed=seed, epoch=epoch)
            assert got == list(want), (seed, epoch, rank)


def test_shuffle_matches_torch_randperm_for_a_large_dataset():
    torch = pytest.importorskip("torch")
    g = torch.Generator()
    g.manual_seed(2024 + 3)
    want = torch.randperm(100_003, generator=g).tolist()
    got = [dist.shard(100_003, r, 4, shuffle=True, seed=2024, epoch=3) for r in range(4)]
    dealt = [got[k % 4][k // 4] for k in range(100_003)]
    assert dealt == want
