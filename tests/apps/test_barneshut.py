"""Barnes-Hut (shoal.apps.barneshut, examples/barneshut.py): forces against direct summation
(theta = 0 equal to rounding, theta = 0.5 and 0.7 within the stated error), the tree's
moments for any particle set, the decomposition, the pieces' tables walked in-process as
the PEs walk them, and runs on 1 and 2 PEs (the orb balancer moving pieces at every step)
that give the bits of the serial tree code."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps import barneshut as bh
from shoal.apps.barneshut import (
    FORCE_ERROR,
    KIND,
    LEAF,
    OWNER,
    REMOTE,
    Params,
    Table,
    assemble,
    build_tree,
    cube,
    direct_forces,
    domain_leaves,
    extract,
    initial_state,
    key_range,
    morton_keys,
    oct_level,
    oct_piece,
    serial_run,
    serial_tree,
    tree_forces,
    walk_forces,
    walk_groups,
    walk_misses,
)
from shoal.errors import UsageError
from shoal.launch import mpiexec

EXAMPLE = Path(__file__).parents[2] / "examples" / "barneshut.py"
TIMEOUT = 300


def relative_error(a: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a - ref, axis=1) / np.linalg.norm(ref, axis=1)


# ----------------------------------------------------------------- forces
def test_theta_zero_is_direct_summation():
    p = Params(n=1000, seed=2)
    _, x, _, m = initial_state(p)
    acc, pot, inter = tree_forces(x, m, 0.0, p.eps, p.bucket)
    ref, ref_pot = direct_forces(x, m, p.eps)
    assert inter == p.n * (p.n - 1)  # every pair, no node
    assert relative_error(acc, ref).max() < 1e-12
    assert np.abs(pot / ref_pot - 1).max() < 1e-12


@pytest.mark.parametrize("theta", sorted(FORCE_ERROR))
def test_force_error_within_its_bound(theta):
    """2000 particles in 4 Plummer spheres: median and 99th percentile of the relative
    force error against direct summation within FORCE_ERROR, and the tree does less."""
    p = Params(n=2000, seed=5)
    _, x, _, m = initial_state(p)
    ref, _ = direct_forces(x, m, p.eps)
    acc, _, inter = tree_forces(x, m, theta, p.eps, p.bucket)
    err = relative_error(acc, ref)
    median, p99 = FORCE_ERROR[theta]
    assert np.median(err) <= median and np.percentile(err, 99) <= p99
    assert inter < p.n * (p.n - 1) / 2


# ----------------------------------------------------------------- the tree
particle_sets = st.integers(1, 150).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 3), min_size=n, max_size=n),
    st.lists(st.floats(0.01, 10), min_size=n, max_size=n),
    st.integers(1, 8)))


@settings(max_examples=25, deadline=None)
@given(particle_sets)
def test_tree_moments_are_the_particles(data):
    """Any particle set (duplicates included): the root holds the total mass and centre of
    mass, every node its particles' mass and bounding box, leaves hold at most a bucket
    (except at the deepest level) and partition the particles; quadrupoles are traceless."""
    pos, mass, bucket = data
    x, m = np.array(pos, float).reshape(-1, 3), np.array(mass)
    t = serial_tree(x, m, bucket)
    nf, ni, pt = t.nf, t.ni, t.pt
    assert np.isclose(nf[0, bh.MASS], m.sum(), rtol=1e-12)
    com = (m[:, None] * x).sum(axis=0) / m.sum()
    assert np.allclose(nf[0, bh.COM:bh.COM + 3], com, rtol=1e-9, atol=1e-12)
    leaves = np.flatnonzero(ni[:, KIND] == LEAF)
    covered = np.zeros(len(x), int)
    for i in leaves:
        f, c = ni[i, bh.PFIRST], ni[i, bh.PCOUNT]
        covered[f:f + c] += 1
        assert c <= bucket or ni[i, bh.LEVEL] == bh.BITS
    assert (covered == 1).all()
    for i in range(len(nf)):
        f, c = ni[i, bh.PFIRST], ni[i, bh.PCOUNT]
        mine = pt[f:f + c]
        assert np.isclose(nf[i, bh.MASS], mine[:, 3].sum(), rtol=1e-12)
        assert (nf[i, bh.LO:bh.LO + 3] == mine[:, :3].min(axis=0)).all()
        assert (nf[i, bh.HI:bh.HI + 3] == mine[:, :3].max(axis=0)).all()
        trace = nf[i, bh.QUAD:bh.QUAD + 3].sum()
        scale = (mine[:, 3] * ((mine[:, :3] - nf[i, bh.COM:bh.COM + 3]) ** 2).sum(1)).sum()
        assert abs(trace) <= 1e-9 * max(scale, 1e-300)


def test_decomposition_covers_the_particles():
    """Domain leaves are disjoint, hold every particle, go to pieces in key order; sfc
    runs have about equal counts; oct gives no piece a node of more than a bucket that
    holds another piece's cells."""
    for how in ("oct", "sfc"):
        for npieces in (1, 3, 8, 13):
            p = Params(n=3000, decomposition=how, seed=4)
            _, x, _, _ = initial_state(p)
            keys = np.sort(morton_keys(x, *cube(np.concatenate([-x.min(0), x.max(0)]))))
            nodes, levels, counts, owner = domain_leaves(keys, p, npieces)
            start, end = key_range(nodes, levels)
            assert (start[1:] >= end[:-1]).all() and counts.sum() == p.n
            assert (np.diff(owner) >= 0).all() and owner.min() >= 0 and owner.max() < npieces
            per = np.bincount(owner, weights=counts, minlength=npieces)
            if how == "sfc":
                most = max(p.bucket, p.n // (npieces * p.domain_factor))
                assert np.abs(per - p.n / npieces).max() <= most
            else:
                shift = 3 * (bh.BITS - oct_level(npieces))
                crossing = (oct_piece(start >> shift, npieces)
                            != oct_piece((end - 1) >> shift, npieces))
                assert (counts[crossing] <= p.bucket).all()
    assert list(oct_piece(np.arange(8 ** oct_level(3)), 3)[[0, -1]]) == [0, 2]


@pytest.mark.parametrize("how,npieces", [("oct", 7), ("sfc", 6)])
def test_pieces_tables_walk_as_the_serial_tree(how, npieces):
    """What the PEs do, in one process: pieces build their subtrees, two PEs assemble
    their tables, fetch the remote nodes their groups need from the owners (answers three
    levels deep) until none is missing, and walk: the same bits as the serial tree."""
    p = Params(n=2500, decomposition=how, fetch_depth=2, seed=6)
    ids, x, _, m = initial_state(p)
    keys = morton_keys(x, *cube(np.concatenate([-x.min(0), x.max(0)])))
    order = np.lexsort((ids, keys))
    keys, pt = keys[order], np.concatenate([x[order], m[order, None]], axis=1)
    nodes, levels, _, owner = domain_leaves(keys, p, npieces)
    start, end = key_range(nodes, levels)
    trees = {}
    for k in range(npieces):
        mine = owner == k
        lo = int(np.searchsorted(keys, start[mine][0])) if mine.any() else 0
        hi = int(np.searchsorted(keys, end[mine][-1])) if mine.any() else 0
        roots = np.stack([nodes[mine], levels[mine], np.searchsorted(keys, start[mine]) - lo,
                          np.searchsorted(keys, end[mine]) - lo], axis=1)
        nf, ni = build_tree(keys[lo:hi], pt[lo:hi], roots, p.bucket)
        ni[:, OWNER] = k
        trees[k] = (nf, ni, pt[lo:hi], len(roots), lo)
    parts = [(t[0][:t[3]], t[1][:t[3]]) for t in trees.values()]
    acc, pot = np.zeros((p.n, 3)), np.zeros(p.n)
    fetched = 0
    for pe in (range(0, npieces // 2), range(npieces // 2, npieces)):
        local = {k: trees[k][:4] for k in pe}
        nf, ni, tpt, blocks = assemble(parts, local)
        table = Table(nf, ni, tpt)
        for k in pe:
            noff, poff = blocks[k]
            groups, _, leaves = walk_groups(trees[k][1], trees[k][3], 8 * p.bucket)
            while True:
                nf, ni, _ = table.views()
                missed, _ = walk_misses(nf, ni, noff + groups, p.theta)
                if not len(missed):
                    break
                for row in missed.tolist():
                    assert ni[row, KIND] == REMOTE and ni[row, OWNER] not in pe
                    ofs, ois, ops = trees[int(ni[row, OWNER])][:3]
                    at = np.flatnonzero(ois[:, bh.KEY] == ni[row, bh.KEY])[0]
                    table.graft(row, extract(ofs, ois, ops, int(at), p.fetch_depth))
                    fetched += 1
            got_a, got_p = np.zeros((len(trees[k][2]), 3)), np.zeros(len(trees[k][2]))
            npp, _ = walk_forces(*table.views(), noff + leaves, p.theta, p.eps, got_a, got_p,
                                 poff)
            assert npp >= 0
            lo = trees[k][4]
            acc[lo:lo + len(got_a)], pot[lo:lo + len(got_a)] = got_a, got_p
    assert fetched > 0
    ref_acc, ref_pot, _ = tree_forces(x, m, p.theta, p.eps, p.bucket, ids)
    assert np.array_equal(acc, ref_acc[order]) and np.array_equal(pot, ref_pot[order])


def test_bad_parameters_are_refused():
    for bad, says in ((Params(theta=1.0), "theta"), (Params(n=0), "n must"),
                      (Params(decomposition="orb"), "decomposition"),
                      (Params(lb_every=-1), "lb_every")):
        with pytest.raises(UsageError, match=says):
            bad.check()


# ----------------------------------------------------------------- parallel runs
def run(tmp_path: Path, ranks: int, *args: str, lb: str | None = None) -> tuple[dict, str]:
    out = tmp_path / f"r{ranks}-{'-'.join(args)}.npz"
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLE), *SMALL, *args,
           "--out", str(out)]
    env = dict(os.environ, SHOAL_LB=lb) if lb else None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"barneshut on {ranks} ranks did not finish within {TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return dict(z), done.stdout


SMALL = ["--n", "1500", "--steps", "4", "--report-every", "2", "--seed", "3"]


def test_same_bits_on_1_and_2_pes_balanced_and_as_the_serial_code(tmp_path):
    """1 PE with 8 pieces (oct), 2 PEs with 10 pieces (sfc) that the orb balancer moves at
    every step: the final particles and the energies are the same bits, and equal to the
    serial tree code's (forces summed in the same order whoever computes them)."""
    one, _ = run(tmp_path, 1)
    two, out = run(tmp_path, 2, "--pieces", "10", "--decomposition", "sfc", "--lb-every", "1",
                   lb="orb")
    assert two["lb_migrations"] > 0, out
    assert "caches:" in out and " 0 requests" not in out
    for key in ("ids", "x", "v", "acc", "pot", "ekin", "epot"):
        assert np.array_equal(one[key], two[key]), key
    x, v, acc, pot = serial_run(Params(n=1500, steps=4, report_every=2, seed=3))
    for key, ref in (("x", x), ("v", v), ("acc", acc), ("pot", pot)):
        assert np.array_equal(one[key], ref), key
    e = one["ekin"] + one["epot"]
    assert np.abs(e / e[0] - 1).max() < 1e-4  # leapfrog, 4 steps of 0.001
