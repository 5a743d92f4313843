"""A model of PyTorch's CUDA caching allocator: replays a recorded sequence of
tensor allocations and frees and reports what the GPU would hold ("reserved",
the segments obtained from cudaMalloc) beside what tensors use ("allocated").

Pure Python, no torch: the trace comes from `estimator.simulation.features` (FakeTensor on
the CPU), the rules from c10/cuda/CUDACachingAllocator.cpp as PyTorch 1.8 to
2.x ship them with default settings (no ``PYTORCH_CUDA_ALLOC_CONF``):

* every request is rounded up to a multiple of 512 bytes (``kMinBlockSize``);
* requests of at most 1 MiB (``kSmallSize``) come from the small pool, whose
  segments are 2 MiB (``kSmallBuffer``); larger ones from the large pool, whose
  segments are 20 MiB (``kLargeBuffer``) for requests under 10 MiB
  (``kMinLargeAlloc``) and the request rounded up to 2 MiB (``kRoundLarge``)
  above;
* a request takes the smallest cached free block of its pool that holds it
  (best fit, lowest address among equals); only when none does is a new segment
  allocated (reserved memory grows and, without memory pressure, never shrinks);
* a block larger than the request is split when what remains is at least 512
  bytes (small pool) or more than 1 MiB (large pool); the rest stays cached;
* a freed block merges with free neighbours of its segment.

``max_split_size`` (``PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb``, absent in 1.8,
unlimited by default since) is modelled for completeness: blocks at least that
large are never split for smaller requests and are not used for requests
below it. Only one stream is modelled (a training loop on the default stream).
Memory pressure (freeing cached segments and retrying when cudaMalloc fails)
is not: the replay answers what a card large enough for the job would hold.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, field

MIB = 2**20


@dataclass(frozen=True)
class AllocatorRules:
    """The caching allocator's constants, in bytes (PyTorch's defaults)."""

    min_block: int = 512
    small_size: int = 1 * MIB
    small_buffer: int = 2 * MIB
    large_buffer: int = 20 * MIB
    min_large_alloc: int = 10 * MIB
    round_large: int = 2 * MIB
    max_split_size: int | None = None

    def round_size(self, nbytes: int) -> int:
        """A request's block size: at least and a multiple of `min_block`."""
        if nbytes < self.min_block:
            return self.min_block
        return self.min_block * -(-nbytes // self.min_block)

    def segment_size(self, size: int) -> int:
        """The cudaMalloc made when no cached block holds a rounded request."""
        if size <= self.small_size:
            return self.small_buffer
        if size < self.min_large_alloc:
            return self.large_buffer
        return self.round_large * -(-size // self.round_large)


@dataclass(eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    allocated: bool = False
    prev: _Block | None = None
    next: _Block | None = None


@dataclass(frozen=True)
class ReplayStats:
    """What one replay saw, in bytes: peaks of tensor bytes as requested
    (``requested``), after rounding (``allocated``), and of segments
    (``reserved``); how many segments were created and allocations made."""

    peak_requested: int
    peak_allocated: int
    peak_reserved: int
    segments: int
    allocations: int


@dataclass
class CachingAllocator:
    """One device's caching allocator; `malloc` and `free` by caller-chosen keys."""

    rules: AllocatorRules = field(default_factory=AllocatorRules)

    def __post_init__(self) -> None:
        self._pools: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}
        self._free_blocks: dict[int, _Block] = {}
        self._live: dict[object, tuple[_Block, int]] = {}
        self._next_addr = 0
        self.requested = self.allocated = self.reserved = 0
        self.peak_requested = self.peak_allocated = self.peak_reserved = 0
        self.segments = self.allocations = 0

    def malloc(self, key: object, nbytes: int) -> None:
        """Allocate `nbytes` for `key` (a key already live is an error; 0 bytes: nothing)."""
        if key in self._live:
            raise KeyError(f"key {key!r} is already allocated")
        if nbytes <= 0:
            return
        size = self.rules.round_size(nbytes)
        small = size <= self.rules.small_size
        block = self._take_free(size, small)
        if block is None:
            seg = self.rules.segment_size(size)
            block = _Block(self._next_addr, seg, small)
            self._next_addr += seg
            self.reserved += seg
            self.segments += 1
        if self._should_split(block, size):
            rest = _Block(block.addr + size, block.size - size, small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert_free(rest)
        block.allocated = True
        self._live[key] = (block, nbytes)
        self.allocations += 1
        self.requested += nbytes
        self.allocated += block.size
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, key: object) -> None:
        """Return `key`'s block to its pool, merged with free neighbours (unknown: no-op)."""
        entry = self._live.pop(key, None)
        if entry is None:
            return
        block, nbytes = entry
        self.requested -= nbytes
        self.allocated -= block.size
        block.allocated = False
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated:
                self._remove_free(neighbour)
                if neighbour is block.prev:
                    neighbour.size += block.size
                    neighbour.next = block.next
                    if block.next is not None:
                        block.next.prev = neighbour
                    block = neighbour
                else:
                    block.size += neighbour.size
                    block.next = neighbour.next
                    if neighbour.next is not None:
                        neighbour.next.prev = block
        self._insert_free(block)

    def stats(self) -> ReplayStats:
        return ReplayStats(self.peak_requested, self.peak_allocated, self.peak_reserved,
                           self.segments, self.allocations)

    def _should_split(self, block: _Block, size: int) -> bool:
        remaining = block.size - size
        if block.small:
            return remaining >= self.rules.min_block
        limit = self.rules.max_split_size
        return remaining > self.rules.small_size and (limit is None or block.size < limit)

    def _take_free(self, size: int, small: bool) -> _Block | None:
        pool = self._pools[small]
        i = bisect_left(pool, (size, -1, -1))
        limit = self.rules.max_split_size
        while i < len(pool):
            found = self._free_blocks[pool[i][2]]
            if limit is not None and not small and (
                    (size < limit <= found.size) or (size >= limit and found.size >= size + self.rules.large_buffer)):
                return None  # an oversize block serves only an oversize request of about its size
            del pool[i]
            del self._free_blocks[found.addr]
            return found
        return None

    def _insert_free(self, block: _Block) -> None:
        self._free_blocks[block.addr] = block
        insort(self._pools[block.small], (block.size, block.addr, block.addr))

    def _remove_free(self, block: _Block) -> None:
        pool = self._pools[block.small]
        i = bisect_left(pool, (block.size, block.addr, block.addr))
        del pool[i]
        del self._free_blocks[block.addr]


def replay(events: Iterable[tuple[str, object, int]],
           rules: AllocatorRules | None = None) -> ReplayStats:
    """Replay ``("alloc", key, nbytes)`` and ``("free", key, 0)`` events in order."""
    allocator = CachingAllocator(rules or AllocatorRules())
    for kind, key, nbytes in events:
        if kind == "alloc":
            allocator.malloc(key, nbytes)
        elif kind == "free":
            allocator.free(key)
        else:
            raise ValueError(f"unknown event kind {kind!r}; expected 'alloc' or 'free'")
    return allocator.stats()
