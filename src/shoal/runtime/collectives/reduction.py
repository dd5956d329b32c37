"""Reductions over the elements of an array or group (Acun14, Section III).

Each element contributes to its reductions in order (its ``redno`` counts them). A PE
combines the contributions of its local elements to reduction ``r`` and sends the partial
result up the spanning tree once every local element has contributed; the root (PE 0)
completes ``r`` when it has as many contributions as the collection had members for it
(insertions and deletions are numbered by the reduction they start at). Elements that
migrate take their place in the count with them.
"""

from __future__ import annotations

from types import MethodType
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime import reducers
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.futures import Future
from shoal.runtime.protocol import RED, parent
from shoal.runtime.proxy import CollectionProxy, ElementProxy, SectionProxy

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core


class Reductions:
    """The reduction manager of one PE."""

    def __init__(self, rt: Core):
        self.rt = rt

    def saved(self) -> dict[str, Any]:
        """This PE's part of its shard's first record: each collection's partial results
        (and, at the root, totals) of reductions not yet complete."""
        return {"colls": {cid: {"partial": coll.partial, "total": coll.total}
                          for cid, coll in self.rt.colls.items()}}

    def restore(self, infos: list[dict[str, Any]]) -> None:
        """At the new root, after a restart: the partial results every old PE held join
        the reductions they belong to, as if they came up the tree."""
        if self.rt.pe != 0:
            return
        for info in infos:
            for cid, parts in info["colls"].items():
                for store in (parts["partial"], parts["total"]):
                    for r, (value, count, reducer, target) in store.items():
                        self.on_red((RED, cid, r, value, count, reducer, target))

    def contribute(self, slot: Slot, value: Any, reducer: Any, target: Any) -> None:
        """Element ``slot``'s contribution to its next reduction (``reducer`` None: a
        barrier, see :mod:`shoal.runtime.reducers`)."""
        if slot.coll.single:
            raise UsageError(f"{slot.coll.cls.__name__} is a single chare (shoal.create): it "
                             "takes part in no reduction; make an array or a group")
        reducer = reducers.checked(reducer, value)
        check_target(target)
        self.add_contribution(slot, value, reducer, target)

    def add_contribution(self, slot: Slot, value: Any, reducer: Any, target: Any) -> None:
        """:meth:`contribute` without the checks (for the runtime's own reductions)."""
        coll = slot.coll
        r = slot.redno
        slot.redno += 1
        if reducer is reducers.Reducer.gather:
            value = [(slot.index, value)]
        if r in coll.done:
            coll.done[r] += 1
        self._add(coll, r, value, 1, reducer, target)

    def on_red(self, env: tuple) -> None:
        _, cid, r, value, count, reducer, target = env
        coll = self.rt.collection(cid, env)
        if coll is not None:
            self._add(coll, r, value, count, reducer, target)

    def element_left(self, coll: Collection, slot: Slot, dest: int | None = None) -> None:
        """``slot`` leaves this PE (migrates to ``dest``, or is deleted): it no longer
        counts among the local elements that contributed to the open reductions. Call
        :meth:`elements_left` after."""
        for r in coll.done:
            if slot.redno > r:
                coll.done[r] -= 1

    def element_joined(self, coll: Collection, slot: Slot) -> None:
        """``slot`` arrived here with the contributions it has made."""
        for r in coll.done:
            if slot.redno > r:
                coll.done[r] += 1

    def elements_left(self, coll: Collection) -> None:
        """Elements of ``coll`` have left: send up every partial result that the local
        elements now complete."""
        for r in list(coll.partial):
            self._check(coll, r)

    def elements_arrived(self, coll: Collection, slots: list[Slot],
                         fetches: list[tuple] | None) -> None:
        """(Each counted as it joined.)"""

    def size_changed(self, coll: Collection) -> None:
        """At the root: the membership changed; complete what now has every contribution."""
        for r in list(coll.total):
            self._root(coll, r)

    def _add(self, coll: Collection, r: int, value: Any, count: int, reducer: Any,
             target: Any) -> None:
        combine(coll.partial, r, value, count, reducer, target)
        self._check(coll, r)

    def _check(self, coll: Collection, r: int) -> None:
        """Pass this PE's partial result of reduction ``r`` up the tree once every local
        element has contributed (late contributions follow in further partials)."""
        done = coll.done.get(r)
        if done is None:
            done = coll.done[r] = sum(1 for s in coll.local.values() if s.redno > r)
        if done < len(coll.local):
            return
        del coll.done[r]
        value, count, reducer, target = coll.partial.pop(r)
        rt = self.rt
        if rt.pe == 0:
            combine(coll.total, r, value, count, reducer, target)
            self._root(coll, r)
        else:
            rt.send(parent(rt.pe, 0, rt.npes), (RED, coll.cid, r, value, count, reducer, target))

    def _root(self, coll: Collection, r: int) -> None:
        total = coll.total.get(r)
        if total is None or total[1] < coll.expected(r):
            return
        del coll.total[r]
        coll.complete(r)
        value, _, reducer, target = total
        deliver(self.rt, value, reducer, target, "reduction target")


def check_target(target: Any) -> None:
    """A reduction's result goes to a Future or to a proxy's method (an element's, a
    collection's or a section's)."""
    if not (isinstance(target, Future) or (
            type(target) is MethodType
            and isinstance(target.__self__, (ElementProxy, CollectionProxy, SectionProxy)))):
        raise UsageError(f"a reduction's target is a Future or a proxy method, not {target!r}")


def deliver(rt: Core, value: Any, reducer: Any, target: Any, what: str) -> None:
    """A complete reduction's result to its target (a gather's values in index order): a
    Future is resolved, a proxy method called (as ``what``, for error reports)."""
    if reducer is reducers.Reducer.gather:
        value = [v for _, v in sorted(value, key=lambda iv: iv[0])]
    if isinstance(target, Future):
        rt.resolve(target.pe, target.fid, value)
    else:
        saved = rt.enter(None, what)
        target(value)
        rt.leave(saved)


def combine(store: dict, r: int, value: Any, count: int, reducer: Any, target: Any) -> None:
    """Add ``count`` contributions worth ``value`` to the partial result ``store[r]``."""
    part = store.get(r)
    if part is None:
        store[r] = [value, count, reducer, target]
    else:
        part[0] = reducers.combiner(reducer)(part[0], value)
        part[1] += count
