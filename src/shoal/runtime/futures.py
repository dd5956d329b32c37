"""Futures and the coroutines that wait on them (Acun14, Section II-B: asynchronous
message-driven execution; a suspended coroutine lets other objects of its PE run).

A :class:`Future` lives on the PE that created it. It may be sent anywhere inside a message;
``fut.send(value)`` on any PE delivers the value to the owner, which resumes every coroutine
that awaits it. Only the owner may await it. There is no blocking ``get``: a scheduler that
blocked could not deliver the message that unblocks it. ``shoal.future(n)`` makes a future
that resolves to the list of the first ``n`` values sent to it; :func:`iwait` yields futures
as they complete. A future that carries an entry method's exception
(:mod:`shoal.runtime.failure`) raises it where it is awaited.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError, UsageError
from shoal.runtime.context import current
from shoal.runtime.failure import Excepted, Failure
from shoal.runtime.protocol import RET

if TYPE_CHECKING:
    from shoal.runtime.channel import Channel
    from shoal.runtime.collection import Slot
    from shoal.runtime.interfaces import Core


class Future:
    """A value that arrives later. ``await fut`` inside an ``async def`` entry method (or
    ``main``) suspends until it does; ``fut.send(value)`` provides it, once."""

    __slots__ = ("count", "done", "fid", "pe", "value", "values", "waiters")

    def __init__(self, pe: int, fid: int):
        self.pe = pe
        self.fid = fid
        self.done = False
        self.value: Any = None
        # coroutines of this PE that await it, and the iwait()s that watch it
        self.waiters: list[Task | Callable[[Future], None]] = []
        self.values: list[Any] | None = None  # shoal.future(n): the values so far
        self.count = 1  # ... and how many it waits for

    def send(self, value: Any = None) -> None:
        """Provide the value (from any PE)."""
        current().resolve(self.pe, self.fid, value)

    def __await__(self) -> Generator[Future, Any, Any]:
        if not self.done:
            if self.fid not in _owner_table():
                raise ShoalError(f"a future may only be awaited on its own PE ({self.pe})")
            yield self
        value = self.value
        if type(value) is Failure:  # the entry method raised: so does the await
            raise value.exception()
        if type(value) is Excepted:  # return_exceptions=True: the exceptions are values
            return value.exceptions()
        return value

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

    def answer(self, rt: Core, slot: Slot, value: Any) -> None:
        """Send element ``slot``'s return ``value`` to the root of the gather."""
        raise NotImplementedError


class BroadcastReturn(Gather):
    """The gather of broadcast ``num`` of collection ``cid``, at PE 0, called with
    ``ret=True`` (``values``) or ``awaitable=True`` (only that it ran, or its failure)."""

    __slots__ = ("cid", "num", "values")

    def __init__(self, cid: int, num: int, values: bool):
        self.cid = cid
        self.num = num
        self.values = values

    def answer(self, rt: Core, slot: Slot, value: Any) -> None:
        if not (self.values or type(value) is Failure):
            value = None
        rt.send(0, (RET, self.cid, self.num, slot.index, value))


def iwait(futures: Iterable[Future | Channel]) -> Arrivals:
    """``async for fut in shoal.iwait(futures)``: each future of this PE, as it completes
    (those already complete first, in the order given); ``await fut`` then gives its value
    at once (or raises its entry method's exception). Channels (charm4py's ``iwait`` over
    channels) may be among them, from an entry method of their chare: a channel comes when
    a value is there to receive, and ``await ch.recv()`` then gives it at once."""
    return Arrivals(futures)


class Arrivals:
    """The asynchronous iterator of :func:`iwait`."""

    __slots__ = ("left", "next", "ready")

    def __init__(self, futures: Iterable[Future | Channel]):
        rt = current()
        self.ready: deque[Future | Channel] = deque()
        self.left = 0  # futures still to complete
        self.next: Future | None = None  # what the consumer awaits, when none was ready
        for fut in futures:
            if not isinstance(fut, Future):
                when_ready = getattr(fut, "_when_ready", None)  # a Channel
                if when_ready is None:
                    raise UsageError(f"shoal.iwait takes futures and channels, not {fut!r}")
                if when_ready(functools.partial(self._arrived, fut)):
                    self.ready.append(fut)
                else:
                    self.left += 1
            elif fut.done:
                self.ready.append(fut)
            elif rt.futures.get(fut.fid) is not fut:
                raise UsageError(f"shoal.iwait: {fut!r} belongs to PE {fut.pe}; a future "
                                 "may only be awaited on its own PE")
            else:
                fut.waiters.append(self._arrived)
                self.left += 1

    def _arrived(self, fut: Future | Channel) -> None:
        self.left -= 1
        nxt, self.next = self.next, None
        if nxt is None:
            self.ready.append(fut)
        else:
            current().resolve(nxt.pe, nxt.fid, fut)

    def __aiter__(self) -> Arrivals:
        return self

    def __anext__(self) -> Future:
        if self.next is not None:
            raise UsageError("shoal.iwait: one coroutine at a time may iterate over it")
        rt = current()
        if self.ready:
            nxt = rt.future()
            rt.resolve(rt.pe, nxt.fid, self.ready.popleft())
            return nxt
        if not self.left:
            raise StopAsyncIteration
        self.next = rt.future()
        return self.next
