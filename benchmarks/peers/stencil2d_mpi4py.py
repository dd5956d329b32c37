"""The hand-written MPI version of examples/stencil2d.py: one block (a strip of rows) per
rank, ghost rows by Sendrecv, convergence by Allreduce. Same arithmetic, same boundaries.
Run: mpiexec -n 2 python stencil2d_mpi4py.py N ITERS"""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n, iters = int(sys.argv[1]), int(sys.argv[2])
h = n // size
u = np.zeros((h + 2, n + 2))
if rank == 0:
    u[0, :] = 1.0
up = rank - 1 if rank > 0 else MPI.PROC_NULL
down = rank + 1 if rank < size - 1 else MPI.PROC_NULL
comm.Barrier()
t0 = time.perf_counter()
for _ in range(iters):
    comm.Sendrecv(u[1], dest=up, recvbuf=u[-1], source=down)
    comm.Sendrecv(u[-2], dest=down, recvbuf=u[0], source=up)
    new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    local = float(np.abs(new - u[1:-1, 1:-1]).max())
    u[1:-1, 1:-1] = new
    diff = comm.allreduce(local, MPI.MAX)
elapsed = comm.allreduce(time.perf_counter() - t0, MPI.MAX)
if rank == 0:
    print(f"mpi4py {n}x{n} on {size} ranks: {elapsed / iters * 1e3:.2f} ms per iteration, "
          f"max change {diff:.3e}")
