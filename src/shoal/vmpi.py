"""Virtual MPI ranks (Acun14, Section IV-D: Adaptive MPI): code written in mpi4py's style runs
as over-decomposed virtual ranks on fewer PEs, and the load balancer moves ranks at explicit
migration points.

A program defines its rank as a class whose ``async def run(self, comm)`` is the rank's
``main``; :func:`run` makes a chare array of ``nranks`` elements, each holding one instance of
the class, and runs ``run(comm)`` in every element as a coroutine. ``comm`` offers mpi4py's
lower-case (pickle-based) API with the same names, arguments and semantics, except that every
call that can block in MPI is awaited (``x = await comm.recv(source=0, tag=7)``): a virtual
rank that waits gives its PE to the other ranks there, as AMPI's user-level threads do.

- Point to point: ``send``/``isend`` (return at once: the object is copied or pickled when
  the call is made, as mpi4py pickles it; awaiting the result of ``send`` is allowed and does
  nothing), ``await recv``, ``irecv`` (a :class:`Request`: ``await req.wait()``, ``await
  req.test()``, ``await Request.waitall(reqs)``, ``waitany``, ``testall``), ``await
  sendrecv``, ``await probe``/``iprobe``. Sources and tags are matched as MPI does:
  ``ANY_SOURCE``, ``ANY_TAG`` (tags >= 0 only), ``PROC_NULL``; a :class:`Status` gets the
  source and tag; messages from one rank to another on one communicator are received in the
  order they were sent when both match a receive (MPI's non-overtaking rule), whatever
  migrations happen meanwhile (the runtime orders messages between two elements).
- Collectives (awaited): ``barrier``, ``bcast``, ``reduce``, ``allreduce``, ``gather``,
  ``allgather``, ``scatter``, ``alltoall``, ``scan``, ``exscan``; ops :data:`SUM`,
  :data:`PROD`, :data:`MAX`, :data:`MIN` (element-wise on numpy arrays), :data:`LAND`,
  :data:`LOR`, :data:`BAND`, :data:`BOR`, or any two-argument function. Trees over the ranks
  (binomial, rooted at ``root``) fix the order in which values are combined: the same on any
  number of PEs and in every run, and every rank of ``allreduce`` gets the same bits.
- Communicators: ``Split(color, key)`` and ``Dup()`` (collective, awaited), ``Free()``;
  ``Get_rank()``, ``Get_size()``, ``rank``, ``size``.
- Migration: ``await comm.migrate()`` is a point where the balancer may move ranks (AtSync;
  AMPI's ``AMPI_Migrate``): collective over every rank of the job. A Python frame cannot move
  to another process, so ``migrate()`` never returns: it ends the rank's ``run`` (its local
  variables are gone; ``finally`` blocks run), the balancer moves ranks, and the rank is
  entered again by ``run(comm)`` (or the method :func:`run` names by ``resume=``), on
  whichever PE it is then, whether it moved or not. What survives is the rank object (its
  attributes, pickled when it moves: they must pickle, and the first ``migrate()`` of each
  rank checks that they do), the communicators kept in it, and every message sent to the rank
  and not yet received (they wait, in order, for the rank's receives after it resumes). A
  loop reads::

      for it in range(self.it, self.iters):
          ...                        # one iteration
          self.it = it + 1           # before the migration point
          if self.it % 10 == 0:
              await comm.migrate()   # run() starts again from here, from self.it

  Requests of ``irecv`` still pending at ``migrate()`` are an error (complete them first).
  ``await comm.migrate_to(pe)`` moves this rank alone to PE ``pe`` (not collective; AMPI's
  ``AMPI_Migrate_to_pe``) with the same re-entry.

:func:`run` with ``native=True`` runs the same class on the processes of a plain ``mpiexec
-n P`` (one rank per process) through mpi4py itself, with the same awaited calls and the same
re-entry at ``migrate()`` (which moves nothing there): the program's MPI baseline.
"""

from __future__ import annotations

import functools
import operator
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Hashable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.chare import Chare
from shoal.runtime.futures import Future

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "BAND",
    "BOR",
    "LAND",
    "LOR",
    "MAX",
    "MIN",
    "PROC_NULL",
    "PROD",
    "SUM",
    "UNDEFINED",
    "Comm",
    "NativeComm",
    "Op",
    "Request",
    "Status",
    "Wtime",
    "last_run",
    "run",
]

ANY_SOURCE = -2  # (MPICH's values; under native=True they are translated to the MPI's own)
ANY_TAG = -1
PROC_NULL = -1
UNDEFINED = -32766

# tags of the collectives' messages: below 0, so no user receive (ANY_TAG included) matches
_BCAST, _REDUCE, _GATHER, _SCATTER, _ALLTOALL, _SCAN, _YIELD = range(-10, -17, -1)


def Wtime() -> float:  # noqa: N802 - MPI's name
    """Seconds on a monotonic clock (``MPI.Wtime``)."""
    return time.perf_counter()


# ------------------------------------------------------------------------------ operations
class Op:
    """A reduction operation: ``fn(a, b)`` combines two values (numpy arrays element-wise for
    the predefined ones); ``commute``: as MPI's (every predefined one commutes)."""

    __slots__ = ("commute", "fn", "name")

    def __init__(self, fn: Callable[[Any, Any], Any], name: str = "", commute: bool = True):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "op")
        self.commute = commute

    @classmethod
    def Create(cls, function: Callable[[Any, Any], Any], commute: bool = True) -> Op:  # noqa: N802
        """``Op.Create(f)``: an operation of a two-argument function ``f(a, b)`` (unlike
        mpi4py's, which takes buffers and a datatype: values here are Python objects)."""
        return cls(function, "", commute)

    def __call__(self, a: Any, b: Any) -> Any:
        return self.fn(a, b)

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self.name in _PREDEFINED:
            return self.name  # the module's own object on every PE
        return (Op, (self.fn, self.name, self.commute))

    def __repr__(self) -> str:
        return f"vmpi.{self.name}" if self.name in _PREDEFINED else f"Op({self.name})"


def _elementwise(array_fn: Callable[[Any, Any], Any], plain: Callable[[Any, Any], Any]
                 ) -> Callable[[Any, Any], Any]:
    def fn(a: Any, b: Any) -> Any:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return array_fn(a, b)
        return plain(a, b)

    return fn


SUM = Op(operator.add, "SUM")
PROD = Op(operator.mul, "PROD")
MAX = Op(_elementwise(np.maximum, max), "MAX")
MIN = Op(_elementwise(np.minimum, min), "MIN")
LAND = Op(_elementwise(np.logical_and, lambda a, b: bool(a and b)), "LAND")
LOR = Op(_elementwise(np.logical_or, lambda a, b: bool(a or b)), "LOR")
BAND = Op(operator.and_, "BAND")
BOR = Op(operator.or_, "BOR")
_PREDEFINED = ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "BAND", "BOR")


def _op(op: Op | Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    if isinstance(op, Op):
        return op.fn
    if callable(op):
        return op
    raise UsageError(f"op= takes a vmpi operation (vmpi.SUM, vmpi.MAX, ...) or a function of "
                     f"two values, not {op!r}")


def _nop(a: Any, b: Any) -> None:
    return None


# ------------------------------------------------------------------------------ status, requests
class Status:
    """What a receive matched: ``source`` (the sender's rank in the communicator) and
    ``tag``; ``Get_source()``, ``Get_tag()``, ``Get_error()`` as mpi4py's."""

    __slots__ = ("source", "tag")

    def __init__(self) -> None:
        self.source = ANY_SOURCE
        self.tag = ANY_TAG

    def Get_source(self) -> int:  # noqa: N802
        return self.source

    def Get_tag(self) -> int:  # noqa: N802
        return self.tag

    def Get_error(self) -> int:  # noqa: N802
        return 0

    def __repr__(self) -> str:
        return f"Status(source={self.source}, tag={self.tag})"


class _Wake:
    """One wake-up of a waiting rank (a future sent at most once)."""

    __slots__ = ("fired", "fut")

    def __init__(self) -> None:
        from shoal.runtime.api import future

        self.fut: Future = future()
        self.fired = False

    def fire(self) -> None:
        if not self.fired:
            self.fired = True
            self.fut.send(None)


class _Done:
    """What ``send`` returns: an awaitable that is complete at once."""

    __slots__ = ()

    def __await__(self) -> Iterator[Any]:
        return iter(())  # (completes without suspending)


_DONE = _Done()


class Request:
    """An ``isend`` (complete at once: the message is on its way) or an ``irecv`` (complete
    once a matching message has arrived). ``await req.wait(status)`` gives the received
    object (None for a send); ``flag, obj = await req.test(status)`` does not wait, but lets
    the PE run its other work first when the request is not complete (a loop of tests makes
    progress)."""

    __slots__ = ("_ctx", "_data", "_done", "_source", "_tag", "_wakes", "msource", "mtag")

    def __init__(self, ctx: Hashable, source: int, tag: int):
        self._ctx = ctx
        self.msource = source  # what it matches
        self.mtag = tag
        self._done = False
        self._data: Any = None
        self._source = source
        self._tag = tag
        self._wakes: list[_Wake] = []

    def _complete(self, source: int, tag: int, data: Any) -> None:
        self._done = True
        self._data = data
        self._source = source
        self._tag = tag
        wakes, self._wakes = self._wakes, []
        for w in wakes:
            w.fire()

    def _result(self, status: Status | None) -> Any:
        if status is not None:
            status.source = self._source
            status.tag = self._tag
        data = self._data
        if type(data) is _Pickled:
            data = self._data = pickle.loads(data.blob)
        return data

    async def wait(self, status: Status | None = None) -> Any:
        if not self._done:
            w = _Wake()
            self._wakes.append(w)
            await w.fut
        return self._result(status)

    Wait = wait

    async def test(self, status: Status | None = None) -> tuple[bool, Any]:
        if not self._done:
            await _yield()
            if not self._done:
                return False, None
        return True, self._result(status)

    Test = test

    @staticmethod
    async def waitall(requests: Sequence[Request],
                      statuses: list[Status] | None = None) -> list[Any]:
        """Every request's object, in order (``statuses``: filled in order, when given)."""
        out = []
        for k, req in enumerate(requests):
            out.append(await req.wait(None if statuses is None else statuses[k]))
        return out

    Waitall = waitall

    @staticmethod
    async def waitany(requests: Sequence[Request],
                      status: Status | None = None) -> tuple[int, Any]:
        """``(index, object)`` of a completed request (the first in the list that is)."""
        if not requests:
            return UNDEFINED, None
        if isinstance(requests[0], _NativeRequest):
            return await _NativeRequest.waitany(requests, status)
        while True:
            for k, req in enumerate(requests):
                if req._done:
                    return k, req._result(status)
            w = _Wake()
            for req in requests:
                req._wakes.append(w)
            await w.fut

    Waitany = waitany

    @staticmethod
    async def testall(requests: Sequence[Request],
                      statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        """``(True, objects)`` when every request is complete, else ``(False, None)`` (after
        letting the PE run its other work once)."""
        if requests and isinstance(requests[0], _NativeRequest):
            return await _NativeRequest.testall(requests, statuses)
        if not all(r._done for r in requests):
            await _yield()
            if not all(r._done for r in requests):
                return False, None
        return True, [r._result(None if statuses is None else statuses[k])
                      for k, r in enumerate(requests)]

    Testall = testall

    def __getstate__(self) -> tuple[Any, ...]:
        if not self._done:
            raise UsageError("a pending receive request cannot move with its rank: complete "
                             "every irecv before comm.migrate()")
        return (self._ctx, self.msource, self.mtag, self._data, self._source, self._tag)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._ctx, self.msource, self.mtag, self._data, self._source, self._tag = state
        self._done = True
        self._wakes = []


def _complete_request() -> Request:
    req = Request(None, PROC_NULL, ANY_TAG)
    req._done = True
    return req


class _Pickled:
    """A message's object as mpi4py sends it: pickled when sent (the sender may change the
    object afterwards), unpickled when received."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes):
        self.blob = blob

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Pickled, (self.blob,))


_AS_IS = (int, float, complex, bool, str, bytes, type(None))


def _pack(obj: Any) -> Any:
    """The object a message carries: immutable scalars as they are, a numpy array copied
    (its buffer travels outside the pickle), anything else pickled now."""
    t = type(obj)
    if t in _AS_IS:
        return obj
    if t is np.ndarray and not obj.dtype.hasobject:
        return obj.copy()
    return _Pickled(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


class _Migrating(BaseException):
    """Raised by ``comm.migrate()``: ends the rank's frame (a BaseException, so ``except
    Exception`` in the rank's code does not stop it)."""

    def __init__(self, pe: int | None = None):
        super().__init__(pe)
        self.pe = pe


# ------------------------------------------------------------------------------ the rank chare
def _current_rank() -> _VRank:
    from shoal.runtime.context import current

    slot = current().current
    obj = None if slot is None else slot.obj
    if not isinstance(obj, _VRank):
        raise UsageError("vmpi calls are made by a rank's code (run() of the class given to "
                         "shoal.vmpi.run), inside its coroutine")
    return obj


async def _yield() -> None:
    """Let the PE run the work queued before this (messages to this rank among it)."""
    ep = _current_rank()
    w = _Wake()
    ep._peer(ep.rank).vmpi_wake(w.fut)
    await w.fut


class _VRank(Chare):
    """One virtual rank: an element of the job's chare array, holding the user's rank object,
    its communicators' queues of unexpected messages and its pending receives."""

    def __init__(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], resume: str,
                 nranks: int):
        self.rank = self.thisIndex[0]
        self.user = cls(*args, **kwargs)
        self.resume = resume
        self.world = Comm(0, None, self.rank, nranks)
        self.unexpected: dict[Hashable, deque[tuple[int, int, Any]]] = {}
        self.posted: dict[Hashable, list[Request]] = {}  # (never migrates: see migrate())
        self.probes: dict[Hashable, list[_Wake]] = {}
        self.done: Future | None = None
        self.checked = False  # has the user's object been pickled once (first migrate())
        self.arriving = False  # moving by migrate_to(): re-enter on arrival
        self.entries = 0
        self._peers: list[Any] | None = None

    # -- messages
    def _peer(self, world_rank: int) -> Any:
        peers = self._peers
        if peers is None:
            proxy = self.thisProxy
            peers = self._peers = [proxy[r] for r in range(self.world.size)]
        return peers[world_rank]

    def vmpi_msg(self, ctx: Hashable, source: int, tag: int, data: Any) -> None:
        """A message arrived: to the first posted receive it matches, else queued."""
        posted = self.posted.get(ctx)
        if posted:
            for k, req in enumerate(posted):
                s, t = req.msource, req.mtag
                if (s == source or s == ANY_SOURCE) and (t == tag or (t == ANY_TAG and tag >= 0)):
                    del posted[k]
                    if not posted:
                        del self.posted[ctx]
                    req._complete(source, tag, data)
                    return
        box = self.unexpected.get(ctx)
        if box is None:
            box = self.unexpected[ctx] = deque()
        box.append((source, tag, data))
        probes = self.probes.pop(ctx, None)
        if probes:
            for w in probes:
                w.fire()

    def vmpi_wake(self, fut: Future) -> None:
        fut.send(None)

    def _take(self, ctx: Hashable, source: int, tag: int, remove: bool = True
             ) -> tuple[int, int, Any] | None:
        """The first queued message of ``ctx`` that matches (taken out unless ``remove`` is
        False), or None."""
        box = self.unexpected.get(ctx)
        if not box:
            return None
        for k, msg in enumerate(box):
            s, t = msg[0], msg[1]
            if (source == s or source == ANY_SOURCE) and (tag == t or (tag == ANY_TAG and t >= 0)):
                if remove:
                    del box[k]
                    if not box:
                        del self.unexpected[ctx]
                return msg
        return None

    def _irecv(self, ctx: Hashable, source: int, tag: int) -> Request:
        req = Request(ctx, source, tag)
        msg = self._take(ctx, source, tag)
        if msg is not None:
            req._complete(*msg)
        else:
            self.posted.setdefault(ctx, []).append(req)
        return req

    # -- running the rank's code
    async def vmpi_start(self, done: Future) -> None:
        self.done = done
        await self._enter(self.user.run)

    async def resume_from_sync(self) -> None:  # type: ignore[override] # (a coroutine)
        await self._enter(getattr(self.user, self.resume))

    async def vmpi_resume(self) -> None:
        await self._enter(getattr(self.user, self.resume))

    async def _enter(self, method: Callable[[Comm], Coroutine[Any, Any, Any]]) -> None:
        self.entries += 1
        try:
            result = await method(self.world)
        except _Migrating as m:
            self._migrating(m.pe)
            return
        assert self.done is not None
        from shoal.runtime.reducers import Reducer

        self.contribute(result, Reducer.gather, self.done)

    def _migrating(self, pe: int | None) -> None:
        if pe is None:
            self.at_sync()
        elif pe == _my_pe():
            self.thisProxy[self.rank].vmpi_resume()
        else:
            self.arriving = True
            self.migrate(pe)

    def on_migrated(self) -> None:
        self._peers = None
        if self.arriving:
            self.arriving = False
            self.thisProxy[self.rank].vmpi_resume()

    def _check_state(self) -> None:
        """The first ``migrate()`` of a rank: its object must pickle (it will, when moved)."""
        if self.posted:
            n = sum(len(v) for v in self.posted.values())
            raise UsageError(f"rank {self.rank}: comm.migrate() with {n} receive(s) still "
                             "pending (irecv not completed): complete them first, a pending "
                             "request cannot move with the rank")
        if not self.checked:
            try:
                pickle.dumps(self.user, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                raise UsageError(f"rank {self.rank}: its object ({type(self.user).__name__}) "
                                 f"must pickle to migrate, and does not: {exc}") from exc
            self.checked = True

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("_peers") is not None or state.get("posted"):
            state = dict(state)
            state["_peers"] = None
            if state["posted"]:
                raise UsageError(f"rank {self.rank} moves with pending receives")
        return state


def _my_pe() -> int:
    from shoal.runtime.api import my_pe

    return my_pe()


# ------------------------------------------------------------------------------ communicators
class Comm:
    """A communicator of virtual ranks (mpi4py's ``Intracomm``, lower-case API). It pickles
    as its data (context, members, rank): keep it in the rank object, it moves with it."""

    __slots__ = ("_ctx", "_derived", "_group", "rank", "size")

    def __init__(self, ctx: Hashable, group: tuple[int, ...] | None, rank: int, size: int):
        self._ctx = ctx
        self._group = group  # world rank of each rank, None for the world itself
        self.rank = rank
        self.size = size
        self._derived = 0  # communicators made from it so far (Split, Dup)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self._ctx, self._group, self.rank, self.size, self._derived)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._ctx, self._group, self.rank, self.size, self._derived = state

    def __repr__(self) -> str:
        return f"<vmpi.Comm {self._ctx!r}: rank {self.rank} of {self.size}>"

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def _world(self, rank: int) -> int:
        return rank if self._group is None else self._group[rank]

    def _check_rank(self, rank: int, what: str) -> None:
        if not (isinstance(rank, (int, np.integer)) and 0 <= rank < self.size):
            raise UsageError(f"{what} {rank!r} is not a rank of this communicator "
                             f"(0..{self.size - 1}, or PROC_NULL)")

    # -- point to point
    def _send(self, data: Any, dest: int, tag: int) -> None:
        ep = _current_rank()
        ep._peer(self._world(dest)).vmpi_msg(self._ctx, self.rank, tag, data)

    def send(self, obj: Any, dest: int, tag: int = 0) -> _Done:
        """Send ``obj`` to rank ``dest`` (copied or pickled now: ``obj`` may change once this
        returns). Returns at once; ``await comm.send(...)`` is allowed too."""
        if dest == PROC_NULL:
            return _DONE
        self._check_rank(dest, "dest")
        if tag < 0:
            raise UsageError(f"tag {tag} < 0: tags of messages are >= 0 (ANY_TAG is for receives)")
        self._send(_pack(obj), dest, tag)
        return _DONE

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """``send`` as a request (complete at once)."""
        self.send(obj, dest, tag)
        return _complete_request()

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """A request for the next message from ``source`` with ``tag`` (wildcards allowed);
        ``buf`` is ignored (objects are received whole)."""
        if source == PROC_NULL:
            req = _complete_request()
            req._source = PROC_NULL
            return req
        if source != ANY_SOURCE:
            self._check_rank(source, "source")
        return _current_rank()._irecv(self._ctx, source, tag)

    async def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                   status: Status | None = None) -> Any:
        """The object of the next message from ``source`` with ``tag``."""
        return await self.irecv(buf, source, tag).wait(status)

    async def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                       source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                       status: Status | None = None) -> Any:
        self.send(sendobj, dest, sendtag)
        return await self.recv(recvbuf, source, recvtag, status)

    async def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                    status: Status | None = None) -> bool:
        """Wait until a matching message is there to receive (it stays there)."""
        ep = _current_rank()
        while True:
            msg = ep._take(self._ctx, source, tag, remove=False)
            if msg is not None:
                if status is not None:
                    status.source, status.tag = msg[0], msg[1]
                return True
            w = _Wake()
            ep.probes.setdefault(self._ctx, []).append(w)
            await w.fut

    async def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                     status: Status | None = None) -> bool:
        """Whether a matching message is there to receive (after letting the PE run its
        other work once when none is)."""
        ep = _current_rank()
        msg = ep._take(self._ctx, source, tag, remove=False)
        if msg is None:
            await _yield()
            msg = ep._take(self._ctx, source, tag, remove=False)
            if msg is None:
                return False
        if status is not None:
            status.source, status.tag = msg[0], msg[1]
        return True

    async def _recv_internal(self, source: int, tag: int) -> Any:
        return await _current_rank()._irecv(self._ctx, source, tag).wait()

    # -- collectives (trees over the ranks relative to the root)
    async def barrier(self) -> None:
        await self.allreduce(None, _nop)

    Barrier = barrier

    async def bcast(self, obj: Any = None, root: int = 0) -> Any:
        """``obj`` of ``root``, on every rank (a binomial tree; each rank gets its own
        copy)."""
        self._check_rank(root, "root")
        size = self.size
        vr = (self.rank - root) % size
        mask = 1
        while mask < size:
            if vr & mask:
                obj = await self._recv_internal((vr - mask + root) % size, _BCAST)
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if vr + mask < size:
                self._send(_pack(obj), (vr + mask + root) % size, _BCAST)
            mask >>= 1
        return obj

    async def reduce(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM,
                     root: int = 0) -> Any:
        """The values of every rank combined by ``op`` on ``root`` (None elsewhere): a
        binomial tree over the ranks counted from ``root``, each node combining
        ``op(its subtree's lower part, the next part)``, so the order is fixed."""
        self._check_rank(root, "root")
        fn = _op(op)
        size = self.size
        vr = (self.rank - root) % size
        acc = sendobj
        mask = 1
        while mask < size:
            if vr & mask:
                self._send(_pack(acc), (vr - mask + root) % size, _REDUCE)
                return None
            if vr + mask < size:
                child = await self._recv_internal((vr + mask + root) % size, _REDUCE)
                acc = fn(acc, child)
            mask <<= 1
        return acc

    async def allreduce(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        """``reduce`` to rank 0, then ``bcast``: every rank gets the same result, bit for
        bit."""
        total = await self.reduce(sendobj, op, 0)
        return await self.bcast(total, 0)

    async def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """The list of every rank's ``sendobj`` on ``root`` (rank order), None elsewhere."""
        self._check_rank(root, "root")
        if self.rank != root:
            self._send(_pack(sendobj), root, _GATHER)
            return None
        out: list[Any] = []
        for r in range(self.size):
            if r == root:
                out.append(sendobj)
                continue
            out.append(await self._recv_internal(r, _GATHER))
        return out

    async def allgather(self, sendobj: Any) -> list[Any]:
        out = await self.gather(sendobj, 0)
        return await self.bcast(out, 0)

    async def scatter(self, sendobj: Sequence[Any] | None = None, root: int = 0) -> Any:
        """Item ``r`` of ``root``'s ``sendobj`` (a sequence of ``size`` items) to rank ``r``."""
        self._check_rank(root, "root")
        if self.rank == root:
            if sendobj is None or len(sendobj) != self.size:
                raise UsageError(f"scatter: the root gives a sequence of {self.size} items, "
                                 f"one per rank, not {sendobj!r:.80}")
            items = list(sendobj)
            for r in range(self.size):
                if r != root:
                    self._send(_pack(items[r]), r, _SCATTER)
            return items[root]
        return await self._recv_internal(root, _SCATTER)

    async def alltoall(self, sendobj: Sequence[Any]) -> list[Any]:
        """Item ``r`` of every rank's ``sendobj`` to rank ``r``: the list, by sender."""
        if len(sendobj) != self.size:
            raise UsageError(f"alltoall: give a sequence of {self.size} items, one per rank")
        items = list(sendobj)
        for r in range(self.size):
            if r != self.rank:
                self._send(_pack(items[r]), r, _ALLTOALL)
        out = []
        for r in range(self.size):
            if r == self.rank:
                out.append(items[r])
            else:
                out.append(await self._recv_internal(r, _ALLTOALL))
        return out

    async def scan(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        """Ranks 0..rank combined in rank order (a chain)."""
        fn = _op(op)
        acc = sendobj
        if self.rank > 0:
            prev = await self._recv_internal(self.rank - 1, _SCAN)
            acc = fn(prev, sendobj)
        if self.rank + 1 < self.size:
            self._send(_pack(acc), self.rank + 1, _SCAN)
        return acc

    async def exscan(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        """Ranks 0..rank-1 combined in rank order; None on rank 0 (MPI leaves it undefined)."""
        fn = _op(op)
        prev = None
        if self.rank > 0:
            prev = await self._recv_internal(self.rank - 1, _SCAN)
        if self.rank + 1 < self.size:
            acc = sendobj if self.rank == 0 else fn(prev, sendobj)
            self._send(_pack(acc), self.rank + 1, _SCAN)
        return prev

    # -- communicators
    async def Split(self, color: int = 0, key: int = 0) -> Comm | None:  # noqa: N802
        """The ranks that give the same ``color`` form a new communicator, ranked by ``key``
        then by rank here; ``color=UNDEFINED`` gives None (mpi4py's ``COMM_NULL``)."""
        mine = (color, key, self.rank)
        everyone = await self.allgather(mine)
        self._derived += 1
        if color == UNDEFINED:
            return None
        members = sorted((k, r) for c, k, r in everyone if c == color)
        ranks = [r for _, r in members]
        group = tuple(self._world(r) for r in ranks)
        return Comm((self._ctx, self._derived, color), group, ranks.index(self.rank),
                    len(group))

    async def Dup(self) -> Comm:  # noqa: N802
        """A communicator of the same ranks whose messages never match this one's."""
        await self.barrier()
        self._derived += 1
        group = self._group if self._group is not None else None
        return Comm((self._ctx, self._derived, "dup"), group, self.rank, self.size)

    Clone = Dup

    def Free(self) -> None:  # noqa: N802
        """Nothing to free (messages still queued for it are dropped with the rank)."""

    # -- migration
    async def migrate(self) -> None:
        """A migration point (AtSync), collective over every rank of the job: ends this
        rank's ``run`` (see the module doc), lets the balancer move ranks, and enters the
        rank again by its ``resume`` method."""
        _current_rank()._check_state()
        raise _Migrating()

    async def migrate_to(self, pe: int) -> None:
        """Move this rank alone to PE ``pe`` (not collective), re-entered there."""
        from shoal.runtime.api import num_pes

        if not (isinstance(pe, int) and 0 <= pe < num_pes()):
            raise UsageError(f"migrate_to: a PE in [0, {num_pes()}), not {pe!r}")
        _current_rank()._check_state()
        raise _Migrating(pe)


# ------------------------------------------------------------------------------ running
class _Results:
    value: list[Any] | None = None
    info: dict[str, Any] | None = None


def last_run() -> dict[str, Any]:
    """On the first process, after :func:`run`: ``nranks``, ``pes``, ``seconds`` (from the
    ranks' creation to the last one's return), ``lb`` (the balancer's steps,
    :func:`shoal.lb_history`) and ``migrations`` (their sum); {} elsewhere or before."""
    return dict(_Results.info or {})


async def _main(cls: type, nranks: int | None, per_pe: int | None, args: tuple[Any, ...],
                kwargs: dict[str, Any], resume: str, placement: Any) -> None:
    from shoal.runtime.api import Array, future, lb_history, num_pes

    n = nranks if nranks is not None else (per_pe or 8) * num_pes()
    t0 = time.perf_counter()
    ranks = Array(_VRank, n, args=(cls, args, kwargs, resume, n), at_sync=True,
                  map=placement)
    done = future()
    ranks.vmpi_start(done)
    _Results.value = await done
    steps = lb_history()
    _Results.info = {"nranks": n, "pes": num_pes(), "seconds": time.perf_counter() - t0,
                     "lb": steps, "migrations": sum(s.get("migrations", 0) for s in steps)}


def run(cls: type, nranks: int | None = None, *, per_pe: int | None = None,
        args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None, resume: str = "run",
        native: bool = False, map: Any = None, **options: Any) -> list[Any] | None:
    """Run ``cls(*args, **kwargs).run(comm)`` as ``nranks`` virtual ranks (default
    ``per_pe`` per PE, 8 unless given) on the PEs of this job (``shoal run -n P prog.py``),
    and return, on the first process, the list of what each rank's ``run`` returned (rank
    order; None elsewhere). After each ``await comm.migrate()`` the rank is entered again by
    its method ``resume`` (default ``run``). ``map``: the initial placement (as
    ``shoal.Array``'s; default block: ranks 0..k-1 on PE 0, ...). ``options`` go to
    ``shoal.start`` (``lb=``, ``lb_auto=``, ``cpu_stats=``, ...; ``shoal run --lb`` sets
    them too). ``native=True``: one rank per process of a plain ``mpiexec`` through mpi4py
    (:class:`NativeComm`); ``nranks``, if given, must be the number of processes."""
    args = tuple(args)
    kwargs = dict(kwargs or {})
    if not hasattr(cls, "run") or not hasattr(cls, resume):
        raise UsageError(f"{getattr(cls, '__name__', cls)!r} needs an async def run(self, comm)"
                         + (f" and {resume}(self, comm)" if resume != "run" else ""))
    if native:
        if options:
            raise UsageError(f"native=True runs without shoal's runtime: {sorted(options)} "
                             "do not apply")
        return _run_native(cls, nranks, args, kwargs, resume)
    if nranks is not None and (not isinstance(nranks, int) or nranks < 1):
        raise UsageError(f"nranks is a number of virtual ranks >= 1, not {nranks!r}")
    from shoal.runtime.api import start

    _Results.value = _Results.info = None
    start(_main, cls, nranks, per_pe, args, kwargs, resume, map, **options)
    return _Results.value


# ------------------------------------------------------------------------------ native mpi4py
def _drive(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends (NativeComm's calls complete inside mpi4py)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise UsageError("under native=True a rank awaited something other than a vmpi call "
                     "(shoal's futures need the runtime)")


def _run_native(cls: type, nranks: int | None, args: tuple[Any, ...], kwargs: dict[str, Any],
                resume: str) -> list[Any] | None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if nranks is not None and nranks != comm.Get_size():
        raise UsageError(f"native=True runs one rank per process: nranks={nranks}, but "
                         f"mpiexec started {comm.Get_size()} processes")
    try:
        user = cls(*args, **kwargs)
        world = NativeComm(comm)
        method = user.run
        while True:
            try:
                result = _drive(method(world))
                break
            except _Migrating:
                method = getattr(user, resume)
    except BaseException:  # the other ranks would wait for this one forever: end the job
        import traceback

        traceback.print_exc()
        sys.stderr.write(f"shoal.vmpi: rank {comm.Get_rank()} failed: the job ends\n")
        sys.stderr.flush()
        comm.Abort(1)
    return comm.gather(result, root=0)


class _NativeRequest:
    __slots__ = ("_req",)

    def __init__(self, req: Any):
        self._req = req

    async def wait(self, status: Status | None = None) -> Any:
        st = _mpi_status(status)
        value = self._req.wait(st)
        _fill(status, st)
        return value

    Wait = wait

    async def test(self, status: Status | None = None) -> tuple[bool, Any]:
        st = _mpi_status(status)
        flag, value = self._req.test(st)
        if flag:
            _fill(status, st)
        return flag, value

    Test = test

    @staticmethod
    async def waitall(requests: Sequence[_NativeRequest],
                      statuses: list[Status] | None = None) -> list[Any]:
        out = []
        for k, r in enumerate(requests):
            out.append(await r.wait(None if statuses is None else statuses[k]))
        return out

    @staticmethod
    async def waitany(requests: Sequence[_NativeRequest],
                      status: Status | None = None) -> tuple[int, Any]:
        from mpi4py import MPI

        st = _mpi_status(status)
        k, value = MPI.Request.waitany([r._req for r in requests], st)
        _fill(status, st)
        return k, value

    @staticmethod
    async def testall(requests: Sequence[_NativeRequest],
                      statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        from mpi4py import MPI

        flag, values = MPI.Request.testall([r._req for r in requests])
        return bool(flag), (values if flag else None)


def _mpi_status(status: Status | None) -> Any:
    if status is None:
        return None
    from mpi4py import MPI

    return MPI.Status()


def _fill(status: Status | None, st: Any) -> None:
    if status is not None:
        from mpi4py import MPI

        src, tag = st.Get_source(), st.Get_tag()
        status.source = {MPI.PROC_NULL: PROC_NULL, MPI.ANY_SOURCE: ANY_SOURCE}.get(src, src)
        status.tag = ANY_TAG if tag == MPI.ANY_TAG else tag


def _src(rank: int) -> int:
    from mpi4py import MPI

    return MPI.ANY_SOURCE if rank == ANY_SOURCE else MPI.PROC_NULL if rank == PROC_NULL else rank


def _tag(tag: int) -> int:
    from mpi4py import MPI

    return MPI.ANY_TAG if tag == ANY_TAG else tag


@functools.cache
def _mpi_op(fn: Callable[[Any, Any], Any]) -> Any:
    from mpi4py import MPI

    def combine(a: Any, b: Any, _datatype: Any = None) -> Any:
        return fn(a, b)

    return MPI.Op.Create(combine, commute=True)


class NativeComm:
    """The same interface over an mpi4py communicator (``run(..., native=True)``): each call
    is mpi4py's lower-case one, completed before the await returns."""

    __slots__ = ("_comm", "rank", "size")

    def __init__(self, comm: Any):
        self._comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def send(self, obj: Any, dest: int, tag: int = 0) -> _Done:
        self._comm.send(obj, _src(dest), tag)
        return _DONE

    def isend(self, obj: Any, dest: int, tag: int = 0) -> _NativeRequest:
        return _NativeRequest(self._comm.isend(obj, _src(dest), tag))

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG
              ) -> _NativeRequest:
        return _NativeRequest(self._comm.irecv(buf, _src(source), _tag(tag)))

    async def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                   status: Status | None = None) -> Any:
        st = _mpi_status(status)
        value = self._comm.recv(buf, _src(source), _tag(tag), st)
        _fill(status, st)
        return value

    async def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                       source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                       status: Status | None = None) -> Any:
        st = _mpi_status(status)
        value = self._comm.sendrecv(sendobj, _src(dest), sendtag, recvbuf, _src(source),
                                    _tag(recvtag), st)
        _fill(status, st)
        return value

    async def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                    status: Status | None = None) -> bool:
        st = _mpi_status(status)
        self._comm.probe(_src(source), _tag(tag), st)
        _fill(status, st)
        return True

    async def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                     status: Status | None = None) -> bool:
        st = _mpi_status(status)
        flag = bool(self._comm.iprobe(_src(source), _tag(tag), st))
        if flag:
            _fill(status, st)
        return flag

    async def barrier(self) -> None:
        self._comm.barrier()

    Barrier = barrier

    async def bcast(self, obj: Any = None, root: int = 0) -> Any:
        return self._comm.bcast(obj, root)

    async def reduce(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM,
                     root: int = 0) -> Any:
        return self._comm.reduce(sendobj, _mpi_op(_op(op)), root)

    async def allreduce(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        return self._comm.allreduce(sendobj, _mpi_op(_op(op)))

    async def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        return self._comm.gather(sendobj, root)

    async def allgather(self, sendobj: Any) -> list[Any]:
        return self._comm.allgather(sendobj)

    async def scatter(self, sendobj: Sequence[Any] | None = None, root: int = 0) -> Any:
        return self._comm.scatter(sendobj, root)

    async def alltoall(self, sendobj: Sequence[Any]) -> list[Any]:
        return self._comm.alltoall(sendobj)

    async def scan(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        return self._comm.scan(sendobj, _mpi_op(_op(op)))

    async def exscan(self, sendobj: Any, op: Op | Callable[[Any, Any], Any] = SUM) -> Any:
        value = self._comm.exscan(sendobj, _mpi_op(_op(op)))
        return None if self.rank == 0 else value

    async def Split(self, color: int = 0, key: int = 0) -> NativeComm | None:  # noqa: N802
        from mpi4py import MPI

        sub = self._comm.Split(MPI.UNDEFINED if color == UNDEFINED else color, key)
        return None if sub == MPI.COMM_NULL else NativeComm(sub)

    async def Dup(self) -> NativeComm:  # noqa: N802
        return NativeComm(self._comm.Dup())

    Clone = Dup

    def Free(self) -> None:  # noqa: N802
        self._comm.Free()

    async def migrate(self) -> None:
        """Nothing moves under plain MPI; the rank is entered again, as under shoal."""
        raise _Migrating()

    async def migrate_to(self, pe: int) -> None:
        raise _Migrating()


