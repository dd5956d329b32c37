"""Under mpiexec: the kernels against numpy; prints OK lines on rank 0."""

import sys

import numpy as np
from mpi4py import MPI

from shoal.apps import fft, ptrans

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# PTRANS: every rank builds the same global matrices, keeps its blocks
n, nb = 48, 4
p = 2 if size % 2 == 0 else 1
q = size // p
rng = np.random.default_rng(5)
A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
mine = ptrans.local_blocks(n, nb, p, q, rank)
a = {(i, j): A[i * nb:(i + 1) * nb, j * nb:(j + 1) * nb].copy() for i, j in mine}
b = {(i, j): B[i * nb:(i + 1) * nb, j * nb:(j + 1) * nb].copy() for i, j in mine}
res, _ = ptrans.transpose_add(comm, a, b, n, nb, p, q)
assert set(res) == set(mine)
parts = comm.gather(res, root=0)
if rank == 0:
    C = np.zeros((n, n))
    for part in parts:
        for (i, j), blk in part.items():
            C[i * nb:(i + 1) * nb, j * nb:(j + 1) * nb] = blk
    assert np.allclose(C, A.T + B)
    print("OK ptrans", p, q)

# FFT: a global vector split in contiguous blocks
for npts in (16 * size * size, 64 * size * size):
    gen = np.random.default_rng(9)
    x = gen.standard_normal(npts) + 1j * gen.standard_normal(npts)
    block = npts // size
    y, mpi = fft.fft(comm, x[rank * block:(rank + 1) * block], npts)
    full = comm.gather(y, root=0)
    if rank == 0:
        assert np.allclose(np.concatenate(full), np.fft.fft(x))
        print("OK fft", npts)
stats = fft.benchmark(comm, 1 << 12 if size != 3 else 3 * 3 * 256, repeat=2)
st2 = ptrans.benchmark(comm, 64, 8, p, q, repeat=2)
if rank == 0:
    assert stats["seconds"] > 0 and 0 <= stats["mpi_fraction"] <= 1 and stats["gflops"] > 0
    assert st2["gbps"] > 0 and 0 <= st2["mpi_fraction"] <= 1
    print("OK benchmarks")
sys.stdout.flush()

from shoal.apps import cosmo  # noqa: E402

r = cosmo.run(comm, steps=6, nx=16, ny=16, nz=4, seed=3)
if rank == 0:
    assert r["halo_ok"] and r["work_conserved"], r
    assert r["imbalance"] < 1.5, r
    assert all(r[k] > 0 for k in cosmo.PHASES) and 0 < r["mpi_fraction"] < 1
    print("OK cosmo", round(r["imbalance"], 3))
