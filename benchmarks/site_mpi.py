"""shoal over a site MPI instead of its embedded one, across two nodes of the emulated
cluster: mpi4py built from source against the system's MPICH (Debian's ``mpich``
package stands for a site MPI), then a shoal program launched by ``srun --mpi=pmi2`` and
by ``shoal run`` inside an allocation, each rank reporting the MPI library it runs on.

Building mpi4py takes minutes (3 min 52 s on 2 cores here), so this runs here, not in
every test run. It is built by the base interpreter (same Python, without shoal's
environment, whose ``include/mpi.h`` of the mpich wheel would be used instead of the
site's: the module then needed ``MPI_Buffer_iflush``, which MPICH 4.0 lacks). The
build goes into ``--target`` (default ``/var/tmp/shoal-site-mpi``, a path every node
sees) and the ranks find it first on ``PYTHONPATH``; shoal's environment keeps its own
mpi4py for everything else.

Usage: python benchmarks/site_mpi.py [--target DIR] [--rebuild]
(as root: needs ``apt-get install mpich libmpich-dev`` and Slurm, ``make cluster-deps``)
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from shoal.cluster.emulated import EmulatedCluster

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import shoal\n"
         "from mpi4py import MPI\n"
         "class P(shoal.Chare):\n"
         "    def where(self):\n"
         "        return shoal.my_host(), MPI.Get_library_version().splitlines()[0].strip()\n"
         "async def main():\n"
         "    for host, lib in await shoal.Group(P).where(ret=True):\n"
         "        print('RANK', host, lib)\n"
         "shoal.start(main)\n")


def build(target: Path, rebuild: bool) -> float | None:
    """mpi4py against the system MPI into ``target``; seconds taken (None: built before)."""
    if (target / "mpi4py").is_dir() and not rebuild:
        return None
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        raise SystemExit("no mpicc: apt-get install mpich libmpich-dev (or load your MPI)")
    shutil.rmtree(target, ignore_errors=True)
    t0 = time.perf_counter()
    # the base interpreter's pip: in shoal's environment the mpich wheel's mpi.h (include/)
    # comes before the site's, and mpi4py then calls MPI 4.1 functions the site lacks
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "pip", "install", "-q", "--no-binary", "mpi4py",
                    "--no-cache-dir", "--no-deps", "--target", str(target), "mpi4py>=4.0"],
                   env={**os.environ, "MPICC": mpicc}, check=True, timeout=1800)
    return time.perf_counter() - t0


def launch(cluster: EmulatedCluster, target: Path, cmd: list[str], cwd: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SHOAL_"))}
    env.update(cluster.env(), PYTHONPATH=os.pathsep.join([str(target), str(ROOT / "src")]))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return sorted(line for line in out.stdout.splitlines() if line.startswith("RANK"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="/var/tmp/shoal-site-mpi")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    target = Path(args.target)
    took = build(target, args.rebuild)
    print(f"mpi4py built against {shutil.which('mpicc')} into {target}: "
          + ("earlier" if took is None else f"{took:.0f} s"))
    cluster = EmulatedCluster(f"s{os.getpid() % 100000}")
    cluster.up(nodes=2)
    work = Path(target).parent / f"shoal-site-run-{os.getpid()}"
    work.mkdir()
    try:
        prog = work / "probe.py"
        prog.write_text(PROBE)
        runs = {"srun -N 2 -n 4 --mpi=pmi2 python": ["srun", "-N", "2", "-n", "4", "--mpi=pmi2",
                                                    sys.executable, str(prog)],
                "salloc -N 2 -n 4 shoal run -n 4": ["salloc", "-N", "2", "-n", "4",
                                                   sys.executable, "-m", "shoal", "run",
                                                   "-n", "4", str(prog)]}
        for name, cmd in runs.items():
            print(f"\n{name}:")
            for line in launch(cluster, target, cmd, work):
                print(f"  {line}")
    finally:
        cluster.down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
