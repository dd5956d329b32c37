"""A rank that ends before ``shoal.start`` ends the job with its code and a message naming
it, under ``shoal run`` (jobs/early.py; issue 17, section 4); MPI programs that import shoal
and never start the runtime end as before, under shoal run and a plain mpiexec."""

import subprocess
import sys

import pytest
from mpi_jobs import JOBS, TIMEOUT, run_job

from shoal.launch import mpiexec


@pytest.mark.parametrize(("mode", "code", "said"), [
    ("1:exit:3", 3, "PE 1 (host "),
    ("2:return", 1, "PE 2 (host "),
    ("0:exit:4", 4, "PE 0 (host "),
    ("1:raise", 1, "PE 1 (host "),
])
def test_a_rank_that_ends_before_start_ends_the_job_with_its_code(mode, code, said):
    out = shoal_run(3, mode)  # before: the other ranks waited forever (a timeout)
    assert out.returncode == code, out.stderr[-2000:]
    assert said in out.stderr and "ended before shoal.start" in out.stderr, out.stderr
    assert "main done" not in out.stdout


def shoal_run(ranks: int, mode: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(ranks), str(JOBS / "early.py"),
           mode]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("launch", ["shoal run", "mpiexec"])
def test_ranks_that_all_end_without_the_runtime_end_as_before(launch):
    out = shoal_run(3, "none") if launch == "shoal run" else run_job("early", 3, "none")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sum 6" in out.stdout and "ended before" not in out.stderr


def test_every_rank_of_a_normal_job_starts_after_the_handshake():
    out = subprocess.run([*mpiexec(), "-n", "3", sys.executable, str(JOBS / "early.py"),
                          "9:return"], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("main done") == 1
