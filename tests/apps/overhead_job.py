"""Under mpiexec (4 ranks): the overhead sweep end to end; rank 0 prints the rows as JSON.
The application is sized to run about 50 ms, 25 gossip intervals: at size 40 it ran 8 ms
on this machine, 3 windows were sent and no peer record had arrived in the second half
(mean age NaN)."""

import json

from mpi4py import MPI

from shoal.apps.overhead import sweep

rows = sweep(MPI.COMM_WORLD, "cosmo", every=2, intervals=[0.002], windows=[1.0, 5],
             repeat=2, size_hint=300)
if rows is not None:
    print(json.dumps(rows))
