"""Threads of the BLAS and OpenMP libraries in each PE.

Each PE is a process, and numpy's OpenBLAS (like MKL and OpenMP runtimes) starts a thread
per core of the machine in every one of them: 2 PEs on 2 cores ran 4 busy threads, a
balanced run oversubscribed the cores, and a skewed program of matrix products gained
1.05x from balancing where it gains 2.08x with one thread per PE (issue 26). So each PE
gets ``cores of its node // PEs on its node`` threads (at least 1), as dask's nanny and
Ray give their workers, unless the user set any of :data:`VARIABLES`: then nothing is
changed. The libraries loaded now are limited with threadpoolctl; the variables are set
in this process too, for OpenMP runtimes loaded later.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.runtime.nodes import NodeMap

VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def per_pe(nodes: NodeMap, pe: int) -> int:
    """The threads PE ``pe`` may use: the cores it may run on, shared by the PEs of its
    node."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    on_node = int((nodes.node == nodes.node[pe]).sum())
    return max(1, cores // on_node)


def limit(nodes: NodeMap, pe: int) -> int | None:
    """Limit this PE's BLAS and OpenMP threads to :func:`per_pe` unless the user chose;
    the limit set, or None."""
    if any(v in os.environ for v in VARIABLES):
        return None
    from threadpoolctl import threadpool_limits

    n = per_pe(nodes, pe)
    for v in VARIABLES:
        os.environ[v] = str(n)
    threadpool_limits(limits=n)
    return n
