"""Decentralized gossip of node state (Levy14): the simulator, the MPI service and its
co-location with applications."""

from shoal.gossip.colocate import colocated

__all__ = ["colocated"]
