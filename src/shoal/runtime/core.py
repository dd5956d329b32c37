"""One PE of the runtime: a message-driven scheduler over MPI (seed 002, Sections II-III).

Each MPI rank is a PE. Its scheduler alternates between the network (envelopes from other
PEs) and a local queue of work (entry-method invocations, coroutine resumptions), lowest
priority value first and FIFO among equals. When there is nothing to do it spins for
``poll_spin`` seconds, sleeps 10 µs at a time until it has been idle for ``10 poll_spin``,
then sleeps with exponential back-off up to ``poll_max`` seconds. A message that reaches a
recently busy PE waits about 10 µs; one that reaches a long idle PE waits up to
``poll_max`` (the latency / idle-CPU trade-off; an idle PE costs about 20 µs of CPU per
sleep). Without the short sleeps, two PEs that exchange messages slower than ``poll_spin``
fall into a steady state where each one's reply waits for the other's wake-up.

Location management and migration live in :mod:`shoal.runtime.mobility`, broadcasts,
reductions, channels and quiescence in :mod:`shoal.runtime.collectives`, the envelopes in
:mod:`shoal.runtime.protocol`.
"""

from __future__ import annotations

import heapq
import sys
import time
import traceback
from collections import deque
from types import CoroutineType

from numpy import ndarray

from shoal.errors import ShoalError, UsageError
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.collectives import Collectives
from shoal.runtime.context import current, set_current
from shoal.runtime.futures import Future, Task
from shoal.runtime.maps import check_map, local_indices
from shoal.runtime.mobility import Mobility
from shoal.runtime.protocol import (
    BCAST_REQ,
    COUNTED,
    CREATE,
    EXIT,
    EXIT_REQ,
    FUT,
    INVOKE,
    LOC,
    RET,
    children,
)
from shoal.runtime.proxy import CollectionProxy, ElementProxy, proxy_classes
from shoal.runtime.wire.codec import pack_args, unpack_args
from shoal.runtime.wire.transport import Transport

__all__ = ["Runtime", "current"]

SHM_BYTES = 32 << 20  # shared memory per PE for large buffers to PEs of its node


def _precise_sleep() -> None:
    """Ask Linux for 1 µs timer slack (the default, 50 µs, turns a 10 µs back-off sleep into
    60 µs of added latency). Elsewhere, or if refused, sleeps stay as they are."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
        except (OSError, AttributeError):
            pass


class _OnPE:
    """The map of a single chare: everything on one PE."""

    def __init__(self, pe: int):
        self.pe = pe

    def __call__(self, index, dims, npes) -> int:
        return self.pe


class Runtime(Mobility, Collectives):
    """The scheduler, location manager and collectives of one PE.

    ``poll_spin`` and ``poll_max`` (seconds) set the idle back-off; ``instrument`` records
    the calls and wall time of every entry method per element (on by default, for the load
    balancer); ``cpu_stats`` adds each call's CPU time (about 1 µs per call more). Messages
    and bytes between elements are always counted: the counts are the sequence numbers.
    ``shm_bytes`` is the shared memory each PE keeps for the large buffers it sends to PEs
    of its node (0: every buffer goes by MPI); it must be the same on every PE.
    """

    def __init__(self, comm, *, poll_spin: float = 2e-4, poll_max: float = 1e-3,
                 instrument: bool = True, cpu_stats: bool = False, shm_bytes: int = SHM_BYTES):
        if not (0 <= poll_spin and 0 < poll_max):
            raise UsageError("poll_spin must be >= 0 and poll_max > 0 (seconds)")
        if not (isinstance(shm_bytes, int) and shm_bytes >= 0):
            raise UsageError(f"shm_bytes must be a whole number of bytes >= 0, not {shm_bytes!r}")
        self.net = Transport(comm, shm_bytes)
        _precise_sleep()
        self.pe = self.net.rank
        self.npes = self.net.size
        self.poll_spin = poll_spin
        self.poll_max = poll_max
        self.instrument = instrument
        self.cpu_stats = cpu_stats and instrument
        self.colls: dict[int, Collection] = {}
        self.early: dict[int, list] = {}  # envelopes for collections not yet created here
        self.futures: dict[int, Future] = {}
        self.nfut = 0
        self.ncoll = 0
        self.pe_key = (-1, self.pe)
        self.pe_out: dict = {}
        self.current: Slot | None = None
        self.fifo: deque = deque()
        self.heap: list = []
        self.nheap = 0
        self.timers: list = []
        self.running = False
        self.direct = False  # may a message from the network run at once (nothing queued)?
        self.created = 0
        self.processed = 0
        self.idle = 0.0
        self._work = None  # what runs now, for error reports
        # quiescence detection (waves from PE 0)
        self.qd_waiters: list = []
        self.qd_wave = 0
        self.qd_acc: list = [0, 0, 0]  # created, processed, replies of the current wave
        self.qd_last = None
        self.qd_delay = 5e-4

    # ----------------------------------------------------------------- start and stop
    def run(self, main=None, *args) -> None:
        """Run the scheduler until ``exit``; ``main(*args)`` runs on PE 0 (a coroutine
        function or a plain one) and the job exits when it returns."""
        set_current(self)
        try:
            self.running = True
            if self.pe == 0 and main is not None:
                self._push(0, _MAIN, main, args)
            self._loop()
            self._finish()
        except BaseException as exc:  # noqa: BLE001 - one failing PE ends the whole job
            self._abort(exc)
        finally:
            set_current(None)

    def exit(self) -> None:
        """End the job on every PE."""
        self._send(0, (EXIT_REQ,))

    def _abort(self, exc: BaseException) -> None:
        where = f"PE {self.pe}"
        if self._work is not None:
            slot, method = self._work
            if slot is not None:
                where += f", {slot.coll.cls.__name__}{list(slot.index)}.{method}"
            else:
                where += f", {method}"
        text = "".join(traceback.format_exception(exc))
        sys.stderr.write(f"shoal: {where}: {text}")
        sys.stderr.flush()
        self.net.comm.Abort(1)

    def _finish(self) -> None:
        """Let every send complete and every PE stop before the communicators go away."""
        sleep = 1e-5
        while not self.net.reap():
            if self.net.poll() is None:
                time.sleep(sleep)
                sleep = min(2 * sleep, self.poll_max)
        req = self.net.comm.Ibarrier()
        while not req.Test():
            if self.net.poll() is None:
                time.sleep(sleep)
                sleep = min(2 * sleep, self.poll_max)
        self.net.close()

    # ----------------------------------------------------------------- the scheduler
    def _push(self, prio: int, kind, a, b) -> None:
        self.created += 1
        if prio == 0:
            self.fifo.append((kind, a, b))
        else:
            self.nheap += 1
            heapq.heappush(self.heap, (prio, self.nheap, kind, a, b))

    def _loop(self) -> None:
        poll = self.net.poll
        handlers = _HANDLERS
        idle_from = None
        sleep = 1e-5
        while self.running:
            env = poll()  # one envelope, then the work it made: the reply leaves sooner
            busy = env is not None
            if busy:
                kind = env[0]
                if kind < COUNTED:
                    self.processed += 1
                self.direct = True
                handlers[kind](self, env)
                self.direct = False
            n = 0
            fifo, heap = self.fifo, self.heap
            while (fifo or heap) and n < 32:
                if heap and (heap[0][0] < 0 or not fifo):
                    kind, a, b = heapq.heappop(heap)[2:]
                else:
                    kind, a, b = fifo.popleft()
                self.processed += 1
                kind(self, a, b)
                n += 1
                fifo, heap = self.fifo, self.heap  # _extract may replace them
            if self.timers and self.timers[0][0] <= time.perf_counter():
                _, _, fn = heapq.heappop(self.timers)
                fn()
                busy = True
            if busy or n:
                if idle_from is not None:
                    self.idle += time.perf_counter() - idle_from
                    idle_from = None
                    sleep = 1e-5
                continue
            now = time.perf_counter()
            if idle_from is None:
                idle_from = quiet_from = now
            if not self.net.reap(64):
                # a large message moves only while its sender tests it: no sleep before
                # every send has completed, and the spin starts when the last one has
                quiet_from = now
            elif now - quiet_from > self.poll_spin:
                time.sleep(sleep)
                if now - quiet_from > 10 * self.poll_spin:  # idle for long: back off
                    sleep = min(2 * sleep, self.poll_max)
        if idle_from is not None:
            self.idle += time.perf_counter() - idle_from

    def sleep(self, delay: float) -> Future:
        """A future resolved after ``delay`` seconds (counted as pending work, so quiescence
        waits for it)."""
        if not delay >= 0:
            raise UsageError(f"sleep for a duration >= 0 s, not {delay!r}")
        fut = self.future()
        self.created += 1

        def wake():
            self.processed += 1
            self.resolve(self.pe, fut.fid, None)

        self._after(delay, wake)
        return fut

    def _after(self, delay: float, fn) -> None:
        self.nheap += 1
        heapq.heappush(self.timers, (time.perf_counter() + delay, self.nheap, fn))

    def _send(self, dest: int, env: tuple, shared: bool = True) -> int:
        """Send an envelope; to this PE it goes through the local queue (no pickling).
        ``shared=False``: its buffers stay out of shared memory (the receiver keeps it)."""
        if dest == self.pe:
            self._push(0, _ENVELOPE, env, None)
            return 0
        nbytes = self.net.send(dest, env, shared)
        if env[0] < COUNTED:
            self.created += 1  # once sent: a message that failed to pickle never existed
        return nbytes

    # ----------------------------------------------------------------- collections
    def create(self, kind: str, cls, dims, ndims, args: tuple, mapping) -> CollectionProxy:
        """Create an array (``dims`` dense, or ``ndims`` sparse) or a group on every PE."""
        from shoal.runtime.chare import Chare

        if not (isinstance(cls, type) and issubclass(cls, Chare)):
            raise UsageError(f"{cls!r} is not a subclass of shoal.Chare")
        check_map(mapping)
        if dims is not None:
            dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
            if not all(isinstance(d, int) and d > 0 for d in dims):
                raise UsageError(f"dims must be positive integers, not {dims!r}")
            ndims = len(dims)
        if not (isinstance(ndims, int) and 1 <= ndims <= 6):
            raise UsageError(f"an array has 1 to 6 dimensions (got {ndims!r}): give dims=(...) "
                             "or ndims=k for an array filled by insertion")
        cid = (self.pe << 20) | self.ncoll
        self.ncoll += 1
        proxy_classes(cls)  # a clash of names is the caller's error, raised here
        self._on_create((CREATE, self.pe, cid, kind, cls, ndims, dims, mapping, args))
        return self.colls[cid].proxy

    def _on_create(self, env) -> None:
        _, root, cid, kind, cls, ndims, dims, mapping, args = env
        for child in children(self.pe, root, self.npes):
            self._send(child, env)
        coll = Collection(cid, kind, cls, ndims, dims, mapping, self.npes)
        self.colls[cid] = coll
        if dims is not None:
            for index in local_indices(mapping, dims, self.npes, self.pe):
                self._construct(coll, index, args)
        for early in self.early.pop(cid, ()):
            _HANDLERS[early[0]](self, early)

    def _construct(self, coll: Collection, index: tuple, args: tuple) -> Slot:
        slot = Slot(coll, index)
        obj = coll.cls.__new__(coll.cls)
        obj._slot = slot
        slot.obj = obj
        coll.local[index] = slot
        saved, self.current = self.current, slot
        saved_work, self._work = self._work, (slot, "__init__")
        obj.__init__(*args)
        self.current, self._work = saved, saved_work
        return slot

    def _coll(self, cid: int, env) -> Collection | None:
        """The collection, or None after parking ``env`` until its creation arrives."""
        coll = self.colls.get(cid)
        if coll is None:
            self.early.setdefault(cid, []).append(env)
        return coll

    # ----------------------------------------------------------------- entry methods
    def call(self, target, name: str, args: tuple, kwargs, ret: bool, prio: int):
        """Send ``name(*args, **kwargs)`` to an element or (broadcast) a whole collection."""
        fut = self.future() if ret else None
        if isinstance(target, ElementProxy):
            self.invoke(target.cid, target.index, name, args, kwargs, prio, fut)
        elif isinstance(target, CollectionProxy):
            self._send(0, (BCAST_REQ, target.cid, name, args, kwargs, prio, fut))
        else:
            raise UsageError(f"cannot send to {target!r}: not a proxy")
        return fut

    def invoke(self, cid, index, name, args, kwargs, prio, fut) -> None:
        """Send one entry-method call to element ``index`` of collection ``cid``."""
        src_slot = self.current
        if src_slot is None:
            src, out = self.pe_key, self.pe_out
        else:
            src, out = src_slot.key, src_slot.out
        dst = (cid, index)
        stat = out.get(dst)  # [messages sent so far = next sequence number, bytes]
        if stat is None:
            stat = out[dst] = [0, 0]
        seq = stat[0]
        stat[0] = seq + 1
        coll = self.colls.get(cid)
        slot = None if coll is None else coll.local.get(index)
        if slot is None:  # another PE's: arrays leave numpy's pickling (same PE: no copy)
            for a in args:
                if type(a) is ndarray:
                    args = pack_args(args)
                    break
        env = (INVOKE, cid, index, name, args, kwargs, src, seq, prio, fut, self.pe, 0)
        if slot is not None:
            self._accept(slot, env)
            return
        if coll is None:  # its creation has not reached this PE yet
            self.early.setdefault(cid, []).append(env)
            return
        dest = coll.cache.get(index)
        if dest is None:  # believe it is at home until told otherwise
            dest = coll.cache[index] = coll.home(index)
        try:
            nbytes = self.net.send(dest, env)
        except BaseException:
            stat[0] = seq  # it failed to pickle: the next message takes its number
            raise
        self.created += 1
        stat[1] += nbytes

    def _on_invoke(self, env) -> None:
        coll = self.colls.get(env[1])
        if coll is None:
            self.early.setdefault(env[1], []).append(env)
            return
        index = env[2]
        slot = coll.local.get(index)
        if slot is None:
            self._route(coll, env)
            return
        if env[11] and env[10] != self.pe:  # it was forwarded: correct the sender's cache
            self.net.send(env[10], (LOC, coll.cid, index, self.pe))
        self._accept(slot, env)

    def _route(self, coll: Collection, env) -> None:
        """Forward an envelope for an element that is not here."""
        index = env[2]
        dest = coll.forward.get(index)
        if dest is None:
            h = coll.home(index)
            if h != self.pe:
                dest = h
            elif index in coll.where:
                dest = coll.where[index]
            elif index in coll.deleted:
                raise UsageError(f"a message ({env[3]!r}) was sent to element {list(index)} of "
                                 f"{coll.cls.__name__} after it was deleted")
            else:  # not inserted yet: the home keeps it until the element exists
                self.created += 1
                coll.absent.setdefault(index, []).append(env)
                return
        self._send(dest, env[:11] + (env[11] + 1,))

    def _accept(self, slot: Slot, env) -> None:
        """Queue a message in the order its sender sent it (sequence numbers per pair)."""
        if type(env[4]) is list:  # small arrays travelled as bytes
            env = env[:4] + (unpack_args(env[4]),) + env[5:]
        src, seq = env[6], env[7]
        expected = slot.expected
        exp = expected.get(src, 0)
        if seq != exp:
            if seq < exp:
                raise ShoalError(f"internal: duplicate message {env[3]!r} to {slot.key}")
            slot.ooo[(src, seq)] = env
            return
        while True:
            expected[src] = seq + 1
            if self.direct and not (env[8] or self.fifo or self.heap or slot.ooo):
                self.direct = False  # a message it sends to this PE is queued
                self.created += 1  # as if queued and taken at once
                self.processed += 1
                self._run_invoke(slot, env)
                return
            self._push(env[8], _INVOKE, slot, env)
            if not slot.ooo:
                return
            seq += 1
            env = slot.ooo.pop((src, seq), None)
            if env is None:
                return

    def _run_invoke(self, slot: Slot, env) -> None:
        name = env[3]
        self._work = (slot, name)
        self.current = slot
        try:
            fn = getattr(slot.obj, name)
        except AttributeError:
            raise UsageError(f"{slot.coll.cls.__name__} has no entry method {name!r}") from None
        timed = self.instrument
        if timed:
            t0 = time.perf_counter()
            c0 = time.thread_time() if self.cpu_stats else 0.0
        kwargs = env[5]
        res = fn(*env[4], **kwargs) if kwargs else fn(*env[4])
        if type(res) is CoroutineType:
            slot.active += 1
            self._step(Task(res, slot, env[9], name), None)
        elif env[9] is not None:
            self.reply(env[9], slot, res)
        if timed:
            st = slot.stats.get(name)
            if st is None:
                st = slot.stats[name] = [0, 0.0, 0.0]
            st[0] += 1
            st[1] += time.perf_counter() - t0
            if self.cpu_stats:
                st[2] += time.thread_time() - c0
        self.current = None
        self._work = None
        if slot.migrate_to is not None and slot.active == 0:
            self._migrate_out(slot)

    # ----------------------------------------------------------------- coroutines, futures
    def _on_fut(self, env) -> None:
        self.resolve(self.pe, env[1], env[2])

    def future(self) -> Future:
        """A new future owned by this PE."""
        self.nfut += 1
        fut = Future(self.pe, self.nfut)
        self.futures[self.nfut] = fut
        return fut

    def reply(self, to, slot: Slot, value) -> None:
        """Deliver an entry method's return value: to a Future (``ret=True`` on one element)
        or to the root's gather of a broadcast's return values."""
        if type(to) is Future:
            self.resolve(to.pe, to.fid, value)
        else:
            self._send(0, (RET, to.cid, to.num, slot.index, value))

    def resolve(self, pe: int, fid: int, value) -> None:
        if pe != self.pe:
            self._send(pe, (FUT, fid, value))
            return
        fut = self.futures.pop(fid, None)
        if fut is None:
            raise UsageError(f"future {fid} of PE {pe} received a second value")
        fut.done = True
        fut.value = value
        for task in fut.waiters:
            self._push(0, _RESUME, task, value)
        fut.waiters = []

    def _step(self, task: Task, value) -> None:
        slot = task.slot
        self.current = slot
        self._work = (slot, task.name)
        try:
            fut = task.coro.send(value)
        except StopIteration as stop:
            self.current = None
            if slot is not None:
                slot.active -= 1
            if task.fut is not None:
                self.reply(task.fut, slot, stop.value)
            if slot is None:  # main returned
                self.exit()
            elif slot.migrate_to is not None and slot.active == 0:
                self._migrate_out(slot)
            return
        self.current = None
        if not isinstance(fut, Future):
            raise UsageError(f"{task.name} awaited {fut!r}: a shoal coroutine may await "
                             "futures, reductions, channels and shoal.quiescence() only")
        fut.waiters.append(task)

    # ----------------------------------------------------------------- exit
    def _on_exit_req(self, env) -> None:
        self._on_exit((EXIT,))

    def _on_exit(self, env) -> None:
        for child in children(self.pe, 0, self.npes):
            self.net.send(child, env)
        self.running = False

    # ----------------------------------------------------------------- statistics
    def stats(self) -> dict:
        """Instrumentation of this PE for a load balancer: per local element and entry
        method (calls, wall seconds, CPU seconds if ``cpu_stats``), messages and bytes sent
        per (sender, receiver) pair by the senders on this PE (bytes count what went on the
        wire: 0 between elements of one PE), idle seconds, and the bytes this PE sent (of
        them, through shared memory)."""
        elements = {slot.key: {m: tuple(v) for m, v in slot.stats.items()}
                    for coll in self.colls.values() for slot in coll.local.values()}
        comm = {(slot.key, dst): tuple(v) for coll in self.colls.values()
                for slot in coll.local.values() for dst, v in slot.out.items()}
        comm.update({(self.pe_key, dst): tuple(v) for dst, v in self.pe_out.items()})
        return {"pe": self.pe, "elements": elements, "idle": self.idle, "comm": comm,
                "bytes_sent": self.net.bytes_sent, "bytes_shared": self.net.bytes_shared}


def _envelope(rt: Runtime, env, _) -> None:
    _HANDLERS[env[0]](rt, env)  # counted once, as a queue entry


def _main(rt: Runtime, main, args) -> None:
    rt._work = (None, "main")
    res = main(*args)
    if type(res) is CoroutineType:
        rt._step(Task(res, None, None, "main"), None)
    else:
        rt.exit()


def _resume(rt: Runtime, task: Task, value) -> None:
    rt._step(task, value)


_INVOKE = Runtime._run_invoke
Runtime._invoke_kind = staticmethod(_INVOKE)  # the queue kind, for the mobility mixin
_ENVELOPE = _envelope
_MAIN = _main
_RESUME = _resume

_HANDLERS = (  # by envelope kind
    Runtime._on_invoke, Runtime._on_bcast_req, Runtime._on_bcast, Runtime._on_fut,
    Runtime._on_create, Runtime._on_insert, Runtime._on_create_one, Runtime._on_migrate,
    Runtime._on_size, Runtime._on_red, Runtime._on_exit_req, Runtime._on_qd_start,
    Runtime._on_ret, Runtime._on_loc, Runtime._on_home, Runtime._on_deleted, Runtime._on_qd_ask,
    Runtime._on_qd_reply, Runtime._on_exit,
)
