"""Under mpiexec (4 ranks): the overhead sweep end to end; rank 0 prints the rows as JSON."""

import json

from mpi4py import MPI

from shoal.apps.overhead import sweep

rows = sweep(MPI.COMM_WORLD, "cosmo", every=2, intervals=[0.002], windows=[1.0, 5],
             repeat=2, size_hint=40)
if rows is not None:
    print(json.dumps(rows))
