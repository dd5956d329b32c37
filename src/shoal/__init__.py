"""shoal: an adaptive runtime for parallel programs on HPC clusters, with the system knowledge
such a runtime needs (gossip-spread node state, communication models, topology and mapping)."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from shoal import _compiled, threads
from shoal._version import __version__
from shoal.errors import CheckpointError, ShoalError, UsageError, WireError

threads.early()  # a rank's share of its node's cores, before anything loads numpy

if _compiled.pure_requested():  # SHOAL_PURE=1: the runtime's source, not its extensions
    _compiled.prefer_source()

if TYPE_CHECKING:
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
        cluster_nodes,
        combine,
        control_history,
        control_point,
        create,
        destroy,
        exit,
        future,
        iteration,
        iwait,
        lb_history,
        my_host,
        my_node,
        my_pe,
        num_nodes,
        num_pes,
        power_history,
        quiescence,
        restored,
        run_on_all,
        sleep,
        start,
        stats,
        when,
    )
    from shoal.runtime.pool import pool

__all__ = [
    "Aggregator",
    "Array",
    "Channel",
    "Chare",
    "CheckpointError",
    "Future",
    "Group",
    "Reducer",
    "RemoteError",
    "Runtime",
    "ShoalError",
    "UsageError",
    "WireError",
    "__version__",
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
    "pool",
    "power_history",
    "quiescence",
    "restored",
    "run_on_all",
    "sleep",
    "start",
    "stats",
    "when",
]


def __getattr__(name: str) -> Any:
    """The runtime's API loads at its first use (``shoal.Chare``, ``from shoal import
    start``), so the ``shoal`` command and the other parts do not pay for importing it."""
    if name == "pool":
        value = import_module("shoal.runtime.pool").pool
    elif name in __all__:
        value = getattr(import_module("shoal.runtime"), name)
    else:
        try:
            value = import_module(f"shoal.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"shoal.{name}":
                raise
            raise AttributeError(f"module 'shoal' has no attribute {name!r}") from None
    globals()[name] = value
    return value
