"""BLAS and OpenMP threads per PE (shoal/threads.py): each PE of a node gets the node's
cores shared by its PEs, unless the user chose a number; set before numpy loads where the
program imports shoal first, so that OpenBLAS starts no thread it may not use."""

import ast
import os
import subprocess
import sys

from mpi_jobs import TIMEOUT

from shoal.launch import mpiexec
from shoal.options import POLL_SPIN
from shoal.runtime.nodes import NodeMap
from shoal.threads import MARK, oversubscribed, ranks_here

JOB = """
import os

import numpy
from threadpoolctl import threadpool_info

import shoal


class Where(shoal.Chare):
    def threads(self):
        from shoal.runtime.context import current

        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        return (blas, os.environ.get("OMP_NUM_THREADS"), len(os.listdir("/proc/self/task")),
                current().poll_spin)


async def main():
    print("RESULT", repr(await shoal.Group(Where).threads(ret=True)), flush=True)


shoal.start(main)
"""


def threads(tmp_path, ranks, shoal_first=False, shoal_run=False, **env):
    prog = tmp_path / "job.py"
    prog.write_text(JOB.replace("\nimport numpy\n", "\nimport shoal\nimport numpy\n")
                    if shoal_first else JOB)
    clean = {k: v for k, v in os.environ.items()
             if not k.endswith("_NUM_THREADS") and k != MARK}
    cmd = ([sys.executable, "-m", "shoal", "run", "-n", str(ranks), str(prog)] if shoal_run
           else [*mpiexec(), "-n", str(ranks), sys.executable, str(prog)])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                         env={**clean, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return ast.literal_eval(line[len("RESULT "):])


def test_each_pe_gets_its_share_of_the_nodes_cores_and_spins_only_with_a_core_each(tmp_path):
    cores = len(os.sched_getaffinity(0))
    for ranks in (2, 3):
        share = max(1, cores // ranks)
        got = threads(tmp_path, ranks)
        assert len(got) == ranks, got
        for blas, omp, _, spin in got:
            assert blas and all(n == share for n in blas) and omp == str(share), got
            assert spin == (0.0 if ranks > cores else POLL_SPIN), (ranks, cores, got)


def test_a_node_is_oversubscribed_with_more_pes_than_the_cores_they_may_run_on(monkeypatch):
    nodes = NodeMap(["a", "a", "a", "b"])
    for cores, pe, want in ((2, 0, True), (3, 0, False), (2, 3, False), (1, 0, False)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _, n=cores: set(range(n)))
        assert oversubscribed(nodes, pe) == want, (cores, pe)  # (1: bound, a core of its own)


def test_a_program_that_imports_shoal_first_starts_no_blas_thread_beyond_its_share(tmp_path):
    cores = len(os.sched_getaffinity(0))
    first = threads(tmp_path, 2, shoal_first=True)
    late = threads(tmp_path, 2)  # numpy first: OpenBLAS starts a thread per core
    share = max(1, cores // 2)
    for blas, omp, *_ in first:
        assert blas and all(n == share for n in blas) and omp == str(share), first
    if cores > share:  # (OpenBLAS's own threads: its share less the calling one)
        assert max(t for _, _, t, _ in first) + (cores - share) <= min(t for _, _, t, _ in late), (
            first, late)
    # shoal run sets the share in its ranks' environment: numpy first is no matter then
    launched = threads(tmp_path, 2, shoal_run=True)
    assert sorted(launched) == sorted(first), (launched, first)


def test_the_ranks_on_this_node_as_each_launcher_says():
    assert ranks_here({"MPI_LOCALNRANKS": "3"}) == 3  # hydra
    assert ranks_here({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == 4  # Open MPI
    srun = {"SLURM_STEP_TASKS_PER_NODE": "2(x2),1", "SLURM_NODEID": "2"}
    assert ranks_here(srun) == 1 and ranks_here({**srun, "SLURM_NODEID": "1"}) == 2
    assert ranks_here({**srun, "SLURM_STEP_TASKS_PER_NODE": "?"}) is None
    assert ranks_here({"PATH": "/bin"}) is None


def test_a_number_the_user_chose_is_left_alone(tmp_path):
    got = threads(tmp_path, 2, OPENBLAS_NUM_THREADS="2")
    assert len(got) == 2, got
    for blas, omp, *_ in got:  # the user's choice; no OMP_NUM_THREADS set either
        assert blas and all(n == 2 for n in blas) and omp is None, got
