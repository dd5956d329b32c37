"""Where elements are and how they move (seed 002, II-C and II-D): insertion and deletion
while running, migration without losing, duplicating or reordering a message, and location
management (home PEs, forwarding pointers, caches corrected after a forward).

A mixin of :class:`~shoal.runtime.core.Runtime`; it uses the scheduler's queue and sends.
"""

from __future__ import annotations

import heapq
from collections import deque

from shoal.errors import UsageError
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.collectives import Collectives
from shoal.runtime.protocol import CREATE_ONE, DELETE, DELETED, HOME, INSERT, MIGRATE, SIZE
from shoal.runtime.proxy import CollectionProxy


class Mobility:
    """Insertion, deletion, migration and location updates of array elements."""

    def insert(self, proxy: CollectionProxy, index: tuple, args: tuple, pe) -> None:
        if pe is not None and not (isinstance(pe, int) and 0 <= pe < self.npes):
            raise UsageError(f"pe must lie in [0, {self.npes}) (got {pe!r})")
        slot = self.current
        start = slot.redno if slot is not None and slot.coll.cid == proxy.cid else None
        self._send(0, (INSERT, proxy.cid, index, args, pe, start))

    def _on_insert(self, env) -> None:
        _, cid, index, args, pe, start = env
        coll = self._coll(cid, env)
        if coll is None:
            return
        if start is None:
            start = coll.next_red
        coll.size_events.append((start, 1))
        coll.members += 1
        dest = coll.home(index) if pe is None else pe
        self._send(dest, (CREATE_ONE, cid, index, args, start, coll.bcast_count))

    def _on_create_one(self, env) -> None:
        _, cid, index, args, start, bcast = env
        coll = self._coll(cid, env)
        if coll is None:
            return
        if index in coll.local:
            raise UsageError(f"element {list(index)} of {coll.cls.__name__} already exists")
        slot = self._construct(coll, index, args)
        slot.redno = start
        slot.bcast = bcast
        self._arrived(coll, slot)

    def delete(self, proxy: CollectionProxy, index: tuple) -> None:
        self.invoke(proxy.cid, index, DELETE, (), None, 0, None)


    # ----------------------------------------------------------------- migration
    def request_migration(self, slot: Slot, pe: int) -> None:
        if slot.coll.kind != "array":
            raise UsageError("only array elements migrate (group members stay on their PE)")
        if not (isinstance(pe, int) and 0 <= pe < self.npes):
            raise UsageError(f"migrate to a PE in [0, {self.npes}) (got {pe!r})")
        slot.migrate_to = pe

    def _migrate_out(self, slot: Slot) -> None:
        dest = slot.migrate_to
        slot.migrate_to = None
        if dest == self.pe:
            return
        coll = slot.coll
        queued = self._extract(slot)
        del coll.local[slot.index]
        coll.forward[slot.index] = dest
        coll.cache.pop(slot.index, None)
        if coll.home(slot.index) == self.pe:
            coll.where[slot.index] = dest
        for r in coll.done:
            if slot.redno > r:
                coll.done[r] -= 1
        obj = slot.obj
        obj.__dict__.pop("_slot", None)
        self._send(dest, (MIGRATE, coll.cid, slot.index, obj, slot.pack(queued)))
        for r in list(coll.partial):
            self._red_check(coll, r)

    def _extract(self, slot: Slot) -> list:
        """Take the queued messages of a leaving element out of the queue, in order."""
        mine = [e for e in self.fifo if e[1] is slot]
        if mine:
            self.fifo = deque(e for e in self.fifo if e[1] is not slot)
        hmine = sorted(e for e in self.heap if e[3] is slot)
        if hmine:
            self.heap = [e for e in self.heap if e[3] is not slot]
            heapq.heapify(self.heap)
        self.processed += len(mine) + len(hmine)  # they travel, and count again there
        bcast = Collectives._run_bcast
        return [(e[0] is bcast, e[2]) for e in mine] + [(e[2] is bcast, e[4]) for e in hmine]

    def _on_migrate(self, env) -> None:
        _, cid, index, obj, state = env
        coll = self._coll(cid, env)
        if coll is None:
            return
        slot = Slot(coll, index)
        queued = slot.unpack(state)
        slot.obj = obj
        obj._slot = slot
        coll.local[index] = slot
        coll.forward.pop(index, None)
        for r in coll.done:
            if slot.redno > r:
                coll.done[r] += 1
        for is_bcast, qenv in queued:
            if is_bcast:
                self._push(qenv[6], Collectives._run_bcast, slot, qenv)
            else:
                self._push(qenv[8], self._invoke_kind, slot, qenv)
        for src, seq in [k for k in slot.ooo if k[1] == slot.expected.get(k[0], 0)]:
            self._accept(slot, slot.ooo.pop((src, seq)))
        self._arrived(coll, slot)
        self.current = slot
        self._work = (slot, "on_migrated")
        obj.on_migrated()
        self.current = None
        self._work = None

    def _arrived(self, coll: Collection, slot: Slot) -> None:
        """Tell the home where the element is; deliver what waited for it."""
        h = coll.home(slot.index)
        if h == self.pe:
            self._on_home((HOME, coll.cid, slot.index, self.pe))
        else:
            self.net.send(h, (HOME, coll.cid, slot.index, self.pe))
        self._catch_up(coll, slot)

    def _on_home(self, env) -> None:
        _, cid, index, pe = env
        coll = self._coll(cid, env)
        if coll is None:
            return
        if pe == self.pe:
            coll.where.pop(index, None)
        else:
            coll.where[index] = pe
        for waiting in coll.absent.pop(index, ()):
            self.processed += 1
            if pe == self.pe:
                self._on_invoke(waiting)
            else:
                self._send(pe, waiting)

    def _on_loc(self, env) -> None:
        _, cid, index, pe = env
        coll = self.colls.get(cid)
        if coll is not None and index not in coll.local:
            coll.cache[index] = pe

    def delete_here(self, slot: Slot) -> None:
        coll = slot.coll
        if coll.kind != "array":
            raise UsageError("only array elements can be deleted")
        queued = self._extract(slot)
        calls = sum(1 for is_bcast, _ in queued if not is_bcast)
        if calls:
            raise UsageError(f"element {list(slot.index)} of {coll.cls.__name__} was deleted "
                             f"with {calls} message(s) still to run")
        # broadcasts that reached it with its deletion are dropped: it ran those before
        last = min((env[2] for _, env in queued), default=slot.bcast + 1) - 1
        del coll.local[slot.index]
        for r in coll.done:
            if slot.redno > r:
                coll.done[r] -= 1
        self._send(coll.home(slot.index), (DELETED, coll.cid, slot.index))
        self._send(0, (SIZE, coll.cid, slot.redno, last, -1))
        for r in list(coll.partial):
            self._red_check(coll, r)

    def _on_deleted(self, env) -> None:
        coll = self.colls[env[1]]
        coll.where.pop(env[2], None)
        coll.deleted.add(env[2])

    def _on_size(self, env) -> None:
        _, cid, start, last, delta = env
        coll = self.colls[cid]
        coll.size_events.append((start, delta))
        coll.members += delta
        for r in list(coll.total):
            self._red_root(coll, r)
        for num in [num for num in coll.rets if num > last]:  # numbered, never run by it
            coll.rets[num][2] += delta
            self._ret_check(coll, num)

