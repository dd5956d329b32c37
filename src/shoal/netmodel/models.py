"""Models of the time to send an n-byte message from each of k processes of a node to
partners on another node (Gropp16, Section 3).

- ``postal``: T = alpha + beta n, whatever k (eq. 1-2: the ping-pong model);
- ``maxrate``: T = alpha + k n / min(R_N, k R_C) (eq. 3: R_C per process, R_N per node);
- ``maxrate4``: T = alpha + k n / min(R_N, R_Cb + (k-1) R_Ci) (eq. 4);
- ``overhead``: T = k n / min(R_N, k n / (alpha + n / R_C)) = max(k n / R_N, alpha + n / R_C)
  (eq. 5: the latency counts against the rate of each process).

Rates are bytes/s; R_N may be infinite (the paper's "∞": the node never limits). Every model
evaluates arrays of (n, k) at once and gives the aggregate bandwidth k n / T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shoal.errors import UsageError

PARAMS = {
    "postal": ("alpha", "beta"),
    "maxrate": ("alpha", "rc", "rn"),
    "maxrate4": ("alpha", "rn", "rcb", "rci"),
    "overhead": ("alpha", "rc", "rn"),
}
EQUATION = {"postal": "eq. 1", "maxrate": "eq. 3", "maxrate4": "eq. 4", "overhead": "eq. 5"}


@dataclass(frozen=True)
class Model:
    """A model with its parameters: ``kind`` is one of :data:`PARAMS`; ``params`` maps the
    names of ``PARAMS[kind]`` to values (s, s/byte, bytes/s; ``rn`` may be ``math.inf``)."""

    kind: str
    params: dict

    def __post_init__(self):
        if self.kind not in PARAMS:
            raise UsageError(f"unknown model {self.kind!r}: use one of {', '.join(PARAMS)}")
        missing = set(PARAMS[self.kind]) - set(self.params)
        if missing:
            raise UsageError(f"model {self.kind} needs parameter(s) {', '.join(sorted(missing))}")
        for name in PARAMS[self.kind]:
            _check(self.kind, name, self.params[name])

    def time(self, n, k) -> np.ndarray:
        """Seconds for k processes to each send n bytes (arrays broadcast)."""
        n = np.asarray(n, dtype=float)
        k = np.asarray(k, dtype=float)
        p = self.params
        a = p["alpha"]
        if self.kind == "postal":
            return a + p["beta"] * n + 0.0 * k
        inv_rn = 0.0 if math.isinf(p["rn"]) else 1.0 / p["rn"]
        if self.kind == "maxrate":
            return a + np.maximum(k * n * inv_rn, n / p["rc"])
        if self.kind == "maxrate4":
            per = p["rcb"] + (k - 1) * p["rci"]
            if np.any(per <= 0):
                raise UsageError("R_Cb + (k-1) R_Ci must stay positive over the k asked for")
            return a + k * n * np.maximum(inv_rn, 1.0 / per)
        return np.maximum(k * n * inv_rn, a + n / p["rc"])

    def bandwidth(self, n, k) -> np.ndarray:
        """Aggregate bytes/s of the k processes: k n / T."""
        return np.asarray(k, float) * np.asarray(n, float) / self.time(n, k)

    def saturation_k(self) -> float:
        """k* = R_N / R_C: beyond it more processes do not add bandwidth (Section 5)."""
        p = self.params
        if self.kind == "postal":
            return math.inf
        rc = p["rcb"] if self.kind == "maxrate4" else p["rc"]
        return p["rn"] / rc


def _check(kind: str, name: str, value) -> None:
    """A parameter must be a number: a latency or an inverse rate (alpha, beta) finite and
    >= 0, a rate (rc, rn, rcb) > 0 (infinite: never the limit), R_Ci finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise UsageError(f"model {kind}: {name} must be a number, not {value!r}")
    value = float(value)
    if math.isnan(value):
        raise UsageError(f"model {kind}: {name} is NaN: refit the model")
    if name in ("alpha", "beta") and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"model {kind}: {name} must be finite and >= 0 (got {value:g} "
                         f"{'s' if name == 'alpha' else 's/byte'})")
    if name in ("rc", "rn", "rcb") and value <= 0:
        raise UsageError(f"model {kind}: the rate {name} must be positive (got {value:g} B/s)")
    if name == "rci" and not math.isfinite(value):
        raise UsageError(f"model {kind}: rci must be finite (got {value:g} B/s)")


def format_rate(rate: float) -> str:
    """Bytes/s for humans; infinity prints as ∞."""
    if math.isinf(rate):
        return "∞"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(rate) >= scale:
            return f"{rate / scale:.3g} {unit}"
    return f"{rate:.3g} B/s"
