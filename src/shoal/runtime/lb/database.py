"""The load-balancing database: what the runtime measured since the last balancing step
(seed 002, Section III-A: "the RTS instruments the computation load and the communication
pattern of each unit in a distributed database"; the recent past predicts the near future).

A :class:`LBDatabase` is plain numpy arrays, one entry per object (migratable element) and
per PE, so strategies are pure functions of it (:mod:`shoal.runtime.lb.strategies`), with
no MPI inside: they run the same in the runtime, offline on a dumped database, and in tests.

Objects are numbered ``0..n-1``; ``pe[i]`` is where object ``i`` is now. A PE's capacity is
``speed * (1 - background / wall)``: a core shared with another process (background time,
seed 002 Fig. 16) or running slower (Fig. 17: a node at 0.7x frequency) gets less work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class LBDatabase:
    """Loads, placement and communication of ``n`` objects on ``npes`` PEs.

    Per object: ``load`` (seconds of work in entry methods since the last step; CPU seconds
    with ``cpu_stats``), ``pe`` (its PE now), ``migratable``, ``size`` (bytes of its packed
    state: what moving it costs). Per PE: ``wall`` (seconds since the last step), ``idle``,
    ``background`` (time that was neither entry methods, runtime work nor idle: another
    process on the core) and ``speed`` (relative, 1.0 nominal). Communication between
    objects as edges ``src -> dst`` with ``messages`` and ``bytes`` (one edge per ordered
    pair). ``keys`` names the objects for the runtime (``(collection id, index)``) and is
    not used by strategies.
    """

    load: np.ndarray
    pe: np.ndarray
    npes: int
    migratable: np.ndarray | None = None
    size: np.ndarray | None = None
    wall: np.ndarray | None = None
    idle: np.ndarray | None = None
    background: np.ndarray | None = None
    speed: np.ndarray | None = None
    src: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    messages: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    keys: list | None = None

    def __post_init__(self) -> None:
        n = len(self.load)
        self.load = np.asarray(self.load, np.float64)
        self.pe = np.asarray(self.pe, np.int64)
        if self.pe.shape != (n,):
            raise ValueError(f"pe has {self.pe.shape} entries for {n} objects")
        if n and (self.pe.min() < 0 or self.pe.max() >= self.npes):
            raise ValueError(f"an object's PE lies outside [0, {self.npes})")
        if np.any(self.load < 0) or not np.all(np.isfinite(self.load)):
            raise ValueError("object loads must be finite and >= 0")
        self.migratable = (np.ones(n, bool) if self.migratable is None
                           else np.asarray(self.migratable, bool))
        self.size = (np.zeros(n, np.int64) if self.size is None
                     else np.asarray(self.size, np.int64))
        zeros = np.zeros(self.npes)
        self.wall = zeros.copy() if self.wall is None else np.asarray(self.wall, np.float64)
        self.idle = zeros.copy() if self.idle is None else np.asarray(self.idle, np.float64)
        self.background = (zeros.copy() if self.background is None
                           else np.asarray(self.background, np.float64))
        self.speed = (np.ones(self.npes) if self.speed is None
                      else np.asarray(self.speed, np.float64))
        for name in ("src", "dst", "messages", "bytes"):
            setattr(self, name, np.asarray(getattr(self, name), np.int64))

    @property
    def n(self) -> int:
        return len(self.load)

    def capacity(self) -> np.ndarray:
        """Relative capacity of each PE, ``speed * (1 - background / wall)``, normalised
        to sum to ``npes`` (all ones on identical, unshared PEs)."""
        assert self.wall is not None and self.background is not None and self.speed is not None
        share = np.ones(self.npes)
        timed = self.wall > 0
        share[timed] = 1.0 - np.clip(self.background[timed] / self.wall[timed], 0.0, 0.95)
        cap = self.speed * share
        total = cap.sum()
        return cap * (self.npes / total) if total > 0 else np.ones(self.npes)

    def pe_loads(self, placement: np.ndarray | None = None) -> np.ndarray:
        """The object load on each PE under ``placement`` (default: the current one)."""
        where = self.pe if placement is None else placement
        return np.bincount(where, weights=self.load, minlength=self.npes)

    def imbalance(self, placement: np.ndarray | None = None) -> float:
        """max/avg: the longest PE time (load / capacity) over the time of a perfect
        balance (total load / total capacity, the same for every placement); 1.0 is
        perfect balance."""
        scaled = self.pe_loads(placement) / self.capacity()
        avg = self.load.sum() / self.npes  # capacities sum to npes
        return float(scaled.max() / avg) if avg > 0 else 1.0
