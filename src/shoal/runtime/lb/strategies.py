"""Load-balancing strategies: pure functions from an :class:`LBDatabase` to a new placement.

Acun14 (SC'14; docs/references.md), Section III-A: the runtime measures the load of every object
since the last step ("the recent past is a good predictor of the near future") and a
strategy computes the new mapping of objects to PEs from these measurements; the framework
then migrates the objects. Strategies see only the database (numpy arrays), never MPI, so
they run the same inside the runtime, offline on a dumped database and in tests. Every one
weighs PEs by their capacity and leaves non-migratable objects alone
(:mod:`shoal.runtime.lb.common`).

A strategy returns ``placement``: one PE per object (int64 array of ``db.n`` entries).

=================  =========================================  ================================
name               what                                       module
=================  =========================================  ================================
``greedy``         heaviest object to the least loaded PE     :mod:`.greedy`
``refine``         move objects off overloaded PEs only       :mod:`.greedy`
``greedy_refine``  greedy's bound, keeping objects in place   :mod:`.greedy`
``metis``          partition the communication graph          :mod:`.graph`
``topo``           partition, then place parts on the torus   :mod:`.topo`
``orb``            orthogonal recursive bisection             :mod:`.orb`
``hierarchical``   in groups of PEs, then between groups      :mod:`.hierarchical`
``distributed``    GrapevineLB: gossip, then transfers        :mod:`.distributed`
=================  =========================================  ================================

:data:`STRATEGIES` names them; :func:`chain` binds the :class:`LBOptions` a strategy takes
and runs several in sequence (``"metis,refine"``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.lb import steps as check
from shoal.runtime.lb.common import Strategy
from shoal.runtime.lb.costs import Costs
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.distributed import distributed
from shoal.runtime.lb.graph import metis
from shoal.runtime.lb.greedy import greedy, greedy_refine, refine
from shoal.runtime.lb.hierarchical import hierarchical
from shoal.runtime.lb.machine import Machine
from shoal.runtime.lb.orb import orb
from shoal.runtime.lb.topo import topo

__all__ = ["STRATEGIES", "LBOptions", "Strategy", "chain", "greedy", "greedy_refine",
           "refine"]

STRATEGIES: dict[str, Callable[..., np.ndarray]] = {
    "greedy": greedy,
    "refine": refine,
    "greedy_refine": greedy_refine,
    "metis": metis,
    "topo": topo,
    "orb": orb,
    "hierarchical": hierarchical,
    "distributed": distributed,
}


@dataclasses.dataclass(frozen=True)
class LBOptions:
    """What some strategies need beyond the database; :func:`chain` passes each field to
    the strategies that take a keyword of that name.

    ``machine``: the torus and the node of every PE (``topo`` needs it; ``hierarchical``
    groups the PEs of a node when it is given); ``nodes``: the node of every PE where the
    job runs (the runtime's real map, when the PEs span nodes: ``hierarchical``'s groups
    without a machine; the locality pass and greedy_refine's choice: which traffic
    crosses nodes); ``costs``: what a message and a byte cost within a node and between
    nodes (:mod:`.costs`; None: the defaults); ``group``: PEs per group of
    ``hierarchical`` without either; ``seed``: the random choices of ``distributed``."""

    machine: Machine | None = None
    nodes: np.ndarray | None = None
    costs: Costs | None = None
    group: int = 64
    seed: int = 0


def bind(name: str, options: LBOptions | None = None) -> Strategy:
    """Strategy ``name`` (a known one: :func:`chain` checks the names first) with the fields
    of ``options`` it takes. Raises :class:`UsageError` for a strategy whose required option
    is missing (``topo`` without a machine)."""
    options = options or LBOptions()
    fn = STRATEGIES[name]
    kwargs: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if not hasattr(options, param.name):
            continue
        value = getattr(options, param.name)
        if value is None and param.default is inspect.Parameter.empty:
            raise UsageError(f"strategy {name!r} needs the {param.name}: "
                             f"{_HOW[param.name]}")
        if value is not None:
            kwargs[param.name] = value
    return functools.partial(fn, **kwargs) if kwargs else fn


_HOW = {"machine": "give the torus the PEs run on (shoal run --lb-machine 4x4x4[:CORES], "
                   "lb_machine= of shoal.start; shoal lb simulate --torus 4x4x4 --cores K "
                   "or --machine-file)"}


def chain(names: str, options: LBOptions | None = None) -> Strategy:
    """The strategies named in ``names`` (comma-separated, e.g. ``"metis,refine"``) run in
    order, each from the placement the previous one produced (a copy of the database with
    ``pe`` replaced). Raises :class:`UsageError` on an unknown or missing name or a
    missing option (:func:`bind`)."""
    steps = [bind(part, options) for part in check(names)]
    if len(steps) == 1:
        return steps[0]

    def run(db: LBDatabase) -> np.ndarray:
        placement = db.pe
        for step in steps:
            placement = step(dataclasses.replace(db, pe=placement))
        return placement

    return run
