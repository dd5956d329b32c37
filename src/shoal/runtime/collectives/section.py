"""Sections: a fixed subset of an array's or group's elements with a proxy of its own, for
multicasts and reductions over just those elements (Acun14, II-D: indexed collections of
chares and scalable location management; Charm++'s array sections).

**Making one** (``arr[0:8, ::2]``, ``arr.section([...])``, on any PE: that PE is its
root): the root groups the members by their home PE and builds the ``ARITY``-ary spanning
tree over those PEs (the root first, then the others in order). Each PE of the tree gets its
subtree's part of that plan (``SEC_NEW``), keeps its own :class:`Part` and passes the rest
on. A section is named by its id, ``root << 20 | n``, so every PE finds the root from the
proxy (modulo the number of PEs after a restart on fewer).

**Multicast** (``sec.method(...)``): to the root (``SEC_REQ``), numbered there, down the
tree (``SEC_MCAST``, one envelope per edge, not one message per element from the caller).
Each PE delivers it to the members whose home it is, as an ``INVOKE`` whose sender is the
section (key ``(-2, sid)``) with the multicast's number as sequence number: a member at home
runs it from there, one that migrated gets it where the home's location records say (one
more hop). So every member gets every multicast once and in order, whatever moves.

**Reductions** (``self.contribute(x, reducer, target, section=sec)``): a member's n-th
contribution to the section is its reduction n (``Slot.sections`` counts them and migrates
with it) and goes to the member's home PE, which is local unless the member migrated. Each
PE of the tree knows how many contributions its subtree holds, so it sends exactly one
partial result up per reduction (``SEC_RED``), when it has them all; the root delivers the
result. Homes are what everyone can compute and what always knows where an element is: no
PE waits on where members are now, so migration costs a migrated member one more message,
never a lost or doubled contribution.

``ret=True`` on a multicast: every member's return value goes to the root (``SEC_RET``),
which resolves the caller's future with them in index order; ``awaitable=True``: every
member tells the root only that it ran the method (None), and the future resolves to None
once each has, coroutines to their end (as for a broadcast). Either way a member that raised
sends its failure, and the future raises the lowest failing index's exception
(:func:`~shoal.runtime.failure.gathered`).

**Checkpoints** save each section's members, its multicast count and gathers (at its root)
and the partial results of every PE; a restart rebuilds each tree from the homes under the
new number of PEs, and a reduction that was in progress finishes with its remaining
contributions sent straight to the root (``Part.direct``), where the saved partials wait.
A section of a group whose members do not all exist on the new number of PEs is refused.

**Combined sections** (``shoal.combine(arr, group, arr2[0:4], ...)``, charm4py's
``charm.combine``): one section over the members of several arrays, groups and sections
(those made on this PE). Every member is a key ``(cid, index)``, so element ``(0,)`` of two
arrays are two members; the tree is planned by home PE as above, a multicast reaches each
member once, a reduction counts each once, and ``ret=True`` lists the values collection by
collection in the order given to ``combine``, each in index order. The classes may differ:
the section proxy has the entry methods they all have.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from shoal.errors import CheckpointError, UsageError
from shoal.runtime import reducers
from shoal.runtime.collectives.reduction import check_target, combine, deliver
from shoal.runtime.failure import Failure, gathered, listed
from shoal.runtime.futures import Future, Gather
from shoal.runtime.protocol import (
    ARITY,
    INVOKE,
    KEEP,
    RET_LIST,
    SEC_MCAST,
    SEC_NEW,
    SEC_RED,
    SEC_REQ,
    SEC_RET,
)
from shoal.runtime.proxy import SectionProxy, section_class
from shoal.runtime.selection import select

if TYPE_CHECKING:
    from shoal.runtime.chare import Chare
    from shoal.runtime.collection import Slot
    from shoal.runtime.interfaces import Core
    from shoal.runtime.proxy import CollectionProxy

SECTION = -2  # the first field of a section's sender key, (SECTION, sid)


class Part:
    """What one PE of a section's tree holds: the members whose home it is, its place in
    the tree, how many members its subtree holds, and its partial results; at the root
    also every member, the multicast count and the gathers of ``ret=True`` multicasts."""

    __slots__ = ("children", "cids", "direct", "expect", "mcast", "members", "own",
                 "own_set", "parent", "reds", "rets")

    def __init__(self, cids: tuple[int, ...], own: list[tuple[int, tuple[int, ...]]],
                 parent: int | None, children: list[int], expect: int, direct: set[int]):
        self.cids = cids  # its collections (several: a combined section)
        self.own = own  # (cid, index) of each member whose home is this PE
        self.own_set = frozenset(own)
        self.parent = parent  # None at the root
        self.children = children
        self.expect = expect  # contributions per reduction in this PE's subtree
        self.direct = direct  # reductions restarted from a checkpoint: straight to the root
        self.reds: dict[int, list[Any]] = {}  # reduction -> [value, count, reducer, target]
        # the root: every member, (cid, index), in the order of ret=True's list
        self.members: list[tuple[int, tuple[int, ...]]] | None = None
        self.mcast = 0  # the root: multicasts numbered
        # the root: multicast -> [future, {index: value}, whether the values are kept]
        self.rets: dict[int, list[Any]] = {}


class SectionReturn(Gather):
    """The gather of multicast ``num`` of section ``sid``, at its root, called with
    ``ret=True`` (``values``) or ``awaitable=True`` (only that it ran, or its failure)."""

    __slots__ = ("num", "sid", "values")

    def __init__(self, sid: int, num: int, values: bool):
        self.sid = sid
        self.num = num
        self.values = values

    def answer(self, rt: Core, slot: Slot, value: Any) -> None:
        if not (self.values or type(value) is Failure):
            value = None
        rt.send(rt.sections.root(self.sid), (SEC_RET, self.sid, self.num, slot.key, value))


class AllreduceResult:
    """The target of a section's ``allreduce``: multicast the result to its members."""

    __slots__ = ("section",)

    def __init__(self, section: SectionProxy):
        self.section = section

    def __call__(self, value: Any) -> None:
        self.section._shoal_section_result(self.section.sid, value)


class Sections:
    """The section manager of one PE."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.count = 0  # sections made here
        self.parts: dict[int, Part] = {}
        self.early: dict[int, list[tuple]] = {}  # contributions ahead of their SEC_NEW
        # (element key, sid) -> futures of its pending allreduces over the section
        self.waiting: dict[tuple[Any, int], deque[Future]] = {}

    def root(self, sid: int) -> int:
        return (sid >> 20) % self.rt.npes

    # ----------------------------------------------------------------- making one
    def create(self, proxy: CollectionProxy, members: list[tuple[int, ...]]) -> SectionProxy:
        """A section of ``members`` (sorted, each once) of ``proxy``'s collection, rooted
        here."""
        assert proxy._chare is not None
        return self._make((proxy.cid,), [(proxy.cid, index) for index in members],
                          (proxy._chare,))

    def combine(self, proxies: tuple[Any, ...]) -> SectionProxy:
        """``shoal.combine(*proxies)``: one section over every member of the arrays,
        groups and sections given (sections made on this PE), rooted here; an element
        named twice counts once."""
        if not proxies:
            raise UsageError("shoal.combine() needs at least one array, group or section")
        cids: list[int] = []
        chares: list[type[Chare]] = []
        keys: dict[tuple[int, tuple[int, ...]], None] = {}
        for proxy in proxies:
            for cid, index in self._members_of(proxy):
                keys.setdefault((cid, index), None)
                if cid not in cids:
                    cids.append(cid)
                    chares.append(self.rt.colls[cid].cls)
        order = {cid: k for k, cid in enumerate(cids)}
        members = sorted(keys, key=lambda key: (order[key[0]], key[1]))
        return self._make(tuple(cids), members, tuple(dict.fromkeys(chares)))

    def _members_of(self, proxy: Any) -> list[tuple[int, tuple[int, ...]]]:
        """The members, ``(cid, index)``, of what ``combine`` was given."""
        from shoal.runtime.proxy import CollectionProxy, ElementProxy

        if isinstance(proxy, SectionProxy):
            part = self.parts.get(proxy.sid)
            if part is None or part.members is None:
                raise UsageError(f"shoal.combine: {proxy!r} was made on PE "
                                 f"{self.root(proxy.sid)}; combine a section on the PE "
                                 "that made it, or combine its array or group")
            return part.members
        if isinstance(proxy, CollectionProxy):
            if proxy.dims is None:
                raise UsageError(f"shoal.combine: {proxy!r} is an array filled by "
                                 "insertion, which has no shape to take every element "
                                 "of: combine a section of it (arr[0:8, 0:2] or "
                                 "arr.section([...]))")
            if proxy.cid in self.rt.location.destroyed:
                raise self.rt.location.gone(proxy.cid)
            return [(proxy.cid, index) for index in proxy._members(
                select((Ellipsis,), proxy.ndims, proxy.dims), "[...]")]
        if isinstance(proxy, ElementProxy):
            raise UsageError(f"shoal.combine takes arrays, groups and sections, not one "
                             f"element ({proxy!r}): give a section of it "
                             "(arr.section([i]))")
        raise UsageError(f"shoal.combine takes arrays, groups and sections, not {proxy!r}")

    def _make(self, cids: tuple[int, ...], members: list[tuple[int, tuple[int, ...]]],
              chares: tuple[type[Chare], ...]) -> SectionProxy:
        rt = self.rt
        sid = (rt.pe << 20) | self.count
        self.count += 1
        self.on_new((SEC_NEW, sid, cids, None, members, ()))
        return section_class(*chares)(cids[0], sid, len(members), cids)

    def _colls(self, cids: tuple[int, ...], env: tuple) -> bool:
        """Every collection of a section is here (else ``env`` waits for the first that is
        not, or is dropped if it was destroyed)."""
        rt = self.rt
        return all(rt.collection(cid, env) is not None for cid in cids)

    def on_new(self, env: tuple) -> None:
        """Keep this PE's part of the tree and send each child its subtree's plan (at the
        root, ``tree`` is None and ``plan`` the members: plan first)."""
        _, sid, cids, tree, plan, direct = env
        rt = self.rt
        if not self._colls(cids, env):
            return
        members = None
        if tree is None:
            members = plan
            plan = {}
            colls = rt.colls
            for cid, index in members:
                plan.setdefault(colls[cid].home(index), []).append((cid, index))
            tree = [rt.pe, *sorted(p for p in plan if p != rt.pe)]
        pos = tree.index(rt.pe)
        kids = list(range(pos * ARITY + 1, min(pos * ARITY + ARITY + 1, len(tree))))
        part = Part(cids, plan.get(rt.pe, []), None if pos == 0 else tree[(pos - 1) // ARITY],
                    [tree[k] for k in kids], sum(len(v) for v in plan.values()), set(direct))
        part.members = members
        for k in kids:
            sub = {tree[q]: plan[tree[q]] for q in _subtree(k, len(tree)) if tree[q] in plan}
            rt.send(tree[k], (SEC_NEW, sid, cids, tree, sub, direct))
        self.parts[sid] = part
        for early in self.early.pop(sid, ()):
            self.on_red(early)

    # ----------------------------------------------------------------- multicasts
    def multicast(self, proxy: SectionProxy, name: str, args: tuple, kwargs: dict | None,
                  ret: int, prio: int) -> Future | None:
        """``sec.method(*args)``: to the root, which numbers it and sends it down; ``ret``:
        what the caller's future gathers (``RET_VALUES``, ``RET_DONE``, ``RET_LIST``; 0: no
        future)."""
        rt = self.rt
        fut = rt.future() if ret else None
        rt.send(self.root(proxy.sid), (SEC_REQ, proxy.sid, proxy.cids, name, args, kwargs,
                                       prio, fut, ret))
        return fut

    def on_req(self, env: tuple) -> None:
        _, sid, cids, name, args, kwargs, prio, fut, ret = env
        if not self._colls(cids, env):
            return
        part = self._part(sid, cids)
        part.mcast += 1
        num = part.mcast
        if fut is not None:
            part.rets[num] = [fut, {}, ret]
        self.on_mcast((SEC_MCAST, sid, cids, num, name, args, kwargs, prio, ret))

    def on_mcast(self, env: tuple) -> None:
        """Down the tree; to each member whose home is here, once, in multicast order."""
        _, sid, cids, num, name, args, kwargs, prio, ret = env
        rt = self.rt
        if not self._colls(cids, env):
            return
        part = self.parts[sid]
        for child in part.children:
            rt.send(child, env)
        to = SectionReturn(sid, num, ret in KEEP) if ret else None
        src = (SECTION, sid)
        colls = rt.colls
        for cid, index in part.own:
            coll = colls[cid]
            menv = (INVOKE, cid, index, name, args, kwargs, src, num - 1, prio, to, rt.pe, 0)
            slot = coll.local.get(index)
            if slot is None:  # it migrated (or is not inserted yet): where the home knows
                rt.location.route(coll, menv)
            else:
                rt.accept(slot, menv)

    def on_ret(self, env: tuple) -> None:
        """At the root: a member's answer; once every member has answered, the caller's
        future gets their values in member order (``ret=True``; with
        ``return_exceptions=True`` each failure's exception in its place), None
        (``awaitable=True``), or the lowest failing member's failure."""
        _, sid, num, key, value = env
        part = self.parts[sid]
        fut, values, ret = part.rets[num]
        values[key] = value
        members = part.members
        assert members is not None
        if len(values) == len(members):
            del part.rets[num]
            # keys as the caller knows them, sorted in member order: an index, or for a
            # combined section (the collection's place in combine(), index)
            named: dict[Any, Any]
            if len(part.cids) == 1:
                named = {k[1]: values[k] for k in members}
            else:
                place = {cid: k for k, cid in enumerate(part.cids)}
                named = {(place[k[0]], k[1]): values[k] for k in members}
            result: Any
            if ret == RET_LIST:
                result = listed(named, list(named))
            else:
                result = (gathered(named, "multicast")
                          or (list(named.values()) if ret in KEEP else None))
            self.rt.resolve(fut.pe, fut.fid, result)

    def _part(self, sid: int, cids: tuple[int, ...]) -> Part:
        part = self.parts.get(sid)
        if part is None:
            name = self.rt.colls[cids[0]].cls.__name__
            raise UsageError(f"section {sid} of {name} is unknown here (a proxy kept from "
                             "another run?): make the section again")
        return part

    # ----------------------------------------------------------------- reductions
    def contribute(self, slot: Slot, section: Any, value: Any, reducer: Any,
                   target: Any) -> None:
        """``self.contribute(value, reducer, target, section=sec)`` in a member."""
        reducer = reducers.checked(reducer, value)
        check_target(target)
        self._contribute(slot, section, value, reducer, target)

    def allreduce(self, slot: Slot, section: Any, value: Any, reducer: Any) -> Future:
        """``await self.allreduce(value, reducer, section=sec)``: every member gets the
        result."""
        reducer = reducers.checked(reducer, value)
        fut = self.rt.future()
        self.waiting.setdefault((slot.key, section.sid), deque()).append(fut)
        self._contribute(slot, section, value, reducer, AllreduceResult(section))
        return fut

    def allreduce_result(self, slot: Slot, sid: int, value: Any) -> None:
        waiting = self.waiting[(slot.key, sid)]
        fut = waiting.popleft()
        if not waiting:
            del self.waiting[(slot.key, sid)]
        fut.send(value)

    def _contribute(self, slot: Slot, section: Any, value: Any, reducer: Any,
                    target: Any) -> None:
        if not isinstance(section, SectionProxy):
            raise UsageError(f"section= takes a section proxy (arr[0:8], arr.section([...])), "
                             f"not {section!r}")
        coll = slot.coll
        cids = section.cids
        if coll.cid not in cids:
            raise UsageError(f"{coll.cls.__name__}{list(slot.index)} is not in {section!r}: "
                             "that section holds elements of another collection")
        sid = section.sid
        r = slot.sections.get(sid, 0)
        slot.sections[sid] = r + 1
        if reducer is reducers.Reducer.gather:  # (in member order, as ret=True lists them)
            value = [(slot.index if len(cids) == 1 else (cids.index(coll.cid), slot.index),
                      value)]
        env = (SEC_RED, sid, coll.cid, r, value, 1, reducer, target, slot.index)
        home = coll.home(slot.index)
        if home == self.rt.pe:
            self.on_red(env)
        else:
            self.rt.send(home, env)

    def on_red(self, env: tuple) -> None:
        """A member's contribution (``index`` given) or a child's partial result (None)."""
        _, sid, cid, r, value, count, reducer, target, index = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        part = self.parts.get(sid)
        if part is None:  # its SEC_NEW is on the way
            self.early.setdefault(sid, []).append(env)
            return
        if index is not None and (cid, index) not in part.own_set:
            raise UsageError(f"{coll.cls.__name__}{list(index)} contributed to section {sid}, "
                             "which it is not a member of")
        if part.parent is not None and r in part.direct:
            rt.send(self.root(sid), (SEC_RED, sid, cid, r, value, count, reducer, target, None))
            return
        combine(part.reds, r, value, count, reducer, target)
        if part.reds[r][1] < part.expect:
            return
        value, count, reducer, target = part.reds.pop(r)
        if part.parent is not None:
            rt.send(part.parent, (SEC_RED, sid, cid, r, value, count, reducer, target, None))
            return
        deliver(rt, value, reducer, target, "section reduction target")

    # ----------------------------------------------------------------- checkpoints
    def saved(self) -> dict[str, Any]:
        """This PE's sections for a checkpoint (taken at quiescence: every tree is
        complete, nothing is in flight)."""
        return {"sections": {
            "count": self.count,
            "parts": {sid: {"cids": part.cids, "members": part.members, "mcast": part.mcast,
                            "rets": part.rets, "reds": part.reds}
                      for sid, part in self.parts.items()}}}

    def restore(self, infos: list[dict[str, Any]]) -> None:
        """After a restart (``infos``: every old PE's saved counters): rebuild the trees
        rooted here under the new number of PEs, with their saved numbers and partials."""
        rt = self.rt
        if rt.pe < len(infos):
            self.count = infos[rt.pe]["sections"]["count"]
        partials: dict[int, list[tuple[int, list[Any]]]] = {}
        defs = {}
        for info in infos:
            for sid, saved in info["sections"]["parts"].items():
                if saved["members"] is not None:
                    defs[sid] = saved
                partials.setdefault(sid, []).extend(saved["reds"].items())
        for sid, saved in defs.items():
            if self.root(sid) != rt.pe:
                continue
            for cid, index in saved["members"]:
                coll = rt.colls[cid]
                if coll.kind == "group" and index[0] >= rt.npes:
                    raise CheckpointError(f"a section of group {coll.cls.__name__} names "
                                          f"members beyond the {rt.npes} PEs of this run: "
                                          f"restart it on {len(infos)} PEs")
            direct = sorted({r for r, _ in partials.get(sid, ())})
            self.on_new((SEC_NEW, sid, saved["cids"], None, saved["members"], direct))
            part = self.parts[sid]
            part.mcast, part.rets = saved["mcast"], saved["rets"]
            for r, (value, count, reducer, target) in partials.get(sid, ()):
                combine(part.reds, r, value, count, reducer, target)


def _subtree(k: int, n: int) -> list[int]:
    """The positions of the subtree rooted at position ``k`` of an ``ARITY``-ary tree laid
    out level by level over ``n`` positions."""
    out: list[int] = []
    lo = hi = k
    while lo < n:
        out.extend(range(lo, min(hi, n - 1) + 1))
        lo, hi = lo * ARITY + 1, hi * ARITY + ARITY
    return out
