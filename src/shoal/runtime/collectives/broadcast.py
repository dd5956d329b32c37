"""Broadcasts to every element of an array or group (Acun14, Section III).

A broadcast goes to the root (PE 0), which numbers it, then down the spanning tree of PEs;
each PE runs it on its local elements. An element runs a collection's broadcasts once each
and in order of their numbers (``Slot.bcast``: the last one it was given), whatever
migrations happen; an inserted element starts after the last one numbered before its
insertion. With ``ret=True`` the root gathers every element's return value and resolves the
caller's future with them in index order; with ``awaitable=True`` it gathers only that each
element ran it, and resolves the future to None. If an element raised, the future carries
the failure of the lowest such index (:mod:`shoal.runtime.failure`), raised where it is
awaited; with ``ret=True, return_exceptions=True`` the list instead, each failing element's
exception in its place.

PEs receive broadcasts at different times, so an element that migrates may arrive ahead of
or behind its new PE. Behind: the new PE replays the ones it missed from its ``history`` of
the collection's broadcasts. That history keeps the last ``HISTORY`` broadcasts, and more
while elements that left the PE may need them: an element that left a PE far behind (300
broadcasts in a loop from ``main``: PE 0 numbers all of them before the other PEs have
received the first) may arrive where the ones it needs are gone. So:

- every ``MIGRATE`` envelope pins, at the PE it leaves, the history after the lowest
  ``bcast`` of its elements (``pins``: no broadcast it may need is forgotten there);
- the receiving PE answers each envelope with a ``BCAST_FETCH``: for each element whose
  broadcasts it cannot replay all, the range it lacks, and the element keeps the newer
  ones it has in ``early``; the PE left then sends the element the range (once it has
  received it, through the element's location: the ``_shoal_replay`` entry method), and
  releases the pin.

Every broadcast after an element's ``bcast`` is thus in its queue, in ``early``, in a replay
on its way, or still to reach its PE; ``deliver`` runs them in order and drops duplicates.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError
from shoal.runtime.collection import HISTORY, Collection, Slot
from shoal.runtime.failure import gathered, listed
from shoal.runtime.futures import BroadcastReturn
from shoal.runtime.protocol import (
    B_NUM,
    B_PRIO,
    BCAST,
    INVOKE,
    KEEP,
    REPLAY,
    RET_LIST,
    children,
)

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core


class Broadcasts:
    """The broadcast manager of one PE."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.run_bcast = self._run  # the queue entry (compared by identity)
        self.tokens = 0  # MIGRATE envelopes sent from here
        self.pins: dict[int, dict[int, int]] = {}  # token -> {cid: lowest bcast that left}
        # cid -> replays waiting for broadcasts to reach this PE: [token, index, lo, hi]
        self.waiting: dict[int, list[list[Any]]] = {}
        self.replays = 0  # replays sent from here (statistics)

    def on_bcast_req(self, env: tuple) -> None:
        """At the root: number the broadcast, open its gather if the caller waits for it
        (``ret``: RET_VALUES or RET_DONE), send it."""
        _, cid, name, args, kwargs, prio, fut, ret = env
        coll = self.rt.collection(cid, env)
        if coll is None:
            return
        num = coll.bcast_count + 1
        if fut is not None:  # the root gathers the elements' return values
            coll.rets[num] = [fut, {}, coll.members, ret]
            self._ret_check(coll, num)
        self.on_bcast((BCAST, cid, num, name, args, kwargs, prio, ret))

    def on_bcast(self, env: tuple) -> None:
        _, cid, num, _name, _args, _kwargs, prio, _ret = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        for child in children(rt.pe, 0, rt.npes):
            rt.send(child, env, shared=False)  # kept in history: not in a parent's segment
        coll.bcast_count = num
        history = coll.history
        history.append(env)
        if len(history) > HISTORY:
            self._trim(coll)
        for slot in list(coll.local.values()):
            if slot.bcast == num - 1 and slot.early is None:
                slot.bcast = num
                rt.push(prio, self.run_bcast, slot, env)
            elif slot.bcast < num:
                self.deliver(slot, env)
        if self.waiting.get(cid):
            self._serve(coll)

    def deliver(self, slot: Slot, env: tuple) -> None:
        """Give ``slot`` broadcast ``env`` in its turn: queued if it is the next one (with
        those that came early after it), kept in ``early`` if one before it is missing,
        dropped if it had it."""
        num = env[B_NUM]
        if num <= slot.bcast:
            return
        early = slot.early
        if num != slot.bcast + 1:
            if early is None:
                early = slot.early = {}
            early[num] = env
            return
        push, run = self.rt.push, self.run_bcast
        push(env[B_PRIO], run, slot, env)
        if early:
            while num + 1 in early:
                num += 1
                nxt = early.pop(num)
                push(nxt[B_PRIO], run, slot, nxt)
            if not early:
                slot.early = None
        slot.bcast = num

    def _trim(self, coll: Collection) -> None:
        """Forget the oldest broadcasts beyond the last ``HISTORY``, but none that an
        element which left with a pin may need."""
        low = min((p[coll.cid] for p in self.pins.values() if coll.cid in p),
                  default=coll.bcast_count)
        history = coll.history
        while len(history) > HISTORY and history[0][B_NUM] <= low:
            history.popleft()

    def _run(self, slot: Slot, env: tuple) -> None:
        _, cid, num, name, args, kwargs, prio, ret = env
        if slot.migrate_to is not None and not slot.active:  # it asked to move: it moves
            self.rt.migration.move_first(slot, self.run_bcast, env, prio)  # first
            return
        self.rt._run_invoke(slot, (INVOKE, cid, slot.index, name, args, kwargs, None, 0, prio,
                                   BroadcastReturn(cid, num, ret in KEEP) if ret else None,
                                   self.rt.pe, 0))

    def catch_up(self, coll: Collection, slot: Slot, fetches: list[tuple] | None) -> None:
        """Deliver the broadcasts an element that arrived here missed; those this PE has
        forgotten go into ``fetches`` as ``(cid, index, after, upto)``, for the PE it came
        from (None: it was inserted; such a gap would mean an insertion overtaken by more
        than ``HISTORY`` broadcasts)."""
        if slot.bcast >= coll.bcast_count:
            return
        history = coll.history
        first = history[0][B_NUM] if history else coll.bcast_count + 1
        if first > slot.bcast + 1:
            if fetches is None:
                raise ShoalError(f"element {list(slot.index)} of {coll.cls.__name__} came "
                                 f"after broadcast {slot.bcast} to PE {self.rt.pe}, which "
                                 f"has forgotten broadcasts up to {first - 1}")
            fetches.append((coll.cid, slot.index, slot.bcast, first - 1))
        for env in islice(history, max(0, slot.bcast + 1 - first), None):
            self.deliver(slot, env)

    # ----------------------------------------------------------------- replays
    def pin(self, lows: dict[int, int]) -> int:
        """A ``MIGRATE`` envelope leaves with elements whose lowest ``bcast`` per collection
        is ``lows``: keep what they may need; the envelope's token."""
        self.tokens += 1
        self.pins[self.tokens] = lows
        return self.tokens

    def on_fetch(self, env: tuple) -> None:
        """At the PE a ``MIGRATE`` envelope left: its receiver's answer, the broadcasts its
        elements lack; sent as soon as this PE has them, then the pin is released."""
        _, token, fetches = env
        for cid, index, lo, hi in fetches:
            if cid in self.rt.colls:  # (not destroyed meanwhile)
                self.waiting.setdefault(cid, []).append([token, index, lo, hi])
        for cid in {f[0] for f in fetches if f[0] in self.waiting}:
            self._serve(self.rt.colls[cid])
        if not any(w[0] == token for ws in self.waiting.values() for w in ws):
            self.pins.pop(token, None)

    def _serve(self, coll: Collection) -> None:
        """Send the replays this PE now has every broadcast of."""
        rt = self.rt
        waiting = self.waiting[coll.cid]
        done = [w for w in waiting if w[3] <= coll.bcast_count]
        if not done:
            return
        history = coll.history
        first = history[0][B_NUM] if history else coll.bcast_count + 1
        for _, index, lo, hi in done:
            # (what it has: the element lacked broadcasts here too if it came behind this
            # PE's history, and those come from the PE before)
            start = max(0, lo + 1 - first)
            envs = list(islice(history, start, max(start, hi + 1 - first)))
            rt.invoke((coll.cid, index), REPLAY, (envs,), None, 0, None)
            self.replays += 1
        self.waiting[coll.cid] = rest = [w for w in waiting if w[3] > coll.bcast_count]
        if not rest:
            del self.waiting[coll.cid]
        tokens = {w[0] for ws in self.waiting.values() for w in ws}
        for token in {w[0] for w in done} - tokens:
            self.pins.pop(token, None)

    def forget(self, cid: int) -> None:
        """Collection ``cid`` was destroyed: no replay of it waits here."""
        self.waiting.pop(cid, None)

    def replay(self, slot: Slot, envs: list[tuple]) -> None:
        """The broadcasts an element lacked, from the PE it left."""
        for env in envs:
            self.deliver(slot, env)

    # ----------------------------------------------------------------- ret=True
    def on_ret(self, env: tuple) -> None:
        _, cid, num, index, value = env
        coll = self.rt.colls.get(cid)
        if coll is None:  # destroyed
            return
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
        fut, values, members, ret = coll.rets[num]
        if len(values) == members:
            del coll.rets[num]
            if ret == RET_LIST:  # return_exceptions=True: failures in their places
                result: Any = listed(values, sorted(values))
            else:
                result = gathered(values) or ([values[i] for i in sorted(values)]
                                              if ret in KEEP else None)
            self.rt.resolve(fut.pe, fut.fid, result)
