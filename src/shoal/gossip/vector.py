"""The information vector of one node (Levy14, Fig. 1).

One entry per node: the latest state record known for it and the local time at which that
record was born, ``born = arrival time - age at arrival`` (Fig. 1 registers the arrival time
and adds the time passed since, so ``age(now) = now - born``). A window is the W youngest
entries, own entry included, found with an O(N) partition. A merge replaces an entry only by a
newer one: the later birth, or, when records carry a ``version`` field (the node daemon's,
:mod:`shoal.gossip.packet`), the higher version first (a version is its owner's counter, exact,
where a birth time is an estimate that transit times blur). All operations are vectorised over
entries. :class:`OpenVector` is the same vector for an open membership: nodes named by 32-bit
ids on the wire, a local slot per id, appended at its first sight.
"""

from __future__ import annotations

from typing import Any

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

    def update_own(self, record: Any, now: float) -> None:
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
        if self.records.dtype.names and "version" in self.records.dtype.names:
            mine, theirs = self.records["version"][nodes], records["version"]
            newer = (theirs > mine) | ((theirs == mine) & newer)
        newer &= nodes != self.me
        take = nodes[newer]
        self.born[take] = born[newer]
        self.records[take] = records[newer]
        return int(newer.sum())

    def grow(self, nodes: int) -> None:
        """Room for ``nodes`` entries; the new ones hold no record."""
        if nodes <= self.nodes:
            return
        self.born = np.concatenate([self.born, np.full(nodes - self.nodes, -np.inf)])
        self.records = np.concatenate([self.records,
                                       np.zeros(nodes - self.nodes, self.records.dtype)])
        self.nodes = nodes

    def ages(self, now: float) -> np.ndarray:
        """Age of every entry in seconds (infinite where no record is known)."""
        return now - self.born

    def mean_age(self, now: float) -> float:
        """Average age of the known entries of other nodes (NaN if none is known)."""
        mask = self.known
        mask[self.me] = False
        return float(np.mean(now - self.born[mask])) if mask.any() else float("nan")


class OpenVector:
    """An :class:`InfoVector` for an open membership (the node daemon): slot 0 is this node;
    every other node gets the next free slot the first time its id is heard, and the vector
    doubles when full. Slots are local: the wire names nodes by id, never by slot."""

    def __init__(self, me_id: int, state: np.dtype, capacity: int = 16):
        self.vector = InfoVector(max(2, capacity), 0, state)
        self.ids = np.zeros(self.vector.nodes, np.uint32)
        self.ids[0] = me_id
        self.slot: dict[int, int] = {int(me_id): 0}

    def __len__(self) -> int:
        return len(self.slot)

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """The slot of each id, new slots for ids never seen."""
        out = np.empty(len(ids), np.intp)
        for k, node in enumerate(ids.tolist()):
            slot = self.slot.get(node)
            if slot is None:
                slot = len(self.slot)
                if slot >= self.vector.nodes:
                    self.vector.grow(2 * self.vector.nodes)
                    self.ids = np.concatenate([self.ids, np.zeros(len(self.ids), np.uint32)])
                self.slot[node] = slot
                self.ids[slot] = node
            out[k] = slot
        return out

    def window(self, size: int) -> np.ndarray:
        """Slots of the ``size`` youngest known entries (:meth:`InfoVector.window`)."""
        return self.vector.window(size)

    def merge(self, ids: np.ndarray, ages: np.ndarray, records: np.ndarray,
              now: float) -> int:
        """:meth:`InfoVector.merge` of entries named by id (distinct ids)."""
        return self.vector.merge(self.slots_of(ids), ages, records, now)


class SparseVector:
    """The entries one node has heard of, when few nodes spread one (GrapevineLB: only the
    underloaded PEs, Menon and Kale SC'13; :mod:`shoal.runtime.lb.distributed`): the same
    window and newer-wins merge as :class:`InfoVector` (Levy14, Fig. 1) over a dict, so a
    node holds what it heard instead of one entry per node (a dense vector per PE would
    take P^2 entries at 16,384 PEs). Times are the senders' common clock (gossip rounds),
    so entries carry their birth time, not an age."""

    def __init__(self, me: int):
        self.me = me
        self.entries: dict[int, tuple[float, tuple]] = {}  # node -> (born, record)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, node: int) -> bool:
        return node in self.entries

    def record(self, node: int) -> tuple:
        return self.entries[node][1]

    def update_own(self, record: tuple, now: float) -> None:
        """Fig. 1: renew the node's own entry; it is the youngest."""
        self.entries[self.me] = (now, record)

    def window(self, size: int) -> list[tuple[int, float, tuple]]:
        """The ``size`` youngest entries, ``(node, born, record)``, youngest first (among
        entries of one age, the earliest heard first)."""
        if size < 1:
            raise UsageError(f"a window holds at least 1 entry (got {size})")
        young = sorted(self.entries.items(), key=lambda kv: -kv[1][0])[:size]
        return [(node, born, record) for node, (born, record) in young]

    def merge(self, entries: list[tuple[int, float, tuple]]) -> int:
        """Fig. 1: keep each entry newer than ours (never one about this node). Returns how
        many were kept."""
        kept = 0
        for node, born, record in entries:
            mine = self.entries.get(node)
            if node != self.me and (mine is None or mine[0] < born):
                self.entries[node] = (born, record)
                kept += 1
        return kept
