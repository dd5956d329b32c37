"""The chare: a migratable object whose methods are invoked by messages (Acun14, II-D).

Subclass :class:`Chare`; every public method is an entry method. A plain method runs to
completion; an ``async def`` method may ``await`` futures, reductions and channels, and other
chares of its PE run meanwhile. ``__init__`` may be an ``async def`` too (charm4py's threaded
constructors): the messages to the chare wait until it has returned
(:mod:`shoal.runtime.building`). Inside a chare, ``self.thisIndex`` is its index,
``self.thisProxy`` the proxy of its array or group (a single chare's, made by
``shoal.create``: its own proxy), and ``self.thisElement`` names itself.

``@shoal.when("self.iter == iter")`` on an entry method makes its messages wait until the
condition holds; ``await self.wait("...")`` does the same inside a coroutine
(:mod:`shoal.runtime.guards`).

Migration packs the object with pickle: ``__getstate__``/``__setstate__`` are the PUP hook
(Acun14, Fig. 3); by default the instance ``__dict__`` travels. ``on_migrated()`` runs on
the new PE after arrival.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime.channel import deliver
from shoal.runtime.context import current
from shoal.runtime.futures import Future
from shoal.runtime.proxy import ElementProxy, SectionProxy
from shoal.runtime.startup import arm

if TYPE_CHECKING:
    from shoal.runtime.collection import Slot
    from shoal.runtime.reducers import ReducerLike


class Chare:
    """Base class of array elements, group members and single chares."""

    _slot: Slot  # set by the runtime before __init__ runs

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        arm(cls)  # a program of the runtime: a rank that ends before shoal.start ends the job

    @property
    def thisIndex(self) -> tuple[int, ...]:  # noqa: N802 - the name Charm++ programmers know
        return self._slot.index

    thisProxy: Any  # noqa: N815 - (a _ThisProxy, below: a CollectionProxy, or an ElementProxy)

    @property
    def thisElement(self) -> ElementProxy:  # noqa: N802
        slot = self._slot
        return slot.coll.proxy._element(slot.coll.cid, slot.index)

    def migrate(self, pe: int) -> None:
        """Move to ``pe`` once the current entry method returns (and no coroutine of this
        chare is suspended): no message to it is lost, duplicated or reordered. An element
        that is not migratable (``self.migratable = False``) refuses: a UsageError."""
        current().migration.request(self._slot, pe)

    @property
    def migratable(self) -> bool:
        """Whether this element may move (True by default for array elements and single
        chares; group members never move). ``self.migratable = False`` pins it to its PE:
        ``migrate()`` on it is an error, the load balancer leaves it where it is and counts
        its load as load of that PE that cannot move, and a restart on the same number of
        PEs puts it back there. It travels with the element and its checkpoints."""
        slot = self._slot
        return slot.coll.kind == "array" and not slot.pinned

    @migratable.setter
    def migratable(self, value: bool) -> None:
        slot = self._slot
        if slot.coll.kind != "array" and value:
            raise UsageError(f"{slot.coll.cls.__name__}{list(slot.index)} is a group member: "
                             "group members never migrate")
        slot.pinned = not value
        if not value:
            slot.migrate_to = None  # a move it asked for earlier is dropped

    def setMigratable(self, migratable: bool) -> None:  # noqa: N802 - charm4py's name
        """charm4py's spelling of ``self.migratable = migratable``."""
        self.migratable = bool(migratable)

    def contribute(self, value: Any, reducer: ReducerLike,
                   target: Future | Callable[[Any], Any],
                   section: SectionProxy | None = None) -> None:
        """Take part in the next reduction of this array or group: ``value`` is combined
        with every other element's by ``reducer`` (a :class:`shoal.Reducer` or a two-argument
        function) and the result goes to ``target``: a Future, or a proxy's method (an
        element's, a whole array's for a broadcast, a section's for a multicast).
        ``section=sec``: the next reduction over the members of section ``sec`` instead
        (every member contributes; this element must be one)."""
        if section is None:
            current().reductions.contribute(self._slot, value, reducer, target)
        else:
            current().sections.contribute(self._slot, section, value, reducer, target)

    def allreduce(self, value: Any, reducer: ReducerLike,
                  section: SectionProxy | None = None) -> Future:
        """Contribute to a reduction whose result every element receives: ``total = await
        self.allreduce(x, shoal.Reducer.max)`` (the result is broadcast back);
        ``section=sec``: over the members of ``sec``, multicast back to them."""
        if section is not None:
            return current().sections.allreduce(self._slot, section, value, reducer)
        fut = current().future()
        self._slot.allreduce.append(fut)
        self.contribute(value, reducer, self.thisProxy._shoal_allreduce)
        return fut

    def _shoal_allreduce(self, value: Any) -> None:
        self._slot.allreduce.popleft().send(value)

    def _shoal_section_result(self, sid: int, value: Any) -> None:
        current().sections.allreduce_result(self._slot, sid, value)

    def wait(self, condition: str) -> Future:
        """``await self.wait("self.count == 4")`` in a coroutine entry method: resume once
        the condition (a Python expression over ``self``) holds. It is checked now and after
        every entry method and coroutine step of this chare (see
        :mod:`shoal.runtime.guards`)."""
        return current().guards.wait(self._slot, condition)

    def on_migrated(self) -> None:
        """Called on the new PE after a migration."""

    def at_sync(self) -> None:
        """This element is done with an iteration (arrays created with ``at_sync=True``):
        once every element of every such array has called it, the runtime balances the
        load, moves elements, and calls :meth:`resume_from_sync` on each. Do no more work
        until then."""
        current().balancer.at_sync(self._slot)

    def resume_from_sync(self) -> None:
        """Called after a balancing step that followed :meth:`at_sync`: start the next
        iteration here (by default nothing happens)."""

    def _shoal_channel(self, key: tuple[Any, ...], value: Any) -> None:
        deliver(self._slot, key, value)

    def _shoal_delete(self) -> None:
        current().location.delete_here(self._slot)

    def _shoal_replay(self, envs: list[tuple[Any, ...]]) -> None:
        current().broadcasts.replay(self._slot, envs)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__
        if "_slot" in state or "thisProxy" in state:  # migration takes them out before
            state = state.copy()  # pickling: no copy then
            state.pop("_slot", None)
            state.pop("thisProxy", None)
        return state


def proxy_of(slot: Slot) -> Any:
    """The ``thisProxy`` of the element of ``slot``: its array's or group's proxy; a
    single chare's own element proxy."""
    coll = slot.coll
    if coll.single:
        return coll.proxy._element(coll.cid, slot.index)
    return coll.proxy


class _ThisProxy:
    """``self.thisProxy``: the proxy of this chare's array or group; a single chare's own
    proxy (indexed with its own index it stays itself: charm4py's
    ``self.thisProxy[self.thisIndex]``).

    The runtime keeps it in the chare's instance dict when it makes the chare the element
    of a slot (:func:`attach`), where a read is a plain attribute read (a property was a
    call: 1,250 instructions a read); this class attribute, which does not hide the
    instance's, answers when it is not there."""

    def __get__(self, obj: Chare | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return proxy_of(obj._slot)


Chare.thisProxy = _ThisProxy()


def attach(obj: Chare, slot: Slot) -> None:
    """Make ``obj`` the chare of ``slot``: its ``_slot``, and its ``thisProxy`` in its
    instance dict (both set before anything else of it, so that every element of a class
    lays its instance dict out alike)."""
    obj._slot = slot
    obj.__dict__["thisProxy"] = proxy_of(slot)
