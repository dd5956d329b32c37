"""The gossip service on 4 MPI ranks (2 cores): everyone learns everyone, garbage is dropped."""

import json
import subprocess
import sys
from pathlib import Path

from shoal.launch import mpiexec

JOB = Path(__file__).with_name("mpi_service_job.py")


def test_four_ranks_learn_each_other_and_drop_garbage():
    interval, duration = 0.02, 3.0
    out = subprocess.run([*mpiexec(), "-n", "4", sys.executable, str(JOB), str(interval),
                          str(duration)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ranks = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(ranks) == 4
    for r in ranks:
        # every rank knows every other rank's state, and recently: within 20 intervals
        assert r["max_age"] < 20 * interval, r
        assert r["loads_ok"] and r["mem_ok"], r
        assert r["ticks"] >= duration / interval * 0.8
        assert r["sent"] + r["dropped"] == r["ticks"]
        assert r["busy_fraction"] < 0.5  # it sleeps between deadlines
        assert 0 < r["mean_age"] < 10 * interval
    assert ranks[0]["malformed"] == 1
    assert sum(r["malformed"] for r in ranks) == 1
    # every window sent was received somewhere (the drain leaves nothing in flight)
    assert sum(r["sent"] for r in ranks) == sum(r["received"] for r in ranks) - 1


def test_a_failing_rank_ends_the_job_with_its_traceback(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "from shoal.rank import abort_on_error\n"
        "import time\n"
        "comm = MPI.COMM_WORLD\n"
        "with abort_on_error(comm):\n"
        "    if comm.rank == 2:\n"
        "        raise ValueError('boom on purpose')\n"
        "    comm.Barrier()\n")
    out = subprocess.run([*mpiexec(), "-n", "3", sys.executable, str(script)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "rank 2:" in out.stderr and "boom on purpose" in out.stderr
