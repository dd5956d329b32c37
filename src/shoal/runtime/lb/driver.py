"""The load balancer inside the runtime: when to balance, the database, and the step itself
(Acun14, Section III-A: "in the AtSync mode ... the load statistics are collected and the
user specified load balancing strategy is used to compute the new mapping. Once the load
balancing decision is made, the framework handles the migration of the chares to the newly
mapped PEs and resumes them").

A step, run from the root (PE 0):

1. ``LB_COLLECT`` goes down the spanning tree; every PE answers ``LB_STATS``: its objects
   (every local array element and group member, with its seconds in entry methods since
   the last step, its packed size, and whether it may move), its own wall, idle and
   background time, and the messages and bytes its elements sent.
2. The root builds the :class:`~shoal.runtime.lb.database.LBDatabase` (messages between
   elements of one PE travel unpickled, so their bytes are unknown: they count at the
   average bytes per message of the messages that went between PEs, this step's or an
   earlier one's, else 1 byte each: a 0 would tell ``metis`` and ``topo`` that neighbours
   they put together no longer talk, and the next step would pull them apart), runs the
   strategy
   (a pure function, :mod:`shoal.runtime.lb.strategies`) and sends each PE its moves
   (``LB_MOVES``); when nothing moves, the step goes to 4 at once.
3. Each PE moves its elements in one ``migrate_many`` (tagged with the step) and tells the
   root how many went where (``LB_SENT``); an element with a suspended coroutine moves
   later, outside the step. The root tells each PE how many to expect (``LB_EXPECT``); a PE
   answers ``LB_READY`` once they have all arrived.
4. The step is recorded (:func:`shoal.lb_history`; with ``lb_dump``, its database is
   written too); in AtSync mode the root broadcasts
   ``resume_from_sync()`` to every element of the collections that synced.

With ``lb="distributed"`` (alone, and without ``lb_dump``, which needs the whole
database) no PE gathers the database: steps 1-2 are GrapevineLB over the runtime's
messages (:mod:`shoal.runtime.lb.grapevine`), then steps 3-4 as above.

Triggers: AtSync (every element of every non-empty ``at_sync`` array has called
``at_sync()``: a reduction per collection, so insertions and deletions between steps are
counted and an empty array never holds the others back) and ``lb_period`` seconds (elements
move between entry methods; nothing pauses). A trigger during a step waits for its end.
With ``tune`` the root's controller (:mod:`shoal.runtime.control`) sets two knobs as
control points: ``lb_every`` (a step at every k-th AtSync point, the others resume at
once) and ``lb_period``; every AtSync point marks the end of an iteration for it.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.errors import UsageError
from shoal.options import parse_tune
from shoal.runtime.control import builtin
from shoal.runtime.lb import steps
from shoal.runtime.lb.costs import load as load_costs
from shoal.runtime.lb.database import LBDatabase, core_share
from shoal.runtime.lb.grapevine import Grapevine
from shoal.runtime.lb.meta import MetaBalancer
from shoal.runtime.protocol import (
    BCAST_REQ,
    LB_COLLECT,
    LB_EXPECT,
    LB_MOVES,
    LB_READY,
    LB_SENT,
    LB_STATS,
    children,
)
from shoal.runtime.reducers import Reducer

if TYPE_CHECKING:
    from shoal.options import Balancing
    from shoal.runtime.collection import Slot
    from shoal.runtime.interfaces import Core
    from shoal.runtime.lb.machine import Machine


def _add_loads(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    """Sum two ``{pe: seconds}`` maps (into ``a``: each contribution is a fresh dict)."""
    for pe, load in b.items():
        a[pe] = a.get(pe, 0.0) + load
    return a


# the reduction of at_sync() calls: every element's seconds in entry methods since its
# previous at_sync() (wall seconds, CPU with cpu_stats), summed per PE (the PE loads of the
# iteration, for lb="auto")
SYNC = Reducer("_at_sync", _add_loads)
RECENT = 0.5  # weight of the newest iteration in an element's smoothed load per iteration
NOW = -(1 << 30)  # the queue's priority of the sync point: first, before any work
WINDOW = 4  # at_sync() iterations in a period up to which a step weighs their exact total
CONTENTION_TIME = 0.1  # seconds: a PE's past background and wanted time count e^(-age/this)
SPEED_LOOP = 2000  # iterations of the loop that measures a PE's speed (about 50 µs)
SPEED_RUNS = 15  # runs of it after one to warm up; the least time counts
SPEED_BAND = 0.15  # speeds within this fraction of the median one count as equal to it


class Synced:
    """The target of a collection's AtSync reduction: tells the root's balancer."""

    __slots__ = ("cid",)

    def __init__(self, cid: int):
        self.cid = cid

    def __call__(self, loads: dict[int, float]) -> None:
        from shoal.runtime.context import current

        current().balancer.collection_synced(self.cid, loads)

    def __reduce__(self) -> tuple[type, tuple[int]]:
        return (Synced, (self.cid,))


class Balancer:
    """The load balancer of one PE (the decisions are the root's)."""

    def __init__(self, rt: Core, options: Balancing):
        strategy, period, dump = options.lb, options.lb_period, options.lb_dump
        auto, machine = options.lb_auto, options.lb_machine
        if strategy == "auto":  # lb="auto": the MetaBalancer with the default strategy
            strategy, auto = None, True
        # lb="none": AtSync points resume at once, no step ever (a baseline to compare with)
        self.off = strategy == "none"
        if self.off:
            strategy = period = None
        self.dump = None if dump is None else Path(dump)
        if self.dump is not None and self.dump.exists() and not self.dump.is_dir():
            raise UsageError(f"lb_dump: {dump} is a file; give a directory for the "
                             "step databases")
        self.rt = rt
        self.machine: Machine | None = None  # the torus of the PEs (topo needs it)
        if machine is not None:
            from shoal.runtime.lb.machine import Machine

            nodes = rt.nodes.node if rt.nodes.count > 1 else None
            self.machine = Machine.parse(machine, rt.npes, nodes)
        self.costs = None if options.lb_costs is None else load_costs(options.lb_costs)
        self.name = strategy or "greedy_refine"
        self.strategy: Callable[[LBDatabase], np.ndarray] | None = None
        self.warm = False  # has the strategy run once (compiled)?
        # a misspelt name fails at start-up, not at the first step; the root, which runs the
        # strategy, loads it, the other PEs check its names (a strategy's import costs each
        # process 0.16 CPU-seconds: numba, scipy)
        if strategy is not None and rt.pe == 0:
            self.strategy = self._load(self.name)
        elif strategy is not None:
            steps(self.name)
        self.period = period
        # the built-in control points to tune (runtime.control), and their knobs: balance
        # at every ``every``-th AtSync point (``since``: points since the last step)
        self.tune = tuple(n for n in parse_tune(options.tune) if n.startswith("lb_"))
        if self.tune and self.off:
            raise UsageError("tune: lb=none never balances; give a strategy (or none of "
                             "tune) to tune balancing")
        self.every = 1
        self.since = 0
        self.marked = False  # this sync point is marked as the end of an iteration
        # lb="auto": the root asks the MetaBalancer at every AtSync point whether to balance
        self.meta = MetaBalancer() if auto else None
        self.iteration: dict[int, float] = {}  # PE loads of the iteration being synced
        self.step = 0  # the step this PE last took part in
        self.arrivals: dict[int, int] = {}  # step -> elements arrived here for it
        self.expect: dict[int, int] = {}  # step -> elements the root said will arrive
        self.t_mark = self.cpu_mark = self.idle_mark = self.slept_mark = 0.0
        self.throttled_mark = 0.0
        self.contention = [0.0, 0.0]  # decayed sums: background seconds, seconds wanted
        # the root's state
        self.synced: set[int] = set()  # at_sync collections whose elements all called it
        self.point_queued = False  # a look at the sync point waits in the queue
        self.history: list[dict[str, Any]] = []
        self.msg_bytes = 1.0  # average bytes of a message between PEs, last measured
        self.parts: list[dict[str, Any]] = []
        self.sent: list[dict[int, int]] = []
        self.ready = 0
        self.t0 = 0.0
        self.record: dict[str, Any] = {}
        self.decision: dict[str, Any] | None = None  # the MetaBalancer's, for the record
        # lb="distributed" alone: GrapevineLB on messages, no database at the root
        self.grapevine = Grapevine(self)
        self.gossip = self.name == "distributed" and self.dump is None

    def _load(self, name: str) -> Callable[[LBDatabase], np.ndarray]:
        from shoal.runtime.lb.strategies import LBOptions, chain

        nodes = self.rt.nodes.node if self.rt.nodes.count > 1 else None
        return chain(name, LBOptions(machine=self.machine, nodes=nodes, costs=self.costs))

    def prepare(self) -> None:
        """At the root, when balancing will happen (an at_sync array exists, or a period
        is set): load the strategy and run it once on a tiny database, so that its
        compilation (numba) happens now rather than inside the first step."""
        if self.rt.pe != 0 or self.warm or self.off:
            return
        if self.strategy is None:
            self.strategy = self._load(self.name)
        # (with edges, so that the locality pass compiles too: without them its kernels
        # compiled inside LeanMD's first step on a fresh install, 3.3 s)
        ring = np.array([0, 1, 2, 3])
        self.strategy(LBDatabase(np.array([2.0, 1.0, 1.0, 1.0]), np.zeros(4, np.int64),
                                 self.rt.npes, src=ring, dst=np.roll(ring, 1),
                                 messages=np.ones(4, np.int64),
                                 bytes=np.full(4, 8, np.int64)))
        self.warm = True

    def start(self) -> None:
        """Once the scheduler runs: the first period begins; the root arms the periodic
        trigger."""
        self._mark_pe()
        if self.rt.pe == 0:
            self._register_points()
        if self.period is not None and self.rt.pe == 0:
            self.prepare()
            self.rt.after(self.period, self._tick)

    def _register_points(self) -> None:
        """At the root: the built-in control points asked for (``tune``), with their knobs
        (a period to tune starts at 1 s when none is set)."""
        for name in self.tune:
            if name == "lb_every":
                self.rt.control.register(builtin(name, self._set_every, self.every))
            else:
                if self.period is None:
                    self.period = 1.0
                self.rt.control.register(builtin(name, self._set_period, self.period))

    def _set_every(self, value: int) -> None:
        self.every = value

    def _set_period(self, value: float) -> None:
        self.period = value  # (the next tick is armed with it)

    # ----------------------------------------------------------------- triggers
    def at_sync(self, slot: Slot) -> None:
        """``self.at_sync()`` in an element: it is done with this iteration."""
        if not slot.coll.at_sync:
            raise UsageError(f"{slot.coll.cls.__name__}.at_sync(): create the array with "
                             "shoal.Array(..., at_sync=True) to balance at sync points")
        col = 2 if self.rt.cpu_stats else 1
        total = sum(st[col] for st in slot.stats.values())
        sync = slot.sync
        load = total - sync[0]  # (the running call counts at its return: see _period_load)
        sync[0] = total
        if sync[2] or sync[1] >= 0:  # (the first call measures what came before iteration 1)
            _smooth(sync, load)
        sync[2] += 1
        self.rt.reductions.add_contribution(slot, {self.rt.pe: load}, SYNC,
                                            Synced(slot.coll.cid))

    def collection_synced(self, cid: int, loads: dict[int, float]) -> None:
        """At the root: every element of collection ``cid`` has called ``at_sync()``;
        ``loads``: their seconds in entry methods since the previous call, per PE."""
        self.synced.add(cid)
        _add_loads(self.iteration, loads)
        if not self.point_queued:  # once the call that completed the reduction has
            # returned: it may be an element's last call before the step, its time is its
            # load (the step counted it in the next period when it ran inside that call)
            self.point_queued = True
            self.rt.push(NOW, self._sync_point, None, None)

    def _sync_point(self, _a: None, _b: None) -> None:
        self.point_queued = False
        self._maybe_sync_step()

    def _maybe_sync_step(self) -> None:
        waiting = {c.cid for c in self.rt.colls.values() if c.at_sync and c.members > 0}
        if not (self.synced and waiting <= self.synced):
            return
        if not self.marked:  # an AtSync program's iteration ends here (runtime.control)
            self.marked = True
            self.rt.control.mark("sync")
        point = self.rt.point
        if point.held or point.offer():  # a step or a checkpoint (one due takes this
            point.when_free(self._maybe_sync_step)  # point): the step waits for it
            return
        balance = self._pays()
        self._mark("sync", 0.0, {"balanced": balance})
        if balance:
            self._trigger()
        else:
            self._resume_synced()

    def _pays(self) -> bool:
        """At an AtSync point: balance now? At every ``every``-th point (1 unless the
        controller tunes ``lb_every``), unless lb="none" (never) or lb="auto" (when the
        MetaBalancer says so, from the loads of the iteration just synced)."""
        iteration, self.iteration = self.iteration, {}
        if self.meta is None:
            if self.off:
                return False
            self.since += 1  # (lb_every: a step at every ``every``-th point only)
            if self.since < self.every:
                return False
            self.since = 0
            return True
        loads = np.zeros(self.rt.npes)
        loads[list(iteration)] = list(iteration.values())
        decision = self.meta.observe(loads)
        self.decision = dataclasses.asdict(decision)
        return decision.balance

    def _mark(self, name: str, duration: float, args: Any) -> None:
        """An event in the trace (``shoal run --trace``), ending now."""
        tracer = self.rt.tracer
        if tracer is not None:
            tracer.mark(name, time.perf_counter() - duration, duration, args)

    def _tick(self) -> None:
        """The periodic trigger; skipped while a quiescence detection (someone waits for
        it, or main has returned) has just found nothing in flight: the job may be done,
        and a step would only keep it from being found quiet."""
        if self.rt.running:
            if not self.rt.quiescence.settling():
                self._trigger()
            self.rt.after(self.period or 0.0, self._tick)

    def saved(self) -> dict[str, Any]:
        """The balancer's part of its PE's shard record: at the root, the at_sync
        collections whose elements had all synced (they wait in ``at_sync()``)."""
        return {"synced": sorted(self.synced)}

    def restore(self, infos: list[dict[str, Any]]) -> None:
        """At the root, after a restart: on another number of PEs, a step as soon as the
        scheduler runs when balancing is configured (a strategy or a period); the
        collections that had synced are stepped and resumed."""
        if self.rt.pe != 0:
            return
        if len(infos) != self.rt.npes and (self.strategy is not None
                                           or self.period is not None):
            self.rt.after(0.0, self._trigger)
        if infos[0]["synced"]:
            self.synced = set(infos[0]["synced"])
            self.rt.after(0.0, self._maybe_sync_step)

    def _trigger(self) -> None:
        if not self.rt.point.hold():  # (quiescence waits for a step: a counted message is
            # always in flight or running from the trigger to the resume)
            self.rt.point.when_free(self._maybe_sync_step)
            return
        self.step += 1
        self.parts = []
        self.t0 = time.perf_counter()
        if self.gossip:
            self.grapevine.begin(self.step, bool(self.synced))
        else:
            self.on_collect((LB_COLLECT, self.step, bool(self.synced)))

    def _send(self, dest: int, env: tuple) -> None:
        """The step's messages; to this PE, handled at once (not queued behind the
        application's work, which may be long)."""
        if dest == self.rt.pe:
            self.rt.handlers[env[0]](env)
        else:
            self.rt.send(dest, env)

    # ----------------------------------------------------------------- 1. statistics
    def _mark_pe(self) -> None:
        rt = self.rt
        self.t_mark = time.perf_counter()
        self.cpu_mark = time.process_time()
        self.idle_mark = rt.idle_seconds()
        self.slept_mark = rt.slept_seconds()
        self.throttled_mark = rt.power.throttled_seconds()

    def on_collect(self, env: tuple) -> None:
        _, step, sync = env
        rt = self.rt
        for child in children(rt.pe, 0, rt.npes):
            rt.send(child, env)
        self.step = step
        self._send(0, (LB_STATS, step, rt.pe, self._local_stats(sync)))

    def _local_stats(self, sync: bool) -> dict[str, Any]:
        """This PE's part of the database; marks the start of the next period."""
        rt = self.rt
        rt.location.forget_links()  # no edges to destroyed collections
        keys, load, size, movable, pos = [], [], [], [], []
        edges: list[tuple[Any, Any, int, int]] = []
        col = 2 if rt.cpu_stats else 1
        now, cpu = time.perf_counter(), time.process_time()
        wall = now - self.t_mark
        slept = rt.slept_seconds() - self.slept_mark
        # (an emulated slow clock's duty-cycle sleeps are the PE's own, not background)
        throttled = rt.power.throttled_seconds() - self.throttled_mark
        background = smoothed_background(
            self.contention, max(0.0, wall - (cpu - self.cpu_mark) - slept - throttled),
            wall - slept, wall)
        idle = rt.idle_seconds() - self.idle_mark
        # Wall seconds in entry methods include the time another process held the core;
        # scaled by this PE's share of the core they are CPU-like seconds, so that the
        # strategy's capacity (the same share) does not count it twice.
        share = 1.0 if rt.cpu_stats else core_share(wall, slept, background)
        for coll in rt.colls.values():
            can = coll.kind == "array" and (coll.at_sync or not sync)
            for slot in coll.local.values():
                total = sum(st[col] for st in slot.stats.values())
                keys.append(slot.key)
                load.append(_period_load(slot, total) * share)
                size.append(_packed_size(slot))
                movable.append(can and not slot.active and not slot.pinned)
                pos.append(_position(slot))
                for dst, v in slot.out.items():  # [messages, bytes, and at the last step]
                    if v[0] > v[2]:
                        edges.append((slot.key, dst, v[0] - v[2], v[1] - v[3]))
                        v[2], v[3] = v[0], v[1]
        self._mark_pe()
        return {"pe": rt.pe, "keys": keys, "load": load, "size": size, "migratable": movable,
                "pos": pos, "wall": wall, "idle": idle, "slept": slept, "background": background,
                # with emulated DVFS the PE's set frequency: the probe never spans a
                # duty-cycle sleep (it would read 1.0), and the frequency is exact
                "speed": rt.power.speed() if rt.power.on else _speed(),
                "exact_speed": rt.power.on,
                "edges": edges}

    def on_stats(self, env: tuple) -> None:
        """At the root: one PE's part; with all of them, decide and send the moves."""
        _, step, _pe, part = env
        self.parts.append(part)
        if len(self.parts) == self.rt.npes:
            self._decide(step)

    # ----------------------------------------------------------------- 2. decision
    def _decide(self, step: int) -> None:
        rt = self.rt
        db = _database(self.parts, rt.npes)
        self.msg_bytes = _estimate_local_bytes(db, self.msg_bytes)
        if self.dump is not None:
            self.dump.mkdir(parents=True, exist_ok=True)
            db.save(self.dump / f"step-{step:04d}.npz")
        if self.history:  # the period since the last step measures its result
            self.history[-1]["after_measured"] = db.imbalance()
            rt.publisher.lb_measured()
        if self.strategy is None:
            self.strategy = self._load(self.name)
        t = time.perf_counter()
        placement = np.asarray(self.strategy(db), np.int64)
        strategy_time = time.perf_counter() - t
        assert db.keys is not None and db.size is not None and db.migratable is not None
        moved = np.flatnonzero((placement != db.pe) & db.migratable)
        per_pe: list[list[tuple[Any, int]]] = [[] for _ in range(rt.npes)]
        for i in moved.tolist():
            per_pe[int(db.pe[i])].append((db.keys[i], int(placement[i])))
        self.record = {"step": step, "strategy": self.name, "auto": self.decision,
                       "objects": db.n,
                       "before": db.imbalance(),
                       "after_predicted": db.imbalance(np.where(db.migratable, placement,
                                                                db.pe)),
                       "after_measured": None, "migrations": len(moved),
                       "bytes_moved": int(db.size[moved].sum()),
                       "strategy_time": strategy_time}
        if rt.nodes.count > 1 and db.src.size:  # bytes between nodes, on the real node map
            after = np.where(db.migratable, placement, db.pe)
            for when, where in (("before", db.pe), ("after", after)):
                self.record[f"node_bytes_{when}"] = rt.nodes.cross_bytes(
                    where[db.src], where[db.dst], db.bytes)
        if self.machine is not None:  # bytes x hops on the torus (Balaji11, Section 3)
            self.record["hop_bytes_before"] = self.machine.hop_bytes(db)
            self.record["hop_bytes_after"] = self.machine.hop_bytes(
                db, np.where(db.migratable, placement, db.pe))
        self.sent = []
        self.ready = 0
        if not moved.size:  # nothing moves: no round of moves and arrival counts
            self._finish()
            return
        for p in range(rt.npes):
            self._send(p, (LB_MOVES, step, per_pe[p]))

    # ----------------------------------------------------------------- 3. migration
    def on_moves(self, env: tuple) -> None:
        _, step, moves = env
        rt = self.rt
        slots = []
        for (cid, index), dest in moves:
            coll = rt.colls.get(cid)
            slot = None if coll is None else coll.local.get(index)
            if slot is not None:  # (a deletion or a destruction may have raced the step)
                slots.append((slot, dest))
        sent = rt.migration.migrate_many(slots, step)
        if sent:
            self._mark("migrate", 0.0, {"step": step, "out": sent})
        self._send(0, (LB_SENT, step, sent))

    def on_sent(self, env: tuple) -> None:
        """At the root: once every PE has moved its elements, tell each how many arrive."""
        _, step, sent = env
        self.sent.append(sent)
        if len(self.sent) < self.rt.npes:
            return
        expect = [0] * self.rt.npes
        for counts in self.sent:
            for dest, n in counts.items():
                expect[dest] += n
        for p in range(self.rt.npes):
            self._send(p, (LB_EXPECT, step, expect[p]))

    def arrived(self, step: int, n: int) -> None:
        """``n`` elements moved here by step ``step`` arrived."""
        self.arrivals[step] = self.arrivals.get(step, 0) + n
        self._ready_if_done(step)

    def on_expect(self, env: tuple) -> None:
        _, step, n = env
        self.expect[step] = n
        self._ready_if_done(step)

    def _ready_if_done(self, step: int) -> None:
        want = self.expect.get(step)
        if want is not None and self.arrivals.get(step, 0) >= want:
            del self.expect[step]
            self.arrivals.pop(step, None)
            self._send(0, (LB_READY, step))

    # ----------------------------------------------------------------- 4. the end
    def on_ready(self, env: tuple) -> None:
        self.ready += 1
        if self.ready == self.rt.npes:
            self._finish()

    def _finish(self) -> None:
        """At the root: the step is over (every element has arrived); record it and
        resume the AtSync elements."""
        self.record["total_time"] = total = time.perf_counter() - self.t0
        self.history.append(self.record)
        self._mark("lb step", total, self.record)
        self.rt.publisher.lb_step(self.record)
        self.decision = None
        if self.meta is not None:
            self.meta.balanced(total)
        self._resume_synced()
        self.rt.point.release()

    def collection_destroyed(self, cid: int) -> None:
        """At the root: an at_sync collection was destroyed; the others need not wait
        for it."""
        self.synced.discard(cid)
        self._maybe_sync_step()

    def _resume_synced(self) -> None:
        """``resume_from_sync()`` to every element of the collections that synced."""
        for cid in sorted(self.synced):
            self.rt.send(0, (BCAST_REQ, cid, "resume_from_sync", (), None, 0, None, 0))
        self.synced = set()
        self.marked = False


def smoothed_background(acc: list[float], background: float, wanted: float,
                        wall: float) -> float:
    """The background time of a period of ``wall`` seconds (``wanted`` of them not asleep)
    as the smoothed share of the core says: an exponential average over time, e-folding
    time ``CONTENTION_TIME``, of the background and wanted seconds. ``acc`` holds the
    averaged sums (updated here): the past counts ``e^(-wall / CONTENTION_TIME)`` less after
    the period, which adds its own seconds weighted by the mean of that decay over its
    length. So periods of 30 ms (lb="auto" steps may be that close) are averaged over about
    0.1 s, a long one stands nearly alone, and a long quiet past weighs like 0.1 s of it.
    (A decay of 3/4 per step instead: after one second of quiet, a first 0.1 s period at 42%
    background gave a share of the core of 0.95; here 0.73, then 0.64 and 0.60 after the
    next two such periods, where the balancer's view of a shared core converged over ten
    steps and more.)"""
    keep = math.exp(-max(wall, 0.0) / CONTENTION_TIME)
    weight = CONTENTION_TIME / wall * (1.0 - keep) if wall > 0 else 1.0
    wanted = max(wanted, 0.0)
    acc[0] = keep * acc[0] + weight * background
    acc[1] = keep * acc[1] + weight * wanted
    return acc[0] / acc[1] * wanted if acc[1] > 0 else 0.0


def _smooth(sync: list, load: float) -> None:
    """Fold one iteration's ``load`` into an element's smoothed load per iteration
    (``Slot.sync[1]``; -1 before the first)."""
    sync[1] = load if sync[1] < 0 else sync[1] + RECENT * (load - sync[1])


def _period_load(slot: Slot, total: float) -> float:
    """An element's load for the database: its seconds in entry methods since the last step
    (``total`` now), exact. An element that called ``at_sync()`` more than WINDOW times
    since (lb="auto" lets periods grow long) gets its smoothed load per iteration times
    those iterations instead, so that an imbalance that appeared in the last iterations
    (lb="auto" balances within a few iterations of it) is not diluted by the ones before.

    (The smoothed loads are measured from one ``at_sync()`` call to the next: a call sees
    the calls that returned before it, not the one it is in, so each spans an iteration
    shifted by that call, which is the whole iteration when one call does all of it. An
    element that syncs every k steps, LeanMD's computes, does a period's work in many
    calls, the last of which syncs: the step comes after it returned, and the total since
    the last step is its period; the time since its ``at_sync()``, the last call alone,
    was once taken for the newest iteration, and the first step weighed one call.)"""
    sync = slot.sync
    if sync[2] > WINDOW and sync[1] >= 0:
        load = sync[1] * sync[2]
    else:
        load = total - slot.lb_mark
    slot.lb_mark = total
    sync[2] = 0
    return load


def _speed() -> float:
    """This PE's speed now: the inverse of the least CPU time of ``SPEED_RUNS`` runs of a
    fixed loop of about 50 µs, after one that warms up (Acun14 Fig. 17: a node at 0.7x
    frequency; a core whose sibling another process keeps busy slows the same way, and
    neither shows as background time). CPU time, so that time another process held the
    core (the background) is not counted twice. A PE comes to a balancing step from a wait
    at the sync point, often asleep: the least of three cold runs ranged over 0.79-1.03 of
    their median from one step to the next on one core, which the balancer took for PEs of
    different speeds (LeanMD on 2 PEs: capacities 0.93 / 1.07, and as much imbalance after
    the step); the least of 15 warm runs ranges over 0.97-1.02 (0.8 ms a step)."""
    best = float("inf")
    for k in range(SPEED_RUNS + 1):
        t = time.thread_time()
        x = 0
        for i in range(SPEED_LOOP):
            x += i
        if k:
            best = min(best, time.thread_time() - t)
    return 1.0 / max(best, 1e-7)


def _packed_size(slot: Slot) -> int:
    """Bytes of an element's state as migration would pickle it. Its large buffers (numpy
    arrays: protocol 5 hands them out of band, as the wire does) are counted, not copied:
    copying every element's arrays at every step cost more than the rest of the step (64
    blocks of 2 MiB: 128 MiB of copies)."""
    extra = 0

    def count(buf: pickle.PickleBuffer) -> bool:
        nonlocal extra
        extra += buf.raw().nbytes
        return False  # out of band: not copied into the pickle

    try:
        return len(pickle.dumps(slot.obj, 5, buffer_callback=count)) + extra
    except Exception:  # an unpicklable element fails when it moves, not here
        return 0


def _position(slot: Slot) -> tuple[float, ...]:
    """Where an element is, for the orb strategy: its ``lb_position()`` when its class
    defines one, else its index (a group member's index is not a tuple: no position)."""
    where = getattr(slot.obj, "lb_position", None)
    if where is not None:
        return tuple(float(x) for x in where())
    index = slot.key[1]
    return tuple(float(x) for x in index) if isinstance(index, tuple) else ()


def _coords(positions: list[tuple[float, ...]]) -> np.ndarray:
    """The positions as an ``n x d`` array, missing coordinates 0."""
    width = max((len(p) for p in positions), default=0)
    out = np.zeros((len(positions), width))
    for i, p in enumerate(positions):
        out[i, :len(p)] = p
    return out


def _estimate_local_bytes(db: LBDatabase, msg_bytes: float) -> float:
    """Give the edges between elements of one PE (0 bytes: sent unpickled) the average bytes
    per message of the edges between PEs, or ``msg_bytes`` (an earlier step's) when none
    went between PEs; the average to keep."""
    if db.bytes is None or db.messages is None or db.bytes.size == 0:
        return msg_bytes
    remote = db.bytes > 0
    if remote.any():
        msg_bytes = float(db.bytes[remote].sum() / db.messages[remote].sum())
    local = ~remote & (db.messages > 0)
    db.bytes[local] = np.maximum(1, np.rint(db.messages[local] * msg_bytes)).astype(
        db.bytes.dtype)
    return msg_bytes


def _database(parts: list[dict[str, Any]], npes: int) -> LBDatabase:
    """The root's database from every PE's part (object numbers in PE order)."""
    keys: list[Any] = []
    pe: list[int] = []
    load: list[float] = []
    size: list[int] = []
    movable: list[bool] = []
    pos: list[tuple[float, ...]] = []
    for part in parts:
        keys += part["keys"]
        load += part["load"]
        size += part["size"]
        movable += part["migratable"]
        pos += part["pos"]
        pe += [part["pe"]] * len(part["keys"])
    ids = {k: i for i, k in enumerate(keys)}
    src, dst, msgs, nbytes = [], [], [], []
    for part in parts:
        for s, d, m, b in part["edges"]:
            j = ids.get(d)
            if j is not None:
                src.append(ids[s])
                dst.append(j)
                msgs.append(m)
                nbytes.append(b)
    per_pe = {name: np.zeros(npes) for name in ("wall", "idle", "slept", "background", "speed")}
    for part in parts:
        for name, values in per_pe.items():
            values[part["pe"]] = part[name]
    pes = np.array(pe, np.int64)
    speed = per_pe["speed"]
    speed /= np.median(speed)
    # the probe's resolution: on identical cores of this machine two PEs probing at once
    # differed by up to 14%, and at a step by 20% (0.89 / 1.11 of their mean), which the
    # balancer turned into as much imbalance; a node at 0.7x (Acun14 Fig. 17) is 30% off
    # (emulated frequencies, shoal.runtime.power, are exact: no band for them)
    exact = np.zeros(npes, bool)
    for part in parts:
        exact[part["pe"]] = bool(part.get("exact_speed"))
    speed[(np.abs(speed - 1.0) < SPEED_BAND) & ~exact] = 1.0
    speed /= speed.mean()
    # seconds measured on a slow PE are more than the work they did: in units of the
    # average PE's seconds, an element's load is what it would take anywhere
    return LBDatabase(np.array(load) * speed[pes], pes, npes,
                      migratable=np.array(movable, bool), size=np.array(size, np.int64),
                      **per_pe, src=np.array(src),
                      dst=np.array(dst), messages=np.array(msgs), bytes=np.array(nbytes),
                      keys=keys, coords=_coords(pos))
