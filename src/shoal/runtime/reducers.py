"""Reducers: how contributions to a reduction combine (seed 002, Section III: collectives).

A reducer combines two partial results; it must be associative and commutative, because
contributions are combined per PE first and then along a tree over PEs in whatever order they
arrive. The built-in reducers work on numbers and on numpy arrays (element-wise). ``gather``
keeps every contribution and delivers them as a list ordered by element index. A user reducer
is any picklable two-argument function (define it at module level).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np


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
    gather: ClassVar[Reducer]

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

    # what ``contribute`` and ``allreduce`` take: a Reducer or a two-argument function
    ReducerLike: TypeAlias = Reducer | Callable[[Any, Any], Any]


def _named(name: str) -> Reducer:
    return Reducer._named[name]


def _elementwise(scalar: Callable[[Any, Any], Any],
                 array: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def combine(a: Any, b: Any) -> Any:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return array(a, b)
        return scalar(a, b)

    return combine


def _gather(a: list[Any], b: list[Any]) -> list[Any]:
    return a + b  # lists of (index, value), sorted once at the root


Reducer.sum = Reducer("sum", operator.add)
Reducer.product = Reducer("product", operator.mul)
Reducer.max = Reducer("max", _elementwise(max, np.maximum))
Reducer.min = Reducer("min", _elementwise(min, np.minimum))
Reducer.logical_and = Reducer("logical_and",
                              _elementwise(lambda a, b: bool(a and b), np.logical_and))
Reducer.logical_or = Reducer("logical_or", _elementwise(lambda a, b: bool(a or b), np.logical_or))
Reducer.gather = Reducer("gather", _gather)


def combiner(reducer: ReducerLike) -> Callable[[Any, Any], Any]:
    """The two-argument combining function of a Reducer or of a user function."""
    if isinstance(reducer, Reducer):
        return reducer.combine
    if callable(reducer):
        return reducer
    from shoal.errors import UsageError

    raise UsageError(f"reducer must be a shoal.Reducer or a two-argument function, "
                     f"not {reducer!r}")
