"""``lb="distributed"`` on the runtime's messages: GrapevineLB (Menon and Kale, SC'13) with
no central database. Each PE runs the :class:`~shoal.runtime.lb.distributed.PEState` steps
that :func:`~shoal.runtime.lb.distributed.simulate` runs offline; PE 0 only sums, takes
maxima and decides what comes next.

A step (started by the :class:`~shoal.runtime.lb.driver.Balancer` at PE 0, on the same
triggers as every strategy):

1. ``LB_GV_DOWN start`` goes down the spanning tree (``protocol.children``); each PE
   measures its own part (the balancer's ``_local_stats``: its elements' loads, sizes,
   whether they may move; its wall, slept and background time, hence its capacity
   ``core_share``) and builds its ``PEState``. A reduction (``LB_GV_UP``, up
   ``protocol.parent``) of total load, total capacity and maximum scaled load gives PE 0
   the average and max/avg before the step.
2. Gossip, ``ceil(log2 P)`` synchronous rounds over asynchronous messages: ``LB_GV_DOWN
   round r`` (with the average) starts round ``r``; each PE sends its window of entries to
   ``FANOUT`` random PEs (``LB_GV_GOSSIP``); receivers merge and acknowledge
   (``LB_GV_ACK``); a PE whose messages are all acknowledged contributes to the round's
   barrier (a reduction up the tree); PE 0 then starts the next round.
3. Transfer phases ``k = 1, 2, ...`` with threshold ``T_k = 1 + k STEP``: ``LB_GV_DOWN
   phase k``; a PE over ``T_k avg`` offers objects, lightest first (``LB_GV_OFFER``), to
   known underloaded PEs drawn with probability proportional to room; the receiver accepts
   or refuses (``LB_GV_REPLY``). A PE whose offers are all answered contributes its scaled
   load *at the start of the phase* to the phase's max-reduction: every offer of phase
   ``k - 1`` had been answered before phase ``k`` began, so that maximum is exact. PE 0
   ends when it is at most ``T_k avg`` (nobody offered in phase ``k``: ``k - 1`` phases
   ran) or after phase ``PHASES`` (a last phase without offers measures the result).
4. ``LB_GV_DOWN move``: each PE moves the objects others accepted in one ``migrate_many``
   tagged with the step (the balancer's ``on_moves``); the balancer's ``LB_SENT`` /
   ``LB_EXPECT`` / ``LB_READY`` counting completes the step, and PE 0 records it.

Message order aside, a run is reproducible: each PE draws from
``numpy.random.default_rng(SEED + pe)``. PE 0 never sees another PE's objects: the record's
``root_objects`` is the number it measured itself, ``objects`` the reduced total.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.runtime.lb.common import MIN_CAPACITY
from shoal.runtime.lb.database import core_share
from shoal.runtime.lb.distributed import (
    ACCEPT,
    PHASES,
    REFUSE,
    WINDOW,
    PEState,
    gossip_rounds,
    phase_threshold,
)
from shoal.runtime.protocol import (
    LB_GV_ACK,
    LB_GV_DOWN,
    LB_GV_GOSSIP,
    LB_GV_OFFER,
    LB_GV_REPLY,
    LB_GV_UP,
    LB_MOVES,
    children,
    parent,
)

if TYPE_CHECKING:
    from shoal.runtime.lb.driver import Balancer

SEED = 0

# the figures every reduction carries: sums, except MAX (the maximum scaled load)
LOAD, CAP, MAX, OBJECTS, MESSAGES, MIGRATIONS, BYTES = range(7)


def _combine(a: list[float], b: list[float]) -> list[float]:
    out = [x + y for x, y in zip(a, b, strict=True)]
    out[MAX] = max(a[MAX], b[MAX])
    return out


def local_state(pe: int, part: dict[str, Any]) -> PEState:
    """The ``PEState`` of one PE from its part of the database (``Balancer._local_stats``):
    its movable elements lightest first, its capacity from its own times."""
    cap = max(core_share(part["wall"], part["slept"], part["background"]), MIN_CAPACITY)
    load = part["load"]
    order = sorted((i for i, ok in enumerate(part["migratable"]) if ok), key=load.__getitem__)
    return PEState(pe, float(cap), float(sum(load)), [part["keys"][i] for i in order],
                   [float(load[i]) for i in order])


class Grapevine:
    """One PE's part of a distributed step (module doc); PE 0 also decides."""

    def __init__(self, balancer: Balancer):
        self.lb = balancer
        self.rt = balancer.rt
        self.rng: np.random.Generator | None = None
        self.state = PEState(0, 1.0, 0.0, [], [])
        self.sizes: dict[Any, int] = {}
        self.objects = 0  # elements this PE measured
        self.messages = 0  # sent to other PEs in this step
        self.start_max = 0.0  # scaled load at the start of the current stage
        self.waiting = 0  # gossip messages or offers not yet answered
        self.stage: tuple | None = None  # the stage to contribute to once they are
        self.partial: dict[tuple, list] = {}  # (step, stage) -> [contributions, figures]
        # PE 0's
        self.avg = 0.0
        self.rounds = 0
        self.record: dict[str, Any] = {}

    def begin(self, step: int, sync: bool) -> None:
        """At PE 0: start step ``step`` (``sync``: at an AtSync point)."""
        self.lb._send(0, (LB_GV_DOWN, step, ("start", sync)))

    def _msg(self, dest: int, env: tuple) -> None:
        if dest != self.rt.pe:
            self.messages += 1
        self.lb._send(dest, env)

    # ----------------------------------------------------------------- down the tree
    def on_down(self, env: tuple) -> None:
        _, step, stage = env
        rt = self.rt
        for child in children(rt.pe, 0, rt.npes):
            self._msg(child, env)
        name = stage[0]
        if name == "start":
            self._start(step, stage[1])
        elif name == "round":
            self._round(step, *stage[1:])
        elif name == "phase":
            self._phase(step, *stage[1:])
        else:  # "move"
            self.lb.on_moves((LB_MOVES, step, self.state.given))

    def _start(self, step: int, sync: bool) -> None:
        rt = self.rt
        if self.rng is None:
            self.rng = np.random.default_rng(SEED + rt.pe)
        self.lb.step = step
        part = self.lb._local_stats(sync)
        self.state = local_state(rt.pe, part)
        self.sizes = dict(zip(part["keys"], part["size"], strict=True))
        self.objects = len(part["keys"])
        self.messages = self.waiting = 0
        self.start_max = self.state.scaled()
        self.stage = ("start",)
        self._answered(step)

    def _round(self, step: int, rnd: int, avg: float) -> None:
        if rnd == 1:
            self.state.start_gossip(avg)
        assert self.rng is not None
        msgs = self.state.gossip(rnd, self.rt.npes, self.rng, WINDOW)
        self.waiting, self.stage = len(msgs), ("round", rnd)
        for _, src, dst, entries in msgs:
            self._msg(dst, (LB_GV_GOSSIP, step, src, entries))
        self._answered(step)

    def _phase(self, step: int, k: int, limit: float, avg: float) -> None:
        s = self.state
        if k == 1 and self.rt.npes == 1:
            s.start_gossip(avg)  # (no gossip rounds on one PE)
        s.end_phase()
        self.start_max = s.scaled()
        assert self.rng is not None
        msgs = s.offers(limit, self.rng) if k <= PHASES else []
        self.waiting, self.stage = len(msgs), ("phase", k)
        for _, src, dst, (obj, w) in msgs:
            self._msg(dst, (LB_GV_OFFER, step, src, obj, w, limit))
        self._answered(step)

    # ----------------------------------------------------------------- between PEs
    def on_gossip(self, env: tuple) -> None:
        _, step, src, entries = env
        self.state.on_gossip(entries)
        self._msg(src, (LB_GV_ACK, step))

    def on_ack(self, env: tuple) -> None:
        self.waiting -= 1
        self._answered(env[1])

    def on_offer(self, env: tuple) -> None:
        _, step, src, obj, w, limit = env
        kind, me, _, _ = self.state.on_offer(src, obj, w, limit)
        self._msg(src, (LB_GV_REPLY, step, kind == ACCEPT, obj, w, me))

    def on_reply(self, env: tuple) -> None:
        _, step, ok, obj, w, src = env
        self.state.on_reply(ACCEPT if ok else REFUSE, src, obj, w)
        self.waiting -= 1
        self._answered(step)

    # ----------------------------------------------------------------- up the tree
    def _answered(self, step: int) -> None:
        """Contribute to the current stage's reduction once nothing is unanswered."""
        if self.waiting or self.stage is None:
            return
        stage, self.stage = self.stage, None
        s = self.state
        given = s.given
        figures = [s.load, s.cap, self.start_max, float(self.objects), float(self.messages),
                   float(len(given)), float(sum(self.sizes.get(obj, 0) for obj, _ in given))]
        self._add(step, stage, figures)

    def on_up(self, env: tuple) -> None:
        _, step, stage, figures = env
        self._add(step, stage, figures)

    def _add(self, step: int, stage: tuple, figures: list[float]) -> None:
        rt = self.rt
        key = (step, stage)
        got = self.partial.get(key)
        if got is None:
            got = self.partial[key] = [0, figures]
        else:
            got[1] = _combine(got[1], figures)
        got[0] += 1
        if got[0] <= len(children(rt.pe, 0, rt.npes)):
            return
        del self.partial[key]
        total = got[1]
        if rt.pe != 0:
            total[MESSAGES] += 1  # this message
            self._msg(parent(rt.pe, 0, rt.npes), (LB_GV_UP, step, stage, total))
        elif stage[0] == "start":
            self._averaged(step, total)
        elif stage[0] == "round" and stage[1] < self.rounds:
            self._down(step, ("round", stage[1] + 1, self.avg))
        elif stage[0] == "round":
            self._down(step, ("phase", 1, phase_threshold(1), self.avg))
        else:
            self._phase_done(step, stage[1], total)

    # ----------------------------------------------------------------- PE 0 decides
    def _down(self, step: int, stage: tuple) -> None:
        self.lb._send(0, (LB_GV_DOWN, step, stage))

    def _averaged(self, step: int, total: list[float]) -> None:
        lb = self.lb
        self.avg = avg = total[LOAD] / total[CAP]
        before = total[MAX] / avg if avg > 0 else 1.0
        if lb.history:  # the period since the last step measures its result
            lb.history[-1]["after_measured"] = before
        self.rounds = gossip_rounds(self.rt.npes)
        self.record = {"step": step, "strategy": "distributed", "auto": lb.decision,
                       "objects": int(total[OBJECTS]), "root_objects": self.objects,
                       "before": before, "rounds": self.rounds}
        if self.rounds:
            self._down(step, ("round", 1, avg))
        else:
            self._down(step, ("phase", 1, phase_threshold(1), avg))

    def _phase_done(self, step: int, k: int, total: list[float]) -> None:
        limit = phase_threshold(min(k, PHASES))
        if k <= PHASES and total[MAX] > limit * self.avg:
            self._down(step, ("phase", k + 1, phase_threshold(k + 1), self.avg))
            return
        lb, npes = self.lb, self.rt.npes
        self.record.update({
            "after_predicted": total[MAX] / self.avg if self.avg > 0 else 1.0,
            "after_measured": None, "migrations": int(total[MIGRATIONS]),
            "bytes_moved": int(total[BYTES]), "strategy_time": time.perf_counter() - lb.t0,
            "phases": k - 1, "threshold": limit,
            "messages": int(total[MESSAGES]) + npes - 1})  # + the move broadcast
        lb.record, lb.sent, lb.ready = self.record, [], 0
        self._down(step, ("move",))
