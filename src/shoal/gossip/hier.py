"""Hierarchical gossip (the outlook of seed 001: groups of gossip nodes, smaller vectors, a
global view from summaries), simulated beside the flat algorithm up to 10^6 nodes.

N nodes form G groups of S (N = G * S; by a topology key such as the rack, else by a hash of
the name: to the simulation only the sizes matter). Each node keeps two vectors:

- the full records of its own group's S nodes, spread by the Fig. 1 algorithm *within* the
  group (window ``W_in`` of S entries, to a random member);
- one summary per group (min/mean/max load, free memory, live count, oldest age: what its
  members know of it), G entries, spread *between* groups: once per unit a node computes its
  own group's summary afresh (age 0) and sends the ``W_out`` youngest summaries it holds to a
  random node of another group, which keeps each that is newer than its own copy.

A node holds S + G entries instead of N (2 * sqrt(N) for S = G = sqrt(N)).

How this simulates 10^6 nodes exactly:

- The own-group layer is the flat algorithm with N = S, and the G groups run it independently
  of one another and alike: their own-group ages are those of one flat run of S nodes
  (:func:`shoal.gossip.sim.simulate`, the same code as the flat column).
- A summary's age is the time since a member of its group computed it: it does not depend on
  the records inside, so the summary layer is simulated on its own: every node's G summary
  birth times (float32: 4 GB at N = 10^6, G = 1000), every node acting once per unit at its own
  random phase, in phase order (messages arrive at once), as the flat simulator does.
- The flat algorithm itself at N needs N^2 entries (2 TB at 10^6): above ``flat_max`` its
  age is the paper's formula (:func:`~shoal.gossip.analysis.expected_age`, which the flat
  simulator matches within 0.1% at 1024-8192 nodes).

Check: with S = 1 every node is its own group, and the summary layer *is* the flat algorithm
with window ``W_out``: its mean age must be the formula's (tests/gossip/test_hier.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shoal.errors import UsageError
from shoal.gossip.analysis import expected_age, window_entries
from shoal.gossip.sim import simulate
from shoal.jit import njit

RECORD_BYTES = 260  # a node's record on the wire (shoal.gossip.packet: the daemon's entry)
SUMMARY_BYTES = 48  # a group's summary: id, min/mean/max load, free memory, live, oldest age
UNKNOWN = np.float32(-1e30)  # the birth time of a summary never received


@njit(cache=True, nogil=True)
def _summary_unit(birth: np.ndarray, order: np.ndarray, phase: np.ndarray, s: int, w: int,
                  u: int, rng_targets: np.ndarray, buf: np.ndarray) -> int:
    """One unit of the summary layer: every node, in phase order, renews its own group's
    summary and sends its ``w`` youngest summaries to ``rng_targets[i]`` (a node of another
    group); returns the entries sent."""
    n, g = birth.shape
    sent = 0
    for k in range(n):
        i = order[k]
        row = birth[i]
        row[i // s] = u + phase[i]
        buf[:] = row
        thr = np.partition(buf, g - w)[g - w] if w < g else UNKNOWN
        dst = birth[rng_targets[i]]
        for c in range(g):
            b = row[c]
            if b >= thr and b != UNKNOWN:  # (fewer than w known: every known one goes)
                sent += 1
                if b > dst[c]:
                    dst[c] = b
    return sent


@njit(cache=True, nogil=True)
def _summary_ages(birth: np.ndarray, s: int, now: float) -> tuple[float, int, int]:
    """Sum of the ages of the known summaries of other groups at time ``now``, their count,
    and the count of unknown ones."""
    n, g = birth.shape
    total = 0.0
    known = 0
    unknown = 0
    for i in range(n):
        own = i // s
        row = birth[i]
        for c in range(g):
            if c == own:
                continue
            b = row[c]
            if b == UNKNOWN:
                unknown += 1
            else:
                total += now - b
                known += 1
    return total, known, unknown


@dataclass
class SummaryResult:
    mean_age: float  # of other groups' summaries, steady state, units of time
    known: float  # fraction of (node, other group) summaries known, averaged over samples
    sent_per_node: float  # summaries sent per node per unit


def simulate_summaries(nodes: int, group: int, window: int, units: int = 50,
                       warmup: int = 20, seed: int = 0) -> SummaryResult:
    """The summary layer of ``nodes`` nodes in groups of ``group``, windows of ``window``
    summaries, for ``units`` units; ages measured at each whole unit after ``warmup``."""
    if group < 1 or nodes % group or nodes // group < 2:
        raise UsageError(f"{nodes} nodes do not form at least 2 groups of {group}")
    g = nodes // group
    if not 1 <= window <= g:
        raise UsageError(f"a summary window holds 1 to {g} entries (got {window})")
    if not 0 <= warmup < units:
        raise UsageError(f"warm-up ({warmup}) must be shorter than the run ({units} units)")
    rng = np.random.default_rng(seed)
    phase = rng.random(nodes)
    order = np.argsort(phase).astype(np.int64)
    phase32 = phase.astype(np.float32)
    own_start = (np.arange(nodes) // group) * group
    birth = np.full((nodes, g), UNKNOWN, np.float32)
    buf = np.empty(g, np.float32)
    total = known = unknown = 0.0
    sent = 0
    for u in range(units):
        # a node of another group, uniformly: skip the sender's own block of ``group``
        pick = rng.integers(0, nodes - group, nodes)
        targets = pick + group * (pick >= own_start)
        sent += _summary_unit(birth, order, phase32, group, window, u, targets, buf)
        if u >= warmup:
            t, k, x = _summary_ages(birth, group, float(u + 1))
            total, known, unknown = total + t, known + k, unknown + x
    return SummaryResult(mean_age=total / known if known else math.nan,
                         known=known / (known + unknown) if known + unknown else math.nan,
                         sent_per_node=sent / (nodes * units))


@dataclass
class Compared:
    """Flat and hierarchical gossip at one N (ages in units of time, bytes per node)."""

    nodes: int
    group: int
    flat_window: int
    flat_age: float
    flat_simulated: bool  # False: the formula (no N^2 simulation at this N)
    flat_bytes_unit: float
    flat_memory: int
    in_window: int
    out_window: int
    own_age: float
    summary_age: float
    summary_known: float
    hier_bytes_unit: float
    hier_memory: int

    def row(self) -> dict:
        return dict(vars(self))


def compare(nodes: int, window: float = 0.2, units: int = 50, warmup: int = 20,
            flat_max: int = 10_000, seed: int = 0) -> Compared:
    """Flat gossip (window ``window`` of N) against groups of S = round(sqrt N) (windows
    ``window`` of S records and of G summaries) at ``nodes`` nodes."""
    s = _group_size(nodes)
    g = nodes // s
    w_flat = window_entries(nodes, window)
    w_in, w_out = window_entries(s, window), window_entries(g, window)
    if nodes <= flat_max:
        flat = simulate(nodes, w_flat, units=units, warmup=warmup, seed=seed).mean_age
    else:
        flat = expected_age(nodes, w_flat)
    own = simulate(s, w_in, units=units, warmup=warmup, seed=seed).mean_age
    summ = simulate_summaries(nodes, s, w_out, units, warmup, seed)
    return Compared(
        nodes=nodes, group=s, flat_window=w_flat, flat_age=flat,
        flat_simulated=nodes <= flat_max, flat_bytes_unit=w_flat * RECORD_BYTES,
        flat_memory=nodes * RECORD_BYTES, in_window=w_in, out_window=w_out, own_age=own,
        summary_age=summ.mean_age, summary_known=summ.known,
        hier_bytes_unit=w_in * RECORD_BYTES + summ.sent_per_node * SUMMARY_BYTES,
        hier_memory=s * RECORD_BYTES + g * SUMMARY_BYTES)


def _group_size(nodes: int) -> int:
    """The divisor of ``nodes`` nearest sqrt(nodes) (groups of equal size)."""
    root = math.isqrt(nodes)
    for d in range(root, 0, -1):
        if nodes % d == 0:
            return d
    return 1
