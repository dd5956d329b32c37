"""A mapping optimiser for arbitrary communication graphs (beyond Balaji11, which only ranks
the orderings a machine allows).

Recursive bisection: split the set of nodes in two halves along the longest dimension of
their box, split the processes in two groups of the matching sizes so that little traffic
crosses between them (the spectral method: order by the Fiedler vector of the weighted
communication graph), and recurse until a group fits one node. Then swap refinement: pairs
of processes on different nodes that talk to each other are exchanged while that lowers the
ranking metric. The result is compared with every ordering and the best is returned, so the
optimiser never does worse than the best ordering.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import laplacian
from scipy.sparse.linalg import eigsh

from shoal.errors import UsageError
from shoal.mapping.mappings import check_fits
from shoal.mapping.metrics import Evaluator
from shoal.mapping.patterns import Pattern
from shoal.topology.torus import Torus


def _fiedler(w: sp.csr_matrix) -> np.ndarray:
    """The Fiedler vector of a weighted graph (a random order when it has no edges)."""
    n = w.shape[0]
    if n <= 2 or w.nnz == 0:
        return np.arange(n, dtype=float)
    lap = laplacian(w, normed=False).astype(float)
    if n <= 400:
        vals, vecs = np.linalg.eigh(lap.toarray())
        return vecs[:, 1]
    vals, vecs = eigsh(lap, k=2, sigma=-1e-6, which="LM")
    return vecs[:, np.argsort(vals)[1]]


def bisection(torus: Torus, pattern: Pattern,
              slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(node, core) per rank from recursive spectral bisection. ``slots[node]``: how many
    ranks go on each node (default ``torus.cores`` everywhere; nodes with 0 stay empty; the
    slots must add up to the ranks)."""
    if slots is None:
        check_fits(torus, pattern.nprocs)
        slots = np.full(torus.nodes, torus.cores, np.int64)
    elif int(np.sum(slots)) != pattern.nprocs:
        raise UsageError(f"{int(np.sum(slots))} slots on the nodes for {pattern.nprocs} "
                         f"ranks")
    n = pattern.nprocs
    w = sp.coo_matrix((pattern.nbytes, (pattern.src, pattern.dst)), shape=(n, n)).tocsr()
    w = (w + w.T).tocsr()
    node = np.empty(n, np.int64)
    core = np.empty(n, np.int64)
    coords = torus.coords(np.arange(torus.nodes))

    def split(procs: np.ndarray, box: np.ndarray) -> None:
        """``box``: boolean mask of the nodes that ``procs`` must fill."""
        members = np.flatnonzero(box)
        if len(members) == 1:
            node[procs] = members[0]
            core[procs] = np.arange(len(procs))
            return
        spans = [np.unique(coords[members, d]) for d in range(torus.ndims)]
        d = max(range(torus.ndims), key=lambda k: len(spans[k]))
        half = spans[d][: len(spans[d]) // 2]
        first = box & np.isin(coords[:, d], half)
        second = box & ~first
        k = int(slots[first].sum())
        sub = w[procs][:, procs]
        order = np.argsort(_fiedler(sub), kind="stable")
        split(procs[order[:k]], first)
        split(procs[order[k:]], second)

    split(np.arange(n), np.asarray(slots) > 0)
    return node, core


def swap_refine(torus: Torus, pattern: Pattern, node: np.ndarray, core: np.ndarray,
                metric: str = "max", rounds: int = 200, routing: str = "adaptive",
                seed: int = 0, judge: Evaluator | None = None):
    """Swap pairs of communicating processes on different nodes while the metric (then the
    mean link load) improves; at most ``rounds`` trials. ``judge``: the pattern's
    evaluator, when the caller has one."""
    rng = np.random.default_rng(seed)
    node = node.copy()
    core = core.copy()
    judge = judge or Evaluator(torus, pattern.src, pattern.dst, pattern.nbytes, routing)

    def score(nd):
        r = judge(nd)
        return (r[metric], r["mean"])

    best = score(node)
    far = np.flatnonzero(node[pattern.src] != node[pattern.dst])
    for _ in range(rounds):
        if len(far) == 0:
            break
        e = far[rng.integers(len(far))]
        a = pattern.src[e]  # move a next to its partner by trading places with one there
        partner_node = node[pattern.dst[e]]
        cands = np.flatnonzero(node == partner_node)
        b = cands[rng.integers(len(cands))]
        if node[a] == node[b]:
            continue
        node[a], node[b] = node[b], node[a]
        core[a], core[b] = core[b], core[a]
        s = score(node)
        if s < best:
            best = s
            far = np.flatnonzero(node[pattern.src] != node[pattern.dst])
        else:
            node[a], node[b] = node[b], node[a]
            core[a], core[b] = core[b], core[a]
    return node, core
