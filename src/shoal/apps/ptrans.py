"""PTRANS as in HPCC (Levy14, Section 4.2): A <- A^T + B for N x N matrices distributed
block-cyclically (blocks of NB x NB) over a P x Q process grid; ranks exchange the blocks
they hold with the owners of the transposed blocks by ``MPI_Sendrecv`` in pairs.

Block (i, j) lives on grid process (i mod P, j mod Q), rank ``(i mod P) * Q + j mod Q``.
Each rank sends the transposes of its blocks of A to the owners of their new places; the
exchange goes in rounds of shifts (rank r sends to r + s, receives from r - s), skipping the
pairs with nothing to say, so that every Sendrecv has a matching one.
"""

from __future__ import annotations

import time

import numpy as np

from shoal.errors import UsageError


def owner(i, j, p: int, q: int):
    return (i % p) * q + (j % q)


def local_blocks(n: int, nb: int, p: int, q: int, rank: int) -> list[tuple[int, int]]:
    """The (block row, block column) indices a rank holds, in a fixed order."""
    nblk = n // nb
    r, c = divmod(rank, q)
    return [(i, j) for i in range(r, nblk, p) for j in range(c, nblk, q)]


def transpose_add(comm, a: dict, b: dict, n: int, nb: int, p: int, q: int) -> tuple[dict,
                                                                                      float]:
    """A^T + B for this rank's blocks (dicts (i, j) -> NB x NB arrays); returns the new
    blocks and the seconds spent in MPI."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    if size != p * q:
        raise UsageError(f"PTRANS needs P x Q = {p * q} ranks (have {size})")
    if n % nb:
        raise UsageError(f"N = {n} must be a multiple of NB = {nb}")
    # what goes where: my block (i, j) becomes block (j, i) of the result
    outgoing: dict[int, list] = {}
    for (i, j), blk in a.items():
        outgoing.setdefault(owner(j, i, p, q), []).append(((j, i), blk.T))
    expect = {}
    for (i, j) in b:
        expect.setdefault(owner(j, i, p, q), []).append((i, j))
    result = {}
    mpi = 0.0
    for shift in range(size):
        dest, src = (rank + shift) % size, (rank - shift) % size
        send = outgoing.get(dest, [])
        want = expect.get(src, [])
        if not send and not want:
            continue
        sendbuf = (np.concatenate([blk.reshape(-1) for _, blk in send]) if send
                   else np.empty(0))
        recvbuf = np.empty(len(want) * nb * nb)
        t0 = time.perf_counter()
        comm.Sendrecv(sendbuf, dest if send else MPI.PROC_NULL, 11,
                      recvbuf, src if want else MPI.PROC_NULL, 11)
        mpi += time.perf_counter() - t0
        # the sender packs its blocks in the order of its own list; rebuild that order here
        order = sorted(want, key=lambda ij: (ij[1], ij[0]))
        for k, (i, j) in enumerate(order):
            result[(i, j)] = recvbuf[k * nb * nb:(k + 1) * nb * nb].reshape(nb, nb) + b[(i, j)]
    return result, mpi


def benchmark(comm, n: int, nb: int, p: int, q: int, repeat: int = 3, seed: int = 0) -> dict:
    """Time PTRANS on random matrices (best of ``repeat``): seconds, GB/s (8 N^2 bytes moved
    per transpose, as HPCC counts), and the MPI share."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    rng = np.random.default_rng(seed + rank)
    mine = local_blocks(n, nb, p, q, rank)
    a = {ij: rng.standard_normal((nb, nb)) for ij in mine}
    b = {ij: rng.standard_normal((nb, nb)) for ij in mine}
    best = None
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        _, mpi = transpose_add(comm, a, b, n, nb, p, q)
        wall = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        mpi = comm.allreduce(mpi, op=MPI.MAX)
        if best is None or wall < best[0]:
            best = (wall, mpi)
    wall, mpi = best
    return {"seconds": wall, "gbps": 8 * n * n / wall / 1e9, "mpi_fraction": mpi / wall}
