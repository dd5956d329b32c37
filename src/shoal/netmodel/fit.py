"""Fitting the models to measurements (Gropp16, Section 4.1).

Every fit minimises the paper's weighted error ``sum_i (y_i - f(p, k_i, n_i))^2 / n_i`` (the
time of a round, weighted down for large messages whose times are large). The max-rate
models are fitted in inverse rates (``1/R_N >= 0`` makes R_N = ∞ a bound, not a limit) with
scipy's bounded trust-region least squares, the postal model by bounded linear least squares.
A fit reports what the data cannot determine instead of printing a number: R_N when no
measured k saturates the node, and the split between R_N and R_C when one k was measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.optimize import least_squares, lsq_linear

from shoal.errors import UsageError
from shoal.netmodel.models import Model


@dataclass
class Fit:
    """A fitted model and how well it describes the data it was fitted to."""

    model: Model
    cost: float  # the weighted sum of squares
    notes: list[str] = field(default_factory=list)  # what the data could not determine


def relative_errors(model: Model, n, k, t) -> np.ndarray:
    """|T_model - T| / T per measurement (the quantity of the paper's Fig. 2 and Table 2)."""
    return np.abs(model.time(n, k) - t) / t


def fit_postal(n, k, t) -> Fit:
    """T = alpha + beta n by weighted linear least squares, alpha >= 0, beta >= 0."""
    n, t = np.asarray(n, float), np.asarray(t, float)
    if len(np.unique(n)) < 2:
        raise UsageError("the postal fit needs at least two message sizes")
    w = 1.0 / np.sqrt(n)
    scale = np.array([t.mean(), t.mean() / n.mean()])  # columns of comparable size
    a = np.column_stack([w, n * w]) * scale
    sol = lsq_linear(a, t * w, bounds=(0, np.inf))
    alpha, beta = sol.x * scale
    model = Model("postal", {"alpha": float(alpha), "beta": float(beta)})
    return Fit(model, _cost(model, n, k, t))


def _cost(model: Model, n, k, t) -> float:
    return float(np.sum((t - model.time(n, k)) ** 2 / n))


def fit(kind: str, n, k, t) -> Fit:
    """Fit model ``kind`` (``postal``, ``maxrate``, ``maxrate4``, ``overhead``) to
    measurements: message sizes ``n`` (bytes), process counts ``k``, round times ``t`` (s)."""
    n, k, t = (np.asarray(x, float) for x in (n, k, t))
    if kind == "postal":
        return fit_postal(n, k, t)
    ks = _measured_ks(kind, n, k)
    start = _start(n, k, t, ks)
    kmax = ks[-1]
    w = 1.0 / np.sqrt(n)
    w /= np.median(t * w)  # residuals of order one: the solver's tolerances then mean something
    if kind in ("maxrate", "overhead"):
        x = _solve(_rates_problem(kind, n, k, w, start), t, w)
        params, notes = _rates_params(kind, x, n, k, kmax)
    else:
        x = _solve(_maxrate4_problem(n, k, w, kmax, start), t, w)
        params, notes = _maxrate4_params(x, k, kmax)
    model = Model(kind, {key: float(v) for key, v in params.items()})
    return Fit(model, _cost(model, n, k, t), notes)


class _Start(NamedTuple):
    """Starting values from postal fits per k: alpha, 1/R_C, 1/R_N, R_Cb and R_Ci."""

    alpha: float
    bc: float
    bn: float
    rcb: float
    rci: float


class _Problem(NamedTuple):
    """A bounded least-squares problem: model times and their Jacobian (weighted) as
    functions of the parameter vector, the starting vectors, lower bounds and scales."""

    times: Callable[[np.ndarray], np.ndarray]
    jac: Callable[[np.ndarray], np.ndarray]
    starts: list[tuple]
    lower: list[float]
    scale: list[float]


def _measured_ks(kind: str, n, k) -> np.ndarray:
    """The distinct k of the data, refusing data that cannot separate R_N from R_C."""
    ks = np.unique(k)
    if len(ks) < 2:
        raise UsageError(f"the {kind} model separates R_N from R_C only with measurements at "
                         f"two or more values of k (got k = {int(ks[0])} only): measure more "
                         f"pairs, or fit the postal model")
    if len(np.unique(n)) < 2:
        raise UsageError("a fit needs at least two message sizes")
    return ks


def _start(n, k, t, ks) -> _Start:
    """Starting points: a postal fit per k gives the aggregate rate k / beta_k of k
    processes."""
    agg = []
    for kk in ks:
        sel = k == kk
        if len(np.unique(n[sel])) >= 2:
            p = fit_postal(n[sel], k[sel], t[sel]).model.params
            agg.append((kk, p["alpha"], kk / max(p["beta"], 1e-18)))
    if not agg:
        raise UsageError("a fit needs at least two message sizes for some k")
    a0 = max(agg[0][1], 1e-9)
    rates = np.array([r for _, _, r in agg])
    kk = np.array([q for q, _, _ in agg])
    rcb0 = rates[0] / kk[0]
    growing = (rates < 0.9 * rates.max()) & (kk > 1)
    rci0 = float(np.median((rates[growing] - rcb0) / (kk[growing] - 1))) if growing.any() \
        else rcb0
    return _Start(a0, 1.0 / rcb0, 1.0 / rates.max(), rcb0, rci0)


def _rates_problem(kind: str, n, k, w, s: _Start) -> _Problem:
    """``maxrate`` and ``overhead`` in x = alpha, 1/R_C, 1/R_N."""
    def times(x):
        a, bc, bn = x
        if kind == "maxrate":
            return a + np.maximum(k * n * bn, n * bc)
        return np.maximum(k * n * bn, a + n * bc)

    def jac(x):
        a, bc, bn = x
        if kind == "maxrate":
            node = k * n * bn > n * bc
            cols = [np.ones_like(n), np.where(node, 0.0, n), np.where(node, k * n, 0.0)]
        else:
            node = k * n * bn > a + n * bc
            cols = [np.where(node, 0.0, 1.0), np.where(node, 0.0, n),
                    np.where(node, k * n, 0.0)]
        return np.column_stack(cols) * w[:, None]

    starts = [(s.alpha, s.bc, s.bn), (s.alpha, s.bc, 0.0), (s.alpha, s.bc, 2 * s.bn)]
    return _Problem(times, jac, starts, [0.0, 0.0, 0.0], [s.alpha, s.bc, s.bc])


def _per(x, k, kmax):
    """The rate of each of k processes under ``maxrate4``: R_Cb + (k-1) R_Ci."""
    return x[2] + (k - 1) * (x[3] - x[2]) / (kmax - 1)


def _maxrate4_problem(n, k, w, kmax, s: _Start) -> _Problem:
    """``maxrate4`` in x = alpha, 1/R_N, R_Cb, R_C(kmax) = R_Cb + (kmax-1) R_Ci, rates in
    B/s."""
    def times(x):
        return x[0] + k * n * np.maximum(x[1], 1.0 / _per(x, k, kmax))

    def jac(x):
        p = _per(x, k, kmax)
        node = x[1] > 1.0 / p
        d_per = -k * n / p**2  # dT/d(per) where the processes limit
        f = (k - 1) / (kmax - 1)
        cols = [np.ones_like(n), np.where(node, k * n, 0.0),
                np.where(node, 0.0, d_per * (1 - f)), np.where(node, 0.0, d_per * f)]
        return np.column_stack(cols) * w[:, None]

    a0, bn0, rcb0 = s.alpha, s.bn, s.rcb
    rmax0 = max(rcb0 + (kmax - 1) * s.rci, 1e-3 * rcb0)
    starts = [(a0, bn0, rcb0, rmax0), (a0, bn0, rcb0, kmax * rcb0), (a0, 0.0, rcb0, rmax0),
              (a0, bn0, rcb0, rcb0)]
    lower = [0.0, 0.0, 1e-12 * rcb0, 1e-12 * rcb0]
    return _Problem(times, jac, starts, lower, [a0, s.bc, rcb0, rcb0])


def _solve(problem: _Problem, t, w) -> np.ndarray:
    """The parameter vector of least weighted cost over all starting points."""
    def residuals(x):
        return (problem.times(x) - t) * w

    best = None
    for x0 in problem.starts:
        x0 = np.maximum(np.array(x0, float), problem.lower)
        sol = least_squares(residuals, x0, jac=problem.jac, bounds=(problem.lower, np.inf),
                            x_scale=problem.scale, method="trf", xtol=1e-12, ftol=1e-12,
                            gtol=1e-12, max_nfev=500)
        if best is None or sol.cost < best.cost:
            best = sol
    return best.x


def _rates_params(kind: str, x, n, k, kmax) -> tuple[dict, list[str]]:
    """Parameters of a ``maxrate`` or ``overhead`` solution, R_N infinite (with a note) when
    no measurement is node-limited."""
    notes = []
    params = {"alpha": x[0], "rc": _rate(x[1]), "rn": _rate(x[2])}
    node = k * n * x[2] > (n * x[1] if kind == "maxrate" else x[0] + n * x[1])
    if not np.any(node):
        params["rn"] = math.inf
        notes.append(f"R_N not identifiable: no measured k saturates the node "
                     f"(R_N > {kmax / x[1]:.3g} B/s = {int(kmax)} R_C)")
    return params, notes


def _maxrate4_params(x, k, kmax) -> tuple[dict, list[str]]:
    """Parameters of a ``maxrate4`` solution, R_N infinite (with a note) when no measured k
    is node-limited."""
    notes = []
    rcb, rmax = x[2], x[3]
    params = {"alpha": x[0], "rn": _rate(x[1]), "rcb": rcb, "rci": (rmax - rcb) / (kmax - 1)}
    if not np.any(x[1] > 1.0 / _per(x, k, kmax)):
        params["rn"] = math.inf
        notes.append(f"R_N not identifiable: no measured k saturates the node "
                     f"(R_N > {rmax:.3g} B/s, the rate of all {int(kmax)} processes)")
    return params, notes


def _rate(inverse: float) -> float:
    return math.inf if inverse <= 0 else 1.0 / inverse
