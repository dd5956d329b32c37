"""Every rank gossips its state; rank 0 prints what it knows of the others.

    mpiexec -n 4 python examples/gossip_service.py
"""

from mpi4py import MPI

from shoal.gossip.service import GossipService
from shoal.rank import abort_on_error

comm = MPI.COMM_WORLD
with abort_on_error(comm):
    service = GossipService(comm, interval=0.05, window=0.5)
    service.run(duration=2.0)
    snapshot = service.snapshot()
    summary = service.summary()
    service.close()
    if comm.rank == 0:
        for row in snapshot:
            print(f"node {row['node']}: load {row['load']:.2f}, "
                  f"free {row['free_mem'] / 2**30:.1f} GiB, age {1e3 * row['age']:.1f} ms")
        print(f"busy {100 * summary['busy_fraction']:.2f}% of {summary['wall']:.1f} s")
