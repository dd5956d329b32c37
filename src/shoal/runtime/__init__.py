"""Over-decomposed, message-driven, migratable objects over MPI (Acun14): the Charm++
model in Python. See :mod:`shoal.runtime.pe` for the scheduler and its managers."""

from shoal.runtime.aggregation import Aggregator
from shoal.runtime.api import (
    Array,
    Group,
    checkpoint,
    cluster_nodes,
    combine,
    control_history,
    control_point,
    create,
    destroy,
    exit,
    future,
    iteration,
    lb_history,
    my_host,
    my_node,
    my_pe,
    num_nodes,
    num_pes,
    power_history,
    quiescence,
    restored,
    sleep,
    start,
    stats,
)
from shoal.runtime.channel import Channel
from shoal.runtime.chare import Chare
from shoal.runtime.failure import RemoteError
from shoal.runtime.futures import Future, iwait
from shoal.runtime.guards import when
from shoal.runtime.pe import Runtime
from shoal.runtime.perpe import broadcast_globals, run_on_all
from shoal.runtime.reducers import Reducer

__all__ = [
    "Aggregator",
    "Array",
    "Channel",
    "Chare",
    "Future",
    "Group",
    "Reducer",
    "RemoteError",
    "Runtime",
    "broadcast_globals",
    "checkpoint",
    "cluster_nodes",
    "combine",
    "control_history",
    "control_point",
    "create",
    "destroy",
    "exit",
    "future",
    "iteration",
    "iwait",
    "lb_history",
    "my_host",
    "my_node",
    "my_pe",
    "num_nodes",
    "num_pes",
    "power_history",
    "quiescence",
    "restored",
    "run_on_all",
    "sleep",
    "start",
    "stats",
    "when",
]
