"""The caching allocator model follows PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp)."""

import pytest

from estimator.simulation.allocator import MIB, AllocatorRules, CachingAllocator, replay

KIB = 1024


def test_requests_round_to_512_bytes_and_segments_by_pool() -> None:
    rules = AllocatorRules()
    assert rules.round_size(1) == 512 and rules.round_size(513) == 1024
    assert rules.segment_size(1 * MIB) == 2 * MIB  # small pool: 2 MiB segments
    assert rules.segment_size(1 * MIB + 512) == 20 * MIB  # 1..10 MiB: a 20 MiB segment
    assert rules.segment_size(10 * MIB) == 10 * MIB  # from 10 MiB: rounded up to 2 MiB
    assert rules.segment_size(11 * MIB) == 12 * MIB


def test_small_requests_share_a_two_mib_segment() -> None:
    a = CachingAllocator()
    for key in range(3):
        a.malloc(key, 600 * KIB)
    assert a.reserved == 2 * MIB and a.segments == 1
    a.malloc(3, 600 * KIB)  # 3 x 600 KiB leave 248 KiB: a second segment
    assert a.reserved == 4 * MIB and a.segments == 2
    assert a.allocated == 4 * 600 * KIB and a.requested == 4 * 600 * KIB


def test_mid_size_requests_split_one_twenty_mib_segment() -> None:
    a = CachingAllocator()
    a.malloc("a", 5 * MIB)
    a.malloc("b", 5 * MIB)
    a.malloc("c", 9 * MIB)
    assert a.reserved == 20 * MIB and a.segments == 1
    a.malloc("d", 2 * MIB)  # 1 MiB left: too small, a new segment
    assert a.reserved == 40 * MIB


def test_a_large_block_is_split_only_when_more_than_one_mib_remains() -> None:
    a = CachingAllocator()
    a.malloc("big", 12 * MIB)
    a.free("big")
    a.malloc("x", 11 * MIB + 512)  # leaves 1 MiB - 512 B: not split, the whole block
    assert a.allocated == 12 * MIB and a.reserved == 12 * MIB
    a.free("x")
    a.malloc("y", 10 * MIB)  # leaves 2 MiB: split
    assert a.allocated == 10 * MIB
    a.malloc("z", 2 * MIB)  # the split-off rest
    assert a.reserved == 12 * MIB


def test_best_fit_and_merging_inside_a_segment_only() -> None:
    a = CachingAllocator()
    for key in "abc":
        a.malloc(key, 6 * MIB)  # one 20 MiB segment: a, b, c, 2 MiB free
    a.free("a")
    a.free("b")  # merged with a: 12 MiB free at the start
    a.malloc("d", 12 * MIB)
    assert a.reserved == 20 * MIB
    a.malloc("e", 30 * MIB)
    a.malloc("f", 30 * MIB)
    a.free("e")
    a.free("f")  # two free 30 MiB segments never merge
    a.malloc("g", 40 * MIB)
    assert a.reserved == 20 * MIB + 60 * MIB + 40 * MIB
    a.malloc("h", 29 * MIB)  # best fit: a cached 30 MiB block, not a new segment
    assert a.reserved == 120 * MIB


def test_reserved_never_shrinks_and_its_peak_can_exceed_allocated_by_far() -> None:
    # Growing tensors freed one by one: each needs a segment none of the cached ones hold.
    events = []
    for i, size in enumerate((100, 200, 300)):
        events += [("alloc", i, size * MIB), ("free", i, 0)]
    stats = replay(events)
    assert stats.peak_allocated == 300 * MIB
    assert stats.peak_reserved == 600 * MIB and stats.segments == 3


def test_max_split_size_keeps_oversize_blocks_whole() -> None:
    a = CachingAllocator(AllocatorRules(max_split_size=50 * MIB))
    a.malloc("big", 100 * MIB)
    a.free("big")
    a.malloc("small", 20 * MIB)  # may not take the 100 MiB oversize block
    assert a.reserved == 120 * MIB


def test_bad_events_are_refused() -> None:
    with pytest.raises(ValueError, match="alloc"):
        replay([("resize", 1, 10)])
    a = CachingAllocator()
    a.malloc(1, 10)
    with pytest.raises(KeyError):
        a.malloc(1, 10)
    a.malloc(2, 0)  # zero bytes: nothing reserved
    a.free("never")  # unknown keys: no-op
    assert a.reserved == 2 * MIB
