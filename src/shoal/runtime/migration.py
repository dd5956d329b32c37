"""Migration of array elements between PEs (Acun14, II-C: migratability; III-A: the load
balancer moves many at once).

An element travels with its queued messages, its sequence numbers (``expected`` from every
sender, ``out`` to every receiver), the messages that arrived ahead of their turn (``ooo``),
its reduction, broadcast and section counters, the messages its guarded methods hold
(:mod:`shoal.runtime.guards`) and its statistics (:meth:`Slot.pack`). So a message
between two elements is delivered exactly once and in the order it was sent, whatever
migrations happen meanwhile; broadcasts that reach the old PE after it left are replayed at
the new one from the collection's history.

:meth:`Migration.migrate_many` moves any number of elements: one pass over the scheduler
queue takes all their queued messages (O(k + queue)), and one envelope per destination PE
and ``CHUNK`` elements carries them. Chunks let the receiver unpack one while the sender
packs the next (the two PEs work in parallel): 10,000 elements with 100,000 queued messages
moved in 0.58 s as one envelope, 0.39 s in chunks of 250 (benchmarks/runtime_migration.py).
Single ``self.migrate(pe)`` calls are batched the same way: the first element that asks
queues one ``migrate_many`` behind the work already queued, and every element that asks
before it runs moves with it (a broadcast whose every element calls ``migrate()`` moves
them all in one pass: 10^4 elements took 16.8 s as 10^4 passes over the queue,
benchmarks/runtime_memory.py migrate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from shoal.errors import UsageError
from shoal.runtime.chare import Chare, attach
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.protocol import B_PRIO, BCAST, BCAST_FETCH, I_PRIO, MIGRATE

CHUNK = 250  # elements per MIGRATE envelope: the receiver unpacks one while the next is packed

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core, Residents


def packed(slot: Slot, queued: list[tuple]) -> tuple:
    """An element as it travels and as a checkpoint saves it: ``(cid, index, object,
    state)``, the state with its queued messages (:meth:`Slot.pack`)."""
    return (slot.coll.cid, slot.index, slot.obj, slot.pack(queued))


class Migration:
    """The migration manager of one PE."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.deferred: list[Slot] = []  # elements that asked to move, until the batch runs
        # the parts told of every element that leaves or arrives, in this order
        self.residents: list[Residents] = []
        # told how many elements of a balancing step arrived: (step, count)
        self.step_arrived: Callable[[int, int], None] = lambda step, count: None

    def subscribe(self, *parts: Residents) -> None:
        """Tell ``parts`` of every element that leaves or arrives from now on."""
        self.residents.extend(parts)

    def request(self, slot: Slot, pe: int) -> None:
        """``self.migrate(pe)`` in an element: move once its current call (and every
        suspended coroutine of it) has returned."""
        self._check(slot, pe)
        slot.migrate_to = pe
        slot.after = True

    def _check(self, slot: Slot, pe: int) -> None:
        if slot.coll.kind != "array":
            raise UsageError("only array elements migrate (group members stay on their PE)")
        if slot.pinned:
            raise UsageError(f"{slot.coll.cls.__name__}{list(slot.index)} is not migratable "
                             "(self.migratable = False, or setMigratable(False)): set "
                             "self.migratable = True before it moves")
        if not (isinstance(pe, int) and 0 <= pe < self.rt.npes):
            raise UsageError(f"migrate to a PE in [0, {self.rt.npes}) (got {pe!r})")

    def move_deferred(self, slot: Slot) -> None:
        """The element that asked to move has returned: it moves in the next batch, which
        the first such element of a turn queues behind the work already queued."""
        self.deferred.append(slot)
        if len(self.deferred) == 1:
            self.rt.push(0, self._move_batch, None, None)

    def move_first(self, slot: Slot, run: Callable[[Slot, tuple], None], env: tuple,
                   prio: int) -> None:
        """An element that asked to move is about to run ``env`` here: the batch moves now,
        ``env`` first among the element's queued messages (it never runs one here after it
        asked, as if it had moved at once)."""
        self.rt.queue.unpop(prio, run, slot, env)
        self._move_batch(None, None)

    def _move_batch(self, _a: None, _b: None) -> None:
        """Move every element that asked and is still here, in one ``migrate_many``
        (outside any balancing step)."""
        slots, self.deferred = self.deferred, []
        moves: dict[int, tuple[Slot, int]] = {}
        for slot in slots:  # (an element that ran again since it asked is listed again)
            dest = slot.migrate_to
            if dest is not None and slot.coll.local.get(slot.index) is slot:
                moves[id(slot)] = (slot, dest)
        for slot, _ in moves.values():
            slot.migrate_to = None
        self.migrate_many(moves.values())

    def migrate_many(self, moves: Iterable[tuple[Slot, int]], step: int = 0) -> dict[int, int]:
        """Move each local element ``slot`` to PE ``pe``. An element that is running, or has
        a suspended coroutine, moves when it returns (a coroutine's frame cannot travel);
        one whose destination is this PE stays. ``step``: the load-balancing step the moves
        belong to (its arrivals are counted). Returns how many left now, by destination."""
        rt = self.rt
        batch = self._ready(moves)
        if not batch:
            return {}
        taken = rt.queue.take(slot for slot, _ in batch)
        out: dict[int, list[tuple]] = {}
        bcasts: dict[int, list[tuple[int, int]]] = {}  # dest -> (cid, bcast) of each
        touched: dict[int, Collection] = {}
        for slot, dest in batch:
            coll = slot.coll
            queued = taken[id(slot)]  # INVOKE and BCAST envelopes, in queue order
            rt.processed += len(queued)  # they travel, and count again there
            del coll.local[slot.index]
            for part in self.residents:
                part.element_left(coll, slot, dest)
            state = slot.obj.__dict__  # (no copy of the dict when pickled)
            state.pop("_slot", None)
            state.pop("thisProxy", None)
            out.setdefault(dest, []).append(packed(slot, queued))
            bcasts.setdefault(dest, []).append((coll.cid, slot.bcast))
            touched[coll.cid] = coll
        for dest, items in out.items():
            self._send(dest, items, bcasts[dest], step)
        for coll in touched.values():
            for part in self.residents:
                part.elements_left(coll)
        return {dest: len(items) for dest, items in out.items()}

    def _ready(self, moves: Iterable[tuple[Slot, int]]) -> list[tuple[Slot, int]]:
        """The moves that happen now (the others wait for their element's return)."""
        rt = self.rt
        batch: list[tuple[Slot, int]] = []
        seen: set[int] = set()
        for slot, dest in moves:
            self._check(slot, dest)
            if slot.coll.local.get(slot.index) is not slot or id(slot) in seen:
                raise UsageError(f"element {list(slot.index)} of {slot.coll.cls.__name__} is "
                                 f"not on PE {rt.pe} (or is listed twice): it cannot move from "
                                 "here")
            seen.add(id(slot))
            if dest == rt.pe:
                slot.migrate_to = None
            elif slot.active or slot is rt.current:
                slot.migrate_to = dest
                slot.after = True
            else:
                batch.append((slot, dest))
        return batch

    def _send(self, dest: int, items: list[tuple], bcasts: list[tuple[int, int]],
              step: int) -> None:
        """Packed elements to PE ``dest``, ``CHUNK`` to an envelope; each envelope pins the
        broadcasts after the lowest ``bcast`` of its elements (``bcasts``: their ``(cid,
        bcast)``; see collectives.broadcast)."""
        rt = self.rt
        for k in range(0, len(items), CHUNK):
            lows: dict[int, int] = {}
            for cid, bcast in bcasts[k:k + CHUNK]:
                lows[cid] = min(lows.get(cid, bcast), bcast)
            token = rt.broadcasts.pin(lows)
            rt.send(dest, (MIGRATE, items[k:k + CHUNK], step, rt.pe, token))

    def on_migrate(self, env: tuple) -> None:
        _, items, step, src, token = env
        self.arrive(items, step, src, token)

    def arrive(self, items: list[tuple], step: int = 0, src: int | None = None,
               token: int | None = None) -> None:
        """Elements arrive (migrated from PE ``src`` in its envelope ``token``, or read from
        a checkpoint): each is rebuilt with its queue, then runs ``on_migrated()``; ``src``
        is told which broadcasts they lack here (see collectives.broadcast)."""
        rt = self.rt
        arrived: dict[int, list[Slot]] = {}
        for item in items:
            # (the collection is not here yet: neither are its broadcasts, none is lacking)
            coll = rt.collection(item[0], (MIGRATE, [item], 0, src, None))
            if coll is not None:
                arrived.setdefault(coll.cid, []).append(self._arrive(coll, item))
        fetches: list[tuple] | None = [] if token is not None else None
        for cid, slots in arrived.items():
            coll = rt.colls[cid]
            for part in self.residents:
                part.elements_arrived(coll, slots, fetches)
            if coll.cls.on_migrated is Chare.on_migrated:
                continue  # the class does not define it: nothing to run
            for slot in slots:
                saved = rt.enter(slot, "on_migrated")
                slot.obj.on_migrated()
                rt.leave(saved)
        if step:
            self.step_arrived(step, len(items))
        if src is not None and token is not None:
            rt.send(src, (BCAST_FETCH, token, fetches))

    def _arrive(self, coll: Collection, item: tuple) -> Slot:
        """Rebuild one element with its queued messages and those that may now follow."""
        rt = self.rt
        _, index, obj, state = item
        slot = Slot(coll, index)
        queued = slot.unpack(state)
        slot.obj = obj
        attach(obj, slot)
        coll.local[index] = slot
        coll.forward.pop(index, None)
        for part in self.residents:
            part.element_joined(coll, slot)
        if queued:
            bcast, invoke = rt.broadcasts.run_bcast, rt.run_invoke
            rt.queue.extend((qenv[B_PRIO], bcast, slot, qenv) if qenv[0] == BCAST
                            else (qenv[I_PRIO], invoke, slot, qenv) for qenv in queued)
        for src, seq in [k for k in slot.ooo if k[1] == slot.next_from(k[0])]:
            rt.accept(slot, slot.ooo.pop((src, seq)))
        if slot.held:  # (on_migrated may change what their conditions read)
            rt.guards.recheck_later(slot)
        return slot

