"""Choosing a mapping: evaluate the candidates and rank them by a metric (seed 004, Section
3: "the contention analysis model, as its output, predicts an optimal mapping")."""

from __future__ import annotations

from shoal.errors import UsageError
from shoal.mapping.mappings import check_fits, orderings, placement, tiled_candidates
from shoal.mapping.metrics import evaluate
from shoal.mapping.patterns import BYTES_PER_MESSAGE, Pattern
from shoal.memory import require
from shoal.topology.torus import Torus

BYTES_PER_LINK = 128
"""Memory per directed link while a mapping is judged: loads, streams and their spectra."""
METRICS = ("max", "mean", "mean_used", "bidir_max", "bidir_mean_used", "streams_max",
           "streams_mean_used", "hop_bytes", "dilation", "per_process")


def rank(torus: Torus, pattern: Pattern, mappings: list[str] | None = None,
         routing: str = "adaptive", metric: str = "max", order=None, half: str = "split",
         optimize: bool = False, rounds: int = 100) -> list[tuple[str, dict, tuple]]:
    """(name, metrics, (node, core)) for every candidate (default: every ordering, and every
    tiled mapping of a grid pattern), best first: by ``metric``, ties by the mean link load
    and then by name. ``optimize`` adds the graph optimiser's mapping
    (:mod:`shoal.mapping.optimize`), started from the best ordering and from bisection."""
    if metric not in METRICS:
        raise UsageError(f"metric must be one of {', '.join(METRICS)}")
    check_fits(torus, pattern.nprocs)
    require(torus.nlinks * BYTES_PER_LINK + len(pattern.src) * BYTES_PER_MESSAGE,
            f"judging mappings on {torus.nodes:,} nodes", "choose a smaller torus")

    def judge(node):
        return evaluate(torus, node, pattern.src, pattern.dst, pattern.nbytes, routing, order,
                        half)

    out = []
    names = mappings or orderings(torus) + tiled_candidates(torus, pattern.grid)
    for name in names:
        node, core = placement(torus, name, pattern.grid, pattern.order)
        out.append((name if name.startswith("tile") else name.upper(), judge(node),
                    (node, core)))
    def key(c):  # FFT round-off must not break ties: compare 9 significant digits
        return (float(f"{c[1][metric]:.9g}"), float(f"{c[1]['mean']:.9g}"), c[0])

    out.sort(key=key)
    if optimize:
        from shoal.mapping.optimize import bisection, refine

        starts = [out[0][2], bisection(torus, pattern)]
        tuned = [refine(torus, pattern, nd, co, metric, rounds, routing) for nd, co in starts]
        best = min(tuned, key=lambda p: key(("optimized", judge(p[0]))))
        out.append(("optimized", judge(best[0]), best))
        out.sort(key=key)
    return out
