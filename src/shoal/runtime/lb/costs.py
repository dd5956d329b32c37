"""What traffic between two PEs costs the balancer: seconds per message and per byte
(Gropp16's postal model, eq. 2: ``T(n) = alpha + n / R``), within a node and between nodes.

The strategies weigh the communication a placement cuts with these figures
(:func:`~.common.edge_seconds`, :func:`~.common.traffic_seconds`): the locality pass
chooses which objects carry a move by them, and greedy_refine chooses between two
placements by them. The defaults (10 us a message, 1 ns a byte, the same on a node and
between nodes) are of the order of shoal's own messages on one node; ``lb_costs`` (``shoal
run --lb-costs PROFILE[,PROFILE]``) replaces them with the machine's, from profiles that
``shoal netmodel fit --save`` wrote: a message costs the profile's time of an 8-byte
message, a byte the slope of its time between 1 and 4 MiB (one pair, ``k = 1``). With two
profiles, the first is within a node and the second between nodes; with one, both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SMALL, LARGE = 8, (1 << 20, 4 << 20)  # bytes: a message's cost, a byte's slope


@dataclass(frozen=True)
class Link:
    """Seconds one message and one byte cost on a kind of link."""

    message: float
    byte: float

    def seconds(self, messages: np.ndarray | float, nbytes: np.ndarray | float
                ) -> np.ndarray | float:
        return self.message * messages + self.byte * nbytes


@dataclass(frozen=True)
class Costs:
    """The link between two PEs of one node (``intra``) and of two nodes (``inter``)."""

    intra: Link = Link(10e-6, 1e-9)
    inter: Link = Link(10e-6, 1e-9)

    def between(self, same_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per pair, the seconds of a message and of a byte (``same_node``: bools)."""
        same = np.asarray(same_node, bool)
        return (np.where(same, self.intra.message, self.inter.message),
                np.where(same, self.intra.byte, self.inter.byte))


DEFAULT = Costs()


def link_for(costs: Costs, nodes: np.ndarray | None) -> Link:
    """The link the locality pass weighs edges by: between nodes when the PEs span
    several (the traffic a move puts there is what costs most), else within one."""
    if nodes is not None and np.unique(nodes).size > 1:
        return costs.inter
    return costs.intra


def link_of(path: str) -> Link:
    """The :class:`Link` of a ``shoal netmodel`` profile (module doc)."""
    from shoal.netmodel.profile import Profile

    profile = Profile.load(path)
    small = profile.time(SMALL, 1)
    lo, hi = LARGE
    slope = (profile.time(hi, 1) - profile.time(lo, 1)) / (hi - lo)
    return Link(max(small, 0.0), max(slope, 0.0))


def load(spec: str) -> Costs:
    """``PROFILE`` (both links) or ``INTRA,INTER`` (module doc)."""
    paths = [p for p in spec.split(",") if p]
    if not 1 <= len(paths) <= 2:
        from shoal.errors import UsageError

        raise UsageError(f"lb_costs {spec!r}: give one netmodel profile, or two separated "
                         "by a comma (within a node, between nodes)")
    intra = link_of(paths[0])
    return Costs(intra, link_of(paths[1]) if len(paths) == 2 else intra)
