"""LeanMD (shoal.apps.leanmd, examples/leanmd.py) against a brute-force serial O(N^2)
reference with the same cutoff and potential; atoms conserved through migration; energy
conserved; the same bits with and without load balancing and on 1, 2 and 3 PEs."""

import os
import subprocess
import sys
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.leanmd import (
    ENERGY_TOLERANCE,
    HALF,
    OFFSETS,
    Params,
    compute_indices,
    initial_state,
    pair_forces,
    self_forces,
)
from shoal.errors import UsageError
from shoal.launch import mpiexec

EXAMPLE = Path(__file__).parents[2] / "examples" / "leanmd.py"
TIMEOUT = 300


# ----------------------------------------------------------------- the serial reference
def brute_forces(x: np.ndarray, box: float, rc: float) -> tuple[np.ndarray, float]:
    """Every pair i < j, minimum image, shifted-force Lennard-Jones within ``rc``."""
    d = x[:, None, :] - x[None, :, :]
    d -= box * np.round(d / box)
    r2 = (d**2).sum(-1)
    i, j = np.triu_indices(len(x), 1)
    near = r2[i, j] < rc * rc
    i, j = i[near], j[near]
    r = np.sqrt(r2[i, j])
    vc = 4 * rc**-12 - 4 * rc**-6
    fc = 48 * rc**-13 - 24 * rc**-7
    energy = float((4 * r**-12 - 4 * r**-6 - vc + (r - rc) * fc).sum())
    s = (48 * r**-13 - 24 * r**-7 - fc) / r
    pair = s[:, None] * d[i, j]
    f = np.zeros_like(x)
    np.add.at(f, i, pair)
    np.add.at(f, j, -pair)
    return f, energy


def reference(p: Params) -> tuple[list[float], np.ndarray, np.ndarray, np.ndarray]:
    """Velocity Verlet with brute-force forces: energies at the reported steps, final x, v, f."""
    _, x, v = initial_state(p)
    f, ep = brute_forces(x, p.box, p.cutoff)
    energies = [0.5 * (v**2).sum() + ep]
    for step in range(1, p.steps + 1):
        v = v + 0.5 * p.dt * f
        x = x + p.dt * v
        f, ep = brute_forces(x, p.box, p.cutoff)
        v = v + 0.5 * p.dt * f
        if step % p.migrate_every == 0 or step == p.steps:
            energies.append(0.5 * (v**2).sum() + ep)
    return energies, x, v, f


def run(tmp_path: Path, ranks: int, p: Params, lb: str | None = None) -> tuple[dict, str]:
    out = tmp_path / f"r{ranks}-{lb}.npz"
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLE), "--cells",
           str(p.cells), "--atoms", str(p.atoms), "--steps", str(p.steps), "--cutoff",
           str(p.cutoff), "--skin", str(p.skin), "--dt", str(p.dt), "--migrate-every",
           str(p.migrate_every), "--lb-every", str(p.lb_every), "--distribution",
           p.distribution, "--temperature", str(p.temperature), "--seed", str(p.seed),
           "--out", str(out)]
    env = dict(os.environ, SHOAL_LB=lb) if lb else None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"leanmd on {ranks} ranks did not finish within {TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return dict(z), done.stdout


def wrapped(a: np.ndarray, box: float) -> np.ndarray:
    return a - box * np.round(a / box)


# a small hot system: atoms cross cells between migrations (2.5 sigma cutoff, 27 cells)
SMALL = Params(cells=3, atoms=10, steps=80, cutoff=2.5, skin=0.6, dt=0.005, migrate_every=4,
               temperature=4.0, seed=3)


@pytest.fixture(scope="module")
def small_reference():
    return reference(SMALL)


# ----------------------------------------------------------------- without MPI
def test_every_neighbour_pair_has_one_compute():
    for n in (3, 4, 5):
        pairs = [frozenset((ix[:3], ix[3:])) for ix in compute_indices(n)]
        assert len(pairs) == len(set(pairs)) == 14 * n**3
        expected = {frozenset((c, tuple((a + d) % n for a, d in zip(c, off, strict=True))))
                    for c in product(range(n), repeat=3) for off in OFFSETS}
        assert set(pairs) == expected
    assert len(HALF) == 14


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 40), st.integers(1, 40), st.integers(0, 2**31))
def test_kernels_match_brute_force(na, nb, seed):
    rng = np.random.default_rng(seed)
    box = 30.0  # the two groups far from the box's other images
    sites = np.array(list(product(range(4), repeat=3)), float)  # spacing 1, jitter 0.1
    xa = sites[rng.choice(64, na, replace=False)] + rng.uniform(-0.1, 0.1, (na, 3))
    xb = sites[rng.choice(64, nb, replace=False)] + rng.uniform(-0.1, 0.1, (nb, 3))
    xb += [4.0, rng.uniform(-1, 1), 0.0]  # a neighbour group, partly within the cutoff
    f_all, e_all = brute_forces(np.concatenate([xa, xb]), box, 2.5)
    fa_self, ea = self_forces(xa, 2.5)
    fb_self, eb = self_forces(xb, 2.5)
    shift = np.array([box, 0.0, 0.0])  # b handed to the kernel one box away, as its image
    fa, fb, eab = pair_forces(xa, xb - shift, shift, 2.5)
    assert np.allclose(np.concatenate([fa + fa_self, fb + fb_self]), f_all, rtol=1e-9,
                       atol=1e-9)
    assert np.isclose(ea + eb + eab, e_all, rtol=1e-12, atol=1e-12)


def test_bad_parameters_are_refused():
    with pytest.raises(UsageError, match="cells must be >= 3"):
        Params(cells=2).check()
    with pytest.raises(UsageError, match="closer than"):
        Params(atoms=500, cutoff=2.5).check()
    bad = subprocess.run([sys.executable, str(EXAMPLE), "--cells", "2"], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "cells must be >= 3" in bad.stderr


# ----------------------------------------------------------------- parallel runs
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_parallel_matches_brute_force(tmp_path, small_reference, ranks):
    """Forces, energies, positions and velocities after 80 steps with atoms migrating every
    4: equal to the O(N^2) reference up to floating-point summation order (the parallel code
    sums pair forces per compute and per cell; the reference per atom)."""
    energies, x, v, f = small_reference
    got, _ = run(tmp_path, ranks, SMALL)
    assert np.array_equal(got["ids"], np.arange(len(x)))  # every atom once, none lost
    assert got["moved"] > 20  # atoms did change cells
    assert np.allclose(got["energies"], energies, rtol=1e-10, atol=1e-10)
    assert np.abs(wrapped(got["x"] - x, SMALL.box)).max() < 1e-9
    assert np.allclose(got["v"], v, rtol=0, atol=1e-9)
    assert np.allclose(got["f"], f, rtol=1e-8, atol=1e-8)


def test_same_bits_with_and_without_balancing_and_on_any_pes(tmp_path):
    """Bit-identical, not just close: cells add their 27 force parts in a fixed order and
    keep atoms sorted by id, so where a compute ran changes nothing. greedy moves elements at
    every sync point. 27 cells (378 computes): 64 cells took 27 CPU-s for the 3 runs, 27
    take 15; the runs still move atoms between cells (17 of them) and greedy migrates
    elements about 2300 times over its 12 steps."""
    p = Params(cells=3, atoms=12, steps=48, cutoff=2.5, skin=0.6, dt=0.005, migrate_every=4,
               temperature=4.0, seed=5)
    plain, _ = run(tmp_path, 2, p)
    balanced, out = run(tmp_path, 2, Params(**{**p.__dict__, "lb_every": 4}), lb="greedy")
    three, _ = run(tmp_path, 3, p)
    assert balanced["lb_migrations"] > 0, out
    assert plain["moved"] > 0
    for key in ("ids", "x", "v", "f", "energies"):
        assert np.array_equal(plain[key], balanced[key]), key
        assert np.array_equal(plain[key], three[key]), key


def test_energy_is_conserved(tmp_path):
    """500 steps of a clustered system on 2 PEs, balanced every 50: the total energy stays
    within ENERGY_TOLERANCE per atom of its start (and the example says so)."""
    p = Params(cells=3, atoms=12, steps=500, cutoff=2.5, skin=0.5, dt=0.004,
               migrate_every=10, lb_every=50, seed=7)
    got, out = run(tmp_path, 2, p)
    e = got["energies"]
    assert len(e) == 51
    drift = np.abs(e - e[0]).max() / len(got["ids"])
    assert drift <= ENERGY_TOLERANCE
    assert drift > 0  # the energies are measured, not copied
    assert f"energy drift {drift:.3e}" in out and "ok)" in out
