"""Barnes-Hut: a gravitational tree code as a shoal program (Acun14, Section IV-C; the
ChaNGa design), the over-decomposition and ORB mini-app of shoal.

**Decomposition.** Particles get Morton keys (20 bits per axis) in the cube around them all
(a min/max reduction each step). The global tree is the octree of those keys: a node with
more than ``bucket`` particles has its non-empty octants as children, the others are leaves
(buckets). Tree pieces (:class:`Piece`, a dense 1-D chare array, several per PE) own whole
subtrees of it: each step, rounds of count reductions refine a frontier of nodes from the
root until every node holds at most ``N / (pieces * domain_factor)`` particles (the *domain
leaves*); runs of them in key order go to the pieces, by particle count, and particles travel
to the piece that owns their key. A piece builds the octree under each of its domain leaves
and its multipole moments (mass, centre of mass, traceless quadrupole, bounding box) with
numba kernels. The nodes above the domain leaves (the *top tree*) are the same everywhere:
the pieces' domain-leaf moments are gathered and every PE combines them upwards.

**Cache.** Each PE has a :class:`Cache` (a group member). Its table holds the top tree, the
subtrees of the pieces on its PE (they publish them when built: nodes of a local piece are
read in place, with no message, as ChaNGa's cache manager does for registered pieces) and
the remote nodes fetched this step. A node another PE owns that a walk must open is fetched
once per PE and step: the first piece to miss it makes the cache send a request (batched per
owner, at high priority as in the paper) and the pieces that miss it later wait on the same
request. The owner answers with the node's subtree down to ``fetch_depth`` levels (the
particles of the leaves included); nodes at the edge of the answer stay remote until needed.

**Walk.** Per bucket, from the root, depth first in octant order: a node is accepted when
the distance from its centre of mass to the bucket's bounding box exceeds ``r_max / theta``
(``r_max``: from the centre of mass to the farthest corner of the node's bounding box; so
every particle of the bucket sees the node under an angle below ``theta``); a leaf that is
not accepted interacts particle by particle (Plummer softening ``eps``); otherwise the walk
descends. A piece first walks every bucket without computing (cheap) to find the remote nodes
it needs, requests them, computes the forces of the buckets that need nothing more while the
answers travel, and walks the others again when the cache has the answers. ``theta = 0``
opens everything: direct summation.

**Integration**: leapfrog (kick-drift-kick), units G = 1, total mass 1.

**Same bits everywhere.** The global tree and its moments are functions of the particles
alone (a node's moments are combined from its children in octant order, a leaf's from its
particles in key order, ties by id), whichever piece or PE computes them, and a particle's
force is summed in the walk's fixed order. So forces, trajectories and energies (summed
exactly, ``math.fsum``) are the same on any number of PEs, with any number of pieces and
wherever the balancer puts them, and the forces at step 0 equal :func:`tree_forces`, the
same tree code run serially.

**Load balancing.** With ``lb_every`` the pieces are an ``at_sync`` array and reach a sync
point after every ``lb_every``-th step; their ``lb_position()`` is the centre of their
particles' bounding box, which the ``orb`` strategy bisects. Pieces hold equal particle
counts, but a particle in a dense cluster costs more (a deeper walk, more neighbours), so a
clustered start (:func:`initial_state`: several Plummer spheres) leaves the PEs holding the
clusters with more work.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import shoal
from shoal.errors import UsageError
from shoal.jit import njit

# ----------------------------------------------------------------- node records
# a node is a row of a float table nf (NF columns) and an int table ni (NI columns)
MASS, COM, QUAD, LO, HI, RMAX = 0, 1, 4, 10, 13, 16  # QUAD: xx, yy, zz, xy, xz, yz
NF = 17
KEY, LEVEL, KIND, CHILD, NCHILD, PFIRST, PCOUNT, OWNER = range(8)
NI = 8
INTERNAL, LEAF, REMOTE = 0, 1, 2  # REMOTE: its children (or particles) are not here yet
BITS = 20  # bits of a particle key per axis; the deepest node level
GROUP = 8  # buckets' worth of particles in a group that looks for remote nodes at once
STACK = 512  # a walk's stack: at most 7 pending siblings per level, BITS levels
CHUNK = 4096  # particles drawn per random stream of the initial conditions
RTRUNC = 10.0  # Plummer spheres are cut at this many scale radii
# relative force error |a - a_direct| / |a_direct| against direct summation the tree code
# stays within, (median, 99th percentile) per theta, with bucket 16 and eps 0.005 on 2000
# particles (tests/apps/test_barneshut.py). Measured over seeds 1-8, 1 and 4 spheres: at
# 0.5 medians 5.7e-4 to 8.8e-4, 99th percentiles 4.7e-3 to 9.3e-3; at 0.7 1.6e-3 to 2.5e-3
# and 1.6e-2 to 4.2e-2. theta = 0 is direct summation up to the order of the sum (at most
# 4.4e-14 measured; bound 1e-12).
FORCE_ERROR = {0.5: (1.5e-3, 1.5e-2), 0.7: (4e-3, 6e-2)}


@dataclass(frozen=True)
class Params:
    """A Barnes-Hut run: ``n`` particles in ``clusters`` Plummer spheres (scale radius
    about ``size``), ``steps`` of ``dt``; opening angle ``theta``, softening ``eps``, leaves
    of at most ``bucket`` particles; ``pieces`` tree pieces (0: 8 per PE), domain leaves of at
    most ``n / (pieces * domain_factor)`` particles; remote answers ``fetch_depth`` levels
    deep; ``lb_every`` steps between sync points (0: none); energies every ``report_every``
    steps; ``seed``."""

    n: int = 20000
    steps: int = 20
    dt: float = 0.001
    theta: float = 0.7
    eps: float = 0.005
    bucket: int = 16
    pieces: int = 0
    domain_factor: int = 16
    fetch_depth: int = 3
    clusters: int = 4
    size: float = 0.1
    lb_every: int = 0
    report_every: int = 5
    seed: int = 1
    decomposition: str = "oct"

    def check(self) -> None:
        """Raise :class:`UsageError` for a run that cannot work, saying what to change."""
        for name in ("n", "steps", "bucket", "domain_factor", "fetch_depth", "clusters",
                     "report_every"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.pieces < 0 or self.lb_every < 0:
            raise UsageError("pieces (0: 8 per PE) and lb_every (0: no balancing) must be "
                             ">= 0")
        if not 0 <= self.theta < 1:
            raise UsageError(f"theta must be in [0, 1) (got {self.theta}): at 1 or more a "
                             "node could be accepted by a bucket inside it")
        if self.decomposition not in ("oct", "sfc"):
            raise UsageError(f"decomposition must be oct or sfc, not {self.decomposition!r}")
        if not (self.dt > 0 and self.eps >= 0 and self.size > 0):
            raise UsageError("dt and size must be > 0, eps >= 0")

    def npieces(self, npes: int) -> int:
        return self.pieces or 8 * npes


# ----------------------------------------------------------------- initial conditions
def clusters(p: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The Plummer spheres: centres, bulk velocities, masses (summing to 1) and scale
    radii, drawn from ``seed``. The first sphere sits at the origin; the others within a
    sphere of radius 1; masses vary 5:1 and radii with the cube root of the mass; centre of
    mass and total momentum are zero."""
    rng = np.random.default_rng((p.seed, 0))
    k = p.clusters
    w = rng.uniform(0.2, 1.0, k)
    w /= w.sum()
    radius = p.size * (w * k) ** (1 / 3)
    centre = np.zeros((k, 3))
    for c in range(1, k):
        while True:
            q = rng.uniform(-1.0, 1.0, 3)
            if q @ q <= 1.0:
                centre[c] = q
                break
    bulk = rng.normal(0.0, 0.1, (k, 3))
    centre -= w @ centre
    bulk -= w @ bulk
    return centre, bulk, w, radius


def cluster_of(p: Params) -> np.ndarray:
    """First particle id of each sphere (and n at the end): counts by mass, rounded."""
    _, _, w, _ = clusters(p)
    return np.rint(np.concatenate([[0.0], np.cumsum(w)]) * p.n).astype(np.int64)


def _unit_plummer(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` positions and velocities of a Plummer sphere with G = M = a = 1, cut at
    RTRUNC (Aarseth, Henon & Wielen 1974: radius from the mass profile, speed by
    rejection from q^2 (1 - q^2)^3.5)."""
    top = RTRUNC**3 / (1 + RTRUNC**2) ** 1.5
    r = 1.0 / np.sqrt(rng.uniform(1e-12, top, k) ** (-2 / 3) - 1.0)
    q = np.empty(0)
    while q.size < k:
        x4 = rng.uniform(0.0, 1.0, 2 * k)
        x5 = rng.uniform(0.0, 0.1, 2 * k)
        q = np.concatenate([q, x4[x5 < x4**2 * (1 - x4**2) ** 3.5]])
    speed = q[:k] * np.sqrt(2.0) * (1 + r**2) ** -0.25

    def direction() -> np.ndarray:
        z = rng.uniform(-1.0, 1.0, k)
        phi = rng.uniform(0.0, 2 * np.pi, k)
        s = np.sqrt(1 - z**2)
        return np.stack([s * np.cos(phi), s * np.sin(phi), z], axis=1)

    return r[:, None] * direction(), speed[:, None] * direction()


def initial_particles(p: Params, first: int, last: int) -> tuple[np.ndarray, ...]:
    """Particles ``first <= id < last``: ids, positions, velocities, masses (1/n each).
    Drawn in chunks of CHUNK ids, each from its own stream ``(seed, 1, chunk)``, so any
    range is the same particles whoever draws it."""
    centre, bulk, w, radius = clusters(p)
    starts = cluster_of(p)
    out_x, out_v = [], []
    for chunk in range(first // CHUNK, (last + CHUNK - 1) // CHUNK):
        lo, hi = chunk * CHUNK, min((chunk + 1) * CHUNK, p.n)
        rng = np.random.default_rng((p.seed, 1, chunk))
        x, v = _unit_plummer(rng, hi - lo)
        c = np.searchsorted(starts, np.arange(lo, hi), side="right") - 1
        a, mass = radius[c][:, None], w[c][:, None]
        x = centre[c] + a * x
        v = bulk[c] + np.sqrt(mass / a) * v
        keep = slice(max(first - lo, 0), min(last, hi) - lo)
        out_x.append(x[keep])
        out_v.append(v[keep])
    ids = np.arange(first, last, dtype=np.int64)
    x = np.concatenate(out_x) if out_x else np.zeros((0, 3))
    v = np.concatenate(out_v) if out_v else np.zeros((0, 3))
    return ids, x, v, np.full(last - first, 1.0 / p.n)


def initial_state(p: Params) -> tuple[np.ndarray, ...]:
    """All particles: ids 0..n-1, positions, velocities, masses."""
    return initial_particles(p, 0, p.n)


# ----------------------------------------------------------------- keys
def cube(ext: np.ndarray) -> tuple[np.ndarray, float]:
    """The cube the keys are cut in, from ``[-min x, -min y, -min z, max x, max y, max z]``
    of every particle: its lowest corner and its side (a little larger than the extent, so
    that no particle sits on the far faces). The same bits wherever it is computed."""
    lo, hi = -ext[:3], ext[3:]
    side = float((hi - lo).max()) * 1.000001 + 1e-300
    return (lo + hi) * 0.5 - side * 0.5, side


@njit(cache=True, error_model="numpy")
def _spread(v: int) -> int:
    """The 20 low bits of ``v`` spread to every third bit."""
    v &= 0xFFFFF
    v = (v | (v << 32)) & 0x1F00000000FFFF
    v = (v | (v << 16)) & 0x1F0000FF0000FF
    v = (v | (v << 8)) & 0x100F00F00F00F00F
    v = (v | (v << 4)) & 0x10C30C30C30C30C3
    v = (v | (v << 2)) & 0x1249249249249249
    return v


@njit(cache=True, error_model="numpy")
def morton_keys(x: np.ndarray, corner: np.ndarray, side: float) -> np.ndarray:
    """Morton keys of the positions ``x`` in the cube (BITS bits per axis, x highest)."""
    n = x.shape[0]
    keys = np.empty(n, np.int64)
    scale = (1 << BITS) / side
    top = (1 << BITS) - 1
    for i in range(n):
        q = np.empty(3, np.int64)
        for k in range(3):
            c = int((x[i, k] - corner[k]) * scale)
            q[k] = min(max(c, 0), top)
        keys[i] = (_spread(q[0]) << 2) | (_spread(q[1]) << 1) | _spread(q[2])
    return keys


def key_range(node: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The particle keys ``[start, end)`` inside the nodes of keys ``node`` at ``level``."""
    node = np.asarray(node, np.int64)
    level = np.asarray(level, np.int64)
    shift = 3 * (BITS - level)
    prefix = node ^ (np.int64(1) << (3 * level))
    return prefix << shift, (prefix + 1) << shift


def level_of(node: np.ndarray) -> np.ndarray:
    """The level of node keys (the root, key 1, is level 0)."""
    node = np.asarray(node, np.int64)
    out = np.zeros(node.shape, np.int64)
    for lev in range(1, BITS + 1):
        out[node >= np.int64(1) << (3 * lev)] = lev
    return out


# ----------------------------------------------------------------- moments
@njit(cache=True, error_model="numpy", inline="always")
def _rmax(nf: np.ndarray, i: int) -> None:
    """Distance from the centre of mass to the farthest corner of the bounding box."""
    s = 0.0
    for k in range(3):
        a = nf[i, COM + k] - nf[i, LO + k]
        b = nf[i, HI + k] - nf[i, COM + k]
        s += max(a * a, b * b)
    nf[i, RMAX] = math.sqrt(s)


@njit(cache=True, error_model="numpy")
def _leaf_moments(nf: np.ndarray, ni: np.ndarray, pt: np.ndarray, i: int) -> None:
    """A leaf's moments from its particles, in their order."""
    f, c = ni[i, PFIRST], ni[i, PCOUNT]
    m = sx = sy = sz = 0.0
    for k in range(3):
        nf[i, LO + k] = np.inf
        nf[i, HI + k] = -np.inf
    for j in range(f, f + c):
        mj = pt[j, 3]
        m += mj
        sx += mj * pt[j, 0]
        sy += mj * pt[j, 1]
        sz += mj * pt[j, 2]
        for k in range(3):
            nf[i, LO + k] = min(nf[i, LO + k], pt[j, k])
            nf[i, HI + k] = max(nf[i, HI + k], pt[j, k])
    cx, cy, cz = (sx / m, sy / m, sz / m) if m > 0 else (0.0, 0.0, 0.0)
    q = np.zeros(6)
    for j in range(f, f + c):
        mj = pt[j, 3]
        dx, dy, dz = pt[j, 0] - cx, pt[j, 1] - cy, pt[j, 2] - cz
        d2 = dx * dx + dy * dy + dz * dz
        q[0] += mj * (3 * dx * dx - d2)
        q[1] += mj * (3 * dy * dy - d2)
        q[2] += mj * (3 * dz * dz - d2)
        q[3] += mj * 3 * dx * dy
        q[4] += mj * 3 * dx * dz
        q[5] += mj * 3 * dy * dz
    nf[i, MASS] = m
    nf[i, COM], nf[i, COM + 1], nf[i, COM + 2] = cx, cy, cz
    nf[i, QUAD:QUAD + 6] = q
    _rmax(nf, i)


@njit(cache=True, error_model="numpy")
def _combine(nf: np.ndarray, ni: np.ndarray, i: int) -> None:
    """An internal node's moments from its children's, in octant order (parallel axes)."""
    first, nc = ni[i, CHILD], ni[i, NCHILD]
    m = sx = sy = sz = 0.0
    for k in range(3):
        nf[i, LO + k] = np.inf
        nf[i, HI + k] = -np.inf
    for c in range(first, first + nc):
        mc = nf[c, MASS]
        m += mc
        sx += mc * nf[c, COM]
        sy += mc * nf[c, COM + 1]
        sz += mc * nf[c, COM + 2]
        for k in range(3):
            nf[i, LO + k] = min(nf[i, LO + k], nf[c, LO + k])
            nf[i, HI + k] = max(nf[i, HI + k], nf[c, HI + k])
    cx, cy, cz = (sx / m, sy / m, sz / m) if m > 0 else (0.0, 0.0, 0.0)
    q = np.zeros(6)
    for c in range(first, first + nc):
        mc = nf[c, MASS]
        dx, dy, dz = nf[c, COM] - cx, nf[c, COM + 1] - cy, nf[c, COM + 2] - cz
        d2 = dx * dx + dy * dy + dz * dz
        q[0] += nf[c, QUAD] + mc * (3 * dx * dx - d2)
        q[1] += nf[c, QUAD + 1] + mc * (3 * dy * dy - d2)
        q[2] += nf[c, QUAD + 2] + mc * (3 * dz * dz - d2)
        q[3] += nf[c, QUAD + 3] + mc * 3 * dx * dy
        q[4] += nf[c, QUAD + 4] + mc * 3 * dx * dz
        q[5] += nf[c, QUAD + 5] + mc * 3 * dy * dz
    nf[i, MASS] = m
    nf[i, COM], nf[i, COM + 1], nf[i, COM + 2] = cx, cy, cz
    nf[i, QUAD:QUAD + 6] = q
    _rmax(nf, i)


@njit(cache=True, error_model="numpy")
def combine_up(nf: np.ndarray, ni: np.ndarray) -> None:
    """Moments of every internal node from its children (children after their parent)."""
    for i in range(nf.shape[0] - 1, -1, -1):
        if ni[i, KIND] == INTERNAL:
            _combine(nf, ni, i)


@njit(cache=True, error_model="numpy")
def _build(keys: np.ndarray, pt: np.ndarray, roots: np.ndarray, bucket: int,
           cap: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The octree under each root (rows ``key, level, first particle, end``) of the
    particles sorted by key, and its moments; the roots first, children of a node next to
    each other and after it. Returns the tables and the node count, or -1 when ``cap`` rows
    are too few."""
    nf = np.zeros((cap, NF))
    ni = np.zeros((cap, NI), np.int64)
    n = roots.shape[0]
    if n > cap:
        return nf, ni, -1
    for r in range(n):
        ni[r, KEY], ni[r, LEVEL] = roots[r, 0], roots[r, 1]
        ni[r, PFIRST], ni[r, PCOUNT] = roots[r, 2], roots[r, 3] - roots[r, 2]
        ni[r, OWNER] = -1
    i = 0
    while i < n:
        count, lev = ni[i, PCOUNT], ni[i, LEVEL]
        ni[i, CHILD] = -1
        if count <= bucket or lev >= BITS:
            ni[i, KIND] = LEAF
        else:
            shift = 3 * (BITS - lev - 1)
            first = n
            j, end = ni[i, PFIRST], ni[i, PFIRST] + count
            while j < end:
                d = (keys[j] >> shift) & 7
                k = j + 1
                while k < end and ((keys[k] >> shift) & 7) == d:
                    k += 1
                if n >= cap:
                    return nf, ni, -1
                ni[n, KEY], ni[n, LEVEL] = (ni[i, KEY] << 3) | d, lev + 1
                ni[n, PFIRST], ni[n, PCOUNT], ni[n, OWNER] = j, k - j, -1
                n += 1
                j = k
            ni[i, KIND], ni[i, CHILD], ni[i, NCHILD] = INTERNAL, first, n - first
        i += 1
    for i in range(n - 1, -1, -1):
        if ni[i, KIND] == LEAF:
            _leaf_moments(nf, ni, pt, i)
        else:
            _combine(nf, ni, i)
    return nf, ni, n


def build_tree(keys: np.ndarray, pt: np.ndarray, roots: np.ndarray,
               bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """The octree (tables nf, ni) under ``roots`` of the particles ``pt`` (x, y, z, mass)
    sorted by their ``keys``."""
    cap = max(64, 4 * len(keys) // max(bucket, 1) + 2 * len(roots))
    while True:
        nf, ni, n = _build(keys, pt, np.asarray(roots, np.int64).reshape(-1, 4), bucket, cap)
        if n >= 0:
            return nf[:n].copy(), ni[:n].copy()
        cap *= 2


# ----------------------------------------------------------------- the walk
@njit(cache=True, error_model="numpy")
def walk_groups(ni: np.ndarray, roots: int, most: int) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """The groups of buckets a piece looks for remote nodes with: the highest nodes under
    its ``roots`` of at most ``most`` particles (or leaves). Returns the group nodes, and
    the leaves of group g as ``leaves[start[g]:start[g + 1]]``."""
    n = ni.shape[0]
    groups = np.empty(n, np.int64)
    start = np.zeros(n + 1, np.int64)
    leaves = np.empty(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    inner = np.empty(n + 1, np.int64)
    ng = nl = 0
    for r in range(roots - 1, -1, -1):
        stack[0] = r
        top = 1
        while top > 0:
            top -= 1
            i = stack[top]
            if ni[i, KIND] == LEAF or ni[i, PCOUNT] <= most:
                groups[ng] = i
                inner[0] = i
                t = 1
                while t > 0:  # its leaves, depth first
                    t -= 1
                    j = inner[t]
                    if ni[j, KIND] == LEAF:
                        leaves[nl] = j
                        nl += 1
                    else:
                        for k in range(ni[j, NCHILD] - 1, -1, -1):
                            inner[t] = ni[j, CHILD] + k
                            t += 1
                ng += 1
                start[ng] = nl
            else:
                for k in range(ni[i, NCHILD] - 1, -1, -1):
                    stack[top] = ni[i, CHILD] + k
                    top += 1
    return groups[:ng].copy(), start[:ng + 1].copy(), leaves[:nl].copy()


@njit(cache=True, error_model="numpy", inline="always")
def _accepted(nf: np.ndarray, i: int, blo: np.ndarray, bhi: np.ndarray,
              theta: float) -> bool:
    """Whether node ``i`` is far enough from the bucket's box to stand for its particles."""
    if theta <= 0.0:
        return False
    d2 = 0.0
    for k in range(3):
        c = nf[i, COM + k]
        if c < blo[k]:
            d2 += (blo[k] - c) * (blo[k] - c)
        elif c > bhi[k]:
            d2 += (c - bhi[k]) * (c - bhi[k])
    return d2 * theta * theta > nf[i, RMAX] * nf[i, RMAX]


@njit(cache=True, error_model="numpy")
def walk_misses(nf: np.ndarray, ni: np.ndarray, buckets: np.ndarray,
                theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Walk the buckets without computing: the REMOTE nodes they must open (each once, in
    the order met) and which buckets met one."""
    seen = np.zeros(nf.shape[0], np.bool_)
    missed = np.empty(nf.shape[0], np.int64)
    nm = 0
    stuck = np.zeros(buckets.shape[0], np.bool_)
    stack = np.empty(STACK, np.int64)
    for bi in range(buckets.shape[0]):
        b = buckets[bi]
        blo, bhi = nf[b, LO:LO + 3], nf[b, HI:HI + 3]
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            i = stack[top]
            if _accepted(nf, i, blo, bhi, theta) or ni[i, KIND] == LEAF:
                continue
            if ni[i, KIND] == REMOTE:
                stuck[bi] = True
                if not seen[i]:
                    seen[i] = True
                    missed[nm] = i
                    nm += 1
                continue
            ch = ni[i, CHILD]
            for k in range(ni[i, NCHILD] - 1, -1, -1):
                stack[top] = ch + k
                top += 1
    return missed[:nm].copy(), stuck


@njit(cache=True, error_model="numpy")
def walk_forces(nf: np.ndarray, ni: np.ndarray, pt: np.ndarray,  # noqa: C901
                buckets: np.ndarray, theta: float, eps: float, acc: np.ndarray,
                pot: np.ndarray, poff: int) -> tuple[int, int]:
    """Accelerations and potentials of the particles of ``buckets`` (written at their table
    index minus ``poff``), summed in walk order; the particle-particle and particle-node
    interactions counted. Returns (-1, -1) if a node to open is REMOTE."""
    eps2 = eps * eps
    stack = np.empty(STACK, np.int64)
    npp = npn = 0
    for bi in range(buckets.shape[0]):
        b = buckets[bi]
        f, c = ni[b, PFIRST], ni[b, PCOUNT]
        blo, bhi = nf[b, LO:LO + 3], nf[b, HI:HI + 3]
        ax, ay, az, ph = np.zeros(c), np.zeros(c), np.zeros(c), np.zeros(c)
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            i = stack[top]
            if _accepted(nf, i, blo, bhi, theta):
                m = nf[i, MASS]
                qxx, qyy, qzz = nf[i, QUAD], nf[i, QUAD + 1], nf[i, QUAD + 2]
                qxy, qxz, qyz = nf[i, QUAD + 3], nf[i, QUAD + 4], nf[i, QUAD + 5]
                for k in range(c):
                    rx = pt[f + k, 0] - nf[i, COM]
                    ry = pt[f + k, 1] - nf[i, COM + 1]
                    rz = pt[f + k, 2] - nf[i, COM + 2]
                    inv2 = 1.0 / (rx * rx + ry * ry + rz * rz + eps2)
                    inv = math.sqrt(inv2)
                    inv3 = inv * inv2
                    inv5 = inv3 * inv2
                    qx = qxx * rx + qxy * ry + qxz * rz
                    qy = qxy * rx + qyy * ry + qyz * rz
                    qz = qxz * rx + qyz * ry + qzz * rz
                    rqr = rx * qx + ry * qy + rz * qz
                    g = -m * inv3 - 2.5 * rqr * inv5 * inv2
                    ax[k] += g * rx + qx * inv5
                    ay[k] += g * ry + qy * inv5
                    az[k] += g * rz + qz * inv5
                    ph[k] += -m * inv - 0.5 * rqr * inv5
                npn += c
            elif ni[i, KIND] == LEAF:
                lf, lc = ni[i, PFIRST], ni[i, PCOUNT]
                for k in range(c):
                    xi, yi, zi = pt[f + k, 0], pt[f + k, 1], pt[f + k, 2]
                    for j in range(lf, lf + lc):
                        if j == f + k:
                            continue
                        dx, dy, dz = xi - pt[j, 0], yi - pt[j, 1], zi - pt[j, 2]
                        r2 = dx * dx + dy * dy + dz * dz + eps2
                        if r2 == 0.0:
                            continue
                        inv = 1.0 / math.sqrt(r2)
                        s = pt[j, 3] * inv
                        s3 = s * inv * inv
                        ax[k] -= s3 * dx
                        ay[k] -= s3 * dy
                        az[k] -= s3 * dz
                        ph[k] -= s
                npp += c * lc - (c if lf == f else 0)  # not with itself
            elif ni[i, KIND] == INTERNAL:
                ch = ni[i, CHILD]
                for k in range(ni[i, NCHILD] - 1, -1, -1):
                    stack[top] = ch + k
                    top += 1
            else:
                return -1, -1
        for k in range(c):
            acc[f + k - poff, 0] = ax[k]
            acc[f + k - poff, 1] = ay[k]
            acc[f + k - poff, 2] = az[k]
            pot[f + k - poff] = ph[k]
    return npp, npn


@njit(cache=True, error_model="numpy")
def _direct(x: np.ndarray, m: np.ndarray, eps: float,
            idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    acc = np.zeros((idx.shape[0], 3))
    pot = np.zeros(idx.shape[0])
    eps2 = eps * eps
    for t in range(idx.shape[0]):
        i = idx[t]
        ax = ay = az = ph = 0.0
        for j in range(n):
            if j == i:
                continue
            dx, dy, dz = x[i, 0] - x[j, 0], x[i, 1] - x[j, 1], x[i, 2] - x[j, 2]
            r2 = dx * dx + dy * dy + dz * dz + eps2
            if r2 == 0.0:
                continue
            inv = 1.0 / math.sqrt(r2)
            s = m[j] * inv
            s3 = s * inv * inv
            ax -= s3 * dx
            ay -= s3 * dy
            az -= s3 * dz
            ph -= s
        acc[t, 0], acc[t, 1], acc[t, 2] = ax, ay, az
        pot[t] = ph
    return acc, pot


def direct_forces(x: np.ndarray, m: np.ndarray, eps: float,
                  idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Accelerations and potentials of particles ``idx`` (default all) by direct summation
    over every other particle, in index order."""
    x = np.ascontiguousarray(x, np.float64)
    idx = np.arange(len(x)) if idx is None else np.asarray(idx, np.int64)
    return _direct(x, np.asarray(m, np.float64), eps, idx)


# ----------------------------------------------------------------- remote answers
@njit(cache=True, error_model="numpy")
def extract(nf: np.ndarray, ni: np.ndarray, pt: np.ndarray, root: int,
            depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node ``root`` and its descendants down to ``depth`` levels below it, breadth first
    (children next to each other, pointers relative to the answer), with the particles of
    its leaves (``PFIRST`` relative to them); internal nodes at the last level are REMOTE."""
    order = np.empty(nf.shape[0], np.int64)
    lev = np.empty(nf.shape[0], np.int64)
    first = np.full(nf.shape[0], -1, np.int64)
    order[0], lev[0] = root, 0
    n = 1
    i = 0
    npart = 0
    while i < n:
        node = order[i]
        if ni[node, KIND] == INTERNAL and lev[i] < depth:
            first[i] = n
            for k in range(ni[node, NCHILD]):
                order[n] = ni[node, CHILD] + k
                lev[n] = lev[i] + 1
                n += 1
        elif ni[node, KIND] == LEAF:
            npart += ni[node, PCOUNT]
        i += 1
    nfs = np.empty((n, NF))
    nis = np.empty((n, NI), np.int64)
    pts = np.empty((npart, 4))
    pn = 0
    for i in range(n):
        node = order[i]
        nfs[i] = nf[node]
        nis[i] = ni[node]
        if ni[node, KIND] == INTERNAL:
            if first[i] < 0:
                nis[i, KIND], nis[i, CHILD] = REMOTE, -1
            else:
                nis[i, CHILD] = first[i]
        elif ni[node, KIND] == LEAF:
            pf, pc = ni[node, PFIRST], ni[node, PCOUNT]
            pts[pn:pn + pc] = pt[pf:pf + pc]
            nis[i, PFIRST] = pn
            pn += pc
    return nfs, nis, pts


def _warm() -> None:
    """Compile (or load from numba's cache) the kernels now, at import, rather than inside
    the first measured entry method."""
    x = np.array([[0.1, 0.2, 0.3], [0.5, 0.4, 0.9], [0.7, 0.1, 0.2]])
    m = np.full(3, 1 / 3)
    tree_forces(x, m, 0.5, 0.01, 1)
    direct_forces(x, m, 0.01)
    t = serial_tree(x, m, 1)
    walk_misses(t.nf, t.ni, np.flatnonzero(t.ni[:, KIND] == LEAF), 0.5)
    walk_groups(t.ni, 1, 8)
    extract(t.nf, t.ni, t.pt, 0, 2)
    combine_up(t.nf.copy(), t.ni)


# ----------------------------------------------------------------- the serial tree code
@dataclass
class Tree:
    """A whole octree built serially: tables ``nf``, ``ni`` (node 0 the root), particles ``pt``
    (x, y, z, mass) in key order, ``order`` (particle k of ``pt`` is input particle
    ``order[k]``)."""

    nf: np.ndarray
    ni: np.ndarray
    pt: np.ndarray
    order: np.ndarray


def serial_tree(x: np.ndarray, m: np.ndarray, bucket: int,
                ids: np.ndarray | None = None) -> Tree:
    """The global tree of particles ``x`` with masses ``m`` (ties of keys broken by
    ``ids``, default the input order): what the pieces build together."""
    x = np.ascontiguousarray(x, np.float64)
    n = len(x)
    ids = np.arange(n) if ids is None else ids
    ext = np.concatenate([-x.min(axis=0), x.max(axis=0)]) if n else np.zeros(6)
    corner, side = cube(ext)
    keys = morton_keys(x, corner, side)
    order = np.lexsort((ids, keys))
    pt = np.concatenate([x[order], np.asarray(m, np.float64)[order, None]], axis=1)
    nf, ni = build_tree(keys[order], pt, np.array([[1, 0, 0, n]]), bucket)
    return Tree(nf, ni, pt, order)


def tree_forces(x: np.ndarray, m: np.ndarray, theta: float, eps: float, bucket: int,
                ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Accelerations and potentials of the particles (input order) by the tree code run
    serially, and the interactions counted."""
    t = serial_tree(x, m, bucket, ids)
    buckets = np.flatnonzero(t.ni[:, KIND] == LEAF)
    acc, pot = np.zeros((len(x), 3)), np.zeros(len(x))
    npp, npn = walk_forces(t.nf, t.ni, t.pt, buckets, theta, eps, acc, pot, 0)
    out_a, out_p = np.empty_like(acc), np.empty_like(pot)
    out_a[t.order], out_p[t.order] = acc, pot
    return out_a, out_p, npp + npn



def serial_run(p: Params) -> tuple[np.ndarray, ...]:
    """The run done serially with :func:`tree_forces` (the same leapfrog, the same
    arithmetic): final positions, velocities, accelerations and potentials, by id."""
    _, x, v, m = initial_state(p)
    acc, pot, _ = tree_forces(x, m, p.theta, p.eps, p.bucket)
    for _ in range(p.steps):
        v = v + 0.5 * p.dt * acc
        x = x + p.dt * v
        acc, pot, _ = tree_forces(x, m, p.theta, p.eps, p.bucket)
        v = v + 0.5 * p.dt * acc
    return x, v, acc, pot


_warm()


# ----------------------------------------------------------------- the top tree
def top_tree(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray,
                                                                  dict[int, int]]:
    """The nodes above the domain leaves, from every piece's domain-leaf rows (``nf``, ``ni``,
    in piece order, which is key order): tables with the root first and children next to
    each other in octant order, domain leaves REMOTE (``OWNER``: their piece), internal
    nodes combined upwards; and the row of every node key."""
    nfd = np.concatenate([f for f, _ in parts]) if parts else np.zeros((0, NF))
    nid = np.concatenate([i for _, i in parts]) if parts else np.zeros((0, NI), np.int64)
    leaf_row = {int(k): j for j, k in enumerate(nid[:, KEY])}
    present = set(leaf_row)
    kids: dict[int, list[int]] = {}
    for k in leaf_row:
        c = k
        while c != 1:
            up = c >> 3
            kids.setdefault(up, []).append(c)
            if up in present:
                break
            present.add(up)
            c = up
    order, first = [1], {}
    for node in order:  # breadth first: grows while it runs
        below = kids.get(node)
        if below:
            first[node] = len(order)
            order.extend(sorted(below))
    n = len(order) if present else 0
    nf = np.zeros((n, NF))
    ni = np.zeros((n, NI), np.int64)
    for t, key in enumerate(order[:n]):
        j = leaf_row.get(key)
        if j is not None:
            nf[t], ni[t] = nfd[j], nid[j]
            ni[t, KIND], ni[t, CHILD], ni[t, NCHILD] = REMOTE, -1, 0
        else:
            ni[t, KEY], ni[t, LEVEL], ni[t, KIND] = key, (key.bit_length() - 1) // 3, INTERNAL
            ni[t, CHILD], ni[t, NCHILD], ni[t, OWNER] = first[key], len(kids[key]), -1
    combine_up(nf, ni)
    return nf, ni, {key: t for t, key in enumerate(order[:n])}


def assemble(parts: list[tuple[np.ndarray, np.ndarray]],
             local: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, int]]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, tuple[int, int]]]:
    """A PE's table: the top tree of every piece's domain-leaf rows ``parts``, then the
    trees of its own pieces (``local``: piece -> its tables and number of roots), their
    domain leaves linked to them. Returns the tables and where each local piece's nodes
    and particles start."""
    nf, ni, where = top_tree(parts)
    blocks_f, blocks_i, blocks_p = [nf], [ni], []
    n, npart = len(nf), 0
    starts = {}
    for piece in sorted(local):
        pf, pi, pp, roots = local[piece]
        pi = pi.copy()
        pi[pi[:, NCHILD] > 0, CHILD] += n
        pi[:, PFIRST] += npart
        starts[piece] = (n, npart)
        for r in range(roots):  # its domain leaves, linked to their subtrees
            t = where[int(pi[r, KEY])]
            assert ni[t, KIND] == REMOTE and ni[t, OWNER] == piece, (piece, r)
            ni[t, KIND], ni[t, CHILD], ni[t, NCHILD] = pi[r, KIND], pi[r, CHILD], pi[r, NCHILD]
            ni[t, PFIRST], ni[t, PCOUNT] = pi[r, PFIRST], pi[r, PCOUNT]
        blocks_f.append(pf)
        blocks_i.append(pi)
        blocks_p.append(pp)
        n += len(pf)
        npart += len(pp)
    pt = np.concatenate(blocks_p) if blocks_p else np.zeros((0, 4))
    return np.concatenate(blocks_f), np.concatenate(blocks_i), pt, starts


class Table:
    """A PE's node and particle tables (:func:`assemble`) that remote answers join."""

    def __init__(self, nf: np.ndarray, ni: np.ndarray, pt: np.ndarray):
        self.nf, self.ni, self.pt = nf, ni, pt
        self.nrows, self.npart = len(nf), len(pt)

    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.nf[:self.nrows], self.ni[:self.nrows], self.pt[:self.npart]

    def _grow(self, rows: int, parts: int) -> None:
        if self.nrows + rows > len(self.nf):
            cap = max(2 * len(self.nf), self.nrows + rows)
            more = cap - self.nrows
            self.nf = np.concatenate([self.nf[:self.nrows], np.zeros((more, NF))])
            self.ni = np.concatenate([self.ni[:self.nrows], np.zeros((more, NI), np.int64)])
        if self.npart + parts > len(self.pt):
            cap = max(2 * len(self.pt), self.npart + parts)
            self.pt = np.concatenate([self.pt[:self.npart], np.zeros((cap - self.npart, 4))])

    def graft(self, row: int, answer: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int:
        """REMOTE ``row``'s subtree from its owner (:func:`extract`): its descendants go
        at the end, the row points at them. Returns the rows added."""
        fs, js, ps = answer
        k = len(fs) - 1
        self._grow(k, len(ps))
        base, pbase = self.nrows - 1, self.npart  # answer row j (>= 1) goes to base + j
        js = js.copy()
        js[js[:, KIND] == INTERNAL, CHILD] += base
        js[js[:, KIND] == LEAF, PFIRST] += pbase
        self.nf[self.nrows:self.nrows + k] = fs[1:]
        self.ni[self.nrows:self.nrows + k] = js[1:]
        self.pt[self.npart:self.npart + len(ps)] = ps
        for col in (KIND, CHILD, NCHILD, PFIRST, PCOUNT):
            self.ni[row, col] = js[0, col]
        self.nrows += k
        self.npart += len(ps)
        return k


# ----------------------------------------------------------------- the chares
# each PE's Cache, by its group's collection id: what a piece on the PE reads in place
# (Charm++'s ckLocalBranch); one runtime runs in a process at a time
_BRANCHES: dict[int, Cache] = {}


def local_cache(proxy: Any) -> Cache:
    """This PE's member of the Cache group ``proxy``."""
    return _BRANCHES[proxy.cid]


class Cache(shoal.Chare):
    """A PE's node table for the current step (module docstring): the top tree, the
    subtrees of this PE's pieces, and the remote nodes fetched so far, one request per node
    and PE. ``publish``, ``build``, ``request``, ``tables`` and ``block`` are called in place
    by the pieces of this PE; ``fill`` is the owners' answer."""

    def __init__(self) -> None:
        _BRANCHES[self.thisProxy.cid] = self
        self.pieces: Any = None
        self.step = -1
        self.built = -1
        self.published: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
        self.table = Table(np.zeros((0, NF)), np.zeros((0, NI), np.int64), np.zeros((0, 4)))
        self.blocks: dict[int, tuple[int, int]] = {}
        self.inflight: dict[int, list[int]] = {}  # table row -> pieces waiting for it
        self.waiting: dict[int, int] = {}  # piece -> rows it waits for
        # over the run: requests sent (batched per owner), nodes asked for, nodes a piece
        # missed that another piece of this PE had asked for already, rows and particles
        # received
        self.counts = {"requests": 0, "asked": 0, "shared": 0, "rows": 0, "particles": 0}

    def set_pieces(self, pieces: Any) -> None:
        self.pieces = pieces

    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def publish(self, step: int, piece: int, nf: np.ndarray, ni: np.ndarray,
                pt: np.ndarray, roots: int) -> None:
        """A piece of this PE built its subtrees of ``step`` (its ``roots`` domain leaves
        are its first rows)."""
        if step != self.step:
            assert not self.inflight, "a new step while requests are in flight"
            self.step, self.published, self.blocks = step, {}, {}
        self.published[piece] = (nf, ni, pt, roots)

    def build(self, step: int, parts: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """The table of ``step`` (once per PE, :func:`assemble`)."""
        if self.built == step:
            return
        assert step == self.step or not self.published, (step, self.step)
        self.built = step
        nf, ni, pt, self.blocks = assemble(parts, self.published)
        self.table = Table(nf, ni, pt)
        self.published = {}

    def block(self, piece: int) -> tuple[int, int]:
        """Where a local piece's nodes and particles start in the table."""
        return self.blocks[piece]

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.table.views()

    def request(self, step: int, piece: int, rows: np.ndarray) -> None:
        """Piece ``piece`` must open these REMOTE rows: ask their owners for those no piece
        of this PE has asked for yet (one message per owner); ``walk_more`` tells the piece
        when all are here."""
        assert step == self.built, (step, self.built)
        new: dict[int, list[int]] = {}
        for t in rows.tolist():
            waiters = self.inflight.get(t)
            if waiters is None:
                self.inflight[t] = [piece]
                new.setdefault(int(self.table.ni[t, OWNER]), []).append(t)
            else:
                waiters.append(piece)
                self.counts["shared"] += 1
        self.waiting[piece] = self.waiting.get(piece, 0) + len(rows)
        me = shoal.my_pe()
        for owner, ts in new.items():
            self.counts["requests"] += 1
            self.counts["asked"] += len(ts)
            self.pieces[owner].fetch(step, self.table.ni[ts, KEY], me, np.array(ts), prio=-1)

    def fill(self, step: int, rows: np.ndarray, answers: list[tuple[np.ndarray, ...]]) -> None:
        """Owners' answers: each row's subtree (:func:`extract`) joins the table; pieces
        that waited for nothing else walk on."""
        assert step == self.built, (step, self.built)
        for t, answer in zip(rows.tolist(), answers, strict=True):
            self.counts["rows"] += self.table.graft(t, answer) + 1
            self.counts["particles"] += len(answer[2])
        for t in rows.tolist():
            for piece in self.inflight.pop(t):
                left = self.waiting[piece] - 1
                if left:
                    self.waiting[piece] = left
                else:
                    del self.waiting[piece]
                    self.pieces[piece].walk_more(step)


def oct_level(npieces: int) -> int:
    """The octree level whose cells the oct decomposition deals out: at least 8 per piece."""
    level = 0
    while 8**level < 8 * npieces:
        level += 1
    return min(level, BITS)


def oct_piece(cells: np.ndarray, npieces: int) -> np.ndarray:
    """The piece of each cell of level :func:`oct_level` (piece k holds the cells from
    ``k C / P`` to ``(k + 1) C / P``, rounded down, of the C cells in Morton order)."""
    total = 8 ** oct_level(npieces)
    return ((np.asarray(cells, np.int64) + 1) * npieces + total - 1) // total - 1


def straddles(nodes: np.ndarray, levels: np.ndarray, npieces: int) -> np.ndarray:
    """Which nodes hold cells of more than one piece under the oct decomposition."""
    level = oct_level(npieces)
    start, _ = key_range(nodes, levels)
    first = start >> (3 * (BITS - level))
    span = np.where(levels < level, 8 ** np.maximum(level - levels, 0), 1)
    return oct_piece(first, npieces) != oct_piece(first + span - 1, npieces)


def owners(start: np.ndarray, counts: np.ndarray, npieces: int, how: str) -> np.ndarray:
    """The piece of each domain leaf (given in key order by its first key and its count).
    ``sfc``: runs of equal particle counts (a leaf goes where the middle of its particles
    falls). ``oct``: equal volumes, the piece of the cell its first key is in (the
    decomposition split every node of more than a bucket that crossed pieces)."""
    if how == "oct":
        return oct_piece(start >> (3 * (BITS - oct_level(npieces))), npieces)
    before = np.cumsum(counts) - counts
    total = max(int(counts.sum()), 1)
    return (2 * before + counts) * npieces // (2 * total)


def to_split(nodes: np.ndarray, levels: np.ndarray, counts: np.ndarray, p: Params,
             npieces: int) -> np.ndarray:
    """Which frontier nodes the decomposition splits: those of more than ``n / (npieces *
    domain_factor)`` particles (never fewer than a bucket: a node the decomposition splits
    is internal in the global tree too) and, under ``oct``, those of more than a bucket
    that hold cells of several pieces; never below the deepest level."""
    big = counts > max(p.bucket, p.n // (npieces * p.domain_factor))
    if p.decomposition == "oct":
        big |= (counts > p.bucket) & straddles(nodes, levels, npieces)
    return big & (levels < BITS)


def domain_leaves(keys: np.ndarray, p: Params, npieces: int) -> tuple[np.ndarray, ...]:
    """The decomposition the pieces compute together, from all the particles' sorted keys
    at once: domain leaves in key order (node keys, levels, counts) and their pieces."""
    nodes, levels = np.array([1], np.int64), np.array([0], np.int64)
    found = []
    while len(nodes):
        start, end = key_range(nodes, levels)
        counts = np.searchsorted(keys, end) - np.searchsorted(keys, start)
        big = to_split(nodes, levels, counts, p, npieces)
        keep = ~big & (counts > 0)
        found.append((nodes[keep], levels[keep], counts[keep]))
        nodes = ((nodes[big, None] << 3) | np.arange(8)).ravel()
        levels = np.repeat(levels[big] + 1, 8)
    nodes, levels, counts = (np.concatenate(c) for c in zip(*found, strict=True))
    order = np.argsort(key_range(nodes, levels)[0])
    nodes, levels, counts = nodes[order], levels[order], counts[order]
    return nodes, levels, counts, owners(key_range(nodes, levels)[0], counts, npieces,
                                         p.decomposition)


def report_steps(p: Params) -> list[int]:
    """The steps whose energies are reported: 0, every ``report_every``, and the last."""
    steps = list(range(0, p.steps + 1, p.report_every))
    return steps if steps[-1] == p.steps else [*steps, p.steps]


class Piece(shoal.Chare):
    """A tree piece: the particles of a run of domain leaves (key order), their subtrees,
    the walk of its buckets and the leapfrog of its particles."""

    def __init__(self, p: Params, npieces: int, cache: Any, checks: list[Any], done: Any):
        k = self.thisIndex[0]
        self.p, self.npieces, self.cache, self.checks, self.done = p, npieces, cache, checks, done
        self.ids, self.x, self.v, self.m = initial_particles(p, k * p.n // npieces,
                                                            (k + 1) * p.n // npieces)
        self.acc = np.zeros_like(self.x)
        self.pot = np.zeros(len(self.ids))
        self.step = 0
        self.report = report_steps(p)
        self.centre = self._centre()
        self.interactions = [0, 0]  # particle-particle, particle-node, since the last report
        self.arrived: dict[int, list[tuple[np.ndarray, ...]]] = {}
        self.expected = -1  # particles this piece owns this step, once decomposed
        self.tree: tuple[Any, ...] | None = None  # nf, ni, pt, rows by key, its step

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("tree") is not None:  # a migration happens between steps: no walk
            state = dict(state, tree=None)  # reads it any more, the next step rebuilds it
        return state

    def _centre(self) -> np.ndarray:
        if len(self.x) == 0:
            return np.zeros(3)
        return 0.5 * (self.x.min(axis=0) + self.x.max(axis=0))

    def lb_position(self) -> tuple[float, ...]:
        """Where this piece is, for the orb strategy: the centre of its particles' box."""
        return tuple(float(c) for c in self.centre)

    # ------------------------------------------------------------- decomposition
    def start(self) -> None:
        self._begin()

    def resume_from_sync(self) -> None:
        self._begin()

    def _begin(self) -> None:
        """The bounding box of every particle: a max reduction of (-min, max)."""
        if len(self.x):
            ext = np.concatenate([-self.x.min(axis=0), self.x.max(axis=0)])
        else:
            ext = np.full(6, -np.inf)
        self.contribute(ext, shoal.Reducer.max, self.thisProxy.box)

    def box(self, ext: np.ndarray) -> None:
        """Keys in the cube, particles sorted by them; the first count round (the root)."""
        corner, side = cube(ext)
        keys = morton_keys(self.x, corner, side)
        order = np.lexsort((self.ids, keys))
        self.keys = keys[order]
        self.ids, self.x, self.v, self.m = (self.ids[order], self.x[order], self.v[order],
                                            self.m[order])
        self.final: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.expected = -1
        self._count(np.array([1], np.int64), np.array([0], np.int64))

    def _count(self, nodes: np.ndarray, levels: np.ndarray) -> None:
        self.cands = (nodes, levels)
        start, end = key_range(nodes, levels)
        counts = (np.searchsorted(self.keys, end) - np.searchsorted(self.keys, start))
        self.contribute(counts.astype(np.int64), shoal.Reducer.sum, self.thisProxy.counted)

    def counted(self, counts: np.ndarray) -> None:
        """The candidates' particle counts over every piece: split those above the
        threshold (every piece decides the same), keep the others."""
        nodes, levels = self.cands
        big = to_split(nodes, levels, counts, self.p, self.npieces)
        keep = ~big & (counts > 0)
        self.final.append((nodes[keep], levels[keep], counts[keep]))
        if big.any():
            kids = ((nodes[big, None] << 3) | np.arange(8)).ravel()
            self._count(kids, np.repeat(levels[big] + 1, 8))
        else:
            self._decomposed()

    def _decomposed(self) -> None:
        """Domain leaves to pieces (:func:`owners`); particles to the owners."""
        nodes, levels, counts = (np.concatenate(c) for c in zip(*self.final, strict=True))
        start, _ = key_range(nodes, levels)
        order = np.argsort(start)
        nodes, levels, counts, start = nodes[order], levels[order], counts[order], start[order]
        owner = owners(start, counts, self.npieces, self.p.decomposition)
        me = self.thisIndex[0]
        mine = owner == me
        self.domain = (nodes[mine], levels[mine])
        self.expected = int(counts[mine].sum())
        dest = owner[np.searchsorted(start, self.keys, side="right") - 1]
        cuts = np.flatnonzero(np.diff(dest)) + 1
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(dest)], strict=True):
            if a == b:
                continue
            part = (self.ids[a:b], self.x[a:b], self.v[a:b], self.m[a:b], self.keys[a:b])
            if dest[a] == me:
                self.arrived.setdefault(self.step, []).append(part)
            else:
                self.thisProxy[int(dest[a])].particles(self.step, *part)
        self._gathered()

    def particles(self, step: int, ids: np.ndarray, x: np.ndarray, v: np.ndarray,
                  m: np.ndarray, keys: np.ndarray) -> None:
        self.arrived.setdefault(step, []).append((ids, x, v, m, keys))
        self._gathered()

    def _gathered(self) -> None:
        """With every particle of this step's domain: sort, build, publish, gather."""
        got = self.arrived.get(self.step, [])
        if self.expected < 0 or sum(len(q[0]) for q in got) < self.expected:
            return
        self.arrived.pop(self.step, None)
        ids, x, v, m, keys = (np.concatenate([q[i] for q in got]) if got else
                              np.zeros((0, 3) if i in (1, 2) else 0,
                                       np.int64 if i in (0, 4) else np.float64)
                              for i in range(5))
        order = np.lexsort((ids, keys))
        self.ids, self.x, self.v, self.m, self.keys = (ids[order], x[order], v[order],
                                                       m[order], keys[order])
        self._build()

    def _build(self) -> None:
        nodes, levels = self.domain
        start, end = key_range(nodes, levels)
        roots = np.stack([nodes, levels, np.searchsorted(self.keys, start),
                          np.searchsorted(self.keys, end)], axis=1)
        pt = np.concatenate([self.x, self.m[:, None]], axis=1)
        nf, ni = build_tree(self.keys, pt, roots, self.p.bucket)
        ni[:, OWNER] = self.thisIndex[0]
        # kept until the next step's: pieces still walking this step fetch from it (this
        # piece's own step counter moves on as soon as its forces are done)
        self.tree = (nf, ni, pt, np.argsort(ni[:, KEY]), self.step, len(roots))
        self.centre = self._centre()
        local_cache(self.cache).publish(self.step, self.thisIndex[0], nf, ni, pt, len(roots))
        self.contribute((nf[:len(roots)], ni[:len(roots)]), shoal.Reducer.gather,
                        self.thisProxy.top)

    # ------------------------------------------------------------- the walk
    def top(self, parts: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Every domain leaf's moments: this PE's table, then the walk."""
        cache = local_cache(self.cache)
        cache.build(self.step, parts)
        assert self.tree is not None
        noff, self.poff = cache.block(self.thisIndex[0])
        groups, self.gstart, leaves = walk_groups(self.tree[1], self.tree[5],
                                                  GROUP * self.p.bucket)
        self.pending = noff + groups
        self.gleaves = noff + leaves
        self.gindex = {int(g): k for k, g in enumerate(self.pending.tolist())}
        self.acc = np.zeros_like(self.x)
        self.pot = np.zeros(len(self.ids))
        self._walk()

    def walk_more(self, step: int) -> None:
        assert step == self.step, (step, self.step)
        self._walk()

    def _walk(self) -> None:
        """Find the remote nodes the pending groups of buckets need (a group opens every
        node one of its buckets opens) and ask for them; compute the buckets of groups that
        need nothing more meanwhile; done when no group is pending."""
        cache, p = local_cache(self.cache), self.p
        nf, ni, pt = cache.tables()
        missed, stuck = walk_misses(nf, ni, self.pending, p.theta)
        done, self.pending = self.pending[~stuck], self.pending[stuck]
        if len(missed):
            cache.request(self.step, self.thisIndex[0], missed)
        if len(done):
            k = [self.gindex[g] for g in done.tolist()]
            ready = np.concatenate([self.gleaves[self.gstart[g]:self.gstart[g + 1]] for g in k])
            npp, npn = walk_forces(nf, ni, pt, ready, p.theta, p.eps, self.acc, self.pot,
                                   self.poff)
            assert npp >= 0, "a walk met a remote node it had not asked for"
            self.interactions[0] += npp
            self.interactions[1] += npn
        if not len(missed):
            self._forces_done()

    def fetch(self, step: int, keys: np.ndarray, pe: int, rows: np.ndarray) -> None:
        """A PE's cache asks for these nodes of this piece: their subtrees."""
        assert self.tree is not None and step == self.tree[4], (step, self.step)
        nf, ni, pt, by_key = self.tree[:4]
        at = by_key[np.searchsorted(ni[by_key, KEY], keys)]
        assert np.array_equal(ni[at, KEY], keys), "asked for a node this piece does not own"
        answers = [extract(nf, ni, pt, int(i), self.p.fetch_depth) for i in at]
        self.cache[pe].fill(step, rows, answers, prio=-1)

    # ------------------------------------------------------------- integration
    def _forces_done(self) -> None:
        p, s = self.p, self.step
        if s > 0:
            self.v = self.v + 0.5 * p.dt * self.acc  # the second half kick
        if s in self.report:
            ekin = 0.5 * self.m * np.einsum("ij,ij->i", self.v, self.v)
            epot = 0.5 * self.m * self.pot
            self.contribute((ekin, epot, tuple(self.interactions)), shoal.Reducer.gather,
                            self.checks[self.report.index(s)])
            self.interactions = [0, 0]
        if s == p.steps:
            self.contribute((self.ids, self.x, self.v, self.acc, self.pot),
                            shoal.Reducer.gather, self.done)
            return
        self.v = self.v + 0.5 * p.dt * self.acc  # the first half kick of the next step
        self.x = self.x + p.dt * self.v
        self.step += 1
        if p.lb_every and s > 0 and s % p.lb_every == 0:
            self.centre = self._centre()
            self.at_sync()
        else:
            self._begin()


# ----------------------------------------------------------------- the run
@dataclass
class Result:
    """What a run measured: kinetic and potential energy at each reported step (exact sums
    over the particles), the interactions (particle-particle, particle-node) since the
    previous report, ``seconds_per_step`` (from the end of step 0 to the end), ``times``
    (seconds from the end of step 0 to each reported step's end), the final
    particles sorted by id (``ids``, ``x``, ``v``, ``acc``, ``pot``), the caches' counts
    summed over PEs, the pieces and the balancer's history."""

    steps: list[int]
    ekin: np.ndarray
    epot: np.ndarray
    interactions: list[tuple[int, int]]
    seconds_per_step: float
    times: list[float]
    ids: np.ndarray
    x: np.ndarray
    v: np.ndarray
    acc: np.ndarray
    pot: np.ndarray
    cache: dict[str, int]
    pieces: int
    lb: list[dict[str, Any]]

    @property
    def energy(self) -> np.ndarray:
        return self.ekin + self.epot

    @property
    def drift(self) -> float:
        """Largest relative change of the total energy from step 0."""
        e = self.energy
        return float(np.abs(e - e[0]).max() / abs(e[0]))

    def interactions_per_step(self) -> float:
        """Interactions per step after step 0 (both kinds)."""
        later = self.interactions[1:]
        return sum(a + b for a, b in later) / max(self.steps[-1], 1)

    def seconds_per_step_after(self, step: int) -> float:
        """Seconds per step from the first reported step at or after ``step`` to the end."""
        k = next(k for k, s in enumerate(self.steps) if s >= step)
        if self.steps[k] == self.steps[-1]:
            return self.seconds_per_step
        return (self.times[-1] - self.times[k]) / (self.steps[-1] - self.steps[k])

    def checksum(self) -> float:
        """A digest of the final state (exact sum): equal runs print equal ones."""
        return math.fsum(np.concatenate([self.x.ravel(), self.v.ravel()]).tolist())


async def simulate(p: Params, progress: Any = None) -> Result:
    """Run Barnes-Hut (call from ``main`` on PE 0): a Cache group, the tree pieces, ``p.steps``
    steps. ``progress(step, ekin, epot, interactions)`` is called at every reported step."""
    p.check()
    npieces = p.npieces(shoal.num_pes())
    report = report_steps(p)
    checks = [shoal.future() for _ in report]
    done = shoal.future()
    cache = shoal.Group(Cache)
    pieces = shoal.Array(Piece, npieces, args=(p, npieces, cache, checks, done),
                         at_sync=p.lb_every > 0)
    await cache.set_pieces(pieces, awaitable=True)
    pieces.start()
    ekin, epot, inter = [], [], []
    t0 = 0.0
    times = []
    for step, fut in zip(report, checks, strict=True):
        parts = await fut
        if step == 0:
            t0 = time.perf_counter()
        times.append(time.perf_counter() - t0)
        ekin.append(math.fsum(np.concatenate([q[0] for q in parts]).tolist()))
        epot.append(math.fsum(np.concatenate([q[1] for q in parts]).tolist()))
        inter.append((sum(q[2][0] for q in parts), sum(q[2][1] for q in parts)))
        if progress is not None:
            progress(step, ekin[-1], epot[-1], inter[-1])
    elapsed = time.perf_counter() - t0
    final = await done
    ids = np.concatenate([q[0] for q in final])
    order = np.argsort(ids)
    pick = [np.concatenate([q[i] for q in final])[order] for i in range(5)]
    counts: dict[str, int] = {}
    for c in await cache.stats(ret=True):
        for k, n in c.items():
            counts[k] = counts.get(k, 0) + n
    return Result(report, np.array(ekin), np.array(epot), inter, elapsed / p.steps, times,
                  *pick, cache=counts, pieces=npieces, lb=shoal.lb_history())
