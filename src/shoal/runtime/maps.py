"""Home PEs of array elements (seed 002, II-D: scalable location management).

Every element has a home PE given by its array's map; the home always knows where the
element is. The initial placement of a dense array is the home. Built-in maps: ``"block"``
(contiguous runs of the row-major order) and ``"round_robin"``; a user map is a picklable
function ``f(index, dims, npes) -> pe``. Elements of a sparse array (created empty, filled by
insertion) and indices outside ``dims`` are homed by a hash of the index.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from shoal.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    # an array's map: a built-in one by name, or a function ``f(index, dims, npes) -> pe``
    ArrayMap: TypeAlias = (
        str | Callable[[tuple[int, ...], tuple[int, ...], int], int | np.integer[Any]])

MAPS = ("block", "round_robin")


def check_map(m: object) -> None:
    if m not in MAPS and not callable(m):
        raise UsageError(f"map must be one of {', '.join(MAPS)} or a function "
                         f"f(index, dims, npes) -> pe, not {m!r}")


def _hashed(index: tuple[int, ...], npes: int) -> int:
    h = 0
    for i in index:
        h = (h * 1_000_003 + i) & 0xFFFFFFFF
    return (h ^ (h >> 16)) % npes


def home(m: ArrayMap, index: tuple[int, ...], dims: tuple[int, ...] | None,
         npes: int) -> int:
    """The home PE of ``index`` (plain Python: it runs on the send path)."""
    if dims is None or len(index) != len(dims):
        return _hashed(index, npes)
    lin = 0
    for i, d in zip(index, dims, strict=True):
        if not 0 <= i < d:
            return _hashed(index, npes)
        lin = lin * d + i
    if callable(m):
        pe = m(index, dims, npes)
        if not (isinstance(pe, (int, np.integer)) and 0 <= pe < npes):
            raise UsageError(f"the array map returned {pe!r} for {index}: it must return a PE "
                             f"in [0, {npes})")
        return int(pe)
    if m == "round_robin":
        return lin % npes
    return lin * npes // math.prod(dims)


def local_indices(m: ArrayMap, dims: tuple[int, ...], npes: int,
                  pe: int) -> list[tuple[int, ...]]:
    """The indices of a dense array whose home is ``pe`` (vectorised for built-in maps)."""
    total = math.prod(dims)
    if callable(m):
        return [ix for ix in np.ndindex(*dims) if home(m, ix, dims, npes) == pe]
    if m == "round_robin":
        lin = np.arange(pe, total, npes)
    else:
        lo = -(-pe * total // npes)
        hi = -(-(pe + 1) * total // npes)
        lin = np.arange(lo, hi)
    coords = np.unravel_index(lin, dims)
    return [tuple(int(c[k]) for c in coords) for k in range(len(lin))]


class OnPE:
    """The map of a single chare: everything on one PE."""

    def __init__(self, pe: int):
        self.pe = pe

    def __call__(self, index: tuple[int, ...], dims: tuple[int, ...], npes: int) -> int:
        return self.pe
