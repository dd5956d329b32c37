"""Failure detection from gossip ages: alive, suspected, dead, and alive again.

A live node's entry in another node's vector has an age whose law the paper's fixed point
gives (:func:`shoal.gossip.analysis.age_quantile`): past the age that a live node's entry
exceeds with probability ``tail`` (per look), the node is *suspected*. A suspicion alone is
cheap to raise and cheap to clear; what declares a node *dead* is a confirmation: the
suspecting node probes the suspect directly (``probes`` times, ``probe_wait`` apart) and
hears nothing back. Any sign of life clears it (an answer to a probe, or a record younger
than the threshold: a dead node that comes back is alive again, no permanent exclusion).

Two guards against false alarms, after SWIM and Lifeguard:

- an answered probe counts as a fresh record of the suspect (its effective age is the time
  since the answer), so the old entry in the vector does not raise the suspicion again at
  once;
- *local health*: when more than half of the other nodes look suspect at once, the likely
  fault is here (this node starved of CPU or cut off), not there: nobody is declared dead
  until that passes, and the state says so. The same holds for a while after this node's
  own timer fired late by more than an interval (:meth:`Detector.late`: it was stopped or
  starved; the answers to its probes may wait unread in its socket): a full confirmation
  period, ``probes`` waits.

The detector is pure bookkeeping: the daemon gives it the ages at each look and the
answers it receives, and sends the probes it asks for.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import lru_cache

from shoal.errors import UsageError
from shoal.gossip.analysis import age_quantile, window_entries

ALIVE, SUSPECT, DEAD = "alive", "suspect", "dead"
COUNTS = ("suspected", "dead", "refuted", "recovered", "probes")  # what a Detector counts


@dataclass
class Peer:
    """What this node believes of another."""

    state: str = ALIVE
    since: float = 0.0  # when it entered the state
    probes: int = 0  # probes sent in this suspicion
    probed_at: float = -1e300
    heard_at: float = -1e300  # its last answer to a probe


@dataclass
class Detector:
    """Alive/suspect/dead of every other node, from the ages of their entries.

    ``interval`` is the gossip interval (seconds), ``window`` the window (entries or a
    fraction of N), ``tail`` the probability that a live node is suspected at one look,
    ``probes`` the unanswered probes that confirm a death, ``probe_wait`` seconds between
    them (default: one interval)."""

    interval: float
    window: float | int
    tail: float = 0.01
    probes: int = 3
    probe_wait: float | None = None
    peers: dict[Hashable, Peer] = field(default_factory=dict)  # by node name or id
    local_trouble: bool = False  # most others look suspect, or this node ran late: the
    # fault is likely here
    slow_until: float = -1e300  # this node's timer fired late: nobody dead before then
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))

    def __post_init__(self) -> None:
        if not self.interval > 0:
            raise UsageError(f"the gossip interval must be positive (got {self.interval})")
        if not 0.0 < self.tail < 1.0:
            raise UsageError(f"the suspicion tail lies in (0, 1) (got {self.tail})")
        if self.probes < 1:
            raise UsageError(f"a death needs at least 1 unanswered probe (got {self.probes})")

    def threshold(self, nodes: int) -> float:
        """Seconds past which the entry of a live node among ``nodes`` is suspect."""
        return _threshold(nodes, self.window, self.tail) * self.interval

    def look(self, now: float, ages: dict[Hashable, float]) -> list[Hashable]:
        """Update every node's state from its entry's age (seconds) at ``now``; returns the
        names to probe now."""
        if not ages:
            return []
        limit = self.threshold(len(ages) + 1)
        wait = self.interval if self.probe_wait is None else self.probe_wait
        suspect = [name for name, age in ages.items()
                   if min(age, now - self._peer(name, now).heard_at) > limit]
        self.local_trouble = ((len(ages) >= 3 and 2 * len(suspect) > len(ages))
                              or now < self.slow_until)
        for name in ages:
            if name not in suspect:
                self._alive(self.peers[name], now)
        out = []
        for name in suspect:
            peer = self.peers[name]
            if peer.state == ALIVE:
                self._enter(peer, SUSPECT, now, "suspected")
                peer.probes = 0
            if peer.state == DEAD or now - peer.probed_at < wait:
                continue  # (a dead node is not probed: its own gossip says when it is back)
            if peer.probes >= self.probes:
                if not self.local_trouble:
                    self._enter(peer, DEAD, now, "dead")
                continue
            peer.probes += 1
            peer.probed_at = now
            self.counts["probes"] += 1
            out.append(name)
        return out

    def late(self, now: float, lateness: float) -> None:
        """This node's timer fired ``lateness`` seconds after it was due, at ``now``: past a
        whole interval, the node was stopped or starved of CPU (Lifeguard's self-awareness;
        the scheduling jitter of a busy machine is tens of milliseconds), and it declares
        nobody dead for a confirmation period."""
        wait = self.interval if self.probe_wait is None else self.probe_wait
        if lateness > self.interval:
            self.slow_until = max(self.slow_until, now + self.probes * wait)

    def answered(self, name: Hashable, now: float) -> None:
        """``name`` answered a probe (or spoke to this node directly) at ``now``."""
        peer = self._peer(name, now)
        peer.heard_at = now
        self._alive(peer, now)

    def state(self, name: Hashable) -> str:
        peer = self.peers.get(name)
        return ALIVE if peer is None else peer.state

    def _peer(self, name: Hashable, now: float) -> Peer:
        peer = self.peers.get(name)
        if peer is None:
            peer = self.peers[name] = Peer(since=now)
        return peer

    def _alive(self, peer: Peer, now: float) -> None:
        """A sign of life: a suspicion is refuted, a dead node has recovered."""
        if peer.state != ALIVE:
            self._enter(peer, ALIVE, now, "refuted" if peer.state == SUSPECT else "recovered")

    def _enter(self, peer: Peer, state: str, now: float, count: str) -> None:
        peer.state, peer.since = state, now
        self.counts[count] += 1


@lru_cache(maxsize=1024)
def _threshold(nodes: int, window: float | int, tail: float) -> float:
    """The suspicion threshold in units of time (cached: N changes rarely)."""
    if nodes < 2:
        return float("inf")
    return age_quantile(nodes, window_entries(nodes, window), tail)
