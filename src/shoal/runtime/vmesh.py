"""The virtual mesh of PEs that aggregation routes items over (Acun14, Section III-F: TRAM).

The P PEs are arranged as an N-D mesh of shape ``(s_1, ..., s_N)`` with ``s_1 ... s_N = P``
(PE ``p`` at the row-major coordinates of ``p``, the last coordinate fastest). A PE's peers
are the PEs that differ from it in exactly one coordinate: ``sum(s_d - 1)`` of them, one
buffer each, instead of P - 1. An item to a PE that is not a peer goes along a minimal path,
one coordinate fixed per hop in dimension order (first dimension first): as many hops as
coordinates differ, and every hop goes to a peer.
"""

from __future__ import annotations

import math

from shoal.errors import UsageError

MAX_DIMS = 3


def mesh_shape(npes: int, mesh: tuple[int, ...] | list[int] | None = None) -> tuple[int, ...]:
    """The mesh for ``npes`` PEs: ``mesh`` if given (1 to 3 positive ints whose product is
    ``npes``), else chosen from P: one dimension up to 32 PEs, two up to 1024, three beyond,
    each shape the most even factorisation of P into that many factors (a P with fewer
    factors, a prime for instance, gets fewer dimensions)."""
    if mesh is not None:
        shape = tuple(mesh) if isinstance(mesh, (tuple, list)) else (mesh,)
        if not (1 <= len(shape) <= MAX_DIMS and all(isinstance(s, int) and s > 0
                                                     for s in shape)):
            raise UsageError(f"mesh must be 1 to {MAX_DIMS} positive integers, not {mesh!r}")
        if math.prod(shape) != npes:
            raise UsageError(f"mesh {shape} has {math.prod(shape)} PEs but the job has "
                             f"{npes}: give sides whose product is {npes}")
        return shape
    ndims = 1 if npes <= 32 else 2 if npes <= 1024 else 3
    return _even_factors(npes, ndims)


def _even_factors(n: int, k: int) -> tuple[int, ...]:
    """``n`` as a product of at most ``k`` factors > 1 (``(n,)`` for n <= 1), the largest
    factor as small as possible, sorted from largest to smallest."""
    if k == 1 or n <= 1:
        return (n,)
    best: tuple[int, ...] = (n,)
    for f in range(2, math.isqrt(n) + 1):
        if n % f:
            continue
        rest = _even_factors(n // f, k - 1)
        cand = tuple(sorted((f, *rest), reverse=True))
        if cand[0] < best[0]:
            best = cand
    return best


def coords(pe: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The mesh coordinates of ``pe`` (row-major)."""
    out = []
    for s in reversed(shape):
        pe, c = divmod(pe, s)
        out.append(c)
    return tuple(reversed(out))


def pe_at(coord: tuple[int, ...], shape: tuple[int, ...]) -> int:
    """The PE at mesh coordinates ``coord``."""
    pe = 0
    for c, s in zip(coord, shape, strict=True):
        pe = pe * s + c
    return pe


def next_hops(pe: int, shape: tuple[int, ...]) -> list[int]:
    """For every destination PE, the peer an item from ``pe`` goes to first (``pe`` itself
    for an item to ``pe``): the first differing coordinate set to the destination's."""
    here = coords(pe, shape)
    hops = []
    for dest in range(math.prod(shape)):
        there = coords(dest, shape)
        for d, (a, b) in enumerate(zip(here, there, strict=True)):
            if a != b:
                hops.append(pe_at((*here[:d], b, *here[d + 1:]), shape))
                break
        else:
            hops.append(pe)
    return hops
