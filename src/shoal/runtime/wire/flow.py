"""Flow control between PEs: what a sender may have outstanding to one receiver is bounded
(issue 17, section 6).

Without it, a PE that sends faster than its receiver takes them grows without bound, and
not in Python: MPICH's eager sends return once the message sits in the receiver's MPI
library, and when two PEs flood each other, each one's blocked ``MPI_Send`` pulls the
other's messages into its unexpected-message queue at about 4.8 KB each (two PEs sending
each other 3x10^5 small messages in one entry method peaked at 1.4 GiB each,
``benchmarks/runtime_memory.py mutual``).

Windows: a sender counts what it sends to each destination in units (a message, plus one
per ``UNIT`` bytes that go by MPI: buffers in a shared segment are bounded by the segment).
The message that uses up the ``WINDOW`` units of a window goes by ``MPI_Issend``, which
completes only once the receiver has received it; the message that would close the next
window goes only after that one has completed. So at most two windows, 128 messages or
8 MiB, are outstanding from one PE to another in MPI (what MPICH holds for a PE is bounded
by its senders' windows). No acknowledgement messages: the receiver does nothing but
receive, which it does anyway. Smaller windows made PEs wait more often on a shared machine
(4 PEs on 2 cores: 32 messages cost 10^6 messages about 1.5x the time of 64 or 256, whose
times were within the machine's noise).

A message that finds its destination's windows full does not hold its sender: it waits in
the sender's *backlog* (with every later message to that destination, so order is kept)
and the sender's loop sends it when the window frees. A receiver takes one message per turn
of its loop and runs the work it brings, so a burst of hundreds of messages to a busy PE
fills the windows for as long as that PE works through them; a sender that waited then
would leave its own work undone (LeanMD on 2 PEs after balancing: both PEs waited 50-100 ms
per step, a third of the step, with work queued). Only when a PE's backlog holds more than
``BACKLOG`` units does it wait, in the send, for windows to take it back under: what the
sender holds stays bounded too (a program that floods in one entry method waits there).

A PE waiting for a window never stops receiving: it takes every envelope that arrives and
sets it aside (``held``, their bytes as received, about 200 B each), to be handled in order
before anything newer once its scheduler runs again. So two PEs that flood each other, or
any cycle of PEs waiting for each other, all make progress: each one's waiting send
completes as soon as the next PE receives, which a waiting PE does. A receiver that runs a
long entry method without sending makes its senders wait (that is the back-pressure); the
wait polls with back-off and never spins for long on an idle core.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from mpi4py import MPI

UNIT: Final = 65536  # bytes by MPI that count as one more message in a window
WINDOW: Final = 64  # units per window: a sender has at most two windows outstanding to a receiver
BACKLOG: Final = 16 * WINDOW  # units a PE's backlog holds before a send waits for windows
SPIN: Final = 1e-4  # seconds a waiting sender polls before it starts sleeping
NAP_MAX: Final = 1e-3  # the longest sleep between two looks


class Flow:
    """The envelopes a PE set aside while it waited for a window (headers as received:
    ``(source, tag, bytes)``, from ``take``, the transport's receive), and the wait."""

    def __init__(self, take: Callable[[], tuple[int, int, bytearray] | None]):
        self._take = take
        self.held: deque[tuple[int, int, bytearray]] = deque()
        self.waits = 0  # windows this PE waited for (statistics)
        # seconds in waits, and of those asleep: idle time, not time another process held
        # the core (the balancer's background is what is neither working nor asleep; the
        # PE that waits on a busy one was taken for a slow one)
        self.waited = 0.0
        self.slept = 0.0

    def wait(self, req: MPI.Request) -> None:
        """Until ``req`` (the send that closed the last window) completes, receive and set
        aside whatever arrives; sleep 10 us, then longer, while nothing does."""
        self.waits += 1
        nap = 1e-5
        start = idle_since = time.perf_counter()
        while not req.Test():
            got = self._take()
            if got is not None:
                self.held.append(got)
                idle_since = time.perf_counter()
                nap = 1e-5
            elif time.perf_counter() - idle_since > SPIN:
                t = time.perf_counter()
                time.sleep(nap)
                self.slept += time.perf_counter() - t
                nap = min(2 * nap, NAP_MAX)
        self.waited += time.perf_counter() - start
