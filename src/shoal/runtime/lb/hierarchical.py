"""Hierarchical balancing (HybridLB / TreeLB; Acun14, Section IV-B: "the use of scalable
hierarchical load balancer, HybridLB, improves the performance [of LeanMD] by at least 40%"):
the PEs form groups (the PEs of one node, or blocks of 64), and no PE ever holds the whole
database.

1. Each group summarises itself (:func:`summarise`): its load, its capacity and the load
   that may move. Only these coarsened loads go up.
2. The root balances the groups (:func:`transfers`): each group should hold its capacity's
   share of the total; surplus groups send load to deficit groups, largest surplus to
   largest deficit, as amounts of load.
3. Each sending group picks, among its own objects, objects that add up to each amount
   (:func:`pick`, heaviest first while they fit, the shortfall carried to the next).
4. Each group balances what it then holds, its remaining objects and the ones it received,
   over its own PEs with :func:`.greedy.greedy_refine` (:func:`balance_group`).

Steps 1, 3 and 4 of a group see only the objects of that group (:class:`PeGroup`); step 2 sees
one summary per group. Capacities and non-migratable objects count as in every strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shoal.errors import UsageError
from shoal.jit import njit
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.greedy import greedy_refine
from shoal.runtime.lb.machine import Machine


@dataclass
class PeGroup:
    """One group's part of the database: its PEs (global numbers, with their capacities)
    and its objects (global numbers, with load, PE and whether they may move)."""

    pes: np.ndarray
    cap: np.ndarray
    objects: np.ndarray
    load: np.ndarray
    pe: np.ndarray
    migratable: np.ndarray


def groups(db: LBDatabase, size: int, machine: Machine | None,
           nodes: np.ndarray | None = None) -> list[PeGroup]:
    """The groups: the PEs of each node of ``machine``, else of each node of ``nodes`` (the
    node of every PE), else blocks of ``size`` PEs."""
    if machine is not None:
        machine.check(db)
        _, of_pe = np.unique(machine.node, return_inverse=True)
    elif nodes is not None and len(nodes) == db.npes:
        _, of_pe = np.unique(nodes, return_inverse=True)
    else:
        if size < 1:
            raise UsageError(f"hierarchical groups need at least 1 PE, not {size}")
        of_pe = np.arange(db.npes) // size
    assert db.migratable is not None
    cap = db.capacity()
    by_pe = np.argsort(of_pe, kind="stable")
    pe_cut = np.searchsorted(of_pe[by_pe], np.arange(of_pe.max() + 2))
    of_obj = of_pe[db.pe]
    by_obj = np.argsort(of_obj, kind="stable")
    obj_cut = np.searchsorted(of_obj[by_obj], np.arange(of_pe.max() + 2))
    out = []
    for g in range(of_pe.max() + 1):
        pes = by_pe[pe_cut[g]:pe_cut[g + 1]]
        objs = by_obj[obj_cut[g]:obj_cut[g + 1]]
        out.append(PeGroup(pes, cap[pes], objs, db.load[objs], db.pe[objs],
                         db.migratable[objs]))
    return out


def summarise(group: PeGroup) -> tuple[float, float, float]:
    """A group's coarsened load: (load, capacity, load that may move)."""
    return (float(group.load.sum()), float(group.cap.sum()),
            float(group.load[group.migratable].sum()))


def transfers(summaries: np.ndarray) -> list[tuple[int, int, float]]:
    """``(from, to, amount)``: load to move between groups so that each holds its
    capacity's share of the total (``summaries``: rows of :func:`summarise`), never more
    than a group's movable load; largest surplus to largest deficit."""
    load, cap, movable = summaries.T
    want = cap / cap.sum() * load.sum() if cap.sum() > 0 else load
    surplus = np.minimum(load - want, movable)
    give = sorted(((s, g) for g, s in enumerate(surplus) if s > 0), reverse=True)
    take = sorted(((-s, g) for g, s in enumerate(load - want) if s < 0), reverse=True)
    out = []
    i = j = 0
    left_give = [s for s, _ in give]
    left_take = [s for s, _ in take]
    while i < len(give) and j < len(take):
        amount = min(left_give[i], left_take[j])
        out.append((give[i][1], take[j][1], amount))
        left_give[i] -= amount  # one of the two is now exactly 0
        left_take[j] -= amount
        if left_give[i] <= 0:
            i += 1
        else:
            j += 1
    return out


@njit(cache=True, nogil=True)
def _fill(w: np.ndarray, taken: np.ndarray, amount: float) -> np.ndarray:
    """Objects of loads ``w`` (heaviest first), not yet ``taken``, that fit in ``amount``
    one after the other; marks them taken and returns their positions."""
    out = np.empty(w.shape[0], np.int64)
    k = 0
    left = amount
    for i in range(w.shape[0]):
        if not taken[i] and 0.0 < w[i] <= left:
            taken[i] = True
            left -= w[i]
            out[k] = i
            k += 1
    return out[:k]


def pick(group: PeGroup, amounts: list[float]) -> list[np.ndarray]:
    """For each amount, objects of ``group`` (global numbers) that fit in it, heaviest first;
    what one amount leaves unfilled is added to the next, so the group as a whole sends
    its total within one object (all of its movable objects when the amounts add up to
    them, whatever the rounding)."""
    movable = np.flatnonzero(group.migratable)
    order = movable[np.argsort(-group.load[movable], kind="stable")]
    taken = np.zeros(order.size, np.bool_)
    w = group.load[order]
    if amounts and math.fsum(amounts) >= float(w.sum()) * (1 - 1e-9):
        amounts = [*amounts[:-1], math.inf]  # all must go (a group of capacity 0)
    out = []
    carry = 0.0
    for amount in amounts:
        chosen = _fill(w, taken, amount + carry)
        carry += amount - float(w[chosen].sum())
        out.append(group.objects[order[chosen]])
    return out


def balance_group(group: PeGroup, leaving: np.ndarray, arriving: PeGroup) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """``(objects, PEs)``: greedy_refine over the group's PEs of its objects less
    ``leaving`` plus ``arriving`` (whose PEs are elsewhere: they start on the group's least
    loaded PE)."""
    stay = ~np.isin(group.objects, leaving)
    local = np.full(group.pes.max() + 1, -1, np.int64)
    local[group.pes] = np.arange(group.pes.size)
    home = local[group.pe[stay]]
    loads = np.bincount(home, weights=group.load[stay], minlength=group.pes.size)
    lightest = int(np.argmin(loads / np.maximum(group.cap, 1e-300)))
    objects = np.concatenate([group.objects[stay], arriving.objects])
    sub = LBDatabase(np.concatenate([group.load[stay], arriving.load]),
                     np.concatenate([home, np.full(arriving.objects.size, lightest)]),
                     group.pes.size,
                     migratable=np.concatenate([group.migratable[stay],
                                                arriving.migratable]),
                     speed=group.cap)
    return objects, group.pes[greedy_refine(sub)]


def hierarchical(db: LBDatabase, group: int = 64, machine: Machine | None = None,
                 nodes: np.ndarray | None = None) -> np.ndarray:
    """HybridLB: balance between groups on coarsened loads, then inside each group (module
    docstring). Groups are the nodes of ``machine`` when given, else the nodes the PEs run
    on (``nodes``, from the runtime), else ``group`` PEs each."""
    parts = groups(db, group, machine, nodes)
    moves = transfers(np.array([summarise(g) for g in parts]).reshape(-1, 3))
    sending: dict[int, list[tuple[int, float]]] = {}
    for src, dst, amount in moves:
        sending.setdefault(src, []).append((dst, amount))
    leaving = {g: np.zeros(0, np.int64) for g in range(len(parts))}
    arriving: dict[int, list[np.ndarray]] = {g: [] for g in range(len(parts))}
    for src, out in sending.items():
        picked = pick(parts[src], [amount for _, amount in out])
        leaving[src] = np.concatenate(picked)
        for (dst, _), objs in zip(out, picked, strict=True):
            arriving[dst].append(objs)
    placement = db.pe.copy()
    assert db.migratable is not None
    for g, part in enumerate(parts):
        came = np.concatenate(arriving[g]) if arriving[g] else np.zeros(0, np.int64)
        incoming = PeGroup(part.pes, part.cap, came, db.load[came], db.pe[came],
                         db.migratable[came])
        objects, pes = balance_group(part, leaving[g], incoming)
        placement[objects] = pes
    return placement
