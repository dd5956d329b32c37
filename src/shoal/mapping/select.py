"""Choosing a mapping: evaluate the candidates and rank them by a metric (seed 004, Section
3: "the contention analysis model, as its output, predicts an optimal mapping")."""

from __future__ import annotations

from shoal.errors import UsageError
from shoal.mapping.mappings import check_fits, ordering, orderings
from shoal.mapping.metrics import evaluate
from shoal.mapping.patterns import Pattern
from shoal.topology.torus import Torus

METRICS = ("max", "mean", "mean_used", "bidir_max", "bidir_mean_used", "streams_max",
           "streams_mean_used", "hop_bytes", "dilation", "per_process")


def rank(torus: Torus, pattern: Pattern, mappings: list[str] | None = None,
         routing: str = "adaptive", metric: str = "max", order=None,
         half: str = "split") -> list[tuple[str, dict]]:
    """(mapping, metrics) for every candidate, best first: by ``metric``, ties by the mean
    link load and then by name."""
    if metric not in METRICS:
        raise UsageError(f"metric must be one of {', '.join(METRICS)}")
    check_fits(torus, pattern.nprocs)
    out = []
    for name in mappings or orderings(torus):
        node, _ = ordering(torus, name)
        out.append((name.upper(), evaluate(torus, node, pattern.src, pattern.dst,
                                           pattern.nbytes, routing, order, half)))
    out.sort(key=lambda nm: (nm[1][metric], nm[1]["mean"], nm[0]))
    return out
