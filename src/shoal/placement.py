"""Where the ranks of a job go, from what the gossip daemon knows of the nodes (issue 28,
item 6): the runtime's first use of gossip as the system service of Levy14, Section 1 (the
state of every node, for process placement and load management).

A node's **background** is the CPU its processes take that are not shoal's PEs (the
daemon's ``busy - shoal``, :class:`shoal.gossip.state.CpuMeter`). A rank placed on a node of
``cores`` cores that already runs ``k`` ranks gets ``min(1, cores / (k + 1 + background))``
of a core, if the kernel shares the cores fairly. Two users of that figure:

* :func:`hostfile`, for a launch inside a Slurm allocation (first launch, restart, resize):
  each rank in turn goes to the node where it gets the most, among the nodes the daemon
  reports alive and not lost by an earlier launch; ties go to a node still within the CPUs
  Slurm allocated there, then to the one with fewer ranks, then in the allocation's order.
  The ranks of one node are numbered together, in the allocation's order of nodes.
* :func:`pe_shares`, for the runtime: the share of a core each PE of a running job gets;
  the default map of an array gives PEs elements in proportion (:class:`shoal.runtime.maps.
  WeightedBlock`), so the balancer starts from the nodes' load before it has measured any.

What is not counted: other shoal jobs' PEs (a daemon sees their CPU as shoal's, whichever job
they belong to); a node the daemon does not know counts as idle with Slurm's CPUs for cores.
Nodes are matched by host name: the part of the daemon's node name before ``@`` (its
default, ``HOSTNAME@ADDRESS``), short or fully qualified.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from shoal.errors import UsageError


@dataclass(frozen=True)
class NodeLoad:
    """What the daemon says of one node: its cores, the cores its other work takes, and the
    failure detector's state (``alive``, ``suspect``, ``dead``)."""

    cores: int
    background: float
    state: str = "alive"

    def share(self, ranks: int) -> float:
        """The share of a core each of ``ranks`` ranks gets here (1 for no rank)."""
        return min(1.0, self.cores / (ranks + self.background)) if ranks else 1.0


def node_loads(view: list[dict[str, Any]]) -> dict[str, NodeLoad]:
    """The daemon's view (:func:`shoal.cluster_nodes`) by host name, short names too."""
    out: dict[str, NodeLoad] = {}
    for node in view:
        host = str(node["name"]).split("@", 1)[0]
        load = NodeLoad(int(node["cores"]), max(0.0, float(node["busy"]) - float(node["shoal"])),
                        str(node.get("state", "alive")))
        out[host] = load
        out.setdefault(host.split(".", 1)[0], load)
    return out


def _load_of(host: str, loads: dict[str, NodeLoad]) -> NodeLoad | None:
    return loads.get(host) or loads.get(host.split(".", 1)[0])


def hostfile(nprocs: int, nodes: list[str], cpus: list[int], loads: dict[str, NodeLoad],
             exclude: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """The host of each of ``nprocs`` ranks on the allocation's ``nodes`` (with ``cpus``
    CPUs allocated on each), leaving out ``exclude`` and the nodes ``loads`` has suspect or
    dead (unless that leaves none)."""
    if nprocs < 1:
        raise UsageError(f"run at least 1 rank (got -n {nprocs})")
    kept = [(n, c, _load_of(n, loads) or NodeLoad(c, 0.0))
            for n, c in zip(nodes, cpus, strict=True) if n not in exclude]
    if not kept:
        raise UsageError(f"no node of the allocation is left without {', '.join(sorted(exclude))}")
    kept = [k for k in kept if k[2].state == "alive"] or kept
    ranks = [0] * len(kept)
    for _ in range(nprocs):
        best = max(range(len(kept)), key=lambda i: (
            kept[i][2].share(ranks[i] + 1), ranks[i] < kept[i][1], -ranks[i], -i))
        ranks[best] += 1
    return [n for (n, _, _), k in zip(kept, ranks, strict=True) for _ in range(k)]


def pe_shares(hosts: list[str], loads: dict[str, NodeLoad]) -> list[float]:
    """The share of a core each PE gets, ``hosts[p]`` being the host of PE ``p`` (all 1.0
    where the daemon says nothing)."""
    count: dict[str, int] = {}
    for h in hosts:
        count[h] = count.get(h, 0) + 1
    return [(_load_of(h, loads) or NodeLoad(count[h], 0.0)).share(count[h]) for h in hosts]


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compact host list (``n[1-3,7],gpu[01-02]-a``) as host names, in order."""
    hosts: list[str] = []
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text):
        parts = re.split(r"\[([^\]]*)\]", item)  # text, ranges, text, ranges, ..., text
        choices: list[list[str]] = []
        for k, part in enumerate(parts):
            choices.append(_ranges(part, text) if k % 2 else [part])
        hosts += ["".join(p) for p in itertools.product(*choices)]
    return hosts


def _ranges(spec: str, text: str) -> list[str]:
    out = []
    for r in spec.split(","):
        lo, _, hi = r.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise UsageError(f"cannot read Slurm's host list {text!r} (range {r!r})")
        out += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi or lo) + 1)]
    return out


def expand_cpus(text: str) -> list[int]:
    """Slurm's CPUs per node (``4,1(x2)``) as one count per node."""
    out: list[int] = []
    for item in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if m is None:
            raise UsageError(f"cannot read Slurm's CPUs per node {text!r}")
        out += [int(m[1])] * int(m[2] or 1)
    return out
