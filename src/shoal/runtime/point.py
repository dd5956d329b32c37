"""The job's consistent point, at PE 0: the one moment at a time when nothing moves.

Two kinds of work need the job still: a balancing step (elements move, Acun14 III-A) and a
checkpoint (elements are saved, II-E; a resize is served as one, III-D). They share this
object, which the root holds for one of them at a time (:meth:`ConsistentPoint.hold`);
whoever wanted it meanwhile is called back when it is released (:meth:`when_free`).

An AtSync point (every element of the at_sync arrays has called ``at_sync()``) is a
consistent point of its own: an AtSync program is quiescent nowhere else. The balancer
offers it first to the claims registered here (:meth:`offer`): a checkpoint due or waiting
takes it, and the step waits until the checkpoint releases the point.
"""

from __future__ import annotations

from collections.abc import Callable


class ConsistentPoint:
    """PE 0's holder of the job's consistent point (inert on the other PEs)."""

    def __init__(self) -> None:
        self.held = False  # a balancing step or a checkpoint has it
        self.claims: list[Callable[[], bool]] = []  # asked at an AtSync point: take it?
        self.waiters: list[Callable[[], None]] = []  # called once it is released

    def hold(self) -> bool:
        """Take the point; False (nothing done) while someone else has it."""
        if self.held:
            return False
        self.held = True
        return True

    def release(self) -> None:
        """Give the point back; whoever waited for it looks again now."""
        self.held = False
        waiters, self.waiters = self.waiters, []
        for again in waiters:
            again()

    def when_free(self, again: Callable[[], None]) -> None:
        """Call ``again`` (once, however often asked) when the point is next released."""
        if again not in self.waiters:
            self.waiters.append(again)

    def offer(self) -> bool:
        """An AtSync point with the point free: True if a claim took it (the point is then
        held for that claimant, which releases it)."""
        for claim in self.claims:
            if claim():
                self.held = True
                return True
        return False
