"""shoal: an adaptive runtime for parallel programs on HPC clusters, with the system knowledge
such a runtime needs (gossip-spread node state, communication models, topology and mapping)."""

from shoal._version import __version__
from shoal.errors import CheckpointError, ShoalError, UsageError, WireError
from shoal.runtime import (
    Aggregator,
    Array,
    Channel,
    Chare,
    Future,
    Group,
    Reducer,
    RemoteError,
    Runtime,
    broadcast_globals,
    checkpoint,
    create,
    destroy,
    exit,
    future,
    iteration,
    iwait,
    lb_history,
    my_pe,
    num_pes,
    quiescence,
    restored,
    run_on_all,
    sleep,
    start,
    stats,
    when,
)
from shoal.runtime.pool import pool

__all__ = ["Aggregator", "Array", "Channel", "Chare", "CheckpointError", "Future", "Group",
           "Reducer", "RemoteError", "Runtime", "ShoalError", "UsageError", "WireError",
           "__version__", "broadcast_globals", "checkpoint", "create", "destroy", "exit",
           "future", "iteration", "iwait", "lb_history", "my_pe", "num_pes", "pool",
           "quiescence", "restored", "run_on_all", "sleep", "start", "stats", "when"]
