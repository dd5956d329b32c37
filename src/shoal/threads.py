"""Threads of the BLAS and OpenMP libraries in each PE.

Each PE is a process, and numpy's OpenBLAS (like MKL and OpenMP runtimes) starts a thread
per core of the machine in every one of them: 2 PEs on 2 cores ran 4 busy threads, a
balanced run oversubscribed the cores, and a skewed program of matrix products gained
1.05x from balancing where it gains 2.08x with one thread per PE (issue 26). So each PE
gets ``cores of its node // PEs on its node`` threads (at least 1), as dask's nanny and
Ray give their workers, unless the user set any of :data:`VARIABLES`: then nothing is
changed.

The share is set before numpy loads where it can be, so that OpenBLAS starts only the
threads it may use: starting one per core and stopping them later cost about 0.1 s of CPU
in every rank (a 2-rank job of a program that imports numpy and shoal and ends, on this
2-core machine: 0.33 s of CPU a rank, 0.25 with ``OPENBLAS_NUM_THREADS=1``), which a
node's ranks all pay at once. ``shoal run`` launching on this node sets it in the ranks'
environment (:func:`share_cores`, with :data:`MARK`: shoal's choice, not the user's), and
:func:`early`, as ``shoal`` is imported, from the number of ranks the launcher says share
this node (hydra's ``MPI_LOCALNRANKS``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``, srun's
tasks per node) if the program has not loaded numpy yet. :func:`limit`, once the runtime
knows its PEs' nodes, limits the libraries loaded with threadpoolctl where the share
differs from the one set before (a program that imported numpy first under a launcher
shoal did not set) and sets the variables for OpenMP runtimes loaded later.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from shoal.errors import UsageError

if TYPE_CHECKING:
    from shoal.runtime.nodes import NodeMap

VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")  # (hydra, Open MPI)
MARK = "SHOAL_THREADS"  # the share shoal set in VARIABLES (absent: any there are the user's)
_early: int | None = None  # the share set before any BLAS library loaded


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _share(ranks: int) -> int:
    """Each of ``ranks`` ranks' share of the cores this process may run on (at least 1)."""
    return max(1, _cores() // ranks)


def _on_node(nodes: NodeMap, pe: int) -> int:
    return int((nodes.node == nodes.node[pe]).sum())


def per_pe(nodes: NodeMap, pe: int) -> int:
    """The threads PE ``pe`` may use: the cores it may run on, shared by the PEs of its
    node."""
    return _share(_on_node(nodes, pe))


def oversubscribed(nodes: NodeMap, pe: int) -> bool:
    """Has PE ``pe``'s node more PEs than the cores they may run on? (A PE bound to one core
    is taken to have it to itself: launchers that bind give each rank a core of its own.)
    There an idle PE does not spin (``poll_spin``): the core it would poll on is one that
    another PE, with work, waits for; Open MPI's ranks yield when idle on such a node
    likewise. Six of the test suite's heaviest files (3 workers' jobs of 2 to 4 PEs on 2
    cores) took 135 CPU-s in their jobs, 126 once the jobs of more PEs than cores did not
    spin."""
    cores = _cores()
    return cores > 1 and _on_node(nodes, pe) > cores


def ranks_here(env: dict[str, str] | os._Environ[str]) -> int | None:
    """The ranks of this job on this node, as the launcher tells its ranks (None: it
    does not)."""
    for name in LOCAL_SIZE:
        if env.get(name, "").isdigit():
            return int(env[name])
    tasks, node = env.get("SLURM_STEP_TASKS_PER_NODE"), env.get("SLURM_NODEID", "")
    if tasks and node.isdigit():
        from shoal.placement import expand_cpus  # (the same "2(x3),1" form)

        try:
            counts = expand_cpus(tasks)
        except UsageError:
            return None
        return counts[int(node)] if int(node) < len(counts) else None
    return None


def share_cores(env: dict[str, str], ranks: int) -> dict[str, str]:
    """``env`` for ``ranks`` ranks that share this node: :data:`VARIABLES` set to their share
    of its cores (and :data:`MARK`), unless the user set any of them."""
    if any(v in env for v in VARIABLES):
        return env
    n = str(_share(ranks))
    return {**env, **dict.fromkeys(VARIABLES, n), MARK: n}


def early() -> None:
    """Note the share ``shoal run`` set in this rank's environment, or set this rank's
    share of its node's cores in :data:`VARIABLES` before numpy loads (see the module doc);
    nothing if the user set any of them, numpy is loaded already, or the launcher does not
    say how many ranks share the node."""
    global _early
    mark = os.environ.get(MARK, "")
    if mark.isdigit() and all(os.environ.get(v) == mark for v in VARIABLES):
        _early = int(mark)
        return
    if "numpy" in sys.modules or any(v in os.environ for v in VARIABLES):
        return
    here = ranks_here(os.environ)
    if not here:
        return
    os.environ.update(share_cores({}, here))
    _early = int(os.environ[MARK])


def limit(nodes: NodeMap, pe: int) -> int | None:
    """Limit this PE's BLAS and OpenMP threads to :func:`per_pe` unless the user chose;
    the limit set, or None."""
    if _early is None and any(v in os.environ for v in VARIABLES):
        return None
    n = per_pe(nodes, pe)
    if n == _early:  # (the libraries started with it)
        return n
    from threadpoolctl import threadpool_limits

    for v in VARIABLES:
        os.environ[v] = str(n)
    threadpool_limits(limits=n)
    return n
