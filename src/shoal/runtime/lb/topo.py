"""Topology-aware balancing (TopoLB; Acun14, Section III-A "balancing computation load or
communication", with the machine model of Balaji11): partition the communication graph,
then place the parts on the PEs so that the bytes between parts travel few hops on the torus
(hop-bytes, Balaji11 Section 3).

1. METIS splits the migratable objects into one part per PE that can take load (target > 0,
   :func:`.common.targets`), of equal weight (any part may then go to any such PE).
2. The quotient graph (bytes between parts) is mapped onto those PEs' places by the mapping
   code's recursive spectral bisection (:func:`shoal.mapping.optimize.bisection`, nodes
   filled with as many parts as they hold such PEs).
3. The result is compared, by hop-bytes, with the parts relabelled to keep objects in place
   (:func:`.common.relabelling`), and the lower one is kept: never worse than that
   relabelling.
4. When the PEs' targets differ (capacities, non-migratable load), equal parts overload the
   smaller PEs: :func:`.greedy.refine` then moves objects off them.

Needs a :class:`.machine.Machine` (torus and node of every PE). Falls back to
:func:`.greedy.greedy_refine` when no two migratable objects communicate (hop-bytes are 0
whatever the placement).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from shoal.mapping.patterns import Pattern
from shoal.runtime.lb.common import relabelling
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.graph import Problem, partition, problem
from shoal.runtime.lb.greedy import refine
from shoal.runtime.lb.machine import Machine

if TYPE_CHECKING:
    import scipy.sparse as sp


def _quotient(adj: sp.csr_matrix, part: np.ndarray, k: int) -> sp.csr_matrix:
    """Bytes between parts (both directions, no self loops)."""
    import scipy.sparse as sp  # (here: scipy costs 0.1 s at every PE's start)

    p = sp.csr_matrix((np.ones(part.size), (np.arange(part.size), part)),
                      shape=(part.size, k))
    q = (p.T @ adj @ p).tocsr()
    q.setdiag(0)
    q.eliminate_zeros()
    return q


def _hop_bytes(machine: Machine, q: sp.coo_matrix, pe_of_part: np.ndarray) -> float:
    a, b = machine.node[pe_of_part[q.row]], machine.node[pe_of_part[q.col]]
    return float(np.dot(machine.torus.distance(a, b), q.data))


def _on_torus(machine: Machine, q: sp.csr_matrix, receivers: np.ndarray) -> np.ndarray:
    """The PE (one of ``receivers``) of each part, by spectral bisection of the quotient
    graph ``q`` over the nodes of ``receivers``."""
    from shoal.mapping.optimize import bisection  # (scipy.linalg: not at every PE's start)

    coo = q.tocoo()
    k = receivers.size
    pattern = Pattern(k, coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data,
                      "parts")
    nodes = machine.node[receivers]
    slots = np.bincount(nodes, minlength=machine.torus.nodes)
    node, core = bisection(machine.torus, pattern, slots)
    by_node = receivers[np.argsort(nodes, kind="stable")]  # the PEs of each node, in order
    first = np.concatenate([[0], np.cumsum(slots)[:-1]])
    return by_node[first[node] + core]


def topo(db: LBDatabase, machine: Machine) -> np.ndarray:
    """TopoLB: partition, map the parts onto the torus, keep the lower hop-bytes of that
    and of keeping objects in place, then refine for unequal capacities (module
    docstring). Non-migratable objects stay; a PE of target 0 gets no migratable object
    (unless ``refine`` finds no other room)."""
    machine.check(db)
    prob = problem(db)
    if not isinstance(prob, Problem):
        return prob
    objects, adj, target, receivers = prob
    placement = db.pe.copy()
    k = receivers.size
    part = partition(db, objects, adj, np.ones(k))
    q = _quotient(adj, part, k)
    equal = np.zeros(db.npes)
    equal[receivers] = 1.0
    kept = relabelling(db, receivers[part], objects, equal)[receivers]
    candidates = [_on_torus(machine, q, receivers), kept]
    coo = q.tocoo()
    best = min(candidates, key=lambda pe_of_part: _hop_bytes(machine, coo, pe_of_part))
    placement[objects] = best[part]
    if np.ptp(target[receivers]) > 1e-9 * target.max():
        placement = refine(dataclasses.replace(db, pe=placement))
    return placement
