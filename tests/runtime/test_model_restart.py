"""Sections and held messages of guarded methods survive a checkpoint and a restart on
another number of PEs (jobs/model_restart.py)."""

import ast
import subprocess
import sys

import pytest
from mpi_jobs import JOBS, TIMEOUT

from shoal.launch import mpiexec


def job(ranks: int, *args: str) -> dict:
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(JOBS / "model_restart.py"),
           *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    where = tmp_path_factory.mktemp("model") / "ckpt"
    assert job(3, str(where)) == {"elements": 10}
    return where


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_a_half_done_section_reduction_and_held_messages_go_on_after_a_restart(
        checkpoint, ranks):
    assert job(ranks, "--restart", str(checkpoint)) == {"pes": ranks, "sum": 20}
