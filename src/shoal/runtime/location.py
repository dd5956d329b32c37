"""Which elements exist and where they are (Acun14, II-C and II-D): creation of arrays and
groups, insertion and deletion while the program runs, and location management (home PEs,
forwarding pointers, caches corrected after a forward).

Every element has a home PE (its array's map) that always knows where it is: ``where`` in
the home's :class:`~shoal.runtime.collection.Collection` (absent means "at home"). A PE an
element left keeps a forwarding pointer (``forward``); other PEs cache locations
(``cache``), told by a ``LOC`` message when one of their messages had to be forwarded. A
message to an element that is not inserted yet waits at its home (``absent``).

An index may be inserted again after its element was deleted (adaptive mesh refinement does
it to every block that refines and later coarsens back): the home keeps what the deleted
element's sequence numbers had reached (``tombs``), and the new element continues them, so
that elements that wrote to the old one (or were written to by it) keep their order with
the new one. Every insertion's ``CREATE_ONE`` passes through the index's home on its way to
the element's PE: the home takes the index off its deleted list and records where the
element will be before the element exists, so a message that follows the new element's
creation (sent by its constructor's correspondents, or after a quiescence) never finds
the index deleted there.
"""

from __future__ import annotations

from types import CoroutineType
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime import building
from shoal.runtime.chare import attach
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.futures import Task
from shoal.runtime.maps import Singles, check_map, default_map, local_indices
from shoal.runtime.protocol import (
    B_NUM,
    CREATE,
    CREATE_ONE,
    DELETE,
    DELETED,
    DESTROY,
    DESTROY_ACK,
    HOME,
    I_HOPS,
    I_INDEX,
    I_METHOD,
    INSERT,
    INVOKE,
    OUTSIDE,
    SIZE,
    children,
    parent,
)
from shoal.runtime.proxy import CollectionProxy, ElementProxy, proxy_classes

if TYPE_CHECKING:
    from shoal.runtime.futures import Future
    from shoal.runtime.interfaces import Core

PE_BITS = 20  # a collection id is (number << PE_BITS) | creator PE: at most 2^20 PEs


class Location:
    """The location manager of one PE."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.ncoll = 0  # collections created by this PE
        # shoal.create: this PE's array of single chares per class, how many it made, and
        # the round-robin turn of those placed by the runtime
        self.singles: dict[type, CollectionProxy] = {}
        self.nsingle = 0
        self.turn = 0
        self.destroyed: set[int] = set()  # ids of destroyed collections (calls to them fail)
        self.unlinked = 0  # collections destroyed since local elements last forgot them
        # (root, cid) -> [children yet to answer, the future of the destruction at the root]
        self.destroying: dict[tuple[int, int], list[Any]] = {}

    # ----------------------------------------------------------------- collections
    # ------------------------------------------------------------- checkpoints
    def saved(self) -> dict[str, Any]:
        """This PE's part of its shard's first record: how many collections it created,
        the ids of destroyed ones, and each collection's deleted indices homed here."""
        rt = self.rt
        return {"ncoll": self.ncoll, "destroyed": self.destroyed,
                "colls": {cid: {"deleted": coll.deleted, "tombs": coll.tombs}
                          for cid, coll in rt.colls.items()}}

    def restore(self, infos: list[dict[str, Any]]) -> None:
        """After a restart from the records of every old PE (``infos``): no id of a
        destroyed collection is used again nor reaches a new one (a new PE's count starts
        at 0); each deleted index is known at its new home."""
        rt = self.rt
        if rt.pe < len(infos):
            self.ncoll = infos[rt.pe]["ncoll"]
        self.destroyed = set().union(*(info.get("destroyed", ()) for info in infos))
        for cid, coll in rt.colls.items():
            deleted = set().union(*(info["colls"][cid]["deleted"] for info in infos))
            coll.deleted = {index for index in deleted if coll.home(index) == rt.pe}
            tombs = {}  # (absent from the records of an older shoal)
            for info in infos:
                tombs.update(info["colls"][cid].get("tombs", {}))
            coll.tombs = {index: t for index, t in tombs.items() if coll.home(index) == rt.pe}

    def create(self, kind: str, cls: type, dims: Any, ndims: int | None, args: tuple,
               mapping: Any, at_sync: bool = False,
               pes: tuple[int, ...] | None = None) -> CollectionProxy:
        """Create an array (``dims`` dense, or ``ndims`` sparse) or a group on every PE;
        ``at_sync``: its elements take part in AtSync load balancing; ``pes``: a group's
        members are on those PEs only (sorted, checked by the caller)."""
        from shoal.runtime.chare import Chare

        if not (isinstance(cls, type) and issubclass(cls, Chare)):
            raise UsageError(f"{cls!r} is not a subclass of shoal.Chare")
        if dims is not None:
            dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
            if not all(isinstance(d, int) and d > 0 for d in dims):
                raise UsageError(f"dims must be positive integers, not {dims!r}")
            ndims = len(dims)
        if not (isinstance(ndims, int) and 1 <= ndims <= 6):
            raise UsageError(f"an array has 1 to 6 dimensions (got {ndims!r}): give dims=(...) "
                             "or ndims=k for an array filled by insertion")
        rt = self.rt
        if mapping is None:
            mapping = default_map(dims, rt.nodes.shares)
        else:
            check_map(mapping, dims)
        cid = self._new_id()
        proxy_classes(cls)  # a clash of names is the caller's error, raised here
        self.on_create((CREATE, rt.pe, cid, kind, cls, ndims, dims, mapping, args, at_sync,
                        pes))
        return rt.colls[cid].proxy

    def single(self, cls: type, args: tuple, pe: int | None) -> ElementProxy:
        """``shoal.create``: a single chare on ``pe``, or (None) on the next PE in turn from
        this one (round robin: the k-th placed by PE p goes to PE (p + k) mod P). It is
        element ``(pe, this PE, n)`` of this PE's array of ``cls``'s single chares, made
        with the first one (one creation down the tree per class and creating PE); after
        that a chare costs one message, ``CREATE_ONE`` to its PE, which is its home."""
        rt = self.rt
        if pe is None:
            pe = (rt.pe + self.turn) % rt.npes
            self.turn += 1
        elif not (isinstance(pe, int) and 0 <= pe < rt.npes):
            raise UsageError(f"pe must lie in [0, {rt.npes}) or be None (placed in turn), "
                             f"not {pe!r}")
        proxy = self.singles.get(cls)
        if proxy is None:
            proxy = self.singles[cls] = self.create("array", cls, None, 3, (), Singles())
        index = (pe, rt.pe, self.nsingle)
        self.nsingle += 1
        rt.send(pe, (CREATE_ONE, proxy.cid, index, args, 0, 0, pe, True, None))
        return proxy[index]

    def _new_id(self) -> int:
        """A collection id no other collection has had or will have: this PE's count of
        its collections above its PE number (Python ints do not wrap; skipping the ids of
        collections restored from a checkpoint of the former layout, PE above count)."""
        rt = self.rt
        if rt.npes > 1 << PE_BITS:
            raise UsageError(f"collections need at most {1 << PE_BITS} PEs (got {rt.npes})")
        while True:
            cid = (self.ncoll << PE_BITS) | rt.pe
            self.ncoll += 1
            if cid not in rt.colls and cid not in self.destroyed:
                return cid

    def on_create(self, env: tuple) -> None:
        _, root, cid, kind, cls, ndims, dims, mapping, args, at_sync, pes = env
        rt = self.rt
        for child in children(rt.pe, root, rt.npes):
            rt.send(child, env)
        if cid in self.destroyed:  # destroyed before its creation reached this PE
            return
        coll = Collection(cid, kind, cls, ndims, dims, mapping, rt.npes, at_sync, pes)
        rt.colls[cid] = coll
        if at_sync:
            rt.balancer.prepare()
        if dims is not None and (pes is None or rt.pe in pes):
            for index in local_indices(mapping, dims, rt.npes, rt.pe):
                self.construct(coll, index, args)
        for early in rt.early.pop(cid, ()):
            rt.handlers[early[0]](early)

    def construct(self, coll: Collection, index: tuple, args: tuple, redno: int = 0,
                  bcast: int = 0, tomb: tuple | None = None) -> Slot:
        """Build element ``index`` here: its slot, then ``cls(*args)`` as the current element.
        ``redno`` and ``bcast``: the first reduction it takes part in and the last broadcast
        before it (set first, so that its constructor may contribute); ``tomb``: the
        sequence numbers a deleted element of the same index had reached (expected from
        each sender, sent to each receiver), which this one continues. An ``async def
        __init__`` runs as the element's coroutine, its messages held until it returns
        (:mod:`shoal.runtime.building`)."""
        slot = Slot(coll, index)
        slot.redno = redno
        slot.bcast = bcast
        if tomb is not None:
            expected, sent = tomb
            slot.expected = {src: [n] for src, n in expected.items()}
            slot.out = {dst: [n, 0, n, 0] for dst, n in sent.items()}
        obj = coll.cls.__new__(coll.cls)
        attach(obj, slot)
        slot.obj = obj
        coll.local[index] = slot
        saved = self.rt.enter(slot, "__init__")
        coro = obj.__init__(*args)
        self.rt.leave(saved)
        if type(coro) is CoroutineType:
            building.start(self.rt, slot, coro)
        return slot

    # ----------------------------------------------------------------- insertion, deletion
    def insert(self, proxy: CollectionProxy, index: tuple, args: tuple, pe: int | None) -> None:
        """Ask the root to insert element ``index`` (on ``pe``, or at its home).

        An element that inserts into its own array makes the new element take part in its
        own next reduction, so the root must count the new member before that reduction
        can complete: the request goes up the reduction tree, ahead of every partial result
        this PE sends after it (MPI keeps the order between two PEs, and each PE on the way
        forwards it at once), and on PE 0 it is handled at once."""
        rt = self.rt
        if pe is not None and not (isinstance(pe, int) and 0 <= pe < rt.npes):
            raise UsageError(f"pe must lie in [0, {rt.npes}) (got {pe!r})")
        if proxy.dims is not None and _outside(index, proxy.dims):
            coll = rt.colls.get(proxy.cid)
            if coll is not None:
                coll.outside = True  # this PE may name it at once (others: on_outside)
        slot = rt.current
        start = slot.redno if slot is not None and slot.coll.cid == proxy.cid else None
        self.on_insert((INSERT, proxy.cid, index, args, pe, start))

    def on_insert(self, env: tuple) -> None:
        """On the way up the tree: pass it on; at the root: number the new member for
        reductions and broadcasts, then create it."""
        rt = self.rt
        if rt.pe != 0:
            rt.send(parent(rt.pe, 0, rt.npes), env)
            return
        _, cid, index, args, pe, start = env
        coll = self.rt.collection(cid, env)
        if coll is None:
            return
        if start is None:
            start = coll.next_red
        coll.size_events.append((start, 1))
        coll.members += 1
        if coll.dims is not None and not coll.announced and _outside(index, coll.dims):
            coll.announced = True
            self.on_outside((OUTSIDE, cid))
        home = coll.home(index)
        dest = home if pe is None else pe
        self.rt.send(home, (CREATE_ONE, cid, index, args, start, coll.bcast_count, dest, False,
                            None))

    def on_create_one(self, env: tuple) -> None:
        """At the home (``seen`` False): the index is no longer deleted, the element will
        be on ``dest`` (messages that waited for it go there, behind this envelope), and
        it takes the sequence numbers of the index's deleted element; then on ``dest``:
        the element is made."""
        _, cid, index, args, start, bcast, dest, seen, tomb = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        if not seen:
            coll.deleted.discard(index)
            tomb = coll.tombs.pop(index, None)
            if dest != rt.pe:
                coll.where[index] = dest
                rt.send(dest, (CREATE_ONE, cid, index, args, start, bcast, dest, True, tomb))
                for waiting in coll.absent.pop(index, ()):
                    rt.processed += 1
                    rt.send(dest, waiting)
                return
        if index in coll.local:
            raise UsageError(f"element {list(index)} of {coll.cls.__name__} already exists")
        slot = self.construct(coll, index, args, start, bcast, tomb)
        self.elements_arrived(coll, [slot], None)

    def delete(self, proxy: CollectionProxy, index: tuple) -> None:
        """Send element ``index`` its deletion (ordered after the caller's earlier messages)."""
        self.rt.invoke((proxy.cid, index), DELETE, (), None, 0, None)

    def delete_here(self, slot: Slot) -> None:
        """The element runs its deletion: it leaves; the home and the root are told."""
        rt = self.rt
        coll = slot.coll
        if coll.kind != "array":
            raise UsageError("only array elements can be deleted")
        queued = rt.queue.take((slot,))[id(slot)]
        rt.processed += len(queued)
        calls = sum(1 for env in queued if env[0] == INVOKE) + len(slot.held)
        if calls:
            raise UsageError(f"element {list(slot.index)} of {coll.cls.__name__} was deleted "
                             f"with {calls} message(s) still to run (queued, or held by a "
                             "guarded method)")
        # broadcasts that reached it with its deletion are dropped: it ran those before
        last = min((env[B_NUM] for env in queued), default=slot.bcast + 1) - 1
        del coll.local[slot.index]
        rt.reductions.element_left(coll, slot)
        expected = {src: cell[0] for src, cell in slot.expected.items()}
        sent = {dst: v[0] for dst, v in slot.out.items()}
        rt.send(coll.home(slot.index), (DELETED, coll.cid, slot.index, expected, sent))
        rt.send(0, (SIZE, coll.cid, slot.redno, last, -1))
        rt.reductions.elements_left(coll)

    def destroy(self, proxy: CollectionProxy) -> Future:
        """Destroy a collection on every PE: its elements, what it holds and the messages
        to it still queued or in flight are dropped. A future resolved once every PE has
        done so; afterwards a call to it is an error."""
        if not isinstance(proxy, CollectionProxy):
            raise UsageError(f"destroy a collection by its proxy (an array, group or "
                             f"shoal.create's chare's collection), not {proxy!r}")
        if proxy.cid in self.destroyed:
            raise self.gone(proxy.cid)
        fut = self.rt.future()
        self.on_destroy((DESTROY, self.rt.pe, proxy.cid, fut))
        return fut

    def gone(self, cid: int) -> UsageError:
        """The error of a call to a destroyed collection."""
        return UsageError(f"collection {cid} was destroyed (shoal.destroy): nothing can be "
                          "sent to it any more")

    def on_destroy(self, env: tuple) -> None:
        """Down the tree from the PE that destroys: drop the collection here; answer the
        parent once the children have."""
        _, root, cid, fut = env
        rt = self.rt
        kids = children(rt.pe, root, rt.npes)
        for child in kids:
            rt.send(child, env)
        self._drop(cid)
        self.destroying[root, cid] = [len(kids), fut]
        self._destroyed_below(root, cid)

    def on_destroy_ack(self, env: tuple) -> None:
        _, root, cid = env
        self.destroying[root, cid][0] -= 1
        self._destroyed_below(root, cid)

    def _destroyed_below(self, root: int, cid: int) -> None:
        rt = self.rt
        left, fut = self.destroying[root, cid]
        if left:
            return
        del self.destroying[root, cid]
        if rt.pe == root:
            rt.resolve(fut.pe, fut.fid, None)
        else:
            rt.send(parent(rt.pe, root, rt.npes), (DESTROY_ACK, root, cid))

    def _drop(self, cid: int) -> None:
        """Forget collection ``cid`` on this PE (its work counted as done)."""
        rt = self.rt
        self.destroyed.add(cid)
        rt.early.pop(cid, None)  # (counted when they arrived)
        for dst in [dst for dst in rt.pe_out if dst[0] == cid]:
            del rt.pe_out[dst]
        rt.broadcasts.forget(cid)
        coll = rt.colls.pop(cid, None)
        if coll is None:
            return
        slots = set(map(id, coll.local.values()))
        if slots:
            rt.processed += sum(map(len, rt.queue.take(coll.local.values()).values()))
            for fut in rt.futures.values():  # suspended coroutines of its elements
                if fut.waiters:
                    fut.waiters = [t for t in fut.waiters  # (iwait's callbacks stay)
                                   if not (isinstance(t, Task) and id(t.slot) in slots)]
            coll.local.clear()  # (an element that asked to move stays where it is)
        rt.processed += sum(map(len, coll.absent.values()))  # (counted at the home)
        if rt.pe == 0 and coll.at_sync:
            rt.balancer.collection_destroyed(cid)
        self.unlinked += 1
        if self.unlinked > sum(len(c.local) for c in rt.colls.values()) >> 10:
            self.forget_links()  # a pass over every local element per 1024 of them

    def forget_links(self) -> None:
        """Local elements forget what they recorded about the elements of destroyed
        collections: the messages and bytes sent to them (the communication graph of
        ``shoal.stats()``, of load balancing and of checkpoints; also the sequence numbers,
        which nothing uses once sends to them are refused) and the channels made to them.
        Run after destructions (every one while a PE holds fewer than 1024 elements) and
        before those graphs are read; an element that migrates from a PE that had not
        heard of a destruction yet brings its records, forgotten here at the next pass.
        What elements expect from senders of destroyed collections stays: their messages
        may still be on the way, and must arrive in order."""
        self.unlinked = 0
        gone = self.destroyed
        if not gone:
            return
        for coll in self.rt.colls.values():
            for slot in coll.local.values():
                out, chans = slot.out, slot.chans
                for dst in [dst for dst in out if dst[0] in gone] if out else ():
                    del out[dst]
                for key in [key for key in chans if key[0][0] in gone] if chans else ():
                    del chans[key]

    def on_outside(self, env: tuple) -> None:
        """Down the tree from the root: the dense array has elements outside its shape
        (sent once per array, at the first such insertion)."""
        _, cid = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        coll.outside = True
        for child in children(rt.pe, 0, rt.npes):
            rt.send(child, env)

    def on_deleted(self, env: tuple) -> None:
        """At the home: the element is gone; what its sequence numbers reached is kept for
        an element inserted at its index later."""
        _, cid, index, expected, sent = env
        coll = self.rt.colls.get(cid)
        if coll is None:  # destroyed
            return
        coll.where.pop(index, None)
        coll.deleted.add(index)
        coll.tombs[index] = (expected, sent)

    def on_size(self, env: tuple) -> None:
        """At the root: a member left from reduction ``start`` on, after running broadcast
        ``last``; the reductions and broadcast gathers that counted it count one less."""
        _, cid, start, last, delta = env
        rt = self.rt
        coll = rt.colls.get(cid)
        if coll is None:  # destroyed
            return
        coll.size_events.append((start, delta))
        coll.members += delta
        rt.reductions.size_changed(coll)
        rt.broadcasts.size_changed(coll, last, delta)

    # ----------------------------------------------------------------- locations
    def elements_arrived(self, coll: Collection, slots: list[Slot],
                         fetches: list[tuple] | None) -> None:
        """Elements were created or migrated here: deliver the broadcasts each missed (those
        forgotten here go into ``fetches``, see ``Broadcasts.catch_up``) and tell their homes
        (one message per home PE)."""
        rt = self.rt
        homes: dict[int, list[tuple]] = {}
        for slot in slots:
            rt.broadcasts.catch_up(coll, slot, fetches)
            homes.setdefault(coll.home(slot.index), []).append(slot.index)
        for h, indices in homes.items():
            if h == rt.pe:
                self.on_home((HOME, coll.cid, indices, rt.pe))
            else:
                rt.net.send(h, (HOME, coll.cid, indices, rt.pe))

    def element_left(self, coll: Collection, slot: Slot, dest: int) -> None:
        """An element migrates from here to ``dest``: leave a forwarding pointer."""
        coll.forward[slot.index] = dest
        coll.cache.pop(slot.index, None)
        if coll.home(slot.index) == self.rt.pe:
            coll.where[slot.index] = dest

    def elements_left(self, coll: Collection) -> None:
        """(Nothing more once they have left: each left its pointer.)"""

    def element_joined(self, coll: Collection, slot: Slot) -> None:
        """(Its home learns where it is once the batch has arrived.)"""

    def on_home(self, env: tuple) -> None:
        """At the home: the elements are on ``pe`` now; messages that waited for them go."""
        _, cid, indices, pe = env
        rt = self.rt
        coll = rt.collection(cid, env)
        if coll is None:
            return
        for index in indices:
            if pe == rt.pe:
                coll.where.pop(index, None)
            else:
                coll.where[index] = pe
            for waiting in coll.absent.pop(index, ()):
                rt.processed += 1
                if pe == rt.pe:
                    rt.on_invoke(waiting)
                else:
                    rt.send(pe, waiting)

    def on_loc(self, env: tuple) -> None:
        _, cid, index, pe = env
        coll = self.rt.colls.get(cid)
        if coll is not None and index not in coll.local:
            coll.cache[index] = pe

    def route(self, coll: Collection, env: tuple) -> None:
        """Forward an ``INVOKE`` for an element that is not here."""
        rt = self.rt
        index = env[I_INDEX]
        dest = coll.forward.get(index)
        if dest is None:
            h = coll.home(index)
            if h != rt.pe:
                dest = h
            elif index in coll.where:
                dest = coll.where[index]
            elif index in coll.deleted:
                raise UsageError(f"a message ({env[I_METHOD]!r}) was sent to element "
                                 f"{list(index)} of {coll.cls.__name__} after it was deleted")
            else:  # not inserted yet: the home keeps it until the element exists
                rt.created += 1
                coll.absent.setdefault(index, []).append(env)
                return
        rt.send(dest, (*env[:I_HOPS], env[I_HOPS] + 1))


def _outside(index: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    return len(index) != len(dims) or not all(0 <= i < d for i, d in zip(index, dims,
                                                                          strict=True))
