"""Advice from a fitted model (Gropp16, Sections 3.1 and 5).

- The number of processes per node worth communicating at once: beyond k* = R_N / R_C the
  node's injection rate is the limit and more processes only share it.
- The halo exchange of Section 3.1: E edges of N bytes each per process, k processes per
  node. The postal model predicts T = E (alpha + N / R_C) whatever k; the max-rate model
  T = E (alpha + k N / min(R_N, k R_C)). Their ratio for large N (eq. 6) is how much the
  ping-pong figure flatters a multicore node.
"""

from __future__ import annotations

import math

from shoal.netmodel.models import Model


def halo(model: Model, edges: int, nbytes: float, ks) -> list[dict]:
    """Rows of (k, postal time, max-rate time, ratio) for a halo exchange."""
    p = model.params
    rc = p["rcb"] if model.kind == "maxrate4" else p.get("rc", math.nan)
    rows = []
    for k in ks:
        postal = edges * (p["alpha"] + nbytes / rc)
        maxrate = edges * float(model.time(nbytes, k))
        rows.append({"k": int(k), "postal_s": postal, "maxrate_s": maxrate,
                     "ratio": maxrate / postal})
    return rows
