"""The receive-buffer pool (wire/pool.py): bounded in bytes, never hands out a buffer the
program still uses, reuses what it dropped."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.runtime.wire.pool import PAGE, PER_CLASS, BufferPool, size_class


@given(st.integers(1, 1 << 34))
def test_a_size_class_holds_the_request_in_whole_pages_and_wastes_at_most_a_quarter(n):
    c = size_class(n)
    assert c >= n and c % PAGE == 0
    assert c <= max(PAGE, -(-(n * 5 // 4 + 1) // PAGE) * PAGE)


def test_classes_are_four_per_octave():
    classes = {size_class(n) for n in range(64 << 10, (128 << 10) + 1, 512)}
    assert sorted(classes) == [64 << 10, 80 << 10, 96 << 10, 112 << 10, 128 << 10]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300_000), st.booleans()), max_size=60),
       st.integers(0, 1 << 20))
def test_the_pool_stays_within_its_bytes_and_never_hands_out_memory_in_use(requests, limit):
    pool = BufferPool(limit)
    live = []
    for n, keep in requests:
        buf = pool.get(n)
        assert buf.nbytes == n
        assert not any(np.shares_memory(buf, other) for other in live)  # brute force
        buf[:] = 7
        if keep:
            live.append(buf)
        assert pool.bytes <= limit
        assert pool.bytes == sum(size_class(b.nbytes) for b in pool._lru.values())
        assert all(len(v) <= PER_CLASS for v in pool._by_class.values())
    assert all((b == 7).all() for b in live)  # nothing wrote over a buffer in use


def test_arrays_of_many_sizes_keep_at_most_the_limit_and_reuse_dropped_buffers():
    pool = BufferPool(4 << 20)
    rng = np.random.default_rng(0)
    for n in rng.integers(8 << 10, 64 << 10, 20_000):  # the case, dropped at once
        pool.get(int(n))
    assert pool.bytes <= 4 << 20
    assert len(pool) <= 4 * 3 + 4  # about one buffer per class between 8 and 64 KiB
    first = pool.get(40_000)
    address = first.__array_interface__["data"][0]
    del first
    again = pool.get(39_000)  # same class, dropped: the same memory, pages already mapped
    assert again.__array_interface__["data"][0] == address


def test_a_buffer_larger_than_the_limit_is_not_kept():
    pool = BufferPool(1 << 20)
    big = pool.get(2 << 20)
    assert len(pool) == 0 and pool.bytes == 0
    del big
    assert len(pool) == 0
