"""Process mappings onto a torus (Balaji11, Section 2.2).

A mapping string orders T (the cores of a node) and the torus dimensions; the first letter
varies fastest: with TXYZ, ranks fill the cores of a node, then nodes along X, Y and Z
(footnote 2 of the paper). Dimension letters are X, Y, Z for up to three dimensions and A, B,
C, D, E ... beyond (BG/Q's 5D torus is ABCDE).
"""

from __future__ import annotations

import itertools

import numpy as np

from shoal.errors import UsageError
from shoal.topology.routing import MAX_DIMS
from shoal.topology.torus import Torus


def letters(torus: Torus) -> str:
    """The dimension letters of mapping strings: XYZ up to 3 dimensions, ABCDEFG beyond."""
    if torus.ndims > MAX_DIMS:
        raise UsageError(f"mappings are evaluated on tori of at most {MAX_DIMS} dimensions "
                         f"(got {torus.ndims}): merge dimensions")
    return "XYZ"[:torus.ndims] if torus.ndims <= 3 else "ABCDEFG"[:torus.ndims]


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


def tile_shapes(grid: tuple, size: int) -> list[tuple]:
    """Shapes of a block of ``size`` processes of the logical grid that tile it exactly,
    most compact (smallest surface) first."""
    out = []
    for shape in itertools.product(*[range(1, g + 1) for g in grid]):
        if np.prod(shape) == size and all(g % t == 0 for g, t in zip(grid, shape,
                                                                       strict=True)):
            out.append(shape)
    return sorted(out, key=lambda t: (sum(size // x for x in t), t))


def box_shapes(torus: Torus, max_nodes: int = 8) -> list[tuple]:
    """Boxes of up to ``max_nodes`` nodes that tile the torus (the single node first)."""
    out = []
    for shape in itertools.product(*[[b for b in range(1, n + 1) if n % b == 0]
                                     for n in torus.dims]):
        if np.prod(shape) <= max_nodes:
            out.append(shape)
    return sorted(out, key=lambda b: (int(np.prod(b)), b))


def tiled(torus: Torus, grid: tuple, order: str, tile: tuple, node_order: str,
          box: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(node, core) per rank when every ``box`` of nodes (default: one node) holds a ``tile``
    block of the logical grid, as Rubik places application tiles on compact machine boxes.
    Inside a tile, processes fill the cores of a node, then the box's nodes along its
    dimensions (first fastest); the grid of tiles is laid on the grid of boxes in
    ``node_order`` (e.g. ZXY, first letter fastest)."""
    grid, tile = tuple(grid), tuple(tile)
    box = tuple(1 for _ in torus.dims) if box is None else tuple(box)
    if len(tile) != len(grid) or any(g % t for g, t in zip(grid, tile, strict=True)):
        raise UsageError(f"tile {tile} does not divide the grid {grid}")
    if len(box) != torus.ndims or any(n % b for n, b in zip(torus.dims, box, strict=True)):
        raise UsageError(f"box {box} does not divide the torus {torus.dims}")
    per_box = torus.cores * int(np.prod(box))
    if int(np.prod(tile)) != per_box:
        raise UsageError(f"a tile of {int(np.prod(tile))} processes does not fill a box of "
                         f"{int(np.prod(box))} nodes x {torus.cores} cores")
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
    inner = np.ravel_multi_index(tuple(coords % t), tile)
    core = inner % torus.cores
    offset = np.stack(np.unravel_index(inner // torus.cores, box, order="F"), axis=1)
    boxes = {c: torus.dims[i] // box[i] for i, c in enumerate(names)}
    digit = {}
    rest = tile_lin
    for c in node_order.upper():
        digit[c] = rest % boxes[c]
        rest = rest // boxes[c]
    corner = np.stack([digit[c] for c in names], axis=1) * np.array(box)
    return torus.node(corner + offset), core


def tiled_candidates(torus: Torus, grid: tuple | None) -> list[str]:
    """Names (``tile2x2:ZXY``, or ``tile4x4/2x2x1:ZXY`` for a tile on a box of nodes) of the
    tiled mappings of a grid pattern: for each box of up to 8 nodes, the two most compact
    tile shapes, in every node order (the identity order beyond 3 dimensions)."""
    if grid is None:
        return []
    orders = (["".join(p) for p in itertools.permutations(letters(torus))]
              if torus.ndims <= 3 else [letters(torus)])
    out = []
    for box in box_shapes(torus):
        size = torus.cores * int(np.prod(box))
        if size == 1:
            continue
        tag = "" if np.prod(box) == 1 else "/" + "x".join(map(str, box))
        for shape in tile_shapes(grid, size)[:2]:
            out += [f"tile{'x'.join(map(str, shape))}{tag}:{o}" for o in orders]
    return out


def placement(torus: Torus, name: str, grid: tuple | None = None,
              order: str = "row") -> tuple[np.ndarray, np.ndarray]:
    """(node, core) of a named mapping: an ordering (TXYZ) or a tiled one (tile2x2:ZXY,
    tile4x4/2x2x1:ZXY)."""
    if name.lower().startswith("tile"):
        if grid is None:
            raise UsageError(f"{name}: tiled mappings need a grid pattern")
        shape, _, node_order = name[4:].partition(":")
        shape, _, box_text = shape.partition("/")
        try:
            tile = tuple(int(x) for x in shape.split("x"))
            box = tuple(int(x) for x in box_text.split("x")) if box_text else None
        except ValueError:
            raise UsageError(f"cannot read tiled mapping {name!r}: write tile2x2:XYZ or "
                             f"tile4x4/2x2x1:XYZ") from None
        return tiled(torus, grid, order, tile, node_order, box)
    return ordering(torus, name)
