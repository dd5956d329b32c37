"""A rank that ends before ``shoal.start`` ends the job with its code and a message naming
it, under a plain mpiexec and under ``shoal run`` (jobs/early.py; issue 17, section 4)."""

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
    out = run_job("early", 3, mode)  # before: the other ranks waited forever (a timeout)
    assert out.returncode == code, out.stderr[-2000:]
    assert said in out.stderr and "ended before shoal.start" in out.stderr, out.stderr
    assert "main done" not in out.stdout


def test_ranks_that_all_end_without_the_runtime_end_as_before():
    out = run_job("early", 3, "none")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sum 6" in out.stdout and "shoal:" not in out.stderr


def test_under_shoal_run_too():
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", str(JOBS / "early.py"),
           "1:exit:5"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 5, out.stderr[-2000:]
    assert "PE 1 (host " in out.stderr and "ended before shoal.start" in out.stderr


def test_every_rank_of_a_normal_job_starts_after_the_handshake():
    out = subprocess.run([*mpiexec(), "-n", "3", sys.executable, str(JOBS / "early.py"),
                          "9:return"], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("main done") == 1
