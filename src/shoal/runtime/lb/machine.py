"""Where the PEs are: a torus (:class:`shoal.topology.torus.Torus`, Balaji11 Section 2.2) and
the node of every PE, for the topology-aware balancer and for hop-bytes (Balaji11, Section 3:
bytes times hops, summed over messages)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.lb.database import LBDatabase
from shoal.topology.torus import Torus


@dataclass(frozen=True, eq=False)
class Machine:
    """``node[p]``: the torus node of PE ``p`` (several PEs may share a node; nodes may be
    empty)."""

    torus: Torus
    node: np.ndarray

    def __post_init__(self) -> None:
        node = np.asarray(self.node, np.int64)
        if node.ndim != 1 or node.size == 0:
            raise UsageError("the PE-to-node map needs one node per PE")
        if node.min() < 0 or node.max() >= self.torus.nodes:
            raise UsageError(f"a PE is mapped to a node outside the torus "
                             f"({self.torus.nodes} nodes)")
        object.__setattr__(self, "node", node)

    @property
    def npes(self) -> int:
        return int(self.node.size)

    @classmethod
    def block(cls, torus: Torus, npes: int) -> Machine:
        """PE ``p`` on node ``p // torus.cores`` (the launch order of mpiexec); the torus
        must hold the PEs."""
        if npes > torus.processes:
            raise UsageError(f"{npes} PEs do not fit a torus of {torus.nodes} nodes x "
                             f"{torus.cores} cores = {torus.processes}: give a larger torus "
                             f"or more cores per node")
        return cls(torus, np.arange(npes, dtype=np.int64) // torus.cores)

    @classmethod
    def from_file(cls, path: str | Path, torus: Torus) -> Machine:
        """The PE-to-node map of a mapping CSV (``rank,node,x,y,z,core``, as ``shoal map
        --format csv`` writes it; PE = rank)."""
        from shoal.mapping.mapfiles import read_csv

        try:  # (a file that cannot be read is refused by read_csv, naming it)
            node, _core = read_csv(path, torus)
        except ValueError:
            raise UsageError(f"{path}: not a mapping CSV (rank,node,coordinates,core per "
                             f"line)") from None
        return cls(torus, node)

    @classmethod
    def parse(cls, spec: str, npes: int, nodes: np.ndarray | None = None) -> Machine:
        """The machine of ``shoal run --lb-machine`` for ``npes`` PEs: ``4x4x4`` (the PEs
        on the nodes they run on, ``nodes``: node ``k`` of the job is torus node ``k``;
        without it, in launch order, as many per node as it takes to hold them),
        ``4x4x4:2`` (2 PEs per node, in launch order) or ``4x4x4:map.csv`` (the PE-to-node
        map of a mapping CSV)."""
        shape, _, rest = spec.partition(":")
        if not rest and nodes is not None:
            torus = Torus.parse(shape)
            if int(nodes.max()) >= torus.nodes:
                raise UsageError(f"the PEs run on {int(nodes.max()) + 1} nodes; the torus "
                                 f"{shape} has {torus.nodes}: give a larger one")
            return cls(Torus(torus.dims, int(np.bincount(nodes).max())), nodes)
        if not rest:
            torus = Torus.parse(shape)
            return cls.block(Torus(torus.dims, -(-npes // torus.nodes)), npes)
        if rest.isdigit():
            return cls.block(Torus.parse(shape, int(rest)), npes)
        machine = cls.from_file(rest, Torus.parse(shape))
        if machine.npes != npes:
            raise UsageError(f"{rest} maps {machine.npes} PEs; the job has {npes}")
        return machine

    def check(self, db: LBDatabase) -> None:
        """Refuse a machine whose PE count is not the database's."""
        if self.npes != db.npes:
            raise UsageError(f"the machine maps {self.npes} PEs but the database has "
                             f"{db.npes}: give a torus, cores or machine file for {db.npes}")

    def hop_bytes(self, db: LBDatabase, placement: np.ndarray | None = None) -> float:
        """Sum over the database's edges of bytes x hops between the nodes of the two
        objects' PEs under ``placement`` (default: the current one)."""
        self.check(db)
        where = db.pe if placement is None else placement
        if db.src.size == 0:
            return 0.0
        a, b = self.node[where[db.src]], self.node[where[db.dst]]
        far = a != b
        hops = self.torus.distance(a[far], b[far])
        return float(np.dot(hops.astype(float), db.bytes[far].astype(float)))
