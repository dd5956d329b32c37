"""The information vector of one node (Levy14, Fig. 1).

One entry per node: the latest state record known for it and the local time at which that
record was born, ``born = arrival time - age at arrival`` (Fig. 1 registers the arrival time
and adds the time passed since, so ``age(now) = now - born``). A window is the W youngest
entries, own entry included, found with an O(N) partition. A merge replaces an entry only by a
newer one. All operations are vectorised over entries.
"""

from __future__ import annotations

import numpy as np

from shoal.errors import UsageError


class InfoVector:
    """Vector of ``nodes`` entries held by node ``me``; records use ``state`` (a dtype)."""

    def __init__(self, nodes: int, me: int, state: np.dtype):
        if not 0 <= me < nodes:
            raise UsageError(f"node {me} is outside a vector of {nodes} nodes")
        self.nodes = nodes
        self.me = me
        self.born = np.full(nodes, -np.inf)
        self.records = np.zeros(nodes, state)

    @property
    def known(self) -> np.ndarray:
        """Boolean mask of the entries that hold a record."""
        return np.isfinite(self.born)

    def update_own(self, record, now: float) -> None:
        """Fig. 1: renew the node's own entry with its current state; its age becomes 0."""
        self.records[self.me] = record
        self.born[self.me] = now

    def window(self, size: int) -> np.ndarray:
        """Indices of the ``size`` youngest known entries (all known ones if fewer)."""
        if size < 1:
            raise UsageError(f"a window holds at least 1 entry (got {size})")
        known = np.flatnonzero(self.known)
        if len(known) <= size:
            return known
        return known[np.argpartition(-self.born[known], size - 1)[:size]]

    def merge(self, nodes: np.ndarray, ages: np.ndarray, records: np.ndarray,
              now: float) -> int:
        """Fig. 1: register arrival at ``now`` and keep each entry that is newer than ours.
        ``nodes`` must be distinct (the wire decoder checks it). Returns how many were kept."""
        born = now - ages
        newer = born > self.born[nodes]
        newer &= nodes != self.me
        take = nodes[newer]
        self.born[take] = born[newer]
        self.records[take] = records[newer]
        return int(newer.sum())

    def ages(self, now: float) -> np.ndarray:
        """Age of every entry in seconds (infinite where no record is known)."""
        return now - self.born

    def mean_age(self, now: float) -> float:
        """Average age of the known entries of other nodes (NaN if none is known)."""
        mask = self.known
        mask[self.me] = False
        return float(np.mean(now - self.born[mask])) if mask.any() else float("nan")
