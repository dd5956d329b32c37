"""The environment shoal run gives ranks that all run on this host: UCX kept to the
loopback device (a network device removed while MPICH's UCX starts ends MPI_Init), unless
the user chose UCX's devices or transports; nothing of the kind for ranks on other hosts."""

import os
import subprocess
import sys


from shoal.launch import HOST_LISTS, ranks_env

PROGRAM = """
import os
from mpi4py import MPI
c = MPI.COMM_WORLD
got = c.gather((os.environ.get("UCX_NET_DEVICES"), os.environ.get("UCX_TLS")))
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


def test_shoal_run_starts_ranks_with_loopback_only_or_the_users_choice(tmp_path):
    prog = tmp_path / "env.py"
    prog.write_text(PROGRAM)
    for env, seen in (({}, "[('lo', None)] 3"),
                      ({"UCX_TLS": "sm,self"}, "[(None, 'sm,self')] 3")):
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith("UCX_")}
        out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "3", str(prog)],
                             capture_output=True, text=True, timeout=120,
                             env={**clean, **env})
        assert out.returncode == 0, out.stderr[-3000:]
        assert f"RESULT {seen}" in out.stdout, out.stdout
