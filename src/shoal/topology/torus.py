"""Tori and meshes of any dimension with several cores per node (Balaji11, Section 2.2: the
BG/P partitions of Table 1 are 3D tori of quad-core nodes; BG/Q is a 5D torus).

Nodes are numbered with the first dimension fastest (node = x + X (y + Y z) ...). Directed
links are numbered ``(node * D + d) * 2 + s``: the link leaving ``node`` along dimension ``d``
in the negative (s = 0) or positive (s = 1) direction. On a mesh dimension the links that
would wrap do not exist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shoal.errors import UsageError

HALF_RING = ("split", "positive")  # a distance of exactly half a ring: both ways, or one


@dataclass(frozen=True)
class Torus:
    """``dims`` nodes per dimension, ``wrap`` per dimension (a torus or a mesh along it),
    ``cores`` processes per node (the paper's T dimension)."""

    dims: tuple[int, ...]
    cores: int = 1
    wrap: tuple[bool, ...] | None = None

    def __post_init__(self):
        if not self.dims or not all(isinstance(d, int) and d >= 1 for d in self.dims):
            raise UsageError(f"torus dimensions must be positive integers, not {self.dims!r}")
        if not (isinstance(self.cores, int) and self.cores >= 1):
            raise UsageError(f"cores per node must be a positive integer, not {self.cores!r}")
        if self.wrap is None:
            object.__setattr__(self, "wrap", tuple(True for _ in self.dims))
        if len(self.wrap) != len(self.dims):
            raise UsageError("give one wrap flag per dimension")

    @classmethod
    def parse(cls, text: str, cores: int = 1, mesh: bool = False) -> Torus:
        """``8x16x32`` -> a torus of those dimensions."""
        try:
            dims = tuple(int(x) for x in text.lower().split("x"))
        except ValueError:
            raise UsageError(f"cannot read torus {text!r}: write dimensions like 8x16x32") \
                from None
        return cls(dims, cores, tuple(not mesh for _ in dims))

    @property
    def ndims(self) -> int:
        return len(self.dims)

    @property
    def nodes(self) -> int:
        return math.prod(self.dims)

    @property
    def processes(self) -> int:
        return self.nodes * self.cores

    @property
    def nlinks(self) -> int:
        return self.nodes * self.ndims * 2

    def coords(self, node) -> np.ndarray:
        """Coordinates (…, D) of node ids."""
        return np.stack(np.unravel_index(np.asarray(node), self.dims, order="F"), axis=-1)

    def node(self, coords) -> np.ndarray:
        """Node ids of coordinates (…, D) (wrapped on torus dimensions)."""
        c = np.asarray(coords)
        c = np.where(np.array(self.wrap), c % np.array(self.dims), c)
        return np.ravel_multi_index(tuple(np.moveaxis(c, -1, 0)), self.dims, order="F")

    def link_exists(self) -> np.ndarray:
        """Boolean per directed link id."""
        ok = np.ones((self.nodes, self.ndims, 2), bool)
        co = self.coords(np.arange(self.nodes))
        for d, (size, wrap) in enumerate(zip(self.dims, self.wrap, strict=True)):
            if size == 1:
                ok[:, d, :] = False
            elif not wrap:
                ok[co[:, d] == 0, d, 0] = False
                ok[co[:, d] == size - 1, d, 1] = False
        return ok.reshape(-1)

    def offsets(self, src, dst, half: str = "split"):
        """Per message and dimension: hops and direction (+1/-1) of a minimal route, and
        whether both directions are minimal (a distance of half a torus ring)."""
        if half not in HALF_RING:
            raise UsageError(f"half-ring policy must be one of {', '.join(HALF_RING)}")
        a, b = self.coords(src), self.coords(dst)
        dims = np.array(self.dims)
        delta = b - a
        fwd = delta % dims
        wrap = np.array(self.wrap)
        hops = np.where(wrap, np.minimum(fwd, dims - fwd), np.abs(delta))
        sign = np.where(wrap, np.where(fwd <= dims - fwd, 1, -1), np.sign(delta))
        tie = wrap & (fwd * 2 == dims) & (fwd > 0)
        return hops, np.where(hops == 0, 1, sign), tie

    def distance(self, src, dst) -> np.ndarray:
        """Minimal hop count between nodes."""
        return self.offsets(src, dst)[0].sum(axis=-1)

    def directed_links(self) -> int:
        """How many directed links exist (the count of :meth:`link_exists`, without
        allocating it): 2 per node along a ring, 2 (L - 1) per line of L nodes of a mesh."""
        total = 0
        for size, wrap in zip(self.dims, self.wrap, strict=True):
            if size > 1:
                total += 2 * self.nodes if wrap else 2 * (self.nodes // size) * (size - 1)
        return total

    def diameter(self) -> int:
        """The longest minimal route, in hops (dimensions add up): L // 2 along a ring of L
        nodes, L - 1 along a line."""
        return sum(n // 2 if w else n - 1 for n, w in zip(self.dims, self.wrap, strict=True))

    def mean_distance(self) -> float:
        """Hops between two nodes, averaged over all ordered pairs (a node with itself
        included): the per-dimension means add up; a ring of L nodes averages
        floor(L^2 / 4) / L hops, a line (L^2 - 1) / (3 L)."""
        return float(sum((n * n // 4) / n if w else (n * n - 1) / (3 * n)
                         for n, w in zip(self.dims, self.wrap, strict=True)))

    def bisection_links(self) -> int:
        """Directed links crossing the cut that halves the longest dimension."""
        d = max(range(self.ndims), key=lambda i: self.dims[i])
        if self.dims[d] < 2:
            return 0
        cuts = 2 if self.wrap[d] and self.dims[d] > 2 else 1
        return self.nodes // self.dims[d] * cuts * 2


# the partitions of the Argonne BG/P system (Balaji11, Table 1)
BGP_PARTITIONS = {512: (8, 8, 8), 1024: (8, 8, 16), 2048: (8, 8, 32), 4096: (8, 16, 32),
                  8192: (8, 32, 32), 16384: (16, 32, 32), 32768: (32, 32, 32)}
