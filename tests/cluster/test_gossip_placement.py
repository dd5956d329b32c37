"""The runtime uses gossip (issue 28, item 6), on an emulated cluster of 3 nodes with a real
Slurm and a gossip daemon on every node: with a CPU burner on n2, ``shoal run`` inside an
allocation of the 3 nodes starts its PE on n1 or n3, ``shoal ctl JOBDIR expand 2`` puts the
second on the other one, and a job srun spreads over the 3 nodes starts fewer elements of an
array on n2's PE.

The 3 emulated nodes share this machine's 2 cores, so each daemon says its node offers 1
(``--cores 1``); the burner is 4 busy processes in n2's namespace. Skipped, with one line
saying what is missing, where namespaces or Slurm cannot be had."""

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_share import share
from test_multinode import TIMEOUT, environment, shared  # noqa: F401 (a fixture)

from shoal import netns
from shoal.cluster import slurm
from shoal.cluster.emulated import EmulatedCluster
from shoal.gossip.control import cluster as gossip_view
from shoal.jobdir import JobDir
from shoal.placement import node_loads

JOB = Path(__file__).resolve().parent / "placement_job.py"
SHOAL = [sys.executable, "-m", "shoal"]
BURNER = "import os\nfor _ in range(2):\n    os.fork()\nwhile True:\n    pass\n"

_missing = netns.available() or slurm.missing()
pytestmark = pytest.mark.skipif(_missing is not None,
                                reason=f"the emulated cluster needs: {_missing}")


@pytest.fixture(scope="module")
def gossiping(shared):  # noqa: F811 (the fixture imported above)
    """The cluster, a daemon per node (state under the shared path: the test reads n1's
    view through its control socket) and the burner on n2."""
    made = EmulatedCluster(f"p{os.getpid() % 100000}")
    state = made.up(nodes=3, share=share())
    addrs = [node["address"] for node in state["nodes"]]
    procs = []
    try:
        for i, addr in enumerate(addrs, 1):
            argv = [*SHOAL, "gossip", "daemon", "--bind", f"{addr}:7946", "--join",
                    f"{addrs[0]}:7946", "--interval", "250ms", "--cores", "1",
                    "--state-dir", str(shared / f"gossip-n{i}")]
            procs.append(made.exec(f"n{i}", argv, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL))
        procs.append(made.exec("n2", [sys.executable, "-c", BURNER]))
        yield made, shared / "gossip-n1"
    finally:
        for p in procs:
            p.kill()
        made.down()


def busy_n2(state_dir: Path) -> dict:
    """Wait until n1's daemon knows the 3 nodes and sees n2's processes take more than half
    its core while n1's and n3's take less than a third of theirs (the share of the machine
    the burner gets varies with what else runs on it)."""
    end = time.monotonic() + 60
    while True:
        loads = node_loads(gossip_view(state_dir))
        if ({"n1", "n2", "n3"} <= loads.keys() and loads["n2"].background > 0.5
                and loads["n1"].background < 0.3 and loads["n3"].background < 0.3):
            return loads
        assert time.monotonic() < end, f"n2 never looked busy: {loads}"
        time.sleep(0.25)


def where(out: str) -> list[dict]:
    return [ast.literal_eval(line[len("WHERE "):]) for line in out.splitlines()
            if line.startswith("WHERE ")]


def test_shoal_run_and_expand_place_pes_on_the_nodes_gossip_reports_least_loaded(
        gossiping, shared, tmp_path):  # noqa: F811
    made, state_dir = gossiping
    busy_n2(state_dir)
    env = {**environment(made), "SHOAL_GOSSIP_STATE_DIR": str(state_dir),
           "HOLD": str(shared / "hold")}
    home = shared / "job"
    job = subprocess.Popen([str(c) for c in ("salloc", "-N", 3, "-n", 3, *SHOAL, "run",
                                             "--jobdir", home, "-n", 1, JOB)],
                           env=env, cwd=shared, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_running(home, 1, job)
        out = subprocess.run([*SHOAL, "ctl", str(home), "expand", "2"], env=env,
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 0, out.stderr
        wait_running(home, 2, job)
        (shared / "hold").write_text("")
        stdout, stderr = job.communicate(timeout=TIMEOUT)
    finally:
        job.kill()
    assert job.returncode == 0, stderr[-3000:]
    first, expanded = where(stdout)
    assert first["hosts"] in (["n1"], ["n3"]), stdout
    assert expanded["hosts"] == ["n1", "n3"], stdout
    assert re.search(r"resizing the job from 1 to 2 PEs", stderr)


def wait_running(home: Path, pes: int, job: subprocess.Popen) -> None:
    end = time.monotonic() + TIMEOUT
    while (JobDir(home).running() or {}).get("pes") != pes:
        assert job.poll() is None and time.monotonic() < end, job.communicate()
        time.sleep(0.1)


def test_a_job_spread_over_the_three_nodes_starts_fewer_elements_on_the_busy_one(gossiping):
    made, state_dir = gossiping
    loads = busy_n2(state_dir)
    env = {**environment(made), "SHOAL_GOSSIP_STATE_DIR": str(state_dir)}
    out = subprocess.run([str(c) for c in ("srun", "-N", 3, "-n", 3, sys.executable, JOB)],
                         env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-3000:]
    (got,) = where(out.stdout)
    assert got["hosts"] == ["n1", "n2", "n3"]
    n1, n2, n3 = got["counts"]
    assert sum(got["counts"]) == 60 and n2 < min(n1, n3), got
    assert loads["n2"].share(1) < 1.0
