"""BLAS and OpenMP threads per PE (runtime/threads.py): each PE of a node gets the node's
cores shared by its PEs, unless the user chose a number."""

import ast
import os
import subprocess
import sys

from mpi_jobs import TIMEOUT

from shoal.launch import mpiexec

JOB = """
import os

import numpy
from threadpoolctl import threadpool_info

import shoal


class Where(shoal.Chare):
    def threads(self):
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        return blas, os.environ.get("OMP_NUM_THREADS")


async def main():
    print("RESULT", repr(await shoal.Group(Where).threads(ret=True)), flush=True)


shoal.start(main)
"""


def threads(tmp_path, ranks, **env):
    prog = tmp_path / "job.py"
    prog.write_text(JOB)
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([*mpiexec(), "-n", str(ranks), sys.executable, str(prog)],
                         capture_output=True, text=True, timeout=TIMEOUT, env={**clean, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return ast.literal_eval(line[len("RESULT "):])


def test_each_pe_gets_its_share_of_the_nodes_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))
    for ranks in (2, 3):
        share = max(1, cores // ranks)
        got = threads(tmp_path, ranks)
        assert len(got) == ranks, got
        for blas, omp in got:
            assert blas and all(n == share for n in blas) and omp == str(share), got


def test_a_number_the_user_chose_is_left_alone(tmp_path):
    got = threads(tmp_path, 2, OPENBLAS_NUM_THREADS="2")
    assert len(got) == 2, got
    for blas, omp in got:  # the user's choice; no OMP_NUM_THREADS set either
        assert blas and all(n == 2 for n in blas) and omp is None, got
