"""Gossip next to an application on the same machine (Levy14, Section 4.2).

``colocated`` splits a communicator as the paper's harness does: every ``every``-th rank runs
the gossip service, the others get ``app_comm`` (the paper's wrapped MPI_COMM_WORLD). In the
baseline (``gossip=False``) the gossip ranks stay idle, as in the paper. The gossip ranks run
until every application rank has left the block (a non-blocking barrier they test between
ticks), so the service covers the whole application run.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from shoal.errors import UsageError
from shoal.gossip.service import GossipService


def _wait(req, poll: float = 1e-3) -> None:
    while not req.Test():
        time.sleep(poll)


@contextmanager
def colocated(comm, every: int = 16, interval: float = 0.256, window: float | int = 0.2,
              entry_size: int = 1024, gossip: bool = True, poll_max: float = 2e-3):
    """``with colocated(comm, every=4, interval=..., window=...) as (app_comm, service):``
    on application ranks ``app_comm`` is their communicator and ``service`` None; on gossip
    ranks ``app_comm`` is None and ``service`` the finished service (None in the baseline),
    whose ``summary()`` and ``snapshot()`` remain readable. Collective over ``comm``."""
    size, rank = comm.Get_size(), comm.Get_rank()
    if every < 2 or size < every:
        raise UsageError(f"--every {every} needs 2 <= every <= ranks ({size})")
    mine = rank % every == every - 1
    sub = comm.Split(1 if mine else 0, rank)
    service = None
    try:
        if mine:
            done = comm.Ibarrier()
            if gossip:
                service = GossipService(sub, interval, window, entry_size, poll_max=poll_max)
                service.run(stop=done.Test)
                service.close()
            else:
                _wait(done)
            yield None, service
        else:
            yield sub, None
            _wait(comm.Ibarrier())
    finally:
        sub.Free()
