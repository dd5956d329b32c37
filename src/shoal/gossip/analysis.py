"""Expected ages of the windowed gossip algorithm (Amar et al., as used by MOSIX).

With N nodes and windows of W entries, about W nodes hold a given node's record in their
window at any time (the node itself, plus W-1 of the other N-1 by symmetry). Each sends once
per unit of time to one of its N-1 peers, so a node receives that record in a unit with
probability ``p = 1 - (1 - 1/(N-1))**W``; it waits ``1/p`` units on average and the record it
receives is, on average, ``A_w`` old, the average age inside a window:

    A_v = 1 / (1 - (1 - 1/(N-1))**W) + A_w                     (the MOSIX estimate)

``A_w`` is not free: a window holds the youngest fraction of a vector whose ages themselves
come from received windows. We solve that fixed point numerically in continuous time: offers
of a record reach a node as a Poisson stream of rate ``-ln(1-p)``; an offer carries age X
(0 with probability 1/W, when it comes from the record's owner, else drawn from the youngest
(W-1)/(N-1) of the vector's own age law) and is kept if newer, so the age A of an entry has
survival ``P(A > a) = exp(-rate * integral_0^a P(X <= s) ds)``. Iterating that map gives the
window's age law and its mean ``A_w``. Ages are in units of time.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from shoal.errors import UsageError


def check_sizes(nodes: int, window: int) -> None:
    """Raise :class:`UsageError` unless 2 <= nodes and 1 <= window <= nodes."""
    if nodes < 2:
        raise UsageError(f"gossip needs at least 2 nodes (got {nodes})")
    if not 1 <= window <= nodes:
        raise UsageError(f"the window must hold between 1 and {nodes} entries, the vector "
                         f"size (got {window}): lower --window")


def window_entries(nodes: int, window: float | int) -> int:
    """Window size in entries: an int is taken as is, a float in (0, 1] as a fraction of N
    (rounded, at least 1). Raises :class:`UsageError` for an impossible size."""
    if isinstance(window, float):
        if not 0.0 < window <= 1.0:
            raise UsageError(f"a window fraction must lie in (0%, 100%] (got {window:.4g})")
        w = max(1, round(window * nodes))
    else:
        w = int(window)
    check_sizes(nodes, w)
    return w


def refresh_probability(nodes: int, window: int) -> float:
    """Probability ``1 - (1 - 1/(N-1))**W`` that a node receives a given record in one unit."""
    check_sizes(nodes, window)
    return -math.expm1(window * math.log1p(-1.0 / (nodes - 1))) if nodes > 2 else 1.0


@lru_cache(maxsize=4096)
def _fixed_point(nodes: int, window: int) -> tuple[float, float, np.ndarray]:
    """The fixed point of the module docstring: ``(A_w, h, surv)``, ``surv[k]`` the
    probability that a vector entry is older than ``(k + 1/2) h`` units (read-only)."""
    p = refresh_probability(nodes, window)
    rate = -math.log1p(-p) if p < 1.0 else float(window)
    q = (window - 1) / (nodes - 1)
    span = 40.0 * math.log(nodes) / rate + 20.0
    bins = 1 << 14
    h = span / bins
    f_x = np.ones(bins)
    last = -1.0
    a_w = 0.0
    for _ in range(1000):
        surv = np.exp(-rate * h * (np.cumsum(f_x) - 0.5 * f_x))
        if window == 1:  # every offer comes from the record's owner: age 0
            break
        f_a = 1.0 - surv
        in_window = np.minimum(f_a / q, 1.0)
        # E[A | A <= q-quantile] from the survival function of the truncated law
        a_young = float(np.sum(1.0 - in_window) * h)
        a_w = (window - 1) / window * a_young
        if abs(a_w - last) < 1e-10:
            break
        last = a_w
        f_x = 1.0 / window + (window - 1) / window * in_window
    surv.setflags(write=False)
    return a_w, h, surv


def window_age(nodes: int, window: int) -> float:
    """Average age ``A_w`` (units of time) of the entries inside a window, own entry included,
    from the fixed point described in the module docstring."""
    return _fixed_point(nodes, window)[0]


def age_quantile(nodes: int, window: int, tail: float) -> float:
    """The age (units of time) that a vector entry of a live node exceeds with probability
    ``tail``, from the entry's age law ``P(A > a) = exp(-rate * int_0^a P(X <= s) ds)`` at
    the fixed point: the threshold past which a node is suspected with a false-alarm
    probability of ``tail`` per look (issue: failure detection from the expected-age law)."""
    if not 0.0 < tail < 1.0:
        raise UsageError(f"a tail probability lies in (0, 1) (got {tail})")
    _, h, surv = _fixed_point(nodes, window)
    k = int(np.searchsorted(-surv, -tail))  # surv decreases: the first bin below tail
    if k >= len(surv):
        raise UsageError(f"a tail of {tail} lies beyond the computed age law: raise it")
    return (k + 0.5) * h


def expected_age(nodes: int, window: int) -> float:
    """Expected average age ``A_v`` (units of time) of a node's vector entries, excluding its
    own: ``1/(1-(1-1/(N-1))**W) + A_w`` (Amar et al.; compare Fig. 2 of Levy14)."""
    return 1.0 / refresh_probability(nodes, window) + window_age(nodes, window)
