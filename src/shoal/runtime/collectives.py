"""Collective operations of the runtime (seed 002, Section III): broadcasts along a tree
with replay for elements that migrate behind them, reductions combined per PE and then up a
tree, point-to-point channels, and quiescence detection.

A mixin of :class:`~shoal.runtime.core.Runtime`; it uses the scheduler's queue and sends.
"""

from __future__ import annotations

from collections import deque
from types import MethodType

from shoal.errors import ShoalError, UsageError
from shoal.runtime import reducers
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.futures import BroadcastReturn, Future
from shoal.runtime.protocol import (
    BCAST,
    CHANNEL,
    INVOKE,
    QD_ASK,
    QD_REPLY,
    QD_START,
    RED,
    children,
    parent,
)
from shoal.runtime.proxy import CollectionProxy, ElementProxy


class Collectives:
    """Broadcasts, reductions, channels and quiescence detection."""

    # ----------------------------------------------------------------- broadcasts
    def _on_bcast_req(self, env) -> None:
        _, cid, name, args, kwargs, prio, fut = env
        coll = self._coll(cid, env)
        if coll is None:
            return
        num = coll.bcast_count + 1
        if fut is not None:  # the root gathers the elements' return values
            coll.rets[num] = [fut, {}, coll.members]
            self._ret_check(coll, num)
        self._on_bcast((BCAST, cid, num, name, args, kwargs, prio, fut is not None))

    def _on_bcast(self, env) -> None:
        coll = self._coll(env[1], env)
        if coll is None:
            return
        for child in children(self.pe, 0, self.npes):
            self._send(child, env, shared=False)  # kept in history: not in a parent's segment
        num = env[2]
        coll.bcast_count = num
        coll.history.append(env)
        for slot in list(coll.local.values()):
            if slot.bcast < num:
                slot.bcast = num
                self._push(env[6], Collectives._run_bcast, slot, env)

    def _run_bcast(self, slot: Slot, env) -> None:
        _, cid, num, name, args, kwargs, prio, ret = env
        self._run_invoke(slot, (INVOKE, cid, slot.index, name, args, kwargs, None, 0, prio,
                                BroadcastReturn(cid, num) if ret else None, self.pe, 0))

    def _on_ret(self, env) -> None:
        _, cid, num, index, value = env
        coll = self.colls[cid]
        coll.rets[num][1][index] = value
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
            self.resolve(fut.pe, fut.fid, [values[i] for i in sorted(values)])

    def _catch_up(self, coll: Collection, slot: Slot) -> None:
        """Deliver the broadcasts an element missed while it migrated."""
        if slot.bcast >= coll.bcast_count:
            return
        missed = [env for env in coll.history if env[2] > slot.bcast]
        if not missed or missed[0][2] != slot.bcast + 1:
            raise ShoalError(f"element {list(slot.index)} of {coll.cls.__name__} missed more "
                             f"than {coll.history.maxlen} broadcasts while migrating")
        for env in missed:
            self._push(env[6], Collectives._run_bcast, slot, env)
        slot.bcast = coll.bcast_count


    # ----------------------------------------------------------------- reductions
    def contribute(self, slot: Slot, value, reducer, target) -> None:
        reducers.combiner(reducer)
        if not (isinstance(target, Future) or (
                type(target) is MethodType
                and isinstance(target.__self__, (ElementProxy, CollectionProxy)))):
            raise UsageError(f"a reduction's target is a Future or a proxy method, not "
                             f"{target!r}")
        coll = slot.coll
        r = slot.redno
        slot.redno += 1
        if reducer is reducers.Reducer.gather:
            value = [(slot.index, value)]
        if r in coll.done:
            coll.done[r] += 1
        self._red_add(coll, r, value, 1, reducer, target)

    def _red_add(self, coll: Collection, r: int, value, count: int, reducer, target) -> None:
        _combine(coll.partial, r, value, count, reducer, target)
        self._red_check(coll, r)

    def _red_check(self, coll: Collection, r: int) -> None:
        """Pass this PE's partial result of reduction ``r`` up the tree once every local
        element has contributed (late contributions follow in further partials)."""
        done = coll.done.get(r)
        if done is None:
            done = coll.done[r] = sum(1 for s in coll.local.values() if s.redno > r)
        if done < len(coll.local):
            return
        del coll.done[r]
        value, count, reducer, target = coll.partial.pop(r)
        if self.pe == 0:
            _combine(coll.total, r, value, count, reducer, target)
            self._red_root(coll, r)
        else:
            self._send(parent(self.pe, 0, self.npes),
                       (RED, coll.cid, r, value, count, reducer, target))

    def _on_red(self, env) -> None:
        _, cid, r, value, count, reducer, target = env
        coll = self._coll(cid, env)
        if coll is not None:
            self._red_add(coll, r, value, count, reducer, target)

    def _red_root(self, coll: Collection, r: int) -> None:
        total = coll.total.get(r)
        if total is None or total[1] < coll.expected(r):
            return
        del coll.total[r]
        coll.complete(r)
        value, _, reducer, target = total
        if reducer is reducers.Reducer.gather:
            value = [v for _, v in sorted(value, key=lambda iv: iv[0])]
        if isinstance(target, Future):
            self.resolve(target.pe, target.fid, value)
        else:
            saved, self.current = self.current, None
            target(value)
            self.current = saved


    # ----------------------------------------------------------------- channels
    def channel_send(self, key, remote: ElementProxy, value) -> None:
        self.invoke(remote.cid, remote.index, CHANNEL, (key, value), None, 0, None)

    def channel_recv(self, slot: Slot, key) -> Future:
        fut = self.future()
        box = slot.chan.get(key)
        if box:
            self.resolve(self.pe, fut.fid, box.popleft())
        else:
            slot.waiting.setdefault(key, deque()).append(fut)
        return fut

    def channel_data(self, slot: Slot, key, value) -> None:
        waiters = slot.waiting.get(key)
        if waiters:
            fut = waiters.popleft()
            self.resolve(fut.pe, fut.fid, value)
        else:
            slot.chan.setdefault(key, deque()).append(value)


    # ----------------------------------------------------------------- quiescence
    def quiescence(self) -> Future:
        """A future that resolves when no application message is in flight or queued
        anywhere (counting waves over a spanning tree, two equal in a row)."""
        fut = self.future()
        self._send(0, (QD_START, fut))
        return fut

    def _on_qd_start(self, env) -> None:
        self.qd_waiters.append(env[1])
        if len(self.qd_waiters) == 1:
            self.qd_last = None
            self.qd_delay = 5e-4
            self._qd_wave()

    def _qd_wave(self) -> None:
        self.qd_wave += 1
        self._on_qd_ask((QD_ASK, self.qd_wave))

    def _on_qd_ask(self, env) -> None:
        self.qd_wave = env[1]
        kids = children(self.pe, 0, self.npes)
        self.qd_acc = [0, 0, len(kids)]
        for child in kids:
            self.net.send(child, env)
        self._qd_reply_if_done()

    def _on_qd_reply(self, env) -> None:
        _, wave, created, processed = env
        if wave != self.qd_wave:
            return
        self.qd_acc[0] += created
        self.qd_acc[1] += processed
        self.qd_acc[2] -= 1
        self._qd_reply_if_done()

    def _qd_reply_if_done(self) -> None:
        acc = self.qd_acc
        if acc[2] > 0:
            return
        created = acc[0] + self.created
        processed = acc[1] + self.processed
        if self.pe != 0:
            self.net.send(parent(self.pe, 0, self.npes),
                          (QD_REPLY, self.qd_wave, created, processed))
            return
        # the counts of this PE include its own queue: PE 0 is idle only if it is empty
        now = (created, processed)
        if created == processed and now == self.qd_last:
            waiters, self.qd_waiters = self.qd_waiters, []
            for fut in waiters:
                self.resolve(fut.pe, fut.fid, None)
            return
        self.qd_last = now if created == processed else None
        self.qd_delay = min(2 * self.qd_delay, 0.05)
        self._after(self.qd_delay, self._qd_wave)


def _combine(store: dict, r: int, value, count: int, reducer, target) -> None:
    """Add ``count`` contributions worth ``value`` to the partial result ``store[r]``."""
    part = store.get(r)
    if part is None:
        store[r] = [value, count, reducer, target]
    else:
        part[0] = reducers.combiner(reducer)(part[0], value)
        part[1] += count
