"""What one PE holds of a chare array or group: its local elements, where it believes the
others are, and its share of reductions and broadcasts (Acun14, II-D).

Location management: an element's home PE (its map) knows where it is (``where``; absent
means "at home"); a PE an element left keeps a forwarding pointer (``forward``); other PEs
cache locations (``cache``) and are corrected when a message had to be forwarded.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

from shoal.runtime.maps import Singles, home
from shoal.runtime.proxy import proxy_classes
from shoal.runtime.slot import MIGRATING, SLOT_VERSION, Slot

__all__ = ["HISTORY", "MIGRATING", "SLOT_VERSION", "Collection", "Slot"]

if TYPE_CHECKING:

    from shoal.runtime.chare import Chare
    from shoal.runtime.maps import ArrayMap

HISTORY = 256  # broadcasts a PE keeps to replay to elements that migrate in behind them
# (more while elements that left it may still need them: see collectives.broadcast)


class Collection:
    """One PE's part of an array (``kind == "array"``) or group (``"group"``).

    A native class, compiled with the PE core (``shoal._compiled.MODULES``), which reads
    ``local`` and ``cache`` for every message; the fields that hold what a program gave
    (its shape, map, PEs) or counts made from it are typed ``Any`` (a native class checks
    each assignment, and a numpy integer is not an ``int``)."""

    def __init__(self, cid: int, kind: str, cls: type[Chare], ndims: int,
                 dims: tuple[int, ...] | None, mapping: ArrayMap, npes: int,
                 at_sync: bool = False, pes: tuple[int, ...] | None = None):
        self.cid = cid
        self.kind = kind
        # a group on some PEs only (shoal.Group(cls, pes=...)): those PEs (a tuple, or None)
        self.pes: Any = pes
        self.at_sync: Any = at_sync  # (bool) its elements call at_sync(), wait for the balancer
        # a type[Chare], declared Any: Location.construct calls ``obj.__init__(*args)`` on the
        # new instance, which mypy rejects on a Chare (a subclass's __init__ may differ)
        self.cls: Any = cls
        self.ndims = ndims
        self.dims: Any = dims  # (tuple[int, ...] | None)
        self.map: Any = mapping  # (ArrayMap)
        # the array of a class's single chares (shoal.create): thisProxy names the element
        self.single = isinstance(mapping, Singles)
        self.npes = npes
        self.proxy = proxy_classes(cls)[1](cid, ndims, dims, pes)
        # an element was inserted outside ``dims``: proxies stop refusing such indices
        self.outside = False
        self.announced = False  # the root: it has told every PE so
        self.local: dict[tuple[int, ...], Slot] = {}
        # entry method name -> the function of ``cls`` it is (Runtime._entry), found once
        self.methods: dict[str, Any] = {}
        self.cache: dict[tuple[int, ...], int] = {}
        self.forward: dict[tuple[int, ...], int] = {}
        self.where: dict[tuple[int, ...], int] = {}  # elements of this home PE that are elsewhere
        # home: messages for elements not yet inserted
        self.absent: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}
        self.deleted: set[tuple[int, ...]] = set()  # home: elements deleted
        # home: the sequence numbers each deleted element had reached, (expected, sent),
        # for an element inserted at its index again
        self.tombs: dict[tuple[int, ...], tuple[dict, dict]] = {}
        self.bcast_count = 0
        self.history: deque[tuple[Any, ...]] = deque()  # BCAST envelopes, numbers in a row
        # reductions: this PE's partial results, and how many local elements are done
        self.partial: dict[int, list[Any]] = {}  # [value, count, reducer, target]
        self.done: dict[int, int] = {}
        # the root (PE 0) only
        self.total: dict[int, list[Any]] = {}
        self.size: Any = len(pes) if pes is not None else 0 if dims is None else _count(dims)
        self.size_events: list[tuple[int, int]] = []  # (first reduction, +1 or -1)
        self.members: Any = self.size  # elements that will run the next broadcast
        self.rets: dict[int, list[Any]] = {}  # broadcast -> [future, {index: value}, elements]
        self.completed: set[int] = set()
        self.next_red = 0

    # what a checkpoint's main shard keeps of a collection: how to rebuild it, and the
    # root's counts of its reductions and broadcasts
    SAVED: ClassVar[tuple[str, ...]] = (
        "cid", "kind", "cls", "ndims", "dims", "map", "at_sync", "bcast_count", "size",
        "size_events", "members", "next_red", "completed", "rets", "outside", "pes")

    def saved(self) -> dict[str, Any]:
        """This collection in a checkpoint's main shard (written by PE 0, the root)."""
        return {name: getattr(self, name) for name in self.SAVED}

    @classmethod
    def rebuilt(cls, m: dict[str, Any], npes: int, old: int, root: bool) -> Collection:
        """The collection :meth:`saved` described on ``old`` PEs, on ``npes`` PEs (a group
        on every PE gets a member on each new PE and none of its root's counts; one on
        some PEs keeps its members); ``root``: this PE is the root and takes those counts."""
        regroup = m["kind"] == "group" and old != npes and m["pes"] is None
        dims = (npes,) if m["kind"] == "group" else m["dims"]  # (member p's home is PE p)
        coll = cls(m["cid"], m["kind"], m["cls"], m["ndims"], dims, m["map"], npes,
                   m["at_sync"], m["pes"])
        coll.bcast_count = m["bcast_count"]
        coll.outside = coll.announced = m["outside"]
        if root:
            coll.next_red, coll.completed = m["next_red"], set(m["completed"])
            if not regroup:
                coll.size, coll.size_events = m["size"], list(m["size_events"])
                coll.members, coll.rets = m["members"], m["rets"]
        return coll

    def home(self, index: tuple[int, ...]) -> int:
        return home(self.map, index, self.dims, self.npes)

    def expected(self, r: int) -> int:
        """How many elements take part in reduction ``r`` (at the root)."""
        return self.size + sum(d for start, d in self.size_events if start <= r)

    def complete(self, r: int) -> None:
        """Reduction ``r`` is done. Size events that every pending reduction counts are
        folded into ``size``, so that ``expected`` stays short however many insertions and
        deletions a long run makes (no event starts before the first pending reduction)."""
        self.completed.add(r)
        while self.next_red in self.completed:
            self.completed.discard(self.next_red)
            self.next_red += 1
        keep = []
        for start, d in self.size_events:
            if start <= self.next_red:
                self.size += d
            else:
                keep.append((start, d))
        self.size_events = keep


def _count(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n
