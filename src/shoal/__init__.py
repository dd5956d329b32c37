"""shoal: an adaptive runtime for parallel programs on HPC clusters, with the system knowledge
such a runtime needs (gossip-spread node state, communication models, topology and mapping)."""

from shoal._version import __version__
from shoal.errors import ShoalError, UsageError, WireError
from shoal.runtime import (
    Array,
    Channel,
    Chare,
    Future,
    Group,
    Reducer,
    Runtime,
    create,
    exit,
    future,
    lb_history,
    my_pe,
    num_pes,
    quiescence,
    sleep,
    start,
    stats,
)

__all__ = ["Array", "Channel", "Chare", "Future", "Group", "Reducer", "Runtime", "ShoalError",
           "UsageError", "WireError", "__version__", "create", "exit", "future", "lb_history",
           "my_pe", "num_pes", "quiescence", "sleep", "start", "stats"]
