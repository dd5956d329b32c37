"""Simulate the windowed gossip algorithm of Fig. 1 (Levy14) at the paper's scale and beyond.

Every node acts once per unit of time at its own random phase (clocks are not synchronised):
it renews its own record, selects the W youngest entries of its vector (its own included) and
sends them to a node drawn uniformly from the others. A receiver keeps each entry that is newer
than its own copy. Options: a constant network latency, a loss probability per message, and
fail-stop deaths (a dead node neither sends nor receives; messages to it are lost).

Ages are measured in units of time against the true creation time of each record, at
``samples`` evenly spaced instants per unit. The event loop is compiled (``simkernel``); a
run of N nodes holds one int16 per vector entry (N² · 2 bytes; int32 beyond 32767 units) plus
the candidate lists (N · (3W + 64) node indices, 2 bytes each up to 65536 nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np

from shoal.errors import UsageError
from shoal.gossip import simkernel
from shoal.gossip.analysis import expected_age, window_entries

BIN_WIDTH = 1.0 / 64  # age histogram resolution, units of time
MAX_BINS = 1 << 16
PARALLEL_NODES = 2048  # nodes from which a run's events go to numba's threads (below: one)
# A run's parallel regions are short (at most simkernel.BATCH events), and waking sleeping
# OpenMP threads for each cost more than the events below this size (2 threads, 2 cores,
# window 10% and 40%: one thread 2.5x and 1.4x faster at 1,024 nodes, 1.3x and 0.9x at
# 2,048, 0.76x and 0.70x at 4,096; 29x at 3 nodes over 32,800 units); the result is the same
# bit for bit either way (simkernel's module doc)


@dataclass
class SimResult:
    """What one simulated run measured. Ages are in units of time."""

    nodes: int
    window: int
    units: int
    warmup: int
    latency: float
    loss: float
    dead: int
    seed: int
    mean_age: float  # steady state, own entry excluded, entries of live nodes
    mean_age_incl: float  # own entry included
    max_age: float  # largest age seen at the snapshot instants
    percentiles: dict[int, float]  # 50, 90, 99 -> age, from the snapshots
    known: float  # fraction of live nodes' entries known, averaged over measured samples
    expected: float  # expected_age(nodes, window)
    sent: int
    lost: int
    to_dead: int
    delivered: int
    rescans: int
    unit_mean: np.ndarray = field(repr=False)  # mean age (own excluded) per unit
    dead_age: np.ndarray = field(repr=False)  # mean age of dead nodes' entries per unit

    def row(self, interval: float | None = None) -> dict:
        """A flat dict for tables and CSV; ages in seconds too when ``interval`` is given."""
        out = {"nodes": self.nodes, "window": self.window, "units": self.units,
               "warmup": self.warmup, "latency": self.latency, "loss": self.loss,
               "dead": self.dead, "seed": self.seed, "mean_age": self.mean_age,
               "expected_age": self.expected, "mean_age_incl_own": self.mean_age_incl,
               "p50_age": self.percentiles[50], "p90_age": self.percentiles[90],
               "p99_age": self.percentiles[99], "max_age": self.max_age,
               "known": self.known, "sent": self.sent, "lost": self.lost,
               "to_dead": self.to_dead}
        if interval is not None:
            out["interval_s"] = interval
            out["mean_age_s"] = self.mean_age * interval
            out["expected_age_s"] = self.expected * interval
        return out


def memory_bytes(nodes: int, window: int, units: int) -> int:
    """Bytes :func:`simulate` allocates: the N x N version matrix, the candidate lists, and
    the per-unit measures."""
    version = 2 if units < 32767 else 4
    cand = 2 if nodes <= 65536 else 4
    return (nodes * nodes * version + nodes * min(nodes, 3 * window + 64) * cand
            + nodes * 64 + units * 41)


def simulate(nodes: int, window: float | int = 0.2, units: int = 200, warmup: int | None = None,
             *, latency: float = 0.0, loss: float = 0.0, dead: float | int = 0,
             dead_at: float | None = None, samples: int = 4, snapshots: int = 5,
             seed: int = 0) -> SimResult:
    """Run the Fig. 1 algorithm for ``units`` units of time and measure ages.

    ``window`` is a count or a fraction of ``nodes``; ``warmup`` units (default: a quarter of
    ``units``, at least 20 when possible) are run before measuring; ``latency`` is in units of
    time; ``loss`` is the probability that a message is lost; ``dead`` is a count or a fraction
    of nodes that fail at time ``dead_at`` (default: the start of the measurement);
    ``snapshots`` instants feed the age percentiles and maximum.
    """
    w = window_entries(nodes, window)
    if units < 1:
        raise UsageError(f"simulate at least 1 unit of time (got {units})")
    if warmup is None:
        warmup = min(max(units // 4, 20), units - 1)
    if not 0 <= warmup < units:
        raise UsageError(f"warm-up ({warmup}) must be shorter than the run ({units} units)")
    if not 0.0 <= loss < 1.0:
        raise UsageError(f"loss must lie in [0%, 100%) (got {loss:.4g})")
    if not (math.isfinite(latency) and 0.0 <= latency <= 64.0):
        raise UsageError(f"latency must lie in [0, 64] units of time (got {latency})")
    if samples < 1 or snapshots < 0:
        raise UsageError("samples must be >= 1 and snapshots >= 0")
    n_dead = round(dead * nodes) if isinstance(dead, float) else int(dead)
    if not 0 <= n_dead <= nodes - 2:
        raise UsageError(f"at most {nodes - 2} of {nodes} nodes may die (asked {n_dead})")
    rng = np.random.default_rng(seed)
    phase = rng.random(nodes)
    while len(np.unique(phase)) < nodes:  # distinct phases keep creation times distinct
        phase = rng.random(nodes)
    order = np.argsort(phase).astype(np.int32)
    death_node = rng.choice(nodes, size=n_dead, replace=False).astype(np.int32)
    t_dead = float(warmup if dead_at is None else dead_at)
    cap = min(nodes, 3 * w + 64)
    state = simkernel.NodeState(
        phase=phase, pbin=np.floor(phase * simkernel.SUB).astype(np.uint8), order=order,
        ver=np.full((nodes, nodes), -1, np.int16 if units < 32767 else np.int32),
        cand=np.empty((nodes, cap), np.uint16 if nodes <= 65536 else np.uint32),
        ccount=np.zeros(nodes, np.int32), overflow=np.zeros(nodes, np.bool_),
        thr=np.zeros(nodes, np.int64), ssum=np.zeros(nodes), known=np.zeros(nodes, np.int64),
        alive=np.ones(nodes, np.bool_))
    threads = numba.get_num_threads() if nodes >= PARALLEL_NODES else 1
    config = simkernel.Config(
        window=int(w), units=int(units), warmup=int(warmup), samples=int(samples),
        latency=float(latency), loss=float(loss), bin_width=BIN_WIDTH, seed=int(seed),
        lanes=threads)
    snap = np.zeros(units, np.bool_)
    if snapshots:
        snap[np.unique(np.linspace(warmup, units - 1, snapshots).round().astype(int))] = True
    schedule = simkernel.Schedule(death_node=death_node, death_time=np.full(n_dead, t_dead),
                                  snapshot=snap)
    out = simkernel.Measures(
        hist=np.zeros(MAX_BINS + 1, np.int64), max_age=np.zeros(1),
        unit_excl=np.full(units, np.nan), unit_incl=np.full(units, np.nan),
        unit_known=np.full(units, np.nan), dead_age=np.full(units, np.nan),
        counters=np.zeros(5, np.int64))
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        simkernel.run(state, config, schedule, out)
    finally:
        numba.set_num_threads(previous)
    counters = out.counters
    return SimResult(
        nodes=nodes, window=w, units=units, warmup=warmup, latency=latency, loss=loss,
        dead=n_dead, seed=seed,
        mean_age=float(np.nanmean(out.unit_excl[warmup:])),
        mean_age_incl=float(np.nanmean(out.unit_incl[warmup:])),
        max_age=float(out.max_age[0]) if snapshots else math.nan,
        percentiles=_percentiles(out.hist),
        known=float(np.nanmean(out.unit_known[warmup:])),
        expected=expected_age(nodes, w),
        sent=int(counters[simkernel.SENT]), lost=int(counters[simkernel.LOST]),
        to_dead=int(counters[simkernel.TO_DEAD]),
        delivered=int(counters[simkernel.DELIVERED]),
        rescans=int(counters[simkernel.RESCANS]),
        unit_mean=out.unit_excl, dead_age=out.dead_age)


def _percentiles(hist: np.ndarray) -> dict[int, float]:
    """Ages at the 50th, 90th and 99th percentiles of a histogram of BIN_WIDTH bins (the last
    bin counts unknown entries, whose age is infinite)."""
    total = hist.sum()
    out = {}
    cum = np.cumsum(hist)
    for pct in (50, 90, 99):
        if total == 0:
            out[pct] = math.nan
            continue
        k = int(np.searchsorted(cum, pct / 100 * total))
        out[pct] = math.inf if k >= len(hist) - 1 else (k + 1) * BIN_WIDTH
    return out
