"""Envelopes between PEs over MPI: pickle protocol 5 with numpy buffers out of band, or
marshal for an envelope of plain values.

An envelope made only of ints, floats, strings, bytes, booleans and None, in tuples (of
those exact types: the common call of an entry method with numbers, ``CALL``), goes by
``marshal`` (version 2, tag ``PLAIN``): it comes back equal and of the same types, and a
dump and a load cost 3,200 instructions fewer than pickle's (callgrind; the check that
the values are plain costs about 600). Anything else (a list or dict, which may be shared
within the envelope, a subclass such as a numpy float, any other object) is pickled.

An envelope is pickled once. Every contiguous buffer of at least ``OOB_MIN`` bytes (numpy
arrays, bytes-likes that support protocol 5) leaves the pickle and travels as its own MPI
message, sent from and received into its memory, never copied into the pickle: the header's
MPI tag is one more than the number of such buffers, and they follow on a second
communicator, in order
(MPI keeps the order of messages between two ranks on one communicator and tag). Smaller
buffers stay in-band: one MPI message is cheaper than two. Between PEs of one node the
buffers of at least ``SHM_MIN`` bytes go through shared memory instead
(:mod:`shoal.runtime.wire.shm`): the sender copies them into its segment, the envelope (tag
``SHARED``) names the blocks in a trailer after the pickle, and the receiver reads them in
place.

When every PE is on one node, a receive for the next envelope is always posted (a
persistent request, ``MPI_Recv_init``, into ``RECV`` bytes, from any rank with any tag): a
poll tests it, and one that finds an envelope unpickles it from that memory and starts the
request again. No MPI message object per envelope (``MPI_Improbe``'s) and no buffer per
envelope: callgrind, 2,200 instructions less per envelope received. When the PEs span nodes,
each poll probes (``MPI_Improbe``) and receives what it found into a buffer of its size
instead: the mpich wheel (5.0.2, ``ch4:ucx``) loses messages that reach a posted receive
from any source through its network module (a posted ``MPI_Irecv`` as much as a persistent
one): on the emulated cluster, 4 ranks on 2 nodes each sending 2,000 small messages to every
other rank, the ranks with a posted receive got 1 to 72 of their 6,000 in 10 s and UCX
reported the rest unmatched at the end; probing got all of them in 0.27 s, and both ways
get all of them among the ranks of one node (``/var/tmp/dbg/prec.py`` of that session,
kept in the note of issue 27). An envelope whose pickle is larger than ``RECV`` travels
as a header of 8 bytes (tag ``BIG``: the header holds the envelope's own tag) with its
pickle as its first out-of-band buffer, whichever way the receiver receives; every message
on the envelopes' communicator fits the posted receive, and the order of envelopes is the
order of their headers, as before.

When every PE is on one node and MPI speaks MPICH's ABI (the mpich wheel, and Intel MPI,
Cray MPICH, MVAPICH), a plain envelope of at most ``EAGER`` bytes inside its window (not the
one that closes it, nor one sent while envelopes wait in the backlog) takes the direct way
(:mod:`shoal.runtime.wire._direct`, C): written in marshal's format into a buffer kept for
it and sent by the MPI library's ``MPI_Send``, and a poll tests the posted receive and reads
a plain envelope with the library's own calls; any other message it finds it hands to
Python as its tag. The same steps through mpi4py and marshal cost about 10,000 more
instructions a round trip (docs/compiled.md).

When every PE is on one node, an envelope of at most ``EAGER`` bytes goes by a blocking
``MPI_Send``: MPI sends messages that small between the ranks of a node eagerly (the
receiver buffers them whether or not a receive is posted), so the call returns after a copy,
and it costs half of an ``MPI_Isend`` plus the bookkeeping of its request. Across nodes it
goes by ``MPI_Isend``, tested once at once (untested, OFI's ``tcp`` sent it at the next
progress: the one-way latency between two emulated nodes went from 19.1 to 25.6 µs; tested,
17.6): a network module need not buffer what nobody receives yet. MPICH's OFI ``tcp``
provider blocks a ``MPI_Send`` of 1,000 bytes once 64 sent to a rank are unreceived (plain
mpi4py, 4 ranks on 4 emulated nodes, each sending to the others before receiving: stuck at
64 of 128 to each; with ``MPI_Isend`` all 1,024 went), and PEs that send to each other in a
cycle then wait in ``MPI_Send`` for good: LeanMD hung so on 4 of 5 starts over TCP. Larger
envelopes and out-of-band buffers go by ``MPI_Isend``; the transport keeps each request and
the memory it reads until MPI reports it complete (``reap``). Every window's last envelope
to a destination goes by ``MPI_Issend`` instead, which bounds what a sender has outstanding
to a receiver (:mod:`shoal.runtime.wire.flow`). An envelope that finds its destination's
windows full waits in the sender's backlog, sent in order as windows free (the sender goes
on with its work meanwhile); the envelopes that arrive while a PE waits for a window (its
backlog full) are handed out first by ``poll``.
"""

from __future__ import annotations

import marshal
import pickle
import struct
from collections import deque
from typing import TYPE_CHECKING, Any, Final, cast

import numpy as np

from shoal import _compiled as compiled
from shoal.errors import UsageError
from shoal.options import POOL_BYTES
from shoal.runtime.wire.codec import OOB_MIN
from shoal.runtime.wire.flow import BACKLOG, UNIT, WINDOW, Flow
from shoal.runtime.wire.pool import BufferPool
from shoal.runtime.wire.shm import open_arena

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.runtime.wire.shm import SharedArena

_NONE: Final[list[memoryview]] = []  # the buffers of an envelope that has none (never filled)
# (Final: the compiled core keeps these in C statics, not looked up in the module's dict)
_dumps: Final = pickle.dumps
_loads: Final = pickle.loads
_mdumps: Final = marshal.dumps
_mloads: Final = marshal.loads
EAGER: Final = 4096  # bytes: envelopes up to this size go by blocking MPI_Send (see module doc)
BULK: Final = 256 << 10  # bytes: a send this large moves only while its sender tests it (MPI
# progresses it chunk by chunk), so an idle sender keeps testing (see pe._Idle)
# Header tags: 0 a pickle, PLAIN a marshal, 1 + n (below BIG) a pickle whose n buffers
# follow by MPI. (PLAIN is small: compiled, a tag is boxed for mpi4py at every send, and
# Python keeps the ints up to 256 made once.)
PLAIN: Final = 1  # an envelope of plain values, by marshal (see the module doc)
SHARED: Final = 32767  # the buffers are named in a trailer (MPI guarantees this tag)
BIG: Final = 32766  # the pickle follows by MPI as a buffer, the header is its tag
NOT_PLAIN: Final = -1  # _send_direct's word (and _direct's) for an envelope pickle takes,
PLAIN_LEFT: Final = -2  # and for a plain one it did not send (marshal takes it, from Python)
REQS: Final = 64  # sends in flight beyond which the completed ones are released (_release)
RECV: Final = 65536  # bytes of the receive posted for the next envelope: larger pickles are BIG
SHM_MIN: Final = 65536  # bytes: smaller buffers go by MPI even to a PE of this node (measured
# crossover on 2 PEs: the copy into the segment and its bookkeeping cost more than they
# save below it; python benchmarks/runtime_sizes.py)


def _plain(values: tuple, depth: int) -> bool:
    """Are ``values`` plain: ints, floats, strings, bytes, booleans and None, or tuples of
    them (``depth`` levels more), of those exact types? Such a tuple goes by marshal and
    comes back equal and of the same types; a subclass (a numpy float, an IntEnum), a
    container that may be shared or changed (a list, a dict) or any other object goes by
    pickle."""
    for x in values:
        k = type(x)
        if not (k is int or k is str or x is None or k is float or k is bool or k is bytes
                or (k is tuple and depth and _plain(x, depth - 1))):
            return False
    return True


def _units(data: bytes, oob: list[memoryview]) -> int:
    """What an envelope counts in a window: 1, plus 1 per ``UNIT`` bytes when it goes by
    ``MPI_Isend`` (more than ``EAGER`` bytes, or with buffers)."""
    if not oob and len(data) <= EAGER:
        return 1
    return 1 + (len(data) + sum(raw.nbytes for raw in oob)) // UNIT


class Transport:
    """Point-to-point envelopes among the ranks of ``comm`` (duplicated: shoal's traffic
    never matches an application's receives)."""

    def __init__(self, comm: MPI.Intracomm, shm_bytes: int = 0, pool_bytes: int = POOL_BYTES):
        from mpi4py import MPI

        self._mpi: Any = MPI  # (Any: mypyc keeps no attribute of a module type)
        self.comm = comm.Dup()
        self._bufcomm = comm.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._status = MPI.Status()
        self._reqs: list[MPI.Request] = []
        self._keep: list[bytes | memoryview] = []  # what the requests read
        self._compact_at = REQS  # requests in flight beyond which completed ones are dropped
        self._oob: list[memoryview] = []
        self.pool = BufferPool(pool_bytes)  # buffers to receive into (see wire.pool)
        self._callback = self._out_of_band
        self._isend = self.comm.Isend
        self._issend = self.comm.Issend
        self._bsend: Any = self.comm.Send  # (across nodes: _isend_small, see below)
        self._improbe = self.comm.improbe
        self._any = MPI.ANY_SOURCE
        self._anytag = MPI.ANY_TAG
        self._byte = MPI.BYTE
        self.bytes_sent = 0
        self.bytes_shared = 0  # of those, in blocks of the shared segment
        # envelopes and buffers received (by MPI and shared memory); the small envelopes
        # read from the posted receive or by a probe only while ``counting`` (live data:
        # shoal.runtime.publish): MPI_Get_count costs about 740 instructions an envelope,
        # 3.5% of a small message's way from the network to its entry method (callgrind)
        self.bytes_received = 0
        self.counting = False
        lo = self.comm.allreduce(shm_bytes, op=MPI.MIN)
        if lo != self.comm.allreduce(shm_bytes, op=MPI.MAX):
            raise UsageError(f"shm_bytes must be the same on every PE (got {shm_bytes} here, "
                             f"{lo} on another)")
        self.arena = open_arena(self.comm, shm_bytes) if shm_bytes and self.size > 1 else None
        # flow control (wire.flow): credit left in each destination's window, and the sends
        # that closed a window and may not have completed (with the memory they read)
        self._credit = [WINDOW] * self.size
        self._open: dict[int, tuple[MPI.Request, bytes]] = {}
        # envelopes waiting for a window, per destination: (data, tag, buffers, units)
        self._backlog: dict[int, deque[tuple[bytes, int, list[memoryview], int]]] = {}
        self._waiting = 0  # units in the backlog
        self.bulk = False  # a send of BULK bytes or more is in flight: its sender must test it
        self.flow = Flow(self._take)
        self._held = self.flow.held
        self.shm_peers = frozenset(() if self.arena is None else self.arena.base)
        # the receive posted for the next envelope when every PE is on this node (see the
        # module doc): tested by poll, and started again once what it received has been
        # read (``posted``: it is started); across nodes, each poll probes
        self._get_tag = self._status.Get_tag  # (bound once: a call by name costs 170 more)
        self._get_count = self._status.Get_count  # (bytes, its default datatype)
        self._tstatus = MPI.Status()  # (_take's: it may run while poll reads its status)
        self._inbox = bytearray(RECV)
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.posting = node.Get_size() == self.size
        node.Free()
        self._recv = self.comm.Recv_init(self._inbox, self._any, self._anytag)
        self._test = self._recv.Test
        self._start = self._recv.Start
        self.posted = self.posting
        self._direct: Any = None  # a small envelope's way by MPI's own calls (_link)
        if self.posting:
            self._start()
            self._direct = self._link(MPI)
        else:
            self._bsend = self._isend_small
        # its calls, bound once (a call by name costs about 170 instructions more); a test
        # that counts MPI's calls sets _dsend to None to send by mpi4py
        self._dsend: Any = None if self._direct is None else self._direct.send
        self._dpoll: Any = None if self._direct is None else self._direct.poll

    def _link(self, mpi: Any) -> Any:
        """The way of small envelopes between the PEs of one node by the MPI library's own
        calls, from C (:mod:`shoal.runtime.wire._direct`: plain envelopes by ``MPI_Send``,
        the posted receive tested and started again): None where it is not built, the pure
        core runs, or MPI does not speak MPICH's ABI (int handles, a status of 5 ints)."""
        direct = compiled.direct()
        sizes = (mpi._sizeof(mpi.Comm), mpi._sizeof(mpi.Request), mpi._sizeof(mpi.Status))
        if direct is None or sizes != (4, 4, 20):
            return None
        return direct.Link(self.comm.handle, mpi.BYTE.handle, self._recv.handle, self._inbox,
                           PLAIN, EAGER, mpi.Exception, mpi.__file__)

    def _out_of_band(self, buf: pickle.PickleBuffer) -> bool:
        raw = buf.raw()
        if raw.nbytes < OOB_MIN:
            return True  # in-band
        self._oob.append(raw)
        return False

    def send(self, dest: int, env: tuple[Any, ...], shared: bool = True,
             plain: bool = False) -> int:
        """Send ``env`` to rank ``dest``; returns the bytes put on the wire. ``shared=False``
        keeps its buffers out of the shared segment (for envelopes the receiver keeps);
        ``plain=True``: the caller knows that ``env`` is plain (:func:`_plain`)."""
        said = self._send_direct(dest, env, plain)
        if said > 0:
            return said
        if said == PLAIN_LEFT:
            data = _mdumps(env, 2)  # (version 2: no references, a plain value once each)
            tag = PLAIN
            oob = _NONE
            nbytes = 0
        else:
            data, oob, tag, nbytes = self._pickle(env, dest, shared)
        nbytes += len(data)
        self.bytes_sent += nbytes
        if len(data) > RECV:  # larger than the receive posted for it: the pickle follows
            data, oob, tag = tag.to_bytes(8, "little"), [memoryview(data), *oob], BIG
        backlog = self._backlog
        if backlog and dest in backlog and not self._flush_to(dest):  # behind others: in order
            self._defer(dest, data, tag, oob, _units(data, oob))
            return nbytes
        if not oob and len(data) <= EAGER:  # (the small message's path, inlined: _emit)
            credit = self._credit
            left = credit[dest] - 1  # (>= 0: a window's credit is positive)
            if left:
                credit[dest] = left
                self._bsend(data, dest, tag)  # returns once MPI has copied it: no request
            elif not self._close_window(data, dest, tag, oob):
                self._defer(dest, data, tag, oob, 1)
            return nbytes
        units = _units(data, oob)
        if not self._emit(dest, data, tag, oob, units):
            self._defer(dest, data, tag, oob, units)
        return nbytes

    def _send_direct(self, dest: int, env: tuple[Any, ...], plain: bool) -> int:
        """Send a plain envelope inside ``dest``'s window by the direct way (:meth:`_link`)
        and return the bytes sent; else say whether ``env`` goes by marshal (``PLAIN_LEFT``:
        it is plain, or the caller says so) or by pickle (``NOT_PLAIN``). The direct way is
        not asked where there is none, a backlog, or the window's last credit left; it does
        not take some plain envelopes (``shoal.runtime.wire._direct``: larger than
        ``EAGER``, an int beyond 64 bits, a string with a lone surrogate)."""
        send = self._dsend
        if send is not None and not self._backlog:
            credit = self._credit
            left = credit[dest] - 1  # (>= 0: a window's credit is positive)
            if left:
                said: int = send(env, dest)
                if said > 0:
                    credit[dest] = left
                    self.bytes_sent += said
                    return said
                return PLAIN_LEFT if plain else said
        return PLAIN_LEFT if plain or (type(env) is tuple and _plain(env, 3)) else NOT_PLAIN

    def _emit(self, dest: int, data: bytes, tag: int, oob: list[memoryview],
              units: int) -> bool:
        """Send an envelope of ``units`` inside ``dest``'s window, or as the one that closes
        it; False if it cannot go yet (the previous window is still open): nothing was
        sent."""
        left = self._credit[dest] - units
        if left <= 0:
            return self._close_window(data, dest, tag, oob)
        self._credit[dest] = left
        if not oob and len(data) <= EAGER:
            self._bsend(data, dest, tag)
        else:
            self._post(dest, data, tag, oob)
        return True

    def _pickle(self, env: tuple[Any, ...], dest: int, shared: bool
                ) -> tuple[bytes, list[memoryview], int, int]:
        """An envelope pickled for ``dest``: as :meth:`_by_band` says."""
        oob = self._oob
        try:
            data = _dumps(env, 5, buffer_callback=self._callback)
        finally:
            if oob:  # a fresh list: these travel (or, if the pickle failed, are dropped)
                self._oob = []
        if oob:
            return self._by_band(data, oob, dest, shared)
        return data, _NONE, 0, 0

    def _by_band(self, data: bytes, oob: list[memoryview], dest: int, shared: bool
                 ) -> tuple[bytes, list[memoryview], int, int]:
        """How an envelope's out-of-band buffers travel: the envelope, the buffers left for
        MPI, the header's tag, and the buffers' bytes."""
        nbytes = 0
        for raw in oob:
            nbytes += raw.nbytes
        arena = self.arena if shared and dest in self.shm_peers else None
        if len(oob) + 1 < BIG and (arena is None or max(raw.nbytes for raw in oob) < SHM_MIN):
            return data, oob, len(oob) + 1, nbytes
        data, oob = self._trailer(data, oob, arena)
        return data, oob, SHARED, nbytes

    def _track(self, req: MPI.Request, data: bytes | memoryview, nbytes: int) -> None:
        """Keep a send's request and the memory it reads (``nbytes``) until MPI reports it
        complete (:meth:`reap`); beyond ``_compact_at`` in flight, release those done."""
        self._reqs.append(req)
        self._keep.append(data)
        if nbytes >= BULK:
            self.bulk = True
        if len(self._reqs) > self._compact_at:
            self._release()

    def _buffers(self, dest: int, oob: list[memoryview]) -> None:
        """Send an envelope's out-of-band buffers (after its header)."""
        for raw in oob:
            self._track(self._bufcomm.Isend(raw, dest, 0), raw, raw.nbytes)

    def _close_window(self, data: bytes, dest: int, tag: int, oob: list[memoryview]) -> bool:
        """Send an envelope that closes a window to ``dest`` by ``MPI_Issend``, which
        completes once ``dest`` has received it, if the one that closed the previous window
        has (see :mod:`shoal.runtime.wire.flow`); False if it has not: nothing was sent."""
        prev = self._open.get(dest)
        if prev is not None and not prev[0].Test():
            return False
        req = self._issend(data, dest, tag)
        self._open[dest] = (req, data)
        if len(data) >= BULK:  # (tested with the others until it completes)
            self._track(req, data, len(data))
        self._credit[dest] = WINDOW
        self._buffers(dest, oob)
        return True

    def _post(self, dest: int, data: bytes, tag: int, oob: list[memoryview]) -> None:
        """Send an envelope of more than ``EAGER`` bytes or with buffers, inside a window,
        by ``MPI_Isend``."""
        self._track(self._isend(data, dest, tag), data, len(data))
        self._buffers(dest, oob)

    def _isend_small(self, data: bytes, dest: int, tag: int) -> None:
        """Across nodes, an envelope of at most ``EAGER`` bytes goes by ``MPI_Isend`` too
        (see the module doc), tested once at once: the test moves it out (OFI's ``tcp``
        sends it at the next progress of MPI, 6 µs later in a ping-pong), and a send that
        completed there leaves no request to keep."""
        req = self._isend(data, dest, tag)
        if not req.Test():
            self._track(req, data, len(data))

    def _defer(self, dest: int, data: bytes, tag: int, oob: list[memoryview],
               units: int) -> None:
        """Put an envelope of ``units`` in ``dest``'s backlog; when the backlog holds more
        than ``BACKLOG`` units, wait (receiving) until windows have taken it back under."""
        if not oob:  # (then oob is the list the next pickle fills: not kept)
            oob = _NONE
        queue = self._backlog.get(dest)
        if queue is None:
            queue = self._backlog[dest] = deque()
        queue.append((data, tag, oob, units))
        self._waiting += units
        while self._waiting > BACKLOG:
            far = max(self._backlog, key=lambda d: len(self._backlog[d]))
            self.flow.wait(self._open[far][0])
            self.flush()

    def flush(self) -> bool:
        """Send what waits in the backlog as far as the windows take it; True when nothing
        is left waiting."""
        for dest in list(self._backlog):
            self._flush_to(dest)
        return not self._backlog

    def _flush_to(self, dest: int) -> bool:
        """Send what waits for ``dest`` as far as its windows take it; True when nothing is
        left waiting for it."""
        queue = self._backlog[dest]
        while queue:
            data, tag, oob, units = queue[0]
            if not self._emit(dest, data, tag, oob, units):
                return False
            queue.popleft()
            self._waiting -= units
        del self._backlog[dest]
        return True

    def _trailer(self, data: bytes, oob: list[memoryview],
                 arena: SharedArena | None) -> tuple[bytes, list[memoryview]]:
        """Copy the out-of-band buffers of at least ``SHM_MIN`` bytes into this PE's shared
        segment (``arena``, or None), naming each buffer in a trailer after the pickle:
        ``(ticket, offset, bytes)``, ticket -1 for one that follows by MPI (smaller, no
        room, or another node), then their count. Returns the envelope and the buffers
        left for MPI."""
        fields: list[int] = []
        rest: list[memoryview] = []
        for raw in oob:
            where = arena.put(raw) if arena is not None and raw.nbytes >= SHM_MIN else None
            if where is None:
                fields += (-1, 0, raw.nbytes)
                rest.append(raw)
            else:
                fields += (where[0], where[1], raw.nbytes)
                self.bytes_shared += raw.nbytes
        if len(rest) < len(oob):  # then blocks went into the arena: it is not None
            cast("SharedArena", arena).sync()  # the copies are visible before the envelope is
        return data + struct.pack(f"<{len(fields) + 1}q", *fields, len(oob)), rest

    def reap(self, tries: int = 1) -> bool:
        """Send what the windows now take of the backlog, release the memory of completed
        sends and flag the shared blocks the program is done with; True when no request is
        in flight. Testing a send is what moves a large message along (MPI progresses it
        chunk by chunk), so an idle PE tests up to ``tries`` times in a row while ``bulk``
        says one is in flight; an envelope that waits for a window moves when its receiver
        takes the one before (:meth:`settled` says when nothing is left)."""
        if self._backlog:
            self.flush()
        self._release(tries)
        if self._open:
            for dest in [d for d, (req, _) in self._open.items() if req.Test()]:
                if dest not in self._backlog:  # (its backlog waits for this one)
                    del self._open[dest]
        return not self._reqs

    def settled(self) -> bool:
        """Has every send completed, none waiting (after :meth:`reap`)?"""
        return not (self._reqs or self._open or self._backlog)

    def _release(self, tries: int = 1) -> None:
        """Release the memory of completed sends (testing them up to ``tries`` times) and
        flag the shared blocks the program is done with."""
        if self.arena is not None and self.arena.held:
            self.arena.release()
        reqs = self._reqs
        if reqs:
            testall = self._mpi.Request.Testall
            for _ in range(tries):
                if testall(reqs):
                    reqs.clear()
                    self._keep.clear()
                    self.bulk = False
                    self._compact_at = REQS
                    return
            if len(reqs) > self._compact_at:  # a stream of sends, never all complete at
                # once: drop those that are (a request and what it reads share an index),
                # next when twice as many are in flight (a linear cost per send at most)
                done = set(self._mpi.Request.Testsome(reqs) or ())
                keep = self._keep
                self._reqs = [r for i, r in enumerate(reqs) if i not in done]
                self._keep = [k for i, k in enumerate(keep) if i not in done]
                self._compact_at = max(REQS, 2 * len(self._reqs))

    def poll(self) -> tuple[Any, ...] | None:
        """One envelope that has arrived (those set aside while this PE waited for a
        window first), or None."""
        if self._held:
            return self._decode(*self._held.popleft())
        if self._backlog:
            self.flush()
        if not self.posting:
            return self._probe()
        if self._dpoll is not None:
            got = self._dpoll()  # (a plain envelope is read, its receive posted again)
            if got is None or isinstance(got, tuple):
                if got is not None and self.counting:
                    self.bytes_received += self._direct.Get_count()
                return got
            return self._header(got, self._direct, self._direct.start)
        status = self._status
        if not self._test(status):
            return None
        tag: int = self._get_tag()
        if tag != PLAIN:
            return self._header(tag, status, self._start)
        if self.counting:
            self.bytes_received += self._get_count()
        try:  # (a marshal ends where it ends: the rest of the inbox is ignored)
            return _mloads(self._inbox)
        finally:
            self._start()

    def _header(self, tag: int, status: Any, start: Any) -> tuple[Any, ...]:
        """The envelope of the message with ``tag`` (not ``PLAIN``) the posted receive
        holds, as ``status`` describes it; ``start`` posts the receive again once the
        message is read. (``posted`` is False meanwhile: an unpickling that sends takes
        what arrives by ``MPI_Improbe``, see :meth:`_take`.)"""
        self.posted = False
        if not tag:
            if self.counting:
                self.bytes_received += status.Get_count()
            try:  # (a pickle ends where it ends: the rest of the inbox is ignored)
                return _loads(self._inbox)
            finally:
                start()
                self.posted = True
        count: int = status.Get_count()
        self.bytes_received += count
        data = self._inbox[:count]
        src = status.Get_source()
        start()
        self.posted = True
        return self._decode(src, tag, data)

    def _probe(self) -> tuple[Any, ...] | None:
        """``poll`` across nodes: the next envelope MPI has, found by ``MPI_Improbe``."""
        status = self._status
        msg = self._improbe(self._any, self._anytag, status)
        if msg is None:
            return None
        tag: int = self._get_tag()
        if not tag:
            if self.counting:
                self.bytes_received += self._get_count()
            return msg.recv()  # mpi4py receives and unpickles in one compiled call
        return self._decode(status.Get_source(), tag, self._matched(msg, status))

    def _take(self) -> tuple[int, int, bytearray] | None:
        """An envelope as received (source, tag, bytes), or None: for a PE that waits for
        a window (:mod:`shoal.runtime.wire.flow`). Across nodes, and within an unpickling of
        the posted receive's envelope (an object's ``__setstate__`` that sends), what
        arrives is taken from MPI's queue by ``MPI_Improbe``: the envelopes come after that
        one."""
        status = self._tstatus
        if self.posted:
            if not self._test(status):
                return None
            count: int = status.Get_count(self._byte)
            self.bytes_received += count
            got = (status.Get_source(), status.Get_tag(), self._inbox[:count])
            self._start()
            return got
        msg = self._improbe(self._any, self._anytag, status)
        if msg is None:
            return None
        return status.Get_source(), status.Get_tag(), self._matched(msg, status)

    def _matched(self, msg: Any, status: Any) -> bytearray:
        """The bytes of the message ``msg`` that ``MPI_Improbe`` matched (``status``)."""
        count: int = status.Get_count(self._byte)
        self.bytes_received += count
        data = bytearray(count)
        msg.Recv(data)
        return data

    def _decode(self, src: int, tag: int, data: Any) -> tuple[Any, ...]:
        """The envelope of a header received from ``src`` with ``tag``: its buffers follow
        by MPI (``tag - 1`` of them), or are named in its trailer (``SHARED``), or its
        pickle follows by MPI and the header is its tag (``BIG``)."""
        if not tag:
            return _loads(data)
        if tag == PLAIN:
            return _mloads(data)
        if tag == BIG:
            return self._decode(src, int.from_bytes(data[:8], "little"), self._receive(src))
        if tag != SHARED:
            return _loads(data, buffers=[self._receive(src) for _ in range(tag - 1)])
        count = int.from_bytes(data[-8:], "little")
        fields = struct.unpack_from(f"<{3 * count}q", data, len(data) - 8 - 24 * count)
        arena = self.arena
        if arena is not None:
            arena.sync()  # the sender's copies are seen before they are read
        bufs: list[np.ndarray] = []
        for k in range(0, 3 * count, 3):
            ticket, off, n = fields[k:k + 3]
            if ticket < 0:
                bufs.append(self._receive(src))
            else:
                assert arena is not None  # a sender names blocks only to a PE of its node
                self.bytes_received += n
                bufs.append(arena.view(src, ticket, off, n))
        if arena is not None and len(arena.held) > 64:
            arena.release()
        return _loads(data, buffers=bufs)  # the trailer lies after the pickle's end

    def _receive(self, src: int) -> np.ndarray:
        """The next out-of-band buffer from ``src`` by MPI."""
        status = self._status
        part = self._bufcomm.Mprobe(src, 0, status)
        count: int = status.Get_count(self._byte)
        self.bytes_received += count
        arr = self.pool.get(count)
        part.Recv(arr)
        return arr

    def comms(self) -> list[MPI.Intracomm]:
        """The communicators it sends on (revoked by a recovery, :mod:`shoal.runtime.recovery`)."""
        return [self.comm, self._bufcomm]

    def close(self) -> None:
        """Free the shared window and the communicators (every send must have completed).
        Collective."""
        self._direct = self._dsend = self._dpoll = None  # (its handles die with MPI's)
        if self.arena is not None:
            self.arena.close()
        if self.posted:  # (an envelope it receives now is dropped, as one queued in MPI is)
            self._recv.Cancel()
            self._recv.Wait()
        self._recv.Free()
        self._bufcomm.Free()
        self.comm.Free()
