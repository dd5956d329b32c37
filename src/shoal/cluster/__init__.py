"""An emulated cluster the project owns: K nodes on this one Linux machine (network
namespaces with their own hostname, address, /tmp and /dev/shm, on one bridge, links
optionally shaped with ``tc netem``) running a real Slurm (munged, slurmctld, one slurmd
per node). ``shoal cluster up`` makes one in about a second, to try multi-node runs on a
laptop; the tests use it to run ``srun``, ``salloc`` and ``sbatch`` across nodes."""

from shoal.cluster.emulated import EmulatedCluster

__all__ = ["EmulatedCluster"]
