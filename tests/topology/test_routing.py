"""Link loads against brute force on small tori and meshes, and invariants (Balaji11, 3.1)."""

import itertools
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import UsageError
from shoal.topology.routing import link_loads
from shoal.topology.torus import Torus


def moves(t: Torus, a, b, half):
    """Per dimension, the minimal ways to go: a list of (direction, hops)."""
    out = []
    for x, y, size, wrap in zip(a, b, t.dims, t.wrap, strict=True):
        if not wrap:
            out.append([(1 if y >= x else -1, abs(y - x))])
            continue
        fwd, back = (y - x) % size, (x - y) % size
        if fwd == back and fwd:
            out.append([(1, fwd), (-1, back)] if half == "split" else [(1, fwd)])
        else:
            out.append([(1, fwd)] if fwd <= back else [(-1, back)])
    return out


def link(t, node_coords, d, sign):
    return (int(t.node(np.array(node_coords))) * t.ndims + d) * 2 + (sign > 0)


def reference(t: Torus, a, b, routing, half):
    """Fractions per link by walking every minimal route explicitly."""
    a, b = list(t.coords(a)), list(t.coords(b))
    walkers = {"dor": dor_reference, "paths": paths_reference}
    return walkers.get(routing, adaptive_reference)(t, a, b, half)


def follow(t: Torus, loads, a, path, frac):
    """Add ``frac`` to every link of ``path``, hops (dimension, sign) from coordinates ``a``."""
    pos = list(a)
    for d, sign in path:
        loads[link(t, pos, d, sign)] += frac
        pos[d] += sign


def dor_reference(t: Torus, a, b, half):
    """Dimension-ordered routing: dimension 0 first; both ways round a half ring count half."""
    loads = defaultdict(float)
    options = list(itertools.product(*moves(t, a, b, half)))
    for combo in options:
        path = [(d, sign) for d, (sign, hops) in enumerate(combo) for _ in range(hops)]
        follow(t, loads, a, path, 1 / len(options))
    return loads


def paths_reference(t: Torus, a, b, half):
    """Every minimal path (every order of the hops, both ways round a half ring) counts the
    same."""
    paths = []
    for combo in itertools.product(*moves(t, a, b, half)):
        seq = [d for d, (_, hops) in enumerate(combo) for _ in range(hops)]
        paths += [[(d, combo[d][0]) for d in perm] for perm in set(itertools.permutations(seq))]
    loads = defaultdict(float)
    for path in paths:
        follow(t, loads, a, path, 1 / len(paths))
    return loads


def adaptive_reference(t: Torus, a, b, half):
    """Adaptive routing: at every node split equally among the links that shorten the
    distance."""
    loads = defaultdict(float)
    adaptive_walk(t, loads, a, b, half, 1.0)
    return loads


def shortening_links(t: Torus, pos, b, half):
    """The links (dimension, sign) from ``pos`` that bring a route closer to ``b``."""
    target = list(t.coords(int(t.node(np.array(b)))))
    return [(d, sign) for d, opts in enumerate(moves(t, pos, target, half))
            for sign, hops in opts if hops]


def adaptive_walk(t: Torus, loads, pos, b, half, frac):
    """Send ``frac`` on from ``pos`` to ``b``, recursively, split among the shortening links."""
    options = shortening_links(t, pos, b, half)
    if int(t.node(np.array(pos))) == int(t.node(np.array(b))):
        return
    for d, sign in options:
        loads[link(t, pos, d, sign)] += frac / len(options)
        nxt = list(pos)
        nxt[d] += sign
        adaptive_walk(t, loads, nxt, b, half, frac / len(options))


TORI = [Torus((4, 3)), Torus((4, 4, 2)), Torus((3, 4), wrap=(False, True)),
        Torus((2, 3, 4), wrap=(False, False, False)), Torus((6,))]


@pytest.mark.parametrize("torus", TORI, ids=lambda t: f"{t.dims}{t.wrap}")
@pytest.mark.parametrize("routing", ["dor", "adaptive", "paths"])
@pytest.mark.parametrize("half", ["split", "positive"])
def test_vectorised_loads_equal_the_explicit_routes(torus, routing, half):
    pairs = [(a, b) for a in range(torus.nodes) for b in range(torus.nodes) if a != b]
    src = np.array([p[0] for p in pairs])
    dst = np.array([p[1] for p in pairs])
    vol = np.arange(1, len(pairs) + 1, dtype=float)
    got, streams = link_loads(torus, src, dst, vol, routing, half=half)
    want = np.zeros(torus.nlinks)
    want_streams = np.zeros(torus.nlinks)
    for (a, b), v in zip(pairs, vol, strict=True):
        for lk, f in reference(torus, a, b, routing, half).items():
            want[lk] += v * f
            want_streams[lk] += 1
    assert np.allclose(got, want)
    assert np.array_equal(streams, want_streams)
    assert not np.any(got[~torus.link_exists()])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(2, 6), min_size=1, max_size=3), st.integers(0, 10**6),
       st.sampled_from(["dor", "adaptive", "paths"]))
def test_total_load_is_volume_times_hops_and_translation_leaves_loads(dims, seed, routing):
    t = Torus(tuple(dims))
    rng = np.random.default_rng(seed)
    src = rng.integers(0, t.nodes, 40)
    dst = rng.integers(0, t.nodes, 40)
    vol = rng.random(40) * 100
    load, _ = link_loads(t, src, dst, vol, routing)
    assert load.sum() == pytest.approx(np.sum(vol * t.distance(src, dst)))
    shift = rng.integers(0, 10, t.ndims)
    moved, _ = link_loads(t, t.node(t.coords(src) + shift), t.node(t.coords(dst) + shift),
                          vol, routing)
    assert np.allclose(np.sort(moved), np.sort(load))


def test_bad_routing_requests():
    t = Torus((4, 4))
    with pytest.raises(UsageError, match="routing must be"):
        link_loads(t, [0], [1], 1.0, "teleport")
    with pytest.raises(UsageError, match="names each"):
        link_loads(t, [0], [5], 1.0, "dor", order=(0, 0))
    with pytest.raises(UsageError, match="half-ring"):
        link_loads(t, [0], [5], 1.0, "adaptive", half="sideways")


@pytest.mark.parametrize("torus", TORI, ids=lambda t: f"{t.dims}{t.wrap}")
def test_diameter_and_mean_distance_against_every_pair(torus):
    a, b = np.meshgrid(np.arange(torus.nodes), np.arange(torus.nodes))
    hops = torus.distance(a.ravel(), b.ravel())
    assert torus.diameter() == hops.max()
    assert torus.mean_distance() == pytest.approx(hops.mean())
    assert torus.directed_links() == torus.link_exists().sum()
