"""What every load-balancing strategy shares: PE capacities, the load that may not move, the
share of the movable load each PE should end with, and relabelling a partition so that most
objects stay where they are.

Every strategy weighs PEs by their capacity (``db.capacity()``: speed times the share of the
core not taken by background work, normalised to sum to ``npes``), so a core shared with
another VM (Acun14 Fig. 16) or running at 0.7x frequency (Fig. 17) gets proportionally less
work: at balance the load on PE ``p`` is ``capacity[p] * total / npes``. Figures are in
*scaled load*, ``load on p / capacity[p]`` (the time PE ``p`` needs for its objects). Objects
with ``migratable == False`` never move; their load counts on their PE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shoal.runtime.lb.costs import DEFAULT, Costs, Link
from shoal.runtime.lb.database import LBDatabase

if TYPE_CHECKING:
    import scipy.sparse as sp

Strategy = Callable[[LBDatabase], np.ndarray]

# A PE of capacity 0 (speed 0) gets this much instead, so that scaled loads stay finite: it is
# chosen only when nothing else is possible (objects of load 0, or non-migratable objects).
MIN_CAPACITY = 1e-9

# What sending costs the PEs, to weigh placements of equal balance: seconds of CPU per
# message between PEs (the runtime's pickling, MPI and dispatch: 10-15 µs of Python per
# message, README "LeanMD"; a local message costs about 1.5 µs, counted in the loads) and
# per byte (a pickle copy, MPI's copy and the receive: about 1 GB/s end to end for arrays)
def edge_seconds(db: LBDatabase, link: Link = DEFAULT.intra) -> np.ndarray:
    """What each edge's traffic of the last period costs the PEs when it crosses between
    them: its messages and bytes at the ``link``'s costs (:mod:`.costs`)."""
    return np.asarray(link.seconds(db.messages, db.bytes), float)


def traffic_seconds(db: LBDatabase, placement: np.ndarray, costs: Costs = DEFAULT,
                    nodes: np.ndarray | None = None) -> float:
    """What ``placement`` costs in communication over a period like the last one, plus
    moving there once: the edges it cuts, and one message of each moved object's packed
    size; each at the cost of its link (:mod:`.costs`): within a node, or between two
    nodes when ``nodes`` (the node of every PE) says the two PEs are on different ones."""
    a, b = placement[db.src], placement[db.dst]
    cut = a != b
    moved = placement != db.pe
    size = np.zeros(db.n) if db.size is None else np.asarray(db.size, float)
    if nodes is None:
        same_edge, same_move = np.ones(int(cut.sum()), bool), np.ones(int(moved.sum()), bool)
    else:
        same_edge = nodes[a[cut]] == nodes[b[cut]]
        same_move = nodes[db.pe[moved]] == nodes[placement[moved]]
    per_msg, per_byte = costs.between(same_edge)
    edges = float(np.dot(per_msg, db.messages[cut]) + np.dot(per_byte, db.bytes[cut]))
    per_msg, per_byte = costs.between(same_move)
    return edges + float(per_msg.sum() + np.dot(per_byte, size[moved]))


def capacity(db: LBDatabase) -> np.ndarray:
    """``db.capacity()`` with a floor of :data:`MIN_CAPACITY`."""
    return np.maximum(db.capacity(), MIN_CAPACITY)


def fixed_load(db: LBDatabase) -> np.ndarray:
    """Load of the non-migratable objects on each PE."""
    assert db.migratable is not None
    fixed = ~db.migratable
    # astype: bincount of nothing gives integers, even with float weights
    return np.bincount(db.pe[fixed], weights=db.load[fixed], minlength=db.npes).astype(float)


def heaviest_first(db: LBDatabase) -> np.ndarray:
    """Indices of the migratable objects, heaviest first (ties by index)."""
    assert db.migratable is not None
    movable = np.flatnonzero(db.migratable)
    return movable[np.argsort(-db.load[movable], kind="stable")]


def max_scaled(db: LBDatabase, placement: np.ndarray, cap: np.ndarray) -> float:
    """The highest scaled load under ``placement``."""
    return float((db.pe_loads(placement) / cap).max()) if db.npes else 0.0


def adjacency(db: LBDatabase, objects: np.ndarray,
              weights: np.ndarray | None = None) -> sp.csr_matrix:
    """The symmetric matrix of ``weights`` (one per edge; default its bytes) between
    ``objects`` (local numbering), both directions summed, no self loops."""
    import scipy.sparse as sp  # (here: scipy costs 0.1 s at every PE's start)

    local = np.full(db.n, -1, np.int64)
    local[objects] = np.arange(objects.size)
    a, b = local[db.src], local[db.dst]
    keep = (a >= 0) & (b >= 0) & (a != b)
    m = objects.size
    values = db.bytes if weights is None else weights
    w = sp.coo_matrix((values[keep].astype(float), (a[keep], b[keep])), shape=(m, m))
    return (w + w.T).tocsr()


def targets(db: LBDatabase) -> np.ndarray:
    """The movable load each PE should receive: its capacity's share of the total, less the
    load it cannot shed (``max(0, capacity * total / npes - fixed)``), scaled so that the
    targets sum to the movable load (all zeros when nothing can move). A PE of capacity 0
    gets 0."""
    assert db.migratable is not None
    movable = float(db.load[db.migratable].sum())
    cap = db.capacity()
    room = np.where(cap > 0, np.maximum(cap * db.load.sum() / db.npes - fixed_load(db), 0.0),
                    0.0)
    total = room.sum()
    if total > 0:
        return room / total * movable
    # every PE with capacity is full of fixed load: spread evenly over them
    return np.where(cap > 0, movable / max(int((cap > 0).sum()), 1), 0.0)


def keep_in_place(db: LBDatabase, part: np.ndarray, objects: np.ndarray,
                  target: np.ndarray) -> np.ndarray:
    """Relabel a partition so that most objects stay: ``part[k]`` (a PE number) is where
    the partition puts ``objects[k]``, built so that PE ``p`` holds about ``target[p]``.
    Returns the new PE of each of ``objects`` (:func:`relabelling`)."""
    return relabelling(db, part, objects, target)[part]


def relabelling(db: LBDatabase, part: np.ndarray, objects: np.ndarray,
                target: np.ndarray) -> np.ndarray:
    """The permutation of the PEs (``new = relabel[old]``) that keeps most of ``objects``
    in place when the partition puts them on ``part``. PEs of equal target are
    interchangeable; among each such class, parts are matched to PEs by a maximum-weight
    matching of the number of objects of the part already on the PE (:func:`_match`:
    LAPJVsp, ``scipy.sparse.csgraph.min_weight_full_bipartite_matching``, on the pairs
    that share objects; sparse because a dense 16,384 x 16,384 problem does not fit in
    memory)."""
    keys = np.round(target / max(float(target.max(initial=0.0)), 1e-300), 9)
    relabel = np.arange(db.npes)
    for value in np.unique(keys):
        members = np.flatnonzero(keys == value)
        if members.size > 1:
            relabel[members] = members[_match(part, db.pe[objects], members, db.npes)]
    return relabel


def _match(part: np.ndarray, home: np.ndarray, members: np.ndarray, npes: int) -> np.ndarray:
    """For each PE of ``members`` taken as a part, the position in ``members`` of the PE it
    goes to, maximising the objects kept in place.

    A maximum-weight matching on the sparse graph of (part, PE) pairs that share objects,
    as a minimum-cost perfect matching of the doubled graph: parts and copies of the PEs
    on one side, PEs and copies of the parts on the other; a part may pair with its own
    copy (unmatched), a PE with its own copy, and each copy of a PE with each copy of a
    part wherever the PE and the part share objects (the mirror of a matched pair). Every
    perfect matching has ``2m`` edges, so the constant ``C`` added to every cost changes
    nothing. Unmatched parts then take the unmatched PEs in order."""
    import scipy.sparse as sp  # (here: scipy costs 0.1 s at every PE's start)
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    m = members.size
    local = np.full(npes, -1, np.int64)
    local[members] = np.arange(m)
    a, b = local[part], local[home]
    inside = (a >= 0) & (b >= 0)
    overlap = sp.coo_matrix((np.ones(int(inside.sum())), (a[inside], b[inside])),
                            shape=(m, m)).tocsr()
    overlap.sum_duplicates()
    pairs = overlap.tocoo()
    c = float(pairs.data.max(initial=0.0)) + 1.0
    eye = np.arange(m)
    rows = np.concatenate([pairs.row, eye, m + eye, m + pairs.col])
    cols = np.concatenate([pairs.col, m + eye, eye, m + pairs.row])
    cost = np.concatenate([c - pairs.data, np.full(2 * m, c), np.full(pairs.nnz, c)])
    graph = sp.csr_matrix((cost, (rows, cols)), shape=(2 * m, 2 * m))
    row, col = min_weight_full_bipartite_matching(graph)
    out = np.full(m, -1, np.int64)
    matched = (row < m) & (col < m)
    out[row[matched]] = col[matched]
    free = np.setdiff1d(eye, out[out >= 0])
    out[out < 0] = free
    return out
