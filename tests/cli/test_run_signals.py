"""A signal to ``shoal run`` ends the whole job: mpiexec, its proxy and every rank."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shoal

SRC = str(Path(shoal.__file__).parents[1])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its parent is gone too
        return f.read().split(") ")[-1].startswith("Z")


def _wait(cond, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {limit:.0f} s")
        time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_shoal_run_ends_every_rank(tmp_path, sig):
    prog = tmp_path / "prog.py"
    prog.write_text("import os, sys, time\n"
                    f"open(os.path.join({str(tmp_path)!r}, f'pid{{os.getpid()}}'), 'w').close()\n"
                    "time.sleep(300)\n")
    env = {**os.environ, "PYTHONPATH": SRC}
    run = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(lambda: len(list(tmp_path.glob("pid*"))) == 2, "both ranks started")
        pids = [int(p.name[3:]) for p in tmp_path.glob("pid*")]
        run.send_signal(sig)
        assert run.wait(timeout=60) != 0
        _wait(lambda: all(_gone(p) for p in pids), "every rank ended")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for p in tmp_path.glob("pid*"):
            if not _gone(int(p.name[3:])):
                os.kill(int(p.name[3:]), signal.SIGKILL)
