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
