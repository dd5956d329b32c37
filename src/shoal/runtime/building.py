"""Chares whose constructor is a coroutine, ``async def __init__`` (charm4py's threaded
constructors; Acun14, II-B: a suspended coroutine lets the other objects of its PE run).

:meth:`Location.construct <shoal.runtime.location.Location.construct>` calls ``__init__``
as for any chare; an ``async def`` one returns a coroutine, which :func:`start` runs as a
coroutine of the element (its first step from the queue, like a message). Until it has
returned, the element exists (its home knows it, it counts in reductions and broadcasts, a
checkpoint refuses to run while it is suspended, as for any suspended coroutine) but none of
its entry methods runs: the runtime reaches the element through a stand-in
(:class:`Building`, its ``Slot.obj`` meanwhile) whose entry methods are guarded by a false
condition (:mod:`shoal.runtime.guards`), so every message to it, broadcasts and items of an
``Aggregator`` included, waits in its buffer in arrival order, and is queued again once the
constructor has returned, ahead of anything that arrives later. The runtime's own messages
(``_shoal_*``: channel values, allreduce results, replays) reach the chare itself, so the
constructor may ``await`` channels and ``self.allreduce`` as well as futures. Ordinary chares
pay nothing for this: a stand-in exists only while such a constructor runs.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from shoal.runtime.failure import Failure
from shoal.runtime.futures import Gather, Task
from shoal.runtime.guards import GuardError
from shoal.runtime.protocol import I_PRIO
from shoal.runtime.proxy import entry_methods

if TYPE_CHECKING:
    from shoal.runtime.chare import Chare
    from shoal.runtime.collection import Slot
    from shoal.runtime.interfaces import Core

# public methods that the runtime calls on the chare itself, never as messages: the
# balancer reads an element's position with it (lb.driver), also while it is being built
DIRECT = frozenset({"lb_position"})


class NotBuiltError(GuardError):
    """An entry method of an element whose ``async def __init__`` has not returned: the
    message waits (an aggregated item goes on as a message, which waits)."""


class Building:
    """Stands for a chare while its ``async def __init__`` runs: its entry methods are held
    (each class's own subclass, :func:`stand_in`); any other attribute is the chare's."""

    __slots__ = ("chare",)

    def __init__(self, chare: Chare):
        self.chare = chare

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chare, name)


class Built(Gather):
    """Where the constructor's coroutine returns to: the chare takes its stand-in's place,
    and the messages held meanwhile go back to the front of the queue in arrival order, so
    that they run next, before any message that comes later (and travel in that order if
    the constructor asked the chare to move). A constructor that raised ends the job, as a
    plain ``__init__`` that raises does."""

    __slots__ = ("chare",)

    def __init__(self, chare: Chare):
        self.chare = chare

    def answer(self, rt: Core, slot: Slot, value: Any) -> None:
        if type(value) is Failure:
            raise value.exception()
        slot.obj = self.chare
        held, slot.held = slot.held, []
        for env in reversed(held):
            rt.queue.unpop(env[I_PRIO], rt.run_invoke, slot, env)


def start(rt: Core, slot: Slot, coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro``, the coroutine of element ``slot``'s ``async def __init__``, holding its
    messages until it has returned."""
    chare = slot.obj
    slot.obj = stand_in(type(chare))(chare)  # type: ignore[assignment]
    slot.active += 1
    rt.push(0, rt.run_task, Task(coro, slot, Built(chare), "__init__"), None)


_STAND_INS: dict[type, type[Building]] = {}


def stand_in(cls: type) -> type[Building]:
    """The stand-in class of chare class ``cls`` (made once): every entry method of the
    program's is held; its module is ``cls``'s, whose globals ``self.wait`` conditions
    read."""
    made = _STAND_INS.get(cls)
    if made is None:
        held = {name: _held(cls, name) for name in entry_methods(cls)
                if not name.startswith("_shoal_") and name not in DIRECT}
        made = type(f"{cls.__name__}Building", (Building,),
                    {"__slots__": (), "__module__": cls.__module__, **held})
        _STAND_INS[cls] = made
    return made


def _held(cls: type, name: str) -> Callable[..., Any]:
    """The stand-in's method ``name``: its condition never holds, so the runtime keeps the
    message (raised by the method itself, as a guarded method does)."""

    def held(self: Building, *args: Any, **kwargs: Any) -> Any:
        raise NotBuiltError(f"{cls.__name__}.{name}: the chare's async def __init__ has not "
                      "returned yet")

    held._shoal_guard = _never  # type: ignore[attr-defined]
    return held


def _never(*args: Any, **kwargs: Any) -> bool:
    return False
