"""Broadcasts to every element of an array or group (seed 002, Section III).

A broadcast goes to the root (PE 0), which numbers it, then down the spanning tree of PEs;
each PE runs it on its local elements. Every PE keeps the last ``HISTORY`` broadcasts of a
collection so that an element that migrates in after a broadcast passed replays the ones it
missed (it knows the number of the last one it ran), and an inserted element starts after
the last one numbered before its insertion. With ``ret=True`` the root gathers every
element's return value and resolves the caller's future with them in index order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.errors import ShoalError
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.futures import BroadcastReturn
from shoal.runtime.protocol import B_NUM, B_PRIO, BCAST, INVOKE, children

if TYPE_CHECKING:
    from shoal.runtime.pe import Runtime


class Broadcasts:
    """The broadcast manager of one PE."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.run_bcast = self._run  # the queue entry (compared by identity)

    def on_bcast_req(self, env: tuple) -> None:
        """At the root: number the broadcast, open its gather if ``ret=True``, send it."""
        _, cid, name, args, kwargs, prio, fut = env
        coll = self.rt.collection(cid, env)
        if coll is None:
            return
        num = coll.bcast_count + 1
        if fut is not None:  # the root gathers the elements' return values
            coll.rets[num] = [fut, {}, coll.members]
            self._ret_check(coll, num)
        self.on_bcast((BCAST, cid, num, name, args, kwargs, prio, fut is not None))

    def on_bcast(self, env: tuple) -> None:
        _, cid, num, _name, _args, _kwargs, prio, _ret = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        for child in children(rt.pe, 0, rt.npes):
            rt.send(child, env, shared=False)  # kept in history: not in a parent's segment
        coll.bcast_count = num
        coll.history.append(env)
        for slot in list(coll.local.values()):
            if slot.bcast < num:
                slot.bcast = num
                rt.push(prio, self.run_bcast, slot, env)

    def _run(self, slot: Slot, env: tuple) -> None:
        _, cid, num, name, args, kwargs, prio, ret = env
        if slot.migrate_to is not None and not slot.active:  # it asked to move: it moves
            self.rt.migration.move_first(slot, self.run_bcast, env, prio)  # first
            return
        self.rt._run_invoke(slot, (INVOKE, cid, slot.index, name, args, kwargs, None, 0, prio,
                                   BroadcastReturn(cid, num) if ret else None, self.rt.pe, 0))

    def catch_up(self, coll: Collection, slot: Slot) -> None:
        """Deliver the broadcasts an element missed while it migrated."""
        if slot.bcast >= coll.bcast_count:
            return
        missed = [env for env in coll.history if env[B_NUM] > slot.bcast]
        if not missed or missed[0][B_NUM] != slot.bcast + 1:
            raise ShoalError(f"element {list(slot.index)} of {coll.cls.__name__} missed more "
                             f"than {coll.history.maxlen} broadcasts while migrating")
        for env in missed:
            self.rt.push(env[B_PRIO], self.run_bcast, slot, env)
        slot.bcast = coll.bcast_count

    # ----------------------------------------------------------------- ret=True
    def on_ret(self, env: tuple) -> None:
        _, cid, num, index, value = env
        coll = self.rt.colls[cid]
        coll.rets[num][1][index] = value
        self._ret_check(coll, num)

    def size_changed(self, coll: Collection, last: int, delta: int) -> None:
        """A member left after running broadcast ``last``: the gathers of later broadcasts
        wait for one value less."""
        for num in [num for num in coll.rets if num > last]:  # numbered, never run by it
            coll.rets[num][2] += delta
            self._ret_check(coll, num)

    def _ret_check(self, coll: Collection, num: int) -> None:
        """Resolve the future of broadcast ``num`` (at the root) once every element that
        runs it has returned: the values in index order. The count of those elements is
        taken when the root numbers the broadcast (elements inserted later run only later
        broadcasts) and lowered when an element is reported deleted before running it (a
        report may come late: until then the count is too high, never too low)."""
        fut, values, members = coll.rets[num]
        if len(values) == members:
            del coll.rets[num]
            self.rt.resolve(fut.pe, fut.fid, [values[i] for i in sorted(values)])
