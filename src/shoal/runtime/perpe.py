"""Per-PE state and set-up code (Acun14, II-D: a group has one member per PE; charm4py's
readonly globals and remote execution are built on one).

:func:`run_on_all` runs a function on every PE and gives the list of its results in PE
order; :func:`broadcast_globals` sets module-level names on every PE (readonly data that
every chare then reads as a global). Both go through a group of the runtime's own,
:class:`PeAgent`, made by the first call on each PE (one creation down the tree), and are
broadcasts with a future: an exception on any PE is raised where the future is awaited.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime.chare import Chare
from shoal.runtime.context import current
from shoal.runtime.sendable import sendable

if TYPE_CHECKING:
    from shoal.runtime.futures import Future


class PeAgent(Chare):
    """The runtime's member on each PE for per-PE work."""

    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        return fn(*args, **kwargs)  # a coroutine function's coroutine is awaited

    def set_globals(self, module: str, values: dict[str, Any]) -> None:
        mod = sys.modules.get(module)
        if mod is None:
            mod = importlib.import_module(module)
        vars(mod).update(values)


# the runtime that made the agents' group, and the group's proxy: one runtime runs in a
# process at a time (a core compiled by mypyc takes no weak reference, docs/compiled.md)
_AGENTS: list[Any] = [None, None]


def _agents() -> Any:  # the group's proxy (its entry methods are made at run time)
    rt = current()
    if _AGENTS[0] is not rt:
        _AGENTS[:] = rt, rt.location.create("group", PeAgent, (rt.npes,), None, (), "block")
    return _AGENTS[1]


def run_on_all(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """``results = await shoal.run_on_all(f, *args, **kwargs)``: ``f(*args, **kwargs)`` on
    every PE (an ``async def`` one is awaited there), the results in PE order. ``f`` must be
    defined at the top level of a module (it is sent by name)."""
    if not callable(fn):
        raise UsageError(f"shoal.run_on_all runs a function, not {fn!r}")
    sendable(fn, "the function")
    return _agents().run(fn, args, kwargs, ret=True)


def broadcast_globals(module: str | None = None, /, **values: Any) -> Future:
    """``await shoal.broadcast_globals(name=value, ...)``: set each ``name`` to ``value``
    as a global of the caller's module (or of ``module``, by its import name) on every PE;
    the future resolves once every PE has them. Every PE gets its own copy (pickled), so
    they are read-only data: a PE that changes its copy changes it there only."""
    if not values:
        raise UsageError("shoal.broadcast_globals(name=value, ...): give at least one name")
    if module is None:
        module = sys._getframe(1).f_globals["__name__"]
    elif not isinstance(module, str):
        raise UsageError(f"the module is given by its import name, not {module!r}")
    return _agents().set_globals(module, values, awaitable=True)
