"""Orthogonal recursive bisection (Acun14, Section IV-C: the Barnes-Hut mini-app balances
"a load balancing strategy which performs Orthogonal Recursive Bisection (ORB)"): cut space
into boxes of equal work, one per PE, so that objects near each other share a PE.

Coordinates: ``db.coords`` (the runtime fills them with each element's ``lb_position()``
when its class defines one, else its array index); a database without coordinates uses the
object number as a single coordinate (objects of one PE are numbered together, so this
cuts the current order into contiguous runs).

Recursion over a range of PEs and the migratable objects given to it: split the PEs in two
halves by count; cut the objects along the coordinate of widest extent at the point where
the load before the cut is closest to the first half's share of the two halves' targets
(:func:`.common.targets`: capacity share less non-migratable load, so a PE of speed 0 gets
nothing); recurse into both halves. The boxes are finally matched to PEs of equal target
to keep most objects in place (:func:`.common.keep_in_place`).
"""

from __future__ import annotations

import numpy as np

from shoal.runtime.lb.common import keep_in_place, targets
from shoal.runtime.lb.database import LBDatabase


def _cut(w: np.ndarray, share: float) -> int:
    """How many of the objects of loads ``w`` (in cut order) go first, so that their load
    is closest to ``share`` of the total (the fewer on ties)."""
    cum = np.cumsum(w)
    goal = share * (cum[-1] if cum.size else 0.0)
    j = int(np.searchsorted(cum, goal))  # cum[j - 1] < goal <= cum[j]
    below = cum[j - 1] if j > 0 else 0.0
    if j < cum.size and cum[j] - goal < goal - below:
        return j + 1
    return j


def bisect(coords: np.ndarray, load: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The PE (index into ``target``) of each object: orthogonal recursive bisection of the
    objects at ``coords`` (``n x d``) with loads ``load`` into ``target.size`` boxes of
    loads proportional to ``target``."""
    out = np.zeros(load.size, np.int64)
    stack = [(np.arange(load.size), 0, target.size)]
    while stack:
        objs, lo, hi = stack.pop()
        if hi - lo == 1 or objs.size == 0:
            out[objs] = lo
            continue
        mid = (lo + hi) // 2
        whole = float(target[lo:hi].sum())
        share = float(target[lo:mid].sum()) / whole if whole > 0 else (mid - lo) / (hi - lo)
        c = coords[objs]
        axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
        order = objs[np.argsort(c[:, axis], kind="stable")]
        k = _cut(load[order], share)
        stack.append((order[:k], lo, mid))
        stack.append((order[k:], mid, hi))
    return out


def orb(db: LBDatabase) -> np.ndarray:
    """OrbLB: boxes of equal work (module docstring), matched to PEs to keep objects in
    place. Non-migratable objects stay. The maximum scaled load is at most the target plus
    about one object per cut above the PE (each cut is off by less than one object)."""
    assert db.migratable is not None
    placement = db.pe.copy()
    objects = np.flatnonzero(db.migratable)
    if objects.size == 0 or db.npes == 1:
        return placement
    coords = (db.coords[objects] if db.coords is not None and db.coords.shape[1] > 0
              else objects[:, None].astype(float))
    target = targets(db)
    part = bisect(coords, db.load[objects], target)
    placement[objects] = keep_in_place(db, part, objects, target)
    return placement
