"""The runtime's record of one local element of a chare array or group (:class:`Slot`),
what of it migrates (:data:`MIGRATING`) and the version of that record.

Compiled with the PE core (``shoal._compiled.MODULES``): the core reads an element's
sequence numbers, statistics and state for every message, and in a native class such a read
is a field of a C struct, where in an interpreted one it is a lookup through the type's
descriptors (about 160 instructions a read, 6 to 8 reads per message). Interpreted code
reads and sets the same attributes as before. The fields that code outside the core sets
from values it did not make (a user's destination PE, a balancer's measure) are typed
``Any``: a native class checks each assignment against the field's type, and a numpy
integer is not an ``int``. A Slot is never pickled (a chare's ``__getstate__`` leaves its
``_slot`` behind; a migration and a checkpoint carry :meth:`Slot.pack`'s dict).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from shoal.runtime.chare import Chare
    from shoal.runtime.collection import Collection
    from shoal.runtime.futures import Future

# What of a Slot migrates and is saved in a checkpoint (by name, :meth:`Slot.pack`);
# SLOT_VERSION changes whenever this list or the meaning of a field does.
MIGRATING: Final = ("expected", "ooo", "out", "redno", "bcast", "chan", "chans", "stats",
                    "lb_mark", "sync", "sections", "held", "early", "pinned")
SLOT_VERSION: Final = 2  # (1: the positional 14-tuple of shoal <= 0.1 checkpoints, format 3)


class Slot:
    """The runtime's record of one local element; everything in it migrates with it.

    ``expected[src]`` holds the sequence number of the next message from sender ``src`` and
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
        # (cid, index); Any: senders' keys mix it with PEs' keys, (-1, pe). A plain tuple:
        # compiled, a fixed tuple type (tuple[int, Any]) is a C struct, boxed anew at each read
        self.key: tuple = (coll.cid, index)
        # the chare: None only until whoever makes the slot sets it, right after
        self.obj: Chare = None  # type: ignore[assignment]
        # sequence numbers and early messages, by sender key (an element's, or (-1, pe)):
        # the next number from each sender in a list of one, changed in place (one lookup
        # of the sender's key per message; :meth:`pack` gives the numbers themselves)
        self.expected: dict[tuple[int, Any], list[int]] = {}
        self.ooo: dict[tuple[tuple[int, Any], int], Any] = {}  # (src, seq) -> INVOKE envelope
        self.out: dict[tuple[int, tuple[int, ...]], list[int]] = {}  # dst -> [messages, bytes]
        self.redno: Any = 0  # (Any: numbers other code sets, see the module doc)
        self.bcast: Any = 0
        # broadcasts that reached it ahead of their turn (number -> BCAST envelope), after
        # it migrated to a PE far ahead of the one it left (see collectives.broadcast)
        self.early: dict[int, tuple[Any, ...]] | None = None
        self.active = 0  # suspended coroutines
        self.migrate_to: Any = None  # (int | None) where to move once its calls have returned
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
        self.allreduce: Any = deque()  # (deque[Future]) its pending allreduces
        self.stats: dict[str, list[float]] = {}  # method -> [calls, wall seconds, cpu seconds]
        self.lb_mark: Any = 0.0  # its seconds in entry methods at the last balancing step
        # at_sync(): [its seconds in entry methods at its last call, its smoothed load per
        # iteration (-1: none yet), iterations since the last balancing step]
        self.sync: Any = [0.0, -1.0, 0]  # (list: [float, float, int])
        # not migratable (self.migratable = False): neither migrate() nor the balancer
        # moves it, and its load stays on its PE
        self.pinned: Any = False

    def pack(self, queued: list[Any]) -> dict[str, Any]:
        """The migrating state, by name (the object itself travels beside it), with the
        version of this record, so that a checkpoint of an older shoal is refused by name
        rather than misread."""
        state = {name: getattr(self, name) for name in MIGRATING}
        state["expected"] = {src: cell[0] for src, cell in self.expected.items()}
        state["queued"] = queued
        state["version"] = SLOT_VERSION
        return state

    @staticmethod
    def copied(state: dict[str, Any]) -> dict[str, Any]:
        """A saved record given to a new element that copies it (a group member on a PE
        the checkpoint did not have): without its sequence numbers, channels and
        statistics, which belong to the original."""
        return {**state, "expected": {}, "out": {}, "chan": {}, "chans": {}, "stats": {}}

    def next_from(self, src: tuple[int, Any]) -> int:
        """The sequence number of the next message from sender ``src``."""
        cell = self.expected.get(src)
        return 0 if cell is None else cell[0]

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
        self.expected = {src: [n] for src, n in state["expected"].items()}
        self.after = bool(self.held)
        return state["queued"]
