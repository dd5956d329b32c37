"""AMR: tree-based adaptive mesh refinement of an advected scalar (Acun14, Section IV-A:
AMR3D, in 2-D), the sparse-array mini-app of shoal.

The domain is the periodic unit square, covered by the leaves of a quadtree. Each leaf is a
block of ``block x block`` cells, an element of a sparse 3-D chare array (:class:`Block`)
whose index is its position in the tree, ``(level, i, j)``: the block covers
``[i, i + 1) x [j, j + 1)`` in units of ``2**-level``. A block finds its parent, its
children and the slot beside it by arithmetic on its own index; nothing holds the tree.

The scalar ``u`` is advected by a constant velocity with the first-order upwind (donor
cell) finite-volume scheme, as AMR3D does, every block with the same time step (set by the
finest level allowed). Each step a block sends each face neighbour the cells it needs, one
ghost layer: to a neighbour of its own level its boundary row; to a coarser one the
average of each pair of its boundary cells (restriction to the coarse face); to each of
the two finer ones its half of the row, each cell twice (prolongation by injection). With
upwind fluxes and these ghosts, the two sides of a face between levels compute the same
flux through it (the coarse face's flux is the sum of the two fine ones), so the total of
``u`` is conserved to rounding through every step.

Every ``remesh_every`` steps the mesh adapts (one remeshing, ended by quiescence
detection, ``O(1)`` collective operations whatever the depth, as in Langer et al. 2012):

1. each block takes a fresh ghost layer, computes its criterion (the largest difference
   between neighbouring cells, ghosts included) and chooses a level: one finer above
   ``refine_tol``, one coarser below ``coarsen_tol``; it sends that decision to its face
   neighbours. A block raises its decision when a neighbour's would break the 2:1 balance
   (levels of face neighbours differ by at most one) or when a sibling does not coarsen
   (a parent needs all four children), and sends its raised decision on. Decisions only
   rise, so this ends, and its fixed point does not depend on the order of the messages:
   the main program waits for quiescence;
2. each block carries its decision out: a refining block inserts its four children
   (``arr.insert``, on its own PE, each with its quadrant's cells repeated 2x2) and
   deletes itself; of four coarsening siblings the first inserts their parent with its
   quadrant (each 2x2 of cells averaged), the parent asks the other three for theirs, and
   each deletes itself once it has sent it; a block that stays updates its record of its
   neighbours' levels. Every new block learns its neighbours' levels from the decisions
   its creators heard. Quiescence ends the phase.

With ``lb_every`` the array is an AtSync array and every ``lb_every`` remeshings each block
calls ``at_sync()``: the runtime's balancer moves blocks (children are born on their
parent's PE, so refinement piles blocks onto the PEs where the feature is).

Results do not depend on the number of PEs nor on the balancing: a block's update reads
only its own cells and the ghost values its neighbours computed from theirs, the same
values whatever the arrival order, and the decisions reach the same fixed point.
:func:`serial` runs the same operations over a dictionary of blocks with a global view of
the tree (neighbours looked up, decisions iterated to their fixed point over all blocks),
and gives the same bits.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import shoal
from shoal.errors import UsageError
from shoal.jit import njit

# faces: west (-x), east (+x), south (-y), north (+y)
W, E, S, N = 0, 1, 2, 3
OPP = (E, W, N, S)
STEP = ((-1, 0), (1, 0), (0, -1), (0, 1))
Key = tuple[int, int, int]

# relative change of the total of u the app accepts over a run (it is conserved to rounding)
MASS_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Params:
    """An AMR run: blocks of ``block x block`` cells (even, >= 4), levels from
    ``min_level`` (>= 2: four blocks per side, so that a block's two neighbours along an
    axis differ) to ``max_level``; ``steps`` time steps, remeshing every ``remesh_every``
    (and ``max_level - min_level`` remeshings of the initial condition before the first
    step); ``lb_every`` remeshings between balancing steps (0: none); the velocity
    ``(vx, vy)``, the Courant number ``cfl`` at the finest level; the criterion's
    thresholds; the Gaussian blob's ``centre`` and ``width``."""

    block: int = 16
    min_level: int = 2
    max_level: int = 5
    steps: int = 64
    remesh_every: int = 4
    lb_every: int = 0
    vx: float = 1.0
    vy: float = 0.5
    cfl: float = 0.8
    refine_tol: float = 0.04
    coarsen_tol: float = 0.01
    centre: tuple[float, float] = (0.35, 0.4)
    width: float = 0.06

    def h(self, level: int) -> float:
        """The side of a cell at ``level`` (a power of two: exact)."""
        return 1.0 / ((1 << level) * self.block)

    @property
    def dt(self) -> float:
        return self.cfl * self.h(self.max_level) / (abs(self.vx) + abs(self.vy))

    @property
    def init_rounds(self) -> int:
        return self.max_level - self.min_level

    def check(self) -> None:
        """Raise :class:`UsageError` for a run that cannot work, saying what to change."""
        if self.block < 4 or self.block % 2:
            raise UsageError(f"block must be even and >= 4 cells (got {self.block})")
        if self.min_level < 2:
            raise UsageError(f"min_level must be >= 2 (got {self.min_level}): at level 1 a "
                             "block's west and east neighbours are the same block")
        if not self.min_level <= self.max_level <= 20:
            raise UsageError(f"max_level must lie in [min_level, 20] (got {self.max_level})")
        for name in ("steps", "remesh_every"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.lb_every < 0:
            raise UsageError(f"lb_every must be >= 0 remeshings (0: no balancing), got "
                             f"{self.lb_every}")
        self._check_numbers()

    def _check_numbers(self) -> None:
        if not 0 < self.cfl <= 1:
            raise UsageError(f"cfl must lie in (0, 1] (got {self.cfl}): the upwind scheme "
                             "is stable for (|vx| + |vy|) dt / h <= 1")
        if self.vx == 0 and self.vy == 0:
            raise UsageError("the velocity must not be zero")
        if not 0 <= self.coarsen_tol < self.refine_tol:
            raise UsageError("need 0 <= coarsen_tol < refine_tol")
        if self.width <= 0:
            raise UsageError("width must be > 0")

    def cycles(self) -> list[int]:
        """The steps of each cycle between remeshings (the last may be shorter)."""
        full, rest = divmod(self.steps, self.remesh_every)
        return [self.remesh_every] * full + ([rest] if rest else [])


# ----------------------------------------------------------------- the tree's geometry
def across(key: Key, f: int) -> Key:
    """The slot of ``key``'s level beside it across face ``f`` (periodic)."""
    level, i, j = key
    n = 1 << level
    di, dj = STEP[f]
    return (level, (i + di) % n, (j + dj) % n)


def parent_of(key: Key) -> Key:
    return (key[0] - 1, key[1] >> 1, key[2] >> 1)


def children_of(key: Key) -> list[Key]:
    """The four children, in quadrant order (0, 0), (0, 1), (1, 0), (1, 1)."""
    level, i, j = key
    return [(level + 1, 2 * i + qi, 2 * j + qj) for qi in (0, 1) for qj in (0, 1)]


def tangential(key: Key, f: int) -> int:
    """Which half of a coarser neighbour's face across ``f`` this block faces."""
    return key[2] & 1 if f in (W, E) else key[1] & 1


def neighbours(key: Key, f: int, level: int) -> list[tuple[Key, int]]:
    """The leaves across face ``f`` of ``key`` when they are at ``level`` (one coarser, the
    same, or one finer: 2:1 balance), each with the half of its own face (``OPP[f]``)
    that ``key`` covers (-1: all of it). Finer ones come in the order of ``key``'s halves."""
    own = key[0]
    s = across(key, f)
    if level == own:
        return [(s, -1)]
    if level == own - 1:
        return [(parent_of(s), tangential(key, f))]
    assert level == own + 1, (key, f, level)
    _, si, sj = s
    if f == W:
        return [((own + 1, 2 * si + 1, 2 * sj + k), -1) for k in (0, 1)]
    if f == E:
        return [((own + 1, 2 * si, 2 * sj + k), -1) for k in (0, 1)]
    if f == S:
        return [((own + 1, 2 * si + k, 2 * sj + 1), -1) for k in (0, 1)]
    return [((own + 1, 2 * si + k, 2 * sj), -1) for k in (0, 1)]


def sibling_faces(key: Key) -> tuple[int, int]:
    """The faces of ``key`` toward its siblings along x and along y."""
    return (E if key[1] % 2 == 0 else W, N if key[2] % 2 == 0 else S)


def external(q: tuple[int, int], f: int) -> bool:
    """Whether face ``f`` of the child in quadrant ``q`` lies on its parent's face ``f``."""
    qi, qj = q
    return (f == W and qi == 0) or (f == E and qi == 1) or (f == S and qj == 0) or \
        (f == N and qj == 1)


# ----------------------------------------------------------------- decisions
class Node:
    """One block's part of a remeshing: its neighbours' levels per face (``nb``), its
    decision ``t`` (the level it will have: one coarser, the same or one finer), and the
    decisions its neighbours sent (``nt[f][half]``). Plain Python, no runtime: the chare
    holds one, and the tests run many with messages delivered in random orders."""

    __slots__ = ("key", "nb", "nt", "t")

    def __init__(self, key: Key, nb: list[int]):
        self.key = key
        self.nb = list(nb)
        self.t: int | None = None
        self.nt: list[list[int | None]] = [[None, None] for _ in range(4)]

    def required(self) -> int:
        """The lowest level the decisions heard so far allow: within one of every
        neighbour's (2:1), and no coarsening unless both siblings it touches are leaves
        of its level that coarsen too (the third sibling is held by them)."""
        level = self.key[0]
        need = level - 1
        for f in range(4):
            for t in self.nt[f]:
                if t is not None and t - 1 > need:
                    need = t - 1
        for f in sibling_faces(self.key):
            t = self.nt[f][0]
            if self.nb[f] != level or (t is not None and t >= level):
                need = max(need, level)
        return need

    def first(self, wanted: int) -> list[tuple[Key, int, int, int]]:
        """Choose ``wanted`` (already within the allowed levels) or what the decisions
        heard so far require; the messages to send: ``(block, its face, its half, t)``."""
        self.t = max(wanted, self.required())
        return self.messages()

    def hear(self, face: int, half: int, t: int) -> list[tuple[Key, int, int, int]]:
        """A neighbour across ``face`` (covering ``half`` of it, -1: all) decided ``t``:
        the messages of a raised decision, if it rises."""
        for k in ((0, 1) if half < 0 else (half,)):
            old = self.nt[face][k]
            self.nt[face][k] = t if old is None else max(old, t)
        if self.t is None:  # not decided yet: first() takes it into account
            return []
        need = self.required()
        if need <= self.t:
            return []
        self.t = need
        return self.messages()

    def messages(self) -> list[tuple[Key, int, int, int]]:
        assert self.t is not None
        return [(dest, OPP[f], half, self.t) for f in range(4)
                for dest, half in neighbours(self.key, f, self.nb[f])]

    def _across(self, f: int) -> int:
        """The new level of the leaves across face ``f`` (both halves agree)."""
        a, b = self.nt[f]
        assert a is not None and a == b, (self.key, f, self.nt)
        return a

    def kept(self) -> list[int]:
        """The neighbours' levels once the mesh has changed, for a block that stays."""
        return [self._across(f) for f in range(4)]

    def child(self, q: tuple[int, int]) -> list[int]:
        """The neighbours' levels of the child in quadrant ``q`` of a refining block."""
        level = self.key[0] + 1
        out = []
        for f in range(4):
            if not external(q, f):
                out.append(level)
                continue
            t = self.nt[f][q[1] if f in (W, E) else q[0]]
            assert t is not None
            out.append(t)
        return out

    def part(self, q: tuple[int, int]) -> dict[int, int]:
        """What the child in quadrant ``q`` knows of its coarsened parent's neighbours: the
        new levels across its faces that lie on the parent's faces."""
        return {f: self._across(f) for f in range(4) if external(q, f)}


def parent_nb(parts: list[dict[int, int]]) -> list[int]:
    """The neighbours' levels of a coarsened parent, from its four children's parts."""
    nb: dict[int, int] = {}
    for part in parts:
        for f, level in part.items():
            assert nb.setdefault(f, level) == level, parts
    return [nb[f] for f in range(4)]


# ----------------------------------------------------------------- the kernels
@njit(cache=True, error_model="numpy")
def advance(u: np.ndarray, vx: float, vy: float, c: float) -> np.ndarray:
    """One donor-cell step of the interior of ``u`` (one ghost layer around it; ``c`` is
    dt / h). Each face's flux is computed from the same two values by both its cells."""
    n = u.shape[0] - 2
    out = np.empty((n, n))
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            if vx > 0:
                fw, fe = vx * u[i - 1, j], vx * u[i, j]
            else:
                fw, fe = vx * u[i, j], vx * u[i + 1, j]
            if vy > 0:
                fs, fn = vy * u[i, j - 1], vy * u[i, j]
            else:
                fs, fn = vy * u[i, j], vy * u[i, j + 1]
            out[i - 1, j - 1] = u[i, j] - c * ((fe - fw) + (fn - fs))
    return out


@njit(cache=True, error_model="numpy")
def criterion(u: np.ndarray) -> float:
    """The largest difference between two cells next to each other (ghosts included)."""
    n = u.shape[0] - 2
    big = 0.0
    for i in range(0, n + 1):
        for j in range(1, n + 1):
            d = abs(u[i + 1, j] - u[i, j])
            if d > big:
                big = d
            d = abs(u[j, i + 1] - u[j, i])
            if d > big:
                big = d
    return big


def _warm() -> None:
    """Compile (or load from numba's cache) the kernels at import, for writable and
    read-only arrays, rather than inside the first measured entry method."""
    u = np.zeros((6, 6))
    frozen = u.copy()
    frozen.flags.writeable = False
    for a in (u, frozen):
        advance(a, 1.0, -0.5, 0.1)
        criterion(a)


_warm()


# ----------------------------------------------------------------- cells and ghosts
def initial(p: Params, key: Key) -> np.ndarray:
    """The blob at the centres of ``key``'s cells: a Gaussian of ``width`` (periodic)."""
    level, i, j = key
    h = p.h(level)
    n = p.block
    x = (i * n + np.arange(n) + 0.5) * h - p.centre[0]
    y = (j * n + np.arange(n) + 0.5) * h - p.centre[1]
    x -= np.round(x)
    y -= np.round(y)
    return np.exp(-(x[:, None] ** 2 + y[None, :] ** 2) / (2 * p.width ** 2))


def boundary(v: np.ndarray, f: int) -> np.ndarray:
    """The row of cells of ``v`` along face ``f``."""
    if f == W:
        return v[0, :]
    if f == E:
        return v[-1, :]
    if f == S:
        return v[:, 0]
    return v[:, -1]


def piece(v: np.ndarray, f: int, own: int, level: int, k: int) -> np.ndarray:
    """What a block of level ``own`` with cells ``v`` sends its neighbour of ``level``
    across face ``f`` (the ``k``-th of two finer ones): a new array."""
    row = boundary(v, f)
    if level == own:
        return row.copy()
    if level == own - 1:  # restriction: each pair of cells averaged
        return 0.5 * (row[0::2] + row[1::2])
    half = len(row) // 2  # prolongation: half the row, each cell twice
    return np.repeat(row[k * half:(k + 1) * half], 2)


def padded(v: np.ndarray, ghosts: list[list[tuple[int, np.ndarray]]]) -> np.ndarray:
    """``v`` with its ghost layer: ``ghosts[f]`` holds (half, values) pieces (-1: the
    whole face)."""
    n = v.shape[0]
    u = np.zeros((n + 2, n + 2))
    u[1:-1, 1:-1] = v
    slots = (u[0, 1:-1], u[-1, 1:-1], u[1:-1, 0], u[1:-1, -1])
    for f in range(4):
        for half, values in ghosts[f]:
            if half < 0:
                slots[f][:] = values
            else:
                slots[f][half * n // 2:(half + 1) * n // 2] = values
    return u


def prolong(v: np.ndarray, q: tuple[int, int]) -> np.ndarray:
    """The cells of the child in quadrant ``q``: its parent's cells, each repeated 2x2."""
    half = v.shape[0] // 2
    sub = v[q[0] * half:(q[0] + 1) * half, q[1] * half:(q[1] + 1) * half]
    return np.repeat(np.repeat(sub, 2, axis=0), 2, axis=1)


def restrict(v: np.ndarray) -> np.ndarray:
    """A child's quadrant of its parent: each 2x2 of its cells averaged."""
    return 0.25 * ((v[0::2, 0::2] + v[1::2, 0::2]) + (v[0::2, 1::2] + v[1::2, 1::2]))


def assemble(quads: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
    half = quads[0, 0].shape[0]
    v = np.empty((2 * half, 2 * half))
    for (qi, qj), sub in quads.items():
        v[qi * half:(qi + 1) * half, qj * half:(qj + 1) * half] = sub
    return v


def wanted_level(p: Params, level: int, indicator: float) -> int:
    if indicator > p.refine_tol and level < p.max_level:
        return level + 1
    if indicator < p.coarsen_tol and level > p.min_level:
        return level - 1
    return level


def block_mass(p: Params, level: int, v: np.ndarray) -> float:
    h = p.h(level)
    return float(np.sum(v)) * (h * h)


# ----------------------------------------------------------------- the chares
class Block(shoal.Chare):
    """A leaf of the tree: its cells ``v``, its :class:`Node`, and the ghost pieces that
    came for each exchange (by tag ``(cycle, k)``: a neighbour may be one exchange ahead)."""

    def __init__(self, p: Params, v: np.ndarray | None, nb: list[int] | None, born: int,
                 part: Any = None):
        self.p, self.born = p, born
        self.level = self.thisIndex[0]
        self.inbox: dict[tuple[int, int], list[tuple[int, int, np.ndarray]]] = {}
        self.cycle = born
        self.k = self.nsteps = 0
        self.decide_after = False
        self.fut: Any = None
        self.lbfut: Any = None
        self.part: Any = None  # a coarsening child's quadrant, until its parent asks
        self.asked = False
        if v is not None:
            assert nb is not None
            self.v, self.node = v, Node(self.thisIndex, nb)
            return
        # a parent inserted by its first child for the four of them: ask the others
        self.parts: dict[tuple[int, int], Any] = {}
        self.v = np.zeros((0, 0))
        for q, child in zip(((0, 0), (0, 1), (1, 0), (1, 1)), children_of(self.thisIndex),
                            strict=True):
            if q != (0, 0):
                self.thisProxy[child].ask()
        self.take(part)

    # --- stepping
    def run(self, cycle: int, nsteps: int, decide: bool, fut: Any) -> None:
        """Run ``nsteps`` steps (each a ghost exchange and an update), report the mass to
        ``fut``, then (``decide``) exchange ghosts once more and send the decision."""
        self.cycle, self.k, self.nsteps, self.decide_after, self.fut = cycle, 0, nsteps, \
            decide, fut
        if nsteps == 0:
            self._report()
        self._exchange()

    def _report(self) -> None:
        self.contribute(block_mass(self.p, self.level, self.v), shoal.Reducer.gather,
                        self.fut)

    def _exchange(self) -> None:
        if self.k == self.nsteps and not self.decide_after:
            return
        tag = (self.cycle, self.k)
        own = self.level
        for f in range(4):
            for k, (dest, half) in enumerate(neighbours(self.thisIndex, f, self.node.nb[f])):
                self.thisProxy[dest].ghost(tag, OPP[f], half,
                                           piece(self.v, f, own, self.node.nb[f], k))
        self._try()

    def ghost(self, tag: tuple[int, int], face: int, half: int, values: np.ndarray) -> None:
        self.inbox.setdefault(tag, []).append((face, half, values))
        if tag == (self.cycle, self.k):
            self._try()

    def _try(self) -> None:
        tag = (self.cycle, self.k)
        got = self.inbox.get(tag)
        level, nb = self.level, self.node.nb
        if got is None or len(got) < sum(2 if nb[f] > level else 1 for f in range(4)):
            return
        del self.inbox[tag]
        ghosts: list[list[tuple[int, np.ndarray]]] = [[], [], [], []]
        for face, half, values in got:
            ghosts[face].append((half, values))
        u = padded(self.v, ghosts)
        if self.k < self.nsteps:
            p = self.p
            self.v = advance(u, p.vx, p.vy, p.dt / p.h(level))
            self.k += 1
            if self.k == self.nsteps:
                self._report()
            self._exchange()
            return
        wanted = wanted_level(self.p, level, criterion(u))
        self._send(self.node.first(wanted))

    # --- remeshing
    def _send(self, messages: list[tuple[Key, int, int, int]]) -> None:
        for dest, face, half, t in messages:
            self.thisProxy[dest].decision(face, half, t)

    def decision(self, face: int, half: int, t: int) -> None:
        self._send(self.node.hear(face, half, t))

    def remesh(self, cycle: int, init: bool) -> None:
        """Carry out the settled decision (``init``: new blocks take the initial
        condition at their own resolution rather than their creators' cells)."""
        if self.born == cycle:  # made by this remeshing (not sent it: kept for safety)
            return
        node, p, key = self.node, self.p, self.thisIndex
        assert node.t is not None, key
        if node.t == self.level:
            node.nb, node.t = node.kept(), None
            node.nt = [[None, None] for _ in range(4)]
        elif node.t > self.level:
            for q, child in zip(((0, 0), (0, 1), (1, 0), (1, 1)), children_of(key),
                                strict=True):
                v = initial(p, child) if init else prolong(self.v, q)
                self.thisProxy.insert(child, args=(p, v, node.child(q), cycle),
                                      pe=shoal.my_pe())
            self.thisProxy.delete(key)
        else:
            q = (key[1] & 1, key[2] & 1)
            self.part = (q, None if init else restrict(self.v), node.part(q), cycle, init)
            if q == (0, 0):
                self.thisProxy.insert(parent_of(key), args=(p, None, None, cycle, self.part),
                                      pe=shoal.my_pe())
                self.thisProxy.delete(key)
            elif self.asked:
                self.ask()

    def ask(self) -> None:
        """The parent inserted for this coarsening block asks for its quadrant."""
        self.asked = True
        if self.part is None:  # the remeshing has not reached this block yet
            return
        self.thisProxy[parent_of(self.thisIndex)].take(self.part)
        self.thisProxy.delete(self.thisIndex)

    def take(self, part: Any) -> None:
        q, v, nbpart, _cycle, _init = part
        self.parts[q] = (v, nbpart)
        if len(self.parts) < 4:
            return
        init = part[4]
        self.v = initial(self.p, self.thisIndex) if init else assemble(
            {q: v for q, (v, _) in self.parts.items()})
        self.node = Node(self.thisIndex, parent_nb([nbp for _, nbp in self.parts.values()]))
        del self.parts

    # --- balancing and the end
    def balance(self, fut: Any) -> None:
        self.lbfut = fut
        self.at_sync()

    def resume_from_sync(self) -> None:
        self.contribute(None, None, self.lbfut)

    def state(self, full: bool, fut: Any) -> None:
        """Report this block's index (``full``: with its cells and neighbours' levels)."""
        self.contribute((self.thisIndex, self.v, self.node.nb) if full else self.thisIndex,
                        shoal.Reducer.gather, fut)


# ----------------------------------------------------------------- the run
@dataclass
class Result:
    """What a run measured: per cycle the steps done, the total of ``u``, the blocks per
    level and the seconds of its steps and of its remeshing; the final blocks (cells and
    neighbours' levels by index); the balancer's history."""

    steps: list[int]
    masses: list[float]
    levels: list[dict[int, int]]
    step_seconds: list[float]
    remesh_seconds: list[float]
    blocks: dict[Key, np.ndarray]
    nb: dict[Key, list[int]]
    lb: list[dict[str, Any]] = field(default_factory=list)

    @property
    def drift(self) -> float:
        """Largest relative change of the total of u from the start."""
        m = np.array(self.masses)
        return float(np.abs(m - m[0]).max() / abs(m[0]))

    @property
    def steps_per_second(self) -> float:
        return self.steps[-1] / sum(self.step_seconds)

    def checksum(self) -> str:
        """A digest of every block's index and cells, in index order."""
        h = hashlib.sha256()
        for key in sorted(self.blocks):
            h.update(np.array(key, np.int64).tobytes())
            h.update(np.ascontiguousarray(self.blocks[key]).tobytes())
        return h.hexdigest()[:16]


def _counts(keys: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for key in keys:
        out[key[0]] = out.get(key[0], 0) + 1
    return dict(sorted(out.items()))


async def simulate(p: Params, progress: Any = None) -> Result:
    """Run AMR (call from ``main`` on PE 0): insert the blocks of ``min_level`` (in row-major
    runs over the PEs), refine the initial condition ``max_level - min_level`` times, then
    run ``p.steps`` steps remeshing every ``remesh_every``. ``progress(result, cycle)`` is
    called after every cycle."""
    p.check()
    npes = shoal.num_pes()
    blocks = shoal.Array(Block, ndims=3, at_sync=p.lb_every > 0)
    side = 1 << p.min_level
    for lin in range(side * side):
        key = (p.min_level, lin // side, lin % side)
        blocks.insert(key, args=(p, initial(p, key), [p.min_level] * 4, -1),
                      pe=lin * npes // (side * side))
    await shoal.quiescence()
    r = Result([], [], [], [], [], {}, {})
    cycle = 0
    for _ in range(p.init_rounds):
        fut = shoal.future()
        blocks.run(cycle, 0, True, fut)
        await fut
        await shoal.quiescence()
        blocks.remesh(cycle, True)
        await shoal.quiescence()
        cycle += 1
    done = 0
    plan = p.cycles()
    for c, nsteps in enumerate(plan):
        last = c == len(plan) - 1
        fut = shoal.future()
        t0 = time.perf_counter()
        blocks.run(cycle, nsteps, not last, fut)
        masses = await fut
        t1 = time.perf_counter()
        done += nsteps
        r.steps.append(done)
        r.masses.append(math.fsum(masses))
        r.step_seconds.append(t1 - t0)
        if not last:
            await shoal.quiescence()
            blocks.remesh(cycle, False)
            await shoal.quiescence()
            r.remesh_seconds.append(time.perf_counter() - t1)
            if p.lb_every and (c + 1) % p.lb_every == 0:
                lb = shoal.future()
                blocks.balance(lb)
                await lb
        cycle += 1
        state = shoal.future()
        blocks.state(last, state)
        got = await state
        if last:
            r.blocks = {key: v for key, v, _ in got}
            r.nb = {key: nb for key, _, nb in got}
            got = list(r.blocks)
        r.levels.append(_counts(got))
        if progress is not None:
            progress(r, c)
    r.lb = shoal.lb_history()
    return r


# ----------------------------------------------------------------- the serial reference
def level_across(keys: Any, key: Key, f: int) -> int:
    """The level of the leaves across face ``f`` of leaf ``key`` in the set ``keys``."""
    s = across(key, f)
    if s in keys:
        return key[0]
    if parent_of(s) in keys:
        return key[0] - 1
    for dest, _ in neighbours(key, f, key[0] + 1):
        assert dest in keys, (key, f, dest)
    return key[0] + 1


def settle(keys: Any, wanted: dict[Key, int]) -> dict[Key, int]:
    """The decisions of every leaf: ``wanted`` raised until no face neighbours differ by
    more than one level and only complete families of leaves coarsen (the least fixed
    point, which the blocks' messages reach in any order), by sweeps over all leaves."""
    t = dict(wanted)
    across_levels = {key: [level_across(keys, key, f) for f in range(4)] for key in keys}
    order = sorted(keys)
    changed = True
    while changed:
        changed = False
        for key in order:
            level = key[0]
            need = t[key]
            for f in range(4):
                for dest, _ in neighbours(key, f, across_levels[key][f]):
                    need = max(need, t[dest] - 1)
            for f in sibling_faces(key):
                if across_levels[key][f] != level or t[across(key, f)] >= level:
                    need = max(need, level)
            if need > t[key]:
                t[key] = need
                changed = True
    return t


def remeshed(keys: Any, t: dict[Key, int]) -> set[Key]:
    """The leaves after every leaf of ``keys`` took its decision ``t``."""
    out: set[Key] = set()
    for key in keys:
        if t[key] > key[0]:
            out.update(children_of(key))
        elif t[key] < key[0]:
            family = children_of(parent_of(key))
            assert all(c in keys and t[c] == key[0] - 1 for c in family), (key, family)
            out.add(parent_of(key))
        else:
            out.add(key)
    return out


def serial_ghosts(p: Params, blocks: dict[Key, np.ndarray], key: Key
                  ) -> list[list[tuple[int, np.ndarray]]]:
    """The ghost pieces of ``key`` as its neighbours would send them."""
    ghosts: list[list[tuple[int, np.ndarray]]] = [[], [], [], []]
    own = key[0]
    for f in range(4):
        level = level_across(blocks, key, f)
        for dest, _ in neighbours(key, f, level):
            if level == own:
                k, half = 0, -1
            elif level == own - 1:  # key is the k-th of dest's two finer neighbours
                k, half = tangential(key, f), -1
            else:  # dest covers one half of key's face
                k, half = 0, tangential(dest, OPP[f])
            ghosts[f].append((half, piece(blocks[dest], OPP[f], level, own, k)))
    return ghosts


def serial(p: Params) -> Result:
    """The same run without the runtime: a dictionary of blocks, one after the other, the
    decisions by :func:`settle`. Its blocks, masses and levels equal :func:`simulate`'s
    bit for bit."""
    p.check()
    side = 1 << p.min_level
    blocks = {(p.min_level, i, j): initial(p, (p.min_level, i, j))
              for i in range(side) for j in range(side)}

    def adapt(init: bool) -> None:
        nonlocal blocks
        wanted = {key: wanted_level(p, key[0], criterion(padded(v, serial_ghosts(p, blocks,
                                                                                   key))))
                  for key, v in blocks.items()}
        t = settle(blocks, wanted)
        new: dict[Key, np.ndarray] = {}
        for key in remeshed(blocks, t):
            if key in blocks:
                new[key] = blocks[key]
            elif init:
                new[key] = initial(p, key)
            elif parent_of(key) in blocks:
                pk = parent_of(key)
                q = (key[1] & 1, key[2] & 1)
                new[key] = prolong(blocks[pk], q)
            else:
                kids = children_of(key)
                new[key] = assemble({(c[1] & 1, c[2] & 1): restrict(blocks[c]) for c in kids})
        blocks = new

    for _ in range(p.init_rounds):
        adapt(True)
    r = Result([], [], [], [], [], {}, {})
    done = 0
    plan = p.cycles()
    for c, nsteps in enumerate(plan):
        for _ in range(nsteps):
            blocks = {key: advance(padded(v, serial_ghosts(p, blocks, key)), p.vx, p.vy,
                                   p.dt / p.h(key[0]))
                      for key, v in blocks.items()}
        done += nsteps
        r.steps.append(done)
        r.masses.append(math.fsum(block_mass(p, key[0], v) for key, v in
                                  sorted(blocks.items())))
        if c < len(plan) - 1:
            adapt(False)
        r.levels.append(_counts(blocks))
    r.blocks = blocks
    r.nb = {key: [level_across(blocks, key, f) for f in range(4)] for key in blocks}
    return r
