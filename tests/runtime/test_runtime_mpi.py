"""The runtime on 2-4 MPI ranks (2 cores): each scenario of rt_job.py checks its results
inside the job; here we check that it ran to the end, with a timeout so nothing hangs."""

import subprocess
import sys
from pathlib import Path

import pytest

from shoal.launch import mpiexec

JOB = Path(__file__).with_name("rt_job.py")


def run_job(name: str, ranks: int, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([*mpiexec(), "-n", str(ranks), sys.executable, str(JOB), name,
                           *options], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name,ranks,options", [
    ("order", 3, ()), ("reductions", 4, ()), ("groups", 3, ()), ("coroutines", 3, ()),
    ("amr", 3, ()), ("migration", 4, ()), ("migration", 2, ()), ("exact", 3, ()),
    ("stats", 2, ()), ("library", 2, ()),
    # large buffers by MPI only (no shared memory): the internode path, tested on one node
    ("coroutines", 3, ("0",)), ("migration", 4, ("0",)),
    # a 4 MiB segment per PE: blocks reused, kept arrays overflow into MPI
    ("shared", 2, (str(4 << 20),)),
    ("blocks", 2, (str(8 << 20),)), ("wire", 2, ()), ("wire", 2, ("0",)),
])
def test_scenario(name, ranks, options):
    out = run_job(name, ranks, *options)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"OK {name}" in out.stdout


def test_migration_under_traffic_moves_elements_and_keeps_every_message():
    out = run_job("migration", 4)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("OK migration"))
    sent, moves = map(int, line.split()[2:])
    assert sent == 24 * 30 * 8
    assert moves > 50  # about 30% of 720 ticks ask to move, 3 in 4 to another PE


def test_an_exception_ends_the_job_with_pe_element_and_traceback():
    out = run_job("error", 3)
    assert out.returncode != 0
    assert "PE 2, Faulty[3].boom" in out.stderr
    assert "ValueError: deliberate failure in an entry method" in out.stderr


def test_without_room_for_the_shared_window_large_buffers_go_by_mpi():
    out = run_job("coroutines", 2, str(1 << 50))  # a petabyte per PE: the window fails
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK coroutines" in out.stdout
    assert out.stderr.count("shoal: no shared memory for large messages on this node") == 1
