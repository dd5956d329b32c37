"""One PE of the runtime: a message-driven scheduler over MPI (Acun14, Sections II-III).

Each MPI rank is a PE. Its scheduler alternates between the network (envelopes from other
PEs) and its queue of work (entry-method invocations, coroutine resumptions; see
:mod:`shoal.runtime.queue`). When there is nothing to do it spins for ``poll_spin`` seconds
(200 µs; none on a node with more PEs than cores, :func:`shoal.threads.oversubscribed`),
sleeps 10 µs at a time until it has been idle for ``10 poll_spin``, then sleeps with
exponential back-off up to ``poll_max`` seconds. A message that reaches a recently busy PE
waits about 10 µs; one that reaches a long idle PE waits up to ``poll_max`` (the latency /
idle-CPU trade-off; an idle PE costs about 20 µs of CPU per sleep). Without the short
sleeps, two PEs that exchange messages slower than ``poll_spin`` fall into a steady state
where each one's reply waits for the other's wake-up. After ``SPIN_ALONE`` (20 µs) of the
spin, every idle turn also yields the core (``sched_yield``, 0.2 µs when nobody else wants
it): a PE that shares its core with the PE it waits for, or with any other process, no
longer polls through its time slice while the other needs the core (issue 17: with one busy
process beside 2 PEs on 2 cores, a 1 MiB array one-way took 550 µs, now 260 µs; an 8-byte
call 110 µs, now 35 µs; ``python benchmarks/runtime_messaging.py``).

The core keeps the hot path: the loop, sends, entry-method invocation (numbering, ordering,
running) and futures. Everything colder is a manager that owns its state and its message
kinds (:mod:`shoal.runtime.protocol` registers each kind with its handler):
:class:`~shoal.runtime.location.Location` (collections, insertion, deletion, homes,
forwarding, caches), :class:`~shoal.runtime.migration.Migration`, and the collectives
(:mod:`shoal.runtime.collectives`: broadcasts, reductions, sections, quiescence), the
guarded messages of :mod:`shoal.runtime.guards` and the task pool of
:mod:`shoal.runtime.pool`.
"""

from __future__ import annotations

import heapq
import os
import sys
import time
import traceback
from collections.abc import Callable
from time import perf_counter
from types import CoroutineType, FunctionType
from typing import Any, Final

from numpy import ndarray

from shoal.errors import ShoalError, UsageError
from shoal.options import POLL_SPIN, Options, parse_tune
from shoal.rank import abort_job
from shoal.runtime import collector
from shoal.runtime.aggregation import Aggregation
from shoal.runtime.checkpoint import Checkpoints
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.collectives.broadcast import Broadcasts
from shoal.runtime.collectives.quiescence import Quiescence
from shoal.runtime.collectives.reduction import Reductions
from shoal.runtime.collectives.section import Sections
from shoal.runtime.context import set_current
from shoal.runtime.control import Controller
from shoal.runtime.failure import Failure
from shoal.runtime.futures import Future, Gather, Task
from shoal.runtime.guards import GuardError, Guards
from shoal.runtime.lb.driver import Balancer
from shoal.runtime.location import Location
from shoal.runtime.migration import Migration
from shoal.runtime.nodes import NodeMap
from shoal.runtime.point import ConsistentPoint
from shoal.runtime.pool import Pool
from shoal.runtime.power import Power
from shoal.runtime.protocol import (
    BCAST_REQ,
    CALL,
    COUNTED,
    EXIT,
    EXIT_REQ,
    FUT,
    I_ARGS,
    I_CID,
    I_FUT,
    I_HOPS,
    I_INDEX,
    I_KWARGS,
    I_METHOD,
    I_PRIO,
    I_SENDER,
    I_SEQ,
    I_SRC,
    INVOKE,
    LOC,
    children,
    handler_table,
)
from shoal.runtime.proxy import CollectionProxy, ElementProxy
from shoal.runtime.publish import OFF, Publisher
from shoal.runtime.queue import Queue
from shoal.runtime.recovery import PeFailureError, is_failure
from shoal.runtime.trace import Tracer
from shoal.runtime.wire.codec import pack_args, unpack_args
from shoal.runtime.wire.transport import Transport, _plain
from shoal.threads import oversubscribed

__all__ = ["Runtime"]

TURN = 1e-3  # seconds of queued work before the scheduler looks at the network again
SPIN_ALONE: Final = 2e-5  # seconds an idle PE polls before it yields its core at every turn
SEND_SPIN: Final = 2e-4  # seconds an idle PE with sends in flight polls before it naps
SEND_NAP: Final = 5e-5  # the longest nap of an idle PE with sends in flight
_yield: Final = getattr(os, "sched_yield", lambda: None)  # (not on every platform)
# What the hot path calls and compares with, Final: the compiled core keeps each in a C
# static instead of looking a global up in the module's dict (about 140 instructions a read)
_clock: Final = perf_counter
_NDARRAY: Final = ndarray
_COROUTINE: Final = CoroutineType
_FUNCTION: Final = FunctionType


def _precise_sleep() -> None:
    """Ask Linux for 1 µs timer slack (the default, 50 µs, turns a 10 µs back-off sleep into
    60 µs of added latency). Elsewhere, or if refused, sleeps stay as they are."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
        except (OSError, AttributeError):
            pass


# why a future may get a second value, said with the error
SECOND = (": a future takes one value (shoal.future(n): n values); were two reductions "
          "given it as target (a section's members contribute with section=sec, or each "
          "collection of the section reduces on its own)?")


class Runtime:
    """The PE core: scheduler, sends, entry-method invocation and futures of one PE, and
    its managers (``location``, ``migration``, ``broadcasts``, ``reductions``,
    ``sections``, ``quiescence``, ``guards``, ``pool``, ``balancer``, ``checkpoints``,
    ``aggregation``).

    ``poll_spin`` and ``poll_max`` (seconds) set the idle back-off; ``instrument`` records
    the calls and wall time of every entry method per element (on by default, for the load
    balancer); ``cpu_stats`` adds each call's CPU time (about 1 µs per call more). Messages
    and bytes between elements are always counted: the counts are the sequence numbers.
    ``shm_bytes`` is the shared memory each PE keeps for the large buffers it sends to PEs
    of its node (0: every buffer goes by MPI); it must be the same on every PE.
    ``pool_bytes`` bounds the buffers a PE keeps to receive large buffers by MPI into
    (:mod:`shoal.runtime.wire.pool`; default 64 MiB). ``lb``
    names the load-balancing strategy (or a chain, ``"greedy,refine"``; default
    ``greedy_refine`` when balancing happens; ``"none"``: AtSync points resume at once),
    ``lb_dump`` a directory where PE 0 writes each step's database (``step-0001.npz``...),
    ``lb_period`` asks for a balancing step every so many seconds, and ``lb_auto`` (or
    ``lb="auto"``) lets the MetaBalancer decide at every AtSync point whether a step pays
    (see :mod:`shoal.runtime.lb.driver`); ``lb_machine`` is the torus the PEs run on
    (``"4x4x4"``, ``"4x4x4:2"`` with 2 PEs per node, or ``"4x4x4:map.csv"``, see
    :meth:`~shoal.runtime.lb.machine.Machine.parse`): ``lb="topo"`` needs it, and each
    step's record then has its hop-bytes before and after.
    ``restart`` names a checkpoint to start from (see :mod:`shoal.runtime.checkpoint`);
    ``checkpoint_every`` (seconds) has the runtime take checkpoints into ``checkpoint_dir``
    at AtSync points and at ``shoal.iteration()`` calls of main, at most one per interval.
    ``ft``: a dead peer ends :meth:`run` with :class:`~shoal.runtime.recovery.PeFailureError`
    (MPI errors are returned, large buffers go by MPI, not shared memory) for an in-job
    recovery; ``restart`` may then be the in-memory checkpoint to restore.
    ``trace`` a file where PE 0 writes the run's timeline at the end (see
    :mod:`shoal.runtime.trace`).
    """

    # What the hot path reads and writes for every message lives in slots; the rest in the
    # instance dict, which Python 3.11 keeps inline (attribute reads specialized to an
    # index) only up to 30 attributes: with all 44 in the dict, every self.x was a dict
    # lookup. Callgrind, runtime_percall's loops alone: receive and run 11,240 -> 10,381
    # instructions per message, local send 13,296 -> 12,587 (tests/runtime/test_hotpath.py
    # keeps the dict within 30; ``control``, read once per iteration, and ``publisher``, once
    # per row of live data, are slots only to keep it there).
    __slots__ = (
        "__dict__",
        "colls",
        "control",
        "cpu_stats",
        "created",
        "current",
        "detailed",
        "direct",
        "freq",
        "instrument",
        "net",
        "pe",
        "pe_key",
        "pe_out",
        "processed",
        "publish_at",
        "publisher",
        "queue",
        "run_invoke",
        "running",
        "timers",
        "work_name",
        "work_slot",
    )

    def __init__(self, comm: Any, options: Options | None = None, **settings: Any):
        """A PE on ``comm``: its settings are ``options``, else the keyword ``settings``
        (:data:`shoal.options.SETTINGS`: ``lb=``, ``trace=``, ...), checked in
        :meth:`Options.build` (the environment is read by ``shoal.start``, not here)."""
        if options is None:
            options = Options.build(settings, environ={})
        elif settings:
            raise UsageError("give the runtime's settings as options or as keywords, not both")
        ft = options.checkpoint.ft
        poll_spin, poll_max = options.transport.poll_spin, options.transport.poll_max
        tracing = options.tracing
        self.ft = ft  # a dead peer raises PeFailureError from run() (shoal.runtime.recovery)
        self.net = Transport(comm, 0 if ft else options.transport.shm_bytes,
                             options.transport.pool_bytes)
        _precise_sleep()
        self.pe: int = self.net.rank
        self.npes: int = self.net.size
        self.nodes = NodeMap.gather(comm)  # the host of every PE
        if poll_spin is None:  # (not on a node with more PEs than cores)
            poll_spin = 0.0 if oversubscribed(self.nodes, self.pe) else POLL_SPIN
        self.poll_spin: float = poll_spin
        self.poll_max = poll_max
        self.cpu_stats = tracing.cpu_stats and tracing.instrument
        self.tracer = None if tracing.trace is None else Tracer(tracing.trace, self.pe)
        self.instrument = tracing.instrument or self.tracer is not None
        # after each call: its CPU time, its trace event (one test on the hot path for both)
        self.detailed = self.cpu_stats or self.tracer is not None
        # the PE's emulated frequency, a fraction of nominal (shoal.runtime.power: below 1,
        # entry methods are charged t / f and the PE duty-cycles)
        self.freq: float = 1.0
        self.colls: dict[int, Collection] = {}
        self.early: dict[int, list[tuple]] = {}  # envelopes for collections not yet here
        self.futures: dict[int, Future] = {}
        self.nfut = 0
        self.pe_key: tuple = (-1, self.pe)  # (a fixed tuple type: boxed anew at each read)
        self.pe_out: dict = {}
        self.current: Slot | None = None
        self.queue = Queue()
        # queue ``run(a, b)`` at a priority: counted as work (queue.pushed) until it runs
        self.push: Callable[[int, Callable[[Any, Any], None], Any, Any], None] = self.queue.push
        self.timers: list = []
        self.running = False
        self.resized = False  # the job ended to be relaunched at another size
        self.direct = False  # may a message from the network run at once (nothing queued)?
        self.created = 0  # counted messages sent from here, and processed here (quiescence;
        self.processed = 0  # with the queue's entries: rt.queue.pushed)
        self.idle = 0.0
        self.slept = 0.0  # of the idle time, asleep (the rest is spinning)
        # what runs now, for error reports (``work``): an element (or None) and what of it;
        # two fields, not a tuple made for every message (name None: the runtime itself)
        self.work_slot: Slot | None = None
        self.work_name: str | None = None
        self.probe_at = float("inf")  # PE 0: when the idle loop looks for a stuck main
        # when the next row of live data is due (runtime.publish; OFF: never), compared with
        # the clock the loop reads anyway, at each drain and idle turn
        self.publish_at: float = OFF
        # queue entries: the bound methods the scheduler calls (compared by identity)
        self.run_invoke: Callable[[Slot, tuple], None] = self._run_invoke
        self.run_envelope: Callable[[tuple, None], None] = self._run_envelope
        self.run_task: Callable[[Task, Any], None] = self._resume
        self._attach_managers(options)

    def _attach_managers(self, options: Options) -> None:
        """The managers, and the handler of every message kind (an error at start-up if
        one is missing)."""
        self.location = Location(self)
        self.migration = Migration(self)
        self.broadcasts = Broadcasts(self)
        self.reductions = Reductions(self)
        self.quiescence = Quiescence(self)
        self.sections = Sections(self)
        self.guards = Guards(self)
        self.pool = Pool(self)
        self.point = ConsistentPoint()  # shared by the balancer and checkpoints (PE 0)
        self.control = Controller()  # the control points and their controller (PE 0)
        self.balancer = Balancer(self, options.balancing)
        # told of every element that leaves or arrives: where it is, what it contributed
        self.migration.subscribe(self.location, self.reductions)
        self.migration.step_arrived = self.balancer.arrived
        self.checkpoints = Checkpoints(self, options.checkpoint)
        self.aggregation = Aggregation(self, "agg_buffer" in parse_tune(options.balancing.tune))
        self.power = Power(self, options.power)
        self.publisher = Publisher(self, options.tracing.live_period)
        self.handlers = handler_table(self)

    # ----------------------------------------------------------------- start and stop
    def run(self, main: Callable | None = None, *args: Any) -> None:
        """Run the scheduler until ``exit``; ``main(*args)`` runs on PE 0 (a coroutine
        function or a plain one) and the job exits once it has returned and no work is
        left anywhere (quiescence), or at :meth:`exit`."""
        set_current(self)
        try:
            self.running = True
            if self.tracer is not None:
                self.tracer.start(self.net.comm)
            self.checkpoints.start()
            self.balancer.start()
            self.power.start()
            self.aggregation.start()
            self.publisher.start()
            if self.pe == 0 and main is not None:
                self.push(0, self._run_main, main, args)
            with collector.tuned():
                self._serve()
            self.publisher.close()
            self._finish()
        except BaseException as exc:
            if self.ft and is_failure(exc):
                raise PeFailureError(f"PE {self.pe}: {exc}") from exc
            self._abort(exc)
        finally:
            set_current(None)

    def exit(self, resize: bool = False) -> None:
        """End the job on every PE (``resize``: to be relaunched at another size, so
        :func:`shoal.start` ends the process, :mod:`shoal.runtime.resize`)."""
        self.send(0, (EXIT_REQ, resize))

    def _serve(self) -> None:
        """The scheduler until the job ends; ``sys.exit(0)`` (or ``sys.exit()``) in an
        entry method or main ends the job as :meth:`exit` does (another code: :meth:`_abort`
        ends it with that code)."""
        while True:
            try:
                self._loop()
                return
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise
                self.current = None
                self.work = None
                self.direct = False
                self.exit()

    @property
    def work(self) -> tuple[Slot | None, str] | None:
        """What runs now: ``(element or None, what)`` (``(None, "main")``), or None."""
        name = self.work_name
        return None if name is None else (self.work_slot, name)

    @work.setter
    def work(self, value: tuple[Slot | None, str] | None) -> None:
        if value is None:
            self.work_slot = None
            self.work_name = None
        else:
            self.work_slot, self.work_name = value

    def where(self) -> str:
        """What runs now, for error reports: ``PE 2, Cell[3].step``."""
        where = f"PE {self.pe}"
        if self.work is not None:
            slot, method = self.work
            if slot is not None:
                where += f", {slot.coll.cls.__name__}{list(slot.index)}.{method}"
            else:
                where += f", {method}"
        return where

    def _abort(self, exc: BaseException) -> None:
        where = self.where()
        code = 1
        if isinstance(exc, SystemExit):  # deliberate: its code, no traceback
            code = exc.code if isinstance(exc.code, int) else 1
            text = f"sys.exit({exc.code!r})\n"
        else:
            text = "".join(traceback.format_exception(exc))
        abort_job(self.net.comm, f"shoal: {where}: {text}", code)

    def _finish(self) -> None:
        """Let every send complete and every PE stop before the communicators go away."""
        sleep = 1e-5
        while not (self.net.reap() and self.net.settled()):
            if self.net.poll() is None:
                time.sleep(sleep)
                sleep = min(2 * sleep, self.poll_max)
        req = self.net.comm.Ibarrier()
        while not req.Test():
            if self.net.poll() is None:
                time.sleep(sleep)
                sleep = min(2 * sleep, self.poll_max)
        if self.tracer is not None:
            self.tracer.write(self.net.comm)
        self.net.close()

    # ----------------------------------------------------------------- the scheduler
    # The one measured exception to the complexity rule: a message from the network takes a
    # short path of its own. Folding the branches together (one shared tail for every kind of
    # turn) cost 12% of the small-message rate here (about 295k/s down to 255k/s,
    # benchmarks/runtime_messaging.py, against commit 41a547b in alternating runs).
    def _loop(self) -> None:  # noqa: C901
        poll = self.net.poll
        handlers = self.handlers
        counted = COUNTED
        queue = self.queue
        idle = _Idle(self) if self.tracer is None else _TracedIdle(self)
        while self.running:
            env = poll()  # one envelope, then the work it made: the reply leaves sooner
            if env is not None:
                if idle.since:  # (before the work: the idle period ends when work comes)
                    idle.end()
                kind = env[0]
                if counted[kind]:
                    self.processed += 1
                self.direct = True
                handlers[kind](env)
                self.direct = False
                if queue.fifo or queue.heap:
                    self._drain(queue)
                if self.timers:
                    self._fire_due()
                continue
            # nothing from the network: the queue, a due timer, or an idle turn
            if queue.fifo or queue.heap:
                if idle.since:
                    idle.end()
                self._drain(queue)
                if self.timers:
                    self._fire_due()
            elif not (self.timers and self._fire_due()):
                idle.turn()
            elif idle.since:  # (a timer ran: its callbacks are short)
                idle.end()
        if idle.since:
            idle.end()

    def _fire_due(self) -> bool:
        """Run the earliest timer if its time has come (there is one); True if it ran."""
        if self.timers[0][0] > _clock():
            return False
        heapq.heappop(self.timers)[2]()
        return True

    def _drain(self, queue: Queue) -> None:
        """Run up to 32 queue entries, then back to the network; sooner after ``TURN``
        seconds of work, so that messages from other PEs (the runtime's own among them) do
        not wait behind long entry methods."""
        # Queue.pop inlined (a call per entry) and the clock bound here: callgrind, a queued
        # local message run by the loop, 8,124 -> 7,614 instructions (the clock read per
        # entry is about 430 of them)
        fifo, heap = queue.fifo, queue.heap  # (changed in place, never replaced)
        popleft = fifo.popleft  # (compiled, a call by name costs 170 instructions more)
        clock = _clock
        now = clock()
        if now >= self.publish_at:  # a row of live data is due (runtime.publish)
            self.publisher.tick(now, 0.0)
        until = now + TURN
        n = 0
        while n < 32 and (fifo or heap):
            if heap and (heap[0][0] < 0 or not fifo):
                run, a, b = heapq.heappop(heap)[2:]
            else:
                run, a, b = popleft()
            self.processed += 1
            run(a, b)
            n += 1
            if clock() > until:
                break

    def sleep(self, delay: float) -> Future:
        """A future resolved after ``delay`` seconds (counted as pending work, so quiescence
        waits for it)."""
        if not delay >= 0:
            raise UsageError(f"sleep for a duration >= 0 s, not {delay!r}")
        fut = self.future()
        self.created += 1

        def wake() -> None:
            self.processed += 1
            self.resolve(self.pe, fut.fid, None)

        self.after(delay, wake)
        return fut

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` from the loop once ``delay`` seconds have passed."""
        self.queue.arrivals += 1
        heapq.heappush(self.timers, (_clock() + delay, self.queue.arrivals, fn))

    def send(self, dest: int, env: tuple, shared: bool = True) -> int:
        """Send an envelope; to this PE it goes through the local queue (no pickling).
        ``shared=False``: its buffers stay out of shared memory (the receiver keeps it)."""
        if dest == self.pe:
            self.push(0, self.run_envelope, env, None)
            return 0
        nbytes = self.net.send(dest, env, shared)
        if COUNTED[env[0]]:
            self.created += 1  # once sent: a message that failed to pickle never existed
        return nbytes

    def _run_envelope(self, env: tuple, _: None) -> None:
        self.handlers[env[0]](env)  # counted once, as a queue entry

    def collection(self, cid: int, env: tuple) -> Collection | None:
        """The collection, or None after parking ``env`` until its creation arrives here
        (the creation travels down a tree; a message about it may overtake it)."""
        coll = self.colls.get(cid)
        if coll is None and cid not in self.location.destroyed:  # (destroyed: dropped)
            self.early.setdefault(cid, []).append(env)
        return coll

    def enter(self, slot: Slot | None, what: str) -> tuple:
        """Run code of ``slot`` (its constructor, ``on_migrated``...) as the current
        element; returns what to give :meth:`leave` afterwards."""
        saved = (self.current, self.work)
        self.current, self.work = slot, (slot, what)
        return saved

    def leave(self, saved: tuple) -> None:
        self.current, self.work = saved

    # ----------------------------------------------------------------- entry methods
    def call(self, target: object, name: str, args: tuple, kwargs: dict | None, ret: int,
             prio: int) -> Future | None:
        """Send ``name(*args, **kwargs)`` to an element or (broadcast) a whole collection;
        ``ret``: ``RET_VALUES`` (``ret=True``) or ``RET_DONE`` (``awaitable=True``: of a
        broadcast, a future of its completion) return a future, 0 none."""
        fut = self.future() if ret else None
        if isinstance(target, ElementProxy):
            self.invoke(target._dst, name, args, kwargs, prio, fut)
        elif isinstance(target, CollectionProxy):
            if target.cid in self.location.destroyed:
                raise self.location.gone(target.cid)
            self.send(0, (BCAST_REQ, target.cid, name, args, kwargs, prio, fut, ret))
        else:
            raise UsageError(f"cannot send to {target!r}: not a proxy")
        return fut

    def invoke(self, dst: tuple, name: str, args: tuple, kwargs: dict | None,
               prio: int, fut: Future | None) -> None:
        """Send one entry-method call to element ``dst = (cid, index)``: element ``index``
        of collection ``cid``."""
        cid, index = dst
        src_slot = self.current
        src: tuple  # (not tuple[int, int]: compiled, a fixed tuple is unboxed, then boxed anew)
        out: dict[Any, list[int]]  # (typed: compiled, its counts are read and set as ints)
        if src_slot is None:
            src, out = self.pe_key, self.pe_out
        else:
            src, out = src_slot.key, src_slot.out
        stat = out.get(dst)  # [messages sent so far = next sequence number, bytes, ...]
        if stat is None:
            stat = out[dst] = [0, 0, 0, 0]  # and both at the last balancing step
        seq = stat[0]
        stat[0] = seq + 1
        coll = self.colls.get(cid)
        slot = None if coll is None else coll.local.get(index)
        wire_args: tuple | list = args
        if slot is None:  # another PE's: arrays leave numpy's pickling (same PE: no copy)
            for a in args:
                if type(a) is _NDARRAY:
                    wire_args = pack_args(args)
                    break
        if slot is not None:
            self.accept(slot, (INVOKE, cid, index, name, args, kwargs, src, seq, prio, fut,
                               self.pe, 0))
            return
        if coll is None:  # its creation has not reached this PE yet (or it is destroyed)
            self._early_invoke((INVOKE, cid, index, name, wire_args, kwargs, src, seq, prio,
                                fut, self.pe, 0), out, dst)
            return
        dest = coll.cache.get(index)
        if dest is None:  # believe it is at home until told otherwise
            dest = coll.cache[index] = coll.home(index)
        try:
            nbytes = self._send_call(dest, cid, index, name, wire_args, kwargs, src, seq,
                                     prio, fut)
        except BaseException:
            stat[0] = seq  # it failed to pickle: the next message takes its number
            raise
        self.created += 1
        stat[1] += nbytes

    def _send_call(self, dest: int, cid: int, index: tuple, name: str, args: tuple | list,
                   kwargs: dict | None, src: tuple, seq: int, prio: int,
                   fut: Future | None) -> int:
        """Send an entry-method call to another PE: the common one (no keywords, priority
        or future) as a CALL, plain (by marshal) if its arguments are, since the rest is
        the runtime's ints and tuples of ints (an index's int subclass, which a proxy
        accepts, arrives an int equal to it) and the method's name; any other as an
        INVOKE. Returns the bytes sent."""
        if kwargs is None and not prio and fut is None:
            return self.net.send(dest, (CALL, cid, index, name, args, src, seq, self.pe), True,
                                 type(name) is str and isinstance(args, tuple)
                                 and _plain(args, 2))
        return self.net.send(dest, (INVOKE, cid, index, name, args, kwargs, src, seq, prio,
                                    fut, self.pe, 0))

    def _early_invoke(self, env: tuple, out: dict, dst: tuple) -> None:
        """A call to a collection not created here yet waits for its creation; one to a
        destroyed collection is the caller's error (its number is not used)."""
        cid = env[I_CID]
        if cid in self.location.destroyed:
            out[dst][0] -= 1
            if not out[dst][0]:
                del out[dst]
            raise self.location.gone(cid)
        self.early.setdefault(cid, []).append(env)

    def on_call(self, env: tuple) -> None:
        """A CALL: the INVOKE it stands for (see :mod:`shoal.runtime.protocol`)."""
        self.on_invoke((INVOKE, env[1], env[2], env[3], env[4], None, env[5], env[6], 0, None,
                        env[7], 0))

    def on_invoke(self, env: tuple) -> None:
        cid = env[I_CID]
        coll = self.colls.get(cid)
        if coll is None:
            if cid not in self.location.destroyed:  # (destroyed: sent before it knew)
                self.early.setdefault(cid, []).append(env)
            return
        slot = coll.local.get(env[I_INDEX])
        if slot is None:
            self.location.route(coll, env)
            return
        if env[I_HOPS] and env[I_SENDER] != self.pe:  # forwarded: correct the sender's cache
            self.net.send(env[I_SENDER], (LOC, cid, env[I_INDEX], self.pe))
        self.accept(slot, env)

    def accept(self, slot: Slot, env: tuple) -> None:
        """Queue a message in the order its sender sent it (sequence numbers per pair)."""
        if type(env[I_ARGS]) is list:  # packed arrays (see wire.codec)
            env = (*env[:I_ARGS], unpack_args(env[I_ARGS]), *env[I_ARGS + 1:])
        src = env[I_SRC]
        seq: int = env[I_SEQ]  # (an int: compiled, compared and added unboxed)
        cell = slot.expected.get(src)  # (the next number from src, changed in place)
        exp = 0 if cell is None else cell[0]
        if seq != exp:
            if seq < exp:
                raise ShoalError(f"internal: duplicate message {env[I_METHOD]!r} to {slot.key}")
            slot.ooo[(src, seq)] = env
            return
        while True:
            if cell is None:
                cell = slot.expected[src] = [seq + 1]
            else:
                cell[0] = seq + 1
            queue = self.queue
            if self.direct and not (env[I_PRIO] or queue.fifo or queue.heap or slot.ooo):
                self.direct = False  # a message it sends to this PE is queued
                self.created += 1  # as if queued and taken at once
                self.processed += 1
                self._run_invoke(slot, env)
                return
            # queue.push, not self.push: the bound method kept as an attribute cannot be
            # specialized (callgrind: 240 instructions more per local send)
            queue.push(env[I_PRIO], self.run_invoke, slot, env)
            if not slot.ooo:
                return
            seq += 1
            nxt = slot.ooo.pop((src, seq), None)  # (not into env, a tuple: mypyc checks)
            if nxt is None:
                return
            env = nxt

    # The hot path of every message (complexity 12): the statistics are inlined rather than
    # a call to _account (a call per message), and the two handlers of the call's exceptions
    # cost nothing until one raises (Python 3.11).
    def _run_invoke(self, slot: Slot, env: tuple) -> None:  # noqa: C901
        if slot.migrate_to is not None and not slot.active:  # it asked to move: it moves
            self.migration.move_first(slot, self.run_invoke, env, env[I_PRIO])  # first
            return
        name = env[I_METHOD]
        self.work_slot = self.current = slot
        self.work_name = name
        obj: object = slot.obj  # (object: None below when its bound method is called)
        coll = slot.coll
        # the class's function, found once per (class, name): no bound method per call
        fn = coll.methods.get(name) if type(obj) is coll.cls else None
        if fn is None:
            fn = self._entry(slot, name)
            if fn is None:  # not a plain function of the class: its bound method
                fn = getattr(obj, name)
                obj = None
        timed = self.instrument
        if timed:
            t0 = _clock()
            c0 = time.thread_time() if self.cpu_stats else 0.0
        args: tuple = env[I_ARGS]
        kwargs = env[I_KWARGS]
        try:  # (free in Python 3.11 unless it raises)
            if obj is None:
                res = fn(*args, **kwargs) if kwargs else fn(*args)
            elif kwargs:
                res = fn(obj, *args, **kwargs)
            else:  # (compiled: up to two arguments, a call from the stack, no tuple made)
                n = len(args)
                res = (fn(obj) if n == 0 else fn(obj, args[0]) if n == 1
                       else fn(obj, args[0], args[1]) if n == 2 else fn(obj, *args))
        except GuardError as held:  # a guarded method's condition is false: the message waits
            self.guards.hold(slot, env, held)
            self.current = self.work_slot = None
            self.work_name = None
            return
        except Exception as exc:
            res = self._failed(exc, env[I_FUT])
        if type(res) is _COROUTINE:
            slot.active += 1
            self._step(Task(res, slot, env[I_FUT], name), None)
        elif env[I_FUT] is not None:
            self.reply(env[I_FUT], slot, res)
        if timed:  # (_account, inlined: this runs for every message)
            st = slot.stats.get(name)
            if st is None:
                st = slot.stats[name] = [0, 0.0, 0.0]
            st[0] += 1
            dt = _clock() - t0
            st[1] += dt
            if self.detailed:
                self._detail(st, slot, name, t0, c0)
            if self.freq < 1.0:  # an emulated slower clock (shoal.runtime.power)
                self.power.throttle.slow(st, dt)
        self.current = self.work_slot = None
        self.work_name = None
        if slot.after:
            self._after(slot)

    def _entry(self, slot: Slot, name: str) -> Callable[..., Any] | None:
        """The function of ``slot``'s class that entry method ``name`` is, kept in the
        collection's ``methods`` and called with the element as its first argument (entry
        methods are the class's: a proxy has those of its class, and an instance's
        attribute of the same name does not replace one); None if the class's attribute
        is not a plain function (a static or class method, a callable object) or the
        element is not of its collection's class (the stand-in of an ``async def
        __init__``): its bound method is called then."""
        obj = slot.obj
        coll = slot.coll
        cls = type(obj)
        for klass in cls.__mro__:  # (what the attribute is, as the class holds it)
            raw = klass.__dict__.get(name)
            if raw is not None:
                if type(raw) is not _FUNCTION or cls is not coll.cls:
                    break
                coll.methods[name] = raw
                return raw
        if not hasattr(obj, name):
            raise UsageError(f"{coll.cls.__name__} has no entry method {name!r}")
        return None

    def _after(self, slot: Slot) -> None:
        """A call or coroutine step of ``slot`` has returned and something waited for that:
        its held messages and awaited conditions that now hold run (:mod:`.guards`), then
        it moves if it asked to and no coroutine of it is suspended."""
        if (slot.held or slot.waits) and not self.guards.release(slot):
            return  # within the release of this element's messages: it does the rest
        if slot.migrate_to is not None and slot.active == 0:
            self.migration.move_deferred(slot)
        else:
            slot.after = bool(slot.held or slot.waits) or slot.migrate_to is not None

    def _failed(self, exc: Exception, fut: Future | Gather | None) -> Failure:
        """An entry method raised ``exc``: its failure, raised where its caller awaits
        ``fut``; with no future nobody waits for it, and the job ends."""
        if fut is None:
            raise exc
        return Failure.of(exc, self.where())

    def _account(self, slot: Slot, name: str, calls: int, t0: float, c0: float) -> None:
        """Add a call (or a coroutine's resumption, ``calls=0``) that began at ``t0``
        (thread CPU time ``c0``) to the element's statistics."""
        st = slot.stats.get(name)
        if st is None:
            st = slot.stats[name] = [0, 0.0, 0.0]
        st[0] += calls
        dt = _clock() - t0
        st[1] += dt
        if self.detailed:
            self._detail(st, slot, name, t0, c0)
        if self.freq < 1.0:
            self.power.throttle.slow(st, dt)

    def _detail(self, st: list[float], slot: Slot, name: str, t0: float, c0: float) -> None:
        """After a call with ``cpu_stats`` or a trace: its CPU time, its event."""
        if self.cpu_stats:
            st[2] += time.thread_time() - c0
        if self.tracer is not None:
            self.tracer.entry(slot, name, t0)

    # ----------------------------------------------------------------- coroutines, futures
    def on_fut(self, env: tuple) -> None:
        _, fid, value, sender = env
        if fid not in self.futures:  # a second value: name who sent it, not what runs here
            pe, key, what = sender
            self.work = None
            coll = None if key is None else self.colls.get(key[0])
            if coll is not None:
                what = f"{coll.cls.__name__}{list(key[1])}.{what}"
            raise UsageError(f"future {fid} of PE {self.pe} received a second value from "
                             f"PE {pe}, {what}{SECOND}")
        self.resolve(self.pe, fid, value)

    def future(self, n: int | None = None) -> Future:
        """A new future owned by this PE; with ``n``, one that resolves to the list of
        the first ``n`` values sent to it, in the order they arrived."""
        self.nfut += 1
        fut = Future(self.pe, self.nfut)
        if n is not None:
            if not (isinstance(n, int) and n >= 1):
                raise UsageError(f"shoal.future(n): n is how many values to wait for, a "
                                 f"whole number >= 1, not {n!r}")
            fut.values = []
            fut.count = n
        self.futures[self.nfut] = fut
        return fut

    def reply(self, to: Future | Gather, slot: Slot | None, value: Any) -> None:
        """Deliver an entry method's return value: to a Future (``ret=True`` on one element)
        or to the root's gather of a broadcast's or a section's return values (a broadcast
        with ``awaitable=True`` sends only a failure)."""
        if type(to) is Future:
            self.resolve(to.pe, to.fid, value)
        else:
            assert slot is not None and isinstance(to, Gather)
            to.answer(self, slot, value)

    def resolve(self, pe: int, fid: int, value: Any) -> None:
        """Give future ``fid`` of PE ``pe`` its value (sent there if it is another PE's)."""
        if pe != self.pe:
            work = self.work  # the sender, named if the value is a second one
            slot, what = (None, "runtime") if work is None else work
            self.send(pe, (FUT, fid, value, (self.pe, None if slot is None else slot.key,
                                             what)))
            return
        fut = self.futures.pop(fid, None)
        if fut is None:
            raise UsageError(f"future {fid} of PE {pe} received a second value{SECOND}")
        if fut.values is not None:  # shoal.future(n)
            fut.values.append(value)
            if len(fut.values) < fut.count:
                self.futures[fid] = fut
                return
            value = fut.values
        fut.done = True
        fut.value = value
        for task in fut.waiters:
            if isinstance(task, Task):
                self.push(0, self.run_task, task, value)
            else:  # shoal.iwait's: it hears of the future at once
                task(fut)
        fut.waiters = []

    def _resume(self, task: Task, value: Any) -> None:
        """A coroutine's next step, timed like a call: an entry method's work after an
        ``await`` is its element's load too."""
        slot = task.slot
        if slot is None or not self.instrument:
            self._step(task, value)
            return
        t0 = _clock()
        c0 = time.thread_time() if self.cpu_stats else 0.0
        self._step(task, value)
        self._account(slot, task.name, 0, t0, c0)

    def _step(self, task: Task, value: Any) -> None:
        slot = task.slot
        self.work_slot = self.current = slot
        self.work_name = task.name
        try:
            fut = task.coro.send(value)
        except StopIteration as stop:
            self._ended(task, stop.value)
            return
        except Exception as exc:
            self._ended(task, self._failed(exc, task.fut))  # main's, or no ret=True: raises
            return
        self.current = None
        if not isinstance(fut, Future):
            raise UsageError(f"{task.name} awaited {fut!r}: a shoal coroutine may await "
                             "futures, reductions, channels and shoal.quiescence() only")
        fut.waiters.append(task)
        if slot is not None and slot.after:  # the step may have made a condition hold
            self._after(slot)

    def _ended(self, task: Task, result: Any) -> None:
        """A coroutine returned ``result`` (or raised: a Failure for its future)."""
        slot = task.slot
        self.current = None
        if slot is not None:
            slot.active -= 1
        if task.fut is not None:
            self.reply(task.fut, slot, result)
        if slot is None:
            if task.fut is None:  # main returned (the runtime's own coroutines, a
                self.quiescence.main_returned()  # checkpoint's, answer a future instead)
        elif slot.after:
            self._after(slot)

    def _run_main(self, main: Callable, args: tuple) -> None:
        self.work = (None, "main")
        res = main(*args)
        if type(res) is _COROUTINE:
            task = Task(res, None, None, "main")
            self.quiescence.watch(task)
            self._step(task, None)
        else:
            self.quiescence.main_returned()

    # ----------------------------------------------------------------- exit
    def on_exit_req(self, env: tuple) -> None:
        self.on_exit((EXIT, env[1]))

    def on_exit(self, env: tuple) -> None:
        """End the job here: once main has returned and the job is quiescent, or by
        ``shoal.exit()``, which may leave work behind (said on stderr, never silent)."""
        for child in children(self.pe, 0, self.npes):
            self.net.send(child, env)
        self.running = False
        self.resized = env[1]
        queued = len(self.queue.fifo) + len(self.queue.heap)
        if queued and not self.resized:
            sys.stderr.write(f"shoal: PE {self.pe}: the job ends (shoal.exit()) with {queued} "
                             "queued message(s) that do not run\n")
            sys.stderr.flush()

    # ----------------------------------------------------------------- statistics
    def stats(self) -> dict:
        """Instrumentation of this PE for a load balancer: per local element and entry
        method (calls, wall seconds, CPU seconds if ``cpu_stats``), messages and bytes sent
        per (sender, receiver) pair by the senders on this PE (bytes count what went on the
        wire: 0 between elements of one PE), idle seconds, and the bytes this PE sent (of
        them, through shared memory), with the PE's ``host`` and ``node`` number
        (:mod:`shoal.runtime.nodes`)."""
        self.location.forget_links()
        elements = {slot.key: {m: tuple(v) for m, v in slot.stats.items()}
                    for coll in self.colls.values() for slot in coll.local.values()}
        comm = {(slot.key, dst): tuple(v[:2]) for coll in self.colls.values()
                for slot in coll.local.values() for dst, v in slot.out.items()}
        comm.update({(self.pe_key, dst): tuple(v[:2]) for dst, v in self.pe_out.items()})
        return {"pe": self.pe, "host": self.nodes.hosts[self.pe],
                "node": int(self.nodes.node[self.pe]), "elements": elements,
                "idle": self.idle_seconds(), "comm": comm, "bytes_sent": self.net.bytes_sent,
                "bytes_shared": self.net.bytes_shared}

    def saved(self) -> dict[str, Any]:
        """The core's part of its shard's first record: the futures it numbered and those
        still awaited (with the values a ``shoal.future(n)`` has), the sequence numbers
        of messages this PE (not an element) sent."""
        return {"nfut": self.nfut, "pe_out": self.pe_out, "futures": sorted(self.futures),
                "gathers": {fid: (f.count, f.values) for fid, f in self.futures.items()
                            if f.values is not None}}

    def restore(self, infos: list[dict[str, Any]]) -> None:
        """After a restart: this PE's old record, if it had one (``infos``: every old
        PE's); a future still awaited by someone is registered again, a value may come."""
        if self.pe < len(infos):
            info = infos[self.pe]
            self.pe_out, self.nfut = info["pe_out"], info["nfut"]
            for fid in info["futures"]:
                self.futures[fid] = Future(self.pe, fid)
            for fid, (count, values) in info["gathers"].items():  # shoal.future(n)
                self.futures[fid].count, self.futures[fid].values = count, values
        if len(infos) > self.npes:
            self._forget_beyond(self.npes)

    def _forget_beyond(self, cut: int) -> None:
        """After a restart on fewer PEs: the sequence numbers of this PE and of its
        elements forget the PEs from ``cut`` on and the group members that were there."""
        groups = {cid for cid, coll in self.colls.items() if coll.kind == "group"}

        def gone(key: tuple[int, Any]) -> bool:
            return ((key[0] == -1 and key[1] >= cut)
                    or (key[0] in groups and key[1][0] >= cut))

        for key in [k for k in self.pe_out if gone(k)]:
            del self.pe_out[key]
        for coll in self.colls.values():
            for slot in coll.local.values():
                slot.forget(gone)

    def idle_seconds(self) -> float:
        """Seconds this PE waited for work, in its loop or for a flow-control window."""
        return self.idle + self.net.flow.waited

    def slept_seconds(self) -> float:
        """Of the idle seconds, those asleep (the rest is polling)."""
        return self.slept + self.net.flow.slept


class _Idle:
    """The idle back-off of a PE's loop (see the module doc) and its idle time."""

    __slots__ = ("quiet", "rt", "since", "sleep")

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.since = 0.0  # when the PE last fell idle (0: busy)
        self.quiet = 0.0  # since when no send has been in flight
        self.sleep = 1e-5

    def end(self) -> None:
        """Work arrived: count the idle time."""
        self.rt.idle += _clock() - self.since
        self.since = 0.0
        self.sleep = 1e-5

    def turn(self) -> None:
        """A turn of the loop found nothing to do: spin, nap or back off."""
        rt = self.rt
        now = _clock()
        if not self.since:
            self.since = self.quiet = now
        if now >= rt.publish_at:  # a row of live data is due, with this idle stretch
            rt.publisher.tick(now, self.since)
        net = rt.net
        spin = net.bulk or now - self.since < SEND_SPIN
        sending = not net.reap(64 if spin else 1)
        if sending and spin:
            # a large message moves only while its sender tests it: no sleep before such a
            # send has completed, and the spin starts when the last one has; smaller sends
            # wait for their receiver to take them (a PE busy in its work takes them when
            # it next polls), so after SEND_SPIN the naps begin, none longer than SEND_NAP
            # while sends are in flight
            self.quiet = now
        elif now - self.quiet > rt.poll_spin:
            t = _clock()
            time.sleep(min(self.sleep, SEND_NAP) if sending else self.sleep)
            rt.slept += _clock() - t
            if now - self.quiet > 10 * rt.poll_spin:  # idle for long: back off
                self.sleep = min(2 * self.sleep, rt.poll_max)
                if now > rt.probe_at:  # PE 0: is main stuck? (see collectives.quiescence)
                    rt.quiescence.probe()
            return
        if now - self.since > SPIN_ALONE:  # the core may be shared: let others run first
            _yield()


class _TracedIdle(_Idle):
    """The idle back-off of a traced run: idle periods go into the trace."""

    __slots__ = ()

    def end(self) -> None:
        tracer = self.rt.tracer
        assert tracer is not None
        tracer.idle(self.since, _clock() - self.since)
        super().end()
