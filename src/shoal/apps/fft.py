"""A distributed 1-D complex FFT by the six-step method (the structure of FFTE in HPCC's
MPI-FFT, Levy14 Section 4.2): N = N1 N2 points, three all-to-all transposes.

With x viewed as the N1 x N2 matrix A[n1, n2] = x[N2 n1 + n2] (rank p holds rows
[p N1/P, (p+1) N1/P), i.e. a contiguous block of x):
1. transpose, so that rank p holds columns n2 of its block; FFT of length N1 along n1;
2. multiply by the twiddle factors exp(-2 pi i n2 k1 / N);
3. transpose, FFT of length N2 along n2, giving Y[k1, k2] = X[k1 + N1 k2];
4. transpose, so that rank p holds X[p N/P : (p+1) N/P] in natural order.
"""

from __future__ import annotations

import math
import time

import numpy as np

from shoal.errors import UsageError


def _split(n: int, nprocs: int) -> tuple[int, int]:
    """N1 x N2 = n with both divisible by nprocs, as square as possible."""
    best = None
    for n1 in range(nprocs, n + 1, nprocs):
        if n % n1 == 0 and (n // n1) % nprocs == 0:
            score = abs(math.log(n1) - math.log(n // n1))
            if best is None or score < best[0]:
                best = (score, n1)
    if best is None:
        raise UsageError(f"the FFT length {n} must factor as N1 x N2 with both divisible by "
                         f"the {nprocs} ranks")
    return best[1], n // best[1]


def _transpose(comm, block: np.ndarray, timer: list) -> np.ndarray:
    """All-to-all transpose: ``block`` is (rows_local, cols) with cols split among ranks;
    returns (cols_local, rows) holding the transposed columns of every rank."""
    p = comm.Get_size()
    rows, cols = block.shape
    send = np.ascontiguousarray(block.reshape(rows, p, cols // p).transpose(1, 0, 2))
    recv = np.empty_like(send)
    t0 = time.perf_counter()
    comm.Alltoall(send, recv)
    timer[0] += time.perf_counter() - t0
    # recv[q] is rank q's rows x my columns: stack rows of all ranks, then transpose
    return np.ascontiguousarray(recv.reshape(p * rows, cols // p).T)


def fft(comm, local: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """The FFT of the distributed vector whose block on this rank is ``local`` (length
    n / P); returns this rank's block of the result and the seconds spent in MPI."""
    p = comm.Get_size()
    n1, n2 = _split(n, p)
    if local.shape != (n // p,):
        raise UsageError(f"each rank holds n / P = {n // p} points (got {local.shape})")
    timer = [0.0]
    a = local.astype(np.complex128).reshape(n1 // p, n2)
    t = _transpose(comm, a, timer)  # (n2 / p, n1): rows n2, columns n1
    t = np.fft.fft(t, axis=1)  # along n1 -> k1
    n2_lo = comm.Get_rank() * (n2 // p)
    n2_idx = np.arange(n2_lo, n2_lo + n2 // p)[:, None]
    t *= np.exp(-2j * np.pi * n2_idx * np.arange(n1)[None, :] / n)
    g = _transpose(comm, t, timer)  # (n1 / p, n2): rows k1, columns n2
    y = np.fft.fft(g, axis=1)  # along n2 -> k2: Y[k1, k2]
    z = _transpose(comm, y, timer)  # (n2 / p, n1): rows k2, columns k1
    return z.reshape(-1), timer[0]


def benchmark(comm, n: int, repeat: int = 3, seed: int = 0) -> dict:
    """Time the FFT of a random vector (best of ``repeat``): seconds, GFLOP/s counted as
    5 N log2 N, and the MPI share of the time."""
    p, r = comm.Get_size(), comm.Get_rank()
    rng = np.random.default_rng(seed + r)
    local = rng.standard_normal(n // p) + 1j * rng.standard_normal(n // p)
    best = None
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        _, mpi = fft(comm, local, n)
        wall = comm.allreduce(time.perf_counter() - t0, op=_max())
        mpi = comm.allreduce(mpi, op=_max())
        if best is None or wall < best[0]:
            best = (wall, mpi)
    wall, mpi = best
    return {"seconds": wall, "gflops": 5 * n * math.log2(n) / wall / 1e9,
            "mpi_fraction": mpi / wall}


def _max():
    from mpi4py import MPI

    return MPI.MAX
