"""Protocol regimes (short, eager, rendezvous) and the per-regime comparison of the models
(Gropp16, Section 4.1 and Tables 1-2).

MPI libraries send short messages inline, longer ones eagerly and the longest by rendezvous;
each regime has its own latency and rates, so each is fitted separately. Thresholds are
given by the user or found as ``buflimit`` of mpptest finds them: where the time of one pair
changes slope. Here: the split of the sorted message sizes into at most three runs, each
fitted by a postal line, that lowers the sum of relative errors the most; a split is kept
only if it lowers it by more than a third and every run has three sizes or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from shoal.errors import UsageError
from shoal.netmodel.data import Measurements
from shoal.netmodel.fit import Fit, fit, fit_postal, relative_errors

NAMES = {1: ("all",), 2: ("eager", "rendezvous"), 3: ("short", "eager", "rendezvous")}
VARIANTS = ("maxrate4", "maxrate", "postal_one", "postal_max", "postal_all")
LABELS = {"maxrate4": "max-rate 4-p", "maxrate": "max-rate 3-p",
          "postal_one": "postal, 1 pair", "postal_max": "postal, most pairs",
          "postal_all": "postal, all data"}
MIN_SIZES = 3
GAIN = 1.5  # a split must divide the error sum by at least this much


def _piece_error(n, t) -> float:
    ones = np.ones_like(n)
    return float(relative_errors(fit_postal(n, ones, t).model, n, ones, t).sum())


def detect_thresholds(m: Measurements) -> list[float]:
    """Thresholds (bytes; a message of that size belongs to the lower regime) found in the
    times of the fewest pairs measured."""
    sel = m.k == m.k.min()
    one = m.select(sel).reduce("best")
    order = np.argsort(one.n)
    n, t = one.n[order], one.t[order]
    m_ = len(n)
    if m_ < 2 * MIN_SIZES:
        return []
    best_cuts, best_err = [], _piece_error(n, t)
    for cut in range(MIN_SIZES, m_ - MIN_SIZES + 1):
        err = _piece_error(n[:cut], t[:cut]) + _piece_error(n[cut:], t[cut:])
        if err * GAIN < best_err:
            best_cuts, best_err = [cut], err
    if best_cuts:
        two_err = best_err
        for c1 in range(MIN_SIZES, m_ - 2 * MIN_SIZES + 1):
            for c2 in range(c1 + MIN_SIZES, m_ - MIN_SIZES + 1):
                err = (_piece_error(n[:c1], t[:c1]) + _piece_error(n[c1:c2], t[c1:c2])
                       + _piece_error(n[c2:], t[c2:]))
                if err * GAIN < two_err and err < best_err:
                    best_cuts, best_err = [c1, c2], err
    return [float(n[c - 1]) for c in best_cuts]


@dataclass
class Regime:
    """One protocol regime: its size range, the fits of every variant, their errors."""

    name: str
    low: float  # sizes in (low, high]
    high: float
    count: int
    fits: dict[str, Fit] = field(default_factory=dict)
    error_sum: dict[str, float] = field(default_factory=dict)
    error_max: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def analyse(m: Measurements, thresholds: list[float] | None = None,
            reduce: str = "best") -> list[Regime]:
    """Split ``m`` into regimes (``thresholds`` or detected ones) and fit in each: max-rate
    4-p (eq. 4) and 3-p (eq. 3) on all of it, and the postal model (eq. 2) on one pair, on
    the most pairs measured, and on all of it; every fit is judged on all of the regime's
    measurements (Table 2)."""
    m = m.reduce(reduce)
    if thresholds is None:
        thresholds = detect_thresholds(m)
    thresholds = sorted(float(x) for x in thresholds)
    if len(thresholds) > 2:
        raise UsageError("give at most two thresholds (short/eager, eager/rendezvous)")
    edges = [0.0, *thresholds, math.inf]
    names = NAMES[len(edges) - 1]
    regimes = []
    for name, lo, hi in zip(names, edges[:-1], edges[1:], strict=True):
        part = m.select((m.n > lo) & (m.n <= hi))
        reg = Regime(name, lo, hi, len(part.t))
        if len(np.unique(part.n)) < 2:
            raise UsageError(f"the {name} regime ({_range(lo, hi)}) holds fewer than two "
                             f"message sizes: move the thresholds or measure more sizes")
        kmin, kmax = part.k.min(), part.k.max()
        subsets = {"postal_one": part.k == kmin, "postal_max": part.k == kmax,
                   "postal_all": np.ones(len(part.t), bool)}
        for variant in VARIANTS:
            if variant.startswith("postal"):
                sub = part.select(subsets[variant])
                if len(np.unique(sub.n)) < 2:
                    continue
                f = fit("postal", sub.n, sub.k, sub.t)
            else:
                if kmin == kmax:
                    reg.notes.append("one k measured: R_N and R_C cannot be separated, only "
                                     "the postal model is fitted")
                    continue
                f = fit(variant, part.n, part.k, part.t)
                reg.notes.extend(f.notes)
            reg.fits[variant] = f
            err = relative_errors(f.model, part.n, part.k, part.t)
            reg.error_sum[variant] = float(err.sum())
            reg.error_max[variant] = float(err.max())
        regimes.append(reg)
    return regimes


def _range(lo: float, hi: float) -> str:
    from shoal.units import format_bytes

    if math.isinf(hi):
        return f"> {format_bytes(lo)}"
    return f"{format_bytes(lo)} < n <= {format_bytes(hi)}" if lo else f"n <= {format_bytes(hi)}"


def describe(reg: Regime) -> str:
    """The size range of a regime, for tables."""
    return _range(reg.low, reg.high)
