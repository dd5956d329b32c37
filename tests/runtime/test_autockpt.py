"""Checkpoints taken by the runtime (``--checkpoint-every``), at AtSync points and at
``shoal.iteration()`` calls of main (jobs/autockpt.py): a job killed at random moments and
relaunched by ``--restarts`` ends bit-identical to the uninterrupted run."""

import ast
import subprocess
import sys

import numpy as np
import pytest
from mpi_jobs import JOBS, TIMEOUT

from shoal.errors import UsageError
from shoal.launch import mpiexec
from shoal.options import Options

JOB = JOBS / "autockpt.py"


def result(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


def shoal_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", "run", *map(str, args)],
                          capture_output=True, text=True, timeout=4 * TIMEOUT)


@pytest.fixture(scope="module")
def plain() -> str:
    """The digest of the run without checkpoints or failures (the same for both
    scenarios: the same blocks, the same steps)."""
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(JOB), "sync"]
    got = result(subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT))
    assert not got["restarted"]
    return got["digest"]


def _killed_run(plain, where, scenario: str, pe: int, at: float) -> bool:
    """A run killed at ``at`` s, relaunched: ends as the plain run; True if it restarted from
    a checkpoint, which it does exactly when the supervisor says one had completed before
    the kill (a kill before the first one, as start-up takes longer on a loaded machine,
    starts afresh: CI once saw 2 of 5 kills land there)."""
    out = shoal_run("-n", 2, "--restarts", 2, "--checkpoint-every", "0.3s",
                    "--checkpoint-dir", where / f"{pe}-{at:.3f}", "--kill", f"{pe}@{at:.3f}s",
                    JOB, scenario)
    got = result(out)
    assert got["digest"] == plain, (pe, at, out.stderr[-2000:])
    assert "restart 1 of 2 " in out.stderr, out.stderr[-2000:]
    from_checkpoint = "restart 1 of 2 from checkpoint " in out.stderr
    assert bool(got["restarted"]) == from_checkpoint, out.stderr[-2000:]
    return bool(got["restarted"])


@pytest.mark.parametrize(("scenario", "kills"), [("sync", 3), ("iter", 3)])
def test_a_program_that_takes_no_checkpoint_killed_at_random_moments_ends_bit_identical(
        plain, tmp_path, scenario, kills):
    """Killed after 1.2-3 s (the runs last about 3 s after start-up; checkpoints every
    0.3 s): relaunched from the runtime's last checkpoint, each ends as the plain run."""
    rng = np.random.default_rng(1414 + kills + 10 * (scenario == "sync"))
    restarted = 0
    for pe, at in zip(rng.integers(0, 2, kills), rng.uniform(1.2, 3.0, kills), strict=True):
        restarted += _killed_run(plain, tmp_path, scenario, int(pe), float(at))
    if not restarted:  # every kill came before the first checkpoint (a suite on a loaded
        # machine ran the job 3-4 times slower): kill later, where it is still running
        restarted += _killed_run(plain, tmp_path, scenario, 1, 4.0)
    assert restarted >= 1  # some kill came after a checkpoint: the restart path ran


def test_an_atsync_program_restarts_on_fewer_pes_from_a_sync_point(plain, tmp_path):
    """The checkpoint holds elements waiting in at_sync(): on 1 PE the balancer steps and
    resumes them."""
    for at in (2.2, 3.5, 5.0):  # (a kill before the first checkpoint, which a loaded
        # machine's slower start-up can make, restarts afresh: kill later then)
        out = shoal_run("-n", 2, "--restarts", 1, "--shrink-on-failure", "--checkpoint-every",
                        "0.3s", "--checkpoint-dir", tmp_path / f"c{at}", "--kill", f"1@{at}s",
                        JOB, "sync")
        got = result(out)
        assert got["digest"] == plain, out.stderr[-2000:]
        if got["restarted"]:
            assert got["pes"] == 1, out.stderr[-2000:]
            break
    assert got["restarted"], out.stderr[-2000:]


@pytest.mark.parametrize(("every", "says"), [("0s", "longer than 0 s"),
                                             ("often", "cannot read")])
def test_a_bad_interval_is_refused_in_one_line(every, says):
    out = shoal_run("-n", 2, "--checkpoint-every", every, JOB, "sync")
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize(("every", "folder", "says"), [
    (1.0, None, "checkpoint_every needs checkpoint_dir"),
    (0.0, "x", "seconds > 0"), ("30s", "x", "seconds > 0")])
def test_the_options_refuse_automatic_checkpoints_the_runtime_cannot_take(every, folder, says):
    with pytest.raises(UsageError, match=says):
        Options.build({"checkpoint_every": every, "checkpoint_dir": folder}, environ={})
