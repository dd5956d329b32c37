"""Which node each PE runs on: the host names of every PE, gathered once at start-up.

Nodes are numbered in the order of their first PE. The balancer groups PEs by node
(``hierarchical``) and counts the bytes that cross nodes in ``lb_history``; ``shoal.stats()``
names the PE's host. Shared-memory segments (``wire/shm.py``) and the buddies of in-memory
checkpoints (``buddy.py``) take their nodes from ``MPI_Comm_split_type(COMM_TYPE_SHARED)``,
which the MPI library derives from the same placement (PMI's process mapping under srun).
"""

from __future__ import annotations

import socket
from typing import Any

import numpy as np


class NodeMap:
    """``hosts[p]``: the host of PE ``p``; ``node[p]``: its node number."""

    def __init__(self, hosts: list[str]):
        self.hosts = hosts
        first: dict[str, int] = {}
        self.node = np.array([first.setdefault(h, len(first)) for h in hosts], np.int64)
        self.names = list(first)  # node number -> host

    @classmethod
    def gather(cls, comm: Any) -> NodeMap:
        """Every PE's host (collective over ``comm``)."""
        return cls(comm.allgather(socket.gethostname()))

    @property
    def count(self) -> int:
        return len(self.names)

    def cross_bytes(self, src_pe: np.ndarray, dst_pe: np.ndarray, nbytes: np.ndarray
                    ) -> float:
        """Bytes of the messages ``src_pe[i] -> dst_pe[i]`` whose PEs are on two nodes."""
        far = self.node[src_pe] != self.node[dst_pe]
        return float(np.asarray(nbytes, float)[far].sum())
