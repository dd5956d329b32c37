"""Load balancing (Acun14, Section III-A): the database of what the runtime measured
(:mod:`.database`), strategies as pure functions of it (:mod:`.strategies`), and the driver
that decides when to balance and runs a step inside the runtime (:mod:`.driver`).

The strategies' names are here, known without importing the strategies: those import
their kernels' compiler (numba) and scipy, 0.16 CPU-seconds in each process, which the
PEs that never run a strategy (all but the root) and ``--help`` need not pay."""

from __future__ import annotations

from shoal.errors import UsageError

# the keys of .strategies.STRATEGIES, in its order (tests/cli/test_lb_cli.py checks it)
NAMES = ("greedy", "refine", "greedy_refine", "metis", "topo", "orb", "hierarchical",
         "distributed")


def steps(names: str) -> list[str]:
    """The strategies of a chain such as ``"metis,refine"``, in order; raises
    :class:`UsageError` naming the unknown ones."""
    parts = [part.strip() for part in names.split(",")]
    unknown = [part for part in parts if part not in NAMES]
    if unknown:
        raise UsageError(f"unknown load-balancing strategy {', '.join(map(repr, unknown))} "
                         f"in {names!r}; known strategies: {', '.join(sorted(NAMES))}")
    return parts
