"""A rank that ends before ``shoal.start`` ends the job with its code and a message naming
it, under ``shoal run`` and a plain mpiexec (jobs/early.py; issue 17, section 4); MPI
programs whose ranks all end without the runtime end well, with or without chare classes,
under both, every message of the hook received."""

import subprocess
import sys

import pytest
from mpi_jobs import JOBS, TIMEOUT

from shoal.launch import mpiexec

LAUNCHES = ["shoal run", "mpiexec"]


def launch(how: str, ranks: int, *args: str) -> subprocess.CompletedProcess:
    """jobs/early.py ARGS on ``ranks`` ranks, by ``shoal run`` or a plain ``mpiexec``."""
    if how == "shoal run":
        cmd = [sys.executable, "-m", "shoal", "run", "-n", str(ranks)]
    else:
        cmd = [*mpiexec(), "-n", str(ranks), sys.executable]
    return subprocess.run([*cmd, str(JOBS / "early.py"), *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("how", LAUNCHES)
@pytest.mark.parametrize(("mode", "code", "said"), [
    ("1:exit:3", 3, "PE 1 (host "),
    ("2:return", 1, "PE 2 (host "),
    ("0:exit:4", 4, "PE 0 (host "),
    ("0:return", 1, "PE 0 (host "),
    ("1:raise", 1, "PE 1 (host "),
])
def test_a_rank_that_ends_before_start_ends_the_job_with_its_code(how, mode, code, said):
    out = launch(how, 3, mode)  # before: the other ranks waited forever (a timeout)
    assert out.returncode == code, out.stderr[-2000:]
    assert said in out.stderr and "ended before shoal.start" in out.stderr, out.stderr
    assert "main done" not in out.stdout


@pytest.mark.parametrize("how", LAUNCHES)
def test_a_rank_killed_by_a_fatal_signal_shows_its_python_stack(how):
    # a crash in native code (glibc's free(): invalid pointer aborts) said one line only;
    # the armed rank's faulthandler prints where in Python it was
    out = launch(how, 2, "1:abort")
    assert out.returncode != 0
    assert "Fatal Python error: Aborted" in out.stderr, out.stderr[-2000:]
    assert 'early.py", line' in out.stderr and "in leave" in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("how", LAUNCHES)
@pytest.mark.parametrize("chare", [True, False], ids=["chare", "no-chare"])
def test_ranks_that_all_end_without_the_runtime_end_as_before(how, chare):
    out = launch(how, 3, "none", *(() if chare else ("--no-chare",)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sum 6" in out.stdout and "ended before" not in out.stderr, out.stderr


@pytest.mark.parametrize("how", LAUNCHES)
def test_every_rank_of_a_normal_job_starts_after_the_handshake(how):
    out = launch(how, 3, "9:return")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("main done") == 1


def test_an_mpi_program_whose_ranks_all_end_at_different_times_without_the_runtime_ends_well():
    # the gossip service's job over mpi4py, under shoal run (the hook is armed): ranks that
    # told rank 0 "left" and went on left messages unreceived at MPI_Finalize, and MPICH
    # then ended 2 of 3 such jobs by signal 9; now they meet rank 0 at exit
    job = JOBS.parent.parent / "gossip" / "mpi_service_job.py"
    for _ in range(3):
        out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "4", str(job),
                              "0.02", "1.0"], capture_output=True, text=True,
                             timeout=TIMEOUT)
        assert out.returncode == 0, out.stderr[-2000:]
        assert '"rank": 3' in out.stdout
