"""The emulated cluster for real: three network-namespace nodes running Slurm on this
machine. Checks what the project's multi-node tests rely on: srun, salloc and sbatch across
nodes, MPI over PMI-2, private /tmp and /dev/shm with everything else shared, link shaping,
links and processes that fail, and a down() that leaves nothing behind.

Needs root on Linux, network namespaces and Slurm (``make cluster-deps``); skipped
otherwise."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cluster_share import share

from shoal import netns
from shoal.cluster import EmulatedCluster
from shoal.cluster.emulated import NO_NETEM
from shoal.cluster.slurm import missing
from shoal.errors import UsageError

WHY = netns.available() or missing()
if WHY is not None:
    pytest.skip(f"the emulated cluster needs root, network namespaces and Slurm: {WHY}",
                allow_module_level=True)

PY = sys.executable  # the venv's python: the same path inside every node
T = 30  # seconds any one command may take
MPI_HELLO = ("import socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
             "print(c.Get_rank(), c.Get_size(), socket.gethostname(), flush=True)")
MPI_GATHER = ("import socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
              "names = c.gather(socket.gethostname()); "
              "c.Get_rank() or print(c.Get_size(), *names, flush=True)")
CONNECT = """
import socket, sys, time
t = time.perf_counter()
try:
    socket.create_connection((sys.argv[1], 9), timeout=float(sys.argv[2])).close()
except ConnectionRefusedError:  # a closed port answers: the node is reachable
    pass
except OSError:
    print("unreachable"); sys.exit()
print(time.perf_counter() - t)
"""
SINK = """
import socket
server = socket.create_server(("", 7000)); print("ready", flush=True)
conn, _ = server.accept()
while conn.recv(1 << 16): pass
conn.sendall(b"k")
"""
SEND = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7000), timeout=30)
t = time.perf_counter()
s.sendall(bytes(int(sys.argv[2]))); s.shutdown(socket.SHUT_WR); s.recv(1)
print(time.perf_counter() - t)
"""


@pytest.fixture(scope="module")
def cluster():
    c = EmulatedCluster(f"t{os.getpid() % 10**7}")
    c.up(3, share=share())
    try:
        yield c
    finally:
        c.down()


def slurm(cluster, *argv, timeout=T, **kwargs):
    env = {k: v for k, v in os.environ.items() if k != "UCX_NET_DEVICES"}  # (conftest's)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**env, **cluster.env()}, **kwargs)


def in_node(cluster, node, *argv, timeout=T):
    p = cluster.exec(node, list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def shoal(*args):
    return subprocess.run([PY, "-m", "shoal", "cluster", *args], capture_output=True,
                          text=True, timeout=T)


def test_srun_runs_one_task_on_each_of_three_nodes(cluster):
    done = slurm(cluster, "srun", "-N3", "hostname")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["n1", "n2", "n3"]


def test_tmp_and_dev_shm_are_private_everything_else_shared(cluster):
    name = f"shoal-probe-{os.getpid()}"
    for private in ("/tmp", "/dev/shm"):
        assert in_node(cluster, "n1", "sh", "-c", f"echo x > {private}/{name}").returncode == 0
        assert in_node(cluster, "n1", "test", "-e", f"{private}/{name}").returncode == 0
        assert in_node(cluster, "n2", "test", "-e", f"{private}/{name}").returncode == 1
        assert not Path(private, name).exists()  # nor in the root namespace
    assert (cluster.dir / "nodes" / "n1" / "tmp" / name).exists()  # n1's /tmp, seen from root
    with tempfile.TemporaryDirectory(dir="/var/tmp") as shared:  # any path but /tmp, /dev/shm
        assert in_node(cluster, "n1", "sh", "-c", f"echo hi > {shared}/f").returncode == 0
        assert in_node(cluster, "n2", "cat", f"{shared}/f").stdout == "hi\n"
        assert Path(shared, "f").read_text() == "hi\n"


def test_mpi_over_pmi2_spans_two_nodes(cluster):
    done = slurm(cluster, "srun", "-N2", "-n2", "--mpi=pmi2", PY, "-c", MPI_HELLO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(done.stdout.splitlines()) == ["0 2 n1", "1 2 n2"]


def test_srun_without_pmi_starts_singletons(cluster):
    """Without a PMI the tasks of one step do not find each other: each is an MPI world of
    one (rank 0 of 1). shoal must detect this case (SLURM_NTASKS > 1, no PMI_* variable)
    rather than run N independent copies."""
    done = slurm(cluster, "srun", "-N2", "-n2", "--mpi=none", PY, "-c", MPI_HELLO)
    assert done.returncode == 0, done.stderr[-2000:]
    # each task is rank 0 of a world of 1, on two of the cluster's nodes (any two: Slurm
    # picks them, and a fresh clone's suite got n1 and n3 while an earlier step held n2)
    lines = sorted(line.split() for line in done.stdout.splitlines())
    assert [line[:2] for line in lines] == [["0", "1"], ["0", "1"]], done.stdout
    assert len({line[2] for line in lines}) == 2, done.stdout
    assert {line[2] for line in lines} <= {"n1", "n2", "n3"}, done.stdout


def test_srun_pmi2_and_slurm_variables(cluster):
    show = ('echo "$PMI_RANK $PMI_SIZE ${PMI_FD:+fd} $SLURM_PROCID $SLURM_NTASKS '
            '$SLURM_STEP_ID $SLURM_NODEID $SLURM_LOCALID"')
    done = slurm(cluster, "srun", "-N2", "-n3", "--mpi=pmi2", "sh", "-c", show)
    assert sorted(line.split() for line in done.stdout.splitlines()) == [
        "0 3 fd 0 3 0 0 0".split(), "1 3 fd 1 3 0 0 1".split(), "2 3 fd 2 3 0 1 0".split()]
    done = slurm(cluster, "srun", "-N2", "-n2", "--mpi=none", "sh", "-c", show)
    assert sorted(line.split() for line in done.stdout.splitlines()) == [  # no PMI_*
        "0 2 0 0 0".split(), "1 2 0 1 0".split()]


def test_salloc_runs_its_command_where_it_was_called(cluster):
    show = 'echo "$(hostname) $SLURM_JOB_NUM_NODES $SLURM_NODELIST $SLURM_SUBMIT_DIR"'
    done = slurm(cluster, "salloc", "-N2", "-n4", "sh", "-c", show)
    assert done.returncode == 0, done.stderr
    host, count, nodes, cwd = done.stdout.split()
    assert (host, count, cwd) == (socket.gethostname(), "2", os.getcwd())
    # two of the cluster's nodes: Slurm takes the first free ones (n[1-2], or n[2-3] while
    # an earlier test's step still holds n1)
    assert re.fullmatch(r"n\[\d+[-,]\d+\]", nodes), nodes


def test_sbatch_runs_the_script_on_the_first_node(cluster):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as shared:  # nodes cannot see /tmp
        script = Path(shared, "job.sh")
        script.write_text('#!/bin/sh\necho "$(hostname) $SLURM_JOB_NUM_NODES '
                          '$SLURM_SUBMIT_DIR"\nsrun hostname\n')
        done = slurm(cluster, "sbatch", "--wait", "-N2", "-n2", "-o", f"{shared}/out",
                     str(script), cwd=shared)
        assert done.returncode == 0, done.stderr
        first, *tasks = Path(shared, "out").read_text().splitlines()
    assert first.split() == ["n1", "2", shared]
    assert sorted(tasks) == ["n1", "n2"]


def test_hydra_mpiexec_inside_salloc_uses_both_nodes(cluster):
    """Hydra's Slurm bootstrap starts its proxies with srun on the allocated nodes."""
    mpiexec = str(Path(PY).with_name("mpiexec"))
    done = slurm(cluster, "salloc", "-N2", "-n4", "--ntasks-per-node=2", mpiexec, "-n", "4",
                 PY, "-c", MPI_GATHER)
    assert done.returncode == 0, done.stderr[-2000:]
    size, *hosts = done.stdout.split()
    assert size == "4" and len(set(hosts)) == 2 and set(hosts) <= {"n1", "n2", "n3"}


def connect_time(cluster, src, dst, timeout=5.0):
    done = in_node(cluster, src, PY, "-c", CONNECT, dst, str(timeout))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_delay_adds_to_the_round_trip(cluster):
    try:
        cluster.shape(delay=0.02)
    except UsageError as exc:
        if str(exc) == NO_NETEM:
            pytest.skip(str(exc))
        raise
    try:
        assert float(connect_time(cluster, "n1", "n2")) >= 0.02  # a round trip is 2 x 20 ms
    finally:
        cluster.shape()


def test_rate_limits_a_transfer(cluster):
    cluster.shape(rate=20e6 / 8)  # 20 Mbit/s
    sink = cluster.exec("n2", [PY, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline() == "ready\n"
        took = in_node(cluster, "n1", PY, "-c", SEND, "n2", str(10**6))
        assert float(took.stdout) >= 0.8 * 10**6 / (20e6 / 8), took.stderr
        assert cluster.status()["nodes"][0]["shape"] == {"rate": 20e6 / 8}
    finally:
        sink.kill()
        sink.communicate()
        cluster.shape()
    assert cluster.status()["nodes"][0]["shape"] == {}


def test_link_down_cuts_a_node_off_and_up_restores_it(cluster):
    assert connect_time(cluster, "n1", "n2") != "unreachable"
    cluster.link("n2", False)
    try:
        assert connect_time(cluster, "n1", "n2", timeout=0.5) == "unreachable"
        assert cluster.status()["nodes"][1]["link"] == "down"
    finally:
        cluster.link("n2", True)
    assert connect_time(cluster, "n1", "n2") != "unreachable"


def test_kill_ends_every_process_of_a_node_but_slurmd(cluster):
    step = subprocess.Popen(["srun", "-N1", "-w", "n2", "sleep", "60"],
                            env={**os.environ, **cluster.env()}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    other = cluster.exec("n2", ["sleep", "60"])
    try:
        slurmd = cluster.status()["nodes"][1]["pid"]
        end = time.monotonic() + 10
        while len(cluster.pids("n2")) < 4 and time.monotonic() < end:  # + slurmstepd, sleeps
            time.sleep(0.05)
        assert len(cluster.pids("n2")) >= 4
        killed = cluster.kill("n2")
        assert other.pid in killed and slurmd not in killed
        out, _ = step.communicate(timeout=T)
        assert step.returncode != 0 and "Killed" in out
        end = time.monotonic() + 10  # the slurmstepd ends once it reported its task
        while cluster.pids("n2") != [slurmd] and time.monotonic() < end:
            time.sleep(0.05)
        assert cluster.pids("n2") == [slurmd]
        assert other.wait(timeout=T) == -9
    finally:
        step.kill()
        other.kill()
        step.communicate()
        other.communicate()


def test_cli_status_env_and_mistakes(cluster):
    out = shoal("status", "--name", cluster.name)
    assert out.returncode == 0, out.stderr
    assert all(n in out.stdout for n in ("n1", "n2", "n3", "idle"))
    out = shoal("env", "--name", cluster.name)
    assert out.stdout == f"export SLURM_CONF={cluster.dir / 'slurm.conf'}\n"
    for args, hint in ((["exec", "--name", cluster.name, "nosuchnode", "--", "true"],
                        "no node 'nosuchnode'"),
                       (["up", "--name", cluster.name], "is up already"),
                       (["status", "--name", "nosuch"], "is not up")):
        out = shoal(*args)
        assert out.returncode == 2, out
        assert hint in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert shoal("exec", "--name", cluster.name, "n3", "--", "hostname").stdout == "n3\n"


def test_a_dead_node_and_down_leave_nothing_behind():
    c = EmulatedCluster(f"u{os.getpid() % 10**7}")
    c.up(2)
    try:
        namespaces = [n["namespace"] for n in c.status()["nodes"]]
        daemons = [*(n["pid"] for n in c.status()["nodes"]), *(
            int((c.dir / f).read_text()) for f in ("munge/munged.pid",
                                                   "slurmctld/slurmctld.pid"))]
        assert all(netns.alive(p) for p in daemons)
        assert daemons[1] in c.kill("n2", include_slurmd=True)  # n2's slurmd: the node dies
        assert c.pids("n2") == []
        with pytest.raises(UsageError, match=r"node n2 .* is down"):
            c.command("n2", ["true"])
    finally:
        assert c.down()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            timeout=T).stdout
    assert not any(ns in listed for ns in namespaces)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           timeout=T).stdout
    assert c.bridge not in links
    assert not any(netns.alive(p) for p in daemons)
    assert not c.dir.exists()
    assert c.down() is False  # a second down is harmless
