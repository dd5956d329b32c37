"""The gossip algorithm as a service over MPI (Levy14, Fig. 1 and Section 4.2).

Every rank of a communicator runs the algorithm at its own phase: once per interval it renews
its own record, and sends the window of its youngest entries to a random rank. Sends have the
datagram semantics of the paper (non-blocking, never waited for); unlike the paper's
``MPI_Bsend``, a bounded number may be outstanding and a send beyond it is dropped and counted,
so a slow receiver cannot abort the job (Section 5.3). Unlike the paper's busy ``MPI_Iprobe``
loop, the service sleeps between deadlines and polls with exponential back-off: an arriving
window waits at most ``poll_max`` before it is merged, which is the trade between latency
and idle CPU. ``run()`` ends collectively and drains every message in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from shoal.errors import UsageError, WireError
from shoal.gossip import wire
from shoal.gossip.analysis import window_entries
from shoal.gossip.records import state_dtype
from shoal.gossip.state import local_state
from shoal.gossip.vector import InfoVector

TAG = 0x5347


@dataclass
class ServiceStats:
    """Counters of one rank's service; times in seconds."""

    sent: int = 0
    received: int = 0
    dropped: int = 0  # sends refused because too many were outstanding
    malformed: int = 0  # received messages that failed validation
    merged_entries: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    ticks: int = 0
    late_ticks: int = 0  # deadlines missed by more than one interval
    busy: float = 0.0  # generating and processing messages
    wall: float = 0.0
    age_samples: list = field(default_factory=list, repr=False)

    @property
    def busy_fraction(self) -> float:
        return self.busy / self.wall if self.wall > 0 else 0.0

    @property
    def mean_age(self) -> float:
        """Average age (s) of the vector over the run's second half, own entry excluded."""
        tail = [a for a in self.age_samples[len(self.age_samples) // 2:] if np.isfinite(a)]
        return float(np.mean(tail)) if tail else float("nan")


class GossipService:
    """Run Fig. 1 on every rank of ``comm`` (collective constructor).

    ``interval`` is the unit of time in seconds; ``window`` a count or a fraction of the
    ranks; ``entry_size`` the record size in bytes; ``state_provider`` returns a dict of the
    record's fields (default: load, free memory and cores read from the OS).
    """

    def __init__(self, comm, interval: float, window: float | int = 0.2,
                 entry_size: int = 1024, state_provider: Callable[[], dict] = local_state,
                 max_outstanding: int = 4, poll_min: float = 50e-6, poll_max: float = 2e-3,
                 seed: int = 0, clock: Callable[[], float] = time.monotonic):
        if not interval > 0:
            raise UsageError(f"the gossip interval must be positive (got {interval} s)")
        if max_outstanding < 1 or not 0 < poll_min <= poll_max:
            raise UsageError("max_outstanding must be >= 1 and 0 < poll_min <= poll_max")
        self.comm = comm.Dup()
        self.size = self.comm.Get_size()
        self.rank = self.comm.Get_rank()
        self.window = window_entries(self.size, window)
        self.interval = float(interval)
        self.state = state_dtype(entry_size)
        self.vector = InfoVector(self.size, self.rank, self.state)
        self.provider = state_provider
        self.max_outstanding = max_outstanding
        self.poll_min, self.poll_max = poll_min, poll_max
        self.clock = clock
        self.stats = ServiceStats()
        self._rng = np.random.default_rng([seed, self.rank])
        self.phase = float(self._rng.random())
        self._recv = bytearray(wire.message_size(self.size, self.state))
        self._outstanding: list = []  # (request, buffer)
        self._spare: list[bytearray] = []
        self._sent_to = np.zeros(self.size, np.int64)
        self._recv_from = np.zeros(self.size, np.int64)
        self._own = np.zeros((), self.state)

    # -- the algorithm -------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Fig. 1, once per unit of time: renew own entry, send the window to a random rank."""
        for name, value in self.provider().items():
            self._own[name] = value
        self.vector.update_own(self._own, now)
        self.stats.ticks += 1
        self.stats.age_samples.append(self.vector.mean_age(now))
        self._reclaim()
        if len(self._outstanding) >= self.max_outstanding:
            self.stats.dropped += 1
            return
        idx = self.vector.window(self.window)
        dest = int(self._rng.integers(self.size - 1))
        dest += dest >= self.rank
        buf = self._spare.pop() if self._spare else None
        msg = wire.encode(self.rank, idx, now - self.vector.born[idx],
                          self.vector.records[idx], buf)
        req = self.comm.Isend([msg, len(msg), _mpi().BYTE], dest, TAG)
        self._outstanding.append((req, msg.obj))
        self._sent_to[dest] += 1
        self.stats.sent += 1
        self.stats.bytes_sent += len(msg)

    def poll(self) -> int:
        """Receive and merge every window that has arrived; return how many."""
        mpi = _mpi()
        got = 0
        status = mpi.Status()
        while True:
            message = self.comm.Improbe(mpi.ANY_SOURCE, TAG, status)
            if message is None:
                return got
            start = self.clock()
            count = status.Get_count(mpi.BYTE)
            src = status.Get_source()
            buf = self._recv if count <= len(self._recv) else bytearray(count)
            message.Recv([buf, count, mpi.BYTE])
            got += 1
            self._recv_from[src] += 1
            self.stats.received += 1
            self.stats.bytes_received += count
            try:
                sender, entries = wire.decode(memoryview(buf)[:count], self.size, self.state)
                if sender != src:
                    raise WireError(f"message from rank {src} claims sender {sender}")
            except WireError:
                self.stats.malformed += 1
            else:
                now = self.clock()
                self.stats.merged_entries += self.vector.merge(
                    entries["node"].astype(np.intp), entries["age"], entries["state"], now)
            self.stats.busy += self.clock() - start

    def _reclaim(self) -> None:
        """Forget sends that completed (never waits)."""
        if not self._outstanding:
            return
        mpi = _mpi()
        done = mpi.Request.Testsome([r for r, _ in self._outstanding]) or []
        for k in sorted(done, reverse=True):
            _, buf = self._outstanding.pop(k)
            self._spare.append(buf)

    # -- driving it ----------------------------------------------------------------------
    def run(self, duration: float | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Gossip until ``duration`` seconds have passed or ``stop()`` is true, then drain.
        Collective: every rank of the communicator must call it."""
        if duration is None and stop is None:
            raise UsageError("give run() a duration or a stop condition")
        self.comm.Barrier()
        t0 = self.clock()
        end = t0 + duration if duration is not None else float("inf")
        next_tick = t0 + self.phase * self.interval
        backoff = self.poll_min
        while True:
            now = self.clock()
            if now >= end or (stop is not None and stop()):
                break
            if now >= next_tick:
                self.tick(now)
                self.stats.busy += self.clock() - now
                next_tick += self.interval
                if now - next_tick > self.interval:
                    missed = int((now - next_tick) // self.interval)
                    self.stats.late_ticks += missed
                    next_tick += missed * self.interval
                backoff = self.poll_min
            if self.poll():
                backoff = self.poll_min
                continue
            self._reclaim()
            pause = min(backoff, next_tick - self.clock(), end - self.clock())
            if pause > 0:
                time.sleep(pause)
            backoff = min(2 * backoff, self.poll_max)
        self._drain()
        self.stats.wall += self.clock() - t0

    def _drain(self) -> None:
        """Stop sending, learn how many messages each rank sent here, receive them all and
        let every own send complete: no message is left in flight."""
        expected = np.zeros(self.size, np.int64)
        req = self.comm.Ialltoall(self._sent_to, expected)
        backoff = self.poll_min
        while True:
            got = self.poll()
            self._reclaim()
            if req.Test() and (self._recv_from >= expected).all() and not self._outstanding:
                break
            if not got:
                time.sleep(backoff)
                backoff = min(2 * backoff, self.poll_max)
        self._sent_to[:] = 0
        self._recv_from[:] = 0

    def close(self) -> None:
        """Free the service's communicator (collective)."""
        self.comm.Free()

    # -- queries -------------------------------------------------------------------------
    def summary(self) -> dict:
        """This rank's counters as a flat dict (for gathering and tables)."""
        s = self.stats
        return {"rank": self.rank, "sent": s.sent, "received": s.received,
                "dropped": s.dropped, "malformed": s.malformed,
                "merged_entries": s.merged_entries, "bytes_sent": s.bytes_sent,
                "bytes_received": s.bytes_received, "ticks": s.ticks,
                "late_ticks": s.late_ticks, "busy_fraction": s.busy_fraction,
                "mean_age": s.mean_age, "wall": s.wall}

    def snapshot(self) -> np.ndarray:
        """Every node's latest known state and its age in seconds (inf if unknown), as a
        structured array with fields ``node``, ``age`` and the record's named fields."""
        names = [n for n in self.state.names if n != "pad"]
        out = np.zeros(self.size, [("node", "<i8"), ("age", "<f8")]
                       + [(n, self.state[n]) for n in names])
        out["node"] = np.arange(self.size)
        out["age"] = self.vector.ages(self.clock())
        for n in names:
            out[n] = self.vector.records[n]
        return out


def _mpi():
    from mpi4py import MPI

    return MPI
