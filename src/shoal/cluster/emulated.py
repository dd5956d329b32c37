"""An emulated cluster of K nodes on this one Linux machine, with a real Slurm.

Each node is a network namespace (``shoal-<name>-n1``...) joined to a bridge
(``shc-<name>``) by a veth pair (``shc-<name>-1`` on the bridge, ``eth0`` in the node), with
an address in a private /24 (``10.77.X.0/24``, X derived from the name, else the next free
one); the root namespace is ``.1`` on the bridge and runs slurmctld and munged. Each node has
its own hostname (``n1``...) and mount namespace, held by its slurmd (or, without Slurm, by
a ``sleep`` holder), with

* a private ``/tmp`` (``<state>/nodes/n1/tmp`` bound over it): nodes sharing one /tmp
  collide in PMIx (``/tmp/spmix_appdir_*: File exists``);
* a private ``/dev/shm`` (a tmpfs of its own, as real nodes have). MPI across nodes works
  with it: UCX still sees one host (one kernel) and passes messages through SysV shared
  memory and cross-memory attach, which need no common /dev/shm;
* its own ``/etc/hosts`` naming every node and the root's hostname (the head, ``.1``).

Every other path (``/work``, ``/home``, ``/var/tmp``, ``/run``...) is shared, as a cluster
file system would be. Since all nodes share one kernel, MPI between them goes through
shared memory (UCX takes the nodes for one host) unless the ranks are told
:data:`OVER_LINKS`: MPICH's OFI netmod with the ``tcp`` provider on ``eth0``, whose traffic
crosses the links (1 MiB took 87 ms over a link shaped to 100 Mbit/s). UCX with
``UCX_TLS=tcp,self`` crosses them too, but its address, put into PMI-2, often reached
slurmstepd garbled ("value not properly terminated in client request") and the job failed
in ``MPI_Init``: in 4 of 4 starts of one program, 0 of 6 with OFI. With the wheel's UCX
defaults it happened once, in CI under load (the request slurmstepd printed held text of
MPICH's own parameter descriptions: the wheel's PMI-2 client sent bytes from past its
buffer); 0 of 48 starts here, loaded or not.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import zlib
from pathlib import Path
from typing import Any

from shoal import netns
from shoal.cluster import slurm as wlm  # the workload manager; `slurm` is up()'s flag
from shoal.errors import UsageError
from shoal.files import write_text

NAME = re.compile(r"[a-z][a-z0-9]{0,7}$")
MAX_NODES = 64
DEFAULT_ROOT = "/run/shoal-cluster"
NET_PREFIX = "10.77"
OVER_LINKS = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"}
"""The ranks' environment that makes MPI traffic between nodes cross their links."""
DAEMONS = ("munged", "slurmctld", "slurmd")
"""The daemons of a cluster: each names a file of its state directory in its arguments."""


def state_root() -> Path:
    """The directory holding one state directory per cluster name."""
    return Path(os.environ.get("SHOAL_CLUSTER_DIR") or DEFAULT_ROOT)


class EmulatedCluster:
    """The emulated cluster ``name``: its namespaces, bridge, subnet and Slurm ports derive
    from the name, so clusters of different names run side by side. Methods act on the
    live cluster through its state directory, so any process may call them."""

    def __init__(self, name: str = "shoal"):
        if not NAME.match(name):
            raise UsageError(f"cluster name {name!r}: use 1 to 8 lower-case letters and "
                             "digits, starting with a letter")
        self.name = name
        self.dir = state_root().absolute() / name
        if any(self.dir.is_relative_to(private) for private in ("/tmp", "/dev/shm")):
            raise UsageError(f"SHOAL_CLUSTER_DIR={state_root()} lies under /tmp or /dev/shm, "
                             "which every node has its own of: choose another directory")
        self.paths = wlm.Paths(self.dir)
        self.bridge = f"shc-{name}"
        self.ns_prefix = f"shoal-{name}-"

    # ---------------------------------------------------------------- up and down

    def up(self, nodes: int = 3, slurm: bool = True, delay: float | None = None,
           loss: float | None = None, rate: float | None = None,
           share: tuple[str, ...] = ()) -> dict[str, Any]:
        """Make the cluster of ``nodes`` nodes, with Slurm unless ``slurm`` is False and
        the links shaped if any of ``delay`` (s), ``loss`` (fraction), ``rate`` (bytes/s)
        is given; ``share``: directories under ``/tmp`` that every node sees all the same
        (a checkout or a virtual environment there: the rest of each node's /tmp is its
        own). Returns :meth:`status`. On any failure removes what it made."""
        if not 1 <= nodes <= MAX_NODES:
            raise UsageError(f"a cluster has 1 to {MAX_NODES} nodes (got {nodes})")
        shared = _under_tmp(share)
        _qdiscs(delay, loss, rate)  # refuse bad shaping before making anything
        why = netns.available() or (wlm.missing() if slurm else None)
        if why:
            raise UsageError(f"cannot make an emulated cluster here: {why}")
        self.dir.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            self.dir.mkdir(mode=0o755)
        except FileExistsError:
            raise UsageError(f"cluster {self.name!r} is up already (state in {self.dir}): "
                             f"stop it first with `shoal cluster down{self._flag()}`") from None
        try:
            self._make(nodes, slurm, shared)
            if (delay, loss, rate) != (None, None, None):
                self.shape(delay, loss, rate)
        except BaseException:
            self.down()
            raise
        return self.status()

    def _make(self, count: int, slurm: bool, shared: list[Path]) -> None:
        x = self._free_subnet()
        head = f"{NET_PREFIX}.{x}.1"
        state: dict[str, Any] = {
            "name": self.name, "subnet": f"{NET_PREFIX}.{x}.0/24", "bridge": self.bridge,
            "head": [socket.gethostname().split(".")[0], head], "slurm": slurm,
            "nodes": [{"name": f"n{i}", "ns": f"{self.ns_prefix}n{i}",
                       "addr": f"{NET_PREFIX}.{x}.{i + 1}", "veth": f"{self.bridge}-{i}"}
                      for i in range(1, count + 1)],
            "shape": {}, "share": [str(p) for p in shared]}
        self._save(state)  # first, so that down() finds all that follows
        self._make_network(state)
        hosts = [f"{head} {state['head'][0]}", *(f"{n['addr']} {n['name']}"
                                                  for n in state["nodes"])]
        (self.dir / "hosts").write_text("127.0.0.1 localhost\n" + "\n".join(hosts) + "\n")
        names = [n["name"] for n in state["nodes"]]
        for name in names:
            tmp = self.paths.node(name) / "tmp"
            tmp.mkdir(parents=True)
            tmp.chmod(0o1777)
            for path in shared:  # (the mount points of the shared directories)
                (tmp / path.relative_to("/tmp")).mkdir(parents=True, exist_ok=True)
        if slurm:
            self._start_slurm(state)
        for node in state["nodes"]:
            node["pid"] = self._start_node(node, slurm, shared)
        self._save(state)
        if slurm:
            wlm.wait_idle(self.paths, names)

    def _free_subnet(self) -> int:
        """The third byte of a 10.77.X.0/24 that no address of this host uses: the one the
        name hashes to, else the next free one."""
        used = {int(m) for m in re.findall(rf"inet {re.escape(NET_PREFIX)}\.(\d+)\.",
                                           netns.run("ip", "-o", "-4", "addr", "show"))}
        first = zlib.crc32(self.name.encode()) % 254
        for k in range(254):
            x = (first + k) % 254 + 1
            if x not in used:
                return x
        raise UsageError(f"no free subnet left in {NET_PREFIX}.0.0/16")

    def _make_network(self, state: dict[str, Any]) -> None:
        netns.run("ip", "link", "add", self.bridge, "type", "bridge")
        netns.run("ip", "addr", "add", f"{state['head'][1]}/24", "dev", self.bridge)
        netns.run("ip", "link", "set", self.bridge, "up")
        for node in state["nodes"]:
            ns, veth = node["ns"], node["veth"]
            netns.run("ip", "netns", "add", ns)
            netns.run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                      "netns", ns)
            netns.run("ip", "link", "set", veth, "master", self.bridge, "up")
            for cmd in (("addr", "add", f"{node['addr']}/24", "dev", "eth0"),
                        ("link", "set", "eth0", "up"), ("link", "set", "lo", "up"),
                        ("route", "add", "default", "via", state["head"][1])):
                netns.run("ip", "-n", ns, *cmd)

    def _start_slurm(self, state: dict[str, Any]) -> None:
        ports = wlm.free_ports(2)
        wlm.prepare(self.paths, [n["name"] for n in state["nodes"]])
        self.paths.conf.write_text(wlm.conf_text(
            self.name, self.paths, tuple(state["head"]),
            [(n["name"], n["addr"]) for n in state["nodes"]], (ports[0], ports[1])))
        state["ports"] = {"slurmctld": ports[0], "slurmd": ports[1]}
        state["munged"] = wlm.start_munged(self.paths)
        self._save(state)
        state["slurmctld"] = wlm.start_slurmctld(self.paths)
        self._save(state)

    def _start_node(self, node: dict[str, Any], slurm: bool, shared: list[Path]) -> int:
        """Start the process that holds the node's namespaces (its slurmd, or a ``sleep``)
        with the node's hostname, /tmp (the ``shared`` directories bound into it),
        /dev/shm and /etc/hosts; its pid."""
        d = self.paths.node(node["name"])
        binds = [f"mount --bind {shlex.quote(str(p))} "
                 f"{shlex.quote(str(d / 'tmp' / p.relative_to('/tmp')))}" for p in shared]
        if slurm:
            argv = wlm.slurmd_argv(self.paths, node["name"])
            pid_file = self.paths.slurmd_pid(node["name"])
        else:
            pid_file = d / "holder.pid"
            argv = ["sh", "-c", "sleep infinity </dev/null >/dev/null 2>&1 & echo $! > "
                    + shlex.quote(str(pid_file))]
        setup = " && ".join([
            f"hostname {node['name']}",
            f"mount --bind {shlex.quote(str(self.dir / 'hosts'))} /etc/hosts",
            "mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm",
            *binds,
            f"mount --rbind {shlex.quote(str(d / 'tmp'))} /tmp",
            'exec "$@"'])
        return netns.start_daemon(
            ["nsenter", f"--net=/run/netns/{node['ns']}", "unshare", "--uts", "--mount",
             "--propagation", "private", "sh", "-c", setup, "sh", *argv],
            pid_file, d / "start.log")

    def down(self) -> bool:
        """Stop every daemon and process of the cluster and remove its namespaces, bridge
        and state; also after a half-made ``up`` or dead daemons. False if nothing of the
        cluster was there; never raises for what is already gone."""
        _need_root()
        found = self.dir.exists()
        daemons = netns.find_processes(DAEMONS, f"{self.dir}/")  # named in their arguments
        netns.stop(daemons, grace=1.0)
        namespaces = self._namespaces()
        netns.remove(namespaces, first=signal.SIGKILL)
        links = re.findall(rf"^\d+: ({re.escape(self.bridge)}(?:-\d+)?)[@:]",
                           netns.run("ip", "-o", "link", "show"), re.MULTILINE)
        for link in sorted(links, reverse=True):  # the veths, then the bridge
            netns.run_quiet("ip", "link", "del", link)
        shutil.rmtree(self.dir, ignore_errors=True)
        return found or bool(daemons) or bool(namespaces) or bool(links)

    def _namespaces(self) -> list[str]:
        listed = netns.run("ip", "netns", "list").split("\n")
        return sorted(line.split()[0] for line in listed
                      if line.startswith(self.ns_prefix))

    # ---------------------------------------------------------------- looking at it

    def status(self) -> dict[str, Any]:
        """The cluster: its state directory, subnet, daemons, and per node the hostname,
        address, whether its slurmd (or holder) runs, its Slurm state, link and shaping."""
        state = self._state()
        states = wlm.node_states(self.paths) if state["slurm"] else {}
        nodes = []
        for node in state["nodes"]:
            nodes.append({"node": node["name"], "address": node["addr"],
                          "namespace": node["ns"], "pid": node.get("pid"),
                          "alive": self._anchor(node) is not None,
                          "slurm": states.get(node["name"], "-" if not state["slurm"] else "?"),
                          "link": self._link_state(node["veth"]),
                          "shape": state["shape"].get(node["name"], {})})
        daemons = {d: netns.alive(state[d]) and netns.command_name(state[d]) == d
                   for d in ("munged", "slurmctld") if d in state}
        return {"name": self.name, "dir": str(self.dir), "subnet": state["subnet"],
                "slurm": state["slurm"], "ports": state.get("ports", {}),
                "daemons": daemons, "nodes": nodes}

    def env(self) -> dict[str, str]:
        """The environment the Slurm commands need to use this cluster."""
        if not self._state()["slurm"]:
            raise UsageError(f"cluster {self.name!r} runs without Slurm: no environment "
                             "to set")
        return wlm.env(self.paths)

    # ---------------------------------------------------------------- acting on nodes

    def command(self, node: str, argv: list[str], cwd: str | None = None) -> list[str]:
        """The command line that runs ``argv`` inside ``node`` (its network, UTS and mount
        namespaces, those of its slurmd), in ``cwd`` (default: the current directory)."""
        _need_root()
        n = self._node(node)
        pid = self._anchor(n)
        if pid is None:
            raise UsageError(f"node {node} of cluster {self.name!r} is down (its "
                             f"{'slurmd' if self._state()['slurm'] else 'holder'} died): "
                             f"`shoal cluster down{self._flag()}` and up again")
        return ["nsenter", "-t", str(pid), "-n", "-u", "-m", f"--wd={cwd or os.getcwd()}",
                *argv]

    def exec(self, node: str, argv: list[str], **popen_kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside ``node``; ``popen_kwargs`` go to :class:`subprocess.Popen`."""
        return subprocess.Popen(self.command(node, argv, popen_kwargs.get("cwd")),
                                **popen_kwargs)

    def pids(self, node: str) -> list[int]:
        """The processes in ``node``'s network namespace (its slurmd included)."""
        return netns.pids_in(self._node(node)["ns"])

    def kill(self, node: str, include_slurmd: bool = False) -> list[int]:
        """SIGKILL the processes of ``node``: all but its slurmd (or holder) and slurmstepds,
        as when a node's programs die (Slurm sees its tasks killed, and the slurmstepds then
        end; killing them too would leave srun waiting for ever); with ``include_slurmd``
        every process, as when the whole node dies (Slurm marks it down after
        ``SlurmdTimeout``). Returns the pids killed."""
        _need_root()
        n = self._node(node)
        anchor = self._anchor(n)
        victims = [p for p in netns.pids_in(n["ns"]) if include_slurmd
                   or (p != anchor and netns.command_name(p) != "slurmstepd")]
        netns.stop(victims, first=signal.SIGKILL)
        return victims

    def link(self, node: str, up: bool) -> None:
        """Take ``node``'s link down (the node can reach nothing, nothing reaches it) or up."""
        _need_root()
        netns.run("ip", "link", "set", self._node(node)["veth"], "up" if up else "down")

    def shape(self, delay: float | None = None, loss: float | None = None,
              rate: float | None = None, node: str | None = None) -> None:
        """Shape the links of ``node`` (default: every node): ``delay`` the one-way delay
        (s) between two shaped nodes and ``loss`` the fraction of packets lost between them
        (``tc netem``), ``rate`` each link's rate (bytes/s) in each direction (``tc tbf``).
        Replaces the node's earlier shaping; all None removes it."""
        _need_root()
        qdiscs = _qdiscs(delay, loss, rate)
        settings = {k: v for k, v in (("delay", delay), ("loss", loss), ("rate", rate))
                    if v is not None}
        state = self._state()
        for n in [self._node(node)] if node else state["nodes"]:
            state["shape"].pop(n["name"], None)  # until it is all in place
            try:
                ends = ((["tc"], n["veth"]), (["ip", "netns", "exec", n["ns"], "tc"], "eth0"))
                for tc, dev in ends:  # the bridge's end, then the node's
                    netns.run_quiet(*tc, "qdisc", "del", "dev", dev, "root")
                    for qdisc in qdiscs:
                        _add_qdisc([*tc, "qdisc", "add", "dev", dev, *qdisc])
                if settings:
                    state["shape"][n["name"]] = settings
            finally:
                self._save(state)

    # ---------------------------------------------------------------- internals

    def _state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads((self.dir / "cluster.json").read_text())
        except (OSError, ValueError):
            raise UsageError(f"cluster {self.name!r} is not up: start it with "
                             f"`shoal cluster up{self._flag()}`") from None
        return state

    def _save(self, state: dict[str, Any]) -> None:
        write_text(self.dir / "cluster.json", json.dumps(state, indent=1) + "\n")

    def _node(self, node: str) -> dict[str, Any]:
        nodes = self._state()["nodes"]
        for n in nodes:
            if n["name"] == node:
                return n
        raise UsageError(f"no node {node!r} in cluster {self.name!r}: its nodes are "
                         f"{', '.join(n['name'] for n in nodes)}")

    def _anchor(self, node: dict[str, Any]) -> int | None:
        """The pid of the process holding ``node``'s namespaces, if it still runs."""
        pid = node.get("pid")
        if pid and netns.alive(pid) and netns.command_name(pid) in ("slurmd", "sleep"):
            return int(pid)
        return None

    @staticmethod
    def _link_state(veth: str) -> str:
        try:
            out = netns.run("ip", "-o", "link", "show", "dev", veth)
        except UsageError:
            return "gone"
        flags = out.partition("<")[2].partition(">")[0].split(",")
        return "up" if "UP" in flags else "down"

    def _flag(self) -> str:
        return "" if self.name == "shoal" else f" --name {self.name}"


def _need_root() -> None:
    if os.geteuid() != 0:
        raise UsageError("the emulated cluster needs root (namespaces, links, daemons)")


def _under_tmp(paths: tuple[str, ...]) -> list[Path]:
    """The directories of ``share``, each an existing directory under /tmp."""
    out = []
    for text in paths:
        path = Path(text).resolve()
        if not path.is_dir() or not path.is_relative_to("/tmp") or path == Path("/tmp"):
            raise UsageError(f"--share {text}: give a directory under /tmp (every other "
                             "path is shared already)")
        out.append(path)
    return out


NO_NETEM = ("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM, module sch_netem): "
            "delay and loss cannot be emulated here, rate can")


def _add_qdisc(cmd: list[str]) -> None:
    try:
        netns.run(*cmd)
    except UsageError as exc:
        if "netem" in cmd and "qdisc kind is unknown" in str(exc):
            raise UsageError(NO_NETEM) from None
        raise


def _qdiscs(delay: float | None, loss: float | None, rate: float | None) -> list[list[str]]:
    """The qdiscs of one end of a link (each the arguments after ``tc qdisc add dev D``):
    a token bucket for ``rate``, with netem below it for ``delay`` and ``loss``; the two
    ends of a path between two nodes each add half the delay and lose such a fraction that
    together they lose ``loss``. Empty if nothing is set."""
    netem = []
    if delay is not None:
        if not 0 <= delay <= 10:
            raise UsageError(f"delay must lie between 0 and 10 s (got {delay:g} s)")
        netem += ["delay", f"{delay / 2 * 1e6:.0f}us"]
    if loss is not None:
        if not 0 <= loss < 1:
            raise UsageError(f"loss must be at least 0% and below 100% (got {loss:g})")
        netem += ["loss", f"{(1 - math.sqrt(1 - loss)) * 100:.6f}%"]
    netem = ["netem", *netem, "limit", "100000"] if netem else []
    if rate is None:
        return [["root", *netem]] if netem else []
    if rate <= 0:
        raise UsageError(f"rate must be positive (got {rate:g} bytes/s)")
    burst = max(int(rate * 1e-3), 4000)  # 1 ms of traffic, at least a few packets
    tbf = ["tbf", "rate", f"{rate * 8:.0f}bit", "burst", str(burst), "latency", "500ms"]
    if not netem:
        return [["root", *tbf]]
    return [["root", "handle", "1:", *tbf], ["parent", "1:1", "handle", "10:", *netem]]
