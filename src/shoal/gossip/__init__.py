"""Decentralized gossip of node state (Levy14): the simulator, the MPI service and its
co-location with applications.

``colocated`` loads the co-location harness (and the service) at its first use: the
runtime's distributed balancer imports ``shoal.gossip.vector`` alone, in every PE."""

from typing import Any

__all__ = ["colocated"]


def __getattr__(name: str) -> Any:
    if name == "colocated":
        from shoal.gossip.colocate import colocated

        return colocated
    raise AttributeError(f"module 'shoal.gossip' has no attribute {name!r}")
