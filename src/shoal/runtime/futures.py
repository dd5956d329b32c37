"""Futures and the coroutines that wait on them (seed 002, Section II-B: asynchronous
message-driven execution; a suspended coroutine lets other objects of its PE run).

A :class:`Future` lives on the PE that created it. It may be sent anywhere inside a message;
``fut.send(value)`` on any PE delivers the value to the owner, which resumes every coroutine
that awaits it. Only the owner may await it. There is no blocking ``get``: a scheduler that
blocked could not deliver the message that unblocks it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError
from shoal.runtime.context import current
from shoal.runtime.protocol import RET

if TYPE_CHECKING:
    from shoal.runtime.collection import Slot
    from shoal.runtime.pe import Runtime


class Future:
    """A value that arrives later. ``await fut`` inside an ``async def`` entry method (or
    ``main``) suspends until it does; ``fut.send(value)`` provides it, once."""

    __slots__ = ("done", "fid", "pe", "value", "waiters")

    def __init__(self, pe: int, fid: int):
        self.pe = pe
        self.fid = fid
        self.done = False
        self.value: Any = None
        self.waiters: list[Task] = []  # coroutines of this PE that await it

    def send(self, value: Any = None) -> None:
        """Provide the value (from any PE)."""
        current().resolve(self.pe, self.fid, value)

    def __await__(self) -> Generator[Future, Any, Any]:
        if not self.done:
            if self.fid not in _owner_table():
                raise ShoalError(f"a future may only be awaited on its own PE ({self.pe})")
            yield self
        return self.value

    def __reduce__(self) -> tuple[Callable[[int, int], Future], tuple[int, int]]:
        return (_rebuild, (self.pe, self.fid))

    def __repr__(self) -> str:
        state = f"done={self.value!r}" if self.done else "pending"
        return f"Future(pe={self.pe}, id={self.fid}, {state})"


def _owner_table() -> dict[int, Future]:
    return current().futures


def _rebuild(pe: int, fid: int) -> Future:
    """Unpickle: the owner gets its own object back, other PEs a handle for ``send``."""
    rt = current()
    if pe == rt.pe:
        fut = rt.futures.get(fid)
        if fut is not None:
            return fut
    return Future(pe, fid)


class Task:
    """A running coroutine: an ``async def`` entry method (of ``slot``) or ``main``."""

    __slots__ = ("coro", "fut", "name", "slot")

    def __init__(self, coro: Coroutine[Any, Any, Any], slot: Slot | None,
                 fut: Future | Gather | None, name: str):
        self.coro = coro
        self.slot = slot
        self.fut = fut  # receives the coroutine's return value, or None
        self.name = name


class Gather:
    """Where an element sends its return value of a call made to many elements with
    ``ret=True`` (a broadcast, a section's multicast): a root that gathers them for the
    caller's future."""

    __slots__ = ()

    def answer(self, rt: Runtime, slot: Slot, value: Any) -> None:
        """Send element ``slot``'s return ``value`` to the root of the gather."""
        raise NotImplementedError


class BroadcastReturn(Gather):
    """The gather of broadcast ``num`` of collection ``cid``, at PE 0."""

    __slots__ = ("cid", "num")

    def __init__(self, cid: int, num: int):
        self.cid = cid
        self.num = num

    def answer(self, rt: Runtime, slot: Slot, value: Any) -> None:
        rt.send(0, (RET, self.cid, self.num, slot.index, value))
