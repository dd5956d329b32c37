"""Under mpiexec: reorder COMM_WORLD by a mapping and check every rank's new place."""

from mpi4py import MPI

from shoal.mapping.mapfiles import reorder
from shoal.mapping.mappings import ordering
from shoal.topology.torus import Torus

world = MPI.COMM_WORLD
torus = Torus((2, 2), cores=1)
node, core = ordering(torus, "YXT")  # Y fastest: rank 1 goes to node (0,1) = node 2
new = reorder(world, node, core, torus)
me = world.Get_rank()  # launch order: process p sits on node p
assert int(node[new.Get_rank()]) == me, (me, new.Get_rank())
ranks = new.allgather(me)
if new.Get_rank() == 0:
    print("OK reorder", ranks)
