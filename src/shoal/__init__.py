"""shoal: an adaptive runtime for parallel programs on HPC clusters, with the system knowledge
such a runtime needs (gossip-spread node state, communication models, topology and mapping)."""

from shoal._version import __version__
from shoal.errors import CheckpointError, ShoalError, UsageError, WireError
from shoal.runtime import (
    Array,
    Channel,
    Chare,
    Future,
    Group,
    Reducer,
    Runtime,
    checkpoint,
    create,
    destroy,
    exit,
    future,
    iteration,
    lb_history,
    my_pe,
    num_pes,
    quiescence,
    restored,
    sleep,
    start,
    stats,
)

__all__ = ["Array", "Channel", "Chare", "CheckpointError", "Future", "Group", "Reducer",
           "Runtime", "ShoalError", "UsageError", "WireError", "__version__", "checkpoint",
           "create", "destroy", "exit", "future", "iteration", "lb_history", "my_pe", "num_pes",
           "quiescence", "restored", "sleep", "start", "stats"]
