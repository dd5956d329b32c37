"""Quiescence detection (seed 002, Section III): a future that resolves when no application
message is in flight or queued anywhere.

Every PE counts the counted messages it created and processed (:mod:`shoal.runtime.protocol`
says which kinds count). PE 0 sends waves down the spanning tree; each PE answers with the
sums of its subtree. Quiescence is two consecutive waves with equal sums in which created
equals processed; waves back off from 0.5 ms to 50 ms while the system is busy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.runtime.futures import Future
from shoal.runtime.protocol import QD_ASK, QD_REPLY, QD_START, children, parent

if TYPE_CHECKING:
    from shoal.runtime.pe import Runtime


class Quiescence:
    """The quiescence detector of one PE (waves start at PE 0)."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.waiters: list[Future] = []
        self.wave = 0
        self.acc = [0, 0, 0]  # created, processed, replies awaited of the current wave
        self.last: tuple[int, int] | None = None
        self.delay = 5e-4

    def request(self) -> Future:
        """A future that resolves at the next quiescence."""
        fut = self.rt.future()
        self.rt.send(0, (QD_START, fut))
        return fut

    def on_start(self, env: tuple) -> None:
        _, fut = env
        self.waiters.append(fut)
        if len(self.waiters) == 1:
            self.last = None
            self.delay = 5e-4
            self._next_wave()

    def _next_wave(self) -> None:
        self.wave += 1
        self.on_ask((QD_ASK, self.wave))

    def on_ask(self, env: tuple) -> None:
        _, wave = env
        rt = self.rt
        self.wave = wave
        kids = children(rt.pe, 0, rt.npes)
        self.acc = [0, 0, len(kids)]
        for child in kids:
            rt.net.send(child, env)
        self._reply_if_done()

    def on_reply(self, env: tuple) -> None:
        _, wave, created, processed = env
        if wave != self.wave:
            return
        self.acc[0] += created
        self.acc[1] += processed
        self.acc[2] -= 1
        self._reply_if_done()

    def _reply_if_done(self) -> None:
        acc = self.acc
        if acc[2] > 0:
            return
        rt = self.rt
        created = acc[0] + rt.created + rt.queue.pushed
        processed = acc[1] + rt.processed
        if rt.pe != 0:
            rt.net.send(parent(rt.pe, 0, rt.npes), (QD_REPLY, self.wave, created, processed))
            return
        # the counts of this PE include its own queue: PE 0 is idle only if it is empty
        now = (created, processed)
        if created == processed and now == self.last:
            waiters, self.waiters = self.waiters, []
            for fut in waiters:
                rt.resolve(fut.pe, fut.fid, None)
            return
        self.last = now if created == processed else None
        self.delay = min(2 * self.delay, 0.05)
        rt.after(self.delay, self._next_wave)
