"""AMR (shoal.apps.amr, examples/amr.py): the mesh after any refine/coarsen flags covers the
domain once and keeps 2:1 balance; the blocks' decisions by messages, in any order, reach
the global fixed point and tell every new block its neighbours' levels; runs on 1, 2 and 3
PEs, with and without balancing, give the serial reference's bits; the total of the scalar
is conserved."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.amr import (
    MASS_TOLERANCE,
    Node,
    Params,
    children_of,
    level_across,
    parent_nb,
    parent_of,
    remeshed,
    serial,
    settle,
)
from shoal.errors import UsageError
from shoal.launch import mpiexec

EXAMPLE = Path(__file__).parents[2] / "examples" / "amr.py"
TIMEOUT = 300

# small and quick: 4x4 cells per block, levels 2-4; the blob crosses several blocks, so
# blocks refine, coarsen and come back (indices deleted and inserted again)
SMALL = Params(block=4, min_level=2, max_level=4, steps=32, remesh_every=2, width=0.05)


# ----------------------------------------------------------------- the mesh, without MPI
def raster(keys, top):
    """The level of the leaf over each cell of the finest grid; every cell covered once."""
    grid = np.full((1 << top, 1 << top), -1)
    for level, i, j in keys:
        s = 1 << (top - level)
        region = grid[i * s:(i + 1) * s, j * s:(j + 1) * s]
        assert (region == -1).all(), "two leaves overlap"
        region[:] = level
    assert (grid >= 0).all(), "a part of the domain has no leaf"
    return grid


def balanced(grid):
    return all((np.abs(grid - np.roll(grid, 1, axis)) <= 1).all() for axis in (0, 1))


def by_messages(keys, wanted, rnd):
    """The blocks' protocol with every message (and every block's first decision)
    delivered in a random order: their Nodes once nothing is left to deliver."""
    nodes = {k: Node(k, [level_across(keys, k, f) for f in range(4)]) for k in keys}
    pending = [("first", k) for k in keys]
    while pending:
        what = pending.pop(rnd.randrange(len(pending)))
        if what[0] == "first":
            out = nodes[what[1]].first(wanted[what[1]])
        else:
            _, dest, face, half, t = what
            out = nodes[dest].hear(face, half, t)
        pending += [("hear", *m) for m in out]
    return nodes


def new_neighbours(nodes):
    """Each new leaf's neighbours' levels, as the blocks work them out."""
    out = {}
    parts = {}
    for key, node in nodes.items():
        if node.t == key[0]:
            out[key] = node.kept()
        elif node.t > key[0]:
            for c in children_of(key):
                out[c] = node.child((c[1] & 1, c[2] & 1))
        else:
            parts.setdefault(parent_of(key), []).append(node.part((key[1] & 1, key[2] & 1)))
    for key, got in parts.items():
        assert len(got) == 4
        out[key] = parent_nb(got)
    return out


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 1), st.lists(st.integers(-1, 1), min_size=97,
                                                       max_size=97)),
                min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_any_flags_keep_the_mesh_whole_and_balanced_and_messages_agree(rounds, rnd):
    """Random refine (+1), keep (0) and coarsen (-1) flags, rounds of them (in each round a
    flag of 0 takes the round's own flag, so that whole regions ask to coarsen): the leaves
    cover the square once with face neighbours within one level; the decisions the blocks
    reach by messages in a random order are the global fixed point, and what they tell the
    new blocks about their neighbours is the new mesh's geometry."""
    lo, hi = 2, 4
    keys = {(lo, i, j) for i in range(4) for j in range(4)}
    for mode, flags in rounds:
        wanted = {k: min(hi, max(lo, k[0] + (flags[n % len(flags)] or mode)))
                  for n, k in enumerate(sorted(keys))}
        t = settle(keys, wanted)
        assert all(t[k] >= wanted[k] and abs(t[k] - k[0]) <= 1 for k in keys)
        nodes = by_messages(keys, wanted, rnd)
        assert {k: n.t for k, n in nodes.items()} == t
        keys = remeshed(keys, t)
        assert balanced(raster(keys, hi + 1))
        told = new_neighbours(nodes)
        assert set(told) == keys
        assert told == {k: [level_across(keys, k, f) for f in range(4)] for k in keys}


def test_a_refined_family_coarsens_back_when_it_asks_and_not_while_a_neighbour_is_fine():
    keys = {(2, i, j) for i in range(4) for j in range(4)}
    keys = remeshed(keys, settle(keys, {k: 3 if k == (2, 1, 1) else 2 for k in keys}))
    keys = remeshed(keys, settle(keys, {k: 4 if k == (3, 2, 2) else k[0] for k in keys}))
    raster(keys, 5)
    # (3, 3, 3), a sibling of the refined (3, 2, 2), cannot coarsen, so neither can the rest
    t = settle(keys, {k: k[0] - 1 if k[0] == 3 else k[0] for k in keys})
    assert all(t[k] == 3 for k in keys if k[0] == 3)
    # everything coarsens back once the finest agree
    t = settle(keys, {k: max(2, k[0] - 1) for k in keys})
    back = remeshed(keys, t)
    assert (3, 2, 2) in back and len(back) == 16 + 3
    assert remeshed(back, settle(back, {k: 2 for k in back})) == {
        (2, i, j) for i in range(4) for j in range(4)}


def test_bad_parameters_are_refused():
    with pytest.raises(UsageError, match="min_level must be >= 2"):
        Params(min_level=1).check()
    with pytest.raises(UsageError, match="block must be even"):
        Params(block=5).check()
    with pytest.raises(UsageError, match="cfl"):
        Params(cfl=1.5).check()


# ----------------------------------------------------------------- the runs
@pytest.fixture(scope="module")
def reference():
    return serial(SMALL)


def test_the_serial_reference_conserves_the_total_and_adapts(reference):
    r = reference
    assert r.drift <= MASS_TOLERANCE
    assert len({tuple(c.items()) for c in r.levels}) >= 4  # the mesh changes as it goes
    assert len(r.steps) == 16 and r.steps[-1] == SMALL.steps


def run(tmp_path, ranks, p, lb=None):
    out = tmp_path / f"r{ranks}-{lb}.npz"
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLE), "--block", str(p.block),
           "--min-level", str(p.min_level), "--max-level", str(p.max_level), "--steps",
           str(p.steps), "--remesh-every", str(p.remesh_every), "--lb-every", str(p.lb_every),
           "--width", str(p.width), "--quiet", "--out", str(out)]
    env = None
    if lb:
        import os

        env = dict(os.environ, SHOAL_LB=lb)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"amr on {ranks} ranks did not finish within {TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return dict(z), done.stdout


@pytest.mark.parametrize(("ranks", "lb"), [(2, "greedy"), (3, None)])
def test_parallel_runs_give_the_serial_bits(tmp_path, reference, ranks, lb):
    """Every block's cells and neighbours' levels, the total of u after every cycle and the
    blocks per level: equal to the serial run's on 3 PEs, and on 2 with greedy moving
    blocks after every second remeshing (1 PE: the example's test, tests/test_examples.py,
    which has the example compare itself with the serial run)."""
    p = Params(**{**SMALL.__dict__, "lb_every": 2 if lb else 0})
    got, out = run(tmp_path, ranks, p, lb)
    if lb:
        assert got["lb_migrations"] > 0, out
    keys = [tuple(k) for k in got["keys"].tolist()]
    assert keys == sorted(reference.blocks)
    for k, cells, nb in zip(keys, got["cells"], got["nb"].tolist(), strict=True):
        assert np.array_equal(cells, reference.blocks[k]), k
        assert nb == reference.nb[k], k
    assert got["masses"].tolist() == reference.masses
    want = [[c.get(lv, 0) for lv in range(p.max_level + 1)] for c in reference.levels]
    assert got["levels"].tolist() == want
    assert "ok);" in out and f"checksum {reference.checksum()}" in out
