"""Which PE ``shoal run`` names as the one that died first when the launcher's watcher sees
several dead at once (it ran late): the one ``--kill`` ended, else the lowest PE."""

import socket
import subprocess
import sys
import time

import pytest

from shoal.jobdir import JobDir
from shoal.launch import _Deaths


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(("kills", "first"), [("2@1.0", "2"), ("", "0"), ("1@3.0", "0")])
def test_ranks_seen_dead_together_name_the_injected_kill_first(tmp_path, kills, first):
    host = socket.gethostname()
    notes = tmp_path / "pes"
    notes.mkdir()
    for pe in ("2", "0"):
        (notes / f"{_dead_pid()}@{host}").write_text(f"{pe}\n")
    deaths = _Deaths(JobDir(tmp_path), kills)
    deadline = time.monotonic() + 30
    while len(deaths.order) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # (its first pass finds both)
    deaths.stop()
    assert sorted(pe for pe, _ in deaths.order) == ["0", "2"]
    assert deaths.first()[0] == first


def test_the_pe_that_kill_ended_is_named_even_when_another_was_seen_dead_first(tmp_path):
    """mpiexec learns of a death when the process's sockets close, before its last thread
    is gone, and may kill a rank that ends sooner: the killed PE's note of when it died
    decides (CI named PE 0 when --kill ended PE 1)."""
    host = socket.gethostname()
    notes = tmp_path / "pes"
    notes.mkdir()
    (notes / f"{_dead_pid()}@{host}").write_text("0\n")
    kill_time = time.monotonic()  # PE 1 killed itself now, its end not yet seen
    deaths = _Deaths(JobDir(tmp_path), "1@1.0")
    deadline = time.monotonic() + 30
    while not deaths.order and time.monotonic() < deadline:
        time.sleep(0.01)
    (notes / f"{_dead_pid()}@{host}").write_text("1\n")  # seen dead in a later pass
    while len(deaths.order) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    deaths.stop()
    assert [pe for pe, _ in deaths.order] == ["0", "1"]
    assert deaths.first()[0] == "0"  # no note: the order seen
    (notes / "killed-1").write_text(repr(kill_time))
    assert deaths.first()[0] == "1"
    (notes / "killed-1").write_text(repr(time.monotonic()))  # killed after PE 0 died
    assert deaths.first()[0] == "0"


# srun's words (Slurm 22.05) when the PEs of one node were killed, and when Slurm declared a
# node failed: then it also kills the tasks of the other nodes and says so
KILLED = """srun: error: n2: task 3: Killed
srun: launch/slurm: _step_signal: Terminating StepId=4.0
slurmstepd-n1: error: *** STEP 4.0 ON n1 CANCELLED AT 2026-11-28T05:34:21 ***
srun: error: n1: tasks 0-2: Terminated
"""
FAILED = """salloc: error: Node failure on n2
srun: error: Node failure on n2
srun: error: n1: tasks 0-2: Killed
srun: launch/slurm: _step_signal: Terminating StepId=1.0
"""


def test_the_hosts_a_job_lost_are_read_from_what_srun_said():
    from shoal.launch import lost_hosts

    assert lost_hosts(KILLED) == {"n2"}
    assert lost_hosts(FAILED) == {"n2"}
    assert lost_hosts("srun: error: n1: task 0: Exited with exit code 1\n") == set()
