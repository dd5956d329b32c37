"""The Slurm of an emulated cluster: its slurm.conf, its own munged, slurmctld, one slurmd
per node, and the wait until every node is idle.

Every cluster runs its own munged (own key and socket, named in slurm.conf by
``AuthInfo=socket=...``, which clients read too), so two clusters and a system munge never
share anything. The daemons run as root without systemd: each daemonizes, writes its pid
file into the cluster's state directory and logs there. Settings, and why:

* ``SlurmdParameters=config_overrides`` and ``CPUs=4`` per node: nodes declare more cores
  than this machine has, so ``salloc -N 2 -n 4`` and oversubscription work on 2 real cores;
  ``OverSubscribe=FORCE`` lets concurrent test jobs share the nodes instead of queueing.
* ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``, no accounting: nothing
  that needs cgroups, a database or systemd.
* ``MpiDefault=pmi2``: the mpich wheel refuses PMIx and works with PMI-2.
* short ``SlurmdTimeout``, ``MessageTimeout``, ``KillWait`` and ``ReturnToService=2``: a
  node killed or cut off is noticed within seconds, and one that comes back is usable again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from shoal import netns
from shoal.errors import UsageError

COMMANDS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sbatch", "sinfo")
INSTALL = "run `make cluster-deps` or `apt-get install slurm-wlm munge libpmix-dev`"
CPUS_PER_NODE = 4
TIMEOUT = 10.0  # seconds a Slurm client command may take


def missing() -> str | None:
    """None if Slurm and munge are installed, else which command is missing and how to
    install them."""
    for command in COMMANDS:
        if shutil.which(command) is None:
            return f"Slurm is not installed ('{command}' is missing): {INSTALL}"
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that are free in this network namespace now."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("", 0))
            ports.append(s.getsockname()[1])
    return ports


class Paths:
    """Where the Slurm of a cluster whose state directory is ``root`` keeps its files."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.munge = root / "munge"
        self.munge_socket = self.munge / "munge.socket"
        self.munge_pid = self.munge / "munged.pid"
        self.ctld = root / "slurmctld"
        self.ctld_pid = self.ctld / "slurmctld.pid"

    def node(self, node: str) -> Path:
        """The directory of ``node``: its tmp, spool, pid and log files."""
        return self.root / "nodes" / node

    def slurmd_pid(self, node: str) -> Path:
        return self.node(node) / "slurmd.pid"


def conf_text(cluster: str, paths: Paths, head: tuple[str, str],
              nodes: list[tuple[str, str]], ports: tuple[int, int]) -> str:
    """slurm.conf of the cluster ``cluster``: the controller runs on ``head`` (hostname,
    address), ``nodes`` are (name, address) pairs, ``ports`` (slurmctld, slurmd)."""
    nodes_dir = paths.root / "nodes"
    lines = [
        f"# the emulated cluster {cluster!r} of shoal (shoal cluster up); do not edit",
        f"ClusterName=shoal-{cluster}",
        f"SlurmctldHost={head[0]}({head[1]})",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={paths.munge_socket}",
        f"StateSaveLocation={paths.ctld}",
        f"SlurmctldPidFile={paths.ctld_pid}",
        f"SlurmctldLogFile={paths.ctld / 'slurmctld.log'}",
        f"SlurmdSpoolDir={nodes_dir}/%n/spool",
        f"SlurmdPidFile={nodes_dir}/%n/slurmd.pid",
        f"SlurmdLogFile={nodes_dir}/%n/slurmd.log",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=pmi2",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MailProg=/bin/true",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1,bf_interval=1",
        "ReturnToService=2",
        "SlurmdTimeout=5",
        "SlurmctldTimeout=10",
        "MessageTimeout=3",
        "TCPTimeout=2",
        "KillWait=2",
        "InactiveLimit=0",
        "MinJobAge=60",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"NodeName=DEFAULT CPUs={CPUS_PER_NODE} State=UNKNOWN",
        *(f"NodeName={name} NodeAddr={addr} NodeHostname={name}" for name, addr in nodes),
        "PartitionName=shoal Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=FORCE:4",
    ]
    return "\n".join(lines) + "\n"


def prepare(paths: Paths, nodes: list[str]) -> None:
    """The directories the daemons need, and a fresh munge key only root can read."""
    for d in (paths.munge, paths.ctld):
        d.mkdir(mode=0o700)
    for node in nodes:
        (paths.node(node) / "spool").mkdir(parents=True)
    key = paths.munge / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))


def start_munged(paths: Paths) -> int:
    """Start the cluster's munged on its own socket and key; its pid."""
    m = paths.munge
    argv = ["munged", f"--socket={paths.munge_socket}", f"--key-file={m / 'munge.key'}",
            f"--pid-file={paths.munge_pid}", f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'munged.seed'}", "--force"]
    return netns.start_daemon(argv, paths.munge_pid, m / "munged.out")


def start_slurmctld(paths: Paths) -> int:
    """Start slurmctld (in this, the root, network namespace) from a clean state; its pid."""
    return netns.start_daemon(["slurmctld", "-f", str(paths.conf), "-c", "-i"],
                              paths.ctld_pid, paths.ctld / "slurmctld.out")


def slurmd_argv(paths: Paths, node: str) -> list[str]:
    """The command that starts the (self-daemonizing) slurmd of ``node``."""
    return ["slurmd", "-f", str(paths.conf), "-N", node]


def env(paths: Paths) -> dict[str, str]:
    """What the Slurm commands need to talk to this cluster."""
    return {"SLURM_CONF": str(paths.conf)}


def node_states(paths: Paths) -> dict[str, str]:
    """Each node's state as ``sinfo`` says it (``idle``, ``alloc``, ``down*``...); empty if
    slurmctld does not answer."""
    try:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                              text=True, timeout=TIMEOUT, env={**os.environ, **env(paths)})
    except (subprocess.TimeoutExpired, OSError):
        return {}
    if done.returncode:
        return {}
    states = {}
    for line in done.stdout.splitlines():
        name, _, state = line.partition(" ")
        states[name] = state.strip()
    return states


def wait_idle(paths: Paths, nodes: list[str], timeout: float = 15.0) -> None:
    """Return once ``sinfo`` shows every node idle; raise naming the others after
    ``timeout`` seconds."""
    end = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < end:
        states = node_states(paths)
        if all(states.get(n) == "idle" for n in nodes):
            return
        time.sleep(0.05)
    late = ", ".join(f"{n} {states.get(n, 'unknown')}" for n in nodes
                     if states.get(n) != "idle")
    raise UsageError(f"Slurm nodes not idle after {timeout:g} s ({late}): see "
                     f"{paths.ctld / 'slurmctld.log'}")
