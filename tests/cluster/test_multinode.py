"""shoal across nodes, on an emulated cluster of 3 nodes with a real Slurm
(:mod:`shoal.cluster.emulated`): every launch path (``shoal run`` inside ``salloc`` and
``sbatch``, ``srun`` of the program, the wheel's ``mpiexec`` inside an allocation), the job
directory on a shared path, a checkpoint taken on 2 nodes restarted on 3, and a job that
loses every PE of a node recovering bit-identical under ``--restarts``.

Each node has its own hostname and a private ``/tmp`` and ``/dev/shm``; every other path is
shared (the tests' shared directory is under ``/var/tmp``). Skipped, with one line saying
what is missing, where namespaces or Slurm cannot be had (not root, no ``slurm-wlm``)."""

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cluster_share import share

from shoal import netns
from shoal.cluster import slurm
from shoal.cluster.emulated import OVER_LINKS, EmulatedCluster

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello.py"
HEAT = ROOT / "examples" / "checkpoint.py"
AUTOCKPT = ROOT / "tests" / "runtime" / "jobs" / "autockpt.py"
NODES_JOB = Path(__file__).resolve().parent / "nodes_job.py"
FLOOD_JOB = Path(__file__).resolve().parent / "flood_job.py"
SHOAL = [sys.executable, "-m", "shoal"]
TIMEOUT = 120

_missing = netns.available() or slurm.missing()
pytestmark = pytest.mark.skipif(_missing is not None,
                                reason=f"the emulated cluster needs: {_missing}")


@pytest.fixture(scope="module")
def cluster():
    made = EmulatedCluster(f"m{os.getpid() % 100000}")
    made.up(nodes=3, share=share())
    try:
        yield made
    finally:
        made.down()


@pytest.fixture(scope="module")
def shared():
    """A directory every node sees (not /tmp: each node has its own)."""
    path = Path(tempfile.mkdtemp(prefix="shoal-nodes-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def environment(cluster) -> dict[str, str]:
    """This process's environment for the cluster's Slurm, without the variables of any
    job or launcher this test itself may run under."""
    env = {**os.environ, **cluster.env()}
    for name in ("UCX_NET_DEVICES", "UCX_MEM_EVENTS"):  # (the suite's for ranks of one host,
        env.pop(name, None)  # conftest)
    for name in [v for v in env if v.startswith(("SLURM_", "PMI_", "SHOAL_"))]:
        if name != "SLURM_CONF":
            del env[name]
    return env


def run(cluster, *cmd, cwd=None, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          env=environment(cluster), cwd=cwd, timeout=timeout)


def hosts_of(out: subprocess.CompletedProcess) -> set[str]:
    assert out.returncode == 0, out.stderr[-3000:]
    return set(re.findall(r"\(host (\S+)\)", out.stdout))


def result(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


def test_shoal_run_inside_an_allocation_runs_on_its_nodes_with_default_settings(
        cluster, shared):
    """The issue's first failure: every rank of the second node died looking for the job
    directory in the launching node's /tmp."""
    out = run(cluster, "salloc", "-N", 2, "-n", 4, "-w", "n1,n2", *SHOAL, "run", "-n", 4,
              HELLO, cwd=shared)
    assert hosts_of(out) == {"n1", "n2"}, out.stdout
    assert "4 PEs on 2 node(s)" in out.stdout
    assert "Traceback" not in out.stderr
    assert not (shared / ".shoal").exists()  # its job directory, removed at the end


def test_srun_and_sbatch_and_the_wheels_mpiexec_run_a_program_across_nodes(cluster, shared):
    out = run(cluster, "srun", "-N", 2, "-n", 4, "--mpi=pmi2", sys.executable, HELLO,
              cwd=shared)
    assert hosts_of(out) == {"n1", "n2"}
    out = run(cluster, "salloc", "-N", 2, "-n", 4, "-w", "n2,n3",
              Path(sys.executable).parent / "mpiexec", "-n", 4, sys.executable, HELLO,
              cwd=shared)
    assert hosts_of(out) == {"n2", "n3"}
    script = shared / "job.sh"
    script.write_text(f"#!/bin/sh\n{' '.join(SHOAL)} run -n 4 {HELLO}\n")
    out = run(cluster, "sbatch", "--wait", "-N", 2, "-n", 4, "-o", shared / "job.out",
              script, cwd=shared)
    assert out.returncode == 0, out.stderr
    text = (shared / "job.out").read_text()
    assert set(re.findall(r"\(host (\S+)\)", text)) == {"n1", "n2"}, text


def test_pes_know_their_hosts_and_the_balancer_the_nodes(cluster, shared):
    """``my_host``, ``my_node``, ``stats()`` and the balancer's records across 2 nodes: the
    bytes between nodes and the hop-bytes on a torus whose nodes are the real ones."""
    out = run(cluster, "salloc", "-N", 2, "-n", 4, "-w", "n2,n3", *SHOAL, "run", "-n", 4,
              "--lb", "hierarchical", "--lb-machine", "2x2", NODES_JOB, cwd=shared)
    got = result(out)
    hosts = {pe: host for pe, host, _, _ in got["where"]}
    assert set(hosts.values()) == {"n2", "n3"} and got["nodes"] == 2
    for _, host, node, stats_host in got["where"]:
        assert stats_host == host and node == (0 if host == hosts[0] else 1)
    assert got["steps"], "no balancing step"
    for step in got["steps"]:
        assert {"node_bytes_before", "node_bytes_after", "hop_bytes_before",
                "hop_bytes_after"} <= set(step)
        # one hop between the two nodes of a 2x2 torus: hop-bytes are the bytes between
        assert step["hop_bytes_before"] == step["node_bytes_before"]
        assert step["hop_bytes_after"] == step["node_bytes_after"]


def test_pes_that_flood_each_other_over_tcp_get_every_message_in_order(cluster, shared):
    """Over MPICH's OFI tcp provider a blocking MPI_Send of 1,000 bytes waits once 64 to a
    rank are unreceived: PEs each sending 300 to every other from one entry method waited
    in MPI_Send for good (LeanMD hung so) until small envelopes across nodes went by
    MPI_Isend (shoal.runtime.wire.transport)."""
    out = subprocess.run(["srun", "-N", "3", "-n", "3", "--mpi=pmi2", sys.executable,
                          str(FLOOD_JOB), "300"], capture_output=True, text=True,
                         env={**environment(cluster), **OVER_LINKS}, cwd=shared,
                         timeout=TIMEOUT)
    everyone = {0, 1, 2}
    assert result(out) == [(pe, {other: (300, True) for other in everyone - {pe}})
                           for pe in sorted(everyone)]


def test_the_gossip_service_across_nodes_names_their_hosts(cluster, shared):
    out = run(cluster, "srun", "-N", 3, "-n", 3, "--mpi=pmi2", *SHOAL, "gossip", "run",
              "--duration", "1s", "--interval", "50ms", cwd=shared)
    assert out.returncode == 0, out.stderr[-3000:]
    for host in ("n1", "n2", "n3"):
        assert host in out.stdout, out.stdout


def test_srun_without_the_mpi_plugin_is_refused_in_one_line(cluster, shared):
    """srun --mpi=none starts N jobs of one rank each, silently: shoal says what to pass."""
    out = run(cluster, "srun", "-N", 2, "-n", 2, "--mpi=none", sys.executable, HELLO,
              cwd=shared)
    assert out.returncode == 2, (out.stdout, out.stderr)
    said = [ln for ln in out.stderr.splitlines() if "shoal: error:" in ln]
    assert len(said) == 1 and "--mpi=pmi2" in said[0], out.stderr
    assert "Traceback" not in out.stderr and "hello from" not in out.stdout


def test_a_job_directory_other_nodes_cannot_see_is_refused_naming_them(cluster, shared):
    local = "/tmp/shoal-not-shared"
    out = run(cluster, "salloc", "-N", 2, "-n", 4, "-w", "n1,n2", *SHOAL, "run", "--jobdir",
              local, "-n", 4, HELLO, cwd=shared)
    assert out.returncode != 0
    assert "is not visible on host(s) n1, n2" in out.stderr and "--jobdir" in out.stderr
    assert "Traceback" not in out.stderr and "hello from" not in out.stdout


def test_a_checkpoint_taken_on_two_nodes_restarts_on_three(cluster, shared):
    heat = shared / "heat"
    out = run(cluster, "salloc", "-N", 2, "-n", 4, *SHOAL, "run", "-n", 4, HEAT, heat, 20,
              "--stop", 12, cwd=shared)
    assert out.returncode == 0, out.stderr[-3000:]
    out = run(cluster, "salloc", "-N", 3, "-n", 6, *SHOAL, "run", "-n", 6, "--restart", heat,
              HEAT, heat, 20, cwd=shared)
    assert out.returncode == 0, out.stderr[-3000:]
    restarted = re.findall(r"checksum (\w+)", out.stdout)
    whole = subprocess.run([str(c) for c in (*SHOAL, "run", "-n", 2, HEAT, shared / "whole", 20)],
                           capture_output=True, text=True, timeout=TIMEOUT)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert restarted and restarted == re.findall(r"checksum (\w+)", whole.stdout)


@pytest.fixture(scope="module")
def plain(cluster, shared) -> dict:
    """The uninterrupted run of the job the node-loss tests kill."""
    return result(run(cluster, "srun", "-N", 1, "-n", 2, sys.executable, AUTOCKPT, "sync",
                      cwd=shared))


@pytest.mark.parametrize(("how", "shrink"), [("its PEs killed", False),
                                             ("its PEs killed", True),
                                             ("its link down", False)])
def test_a_job_that_loses_a_node_recovers_bit_identical(cluster, shared, plain, how, shrink):
    """Once the job has completed a checkpoint, n2 loses its PEs (killed: srun sees the
    tasks die) or its link (Slurm declares the node failed after ``SlurmdTimeout``; the
    allocation survives with ``--no-kill``; MPI crosses the links, ``OVER_LINKS``).
    shoal run relaunches from the checkpoint without n2 and ends as the uninterrupted
    run (with ``--shrink-on-failure``, on one PE fewer)."""
    home = shared / f"{how.replace(' ', '-')}-{shrink}"
    job = subprocess.Popen(
        [str(c) for c in ("salloc", "--no-kill", "-N", 2, "-n", 4, "-w", "n1,n2", *SHOAL,
                          "run", "-n", 4, "--restarts", 2, "--checkpoint-every", "0.3s",
                          *(["--shrink-on-failure"] if shrink else []), "--jobdir", home,
                          AUTOCKPT, "sync")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=shared,
        env={**environment(cluster), **OVER_LINKS})
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (home / "checkpoint").exists():
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, "no checkpoint was completed"
            time.sleep(0.05)
        if how == "its PEs killed":
            assert cluster.kill("n2")  # (slurmd stays: the node itself still answers)
        else:
            cluster.link("n2", False)
        out, err = job.communicate(timeout=TIMEOUT)
    finally:
        if job.poll() is None:
            job.kill()
        cluster.link("n2", True)
    got = result(subprocess.CompletedProcess(job.args, job.returncode, out, err))
    assert got["digest"] == plain["digest"] and got["restarted"], err[-3000:]
    assert got["pes"] == (3 if shrink else 4)
    assert re.search(r"without host\(s\) n2$", err, re.MULTILINE), err[-3000:]


@pytest.mark.skipif(not os.environ.get("SHOAL_FT_MPI"),
                    reason="no Open MPI with ULFM (SHOAL_FT_MPI unset; make test sets it)")
def test_in_job_recovery_across_nodes_loses_a_pe_of_the_second_node(cluster, shared):
    """``shoal run --ft`` inside an allocation: Open MPI's launcher starts its daemons
    through Slurm, the PEs spread over both nodes, and a PE of n2 killed mid-run is
    replaced by a rollback of the survivors, bit-identical."""
    ft_job = ROOT / "tests" / "runtime" / "jobs" / "ft.py"
    env = {**environment(cluster), "SHOAL_FT_MPI": os.environ["SHOAL_FT_MPI"],
           "PYTHONPATH": str(ft_job.parent)}

    def ft(*args):
        out = subprocess.run([str(c) for c in ("salloc", "-N", 2, "-n", 4, "-w", "n1,n2",
                                               *SHOAL, "run", "--timeout", "90s", "--ft",
                                               "-n", 4, *args)],
                             capture_output=True, text=True, env=env, cwd=shared,
                             timeout=TIMEOUT)
        return out

    plain = result(ft(ft_job, "plain", 24))
    assert plain["hosts"] == ["n1", "n2"]
    out = ft("--kill", "3@2s", ft_job, "ft", 24)
    got = result(out)
    assert got["digest"] == plain["digest"] and got["pes"] == 3 and got["restored"]
    assert "PE(s) 3 failed; the job continues on 3 PE(s)" in out.stderr
