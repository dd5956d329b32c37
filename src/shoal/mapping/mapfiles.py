"""Writing a mapping for the machines users have, and reordering an mpi4py communicator.

- ``bgq``: a Blue Gene/Q ``runjob --mapping`` file: one line per rank, ``A B C D E T``;
- ``openmpi``: an Open MPI rankfile, ``rank R=HOST slot=CORE`` (hosts named node<id> unless a
  host list is given);
- ``slurm``: a host list for ``srun --distribution=arbitrary`` (one host per rank, in rank
  order, for ``SLURM_HOSTFILE``);
- ``csv``: rank, node, coordinates, core.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shoal.errors import UsageError
from shoal.files import read_text, write_text
from shoal.mapping.mappings import letters
from shoal.topology.torus import Torus

FORMATS = ("bgq", "openmpi", "slurm", "csv")


def write(path: str | Path, fmt: str, torus: Torus, node: np.ndarray, core: np.ndarray,
          hosts: list[str] | None = None) -> None:
    """Write rank -> (node, core) in format ``fmt``."""
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}")
    if hosts is not None and len(hosts) != torus.nodes:
        raise UsageError(f"the host list has {len(hosts)} names for {torus.nodes} nodes")
    name = (lambda n: hosts[n]) if hosts else (lambda n: f"node{n}")
    coords = torus.coords(node)
    lines = []
    if fmt == "bgq":
        lines = [" ".join(str(int(c)) for c in (*co, t)) for co, t in zip(coords, core,
                                                                           strict=True)]
    elif fmt == "openmpi":
        lines = [f"rank {r}={name(int(n))} slot={int(t)}" for r, (n, t) in
                 enumerate(zip(node, core, strict=True))]
    elif fmt == "slurm":
        lines = [name(int(n)) for n in node]
    else:
        cols = ",".join(letters(torus).lower())
        lines = [f"rank,node,{cols},core"]
        lines += [f"{r},{int(n)},{','.join(str(int(c)) for c in co)},{int(t)}"
                  for r, (n, co, t) in enumerate(zip(node, coords, core, strict=True))]
    write_text(path, "\n".join(lines) + "\n")


def read_csv(path: str | Path, torus: Torus) -> tuple[np.ndarray, np.ndarray]:
    """(node, core) per rank from a ``csv`` mapfile."""
    rows = read_text(path, "mapping").splitlines()[1:]
    try:
        data = np.array([[int(x) for x in r.split(",")] for r in rows if r.strip()])
    except ValueError:
        raise UsageError(f"{path}: a mapping CSV holds whole numbers only") from None
    if data.ndim != 2 or data.shape[1] != torus.ndims + 3:
        raise UsageError(f"{path}: not a mapping CSV for a {torus.ndims}-D torus")
    order = np.argsort(data[:, 0])
    return data[order, 1], data[order, -1]


def reorder(comm, node: np.ndarray, core: np.ndarray, torus: Torus):
    """An mpi4py communicator in which rank r sits where the mapping puts rank r: process p of
    ``comm`` is taken to be core ``p % cores`` of node ``p // cores`` (the launch order), and
    gets the rank the mapping assigns to that place."""
    if comm.Get_size() != len(node):
        raise UsageError(f"the mapping has {len(node)} ranks, the communicator "
                         f"{comm.Get_size()}")
    place = node * torus.cores + core
    new_rank = np.empty(len(node), int)
    new_rank[place] = np.arange(len(node))
    return comm.Split(0, int(new_rank[comm.Get_rank()]))
