"""MetisLB (Acun14, Section III-A: strategies "for balancing computation load or
communication"): partition the objects' communication graph with METIS so that each PE gets
its share of the load and little traffic crosses between PEs, then relabel the parts so that
most objects stay where they are.

The graph: one vertex per migratable object, weighted by its load; one undirected edge per
pair of migratable objects that talk, weighted by the bytes both ways (edges to
non-migratable objects are left out: those cannot follow). METIS needs integers: loads and
bytes are scaled so that each total is at most 2^30 (a vertex or edge keeps weight >= 1
unless its load is 0). Parts: one per PE with a positive target (:func:`.common.targets`:
capacity share less non-migratable load), target part weights in that proportion, METIS's
default 3% imbalance tolerance (``ufactor`` 30), seed 0 (one database, one result).

Without any edge between migratable objects there is nothing to partition for:
:func:`metis` then returns :func:`.greedy.greedy_refine`'s placement (documented fallback,
so ``metis`` in a chain or in ``--strategy all`` works on any database).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from shoal.runtime.lb.common import adjacency, keep_in_place, targets
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.greedy import greedy_refine

if TYPE_CHECKING:
    import scipy.sparse as sp

_SCALE = float(2**30)  # the largest total of vertex (or edge) weights passed to METIS


class Problem(NamedTuple):
    """What the graph strategies partition: the migratable ``objects``, their ``adj``
    matrix of bytes, every PE's ``target`` load and the PEs that can take load
    (``receivers``: target > 0)."""

    objects: np.ndarray
    adj: sp.csr_matrix
    target: np.ndarray
    receivers: np.ndarray


def problem(db: LBDatabase) -> Problem | np.ndarray:
    """The partitioning problem of ``db``, or the placement to return as it is when there
    is none: the current one (nothing movable, or one PE), or :func:`greedy_refine`'s when
    no two migratable objects communicate."""
    assert db.migratable is not None
    objects = np.flatnonzero(db.migratable)
    if objects.size == 0 or db.npes == 1:
        return db.pe.copy()
    adj = adjacency(db, objects)
    if adj.nnz == 0:
        return greedy_refine(db)
    target = targets(db)
    return Problem(objects, adj, target, np.flatnonzero(target > 0))


def _integers(x: np.ndarray, floor: int) -> np.ndarray:
    """``x`` scaled to integers summing to at most 2^30, each >= ``floor`` where ``x`` > 0."""
    total = float(x.sum())
    if total <= 0:
        return np.ones(x.size, np.int64)
    out = np.floor(x * (_SCALE / total)).astype(np.int64)
    return np.where(x > 0, np.maximum(out, floor), 0)


def partition(db: LBDatabase, objects: np.ndarray, adj: sp.csr_matrix,
              share: np.ndarray) -> np.ndarray:
    """METIS's part of each of ``objects`` (vertices of ``adj``) among ``share.size`` parts
    of relative sizes ``share`` (> 0)."""
    import pymetis

    k = share.size
    if k == 1 or objects.size == 0:
        return np.zeros(objects.size, np.int64)
    if objects.size <= k:  # METIS wants more vertices than parts: heaviest to largest
        out = np.empty(objects.size, np.int64)
        out[np.argsort(-db.load[objects], kind="stable")] = np.argsort(
            -share, kind="stable")[:objects.size]
        return out
    edges = adj.copy()
    edges.data = _integers(edges.data, 1).astype(float)  # bytes 0 still links the pair
    edges.data[edges.data == 0] = 1
    tpwgts = (share / share.sum()).tolist()
    tpwgts[-1] = max(0.0, 1.0 - math.fsum(tpwgts[:-1]))  # pymetis wants a sum of 1 +- 1e-12
    result = pymetis.part_graph(
        k, pymetis.CSRAdjacency(edges.indptr.astype(np.int64), edges.indices.astype(np.int64)),
        vweights=_integers(db.load[objects], 1), eweights=edges.data.astype(np.int64),
        tpwgts=tpwgts, options=pymetis.Options(seed=0))
    return np.asarray(result.vertex_part, np.int64)


def metis(db: LBDatabase) -> np.ndarray:
    """MetisLB: METIS's k-way partition of the communication graph (module docstring), one
    part per PE in proportion to its capacity, then parts relabelled to keep most objects
    in place (:func:`.common.keep_in_place`). Falls back to :func:`greedy_refine` when no
    two migratable objects communicate.

    Guarantees: non-migratable objects stay; a PE whose target is 0 (capacity 0, or full of
    non-migratable load) gets no migratable object. Balance is METIS's (about 3% over the
    target on large graphs; coarse on small ones, where one object is a large share of a
    PE): chain ``metis,refine`` to even it out at little cost in cut."""
    prob = problem(db)
    if not isinstance(prob, Problem):
        return prob
    objects, adj, target, receivers = prob
    placement = db.pe.copy()
    part = receivers[partition(db, objects, adj, target[receivers])]
    placement[objects] = keep_in_place(db, part, objects, target)
    return placement
