"""Which elements a section names: ``arr[0:8, ::2]`` as numpy would index the grid of an
array's indices (Acun14, II-D: collections of chares are addressed by index; Charm++'s
array sections are the subsets a program names by such ranges).

:func:`select` turns a key of slices, integers and at most one ``...`` into the sorted list
of the element indices it selects. On a dense array or a group it follows numpy's basic
indexing exactly (negative integers and slice bounds count from the end, missing trailing
axes are whole); an array filled by insertion has no extents, so there every slice needs an
explicit non-negative start and stop and every axis is named.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

from shoal.errors import UsageError


def is_section_key(key: Any) -> bool:
    """Does ``key`` (what ``arr[key]`` was given) name a section rather than one element?"""
    parts = key if type(key) is tuple else (key,)
    return any(type(k) is slice or k is Ellipsis for k in parts)


def select(key: Any, ndims: int, dims: tuple[int, ...] | None) -> list[tuple[int, ...]]:
    """The indices ``key`` selects, sorted (row-major order), each once; an error if none."""
    parts = _expand(key if type(key) is tuple else (key,), ndims, dims)
    axes = [_axis(k, axis, None if dims is None else dims[axis])
            for axis, k in enumerate(parts)]
    chosen = sorted(set(itertools.product(*axes)))
    if not chosen:
        raise UsageError(f"the section {_show(key)} selects no element"
                         + ("" if dims is None else f" of the shape {dims}"))
    return chosen


def _expand(parts: tuple, ndims: int, dims: tuple[int, ...] | None) -> list[Any]:
    """One entry per axis: ``...`` and the missing trailing axes become whole slices."""
    ellipses = sum(1 for k in parts if k is Ellipsis)
    if ellipses > 1:
        raise UsageError("a section key may hold at most one '...'")
    named = len(parts) - ellipses
    if named > ndims:
        raise UsageError(f"the section key {_show(parts)} has {named} indices for a "
                         f"{ndims}-dimensional collection")
    if dims is None and (ellipses or named < ndims):
        raise UsageError(f"an array filled by insertion has no shape: name all {ndims} "
                         "axes of a section, each with an explicit start and stop "
                         "(arr[0:8, 2:4])")
    out: list[Any] = []
    for k in parts:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndims - named))
        else:
            out.append(k)
    out.extend([slice(None)] * (ndims - len(out)))
    return out


def _axis(k: Any, axis: int, extent: int | None) -> range:
    """The coordinates one entry of the key selects along an axis of ``extent``."""
    if type(k) is slice:
        if extent is not None:
            return range(*k.indices(extent))
        start, stop = _whole(k.start, axis, "start"), _whole(k.stop, axis, "stop")
        step = 1 if k.step is None else _integer(k.step, axis)
        if step <= 0:
            raise UsageError(f"axis {axis}: a section of an array filled by insertion needs "
                             f"a positive step, not {step}")
        return range(start, stop, step)
    i = _integer(k, axis)
    if extent is None:
        if i < 0:
            raise UsageError(f"axis {axis}: an array filled by insertion has no end to count "
                             f"{i} from; give a non-negative index")
        return range(i, i + 1)
    if not -extent <= i < extent:
        raise UsageError(f"axis {axis}: index {i} lies outside the extent {extent}")
    return range(i % extent, i % extent + 1)


def _whole(bound: Any, axis: int, what: str) -> int:
    if bound is None:
        raise UsageError(f"axis {axis}: an array filled by insertion has no shape, so a "
                         f"section's slice needs an explicit {what}")
    value = _integer(bound, axis)
    if value < 0:
        raise UsageError(f"axis {axis}: an array filled by insertion has no end to count a "
                         f"negative {what} ({value}) from")
    return value


def _integer(k: Any, axis: int) -> int:
    if isinstance(k, bool):
        raise UsageError(f"axis {axis}: {k!r} is not an index (give an int or a slice)")
    try:
        return operator.index(k)
    except TypeError:
        raise UsageError(f"axis {axis}: {k!r} is not an index (give an int or a slice)"
                         ) from None


def _show(key: Any) -> str:
    parts = key if type(key) is tuple else (key,)
    return "[" + ", ".join("..." if k is Ellipsis else _slice(k) if type(k) is slice
                           else repr(k) for k in parts) + "]"


def _slice(k: slice) -> str:
    text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
    return text[:-1] if k.step is None else text
