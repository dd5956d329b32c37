"""Which objects carry the load a strategy moves: the communication-aware tie-break of
``greedy_refine`` and ``refine`` (Acun14, Section III-A: strategies "for balancing
computation load or communication").

A strategy that balances computation decides how much load leaves each overloaded PE for
each receiver. Which objects carry it matters little to the balance (many choices fit the
same bound) and a great deal to the communication: ``greedy_refine`` sends the lightest
objects of the donor, ``refine`` the ones that fit best, wherever they sit in the
communication graph. On a stencil the moved blocks are scattered over the donor's part of
the grid, their neighbours stay behind, and each ghost message between them crosses PEs (a
pickled send instead of a local queue entry).

An edge weighs what its traffic of the last period would cost the PEs if it crossed
between them, messages and bytes (:func:`~.common.edge_seconds`, the measure
``greedy_refine`` chooses its placement by): by bytes alone, LeanMD's pass traded 4,658
messages per 10 steps between PEs for 7,392 smaller ones, in one run out of twelve
(`shoal run --lb-dump` databases), and that run took 172 ms per step against 165-171.

:func:`gather_moves` revisits each (donor ``d``, receiver ``r``) pair of moves of a
placement, largest load first. It puts back the objects ``d`` sent ``r``, then moves ``d``'s
objects to ``r`` by *region growing*, the greedy graph growing of graph partitioners: the
object of highest gain first, ``gain = weight to objects on r - weight to objects on d``
(heavier first among equal gains, then the lower number), the gains of its neighbours
updated after each move, until ``d`` is within its limit; an object that would take ``r``
over its limit is skipped. So the moved objects grow from the border with ``r`` as one
region. The new choice replaces the old one only when it cuts less weight (the cut: the
weight of the edges between PEs) without more migrations, or as much with fewer
migrations; otherwise the pair stays as it was.

Guarantees: no PE ends above ``max(limit, its load before the pass)``; only objects that
the placement moved away from their PE, or other objects of the same donor, move; the
number of migrations and the cut never increase. Non-migratable objects count as
partners and never move. Cost: per pair, the donor's objects and their edges, with a heap
(``O((n_d + m_d) log n_d)``).
"""

from __future__ import annotations

import numpy as np

from shoal.jit import njit
from shoal.runtime.lb.common import adjacency, edge_seconds
from shoal.runtime.lb.costs import DEFAULT, Link
from shoal.runtime.lb.database import LBDatabase


def gather_moves(db: LBDatabase, placement: np.ndarray, limit: np.ndarray,
                 link: Link = DEFAULT.intra) -> np.ndarray:
    """``placement`` with each (donor, receiver) pair's moves carried by a region of the
    donor's objects next to the receiver where that cuts less weight (module doc), each
    edge weighed at ``link``'s costs; ``limit[p]``: the load PE ``p`` may reach
    (unscaled)."""
    assert db.migratable is not None
    moved = np.flatnonzero((placement != db.pe) & db.migratable)
    if moved.size == 0 or db.src.size == 0:
        return placement
    adj = adjacency(db, np.arange(db.n), edge_seconds(db, link))
    if adj.nnz == 0 or not adj.data.any():
        return placement
    # pairs (donor, receiver), largest load first
    key = db.pe[moved] * db.npes + placement[moved]
    pairs, inverse = np.unique(key, return_inverse=True)
    flow = np.bincount(inverse, weights=db.load[moved])
    pairs = pairs[np.argsort(-flow, kind="stable")]
    movable = np.flatnonzero(db.migratable)
    members = movable[np.argsort(db.pe[movable], kind="stable")]
    first = np.searchsorted(db.pe[members], np.arange(db.npes + 1)).astype(np.int64)
    out = np.asarray(placement, np.int64).copy()
    loads = db.pe_loads(out)
    tol = 1e-9 * float(adj.data.sum())
    # loads change by sums and differences: the limits get room for their rounding
    room = 1e-12 * (float(db.load.sum()) + 1.0)
    _gather(db.load, db.pe, out, loads, np.maximum(np.asarray(limit, float), loads) + room,
            adj.indptr.astype(np.int64), adj.indices.astype(np.int64), adj.data,
            first, members, pairs // db.npes, pairs % db.npes, tol)
    return out


# --------------------------------------------------------------------------------------------
# Compiled kernel: a binary max-heap on arrays; entries (gain, load, object, version), the
# greater gain first, then the greater load, then the lower object number.


@njit(cache=True, nogil=True)
def _above(hg: np.ndarray, hw: np.ndarray, hi: np.ndarray, a: int, b: int) -> bool:
    """Does heap entry ``a`` come out before entry ``b``?"""
    if hg[a] != hg[b]:
        return hg[a] > hg[b]
    if hw[a] != hw[b]:
        return hw[a] > hw[b]
    return hi[a] < hi[b]


@njit(cache=True, nogil=True)
def _swap(hg: np.ndarray, hw: np.ndarray, hi: np.ndarray, hv: np.ndarray, a: int,
          b: int) -> None:
    hg[a], hg[b] = hg[b], hg[a]
    hw[a], hw[b] = hw[b], hw[a]
    hi[a], hi[b] = hi[b], hi[a]
    hv[a], hv[b] = hv[b], hv[a]


@njit(cache=True, nogil=True)
def _push(hg: np.ndarray, hw: np.ndarray, hi: np.ndarray, hv: np.ndarray, size: int,
          g: float, w: float, x: int, v: int) -> int:
    """Add an entry; returns the new size."""
    hg[size], hw[size], hi[size], hv[size] = g, w, x, v
    k = size
    while k > 0:
        parent = (k - 1) // 2
        if not _above(hg, hw, hi, k, parent):
            break
        _swap(hg, hw, hi, hv, k, parent)
        k = parent
    return size + 1


@njit(cache=True, nogil=True)
def _pop(hg: np.ndarray, hw: np.ndarray, hi: np.ndarray, hv: np.ndarray, size: int) -> int:
    """Remove the top entry (it is copied to position ``size - 1``); returns the new size."""
    size -= 1
    _swap(hg, hw, hi, hv, 0, size)
    k = 0
    while True:
        best = k
        for c in (2 * k + 1, 2 * k + 2):
            if c < size and _above(hg, hw, hi, c, best):
                best = c
        if best == k:
            return size
        _swap(hg, hw, hi, hv, k, best)
        k = best


@njit(cache=True, nogil=True)
def _conn(x: int, q: int, place: np.ndarray, ptr: np.ndarray, nbr: np.ndarray,
          wt: np.ndarray) -> float:
    """Weight between object ``x`` and the objects on PE ``q``."""
    s = 0.0
    for k in range(ptr[x], ptr[x + 1]):
        if place[nbr[k]] == q:
            s += wt[k]
    return s


@njit(cache=True, nogil=True)
def _gain(x: int, d: int, r: int, place: np.ndarray, ptr: np.ndarray, nbr: np.ndarray,
          wt: np.ndarray) -> float:
    """Weight of ``x`` to objects on ``r`` less that to objects on ``d``: how much the cut
    falls when ``x`` moves from ``d`` to ``r``."""
    return _conn(x, r, place, ptr, nbr, wt) - _conn(x, d, place, ptr, nbr, wt)


@njit(cache=True, nogil=True)
def _move(x: int, to: int, w: np.ndarray, place: np.ndarray, loads: np.ndarray,
          undo: np.ndarray, nu: int) -> int:
    """Move ``x`` to PE ``to``, noting where it was in ``undo``; returns the undo count."""
    undo[nu, 0], undo[nu, 1] = x, place[x]
    loads[place[x]] -= w[x]
    loads[to] += w[x]
    place[x] = to
    return nu + 1


@njit(cache=True, nogil=True)
def _grow(d: int, r: int, w: np.ndarray, place: np.ndarray, loads: np.ndarray,
          limit: np.ndarray, ptr: np.ndarray, nbr: np.ndarray, wt: np.ndarray,
          cands: np.ndarray, heap: tuple, version: np.ndarray, undo: np.ndarray,
          nu: int) -> tuple[float, int, int]:
    """Move objects of ``cands`` (on ``d``) to ``r``, highest gain first, until ``d`` is
    within its limit; returns (change of the cut, moves, undo count)."""
    hg, hw, hi, hv = heap
    size = 0
    for x in cands:
        if place[x] == d and w[x] > 0.0:
            version[x] += 1  # (> 0: a candidate of this pair)
            size = _push(hg, hw, hi, hv, size, _gain(x, d, r, place, ptr, nbr, wt), w[x], x,
                         version[x])
    delta, moves = 0.0, 0
    while loads[d] > limit[d] and size > 0:
        size = _pop(hg, hw, hi, hv, size)
        x = hi[size]
        if hv[size] != version[x] or place[x] != d or loads[r] + w[x] > limit[r]:
            continue  # stale, or does not fit r (whose load only grows)
        delta -= hg[size]
        nu = _move(x, r, w, place, loads, undo, nu)
        moves += 1
        for e in range(ptr[x], ptr[x + 1]):
            y = nbr[e]
            if place[y] == d and version[y] > 0 and w[y] > 0.0:
                version[y] += 1
                size = _push(hg, hw, hi, hv, size, _gain(y, d, r, place, ptr, nbr, wt), w[y],
                             y, version[y])
    for x in cands:
        version[x] = 0
    return delta, moves, nu


@njit(cache=True, nogil=True)
def _gather(w: np.ndarray, origin: np.ndarray, place: np.ndarray, loads: np.ndarray,
            limit: np.ndarray, ptr: np.ndarray, nbr: np.ndarray, wt: np.ndarray,
            first: np.ndarray, members: np.ndarray, donors: np.ndarray,
            receivers: np.ndarray, tol: float) -> None:
    """The pass of :func:`gather_moves` on ``place`` and ``loads`` (in place), then
    :func:`_return_home`. ``members[first[p]:first[p + 1]]``: the migratable objects whose
    PE was ``p`` (``origin``)."""
    n = w.shape[0]
    room = n + nbr.shape[0] + 1
    heap = (np.empty(room), np.empty(room), np.empty(room, np.int64),
            np.empty(room, np.int64))
    version = np.zeros(n, np.int64)
    # a candidate moves at most twice per pair (put back to d, then grown to r again):
    # with room for n moves only, the undo log of such a pair wrote past its end, which
    # corrupted the heap (free(): invalid pointer in a later step of the job)
    undo = np.empty((2 * n, 2), np.int64)
    for k in range(donors.shape[0]):
        d, r = donors[k], receivers[k]
        cands = members[first[d]:first[d + 1]]
        nu = old = 0
        delta = 0.0  # change of the cut since the pair's start
        for a in cands:  # 1. put back what d sent r
            if place[a] == r:
                delta -= _gain(a, r, d, place, ptr, nbr, wt)
                nu = _move(a, d, w, place, loads, undo, nu)
                old += 1
        grown, new, nu = _grow(d, r, w, place, loads, limit, ptr, nbr, wt, cands, heap,
                               version, undo, nu)  # 2. a region from the border with r
        delta += grown
        better = (delta < -tol and new <= old) or (delta <= tol and new < old)
        if not (loads[d] <= limit[d] and better):
            for u in range(nu - 1, -1, -1):  # keep the pair as it was
                x = undo[u, 0]
                loads[place[x]] -= w[x]
                loads[undo[u, 1]] += w[x]
                place[x] = undo[u, 1]
    _return_home(w, origin, place, loads, limit, ptr, nbr, wt, members)


@njit(cache=True, nogil=True)
def _return_home(w: np.ndarray, origin: np.ndarray, place: np.ndarray, loads: np.ndarray,
                 limit: np.ndarray, ptr: np.ndarray, nbr: np.ndarray, wt: np.ndarray,
                 members: np.ndarray) -> None:
    """Put back every moved object whose PE has room for it under its limit and whose
    return adds no weight to the cut, in object order, until none can go back."""
    changed = True
    while changed:
        changed = False
        for x in members:
            o, q = origin[x], place[x]
            if q != o and loads[o] + w[x] <= limit[o] and (
                    _conn(x, q, place, ptr, nbr, wt) <= _conn(x, o, place, ptr, nbr, wt)):
                place[x] = o
                loads[q] -= w[x]
                loads[o] += w[x]
                changed = True
