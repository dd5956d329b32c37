"""What shoal run's ranks get from it: on this host, UCX kept to the loopback device (a
network device removed while MPICH's UCX starts ends MPI_Init), unless the user chose UCX's
devices or transports, and nothing of the kind for ranks on other hosts; and an end when
shoal run is killed, even by SIGKILL."""

import os
import signal
import subprocess
import sys

import pytest
from polling import until

from shoal.launch import HOST_LISTS, _orphan_guard, ranks_env
from shoal.netns import alive

PROGRAM = """
import os
from mpi4py import MPI
c = MPI.COMM_WORLD
got = c.gather(tuple(os.environ.get(f"UCX_{v}") for v in ("NET_DEVICES", "TLS", "MEM_EVENTS")))
total = c.allreduce(1)
if c.rank == 0:
    print("RESULT", sorted(set(got)), total)
"""


def test_ranks_on_this_host_use_the_loopback_device_unless_the_user_chose():
    assert ranks_env({}, 2)["UCX_NET_DEVICES"] == "lo"
    assert "UCX_NET_DEVICES" not in ranks_env({"UCX_TLS": "tcp,self"}, 2)
    assert ranks_env({"UCX_NET_DEVICES": "eth1"}, 2)["UCX_NET_DEVICES"] == "eth1"
    for hosts in HOST_LISTS:  # ranks on other hosts need their network
        assert "UCX_NET_DEVICES" not in ranks_env({hosts: "n1,n2"}, 2)
    assert "UCX_NET_DEVICES" not in ranks_env({"SLURM_JOB_NUM_NODES": "3"}, 2)


def test_ranks_on_this_host_load_ucx_without_its_memory_hooks_unless_the_user_chose():
    assert ranks_env({}, 2)["UCX_MEM_EVENTS"] == "no"
    assert ranks_env({"UCX_MEM_EVENTS": "yes"}, 2)["UCX_MEM_EVENTS"] == "yes"
    assert "UCX_MEM_EVENTS" not in ranks_env({"SLURM_JOB_NUM_NODES": "3"}, 2)  # (RDMA)


def test_a_launcher_that_is_not_there_is_a_usage_error(tmp_path):
    prog = tmp_path / "env.py"
    prog.write_text(PROGRAM)
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SHOAL_MPIEXEC": str(tmp_path / "mpiexec")})
    assert out.returncode == 2, out.stderr
    assert "the MPI launcher" in out.stderr and "is not found" in out.stderr, out.stderr


def test_shoal_run_starts_ranks_with_loopback_only_or_the_users_choice(tmp_path):
    prog = tmp_path / "env.py"
    prog.write_text(PROGRAM)
    for env, seen in (({}, "[('lo', None, 'no')] 3"),
                      ({"UCX_TLS": "sm,self"}, "[(None, 'sm,self', 'no')] 3")):
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith("UCX_")}
        out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "3", str(prog)],
                             capture_output=True, text=True, timeout=120,
                             env={**clean, **env})
        assert out.returncode == 0, out.stderr[-3000:]
        assert f"RESULT {seen}" in out.stdout, out.stdout


STUCK = """
import os, sys, time
from mpi4py import MPI
c = MPI.COMM_WORLD
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
if c.rank == 0:
    c.allreduce(1)  # the other rank never joins: rank 0 spins in MPI for good
time.sleep(300)
"""


def test_no_guard_where_setpriv_lacks_the_option(tmp_path, monkeypatch):
    old = tmp_path / "setpriv"  # as util-linux 2.32's: no --pdeathsig
    old.write_text("#!/bin/sh\necho \"setpriv: unrecognized option '$1'\" >&2\nexit 1\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert _orphan_guard.__wrapped__() == ()


@pytest.mark.skipif(not _orphan_guard(), reason="no setpriv with --pdeathsig here "
                    "(util-linux 2.33 or later): a shoal run killed outright leaves its job")
def test_a_job_ends_when_shoal_run_is_killed_outright(tmp_path):
    prog, pids = tmp_path / "stuck.py", tmp_path / "pids"
    prog.write_text(STUCK)
    pids.mkdir()
    run = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", "--jobdir",
                            str(tmp_path / "job"), str(prog), str(pids)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks: list[int] = []
    try:
        until(lambda: len(list(pids.iterdir())) == 2, "both ranks started")
        ranks = [int(p.name) for p in pids.iterdir()]
        run.send_signal(signal.SIGKILL)  # as a timeout kills it: nothing can be forwarded
        run.wait()
        until(lambda: not any(alive(p) for p in ranks), f"ranks {ranks} ended after shoal run",
              30)
    finally:
        for p in ranks:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        run.kill()
        run.wait()
