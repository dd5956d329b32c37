"""Over-decomposed, message-driven, migratable objects over MPI (seed 002): the Charm++
model in Python. See :mod:`shoal.runtime.pe` for the scheduler and its managers."""

from shoal.runtime.api import (
    Array,
    Group,
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
from shoal.runtime.channel import Channel
from shoal.runtime.chare import Chare
from shoal.runtime.futures import Future
from shoal.runtime.pe import Runtime
from shoal.runtime.reducers import Reducer

__all__ = ["Array", "Channel", "Chare", "Future", "Group", "Reducer", "Runtime", "checkpoint",
           "create", "destroy", "exit", "future", "iteration", "lb_history", "my_pe", "num_pes",
           "quiescence", "restored", "sleep", "start", "stats"]
