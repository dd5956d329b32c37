"""Reducers: how contributions to a reduction combine (Acun14, Section III: collectives).

A reducer combines two partial results; it must be associative and commutative, because
contributions are combined per PE first and then along a tree over PEs in whatever order they
arrive. The built-in reducers (``sum``, ``product``, ``max``, ``min``, ``logical_and``,
``logical_or``, ``logical_xor``) work on numbers and element-wise on numpy arrays and on
Python lists, tuples and ``array.array`` (nested ones too: ``[3, (1.0, 2.0)]``); sequences of
different lengths are an error, never a silent concatenation. ``gather`` keeps every
contribution and delivers them as a list ordered by element index. ``nop`` carries nothing:
a barrier, whose target gets None (``contribute(None, None, target)`` is the same). A user
reducer is any two-argument function other PEs can unpickle: defined with ``def`` at the top
level of a module; a lambda or a function defined inside another is refused at
``contribute``.
"""

from __future__ import annotations

import array
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.sendable import sendable


class Reducer:
    """A named combining function; pickles by name so that it costs nothing on the wire."""

    __slots__ = ("combine", "name")
    _named: ClassVar[dict[str, Reducer]] = {}
    # the built-in reducers, set below
    sum: ClassVar[Reducer]
    product: ClassVar[Reducer]
    max: ClassVar[Reducer]
    min: ClassVar[Reducer]
    logical_and: ClassVar[Reducer]
    logical_or: ClassVar[Reducer]
    logical_xor: ClassVar[Reducer]
    gather: ClassVar[Reducer]
    nop: ClassVar[Reducer]

    def __init__(self, name: str, combine: Callable[[Any, Any], Any]):
        self.name = name
        self.combine = combine
        Reducer._named[name] = self

    def __reduce__(self) -> tuple[Callable[[str], Reducer], tuple[str]]:
        return (_named, (self.name,))

    def __repr__(self) -> str:
        return f"Reducer.{self.name}"


if TYPE_CHECKING:
    from typing import TypeAlias

    # what ``contribute`` and ``allreduce`` take: a Reducer, a two-argument function, or
    # None (a barrier, as Reducer.nop)
    ReducerLike: TypeAlias = Reducer | Callable[[Any, Any], Any] | None


def _named(name: str) -> Reducer:
    return Reducer._named[name]


_SEQUENCES = (list, tuple, array.array)


def _elementwise(name: str, scalar: Callable[[Any, Any], Any],
                 arrays: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The combining function of a built-in reducer: ``arrays`` for numpy arrays, the same
    function element by element for Python sequences, ``scalar`` for anything else."""

    def combine(a: Any, b: Any) -> Any:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return arrays(a, b)
        if isinstance(a, _SEQUENCES) or isinstance(b, _SEQUENCES):
            return _pairwise(name, combine, a, b)
        return scalar(a, b)

    return combine


def _pairwise(name: str, combine: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``a`` and ``b`` combined element by element, as a sequence of ``a``'s type."""
    if not (isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES)):
        raise UsageError(f"Reducer.{name} combines a sequence with a "
                         f"{type(b if isinstance(a, _SEQUENCES) else a).__name__}: every "
                         "element must contribute the same kind of value (to collect "
                         "values of any kind, use Reducer.gather)")
    if len(a) != len(b):
        raise UsageError(f"Reducer.{name} combines sequences element-wise, and two "
                         f"contributions have lengths {len(a)} and {len(b)}: contribute "
                         "sequences of one length (to collect them, use Reducer.gather)")
    values = [combine(x, y) for x, y in zip(a, b, strict=True)]
    if isinstance(a, array.array):
        try:
            return array.array(a.typecode, values)
        except (OverflowError, TypeError) as exc:
            raise UsageError(f"Reducer.{name} of array.array('{a.typecode}', ...): the "
                             f"result does not fit the type code ({exc}); use a wider one"
                             ) from None
    if isinstance(a, tuple) and hasattr(a, "_fields"):  # a named tuple
        return type(a)(*values)
    return type(a)(values)


def _gather(a: list[Any], b: list[Any]) -> list[Any]:
    return a + b  # lists of (index, value), sorted once at the root


def _nop(a: None, b: None) -> None:
    return None


Reducer.sum = Reducer("sum", _elementwise("sum", operator.add, np.add))
Reducer.product = Reducer("product", _elementwise("product", operator.mul, np.multiply))
Reducer.max = Reducer("max", _elementwise("max", max, np.maximum))
Reducer.min = Reducer("min", _elementwise("min", min, np.minimum))
Reducer.logical_and = Reducer("logical_and", _elementwise(
    "logical_and", lambda a, b: bool(a) and bool(b), np.logical_and))
Reducer.logical_or = Reducer("logical_or", _elementwise(
    "logical_or", lambda a, b: bool(a) or bool(b), np.logical_or))
Reducer.logical_xor = Reducer("logical_xor", _elementwise(
    "logical_xor", lambda a, b: bool(a) != bool(b), np.logical_xor))
Reducer.gather = Reducer("gather", _gather)
Reducer.nop = Reducer("nop", _nop)


def combiner(reducer: Reducer | Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The two-argument combining function of a Reducer or of a user function."""
    if isinstance(reducer, Reducer):
        return reducer.combine
    return reducer


def checked(reducer: ReducerLike, value: Any) -> Reducer | Callable[[Any, Any], Any]:
    """The reducer of a contribution of ``value``, checked where it is made: None means
    :attr:`Reducer.nop` (a barrier, whose value must be None); a user function must be one
    that other PEs can unpickle, on any number of PEs (a program that runs on one PE then
    runs on many)."""
    if reducer is None or reducer is Reducer.nop:
        if value is not None:
            raise UsageError(f"a barrier (reducer None or Reducer.nop) carries no value, "
                             f"not {value!r}: contribute None, or name a reducer")
        return Reducer.nop
    if isinstance(reducer, Reducer):
        return reducer
    if not callable(reducer):
        raise UsageError(f"reducer must be a shoal.Reducer, a two-argument function or "
                         f"None (a barrier), not {reducer!r}")
    sendable(reducer, "the reducer")
    return reducer
