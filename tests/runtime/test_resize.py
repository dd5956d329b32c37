"""Shrink and expand on command (issue 14, section 3): ``shoal ctl JOBDIR shrink|expand N``
moves a running ``shoal run`` job to N PEs at its next consistent point; the program ends
bit-identical to a run left alone, no process of the old size stays, and a command that
cannot be served is one line on stderr with exit code 2."""

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpi_jobs import JOBS, TIMEOUT

from shoal import jobdir as jd
from shoal.jobdir import JobDir
from shoal.launch import mpiexec

JOB = JOBS / "autockpt.py"
STEPS = "16"  # about 3 s of iterations (the resized jobs are held until resized: HOLD)


def result(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


def ctl(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", "ctl", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT)


def ranks(program: Path, home: Path) -> int:
    """Processes running ``python program`` in job directory ``home`` (the job's ranks, not
    mpiexec or shoal run, nor another test's ranks of the same program under pytest -n)."""
    mark = f"{jd.ENV}={home}".encode()
    count = 0
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            ours = mark in (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if ours and len(argv) > 1 and b"python" in argv[0] and argv[1] == bytes(program):
            count += 1
    return count


def wait_running(home: Path, pes: int, job: subprocess.Popen) -> None:
    end = time.monotonic() + TIMEOUT
    while (JobDir(home).running() or {}).get("pes") != pes:
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < end, "the job did not start"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def plain() -> str:
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(JOB), "iter", STEPS]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-3000:]
    return result(out.stdout)["digest"]


def test_a_shrink_below_a_group_on_some_pes_is_refused_and_the_job_goes_on(plain, tmp_path):
    """A group on PE 2 only (Group(cls, pes=[2])) has no member to move: shrink 2 is
    refused by the job itself, shoal ctl says why (exit 2), and the job ends on 3 PEs as
    if nothing had been asked."""
    home = tmp_path / "job"
    hold = tmp_path / "asked"  # (the job goes on until the request was answered: HOLD)
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "3", "--jobdir",
                            str(home), str(JOB), "grouped", STEPS],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, HOLD=str(hold)))
    try:
        wait_running(home, 3, job)
        out = ctl(home, "shrink", 2)
        hold.touch()
        assert out.returncode == 2, out.stderr
        assert "Member on PEs [2] need 3 PEs" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        stdout, stderr = job.communicate(timeout=4 * TIMEOUT)
    finally:
        hold.touch()  # (whatever failed: the held job may end)
        job.kill()
    assert job.returncode == 0, stderr[-3000:]
    got = result(stdout)
    assert got["digest"] == plain and got["pes"] == 3 and not got["restarted"]
    assert "resizing" not in stderr


@pytest.mark.parametrize("scenario", ["iter", "sync"])
def test_a_job_shrunk_then_expanded_while_it_runs_ends_bit_identical(plain, tmp_path,
                                                                     scenario):
    """``iter``: main calls shoal.iteration() between iterations; ``sync``: an AtSync
    program. 3 PEs -> 2 -> 3, each move seen by the program and by ps. The job goes on
    past its last step until both are served (HOLD), which may be before or after it."""
    home = tmp_path / "job"
    hold = tmp_path / "resized"
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "3", "--jobdir",
                            str(home), str(JOB), scenario, STEPS],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, HOLD=str(hold)))
    try:
        wait_running(home, 3, job)
        for command, pes in (("shrink", 2), ("expand", 3)):
            out = ctl(home, command, pes)
            if out.returncode != 0:
                hold.touch()
                job.kill()
                pytest.fail(f"{out.stderr}the job said: {job.communicate(timeout=60)}")
            assert f"{command} from {5 - pes} to {pes} PEs in" in out.stdout
            assert ranks(JOB, home) == pes  # the old launch's processes are gone
        hold.touch()
        stdout, stderr = job.communicate(timeout=4 * TIMEOUT)
    finally:
        hold.touch()  # (whatever failed: the held job may end)
        job.kill()
    assert job.returncode == 0, stderr[-3000:]
    got = result(stdout)
    assert got["digest"] == plain and got["restarted"] and got["pes"] == 3
    assert "resizing the job from 3 to 2 PEs" in stderr
    assert "resizing the job from 2 to 3 PEs" in stderr
    assert f"job directory {home}" in stderr
    assert not home.exists()  # shoal run made it: removed, with the resize checkpoints
    assert not JobDir(home).resize_local().parent.exists()
    assert ranks(JOB, home) == 0


@pytest.fixture
def fake_job(tmp_path) -> Path:
    """A job directory as a running job of 3 PEs leaves it (this process stands for the
    supervisor), so that shoal ctl's own checks can be tried without a job."""
    JobDir(tmp_path).announce(3, 1)
    return tmp_path


@pytest.mark.parametrize(("args", "says"), [
    (("shrink", 3), "shrink to fewer"),
    (("shrink", 4), "shrink to fewer"),
    (("expand", 2), "expand to more"),
    (("shrink", 0), "N >= 1"),
    (("expand",), "N >= 1"),
])
def test_a_resize_the_job_cannot_serve_is_refused_in_one_line(fake_job, args, says):
    out = ctl(fake_job, *args)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (fake_job / jd.CONTROL).exists()  # nothing was asked


def test_ctl_on_a_directory_without_a_job_or_with_an_ended_one_says_so(tmp_path):
    out = ctl(tmp_path, "status")
    assert out.returncode == 2 and "not the directory of a running shoal run job" in out.stderr
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / jd.JOB).write_text(json.dumps({"pid": dead.pid, "pes": 2, "launch": 1}))
    out = ctl(tmp_path, "shrink", 1)
    assert out.returncode == 2 and "has ended" in out.stderr, out.stderr


def test_a_request_nobody_serves_in_time_is_reported_and_stays(fake_job):
    out = ctl(fake_job, "shrink", 2, "--wait", "0.3s")
    assert out.returncode == 1 and "has not run on 2 PEs within 0.3 s" in out.stderr
    request = jd.read_json(fake_job / jd.CONTROL)
    assert request is not None and request["pes"] == 2


def test_the_job_takes_a_request_once_and_drops_one_for_its_own_size(tmp_path):
    home = JobDir(tmp_path)
    home.ask_resize(2, 0.0)
    assert home.take_request(3) == {"pes": 2, "at": 0.0}
    assert home.take_request(3) is None  # taken: gone
    home.ask_resize(3, 0.0)
    assert home.take_request(3) is None and not (tmp_path / jd.CONTROL).exists()
