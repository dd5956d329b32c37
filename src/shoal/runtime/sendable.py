"""Functions that travel to other PEs (user reducers, array maps, ``shoal.run_on_all``):
pickle sends a function by reference (module and name), so only a function defined with
``def`` at the top level of a module arrives. A lambda or a function defined inside another
one is refused where it is given, on any number of PEs: a program that runs on one PE then
runs on many."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from types import FunctionType
from typing import Any

from shoal.errors import UsageError

_SENT: set[FunctionType] = set()  # plain functions found to pickle by reference


def sendable(fn: Callable[..., Any], what: str) -> None:
    """Raise a :class:`UsageError` naming ``what`` (e.g. ``"the reducer"``) unless ``fn``
    pickles and unpickles here (then it does on every PE of the job: they run the same
    program). A plain function is checked once."""
    plain = type(fn) is FunctionType
    if plain and fn in _SENT:
        return
    try:
        pickle.loads(pickle.dumps(fn))
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise UsageError(f"{what} {name} cannot be sent to other PEs ({exc}): define it with "
                         "def at the top level of a module (a lambda or a function defined "
                         "inside another one cannot be unpickled elsewhere)") from None
    if plain:
        _SENT.add(fn)  # type: ignore[arg-type]
