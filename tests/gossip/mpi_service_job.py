"""Run under mpiexec by test_service_mpi.py: gossip for a while, then report as JSON."""

import json
import sys

import numpy as np
from mpi4py import MPI

from shoal.gossip.service import TAG, GossipService
from shoal.rank import abort_on_error

comm = MPI.COMM_WORLD
with abort_on_error(comm):
    interval = float(sys.argv[1])
    duration = float(sys.argv[2])
    service = GossipService(comm, interval, window=2, entry_size=256,
                            state_provider=lambda: {"load": comm.rank + 0.5,
                                                    "free_mem": 1000 + comm.rank,
                                                    "cores": 16})
    if comm.rank == 1:  # a malformed datagram on the service's own channel
        comm_req = service.comm.Isend([b"SHGP garbage that is not a window", MPI.BYTE], 0, TAG)
        comm_req.Wait()
    service.run(duration)
    snap = service.snapshot()
    summary = service.summary()
    summary["max_age"] = float(np.max(snap["age"]))
    summary["loads_ok"] = bool(np.all(snap["load"] == np.arange(comm.size) + 0.5))
    summary["mem_ok"] = bool(np.all(snap["free_mem"] == 1000 + np.arange(comm.size)))
    everyone = comm.gather(summary, root=0)
    service.close()
    if comm.rank == 0:
        print(json.dumps(everyone))
