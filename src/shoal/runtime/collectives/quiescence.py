"""Quiescence detection (Acun14, Section III): a future that resolves when no application
message is in flight or queued anywhere, the end of the job once ``main`` has returned, and
the check that ``main`` is not stuck.

Every PE counts the counted messages it created and processed (:mod:`shoal.runtime.protocol`
says which kinds count). PE 0 sends waves down the spanning tree; each PE answers with the
sums of its subtree. Quiescence is two consecutive waves with equal sums in which created
equals processed; waves back off from 0.5 ms to 50 ms while the system is busy.

The end of the job: when ``main`` returns, the work it started still runs; the job ends at
the next quiescence (or earlier by ``shoal.exit()``), so a ``main`` that only starts work
and returns does not end the job before that work has run. While a detection runs (for a
waiter or the end) and its last wave found nothing in flight, the balancer's periodic
trigger starts no step (:meth:`Quiescence.settling`): steps every ``lb_period`` would
otherwise keep an idle job from ever being found quiet.

The stuck-main probe: while ``main`` runs, PE 0 looks (from its idle back-off, never on
the busy path; first 1 s after ``main`` started, then with back-off up to 8 s) whether the
job is quiescent while ``main`` is suspended on a future and no other coroutine waits
anywhere (an element's ``await``, a channel receive, a checkpoint: each may still resolve
something). A probe is at most a few waves; a sleep is pending work, and the balancer's
periodic timer is not work. Then nothing can resolve main's future: the job ends with
``main waits on ... but no work is pending``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from shoal.errors import ShoalError
from shoal.runtime.futures import Future, Task
from shoal.runtime.protocol import QD_ASK, QD_REPLY, QD_START, children, parent

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core

PROBE_FIRST = 1.0  # seconds after main started before the first stuck-main probe
PROBE_MAX = 8.0  # the longest back-off between probes
PROBE_WAVES = 5  # waves a probe may take before it gives up (the job is busy)


class Quiescence:
    """The quiescence detector of one PE (waves start at PE 0)."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.waiters: list[Future] = []
        self.wave = 0
        self.acc = [0, 0, 0, 0]  # created, processed, suspended, replies awaited
        self.last: tuple[int, int] | None = None
        self.delay = 5e-4
        self.main: Task | None = None  # PE 0: the main coroutine, once it runs
        self.probing = 0  # PE 0: waves the current probe has taken (0: none running)
        self.probe_delay = PROBE_FIRST
        self.ending = False  # PE 0: main has returned; exit at the next quiescence

    def request(self) -> Future:
        """A future that resolves at the next quiescence."""
        fut = self.rt.future()
        self.rt.send(0, (QD_START, fut))
        return fut

    def on_start(self, env: tuple) -> None:
        _, fut = env
        self.waiters.append(fut)
        if len(self.waiters) == 1 and not (self.probing or self.ending):
            self._begin()

    def main_returned(self) -> None:
        """PE 0: ``main`` has returned: end the job at the next quiescence."""
        self.main = None
        self.rt.probe_at = float("inf")
        self.ending = True
        if not (self.waiters or self.probing):
            self._begin()

    def settling(self) -> bool:
        """PE 0: a detection runs for a waiter or the end of the job and its last wave
        found nothing in flight (the balancer's periodic trigger waits then)."""
        return self.last is not None and bool(self.waiters or self.ending)

    def _begin(self) -> None:
        """Start a detection (none runs)."""
        self.last = None
        self.delay = 5e-4
        self._next_wave()

    def _next_wave(self) -> None:
        self.wave += 1
        self.on_ask((QD_ASK, self.wave, bool(self.probing)))

    def on_ask(self, env: tuple) -> None:
        _, wave, probe = env
        rt = self.rt
        self.wave = wave
        kids = children(rt.pe, 0, rt.npes)
        # a probe also counts the coroutines that wait on a future here
        waiting = sum(1 for f in rt.futures.values()
                      if any(type(w) is Task for w in f.waiters)) if probe else 0
        self.acc = [0, 0, waiting, len(kids)]
        for child in kids:
            rt.net.send(child, env)
        self._reply_if_done()

    def on_reply(self, env: tuple) -> None:
        _, wave, created, processed, waiting = env
        if wave != self.wave:
            return
        self.acc[0] += created
        self.acc[1] += processed
        self.acc[2] += waiting
        self.acc[3] -= 1
        self._reply_if_done()

    def _reply_if_done(self) -> None:
        acc = self.acc
        if acc[3] > 0:
            return
        rt = self.rt
        entered, left = rt.aggregation.counts()  # items in aggregation buffers are work
        created = acc[0] + rt.created + rt.queue.pushed + entered
        processed = acc[1] + rt.processed + left
        if rt.pe != 0:
            rt.net.send(parent(rt.pe, 0, rt.npes),
                        (QD_REPLY, self.wave, created, processed, acc[2]))
            return
        # the counts of this PE include its own queue: PE 0 is idle only if it is empty
        now = (created, processed)
        quiet = created == processed and now == self.last
        if self.probing:
            self._probed(quiet, acc[2])
            if not (self.probing or self.waiters or self.ending):
                return  # the probe gave up: no waves until the next one
        if quiet and (self.waiters or self.ending):
            waiters, self.waiters = self.waiters, []
            for fut in waiters:
                rt.resolve(fut.pe, fut.fid, None)
            if self.ending:
                rt.exit()
            return
        self.last = now if created == processed else None
        self.delay = min(2 * self.delay, 0.05)
        rt.after(self.delay, self._next_wave)

    # ----------------------------------------------------------------- stuck main
    def watch(self, main: Task) -> None:
        """PE 0: ``main`` runs as a coroutine; probe it from the idle back-off."""
        self.main = main
        self.rt.probe_at = time.perf_counter() + self.probe_delay

    def probe(self) -> None:
        """PE 0, idle: start a probe (unless a detection is running or main is not
        suspended, then look again later)."""
        rt = self.rt
        rt.probe_at = float("inf")
        if self.main is None:
            return  # main has returned
        if self.waiters or self._main_future() is None:
            rt.probe_at = time.perf_counter() + self.probe_delay
            return
        self.probing = 1
        self.last = None
        self.delay = 5e-4
        self._next_wave()

    def _main_future(self) -> Future | None:
        main = self.main
        for fut in self.rt.futures.values():
            if main in fut.waiters:
                return fut
        return None

    def _probed(self, quiet: bool, waiting: int) -> None:
        """A probe's wave came back: quiescent with main's the only waiting coroutine
        means main is stuck, unless main awaits quiescence (a request that came while the
        probe ran: this wave answers it); otherwise another wave, or give up for a while."""
        fut = self._main_future()
        if quiet and waiting == 1 and fut is not None and not self.waiters:
            self.rt.work = (None, "main")
            raise ShoalError(f"main waits on {fut!r} but no work is pending: nothing can "
                             "resolve it (every PE is idle, no message is in flight, no "
                             "other coroutine waits, no sleep is due)")
        if quiet or fut is None or self.probing >= PROBE_WAVES:
            self.probing = 0
            self.probe_delay = min(2 * self.probe_delay, PROBE_MAX)
            if self.main is not None:
                self.rt.probe_at = time.perf_counter() + self.probe_delay
            return
        self.probing += 1
