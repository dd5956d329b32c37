"""Choosing a mapping: evaluate the candidates and rank them by a metric (Balaji11, Section
3: "the contention analysis model, as its output, predicts an optimal mapping")."""

from __future__ import annotations

from shoal.errors import UsageError
from shoal.mapping.mappings import (
    check_fits,
    ordering,
    orderings,
    placement,
    tiled_candidates,
)
from shoal.mapping.metrics import Evaluator
from shoal.mapping.patterns import BYTES_PER_MESSAGE, Pattern
from shoal.memory import require
from shoal.topology.torus import Torus

BYTES_PER_LINK = 128
"""Memory per directed link while a mapping is judged: loads, streams and their spectra."""
METRICS = ("max", "mean", "mean_used", "bidir_max", "bidir_mean_used", "streams_max",
           "streams_mean_used", "hop_bytes", "dilation", "per_process")


def candidates(torus: Torus, pattern: Pattern, which: str = "all") -> list[str]:
    """The names of the candidate mappings: ``orderings`` (every ordering of T and the torus
    dimensions), ``tiles`` (the tiled mappings of a grid pattern), ``all`` (both), or a
    comma-separated list of names."""
    if which == "orderings":
        return orderings(torus)
    if which == "tiles":
        tiles = tiled_candidates(torus, pattern.grid)
        if not tiles:
            raise UsageError("tiled mappings need a grid, dimwise or diagonal pattern")
        return tiles
    if which == "all":
        return orderings(torus) + tiled_candidates(torus, pattern.grid)
    names = [m.strip() for m in which.split(",")]
    if not all(names):
        raise UsageError(f"empty mapping name in {which!r}: write orderings, tiles, all or a "
                         f"list such as TXYZ,TZXY")
    return names


def rank(torus: Torus, pattern: Pattern, mappings: list[str] | None = None,
         routing: str = "adaptive", metric: str = "max", order=None, half: str = "split",
         optimize: bool = False, rounds: int = 100, progress=None,
         keep: int | None = None) -> list[tuple[str, dict, tuple | None]]:
    """(name, metrics, (node, core)) for every candidate (default: every ordering, and every
    tiled mapping of a grid pattern), best first: by ``metric``, ties by the mean link load
    and then by name. ``optimize`` adds the graph optimiser's mapping
    (:mod:`shoal.mapping.optimize`), started from the best ordering and from bisection.
    ``progress(done, total)`` is called after each candidate. The (node, core) arrays are
    kept for the best ``keep`` candidates (default: all), None for the others: at 10^5
    processes each candidate's take megabytes."""
    if metric not in METRICS:
        raise UsageError(f"metric must be one of {', '.join(METRICS)}")
    check_fits(torus, pattern.nprocs)
    require(torus.nlinks * BYTES_PER_LINK + len(pattern.src) * BYTES_PER_MESSAGE,
            f"judging mappings on {torus.nodes:,} nodes", "choose a smaller torus")
    judge = Evaluator(torus, pattern.src, pattern.dst, pattern.nbytes, routing, order, half)
    names = mappings or candidates(torus, pattern)
    for name in names:  # a misspelt name is an error before any work
        if not name.lower().startswith("tile"):
            ordering(torus, name)
    out: list = []
    for k, name in enumerate(names):
        node, _ = placement(torus, name, pattern.grid, pattern.order)
        out.append((name if name.startswith("tile") else name.upper(), judge(node), name))
        if progress is not None:
            progress(k + 1, len(names))

    def key(c):  # FFT round-off must not break ties: compare 9 significant digits
        return (float(f"{c[1][metric]:.9g}"), float(f"{c[1]['mean']:.9g}"), c[0])

    out.sort(key=key)
    out = [(label, r, placement(torus, name, pattern.grid, pattern.order)
            if keep is None or k < keep else None) for k, (label, r, name) in enumerate(out)]
    if optimize:
        from shoal.mapping.optimize import bisection, swap_refine

        starts = [out[0][2], bisection(torus, pattern)]
        tuned = [swap_refine(torus, pattern, nd, co, metric, rounds, routing, judge=judge)
                 for nd, co in starts]
        best = min(tuned, key=lambda p: key(("optimized", judge(p[0]))))
        out.append(("optimized", judge(best[0]), best))
        out.sort(key=key)
    return out
