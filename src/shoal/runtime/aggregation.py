"""Aggregation of fine-grained items over a virtual mesh of PEs (Acun14, Section III-F:
TRAM, the Topological Routing and Aggregation Module).

``agg = shoal.Aggregator(proxy, "method")`` makes a stream of items to the elements of an
array or group; ``agg.send(index, item)`` buffers one item, and on arrival the element's
``method(item)`` runs once per item. Items to the same next PE travel together as one
``AGG`` message: a message costs the runtime about 5 µs, an item a fraction of one.

Where items go (:mod:`shoal.runtime.vmesh`): the PEs form an N-D mesh; a PE keeps one buffer
per peer (the PEs that differ from it in one coordinate, ``sum(s_d - 1)``, and itself), and an
item to a PE that is not a peer goes along a minimal path, one coordinate per hop. An
intermediate PE does not unpack the items it passes on: it adds the sender's chunk to its own
buffer for the next hop as it is.

When a buffer is sent: when it holds ``buffer_items`` items; when the PE holds ``max_items``
items in all the buffers of the aggregator (then the fullest goes); when it has not been sent
for ``flush_period`` seconds (a runtime timer that runs while anything is buffered, every
``flush_period``, never while nothing is: an item waits at most about two periods); and on
``agg.flush()``. A flushed message (timer or demand, not a full buffer) is marked urgent:
the PEs on its way pass its items on at once, so a flush on every PE delivers every item
without waiting for anyone's timer.

Wire format of a chunk: ``(source PE, destination PE, indices, items)``, ``indices`` a list
of the element indices as given to ``send``; ``items`` with ``item_dtype`` one packed numpy
array (no pickle per item; delivered as tuples of Python scalars, ``array.tolist()``, which
cost 15 ns to unpack where a numpy record's field costs 500 ns), otherwise the list of items,
pickled with the envelope in one go.

Quiescence: a buffered item is work not yet done. Each stream counts the items that entered
its buffers and those that left (``pending + flushed`` and ``flushed``); the quiescence waves
add them to the PE's created and processed counts (:meth:`Aggregation.counts`), so the job is
never quiescent while an item sits in a buffer (the failure of charm#1658).

Delivery runs the method in the ``AGG`` handler, item by item, as the current element
(its sends are its own, its time goes into its statistics). An item whose element is not on
the destination PE (it migrated, or is not inserted yet) is sent on as an ordinary message,
which the location manager forwards; the source PE is told where the element went
(``AGG_LOC``), so its next items take the short way. Every item runs exactly once. Order:
items from one PE to one element run in the order sent while the element stays where the
sender believes it is (one route, FIFO buffers, MPI's order between two PEs); nothing orders
items against ordinary messages, or items after the element moved.
"""

from __future__ import annotations

import inspect
import os
import pickle
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.building import NotBuiltError
from shoal.runtime.context import current
from shoal.runtime.control import builtin
from shoal.runtime.perpe import _agents
from shoal.runtime.protocol import AGG, AGG_LOC
from shoal.runtime.proxy import CollectionProxy, entry_methods, normalize
from shoal.runtime.vmesh import mesh_shape, next_hops

if TYPE_CHECKING:
    from shoal.runtime.collection import Collection, Slot
    from shoal.runtime.interfaces import Core

Spec = tuple  # (aid, cid, chare, ndims, method, dtype, buffer_items, max_items, period, mesh)
Chunk = tuple  # (source PE, destination PE, indices, items)


class Aggregator:
    """A stream of items to the elements of an array or group, aggregated per PE.

    ``Aggregator(proxy, "method", item_dtype=None, buffer_items=1024, max_items=None,
    flush_period=0.01, mesh=None)``: ``proxy`` an array or group, ``method`` one of its
    (plain, not ``async``) entry methods, called as ``method(item)`` once per item.
    ``item_dtype``: a numpy dtype without objects; items are then tuples (or records) of its
    fields, or scalars for a plain dtype, travel packed in one array and arrive as tuples of
    Python scalars (scalars for a plain dtype). Without it, items are any picklable objects,
    pickled in batches. ``buffer_items``: the items a buffer holds before it is sent;
    ``max_items``: the items one PE holds in all its buffers (default ``8 * buffer_items``;
    the fullest buffer goes when reached); ``flush_period``: seconds after which a buffer that
    has not been sent goes anyway; ``mesh``: the sides of the virtual mesh of PEs (default
    chosen from P, see :func:`shoal.runtime.vmesh.mesh_shape`).

    ``agg.send(index, item)`` buffers an item for element ``index`` (an int for a 1-D array,
    else a tuple); ``agg.flush()`` sends everything this PE buffered. An aggregator may be
    passed to elements in messages and kept in their state: it travels as a handle, and each
    PE has its own buffers. See :mod:`shoal.runtime.aggregation`.
    """

    __slots__ = ("_stream", "send")

    send: Callable[[Any, Any], None]

    def __init__(self, proxy: CollectionProxy, method: str, item_dtype: Any = None,
                 buffer_items: int = 1024, max_items: int | None = None,
                 flush_period: float = 0.01,
                 mesh: tuple[int, ...] | list[int] | None = None):
        rt = current()
        spec = _spec(rt, proxy, method, item_dtype, buffer_items, max_items, flush_period, mesh)
        self._bind(rt.aggregation.stream(spec))

    def _bind(self, stream: Stream) -> None:
        self._stream = stream
        self.send = stream.send

    def flush(self) -> None:
        """Send every item this PE holds for this aggregator now."""
        self._stream.flush()

    def stats(self) -> dict[str, Any]:
        """This PE's side: the ``mesh``, its ``buffers`` (peers and itself), ``items`` that
        entered its buffers (sent here and passed on), ``messages`` it sent, ``forwarded``
        items (they arrived here for an element elsewhere and went on as messages), the most
        items it held at once (``peak_items``), ``buffer_items`` in force (``shoal run --tune
        agg_buffer`` changes it), ``item_bytes`` (with a dtype) and
        ``bound_bytes``, the most item bytes its buffers can hold (``max_items`` plus one
        buffer)."""
        return self._stream.stats()

    def __reduce__(self) -> tuple[Callable[[Spec], Aggregator], tuple[Spec]]:
        return (_rebuild, (self._stream.spec,))

    def __repr__(self) -> str:
        st = self._stream
        return f"Aggregator({st.chare.__name__}.{st.method}, mesh={st.shape})"


def _rebuild(spec: Spec) -> Aggregator:
    agg = Aggregator.__new__(Aggregator)
    agg._bind(current().aggregation.stream(spec))
    return agg


def _spec(rt: Core, proxy: Any, method: Any, item_dtype: Any, buffer_items: Any,
          max_items: Any, flush_period: Any, mesh: Any) -> Spec:
    """Check what ``Aggregator`` was given; its spec, which every PE's stream is built from."""
    if not isinstance(proxy, CollectionProxy):
        raise UsageError(f"aggregate to an array or group proxy (shoal.Array(...)), not "
                         f"{proxy!r}")
    chare = proxy._chare
    assert chare is not None
    if not isinstance(method, str) or method not in entry_methods(chare):
        raise UsageError(f"{chare.__name__} has no entry method {method!r} to aggregate to")
    if inspect.iscoroutinefunction(getattr(chare, method)):
        raise UsageError(f"{chare.__name__}.{method} is async: aggregated items run a plain "
                         "method (send a message to start a coroutine)")
    dtype = None if item_dtype is None else _item_dtype(item_dtype)
    if not (isinstance(buffer_items, int) and buffer_items >= 1):
        raise UsageError(f"buffer_items must be an int >= 1, not {buffer_items!r}")
    if max_items is None:
        max_items = 8 * buffer_items
    if not (isinstance(max_items, int) and max_items >= buffer_items):
        raise UsageError(f"max_items must be an int >= buffer_items ({buffer_items}), not "
                         f"{max_items!r}")
    if not (isinstance(flush_period, (int, float)) and flush_period > 0):
        raise UsageError(f"flush_period must be a number of seconds > 0, not {flush_period!r}")
    shape = mesh_shape(rt.npes, mesh)
    aid = int.from_bytes(os.urandom(8), "little")  # unique across PEs, runs and restarts
    return (aid, proxy.cid, chare, proxy.ndims, method, dtype, buffer_items, max_items,
            float(flush_period), shape)


def _item_dtype(item_dtype: Any) -> np.dtype:
    try:
        dtype = np.dtype(item_dtype)
    except TypeError as exc:
        raise UsageError(f"item_dtype {item_dtype!r} is not a numpy dtype: {exc}") from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise UsageError(f"item_dtype {dtype} must have a fixed size without objects "
                         "(leave item_dtype out to pickle items)")
    return dtype


class Stream:
    """One aggregator's buffers on one PE (built from its spec where it is first used).

    Per destination PE one list holds the items sent from here, index and item in turn
    (``bufs``), and another the chunks passing through (``relayed``); the buffer of a peer
    is the lists of the destinations routed through it (``via``). ``room`` counts down the
    items a peer's buffer takes before it is sent, ``left`` the items the PE takes before
    its fullest buffer goes: the send path does one decrement of each.
    """

    def __init__(self, rt: Core, spec: Spec):
        (self.aid, self.cid, self.chare, self.ndims, self.method, self.dtype, self.cap,
         self.max_items, self.period, self.shape) = spec
        self.spec = spec
        self.rt = rt
        self.pe = pe = rt.pe
        dtype = self.dtype
        self.nfields = 0 if dtype is None or dtype.names is None else len(dtype.names)
        self.hop = next_hops(pe, self.shape)  # per destination PE: the peer it goes to first
        self.peers = sorted(set(self.hop))  # the buffers: peers, and this PE
        self.via: dict[int, list[int]] = {h: [] for h in self.peers}  # peer -> destinations
        for dest, h in enumerate(self.hop):
            self.via[h].append(dest)
        npes = len(self.hop)
        self.bufs: list[list[Any]] = [[] for _ in range(npes)]
        self.relayed: dict[int, list[Chunk]] = {}
        self.ratio = self.max_items / self.cap  # (kept when the buffers are resized)
        self.room = [self.cap] * npes  # per peer: items its buffer takes before it is sent
        self.left = self.max_items  # items the PE takes before the fullest buffer goes
        self.sent = [False] * npes  # per peer: sent since the last tick of the timer
        self.flushed = 0  # items that left the buffers (quiescence: entered = this + pending)
        self.messages = 0
        self.forwarded = 0  # items that arrived here for an element elsewhere
        self.peak = 0
        self.armed = False
        self.told: set[int] = {pe}  # PEs that have this spec
        self.where: dict[Any, int] = {}  # index as given to send -> the PE believed to hold it

    @property
    def pending(self) -> int:
        """Items in this PE's buffers."""
        return self.max_items - self.left

    def resize(self, cap: int) -> None:
        """Buffers of ``cap`` items from now on, and ``max_items`` in the same ratio to it as
        given (the control point ``agg_buffer``); buffers fuller than that go now."""
        grow = cap - self.cap
        most = max(cap, round(cap * self.ratio))
        self.left += most - self.max_items
        self.cap, self.max_items = cap, most
        room = self.room
        for hop in self.peers:
            room[hop] += grow
        for hop in self.peers:
            if room[hop] <= 0:
                self.flush_peer(hop)
        while self.left <= 0:
            self.flush_peer(min(self.peers, key=room.__getitem__))

    # ----------------------------------------------------------------- sending
    def send(self, index: Any, item: Any) -> None:
        """Buffer ``item`` for element ``index`` (see :class:`Aggregator`)."""
        try:
            dest = self.where[index]
        except (KeyError, TypeError):  # not seen yet (or unhashable: _locate says so)
            dest = None
        if dest is None:
            dest = self._locate(index, item)
            if dest is None:
                return
        if self.nfields and (type(item) is not tuple or len(item) != self.nfields):
            self._check(item)
        buf = self.bufs[dest]
        buf.append(index)
        buf.append(item)
        hop = self.hop[dest]
        room = self.room[hop] - 1
        self.room[hop] = room
        left = self.left - 1
        self.left = left
        if room <= 0 or left <= 0 or not self.armed:
            self._added(hop)

    def _added(self, hop: int) -> None:
        """Items went into the buffer of ``hop``: send it if full, the fullest buffers if the
        PE holds ``max_items``, and start the timer if it is not running."""
        if self.room[hop] <= 0:
            self.flush_peer(hop)
        while self.left <= 0:
            room = self.room
            self.flush_peer(min(self.peers, key=room.__getitem__))
        if self.left < self.max_items and not self.armed:
            self.armed = True
            self.rt.after(self.period, self._tick)

    def _locate(self, index: Any, item: Any) -> int | None:
        """The PE element ``index`` is believed to be on, remembered for the next item; None
        if this PE does not know the collection yet (its creation is on its way): the item
        then goes as an ordinary message, which waits for it."""
        rt = self.rt
        key = normalize(index, self.ndims)
        coll = rt.colls.get(self.cid)
        if coll is None:
            if self.dtype is not None:
                fault = self._unfit(item)
                if fault is not None:
                    raise UsageError(f"aggregated item {item!r} cannot be sent ({fault})")
                item = self._pack([item]).tolist()[0]
            rt.invoke((self.cid, key), self.method, (item,), None, 0, None)
            return None
        coll.proxy[key]  # an index outside a dense array's shape is refused here
        if key in coll.local:
            dest = self.pe
        else:
            cached = coll.cache.get(key)
            dest = coll.home(key) if cached is None else cached
        self.where[index] = dest
        return dest

    def _check(self, item: Any) -> None:
        """An item of a structured dtype that is not a tuple of its fields: a record of the
        same dtype passes, anything else is refused."""
        assert self.dtype is not None
        if isinstance(item, np.void) and item.dtype == self.dtype:
            return
        raise UsageError(f"item {item!r} does not match item_dtype {self.dtype}: give a tuple "
                         f"of its {self.nfields} fields {self.dtype.names}")

    def _pack(self, items: list[Any]) -> np.ndarray:
        """Items of the dtype as one array (an item that does not fit: ValueError or
        TypeError)."""
        return np.fromiter(items, self.dtype, len(items))

    def relay(self, chunks: list[Chunk], urgent: bool) -> None:
        """Chunks passing through this PE: into the buffers of their next hops, as they are;
        ``urgent`` (they were flushed, not full) sends those buffers on at once."""
        room, hops = self.room, set()
        for chunk in chunks:
            dest = chunk[1]
            self.relayed.setdefault(dest, []).append(chunk)
            n = len(chunk[2])
            hop = self.hop[dest]
            room[hop] -= n
            self.left -= n
            hops.add(hop)
        for hop in hops:
            if urgent:
                self.flush_peer(hop, True)
            else:
                self._added(hop)

    def flush_peer(self, hop: int, urgent: bool = False) -> None:
        """Send the buffer of peer ``hop`` (this PE: through its own queue); ``urgent``: the
        PEs on the way pass its items on at once (a flush, not a full buffer). An item that
        cannot travel (does not fit the dtype, cannot be pickled) is taken out and named in
        a UsageError; the other items stay buffered."""
        chunks = self._chunks(hop)
        if not chunks:
            return
        try:
            self.rt.send(hop, (AGG, self.aid, None if hop in self.told else self.spec, chunks,
                               urgent))
        except Exception:
            for dest in self.via[hop]:
                self._refuse(dest, self._unpicklable)
            raise
        bufs, relayed = self.bufs, self.relayed
        for dest in self.via[hop]:
            if bufs[dest]:
                bufs[dest] = []
            relayed.pop(dest, None)
        self.told.add(hop)
        n = self.cap - self.room[hop]
        self.room[hop] = self.cap
        self.sent[hop] = True
        self.peak = max(self.peak, self.pending)
        self.left += n
        self.flushed += n
        self.messages += 1

    def _chunks(self, hop: int) -> list[Chunk]:
        """What the buffer of peer ``hop`` holds, as chunks (the buffers stay as they are)."""
        bufs, relayed = self.bufs, self.relayed
        pe, dtype = self.pe, self.dtype
        chunks = []
        for dest in self.via[hop]:
            buf = bufs[dest]
            if buf:
                items: list[Any] | np.ndarray = buf[1::2]
                if dtype is not None:
                    try:
                        items = self._pack(buf[1::2])
                    except (TypeError, ValueError):
                        self._refuse(dest, self._unfit)
                        raise
                chunks.append((pe, dest, buf[0::2], items))
            if dest in relayed:
                chunks.extend(relayed[dest])
        return chunks

    def _refuse(self, dest: int, fault: Callable[[Any], str | None]) -> None:
        """Items buffered for ``dest`` could not travel: take out those with a ``fault``
        (counted as gone, so quiescence does not wait for them) and name the first in a
        UsageError; the others stay buffered. Returns if none has a fault."""
        buf = self.bufs[dest]
        faults = [fault(item) for item in buf[1::2]]
        bad = [k for k, f in enumerate(faults) if f is not None]
        if not bad:
            return
        index, item = buf[2 * bad[0]], buf[2 * bad[0] + 1]
        self.bufs[dest] = [x for k, f in enumerate(faults) if f is None
                           for x in buf[2 * k:2 * k + 2]]
        self.room[self.hop[dest]] += len(bad)
        self.left += len(bad)
        self.flushed += len(bad)
        raise UsageError(f"aggregated item {item!r} for {self.chare.__name__}"
                         f"{list(normalize(index, self.ndims))}.{self.method} cannot be "
                         f"sent ({faults[bad[0]]}); {len(bad)} such item(s) dropped")

    def _unfit(self, item: Any) -> str | None:
        try:
            self._pack([item])
        except (TypeError, ValueError) as exc:
            return f"it does not fit item_dtype {self.dtype}: {exc}"
        return None

    @staticmethod
    def _unpicklable(item: Any) -> str | None:
        try:
            pickle.dumps(item, 5)
        except Exception as exc:  # pickling raises many kinds
            return f"it cannot be pickled: {exc}"
        return None

    def flush(self) -> None:
        """Send every buffer that holds items."""
        room, cap = self.room, self.cap
        for hop in self.peers:
            if room[hop] < cap:
                self.flush_peer(hop, True)

    def _tick(self) -> None:
        """Every ``flush_period`` while items are buffered: send the buffers that were not
        sent since the last tick."""
        room, cap, sent = self.room, self.cap, self.sent
        for hop in self.peers:
            if room[hop] < cap and not sent[hop]:
                self.flush_peer(hop, True)
            sent[hop] = False
        self.armed = False
        if self.left < self.max_items:
            self.armed = True
            self.rt.after(self.period, self._tick)

    # ----------------------------------------------------------------- arrival
    def deliver(self, chunk: Chunk) -> None:
        """Run ``method(item)`` of each item's element, here, as the current element; items
        whose element is not here go on as ordinary messages, and so do those to an element
        whose ``async def __init__`` has not returned (:mod:`shoal.runtime.building`: its
        messages wait). Consecutive items to one element are one run: its method is looked
        up and the clock read once per run, and the runs' calls and times go into the
        elements' statistics after the chunk (with ``cpu_stats`` or a trace, which record
        every call, each call is booked alone: :meth:`_each`)."""
        rt = self.rt
        coll = rt.colls.get(self.cid)
        if coll is None:  # its creation has not reached this PE yet: wait for it
            rt.early.setdefault(self.cid, []).append((AGG, self.aid, self.spec, [chunk], False))
            return
        src, _, keys, items = chunk
        if type(items) is not list:
            items = items.tolist()
        local, one, name, clock = coll.local, self.ndims == 1, self.method, time.perf_counter
        each = rt.detailed
        runs: list[Any] = []  # slot, calls, end of each run (see _book)
        calls = 0
        prev: Any = _NOBODY
        slot: Any = None
        fn: Any = None
        for key, item in zip(keys, items, strict=True):
            if key != prev:
                runs += (slot, calls, clock())
                slot = local.get((key,) if one and type(key) is not tuple else key)
                if slot is None:
                    prev, calls = _NOBODY, 0
                    self._forward(coll, src, key, item)
                    continue
                prev, calls = key, 0
                rt.current = slot
                rt.work = (slot, name)
                fn = getattr(slot.obj, name)
                if each:
                    fn = partial(self._each, slot, fn)
            try:  # (free in Python 3.11 unless it raises)
                fn(item)
            except NotBuiltError:  # its async def __init__ runs: the item waits as a message
                self._forward(coll, src, key, item)
                continue
            calls += 1
            if slot.migrate_to is not None:
                runs += (slot, calls, clock())
                prev, calls = _NOBODY, 0
                self._moved(slot)
        runs += (slot, calls, clock())
        rt.current = None
        rt.work = None
        if rt.instrument and not each:
            self._book(runs)

    def _each(self, slot: Slot, fn: Callable[[Any], Any], item: Any) -> None:
        """One call, booked alone: its wall and CPU time, its trace event."""
        t0, c0 = time.perf_counter(), time.thread_time()
        fn(item)
        self.rt._account(slot, self.method, 1, t0, c0)

    def _moved(self, slot: Slot) -> None:
        """After a call that asked its element to move: it moves (the following items to it
        are forwarded)."""
        rt = self.rt
        if slot.migrate_to is not None and slot.active == 0:
            rt.current = None
            rt.migration.move_deferred(slot)

    def _book(self, runs: list[Any]) -> None:
        """The calls and wall time of each run into its element's statistics: ``runs`` is
        flat, ``slot, calls, end`` per run, and a run began where the one before it ended
        (the first, of no calls, only marks the start)."""
        name = self.method
        for k in range(3, len(runs), 3):
            calls = runs[k + 1]
            if calls:
                slot = runs[k]
                st = slot.stats.get(name)
                if st is None:
                    st = slot.stats[name] = [0, 0.0, 0.0]
                st[0] += calls
                st[1] += runs[k + 2] - runs[k - 1]

    def _forward(self, coll: Collection, src: int, key: Any, item: Any) -> None:
        """An item for an element that is not here: on as an ordinary message; the source
        learns where the element went, if this PE knows."""
        rt = self.rt
        self.forwarded += 1
        rt.current = None
        rt.work = None
        key = normalize(key, self.ndims)
        rt.invoke((self.cid, key), self.method, (item,), None, 0, None)
        there = coll.forward.get(key)
        if there is not None:
            if src == self.pe:
                self.relocate(key, there)
            else:
                rt.net.send(src, (AGG_LOC, self.aid, key, there))

    def relocate(self, key: tuple, pe: int) -> None:
        """Element ``key`` is on ``pe``: items sent from here from now on go there."""
        where = self.where
        for index in (key, key[0]) if self.ndims == 1 else (key,):
            if index in where:
                where[index] = pe

    def stats(self) -> dict[str, Any]:
        """See :meth:`Aggregator.stats`."""
        size = None if self.dtype is None else self.dtype.itemsize
        bound = None if size is None else (self.max_items + self.cap) * size
        return {"mesh": self.shape, "buffers": len(self.peers), "buffer_items": self.cap,
                "items": self.flushed + self.pending, "messages": self.messages,
                "forwarded": self.forwarded,
                "peak_items": max(self.peak, self.pending), "item_bytes": size,
                "bound_bytes": bound}


_NOBODY = object()  # no element's run of items is going on


class Aggregation:
    """The aggregation manager of one PE: the streams of every aggregator used here."""

    def __init__(self, rt: Core, tune: bool = False):
        self.rt = rt
        self.streams: dict[int, Stream] = {}
        self.tune = tune  # the root's controller tunes agg_buffer (runtime.control)
        self.cap: int | None = None  # the items of every buffer, when the controller set it

    def start(self) -> None:
        """Once the scheduler runs: at the root, the control point ``agg_buffer`` if asked
        for (it starts at 1024 items, the aggregators' default)."""
        if self.tune and self.rt.pe == 0:
            self.rt.control.register(builtin("agg_buffer", _resize_everywhere, 1024))

    def stream(self, spec: Spec) -> Stream:
        """This PE's stream of the aggregator ``spec`` (made the first time)."""
        st = self.streams.get(spec[0])
        if st is None:
            st = self.streams[spec[0]] = Stream(self.rt, spec)
            if self.cap is not None:
                st.resize(self.cap)
        return st

    def resize(self, cap: int) -> None:
        """Every stream's buffers hold ``cap`` items from now on, those made later too."""
        self.cap = cap
        for st in self.streams.values():
            st.resize(cap)

    def counts(self) -> tuple[int, int]:
        """Items that entered this PE's buffers and items that left them (quiescence: the
        difference is work still to do)."""
        flushed = left = 0
        for st in self.streams.values():
            flushed += st.flushed
            left += st.flushed + st.pending
        return left, flushed

    def on_items(self, env: tuple) -> None:
        """``AGG``: chunks for this PE run here, the others go on toward their PE."""
        _, aid, spec, chunks, urgent = env
        st = self.streams.get(aid)
        if st is None:
            st = self.stream(spec)
        rt = self.rt
        rt.direct = False  # an element's send to this PE is queued, not run inside this
        pe = rt.pe
        mine = [chunk for chunk in chunks if chunk[1] == pe]
        if len(mine) < len(chunks):
            st.relay([chunk for chunk in chunks if chunk[1] != pe], urgent)
        for chunk in mine:
            st.deliver(chunk)

    def on_loc(self, env: tuple) -> None:
        """``AGG_LOC``: an element that items from here went to is on another PE."""
        _, aid, key, pe = env
        st = self.streams.get(aid)
        if st is not None:
            st.relocate(key, pe)


def _resize(cap: int) -> None:
    current().aggregation.resize(cap)


def _resize_everywhere(cap: int) -> None:
    """The knob of ``agg_buffer``: every PE's buffers resized (by the PEs' agents)."""
    _agents().run(_resize, (cap,), {})
