"""Synthetic load-balancing databases: many objects with loads and a communication graph
drawn at random, to try strategies offline at sizes no test machine runs (``shoal lb
synth``; 10^6 objects in a few seconds, every step vectorised).

Loads (relative, about 1 per object):

- ``lognormal``: ``exp(N(0, sigma^2))``, sigma 1 by default (a long tail of heavy objects);
- ``bimodal``: load 1, and a random ``heavy`` fraction of the objects (10%) ``factor`` times
  heavier (10x);
- ``hotspot``: load 1, and one contiguous block of the index space (``heavy`` of it, at a
  random place) ``factor`` times heavier: the hot region of a simulation.

Graphs (every edge carries one message of ``edge_bytes``; one edge per ordered pair):

- ``none``: no communication;
- ``stencil2d``/``stencil3d``: the objects in row-major order on a near-square (near-cube)
  grid (:func:`grid_shape`; the last row or plane may be partial), each sending to its 4 (6)
  face neighbours, no wrap-around; the objects' grid positions are their ``coords`` (for
  ``orb``);
- ``random``: each object sends to ``degree`` (4) distinct other objects drawn uniformly.

Placements: ``block`` (object ``i`` on PE ``i * pes // objects``, contiguous blocks whose
sizes differ by at most one: the runtime's default map) or ``random`` (uniform).

Every object is migratable and ``size`` bytes; the PEs are identical (speed 1) and their
wall time is the busiest PE's load, the rest idle. One seed gives one database: the loads,
then the placement, then the graph are drawn from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.lb.database import LBDatabase

LOADS = ("lognormal", "bimodal", "hotspot")
GRAPHS = ("none", "stencil2d", "stencil3d", "random")
PLACEMENTS = ("block", "random")


def grid_shape(n: int, ndims: int) -> tuple[int, ...]:
    """The near-square (``ndims`` 2) or near-cube (3) grid that holds ``n`` objects in
    row-major order: the last dimensions have side ``ceil(n ** (1 / ndims))``, the first as
    many as needed (``(2, 3, 3)`` for 10 objects)."""
    if n < 1 or ndims not in (1, 2, 3):
        raise ValueError(f"no grid of {ndims} dimensions for {n} objects")
    side = max(1, round(n ** (1 / ndims)))
    while side**ndims < n:
        side += 1
    while side > 1 and (side - 1) ** ndims >= n:
        side -= 1
    inner = side ** (ndims - 1)
    return (math.ceil(n / inner), *([side] * (ndims - 1)))


def stencil_edges(n: int, ndims: int) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of the face-neighbour stencil on :func:`grid_shape` ``(n, ndims)``:
    both directions of every pair of objects one step apart along one axis."""
    shape = grid_shape(n, ndims)
    idx = np.arange(n, dtype=np.int64)
    srcs, dsts = [], []
    stride = 1
    for axis in reversed(range(ndims)):
        coord = (idx // stride) % shape[axis]
        lo = idx[(coord < shape[axis] - 1) & (idx + stride < n)]
        hi = lo + stride
        srcs += [lo, hi]
        dsts += [hi, lo]
        stride *= shape[axis]
    return np.concatenate(srcs), np.concatenate(dsts)


def random_edges(n: int, degree: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """``(src, dst)``: each object sends to ``min(degree, n - 1)`` distinct other objects,
    drawn uniformly (duplicates are drawn again until there are none)."""
    k = min(degree, n - 1)
    if k <= 0:
        empty = np.zeros(0, np.int64)
        return empty, empty
    rows = np.arange(n, dtype=np.int64)[:, None]
    dst = rng.integers(0, n - 1, (n, k))
    dst += dst >= rows  # skip the object itself
    while True:
        dst.sort(axis=1)
        dup = np.zeros(dst.shape, bool)
        dup[:, 1:] = dst[:, 1:] == dst[:, :-1]
        if not dup.any():
            break
        owner = np.nonzero(dup)[0]
        again = rng.integers(0, n - 1, owner.size)
        dst[dup] = again + (again >= owner)
    return np.repeat(rows[:, 0], k), dst.ravel()


def synth_loads(kind: str, n: int, rng: np.random.Generator, sigma: float = 1.0,
                heavy: float = 0.1, factor: float = 10.0) -> np.ndarray:
    """``n`` object loads of distribution ``kind`` (see the module docstring)."""
    if kind == "lognormal":
        return rng.lognormal(0.0, sigma, n)
    load = np.ones(n)
    count = round(heavy * n)
    if kind == "bimodal":
        load[rng.choice(n, count, replace=False)] = factor
    elif kind == "hotspot":
        start = int(rng.integers(0, n - count + 1))
        load[start:start + count] = factor
    else:
        raise UsageError(f"unknown load distribution {kind!r}: choose from {', '.join(LOADS)}")
    return load


def _placement(kind: str, n: int, pes: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "block":
        return np.arange(n, dtype=np.int64) * pes // n
    if kind == "random":
        return rng.integers(0, pes, n)
    raise UsageError(f"unknown placement {kind!r}: choose from {', '.join(PLACEMENTS)}")


def _edges(kind: str, n: int, degree: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    if kind == "none":
        empty = np.zeros(0, np.int64)
        return empty, empty
    if kind in ("stencil2d", "stencil3d"):
        return stencil_edges(n, 2 if kind == "stencil2d" else 3)
    if kind == "random":
        return random_edges(n, degree, rng)
    raise UsageError(f"unknown communication graph {kind!r}: choose from {', '.join(GRAPHS)}")


def _check(objects: int, pes: int, sigma: float, heavy: float, factor: float,
           degree: int) -> None:
    """Refuse parameters that make no database."""
    if objects < 1 or pes < 1:
        raise UsageError(f"a database needs at least 1 object and 1 PE (got {objects} "
                         f"objects, {pes} PEs)")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"sigma must be finite and >= 0 (got {sigma})")
    if not 0.0 <= heavy <= 1.0:
        raise UsageError(f"the heavy fraction must lie between 0% and 100% (got {heavy})")
    if not (math.isfinite(factor) and factor >= 0):
        raise UsageError(f"the heavy factor must be finite and >= 0 (got {factor})")
    if degree < 0:
        raise UsageError(f"the random graph's degree must be >= 0 (got {degree})")


def synthesize(objects: int, pes: int, load: str = "lognormal", graph: str = "none",
               placement: str = "block", seed: int = 0, *, sigma: float = 1.0,
               heavy: float = 0.1, factor: float = 10.0, degree: int = 4,
               size: int = 16384, edge_bytes: int = 8192) -> LBDatabase:
    """A database of ``objects`` objects on ``pes`` PEs (module docstring: ``load``,
    ``graph``, ``placement``; ``sigma`` of lognormal, ``heavy`` fraction and ``factor`` of
    bimodal and hotspot, ``degree`` of random). Raises :class:`UsageError` on a parameter
    that makes no database."""
    _check(objects, pes, sigma, heavy, factor, degree)
    if size < 0 or edge_bytes < 0:
        raise UsageError("object and edge sizes must be >= 0 bytes")
    rng = np.random.default_rng(seed)
    loads = synth_loads(load, objects, rng, sigma, heavy, factor)
    pe = _placement(placement, objects, pes, rng)
    src, dst = _edges(graph, objects, degree, rng)
    per_pe = np.bincount(pe, weights=loads, minlength=pes)
    wall = np.full(pes, per_pe.max())
    coords = None
    if graph in ("stencil2d", "stencil3d"):
        shape = grid_shape(objects, 2 if graph == "stencil2d" else 3)
        coords = np.stack(np.unravel_index(np.arange(objects), shape), axis=1).astype(float)
    return LBDatabase(loads, pe, pes, size=np.full(objects, size, np.int64), wall=wall,
                      idle=wall - per_pe, src=src, dst=dst,
                      messages=np.ones(src.size, np.int64),
                      bytes=np.full(src.size, edge_bytes, np.int64), coords=coords)
