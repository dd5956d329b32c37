"""Process mappings onto a torus (seed 004, Section 2.2).

A mapping string orders T (the cores of a node) and the torus dimensions; the first letter
varies fastest: with TXYZ, ranks fill the cores of a node, then nodes along X, Y and Z
(footnote 2 of the paper). Dimension letters are X, Y, Z for up to three dimensions and A, B,
C, D, E ... beyond (BG/Q's 5D torus is ABCDE).
"""

from __future__ import annotations

import itertools

import numpy as np

from shoal.errors import UsageError
from shoal.topology.torus import Torus


def letters(torus: Torus) -> str:
    return "XYZ"[:torus.ndims] if torus.ndims <= 3 else "ABCDEFGH"[:torus.ndims]


def orderings(torus: Torus) -> list[str]:
    """Every mapping string of the torus (4! = 24 for a 3D torus with cores)."""
    return ["".join(p) for p in itertools.permutations("T" + letters(torus))]


def ordering(torus: Torus, mapping: str) -> tuple[np.ndarray, np.ndarray]:
    """(node, core) of every rank under a mapping string such as TXYZ."""
    mapping = mapping.upper()
    names = "T" + letters(torus)
    if sorted(mapping) != sorted(names):
        bad = sorted(set(mapping) - set(names)) or [c for c in mapping if mapping.count(c) > 1]
        raise UsageError(f"mapping {mapping!r} must use each of {names} once "
                         f"(problem: {', '.join(dict.fromkeys(bad)) or 'missing letters'})")
    size = {"T": torus.cores, **{c: torus.dims[i] for i, c in enumerate(letters(torus))}}
    ranks = np.arange(torus.processes)
    digit = {}
    rest = ranks
    for c in mapping:  # first letter fastest
        digit[c] = rest % size[c]
        rest = rest // size[c]
    coords = np.stack([digit[c] for c in letters(torus)], axis=1)
    return torus.node(coords), digit["T"]


def check_fits(torus: Torus, nprocs: int) -> None:
    if nprocs != torus.processes:
        raise UsageError(f"the pattern has {nprocs} processes but the machine has "
                         f"{torus.nodes} nodes x {torus.cores} cores = {torus.processes}: "
                         f"choose a torus and --cores whose product matches")


def tile_shapes(grid: tuple, cores: int) -> list[tuple]:
    """Shapes of a block of ``cores`` processes of the logical grid that tile it exactly."""
    out = []
    for shape in itertools.product(*[range(1, g + 1) for g in grid]):
        if np.prod(shape) == cores and all(g % t == 0 for g, t in zip(grid, shape,
                                                                        strict=True)):
            out.append(shape)
    return out


def tiled(torus: Torus, grid: tuple, order: str, tile: tuple,
          node_order: str) -> tuple[np.ndarray, np.ndarray]:
    """(node, core) per rank when each node holds a ``tile`` block of the logical grid
    (compact, as Rubik places application tiles on machine boxes) and the grid of tiles is
    laid on the nodes in ``node_order`` (e.g. ZXY, first letter fastest)."""
    grid, tile = tuple(grid), tuple(tile)
    if len(tile) != len(grid) or any(g % t for g, t in zip(grid, tile, strict=True)):
        raise UsageError(f"tile {tile} does not divide the grid {grid}")
    if int(np.prod(tile)) != torus.cores:
        raise UsageError(f"a tile of {int(np.prod(tile))} processes does not fill a node of "
                         f"{torus.cores} cores")
    names = letters(torus)
    if sorted(node_order.upper()) != sorted(names):
        raise UsageError(f"node order {node_order!r} must use each of {names} once")
    nproc = int(np.prod(grid))
    check_fits(torus, nproc)
    coords = np.stack(np.unravel_index(np.arange(nproc), grid,
                                       order="C" if order == "row" else "F"))
    t = np.array(tile)[:, None]
    tgrid = tuple(g // x for g, x in zip(grid, tile, strict=True))
    tile_lin = np.ravel_multi_index(tuple(coords // t), tgrid)
    core = np.ravel_multi_index(tuple(coords % t), tile)
    size = {c: torus.dims[i] for i, c in enumerate(names)}
    digit = {}
    rest = tile_lin
    for c in node_order.upper():
        digit[c] = rest % size[c]
        rest = rest // size[c]
    return torus.node(np.stack([digit[c] for c in names], axis=1)), core


def tiled_candidates(torus: Torus, grid: tuple | None) -> list[str]:
    """Names ``tile2x2:ZXY`` of every tiled mapping of a grid pattern (empty otherwise)."""
    if grid is None or torus.cores == 1:
        return []
    return [f"tile{'x'.join(map(str, shape))}:{''.join(p)}"
            for shape in tile_shapes(grid, torus.cores)
            for p in itertools.permutations(letters(torus))]


def placement(torus: Torus, name: str, grid: tuple | None = None,
              order: str = "row") -> tuple[np.ndarray, np.ndarray]:
    """(node, core) of a named mapping: an ordering (TXYZ) or a tiled one (tile2x2:ZXY)."""
    if name.lower().startswith("tile"):
        if grid is None:
            raise UsageError(f"{name}: tiled mappings need a grid pattern")
        shape, _, node_order = name[4:].partition(":")
        try:
            tile = tuple(int(x) for x in shape.split("x"))
        except ValueError:
            raise UsageError(f"cannot read tiled mapping {name!r}: write tile2x2:XYZ") \
                from None
        return tiled(torus, grid, order, tile, node_order)
    return ordering(torus, name)
