"""Communication patterns described declaratively (Balaji11: the application describes its
pattern, the runtime maps it; Section 2.1 lists the patterns of real codes).

A description is a string (or the same keys in a TOML/JSON file):

- ``grid 128x128 stencil=star periodic=no bytes=1MiB``: nearest neighbours on a 1-3D logical
  grid; ``star`` takes all 3^d - 1 surrounding processes (the paper's 8 in 2D, 26 in 3D),
  ``edges`` the 2d along the axes;
- ``dimwise 64x64 bytes=64KiB``: every process with all others of its row, column (and
  plane line in 3D), as FFT transposes do;
- ``diagonal 64x64 bytes=1KiB``: every process with the others on its two diagonals (ray
  tracing with domain decomposition);
- ``alltoall 512 bytes=1KiB``;
- ``graph edges.txt``: an edge list, one ``src dst [bytes]`` per line (``#`` comments).

Grid processes are numbered row-major (the last index varies fastest) or with
``order=column``. A pattern is the arrays (src, dst, bytes) over ``nprocs`` ranks.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shoal import tomlfile
from shoal.errors import UsageError
from shoal.files import read_text
from shoal.units import parse_size

KINDS = ("grid", "dimwise", "diagonal", "alltoall", "graph")
BYTES_PER_MESSAGE = 256
"""Memory a message of a pattern costs while the pattern is built and its mappings judged
(its ranks, coordinates, route offsets and groupings): the estimate that refuses a pattern
too large for this machine up front."""


@dataclass
class Pattern:
    """Messages among ``nprocs`` ranks: ``src[i]`` sends ``nbytes[i]`` to ``dst[i]``."""

    nprocs: int
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    description: str
    grid: tuple | None = None  # the logical grid of grid, dimwise and diagonal patterns
    order: str = "row"  # how its processes are numbered


def parse(text: str) -> Pattern:
    """A pattern from a description string, or ``@file.toml`` / ``@file.json``."""
    text = text.strip()
    if text.startswith("@"):
        return _from_file(Path(text[1:]))
    words = text.split()
    if not words or words[0] not in KINDS:
        raise UsageError(f"a pattern starts with one of {', '.join(KINDS)} (got {text!r})")
    opts = {}
    for w in words[2:]:
        if "=" not in w:
            raise UsageError(f"pattern option {w!r}: write key=value")
        k, v = w.split("=", 1)
        if k in opts:
            raise UsageError(f"pattern option {k}= is given twice ({k}={opts[k]} and {w}): "
                             f"keep one")
        opts[k] = v
    if len(words) < 2:
        raise UsageError(f"{words[0]} needs a size, e.g. '{words[0]} 128x128'")
    return build(words[0], words[1], opts, text)


def _from_file(path: Path) -> Pattern:
    if path.suffix != ".json":
        data = tomlfile.read(path, "pattern file")
    else:
        try:
            data = json.loads(read_text(path, "pattern file"))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a pattern file holds keys such as kind and size")
    kind = data.pop("kind", None)
    size = data.pop("size", None)
    if kind is None or size is None:
        raise UsageError(f"{path}: a pattern file needs 'kind' and 'size'")
    return build(kind, str(size), {k: str(v) for k, v in data.items()}, f"@{path}")


def _dims(size: str, kind: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in size.lower().split("x"))
    except ValueError:
        raise UsageError(f"{kind} size {size!r}: write it like 128x128") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise UsageError(f"{kind} size {size!r}: 1 to 3 positive dimensions")
    return dims


def build(kind: str, size: str, opts: dict, description: str) -> Pattern:
    nbytes = float(parse_size(opts.pop("bytes", "1"), "bytes="))
    order = opts.pop("order", "row")
    if order not in ("row", "column"):
        raise UsageError("order= is row or column")
    if kind == "graph":
        if opts:
            raise UsageError(f"unknown option(s) for graph: {', '.join(opts)}")
        return _graph(Path(size), nbytes)
    if kind == "alltoall":
        return _alltoall(size, nbytes, description, opts)
    dims = _dims(size, kind)
    periodic = False
    if kind == "grid":
        offs, periodic = _grid_offsets(dims, opts)
    elif kind == "dimwise":
        offs = _dimwise_offsets(dims)
    else:
        offs = _diagonal_offsets(dims)
    _require(math.prod(dims) * len(offs), description)
    coords = np.array(list(itertools.product(*[range(d) for d in dims])))  # row-major
    return _offsets(dims, coords, np.array(offs), periodic, order, nbytes, description, opts)


def _alltoall(size: str, nbytes: float, description: str, opts: dict) -> Pattern:
    try:
        n = int(size)
    except ValueError:
        raise UsageError(f"alltoall size {size!r}: give the number of processes") from None
    if n < 1:
        raise UsageError(f"alltoall size {size!r}: at least 1 process")
    _require(n * (n - 1), description)
    src, dst = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = src != dst
    return _pattern(n, src[keep], dst[keep], nbytes, description, opts)


def _require(messages: int, description: str) -> None:
    """Refuse a pattern of ``messages`` messages that cannot fit in memory."""
    from shoal.memory import require

    require(messages * BYTES_PER_MESSAGE, f"the pattern {description!r} ({messages:,} "
            f"messages)", "describe a smaller pattern")


def _grid_offsets(dims: tuple[int, ...], opts: dict) -> tuple[list[tuple], bool]:
    """The neighbour offsets of a grid pattern (its ``stencil=`` and ``periodic=`` options
    taken out of ``opts``) and whether the grid wraps around."""
    stencil = opts.pop("stencil", "star")
    periodic = opts.pop("periodic", "no")
    if stencil not in ("star", "edges") or periodic not in ("yes", "no"):
        raise UsageError("grid takes stencil=star|edges and periodic=yes|no")
    if stencil == "star":
        offs = [o for o in itertools.product((-1, 0, 1), repeat=len(dims)) if any(o)]
    else:
        offs = [tuple(s if e == d else 0 for e in range(len(dims)))
                for d in range(len(dims)) for s in (-1, 1)]
    return offs, periodic == "yes"


def _dimwise_offsets(dims: tuple[int, ...]) -> list[tuple]:
    """Every other process along each axis (row, column and plane lines)."""
    return [tuple(k if e == d else 0 for e in range(len(dims)))
            for d in range(len(dims)) for k in range(-dims[d] + 1, dims[d]) if k]


def _diagonal_offsets(dims: tuple[int, ...]) -> list[tuple]:
    """Every other process on the two diagonals through a process of a 2-D grid."""
    if len(dims) != 2:
        raise UsageError("diagonal patterns are 2-D (e.g. diagonal 64x64)")
    m = max(dims)
    return [(k, s * k) for k in range(-m + 1, m) if k for s in (1, -1)]


def _rank(coords: np.ndarray, dims: tuple, order: str) -> np.ndarray:
    return np.ravel_multi_index(tuple(coords.T), dims, order="C" if order == "row" else "F")


def _offsets(dims, coords, offs, periodic, order, nbytes, description, opts) -> Pattern:
    if opts:
        raise UsageError(f"unknown pattern option(s): {', '.join(opts)}")
    d = np.array(dims)
    nb = coords[:, None, :] + offs[None, :, :]
    if periodic:
        nb %= d
        keep = np.ones(nb.shape[:2], bool)
    else:
        keep = np.all((nb >= 0) & (nb < d), axis=2)
    src = np.broadcast_to(np.arange(len(coords))[:, None], keep.shape)[keep]
    dst_coords = nb[keep]
    ranks = _rank(coords, dims, order)
    dst = _rank(dst_coords, dims, order)
    src = ranks[src]
    diff = src != dst
    return Pattern(math.prod(dims), src[diff], dst[diff], np.full(diff.sum(), nbytes),
                   description, tuple(dims), order)


def _pattern(n, src, dst, nbytes, description, opts) -> Pattern:
    if opts:
        raise UsageError(f"unknown pattern option(s): {', '.join(opts)}")
    return Pattern(n, np.asarray(src), np.asarray(dst), np.full(len(src), nbytes), description)


def _graph(path: Path, default: float) -> Pattern:
    lines = read_text(path, "edge list").splitlines()
    src, dst, vol = [], [], []
    for no, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            s, d = int(parts[0]), int(parts[1])
            v = float(parse_size(parts[2], "bytes")) if len(parts) == 3 else default
        except (ValueError, UsageError):
            raise UsageError(f"{path}:{no}: expected 'src dst [bytes]' with non-negative "
                             f"integer ranks, got {line!r}") from None
        if s < 0 or d < 0:
            raise UsageError(f"{path}:{no}: ranks must be non-negative")
        src.append(s)
        dst.append(d)
        vol.append(v)
    if not src:
        raise UsageError(f"{path}: no edges")
    n = max(max(src), max(dst)) + 1
    return Pattern(n, np.array(src), np.array(dst), np.array(vol), f"graph {path}")
