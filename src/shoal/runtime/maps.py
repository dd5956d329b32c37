"""Home PEs of array elements (Acun14, II-D: scalable location management).

Every element has a home PE given by its array's map; the home always knows where the
element is. The initial placement of a dense array is the home. Built-in maps: ``"block"``
(contiguous runs of the row-major order) and ``"round_robin"``; a user map is a picklable
function ``f(index, dims, npes) -> pe``, which places every element: those of a dense array,
those inserted outside its shape, and those of an array filled by insertion (it gets
``dims=None`` then). Without a user map, elements of an array filled by insertion and indices
outside ``dims`` are homed by a hash of the index. Without any map, a dense array is
``"block"``, or :class:`WeightedBlock` where the gossip daemon reports PEs that get less
than a core (:mod:`shoal.placement`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from shoal.errors import UsageError
from shoal.runtime.sendable import sendable

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    # an array's map: a built-in one by name, or a function ``f(index, dims, npes) -> pe``
    ArrayMap: TypeAlias = (
        str | "WeightedBlock"
        | Callable[[tuple[int, ...], tuple[int, ...] | None, int], int | np.integer[Any]])

MAPS = ("block", "round_robin")


def check_map(m: object, dims: tuple[int, ...] | None) -> None:
    """A user's map for an array of shape ``dims`` (None: filled by insertion)."""
    if callable(m):
        sendable(m, "the array map")
        return
    if m not in MAPS:
        raise UsageError(f"map must be one of {', '.join(MAPS)} or a function "
                         f"f(index, dims, npes) -> pe, not {m!r}")
    if dims is None:
        raise UsageError(f"map={m!r} needs the array's shape, and an array filled by "
                         "insertion has none: give a function f(index, dims, npes) -> pe "
                         "(dims is None) or leave map out (elements are placed by a hash of "
                         "their index)")


def _hashed(index: tuple[int, ...], npes: int) -> int:
    h = 0
    for i in index:
        h = (h * 1_000_003 + i) & 0xFFFFFFFF
    return (h ^ (h >> 16)) % npes


class WeightedBlock:
    """``"block"`` with runs in proportion to ``shares`` (PE ``p``'s share of a core), the
    default map where some PEs get less than a core: elements ``[bounds[p], bounds[p+1])``
    of the row-major order start on PE ``p``. On another number of PEs than ``shares`` has
    (a restart at another size) it is ``"block"``."""

    def __init__(self, shares: list[float]):
        self.shares = tuple(float(x) for x in shares)
        self._bounds: dict[int, np.ndarray] = {}

    def bounds(self, total: int) -> np.ndarray:
        got = self._bounds.get(total)
        if got is None:
            cum = np.cumsum(self.shares)
            got = np.concatenate(([0], np.rint(cum / cum[-1] * total))).astype(np.int64)
            self._bounds[total] = got
        return got

    def pe_of(self, lin: int, total: int) -> int:
        return int(np.searchsorted(self.bounds(total), lin, side="right")) - 1

    def __getstate__(self) -> dict:
        return {"shares": self.shares}

    def __setstate__(self, state: dict) -> None:
        self.shares, self._bounds = tuple(state["shares"]), {}

    def __repr__(self) -> str:
        return f"WeightedBlock({list(self.shares)})"


def default_map(dims: tuple[int, ...] | None, shares: list[float]) -> str | WeightedBlock:
    """The map of an array created without one."""
    if dims is None:
        return "hash"
    return "block" if min(shares) == max(shares) else WeightedBlock(shares)


def home(m: ArrayMap, index: tuple[int, ...], dims: tuple[int, ...] | None,
         npes: int) -> int:
    """The home PE of ``index`` (plain Python: it runs on the send path)."""
    if isinstance(m, WeightedBlock) and len(m.shares) != npes:
        m = "block"
    if callable(m):
        pe = m(index, dims, npes)
        if not (isinstance(pe, (int, np.integer)) and 0 <= pe < npes):
            raise UsageError(f"the array map returned {pe!r} for {index}: it must return a PE "
                             f"in [0, {npes}) for every element, inserted ones too (dims is "
                             "None for an array filled by insertion)")
        return int(pe)
    if dims is None or len(index) != len(dims):
        return _hashed(index, npes)
    lin = 0
    for i, d in zip(index, dims, strict=True):
        if not 0 <= i < d:
            return _hashed(index, npes)
        lin = lin * d + i
    if m == "round_robin":
        return lin % npes
    if isinstance(m, WeightedBlock):
        return m.pe_of(lin, math.prod(dims))
    return lin * npes // math.prod(dims)


def local_indices(m: ArrayMap, dims: tuple[int, ...], npes: int,
                  pe: int) -> list[tuple[int, ...]]:
    """The indices of a dense array whose home is ``pe`` (vectorised for built-in maps)."""
    total = math.prod(dims)
    if isinstance(m, WeightedBlock) and len(m.shares) != npes:
        m = "block"
    if isinstance(m, WeightedBlock):
        lin = np.arange(*m.bounds(total)[pe:pe + 2])
    elif callable(m):
        return [ix for ix in np.ndindex(*dims) if home(m, ix, dims, npes) == pe]
    elif m == "round_robin":
        lin = np.arange(pe, total, npes)
    else:
        lo = -(-pe * total // npes)
        hi = -(-(pe + 1) * total // npes)
        lin = np.arange(lo, hi)
    coords = np.unravel_index(lin, dims)
    return [tuple(int(c[k]) for c in coords) for k in range(len(lin))]


class Singles:
    """The map of the array that holds a class's single chares (``shoal.create``): element
    ``(pe, creator, n)`` lives on ``pe`` (modulo the PEs of a restart on fewer)."""

    def __call__(self, index: tuple[int, ...], dims: tuple[int, ...] | None,
                 npes: int) -> int:
        return index[0] % npes
