"""The virtual mesh of aggregation (shoal.runtime.vmesh): shapes chosen from P, and routes
that are minimal and go only to peers, against brute force."""

import itertools
import math
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.runtime.vmesh import coords, mesh_shape, next_hops, pe_at


def factorisations(n, k):
    """Every way to write n as a product of at most k factors > 1 (brute force)."""
    if n == 1:
        return [()]
    out = []
    if k >= 1:
        for f in range(2, n + 1):
            if n % f == 0:
                out += [(f, *rest) for rest in factorisations(n // f, k - 1)]
    return out


@pytest.mark.parametrize("npes", [1, 2, 3, 4, 16, 32, 33, 36, 64, 97, 100, 1024, 1025, 2048,
                                  4096, 4099])
def test_default_shape_covers_p_with_the_most_even_sides(npes):
    shape = mesh_shape(npes)
    assert math.prod(shape) == npes
    k = 1 if npes <= 32 else 2 if npes <= 1024 else 3
    assert len(shape) <= k
    best = min(max(f, default=1) for f in factorisations(npes, k))
    assert max(shape) == best
    assert list(shape) == sorted(shape, reverse=True)


def test_a_given_mesh_is_checked():
    assert mesh_shape(12, (3, 4)) == (3, 4)
    assert mesh_shape(8, [2, 2, 2]) == (2, 2, 2)
    with pytest.raises(UsageError, match="product is 12"):
        mesh_shape(12, (3, 5))
    with pytest.raises(UsageError, match="1 to 3 positive integers"):
        mesh_shape(16, (2, 2, 2, 2))
    with pytest.raises(UsageError, match="1 to 3 positive integers"):
        mesh_shape(4, (4.0,))


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_routes_are_minimal_and_every_hop_goes_to_a_peer(shape):
    npes = math.prod(shape)
    assert [pe_at(coords(p, shape), shape) for p in range(npes)] == list(range(npes))
    hops = [next_hops(p, shape) for p in range(npes)]

    def peer(a, b):
        return sum(x != y for x, y in zip(coords(a, shape), coords(b, shape), strict=True)) == 1

    for src in range(npes):
        # the buffers of a PE: itself and its peers, sum(s_d - 1) of them
        assert set(hops[src]) == {src} | {q for q in range(npes) if peer(src, q)}
        assert len(set(hops[src])) == 1 + sum(s - 1 for s in shape)
        # shortest distances over the peer graph, by breadth-first search
        dist = {src: 0}
        todo = deque([src])
        while todo:
            a = todo.popleft()
            for b in range(npes):
                if b not in dist and peer(a, b):
                    dist[b] = dist[a] + 1
                    todo.append(b)
        for dest in range(npes):
            at, steps = src, 0
            while at != dest:
                nxt = hops[at][dest]
                assert peer(at, nxt)
                at, steps = nxt, steps + 1
            assert steps == dist[dest]


def test_dimension_order_on_a_2x3_mesh():
    # PE 0 at (0, 0) to PE 5 at (1, 2): first the first coordinate, to PE 3 at (1, 0)
    assert next_hops(0, (2, 3))[5] == 3
    assert next_hops(3, (2, 3))[5] == 5
    assert [coords(p, (2, 3)) for p in range(6)] == list(itertools.product(range(2), range(3)))
