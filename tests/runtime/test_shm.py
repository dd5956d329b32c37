"""The allocator of the shared segments (shoal.runtime.wire.shm.Blocks) against a byte map."""

from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.runtime.wire.shm import ALIGN, Blocks


def test_take_and_give_coalesce_back_to_one_run():
    b = Blocks(10 * ALIGN)
    offs = [b.take(ALIGN) for _ in range(10)]
    assert offs == [k * ALIGN for k in range(10)]
    assert b.take(1) is None
    for off in (offs[3], offs[5], offs[4], offs[0], offs[9], offs[1], offs[2], offs[8],
                offs[6], offs[7]):
        b.give(off, ALIGN)
    assert b.free == [[0, 10 * ALIGN]]


def test_sizes_round_up_to_cache_lines():
    b = Blocks(4 * ALIGN)
    assert b.take(1) == 0
    assert b.take(ALIGN + 1) == ALIGN
    assert b.take(ALIGN) == 3 * ALIGN
    assert b.take(1) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 5 * ALIGN), st.integers(0, 50)),
                max_size=80))
def test_blocks_never_overlap_and_first_fit_matches_a_byte_map(ops):
    size = 16 * ALIGN
    b = Blocks(size)
    used = [False] * (size // ALIGN)  # the reference: one flag per cache line
    live = []
    for is_take, n, pick in ops:
        if is_take or not live:
            units = -(-n // ALIGN)
            first = next((k for k in range(len(used) - units + 1)
                          if not any(used[k:k + units])), None)
            off = b.take(n)
            assert off == (None if first is None else first * ALIGN)
            if off is not None:
                used[first:first + units] = [True] * units
                live.append((off, n))
        else:
            off, n = live.pop(pick % len(live))
            b.give(off, n)
            units = -(-n // ALIGN)
            used[off // ALIGN:off // ALIGN + units] = [False] * units
        # the free list is exactly the unused lines, as maximal sorted runs
        runs, k = [], 0
        while k < len(used):
            if not used[k]:
                j = k
                while j < len(used) and not used[j]:
                    j += 1
                runs.append([k * ALIGN, (j - k) * ALIGN])
                k = j
            else:
                k += 1
        assert b.free == runs
