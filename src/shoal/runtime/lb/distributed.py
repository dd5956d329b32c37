"""GrapevineLB (Menon and Kale, SC'13; Charm++'s DistributedLB; Acun14, Section IV-A: AMR3D
uses "a distributed load balancing strategy"): no PE ever gathers the database. The
per-PE steps are the methods of :class:`PEState`; :func:`simulate` runs them round by round
on a database with explicit messages (offline, ``shoal lb simulate``), and
:mod:`shoal.runtime.lb.grapevine` runs the same methods on the runtime's messages
(``lb="distributed"``).

1. One reduction gives the average scaled load ``avg`` (total load / total capacity;
   counted as ``2 (P - 1)`` messages, up and down a tree).
2. Gossip, the windowed algorithm of Levy14 (Fig. 1) in synchronous rounds: an
   underloaded PE (scaled load < ``avg``) starts knowing its own ``(PE, load, capacity)``
   entry; every round, each PE that knows any entry sends the ``window`` youngest entries it
   knows (the most recently learned, its own always included, renewed) to ``fanout`` (2)
   PEs drawn uniformly; a receiver keeps each entry newer than its copy. ``ceil(log2 P)``
   rounds (at most ``2 log2 P``).
3. Transfer phases with threshold ``T`` = 1.01, 1.02, ... 1.10 (at most 10 phases; a phase
   ends with a reduction of the maximum scaled load, and the next phase runs only while
   it is above ``T avg``). In a phase, a PE over ``T avg`` offers its movable objects,
   lightest first, until its own load is under ``T avg``; each goes to a known underloaded
   PE drawn with probability proportional to its room, ``T avg capacity - estimated load``
   (only PEs with room for the object; the sender adds what it offered to its estimate).
   A receiver accepts an offer when the object fits under ``T avg capacity``, else
   refuses (the object stays, the sender stops offering to that PE in this phase).

Deterministic for a seed (``numpy.random.default_rng(seed)``: gossip targets, transfer
choices and the order in which each round's messages arrive). Capacities as in every
strategy; non-migratable objects are never offered.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.errors import UsageError
from shoal.gossip.vector import SparseVector
from shoal.runtime.lb.common import capacity
from shoal.runtime.lb.database import LBDatabase

FANOUT = 2
WINDOW = 16  # gossip entries per message
PHASES = 10
STEP = 0.01  # the threshold of phase k is 1 + k * STEP

GOSSIP, OFFER, ACCEPT, REFUSE = "gossip", "offer", "accept", "refuse"


@dataclass
class PEState:
    """What one PE knows and holds. ``objects``/``weights``: its movable objects, lightest
    first (names, e.g. global numbers or element keys, and loads); ``known``: underloaded
    PE -> ``[load, capacity, round learned]``; ``estimate``: during a phase, what it
    believes each known PE holds; ``given``: ``(object, PE)`` for each object another PE
    accepted."""

    pe: int
    cap: float
    load: float
    objects: list[Any]
    weights: list[float]
    avg: float = 0.0
    known: SparseVector = field(init=False)  # underloaded PE -> (load, capacity)
    estimate: dict[int, float] = field(default_factory=dict)
    pending: float = 0.0  # load offered and not yet answered
    given: list[tuple[Any, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.known = SparseVector(self.pe)

    def scaled(self) -> float:
        """The scaled load: the time this PE needs for its objects."""
        return self.load / self.cap

    # ---------------------------------------------------------------- 2. gossip
    def start_gossip(self, avg: float) -> None:
        """The reduction's average arrives; an underloaded PE knows itself."""
        self.avg = avg
        if self.load < avg * self.cap:
            self.known.update_own((self.load, self.cap), 0)

    def gossip(self, rnd: int, npes: int, rng: np.random.Generator,
               window: int) -> list[tuple]:
        """This round's messages: the ``window`` youngest entries to ``fanout`` PEs."""
        if not self.known or npes < 2:
            return []
        if self.pe in self.known:
            self.known.update_own(self.known.record(self.pe), rnd)
        entries = [(q, load, cap, heard)
                   for q, heard, (load, cap) in self.known.window(window)]
        to = rng.choice(npes - 1, size=min(FANOUT, npes - 1), replace=False)
        to += to >= self.pe  # anyone but itself
        return [(GOSSIP, self.pe, int(q), entries) for q in to]

    def on_gossip(self, entries: list[tuple]) -> None:
        self.known.merge([(q, heard, (load, cap)) for q, load, cap, heard in entries])

    # ---------------------------------------------------------------- 3. transfers
    def offers(self, threshold: float, rng: np.random.Generator) -> list[tuple]:
        """Offers of objects, lightest first, while the load is over ``threshold avg``."""
        limit = threshold * self.avg * self.cap
        if self.load - self.pending <= limit or not self.objects:
            return []
        if not self.estimate:
            self.estimate = {q: record[0] for q, (_, record) in self.known.entries.items()
                             if q != self.pe}
        peers = np.fromiter(self.estimate, np.int64, len(self.estimate))
        caps = np.array([self.known.record(int(q))[1] for q in peers])
        est = np.array([self.estimate[int(q)] for q in peers])
        out = []
        for obj, w in zip(self.objects, self.weights, strict=True):
            if self.load - self.pending <= limit:
                break
            room = threshold * self.avg * caps - est
            fits = np.flatnonzero(room >= w)
            if fits.size == 0:
                break  # the later objects are heavier still
            k = fits[np.searchsorted(np.cumsum(room[fits]), rng.random() * room[fits].sum(),
                                     side="right").clip(0, fits.size - 1)]
            est[k] += w
            self.pending += w
            out.append((OFFER, self.pe, int(peers[k]), (obj, w)))
        self.estimate = dict(zip(peers.tolist(), est.tolist(), strict=True))
        return out

    def on_offer(self, src: int, obj: Any, w: float, threshold: float) -> tuple:
        """Accept the object when it fits under ``threshold avg``, else refuse it."""
        if self.load + w <= threshold * self.avg * self.cap:
            self.load += w
            i = bisect.bisect(self.weights, w)
            self.objects.insert(i, obj)
            self.weights.insert(i, w)
            return (ACCEPT, self.pe, src, (obj, w))
        return (REFUSE, self.pe, src, (obj, w))

    def on_reply(self, kind: str, src: int, obj: Any, w: float) -> None:
        self.pending -= w
        if kind == ACCEPT:
            self.load -= w
            i = self.objects.index(obj)
            del self.objects[i], self.weights[i]
            self.given.append((obj, src))
        else:
            self.estimate[src] = math.inf  # full: not again in this phase

    def end_phase(self) -> None:
        self.estimate = {}
        self.pending = 0.0


@dataclass
class Outcome:
    """What a simulated run did: the placement, the gossip rounds, the transfer phases, the
    messages (gossip, offers and replies, reductions) and the final threshold."""

    placement: np.ndarray
    rounds: int
    phases: int
    messages: int
    gossip_messages: int
    threshold: float


def _states(db: LBDatabase) -> list[PEState]:
    assert db.migratable is not None
    cap = capacity(db)
    loads = db.pe_loads()
    movable = np.flatnonzero(db.migratable)
    order = movable[np.lexsort((db.load[movable], db.pe[movable]))]
    cut = np.searchsorted(db.pe[order], np.arange(db.npes + 1))
    return [PEState(p, float(cap[p]), float(loads[p]), order[cut[p]:cut[p + 1]].tolist(),
                    db.load[order[cut[p]:cut[p + 1]]].tolist()) for p in range(db.npes)]


def gossip_rounds(npes: int) -> int:
    """The default number of gossip rounds, ``ceil(log2 P)`` (0 on one PE)."""
    return math.ceil(math.log2(npes)) if npes > 1 else 0


def phase_threshold(k: int) -> float:
    """The threshold of transfer phase ``k`` (1, 2, ...): ``1 + k STEP``."""
    return 1.0 + k * STEP


def _deliver(msgs: list[tuple], rng: np.random.Generator) -> list[tuple]:
    """This round's messages in the (random) order they arrive."""
    return [msgs[i] for i in rng.permutation(len(msgs))]


def simulate(db: LBDatabase, seed: int = 0, rounds: int | None = None,
             window: int = WINDOW) -> Outcome:
    """Run GrapevineLB on ``db`` (module docstring); ``rounds`` of gossip (default
    ``ceil(log2 P)``, at most ``2 log2 P``)."""
    npes = db.npes
    bound = max(1, math.ceil(2 * math.log2(npes))) if npes > 1 else 0
    rounds = gossip_rounds(npes) if rounds is None else rounds
    if not 0 <= rounds <= bound:
        raise UsageError(f"distributed: gossip rounds must lie in [0, {bound}] "
                         f"(2 log2 P), not {rounds}")
    if window < 1:
        raise UsageError(f"distributed: the gossip window must be >= 1, not {window}")
    rng = np.random.default_rng(seed)
    pes = _states(db)
    reduction = 2 * (npes - 1)
    avg = sum(s.load for s in pes) / sum(s.cap for s in pes)
    messages = reduction
    for s in pes:
        s.start_gossip(avg)
    gossip = 0
    for rnd in range(1, rounds + 1):
        sent = [m for s in pes for m in s.gossip(rnd, npes, rng, window)]
        for _, _, dst, entries in _deliver(sent, rng):
            pes[dst].on_gossip(entries)
        gossip += len(sent)
    messages += gossip
    phases, threshold, transfer = _transfer(pes, avg, rng)
    messages += transfer
    placement = db.pe.copy()
    for s in pes:
        placement[s.objects] = s.pe
    return Outcome(placement, rounds, phases, messages, gossip, threshold)


def _transfer(pes: list[PEState], avg: float, rng: np.random.Generator
              ) -> tuple[int, float, int]:
    """The transfer phases: ``(phases run, last threshold, messages)``. Before each phase a
    reduction of the maximum scaled load (``2 (P - 1)`` messages) says whether it is
    needed."""
    messages = 0
    limit = 1.0
    phases = 0
    reduction = 2 * (len(pes) - 1)
    for k in range(1, PHASES + 1):
        limit = phase_threshold(k)
        messages += reduction
        if max(s.scaled() for s in pes) <= limit * avg:
            break
        phases += 1
        offers = [m for s in pes for m in s.offers(limit, rng)]
        replies = [pes[dst].on_offer(src, *payload, limit)
                   for _, src, dst, payload in _deliver(offers, rng)]
        for kind, src, dst, (obj, w) in _deliver(replies, rng):
            pes[dst].on_reply(kind, src, obj, w)
        for s in pes:
            s.end_phase()
        messages += len(offers) + len(replies)
    return phases, limit, messages


def distributed(db: LBDatabase, seed: int = 0) -> np.ndarray:
    """GrapevineLB's placement (:func:`simulate`; the outcome's rounds and messages are
    there)."""
    return simulate(db, seed).placement
