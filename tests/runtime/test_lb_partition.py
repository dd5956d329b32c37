"""The strategies that partition space or the communication graph (metis, topo, orb; their
helpers in shoal.runtime.lb.common), against brute force on tiny cases and with hypothesis on
stencil graphs. No MPI."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.runtime.lb.common import keep_in_place, targets
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.graph import metis
from shoal.runtime.lb.greedy import greedy, greedy_refine
from shoal.runtime.lb.machine import Machine
from shoal.runtime.lb.orb import bisect, orb
from shoal.runtime.lb.strategies import LBOptions, chain
from shoal.runtime.lb.synth import stencil_edges, synthesize
from shoal.runtime.lb.topo import topo
from shoal.topology.torus import Torus


def cut_pairs(db, placement):
    """Edges (one direction counted) whose ends are on different PEs."""
    return int(np.sum(placement[db.src] != placement[db.dst]))


# ------------------------------------------------------------------------------ common


def test_targets_give_capacity_shares_less_the_fixed_load():
    # total 12 on speeds 1, 1, 2: shares 3, 3, 6; PE 0 holds 4 that cannot move
    db = LBDatabase(load=[4, 2, 2, 2, 2], pe=[0, 1, 1, 2, 2], npes=3,
                    migratable=[False, True, True, True, True], speed=[1, 1, 2])
    np.testing.assert_allclose(targets(db), [0, 8 / 3, 16 / 3])
    assert targets(db).sum() == pytest.approx(8)


def test_keep_in_place_finds_the_best_relabelling_by_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(30):
        npes, n = 4, 24
        db = LBDatabase(load=np.ones(n), pe=rng.integers(0, npes, n), npes=npes)
        part = rng.integers(0, npes, n)
        got = keep_in_place(db, part, np.arange(n), np.ones(npes))
        best = max(np.sum(np.array(perm)[part] == db.pe)
                   for perm in itertools.permutations(range(npes)))
        assert np.sum(got == db.pe) == best
        # a relabelling: the same groups of objects
        assert len({(a, b) for a, b in zip(part, got, strict=True)}) == len(set(part))


def test_keep_in_place_only_swaps_pes_of_equal_target():
    db = LBDatabase(load=np.ones(6), pe=[0, 0, 1, 1, 2, 2], npes=3)
    part = np.array([1, 1, 0, 0, 2, 2])
    np.testing.assert_array_equal(keep_in_place(db, part, np.arange(6), np.ones(3)), db.pe)
    np.testing.assert_array_equal(
        keep_in_place(db, part, np.arange(6), np.array([1.0, 2.0, 3.0])), part)


# ------------------------------------------------------------------------------- metis


def two_clusters(cross_bytes=1):
    """Two 4-cliques of unit objects joined by one light edge, all on PE 0."""
    pairs = [(a, b) for c in (0, 4) for a in range(c, c + 4) for b in range(c, c + 4) if a != b]
    pairs += [(3, 4), (4, 3)]
    src, dst = np.array(pairs).T
    nbytes = np.where((src // 4) != (dst // 4), cross_bytes, 1000)
    return LBDatabase(load=np.ones(8), pe=np.zeros(8, np.int64), npes=2, src=src, dst=dst,
                      messages=np.ones(src.size, np.int64), bytes=nbytes)


def test_metis_finds_the_minimum_balanced_cut_of_two_clusters():
    db = two_clusters()
    placement = metis(db)
    best = min(db.edge_cut(np.array(a)) for a in itertools.product(range(2), repeat=8)
               if np.bincount(a, minlength=2).max() == 4)
    assert db.edge_cut(placement) == best == 2
    assert db.imbalance(placement) == 1.0


def test_metis_keeps_the_parts_where_most_objects_are():
    db = two_clusters()
    db.pe[:] = [1, 1, 1, 0, 0, 0, 0, 1]  # cluster 0 mostly on PE 1
    placement = metis(db)
    assert placement[:4].tolist() == [1] * 4 and placement[4:].tolist() == [0] * 4


def test_metis_without_a_graph_falls_back_to_greedy_refine():
    rng = np.random.default_rng(1)
    db = LBDatabase(load=rng.lognormal(0, 1, 300), pe=rng.integers(0, 8, 300), npes=8)
    np.testing.assert_array_equal(metis(db), greedy_refine(db))


@settings(max_examples=15, deadline=None)
@given(st.integers(200, 3000), st.integers(2, 32), st.sampled_from([2, 3]),
       st.integers(0, 100))
def test_metis_cuts_less_of_a_stencil_than_greedy(n, npes, ndims, seed):
    db = synthesize(n, npes, "lognormal", f"stencil{ndims}d", "random", seed, sigma=0.3)
    placement = metis(db)
    assert db.edge_cut(placement) <= db.edge_cut(greedy(db))
    assert db.imbalance(placement) <= 1.35  # METIS balances, coarsely on small graphs


def test_metis_leaves_a_pe_of_speed_zero_and_fixed_objects_alone():
    db = synthesize(2000, 8, "lognormal", "stencil2d", "block", 4, sigma=0.5)
    db.speed[3] = 0.0
    db.migratable[::7] = False
    placement = metis(db)
    assert not np.any(placement[db.migratable] == 3)
    np.testing.assert_array_equal(placement[~db.migratable], db.pe[~db.migratable])


# -------------------------------------------------------------------------------- topo


def ring_machine(nodes, cores=1):
    torus = Torus((nodes,), cores)
    return Machine.block(torus, nodes * cores)


def test_topo_places_a_chain_of_parts_optimally_on_a_ring():
    # a 1-D chain of 64 objects scrambled over 8 PEs of an 8-node ring: the best placement
    # of topo's parts (brute force over all 8! part orders) puts the chain around the ring
    n, npes = 64, 8
    src, dst = stencil_edges(n, 1)
    rng = np.random.default_rng(0)
    db = LBDatabase(load=np.ones(n), pe=rng.integers(0, npes, n), npes=npes, src=src,
                    dst=dst, messages=np.ones(src.size, np.int64),
                    bytes=np.full(src.size, 100, np.int64))
    machine = ring_machine(npes)
    placement = topo(db, machine)
    parts = placement  # one part per PE
    got = machine.hop_bytes(db, placement)
    best = min(machine.hop_bytes(db, np.array(perm)[parts])
               for perm in itertools.permutations(range(npes)))
    assert got == best == 2 * 100 * (npes - 1)  # 7 cuts of one hop each way
    assert got <= machine.hop_bytes(db, metis(db))


def test_topo_beats_metis_in_hop_bytes_on_a_3d_stencil():
    db = synthesize(4096, 64, "lognormal", "stencil3d", "random", 2, sigma=0.3)
    machine = Machine.block(Torus((4, 4, 2), 2), 64)
    t, m = topo(db, machine), metis(db)
    assert machine.hop_bytes(db, t) < 0.9 * machine.hop_bytes(db, m)
    assert db.imbalance(t) <= 1.1


def test_topo_needs_a_machine_of_the_right_size():
    db = synthesize(100, 8, "lognormal", "stencil2d", "block", 0)
    with pytest.raises(UsageError, match="needs the machine"):
        chain("topo")
    with pytest.raises(UsageError, match="maps 4 PEs but the database has 8"):
        chain("topo", LBOptions(machine=ring_machine(4)))(db)
    with pytest.raises(UsageError, match="do not fit"):
        Machine.block(Torus((2, 2)), 5)


def test_hop_bytes_match_a_brute_force_sum():
    db = synthesize(300, 6, "lognormal", "random", "random", 5)
    torus = Torus((3, 2))
    machine = Machine(torus, np.array([0, 1, 2, 3, 4, 5]))
    want = sum(int(b) * int(torus.distance(db.pe[s], db.pe[d]))
               for s, d, b in zip(db.src, db.dst, db.bytes, strict=True))
    assert machine.hop_bytes(db) == want


# --------------------------------------------------------------------------------- orb


def test_orb_split_is_the_best_contiguous_split_by_brute_force():
    rng = np.random.default_rng(8)
    for _ in range(50):
        n = int(rng.integers(2, 9))
        load = rng.integers(1, 20, n).astype(float)
        x = rng.permutation(n).astype(float)[:, None]
        part = bisect(x, load, np.ones(2))
        order = np.argsort(x[:, 0])
        first = load[order].cumsum()
        best = min(max(first[k - 1] if k else 0.0, load.sum() - (first[k - 1] if k else 0))
                   for k in range(n + 1))
        got = np.bincount(part, weights=load, minlength=2).max()
        assert got == best
        # contiguous in x: PE 0 left of PE 1
        assert np.all(np.diff(part[order]) >= 0)


def test_orb_gives_each_pe_a_rectangle_of_the_grid():
    n = 32 * 32
    db = synthesize(n, 16, "lognormal", "stencil2d", "random", 1, sigma=0.0)  # unit loads
    placement = orb(db)
    assert db.imbalance(placement) == 1.0
    for p in range(16):
        mine = db.coords[placement == p]
        lo, hi = mine.min(axis=0), mine.max(axis=0)
        assert len(mine) == np.prod(hi - lo + 1)  # fills its bounding box
    # 4x4 blocks of 8x8: 2 * 3 * 32 boundary pairs, each cut both ways
    assert cut_pairs(db, placement) == 2 * 2 * 3 * 32


@settings(max_examples=15, deadline=None)
@given(st.integers(100, 3000), st.integers(2, 40), st.integers(0, 100))
def test_orb_keeps_spatial_neighbours_together(n, npes, seed):
    db = synthesize(n, npes, "lognormal", "stencil3d", "random", seed, sigma=0.5)
    placement = orb(db)
    assert db.edge_cut(placement) <= db.edge_cut(greedy(db))
    # each box is off its target by less than one object per cut above it
    loads = db.pe_loads(placement)
    depth = int(np.ceil(np.log2(npes)))
    assert loads.max() <= db.load.sum() / npes + depth * db.load.max() + 1e-9


def test_orb_uses_the_object_number_without_coordinates_and_respects_capacity():
    db = LBDatabase(load=np.ones(90), pe=np.zeros(90, np.int64), npes=3, speed=[1, 0, 2])
    placement = orb(db)
    assert placement.tolist() == [0] * 30 + [2] * 60  # contiguous runs of object numbers
