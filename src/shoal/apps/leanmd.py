"""LeanMD: molecular dynamics with cells and pairwise computes (Acun14, Section IV-B and
Fig. 2), the load-balancing mini-app of shoal.

The box is split into cells of side ``cutoff + skin``, a dense 3-D chare array
(:class:`Cell`); every pair of neighbouring cells, a cell with itself included, has one
compute, an element of a sparse 6-D chare array (:class:`Compute`, index = the two cells'
indices) inserted at start-up on its first cell's PE. Each step a cell sends its positions
to its 27 computes; a compute evaluates the Lennard-Jones forces of its pair within the
cutoff (numba kernels) and sends each cell its share; a cell that has all 27 integrates
(velocity Verlet). Every ``migrate_every`` steps atoms that left their cell move to the
neighbouring cell they are in now. With ``lb_every`` both arrays are ``at_sync`` arrays and
every element calls ``at_sync()`` after that step, so the runtime's balancer moves computes
(and cells) to even the load. A clustered start makes the load uneven: the work of a
compute grows with the product of its two cells' atom counts (Section IV-B 2).

Units are reduced Lennard-Jones units (sigma = epsilon = mass = 1), the box is periodic.
The potential is the shifted-force form ``V(r) - V(rc) + (r - rc) F(rc)`` (both energy and
force go to zero at the cutoff), so velocity Verlet conserves the total energy; its drift,
the largest ``|E(t) - E(0)|`` per atom, is reported and checked against
:data:`ENERGY_TOLERANCE` (per atom, not relative to ``E(0)``: kinetic and potential energy
nearly cancel in a dense cluster, so ``E(0)`` can be close to zero).

Results do not depend on the number of PEs nor on where the balancer puts the elements: a
cell adds its 27 force parts in a fixed order (not in arrival order), keeps its atoms sorted
by id after each migration, and energies are summed at the end in cell order. A run is then
bit-identical with and without load balancing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

import shoal
from shoal.errors import UsageError
from shoal.jit import njit

# the 27 neighbour offsets of a cell (itself included), in a fixed order
OFFSETS: tuple[tuple[int, int, int], ...] = tuple(product((-1, 0, 1), repeat=3))
SLOT = {d: k for k, d in enumerate(OFFSETS)}
# the offsets whose compute a cell owns as its first cell: itself and the 13 "positive"
# ones, so every unordered pair of neighbouring cells has exactly one compute
HALF: tuple[tuple[int, int, int], ...] = tuple(d for d in OFFSETS if d >= (0, 0, 0))

# largest |E(t) - E(0)| per atom (epsilon) the app accepts with dt <= 0.004: velocity
# Verlet's error grows as dt^2 (measured: 6e-4 at dt = 0.004 from a dense clustered start,
# 1.5e-4 at dt = 0.002)
ENERGY_TOLERANCE = 2e-3
MIN_SPACING = 1.0  # closest lattice spacing of the initial placement, in sigma


@dataclass(frozen=True)
class Params:
    """A LeanMD run: ``cells`` per dimension (>= 3: a periodic box needs three to tell a
    neighbour on the left from one on the right), ``atoms`` per cell on average,
    ``steps`` of ``dt``, ``cutoff`` and ``skin`` (cell side = cutoff + skin; an atom may stray
    ``skin / 2`` outside its cell between migrations without losing a pair),
    ``migrate_every`` steps between atom migrations, ``lb_every`` steps between load
    balancing sync points (0: none), ``distribution`` uniform or clustered, initial
    ``temperature``, ``seed``."""

    cells: int = 4
    atoms: int = 40
    steps: int = 100
    cutoff: float = 4.0
    skin: float = 0.5
    dt: float = 0.004
    migrate_every: int = 10
    lb_every: int = 0
    distribution: str = "clustered"
    temperature: float = 1.0
    seed: int = 1

    @property
    def side(self) -> float:
        return self.cutoff + self.skin

    @property
    def box(self) -> float:
        return self.cells * self.side

    def check(self) -> None:
        """Raise :class:`UsageError` for a run that cannot work, saying what to change."""
        if self.cells < 3:
            raise UsageError(f"cells must be >= 3 per dimension (got {self.cells}): a periodic "
                             "box of fewer cells has neighbours that are the same cell")
        for name in ("atoms", "steps", "migrate_every"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.lb_every < 0:
            raise UsageError(f"lb_every must be >= 0 steps, 0 for no balancing "
                             f"(got {self.lb_every})")
        if not (self.cutoff > 0 and self.skin >= 0 and self.dt > 0 and self.temperature >= 0):
            raise UsageError("cutoff and dt must be > 0, skin and temperature >= 0")
        if self.distribution not in ("uniform", "clustered"):
            raise UsageError(f"distribution must be uniform or clustered, not "
                             f"{self.distribution!r}")
        most = int(atom_counts(self).max())
        spacing = self.side / math.ceil(most ** (1 / 3) - 1e-9)
        if spacing < MIN_SPACING:
            raise UsageError(f"{most} atoms in a cell of side {self.side:g} sit closer than "
                             f"{MIN_SPACING} sigma: lower atoms or raise cutoff/skin")


# ----------------------------------------------------------------- the initial state
def atom_counts(p: Params) -> np.ndarray:
    """Atoms per cell (row-major cell order). Uniform: ``atoms`` everywhere. Clustered: a
    Gaussian cluster (width a fifth of the box) centred at a quarter of the box, ``2 *
    atoms`` at its centre down to ``atoms / 8`` far away (the load of a compute grows with
    the product of its cells')."""
    n = p.cells
    if p.distribution == "uniform":
        return np.full(n**3, p.atoms, np.int64)
    centre = (np.arange(n) + 0.5) / n - 0.25
    centre = np.minimum(np.abs(centre), 1 - np.abs(centre))  # periodic distance, in boxes
    d2 = (centre[:, None, None] ** 2 + centre[None, :, None] ** 2
          + centre[None, None, :] ** 2).ravel()
    g = np.exp(-d2 / (2 * 0.2**2))
    return np.maximum(1, np.rint(p.atoms * (0.125 + 1.875 * g))).astype(np.int64)


def cell_atoms(p: Params, cell: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The initial atoms of ``cell``: ids, positions (a jittered lattice inside the cell) and
    velocities (Maxwell-Boltzmann at ``temperature``, no net momentum per cell). Drawn from
    ``(seed, cell)`` alone, so every cell builds its own and a serial run builds the same."""
    counts = atom_counts(p)
    lin = (cell[0] * p.cells + cell[1]) * p.cells + cell[2]
    k = int(counts[lin])
    first = int(counts[:lin].sum())
    rng = np.random.default_rng((p.seed, lin))
    m = math.ceil(k ** (1 / 3) - 1e-9)
    h = p.side / m
    sites = np.array(list(product(range(m), repeat=3)), np.float64)
    chosen = np.sort(rng.choice(len(sites), size=k, replace=False))
    x = (sites[chosen] + 0.5) * h + rng.uniform(-0.05, 0.05, (k, 3)) * h
    x += np.array(cell, np.float64) * p.side
    v = rng.normal(0.0, math.sqrt(p.temperature), (k, 3))
    if k > 1:
        v -= v.mean(axis=0)
    else:
        v[:] = 0.0
    return np.arange(first, first + k, dtype=np.int64), x, v


def initial_state(p: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every cell's initial atoms, concatenated in cell order (ids are 0..N-1 in order)."""
    parts = [cell_atoms(p, c) for c in np.ndindex(p.cells, p.cells, p.cells)]
    return tuple(np.concatenate([q[i] for q in parts]) for i in range(3))  # type: ignore


# ----------------------------------------------------------------- kernels
@njit(cache=True, error_model="numpy")
def _shifted(rc: float) -> tuple[float, float]:
    """Energy and force magnitude of the plain Lennard-Jones potential at ``rc``."""
    i6 = 1.0 / rc**6
    return 4.0 * i6 * (i6 - 1.0), 24.0 * i6 * (2.0 * i6 - 1.0) / rc


@njit(cache=True, error_model="numpy", inline="always")
def _pair(r2: float, rc: float, vc: float, fc: float) -> tuple[float, float]:
    """One pair at squared distance ``r2 < rc**2``: its shifted-force energy and the factor
    ``s`` of its force (the force on the first atom is ``s`` times their separation)."""
    r = math.sqrt(r2)
    i6 = 1.0 / (r2 * r2 * r2)
    return 4.0 * i6 * (i6 - 1.0) - vc + (r - rc) * fc, (24.0 * i6 * (2.0 * i6 - 1.0) / r
                                                          - fc) / r


@njit(cache=True, error_model="numpy")
def pair_forces(xa: np.ndarray, xb: np.ndarray, shift: np.ndarray,
                rc: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Forces on the atoms of two cells from each other (positions of b moved by ``shift``,
    the periodic image next to a) within ``rc``, and their potential energy."""
    vc, fc = _shifted(rc)
    rc2 = rc * rc
    fa = np.zeros(xa.shape)
    fb = np.zeros(xb.shape)
    e = 0.0
    for i in range(xa.shape[0]):
        xi, yi, zi = xa[i, 0] - shift[0], xa[i, 1] - shift[1], xa[i, 2] - shift[2]
        fx = fy = fz = 0.0
        for j in range(xb.shape[0]):
            dx, dy, dz = xi - xb[j, 0], yi - xb[j, 1], zi - xb[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < rc2:
                de, s = _pair(r2, rc, vc, fc)
                e += de
                fx += s * dx
                fy += s * dy
                fz += s * dz
                fb[j, 0] -= s * dx
                fb[j, 1] -= s * dy
                fb[j, 2] -= s * dz
        fa[i, 0] = fx
        fa[i, 1] = fy
        fa[i, 2] = fz
    return fa, fb, e


@njit(cache=True, error_model="numpy")
def self_forces(x: np.ndarray, rc: float) -> tuple[np.ndarray, float]:
    """Forces among the atoms of one cell within ``rc``, and their potential energy."""
    vc, fc = _shifted(rc)
    rc2 = rc * rc
    f = np.zeros(x.shape)
    e = 0.0
    for i in range(x.shape[0]):
        for j in range(i + 1, x.shape[0]):
            dx, dy, dz = x[i, 0] - x[j, 0], x[i, 1] - x[j, 1], x[i, 2] - x[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < rc2:
                de, s = _pair(r2, rc, vc, fc)
                e += de
                f[i, 0] += s * dx
                f[i, 1] += s * dy
                f[i, 2] += s * dz
                f[j, 0] -= s * dx
                f[j, 1] -= s * dy
                f[j, 2] -= s * dz
    return f, e


def _warm() -> None:
    """Compile (or load from numba's cache) the kernels for writable and read-only arrays
    now, at import, rather than inside the first measured entry method."""
    x = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0]])
    frozen = x.copy()
    frozen.flags.writeable = False
    for a in (x, frozen):
        pair_forces(a, a, np.array([3.0, 0.0, 0.0]), 2.5)
        self_forces(a, 2.5)


_warm()


# ----------------------------------------------------------------- geometry
def wrap(cell: tuple[int, ...], d: tuple[int, ...], n: int) -> tuple[int, ...]:
    return tuple((c + k) % n for c, k in zip(cell, d, strict=True))


def compute_of(cell: tuple[int, ...], d: tuple[int, int, int],
               n: int) -> tuple[tuple[int, ...], int]:
    """The compute that pairs ``cell`` with its neighbour at offset ``d``, and the side
    (0: first cell, 1: second) ``cell`` is on."""
    if d in HALF:
        return cell + wrap(cell, d, n), 0
    other = wrap(cell, d, n)
    return other + cell, 1


def compute_indices(n: int) -> list[tuple[int, ...]]:
    """Every compute: one per cell and offset in :data:`HALF` (14 per cell)."""
    return [c + wrap(c, d, n) for c in np.ndindex(n, n, n) for d in HALF]


# ----------------------------------------------------------------- the chares
class Compute(shoal.Chare):
    """The forces between two neighbouring cells (or within one): waits for both cells'
    positions of a step, runs the kernel, sends each cell its forces and half the energy."""

    def __init__(self, cells: Any, p: Params):
        ix = self.thisIndex
        a, b = ix[:3], ix[3:]
        n = p.cells
        d = tuple((bb - aa + 1) % n - 1 for aa, bb in zip(a, b, strict=True))
        self.cells, self.a, self.b = cells, a, b
        self.rc, self.steps, self.lb_every = p.cutoff, p.steps, p.lb_every
        self.alone = a == b
        # the image of b next to a, as a displacement of b's positions
        self.shift = np.array([(aa + dd - bb) * p.side for aa, dd, bb in zip(a, d, b,
                                                                                strict=True)])
        self.slot_a = SLOT[d]
        self.slot_b = SLOT[tuple(-k for k in d)]
        self.waiting: list[Any] = [None, None]

    def positions(self, step: int, side: int, x: np.ndarray) -> None:
        if self.alone:
            f, e = self_forces(x, self.rc)
            self.cells[self.a].forces(step, self.slot_a, f, e)
        else:
            self.waiting[side] = x
            xa, xb = self.waiting
            if xa is None or xb is None:
                return
            self.waiting = [None, None]
            fa, fb, e = pair_forces(xa, xb, self.shift, self.rc)
            self.cells[self.a].forces(step, self.slot_a, fa, 0.5 * e)
            self.cells[self.b].forces(step, self.slot_b, fb, 0.5 * e)
        if self.lb_every and step % self.lb_every == 0 and 0 < step < self.steps:
            self.at_sync()


class Cell(shoal.Chare):
    """A cell of the box and the atoms in it (ids, positions, velocities, forces)."""

    def __init__(self, computes: Any, p: Params, checks: list[Any], done: Any):
        self.p, self.computes, self.checks, self.done = p, computes, checks, done
        self.ids, self.x, self.v = cell_atoms(p, self.thisIndex)
        self.f = np.zeros_like(self.x)
        self.step = 0
        self.parts: list[Any] = [None] * 27
        self.energy: list[float] = [0.0] * 27
        self.got = 0
        self.arrived: dict[int, list[Any]] = {}  # step -> atoms from neighbours
        self.exchanging = False  # sent this step's leavers, waiting for the neighbours'
        self.moved = 0  # atoms this cell sent to a neighbour, over the run
        self.stray = 0.0  # farthest an atom got outside this cell before migrating

    def start(self) -> None:
        self._send_positions()

    def resume_from_sync(self) -> None:
        self._advance()

    def _send_positions(self) -> None:
        for d in OFFSETS:
            idx, side = compute_of(self.thisIndex, d, self.p.cells)
            self.computes[idx].positions(self.step, side, self.x)

    def forces(self, step: int, slot: int, f: np.ndarray, e: float) -> None:
        assert step == self.step, (step, self.step)
        self.parts[slot] = f
        self.energy[slot] = e
        self.got += 1
        if self.got < 27:
            return
        self.got = 0
        total = self.parts[0].copy()
        for part in self.parts[1:]:  # a fixed order: the same sum wherever the parts ran
            total += part
        self.parts = [None] * 27
        self.f = total
        if step > 0:
            self.v += 0.5 * self.p.dt * self.f  # the second half kick of velocity Verlet
        self._end_of_step()

    def _end_of_step(self) -> None:
        p, s = self.p, self.step
        if s % p.migrate_every == 0 or s == p.steps:
            epot = math.fsum(self.energy)
            ekin = 0.5 * float(np.einsum("ij,ij->", self.v, self.v))
            k = s // p.migrate_every if s < p.steps else len(self.checks) - 1
            self.contribute((ekin, epot, len(self.ids)), shoal.Reducer.gather, self.checks[k])
        if s == p.steps:
            self.contribute((self.ids, self.x, self.v, self.f, self.moved, self.stray),
                            shoal.Reducer.gather, self.done)
        elif s % p.migrate_every == 0 and s > 0:
            self._migrate()
        else:
            self._after_migration()

    def _migrate(self) -> None:
        """Send every neighbour the atoms now inside it (possibly none)."""
        p, c = self.p, np.array(self.thisIndex)
        home = np.floor(self.x / p.side).astype(np.int64)
        d = home - c
        if np.abs(d).max(initial=0) > 1:
            raise UsageError(f"an atom moved more than one cell in {p.migrate_every} steps: "
                             "lower dt or migrate_every")
        lo = c * p.side
        self.stray = max(self.stray, float(np.maximum(lo - self.x, self.x - lo - p.side)
                                           .max(initial=0.0)))
        dest = home % p.cells
        x = self.x - (home - dest) * p.side  # back into the box across its faces
        code = ((d[:, 0] + 1) * 3 + d[:, 1] + 1) * 3 + d[:, 2] + 1  # SLOT of the offset
        stay = code == SLOT[(0, 0, 0)]
        self.moved += int((~stay).sum())
        for k, off in enumerate(OFFSETS):
            if k == SLOT[(0, 0, 0)]:
                continue
            sel = code == k
            self.thisProxy[wrap(self.thisIndex, off, p.cells)].atoms(
                self.step, self.ids[sel], x[sel], self.v[sel], self.f[sel])
        self.ids, self.x, self.v, self.f = self.ids[stay], x[stay], self.v[stay], self.f[stay]
        self.exchanging = True
        self._merge()

    def atoms(self, step: int, ids: np.ndarray, x: np.ndarray, v: np.ndarray,
              f: np.ndarray) -> None:
        self.arrived.setdefault(step, []).append((ids, x, v, f))
        if self.exchanging:
            self._merge()

    def _merge(self) -> None:
        """With all 26 neighbours' atoms of this step: keep the atoms sorted by id."""
        came = self.arrived.get(self.step)
        if came is None or len(came) < 26:
            return
        del self.arrived[self.step]
        self.exchanging = False
        ids = np.concatenate([self.ids, *(q[0] for q in came)])
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.x = np.concatenate([self.x, *(q[1] for q in came)])[order]
        self.v = np.concatenate([self.v, *(q[2] for q in came)])[order]
        self.f = np.concatenate([self.f, *(q[3] for q in came)])[order]
        self._after_migration()

    def _after_migration(self) -> None:
        p = self.p
        if p.lb_every and self.step % p.lb_every == 0 and self.step > 0:
            self.at_sync()
        else:
            self._advance()

    def _advance(self) -> None:
        """The first half kick and the drift of the next step, then its positions out."""
        dt = self.p.dt
        self.v += 0.5 * dt * self.f
        self.x = self.x + dt * self.v  # a new array: computes on this PE hold the old one
        self.step += 1
        self._send_positions()


# ----------------------------------------------------------------- the run
def check_steps(p: Params) -> list[int]:
    """The steps whose energies are reported: 0, every ``migrate_every``, and the last."""
    steps = list(range(0, p.steps + 1, p.migrate_every))
    return steps if steps[-1] == p.steps else [*steps, p.steps]


def _cell_pe(cell: tuple[int, ...], n: int, npes: int) -> int:
    """The PE of ``cell`` under the cells' block map (row-major runs)."""
    lin = (cell[0] * n + cell[1]) * n + cell[2]
    return lin * npes // n**3


@dataclass
class Result:
    """What a run measured: ``energies`` (total, per reported step, summed in cell order),
    ``seconds_per_step`` (from the first forces to the last), the final atoms sorted by
    id (``ids``, ``x``, ``v``, ``f``), atoms moved between cells, the farthest an atom strayed
    outside its cell, and the balancer's history."""

    steps: list[int]
    energies: np.ndarray
    seconds_per_step: float
    ids: np.ndarray
    x: np.ndarray
    v: np.ndarray
    f: np.ndarray
    moved: int
    stray: float
    lb: list[dict[str, Any]]

    @property
    def drift(self) -> float:
        """Largest change of the total energy from step 0, per atom (epsilon)."""
        e = self.energies
        return float(np.abs(e - e[0]).max() / len(self.ids))

    def checksum(self) -> float:
        """A digest of the final state (exact sum, id order): equal runs print equal ones."""
        return math.fsum(np.concatenate([self.x.ravel(), self.v.ravel()]).tolist())


async def simulate(p: Params, progress: Any = None) -> Result:
    """Run LeanMD (call from ``main`` on PE 0): create the cells, insert the computes on
    their first cell's PE, run ``p.steps`` steps. ``progress(step, energy)`` is called at
    every reported step."""
    p.check()
    n, npes = p.cells, shoal.num_pes()
    report = check_steps(p)
    checks = [shoal.future() for _ in report]
    done = shoal.future()
    sync = p.lb_every > 0
    computes = shoal.Array(Compute, ndims=6, at_sync=sync)
    cells = shoal.Array(Cell, (n, n, n), args=(computes, p, checks, done), at_sync=sync)
    for idx in compute_indices(n):
        computes.insert(idx, args=(cells, p), pe=_cell_pe(idx[:3], n, npes))
    await shoal.quiescence()
    cells.start()
    energies = []
    t0 = 0.0
    for step, fut in zip(report, checks, strict=True):
        parts = await fut
        if step == 0:
            t0 = time.perf_counter()
        energies.append(math.fsum(ek + ep for ek, ep, _ in parts))
        if progress is not None:
            progress(step, energies[-1])
    elapsed = time.perf_counter() - t0
    final = await done
    ids = np.concatenate([q[0] for q in final])
    order = np.argsort(ids)
    pick = [np.concatenate([q[i] for q in final])[order] for i in range(4)]
    return Result(report, np.array(energies), elapsed / p.steps, *pick,
                  moved=sum(q[4] for q in final), stray=max(q[5] for q in final),
                  lb=shoal.lb_history())
