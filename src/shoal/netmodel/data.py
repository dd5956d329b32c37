"""Measurements: the benchmark's tidy CSV (one row per repetition), validated, and reduced to
one time per (k, n) (best of the repetitions, as the paper takes the highest performing data,
or their median).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shoal.errors import UsageError
from shoal.files import atomic, read_text

COLUMNS = ("k", "n", "seconds")  # required; the benchmark also writes repetition, bytes_per_s
LIMITS = {"k": 2.0**20, "n": 2.0**50, "seconds": 86400.0}
"""The largest value a measurement can hold: a million processes per node, a PiB message, a
day per round. Beyond them a value is a corrupted row, and would overflow the fits."""


@dataclass
class Measurements:
    """Arrays of equal length: processes per node ``k``, bytes per message ``n``, seconds per
    round ``t``."""

    k: np.ndarray
    n: np.ndarray
    t: np.ndarray

    def __post_init__(self):
        self.k = np.asarray(self.k, float)
        self.n = np.asarray(self.n, float)
        self.t = np.asarray(self.t, float)
        if not (len(self.k) == len(self.n) == len(self.t)):
            raise UsageError("k, n and seconds must have the same length")
        if len(self.t) == 0:
            raise UsageError("no measurements")
        for name, col in (("k", self.k), ("n", self.n), ("seconds", self.t)):
            if not np.all(np.isfinite(col)):
                raise UsageError(f"column {name} holds NaN or infinite values: remove those rows")
            if not np.all(col > 0):
                raise UsageError(f"column {name} must be positive everywhere (found "
                                 f"{col[col <= 0][0]:g})")
            if np.any(col > LIMITS[name]):
                raise UsageError(f"column {name} holds {col.max():g}, beyond any measurement "
                                 f"(at most {LIMITS[name]:g}): remove that row")
        if not np.all(self.k == np.round(self.k)):
            raise UsageError("column k (processes per node) must hold whole numbers")

    def reduce(self, how: str = "best") -> Measurements:
        """One time per (k, n): the minimum (``best``) or the ``median`` of repetitions."""
        if how not in ("best", "median"):
            raise UsageError(f"reduce by 'best' or 'median', not {how!r}")
        keys = np.stack([self.k, self.n], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.ravel()
        if how == "best":
            t = np.full(len(uniq), np.inf)
            np.minimum.at(t, inv, self.t)
        else:
            order = np.argsort(inv, kind="stable")
            groups = np.split(self.t[order], np.flatnonzero(np.diff(inv[order])) + 1)
            t = np.array([np.median(g) for g in groups])
        return Measurements(uniq[:, 0], uniq[:, 1], t)

    def select(self, mask) -> Measurements:
        return Measurements(self.k[mask], self.n[mask], self.t[mask])


def read_csv(path: str | Path) -> Measurements:
    """Read a tidy CSV with at least the columns k, n, seconds."""
    path = Path(path)
    reader = csv.DictReader(io.StringIO(read_text(path, "measurements"), newline=""))
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise UsageError(f"{path}: missing column(s) {', '.join(missing)} (the file "
                         f"needs k, n, seconds; it has {', '.join(header) or 'none'})")
    rows = list(reader)
    try:
        cols = {c: np.array([float(r[c]) for r in rows]) for c in COLUMNS}
    except (TypeError, ValueError):
        raise UsageError(f"{path}: a value in k, n or seconds is not a number") from None
    try:
        return Measurements(cols["k"], cols["n"], cols["seconds"])
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def write_csv(path: str | Path, m: Measurements, repetition=None) -> None:
    """Write the tidy CSV (k, n, repetition, seconds, bytes_per_s = k n / seconds)."""
    rep = np.zeros(len(m.t), int) if repetition is None else repetition
    with atomic(path) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["k", "n", "repetition", "seconds", "bytes_per_s"])
        for k, n, r, t in zip(m.k, m.n, rep, m.t, strict=True):
            w.writerow([int(k), int(n), int(r), repr(float(t)), repr(float(k * n / t))])


def synthetic(model, ks, ns, noise: float = 0.03, repeat: int = 1, seed: int = 0):
    """Measurements drawn from ``model`` with multiplicative Gaussian noise of relative size
    ``noise``, for every k in ``ks`` and n in ``ns``."""
    kk, nn = np.meshgrid(np.asarray(ks, float), np.asarray(ns, float))
    kk = np.repeat(kk.ravel(), repeat)
    nn = np.repeat(nn.ravel(), repeat)
    rng = np.random.default_rng(seed)
    t = model.time(nn, kk) * np.abs(1 + noise * rng.standard_normal(kk.shape))
    return Measurements(kk, nn, t)
