"""Run a job script of ``jobs/`` on 2-4 MPI ranks, with a timeout so nothing hangs.

``jobs/TOPIC.py NAME... [--shm BYTES]`` runs the named scenarios of TOPIC one after another
in one runtime; each checks its own results inside the job (a failed assert ends the job with
the PE and the traceback) and PE 0 prints ``OK NAME`` plus, as a Python literal, the figures
the test compares."""

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.launch import mpiexec, ranks_env

JOBS = Path(__file__).with_name("jobs")
TIMEOUT = 120  # seconds for one job: its start-up takes 1-2 s


def run_job(job: str, ranks: int, *scenarios: str, shm: int | None = None,
            options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``jobs/JOB.py SCENARIOS... OPTIONS...`` on ``ranks`` ranks; ``shm``: the shared
    memory of each PE in bytes (0: large buffers by MPI only; None: the runtime's default);
    ``options``: more flags of the job (see jobs/runner.py)."""
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(JOBS / f"{job}.py"), *scenarios,
           *options]
    if shm is not None:
        cmd += ["--shm", str(shm)]
    try:
        # killing mpiexec on a timeout makes its proxy end the ranks
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                              env=ranks_env(None, ranks))  # as shoal run
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        pytest.fail(f"{job} {' '.join(scenarios)} on {ranks} ranks did not finish within "
                    f"{TIMEOUT} s; its stderr ends with:\n{(err or '')[-3000:]}")


def run_ok(job: str, ranks: int, *scenarios: str, shm: int | None = None,
           options: tuple[str, ...] = ()) -> dict:
    """:func:`run_job`, check that the job ended well and that every scenario reported OK;
    return the figures each printed after its name (None if none), by scenario."""
    out = run_job(job, ranks, *scenarios, shm=shm, options=options)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = {}
    for line in out.stdout.splitlines():
        if line.startswith("OK "):
            name, _, rest = line[3:].partition(" ")
            figures[name] = ast.literal_eval(rest) if rest else None
    missing = [s for s in scenarios if s not in figures]
    assert not missing, f"no OK from {missing}: stdout ends with {out.stdout[-3000:]}"
    return figures


def shared(job: str, scenarios: dict[int, tuple[str, ...]]) -> Callable[[int], dict]:
    """For a module fixture: ``on(ranks)`` is what :func:`run_ok` gives for the scenarios
    ``scenarios[ranks]`` of ``job``, from one job per number of ranks that runs them in turn
    (each checks itself inside the job; a launch's start-up, about 0.35 CPU-s, is paid once
    per number of ranks, not once per test)."""
    done: dict[int, dict] = {}

    def on(ranks: int) -> dict:
        if ranks not in done:
            done[ranks] = run_ok(job, ranks, *scenarios[ranks])
        return done[ranks]

    return on
