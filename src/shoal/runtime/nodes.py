"""Which node each PE runs on: the host names of every PE, gathered once at start-up.

Nodes are numbered in the order of their first PE. The balancer groups PEs by node
(``hierarchical``) and counts the bytes that cross nodes in ``lb_history``; ``shoal.stats()``
names the PE's host. Shared-memory segments (``wire/shm.py``) and the buddies of in-memory
checkpoints (``buddy.py``) take their nodes from ``MPI_Comm_split_type(COMM_TYPE_SHARED)``,
which the MPI library derives from the same placement (PMI's process mapping under srun).

``shares[p]`` is the share of a core PE ``p`` gets, from the local gossip daemon's view of
the nodes' other work (:func:`shoal.placement.pe_shares`; all 1.0 where no daemon runs):
the default map of an array gives PEs elements in proportion
(:class:`shoal.runtime.maps.WeightedBlock`).
"""

from __future__ import annotations

import socket
from typing import Any

import numpy as np


class NodeMap:
    """``hosts[p]``: the host of PE ``p``; ``node[p]``: its node number; ``shares[p]``: the
    share of a core it gets."""

    def __init__(self, hosts: list[str], shares: list[float] | None = None):
        self.hosts = hosts
        self.shares = [1.0] * len(hosts) if shares is None else shares
        first: dict[str, int] = {}
        self.node = np.array([first.setdefault(h, len(first)) for h in hosts], np.int64)
        self.names = list(first)  # node number -> host

    @classmethod
    def gather(cls, comm: Any) -> NodeMap:
        """Every PE's host, and its share of a core as PE 0's local gossip daemon sees the
        nodes (collective over ``comm``)."""
        hosts = comm.allgather(socket.gethostname())
        return cls(hosts, comm.bcast(_shares(hosts) if comm.rank == 0 else None))

    @property
    def count(self) -> int:
        return len(self.names)

    def cross_bytes(self, src_pe: np.ndarray, dst_pe: np.ndarray, nbytes: np.ndarray
                    ) -> float:
        """Bytes of the messages ``src_pe[i] -> dst_pe[i]`` whose PEs are on two nodes."""
        far = self.node[src_pe] != self.node[dst_pe]
        return float(np.asarray(nbytes, float)[far].sum())


def _shares(hosts: list[str]) -> list[float]:
    from shoal.gossip.control import cluster
    from shoal.placement import node_loads, pe_shares

    return pe_shares(hosts, node_loads(cluster()))
