"""GreedyLB, RefineLB and GreedyRefineLB (Acun14, Section III-A): the centralised strategies
that balance computation only, with their compiled kernels.

- :func:`greedy`: LPT, heaviest object first to the PE where it would finish first.
- :func:`refine`: moves objects only off overloaded PEs, few migrations.
- :func:`greedy_refine`: greedy's quality bound, keeping objects where they are when possible.

Loads are *scaled* by the PE capacities (:mod:`shoal.runtime.lb.common`).
"""

from __future__ import annotations

import numpy as np

from shoal.errors import UsageError
from shoal.jit import njit
from shoal.runtime.lb.common import (
    capacity,
    fixed_load,
    heaviest_first,
    keep_in_place,
    max_scaled,
    targets,
    traffic_seconds,
)
from shoal.runtime.lb.costs import DEFAULT, Costs, link_for
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.locality import gather_moves

# greedy_refine keeps objects in place under these fractions of its bound, in turn, until the
# result respects the bound
_KEEP_FACTORS = (1.0, 0.999, 0.99, 0.95)


# --------------------------------------------------------------------------------------------
# Compiled kernels. Trees are implicit binary trees over ``size`` leaves (a power of two),
# node ``k`` has children ``2k`` and ``2k + 1``, leaf ``j`` is node ``size + j``.


@njit(cache=True, nogil=True)
def _tree_size(leaves: int) -> tuple[int, int]:
    """The leaves of a tree over ``leaves`` PEs (the next power of two) and its depth."""
    size = 1
    depth = 0
    while size < leaves:
        size *= 2
        depth += 1
    return size, depth


@njit(cache=True, nogil=True)
def _min_tree(keys: np.ndarray, size: int, pad: float) -> np.ndarray:
    """A tree whose node holds the minimum of the keys below it (leaves past the keys hold
    ``pad``)."""
    tree = np.full(2 * size, pad)
    tree[size:size + keys.shape[0]] = keys
    for node in range(size - 1, 0, -1):
        tree[node] = min(tree[2 * node], tree[2 * node + 1])
    return tree


@njit(cache=True, nogil=True)
def _tree_set(tree: np.ndarray, size: int, leaf: int, value: float) -> None:
    """Set leaf ``leaf`` of a min-tree to ``value`` and refresh its ancestors."""
    node = size + leaf
    tree[node] = value
    node >>= 1
    while node >= 1:
        m = min(tree[2 * node], tree[2 * node + 1])
        if tree[node] == m:
            break
        tree[node] = m
        node >>= 1


@njit(cache=True, nogil=True)
def _tree_argmin(tree: np.ndarray, size: int) -> int:
    """The leaf holding the minimum of a min-tree (the leftmost one on ties)."""
    node = 1
    while node < size:
        node = 2 * node if tree[2 * node] <= tree[2 * node + 1] else 2 * node + 1
    return node - size


@njit(cache=True, nogil=True)
def _first_finish(mina: np.ndarray, minb: np.ndarray, size: int, w: float,
                  stack: np.ndarray) -> int:
    """The leaf ``j`` minimising ``a[j] + w * b[j]`` (``a`` = scaled load, ``b`` = 1 /
    capacity: the scaled load of the PE once it has an object of load ``w``).

    Branch and bound over two min-trees: ``mina[node] + w * minb[node]`` is a lower bound for
    every leaf below ``node`` (rounding is monotone, so it holds in floating point too). With
    leaves sorted by capacity, siblings have close ``b`` and the bound is tight; on identical
    PEs it is exact and the search walks one root-to-leaf path."""
    best = np.inf
    found = -1
    stack[0] = 1
    top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        bound = mina[node] + w * minb[node]
        if bound >= best:
            continue
        if node >= size:
            best = bound
            found = node - size
            continue
        left = 2 * node
        bl = mina[left] + w * minb[left]
        br = mina[left + 1] + w * minb[left + 1]
        if bl <= br:  # explore the more promising child first: push it last
            stack[top] = left + 1
            stack[top + 1] = left
        else:
            stack[top] = left
            stack[top + 1] = left + 1
        top += 2
    return found


@njit(cache=True, nogil=True)
def _assign(w: np.ndarray, home: np.ndarray, assigned: np.ndarray, inv: np.ndarray,
            perm: np.ndarray, keep: float) -> np.ndarray:
    """Assign objects of loads ``w`` (heaviest first) one by one; returns their PEs.

    ``assigned[p]`` starts as the load already on PE ``p`` (non-migratable objects) and is
    updated in place. An object stays on its ``home`` when the home's scaled load with it is
    ``<= keep`` (never if ``keep < 0``); otherwise it goes to the PE where it finishes first,
    ``argmin (assigned + w) / capacity`` (``inv`` = 1 / capacity). Leaves of the search trees
    are the PEs in the order ``perm`` (by capacity)."""
    npes = perm.shape[0]
    size, depth = _tree_size(npes)
    pos = np.empty(npes, np.int64)
    for j in range(npes):
        pos[perm[j]] = j
    b = inv[perm]
    mina = _min_tree(assigned[perm] * b, size, np.inf)
    minb = _min_tree(b, size, b.max())
    stack = np.empty(2 * depth + 4, np.int64)
    out = np.empty(w.shape[0], np.int64)
    for i in range(w.shape[0]):
        t = home[i]
        if not (assigned[t] + w[i]) * inv[t] <= keep:
            t = perm[_first_finish(mina, minb, size, w[i], stack)]
        assigned[t] += w[i]
        _tree_set(mina, size, pos[t], assigned[t] * inv[t])
        out[i] = t
    return out


@njit(cache=True, nogil=True)
def _pick_fit(w: np.ndarray, removed: np.ndarray, lo: int, hi: int, excess: float,
              room: float) -> int:
    """Among the objects ``w[lo:hi]`` (ascending, skipping ``removed``) of a donor that is
    ``excess`` over its threshold, one that fits the receiver's ``room``: the smallest that
    alone brings the donor under its threshold, else the largest that fits; -1 if none."""
    j = lo + np.searchsorted(w[lo:hi], excess)
    while j < hi and removed[j]:
        j += 1
    if j < hi and 0.0 < w[j] <= room:
        return j
    j = lo + np.searchsorted(w[lo:hi], room, side="right") - 1
    while j >= lo and removed[j]:
        j -= 1
    if j >= lo and w[j] > 0.0:
        return j
    return -1


@njit(cache=True, nogil=True)
def _live_near(removed: np.ndarray, lo: int, hi: int, j: int, step: int) -> int:
    """The first index from ``j`` on in direction ``step`` (+1 or -1) within ``[lo, hi)`` that
    is not ``removed``; -1 if none."""
    while lo <= j < hi and removed[j]:
        j += step
    return j if lo <= j < hi else -1


@njit(cache=True, nogil=True)
def _pick_relief(w: np.ndarray, removed: np.ndarray, lo: int, hi: int, d: int, r: int,
                 loads: np.ndarray, cap: np.ndarray, search: tuple) -> tuple[int, int]:
    """When no object of donor ``d`` (``w[lo:hi]``) fits under the threshold of receiver
    ``r``: the move that lowers ``max(scaled donor, scaled receiver)`` most, as ``(object,
    receiver)``; ``(-1, -1)`` if none lowers it below the donor's scaled load now.

    Candidates: the objects either side of the load that would even ``d`` and ``r`` out, and
    the largest object; each to ``r`` or to the PE where it finishes first (a PE of high
    capacity, the only place where a huge object lowers the maximum)."""
    mina, minb, size, stack, perm = search
    ld, cd = loads[d], cap[d]
    ideal = (cap[r] * ld - cd * loads[r]) / (cd + cap[r])
    j = lo + np.searchsorted(w[lo:hi], ideal)
    best, best_to, best_max = -1, -1, ld / cd
    for k in (_live_near(removed, lo, hi, j - 1, -1), _live_near(removed, lo, hi, j, 1),
              _live_near(removed, lo, hi, hi - 1, -1)):
        if k < 0 or w[k] <= 0.0:
            continue
        first = perm[_first_finish(mina, minb, size, w[k], stack)]
        for t in (r, first):
            after = max((ld - w[k]) / cd, (loads[t] + w[k]) / cap[t])
            if t != d and after < best_max:
                best, best_to, best_max = k, t, after
    return best, best_to


@njit(cache=True, nogil=True)
def _refine(w: np.ndarray, owner: np.ndarray, start: np.ndarray, loads: np.ndarray,
            cap: np.ndarray, perm: np.ndarray, limit: float) -> np.ndarray:
    """Move objects off PEs whose scaled load exceeds ``limit``; returns the new PE of each
    entry of ``w`` (the migratable objects grouped by PE, ascending load within a PE: PE
    ``p`` owns ``w[start[p]:start[p + 1]]``). ``loads`` (all objects) is updated in place;
    ``perm`` orders the PEs by capacity for :func:`_first_finish`.

    Loop: take the active donor with the highest scaled load (stop when it is under
    ``limit``) and the PE with the most room under ``limit`` as receiver; move one object
    (:func:`_pick_fit`, else :func:`_pick_relief`); a donor for which no object helps is
    dropped. Donors are the PEs overloaded at the start; an object moves at most once."""
    npes = cap.shape[0]
    size, depth = _tree_size(npes)
    thr = limit * cap
    inv = 1.0 / cap
    pos = np.empty(npes, np.int64)
    pos[perm] = np.arange(npes)
    active = (loads > thr) & (start[1:] > start[:-1])
    donors = _min_tree(np.where(active, -loads * inv, np.inf), size, np.inf)
    recv = _min_tree(loads - thr, size, np.inf)
    mina = _min_tree((loads * inv)[perm], size, np.inf)
    search = (mina, _min_tree(inv[perm], size, inv.max()), size,
              np.empty(2 * depth + 4, np.int64), perm)
    removed = np.zeros(w.shape[0], np.bool_)
    out = owner.copy()
    while True:
        d = _tree_argmin(donors, size)
        if not active[d] or loads[d] <= thr[d]:
            break
        t = _tree_argmin(recv, size)
        lo, hi = start[d], start[d + 1]
        j = _pick_fit(w, removed, lo, hi, loads[d] - thr[d], thr[t] - loads[t])
        if j < 0:
            j, t = _pick_relief(w, removed, lo, hi, d, t, loads, cap, search)
        if j < 0:
            active[d] = False
            _tree_set(donors, size, d, np.inf)
            continue
        removed[j] = True
        out[j] = t
        loads[d] -= w[j]
        loads[t] += w[j]
        for p in (d, t):
            _tree_set(recv, size, p, loads[p] - thr[p])
            _tree_set(donors, size, p, -loads[p] * inv[p] if active[p] else np.inf)
            _tree_set(mina, size, pos[p], loads[p] * inv[p])
    return out


# --------------------------------------------------------------------------------------------
# Strategies


def _lpt(db: LBDatabase, cap: np.ndarray, order: np.ndarray, keep: float) -> np.ndarray:
    """Run :func:`_assign` on the objects ``order`` and return the full placement."""
    placement = db.pe.copy()
    if order.size:
        perm = np.argsort(cap, kind="stable").astype(np.int64)
        placement[order] = _assign(db.load[order], db.pe[order], fixed_load(db), 1.0 / cap,
                                   perm, keep)
    return placement


def greedy(db: LBDatabase) -> np.ndarray:
    """GreedyLB (Acun14, Section III-A): every migratable object, heaviest first, goes to
    the PE where it would finish first, ``argmin (load on p + object) / capacity[p]`` (LPT on
    uniform machines; capacities as in Acun14 Fig. 16-17).

    Guarantees: the current placement is ignored (almost every object moves). The maximum
    scaled load is at most ``max(fixed, avg + w_max)``, ``fixed`` the highest scaled load of
    the non-migratable objects alone on their PE and ``w_max`` the largest migratable object
    (the PE an object picks is no worse than the capacity-weighted mean of all PEs). With
    every object migratable it is within ``4/3 - 1/(3 npes)`` of the optimum on identical
    PEs (Graham 1969) and within ``2 npes / (npes + 1)`` with capacities (Gonzalez, Ibarra
    and Sahni 1977).

    Cost: a sort, then one O(log npes) search per object when PEs are identical (more when
    capacities all differ); 10^6 objects on 16,384 PEs take 0.3-1.5 s on a 2-core machine.
    """
    cap = capacity(db)
    return _lpt(db, cap, heaviest_first(db), -1.0)


def greedy_refine(db: LBDatabase, tolerance: float = 1.01, costs: Costs = DEFAULT,
                  nodes: np.ndarray | None = None) -> np.ndarray:
    """GreedyRefineLB (Charm++'s strategy of that name; Acun14, Section III-A): greedy's
    quality with few migrations.

    First runs :func:`greedy` to learn the maximum scaled load ``M`` it reaches; the bound is
    ``tolerance * M``. Then assigns the migratable objects again, heaviest first: an object
    stays on its PE when that PE's scaled load with it stays under the bound, otherwise it
    goes to the PE where it finishes first (as in greedy). Capacities as in Acun14 Fig.
    16-17.

    Guarantee: the maximum scaled load is ``<= tolerance * M``. The default 1.01 (within 1%
    of greedy) keeps a placement that is already that good as it is: with a bound of ``M``
    itself, re-measured loads of a balanced run (a few percent of noise) made every step
    move objects (LeanMD on 2 PEs: 100-460 of 960 at max/avg 1.02-1.05), and the passes
    below often overshot into greedy's placement, which moves nearly everything. Objects
    that move can push a PE over the bound (small inputs mostly); then the pass is repeated
    keeping objects only under 0.999, 0.99, 0.95 times the bound, and if every pass
    overshoots, greedy's own placement is returned. (Charm++ instead runs many such passes
    at once, one per PE, and picks the best; here they run in turn.) Migrations are not
    bounded: an object moves when its PE is full up to the bound.

    Both placements, the kept one and greedy's own, respect the bound; of the two, the one
    whose communication costs less over a period like the last one, moving there included,
    is returned (:func:`~shoal.runtime.lb.common.traffic_seconds`; the kept one on a tie,
    and always without a communication graph). Which one wins depends on the graph and on
    the locality pass that carries each (:mod:`.locality`): at LeanMD's first step on 2 PEs
    (12 runs' databases) the kept placement moved about 390 objects and left 3,500-4,900
    messages per 10 steps between the PEs, greedy's own moved about 250 and left 7,800-8,000;
    with the pass weighing bytes alone, one run's kept placement had moved 57 and left
    7,400, and the run took 172 ms per step against 165-171. ``costs`` and ``nodes`` (the
    node of every PE): what a message and a byte cost within a node and between nodes
    (:mod:`.costs`)."""
    if tolerance < 1.0:
        raise UsageError(f"greedy_refine tolerance must be >= 1, not {tolerance}")
    cap = capacity(db)
    order = heaviest_first(db)
    first = _lpt(db, cap, order, -1.0)
    bound = tolerance * max_scaled(db, first, cap)
    kept = None
    for factor in _KEEP_FACTORS:
        second = _lpt(db, cap, order, factor * bound)
        if max_scaled(db, second, cap) <= bound:
            kept = gather_moves(db, second, bound * cap, link_for(costs, nodes))
            break
    if kept is not None and db.src.size == 0:
        return kept
    own = gather_moves(db, _relabelled(db, first, cap), bound * cap, link_for(costs, nodes))
    # both are within the bound: the one that costs less to communicate
    if kept is None or (traffic_seconds(db, own, costs, nodes)
                        < traffic_seconds(db, kept, costs, nodes)):
        return own
    return kept


def _relabelled(db: LBDatabase, placement: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Greedy's ``placement`` with the object sets of interchangeable PEs (equal targets,
    :func:`.common.relabelling`) swapped so that the most objects stay in place; as it is
    if that would raise the maximum scaled load."""
    assert db.migratable is not None
    objects = np.flatnonzero(db.migratable)
    if objects.size == 0:
        return placement
    out = placement.copy()
    out[objects] = keep_in_place(db, placement[objects], objects, targets(db))
    return out if max_scaled(db, out, cap) <= max_scaled(db, placement, cap) else placement


def refine(db: LBDatabase, tolerance: float = 1.05, costs: Costs = DEFAULT,
           nodes: np.ndarray | None = None) -> np.ndarray:
    """RefineLB (Acun14, Section III-A): move objects only off overloaded PEs, few moves.

    A PE is overloaded when its scaled load exceeds ``tolerance * avg`` (capacities as in
    Acun14 Fig. 16-17; a PE of speed 0 is overloaded by any load, so refine evacuates it).
    Repeatedly, from the most overloaded PE, one object moves to the PE with the most room
    under that threshold (``tolerance * avg * capacity - load``): the smallest object that
    alone brings the donor under the threshold and fits the receiver, else the largest that
    fits; if none fits, the move (to that PE or to the one where the object finishes first)
    that lowers ``max(donor, receiver)`` most. A donor that no move helps is left as it is.
    Stops when no PE is over the threshold or no move helps.

    Guarantees: only objects of PEs overloaded at the start move, each at most once; a PE
    not overloaded at the start only receives, and stays under the threshold unless it
    receives an object that still lowers the donor's load below its old value; so the
    maximum scaled load never increases. Not guaranteed: reaching the threshold (one object
    may weigh more, and single moves cannot empty a PE to make room, as greedy can), nor the
    fewest migrations (the choice is greedy, one move at a time). ``costs``, ``nodes``: as
    in :func:`greedy_refine`, for the locality pass."""
    if tolerance < 1.0:
        raise UsageError(f"refine tolerance must be >= 1, not {tolerance}")
    assert db.migratable is not None
    cap = capacity(db)
    placement = db.pe.copy()
    movable = np.flatnonzero(db.migratable)
    if movable.size == 0 or db.npes < 2:
        return placement
    order = movable[np.lexsort((db.load[movable], db.pe[movable]))]
    start = np.searchsorted(db.pe[order], np.arange(db.npes + 1)).astype(np.int64)
    avg = db.load.sum() / db.npes
    perm = np.argsort(cap, kind="stable").astype(np.int64)
    placement[order] = _refine(db.load[order], db.pe[order], start,
                               db.pe_loads().astype(float), cap, perm, tolerance * avg)
    return gather_moves(db, placement, tolerance * avg * cap, link_for(costs, nodes))
