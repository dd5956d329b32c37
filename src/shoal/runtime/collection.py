"""What one PE holds of a chare array or group: its local elements, where it believes the
others are, and its share of reductions and broadcasts (Acun14, II-D).

Location management: an element's home PE (its map) knows where it is (``where``; absent
means "at home"); a PE an element left keeps a forwarding pointer (``forward``); other PEs
cache locations (``cache``) and are corrected when a message had to be forwarded.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from shoal.runtime.maps import Singles, home
from shoal.runtime.proxy import proxy_classes

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.runtime.chare import Chare
    from shoal.runtime.futures import Future
    from shoal.runtime.maps import ArrayMap

HISTORY = 256  # broadcasts a PE keeps to replay to elements that migrate in behind them
# (more while elements that left it may still need them: see collectives.broadcast)


class Slot:
    """The runtime's record of one local element; everything in it migrates with it.

    ``expected[src]`` is the sequence number of the next message from sender ``src`` and
    ``ooo`` holds messages that arrived ahead of it, so that messages between two elements
    are delivered in the order they were sent whatever path they took. ``out[dst]`` numbers
    the messages this element sends. ``redno`` counts its contributions, ``bcast`` the
    broadcasts it has received in order (``early``: those that came ahead of a gap),
    ``sections[sid]`` its contributions to section ``sid``'s reductions. ``held`` keeps the
    messages to guarded methods whose condition was false (:mod:`shoal.runtime.guards`),
    ``waits`` the conditions its coroutines await; ``after`` says that something waits for
    its current call to return (one of those, or a move).
    """

    __slots__ = (
        "active",
        "after",
        "allreduce",
        "bcast",
        "chan",
        "chans",
        "coll",
        "early",
        "expected",
        "held",
        "index",
        "key",
        "lb_mark",
        "migrate_to",
        "notes",
        "obj",
        "ooo",
        "out",
        "pinned",
        "redno",
        "sections",
        "stats",
        "sync",
        "waiting",
        "waits",
    )

    def __init__(self, coll: Collection, index: tuple[int, ...]):
        self.coll = coll
        self.index = index
        # (cid, index); Any: senders' keys mix it with PEs' keys, (-1, pe)
        self.key: tuple[int, Any] = (coll.cid, index)
        # the chare: None only until whoever makes the slot sets it, right after
        self.obj: Chare = None  # type: ignore[assignment]
        # sequence numbers and early messages, by sender key (an element's, or (-1, pe))
        self.expected: dict[tuple[int, Any], int] = {}
        self.ooo: dict[tuple[tuple[int, Any], int], Any] = {}  # (src, seq) -> INVOKE envelope
        self.out: dict[tuple[int, tuple[int, ...]], list[int]] = {}  # dst -> [messages, bytes]
        self.redno = 0
        self.bcast = 0
        # broadcasts that reached it ahead of their turn (number -> BCAST envelope), after
        # it migrated to a PE far ahead of the one it left (see collectives.broadcast)
        self.early: dict[int, tuple[Any, ...]] | None = None
        self.active = 0  # suspended coroutines
        self.migrate_to: int | None = None  # where to move once its calls have returned
        # after its current call: a move, held messages or waits to look at (Runtime._after)
        self.after = False
        self.sections: dict[int, int] = {}  # section id -> its contributions to the section
        self.held: list[tuple[Any, ...]] = []  # INVOKE envelopes whose condition was false
        self.waits: list[tuple[Any, Future]] = []  # (condition, future) of self.wait(...)
        self.chan: dict[tuple[Any, ...], deque[Any]] = {}  # channel key -> values arrived
        # (other element's key, name) -> channels this element made to it with that name
        self.chans: dict[tuple[Any, Any], int] = {}
        # channel key -> futures of pending receives
        self.waiting: dict[tuple[Any, ...], deque[Future]] = {}
        # channel key -> what shoal.iwait calls when a value is there to receive
        self.notes: dict[tuple[Any, ...], list[Callable[[], None]]] = {}
        self.allreduce: deque[Future] = deque()  # futures of this element's pending allreduces
        self.stats: dict[str, list[float]] = {}  # method -> [calls, wall seconds, cpu seconds]
        self.lb_mark = 0.0  # its seconds in entry methods at the last balancing step
        # at_sync(): [its seconds in entry methods at its last call, its smoothed load per
        # iteration (-1: none yet), iterations since the last balancing step]
        self.sync = [0.0, -1.0, 0]
        # not migratable (self.migratable = False): neither migrate() nor the balancer
        # moves it, and its load stays on its PE
        self.pinned = False

    def pack(self, queued: list[Any]) -> dict[str, Any]:
        """The migrating state, by name (the object itself travels beside it), with the
        version of this record, so that a checkpoint of an older shoal is refused by name
        rather than misread."""
        state = {name: getattr(self, name) for name in MIGRATING}
        state["queued"] = queued
        state["version"] = SLOT_VERSION
        return state

    @staticmethod
    def copied(state: dict[str, Any]) -> dict[str, Any]:
        """A saved record given to a new element that copies it (a group member on a PE
        the checkpoint did not have): without its sequence numbers, channels and
        statistics, which belong to the original."""
        return {**state, "expected": {}, "out": {}, "chan": {}, "chans": {}, "stats": {}}

    def forget(self, gone: Callable[[tuple[int, Any]], bool]) -> None:
        """Drop the sequence numbers to and from the senders and receivers ``gone`` says
        no longer exist (after a restart on fewer PEs)."""
        for d in (self.out, self.expected):
            for key in [k for k in d if gone(k)]:
                del d[key]

    def unpack(self, state: dict[str, Any]) -> list[Any]:
        """Take the state :meth:`pack` made; returns the queued messages."""
        version = state.get("version") if isinstance(state, dict) else None
        if version != SLOT_VERSION:
            raise ValueError(f"an element's saved record has version {version!r}, this "
                             f"shoal reads version {SLOT_VERSION}: it was written by "
                             "another version of shoal")
        for name in MIGRATING:
            setattr(self, name, state[name])
        self.after = bool(self.held)
        return state["queued"]


# What of a Slot migrates and is saved in a checkpoint (by name, :meth:`Slot.pack`);
# SLOT_VERSION changes whenever this list or the meaning of a field does.
MIGRATING = ("expected", "ooo", "out", "redno", "bcast", "chan", "chans", "stats",
             "lb_mark", "sync", "sections", "held", "early", "pinned")
SLOT_VERSION = 2  # (1: the positional 14-tuple of shoal <= 0.1 checkpoints, format 3)


class Collection:
    """One PE's part of an array (``kind == "array"``) or group (``"group"``)."""

    def __init__(self, cid: int, kind: str, cls: type[Chare], ndims: int,
                 dims: tuple[int, ...] | None, mapping: ArrayMap, npes: int,
                 at_sync: bool = False, pes: tuple[int, ...] | None = None):
        self.cid = cid
        self.kind = kind
        self.pes = pes  # a group on some PEs only (shoal.Group(cls, pes=...)): those PEs
        self.at_sync = at_sync  # its elements call at_sync() and wait for the balancer
        # a type[Chare], declared Any: Location.construct calls ``obj.__init__(*args)`` on the
        # new instance, which mypy rejects on a Chare (a subclass's __init__ may differ)
        self.cls: Any = cls
        self.ndims = ndims
        self.dims = dims
        self.map = mapping
        # the array of a class's single chares (shoal.create): thisProxy names the element
        self.single = isinstance(mapping, Singles)
        self.npes = npes
        self.proxy = proxy_classes(cls)[1](cid, ndims, dims, pes)
        # an element was inserted outside ``dims``: proxies stop refusing such indices
        self.outside = False
        self.announced = False  # the root: it has told every PE so
        self.local: dict[tuple[int, ...], Slot] = {}
        self.cache: dict[tuple[int, ...], int] = {}
        self.forward: dict[tuple[int, ...], int] = {}
        self.where: dict[tuple[int, ...], int] = {}  # elements of this home PE that are elsewhere
        # home: messages for elements not yet inserted
        self.absent: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}
        self.deleted: set[tuple[int, ...]] = set()  # home: elements deleted
        self.bcast_count = 0
        self.history: deque[tuple[Any, ...]] = deque()  # BCAST envelopes, numbers in a row
        # reductions: this PE's partial results, and how many local elements are done
        self.partial: dict[int, list[Any]] = {}  # [value, count, reducer, target]
        self.done: dict[int, int] = {}
        # the root (PE 0) only
        self.total: dict[int, list[Any]] = {}
        self.size = len(pes) if pes is not None else 0 if dims is None else _count(dims)
        self.size_events: list[tuple[int, int]] = []  # (first reduction, +1 or -1)
        self.members = self.size  # elements that will run the next broadcast
        self.rets: dict[int, list[Any]] = {}  # broadcast -> [future, {index: value}, elements]
        self.completed: set[int] = set()
        self.next_red = 0

    # what a checkpoint's main shard keeps of a collection: how to rebuild it, and the
    # root's counts of its reductions and broadcasts
    SAVED = ("cid", "kind", "cls", "ndims", "dims", "map", "at_sync", "bcast_count", "size",
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
