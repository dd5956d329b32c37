"""An emulated two-node cluster on one Linux host, to test the max-rate model for real.

Every rank gets its own network namespace; its link to its node's router is shaped to R_C
(``tc tbf``, both directions), and the two node routers are joined by a link shaped to R_N.
So k processes of node A sending to node B get min(R_N, k R_C), the premise of eq. 3 of
Gropp16. mpiexec starts each rank inside its namespace through hydra's ssh launcher with a
script that runs ``ip netns exec``; the root namespace reaches the routers through an
unshaped control link (hydra's proxies connect back to mpiexec over it). MPICH's UCX netmod
is told to use TCP only (``UCX_TLS=tcp,self``) on every device (whatever the caller's
``UCX_NET_DEVICES``): otherwise it would take shared memory and bypass the shaped links.

Needs root, ``ip`` and ``tc``. :class:`Cluster` is a context manager that removes everything
it made, whatever happens to it; what a killed owner left (a ``shoal netmodel emulate`` that
got SIGKILL) the next cluster removes first (:func:`clear_leftovers`). The addresses are
fixed, so one emulated cluster runs on a machine at a time: a second is refused while the
first one's owner lives.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shoal import netns
from shoal.errors import UsageError

PREFIX = "shl"


def available() -> str | None:
    """None if namespaces and shaping can be made here, else why not."""
    return netns.available(("ip", "tc"), PREFIX)


def _shape(ns: str, dev: str, rate_bps: float) -> None:
    """A token bucket of ``rate_bps`` bytes/s with a small bucket and a long queue."""
    bits = int(rate_bps * 8)
    netns.in_ns(ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{bits}bit",
        "burst", "4000", "latency", "2s")


def clear_leftovers() -> None:
    """Remove the namespaces and control links of emulated clusters whose owner has died
    (each name carries its owner's pid), ending what still runs in them (hydra's proxies,
    ranks); refuse, naming it, while another live process's cluster is up: the addresses
    are fixed, and a second cluster beside it hung its benchmark."""
    owners: dict[int, list[str]] = {}
    for line in netns.run("ip", "netns", "list").splitlines():
        found = re.match(rf"({PREFIX}(\d+)(?:r[ab]|[ab]\d+))\b", line)
        if found:
            owners.setdefault(int(found[2]), []).append(found[1])
    owners.pop(os.getpid(), None)
    for pid in owners:
        if netns.alive(pid):  # (before anything is removed)
            raise UsageError(f"another emulated cluster is up (process {pid}, namespaces "
                             f"{PREFIX}{pid}*): one runs at a time on a machine; wait for it "
                             f"to end, or end that process")
    for pid, names in owners.items():
        netns.remove(names)
        for node in "ab":
            netns.run_quiet("ip", "link", "del", f"{PREFIX}{pid}c{node}")
        print(f"shoal: removed what a dead emulated cluster left (process {pid}: "
              f"{len(names)} namespaces)", file=sys.stderr)


class Cluster:
    """Two emulated nodes of ``per_node`` ranks each; per-process rate ``rc`` and node rate
    ``rn`` in bytes/s. ``hosts`` lists the rank addresses in rank order (node A first)."""

    def __init__(self, rc: float, rn: float, per_node: int):
        if rc <= 0 or rn <= 0:
            raise UsageError("--rc and --rn must be positive rates")
        if not 1 <= per_node <= 32:
            raise UsageError("--pairs must lie in 1..32")
        self.rc, self.rn, self.per_node = rc, rn, per_node
        self.tag = str(os.getpid())  # (the owner, for clear_leftovers; "shl" + 7 digits +
        # "ca" fits a link name's 15 characters)
        self.namespaces: list[str] = []
        self.hosts: list[str] = []
        self.ns_of: dict[str, str] = {}
        self.root_links: list[str] = []
        self.dir = None

    def __enter__(self) -> Cluster:
        why = available()
        if why:
            raise UsageError(f"cannot emulate a cluster here: {why}")
        clear_leftovers()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _name(self, what: str) -> str:
        return f"{PREFIX}{self.tag}{what}"

    def _add_ns(self, name: str) -> str:
        netns.run("ip", "netns", "add", name)
        self.namespaces.append(name)
        netns.in_ns(name, "ip", "link", "set", "lo", "up")
        return name

    def _build(self) -> None:
        routers = {}
        for node, net in (("a", 1), ("b", 2)):
            r = self._add_ns(self._name(f"r{node}"))
            routers[node] = (r, net)
            netns.in_ns(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            for i in range(self.per_node):
                p = self._add_ns(self._name(f"{node}{i}"))
                host = f"10.{70 + net}.{i}.2"
                inner, outer = f"e{node}{i}", f"p{node}{i}"
                netns.run("ip", "link", "add", inner, "netns", p, "type", "veth", "peer", outer,
                     "netns", r)
                netns.in_ns(p, "ip", "addr", "add", f"{host}/30", "dev", inner)
                netns.in_ns(r, "ip", "addr", "add", f"10.{70 + net}.{i}.1/30", "dev", outer)
                netns.in_ns(p, "ip", "link", "set", inner, "up")
                netns.in_ns(r, "ip", "link", "set", outer, "up")
                netns.in_ns(p, "ip", "route", "add", "default", "via", f"10.{70 + net}.{i}.1")
                _shape(p, inner, self.rc)
                _shape(r, outer, self.rc)
                self.hosts.append(host)
                self.ns_of[host] = p
        (ra, _), (rb, _) = routers["a"], routers["b"]
        netns.run("ip", "link", "add", "ab", "netns", ra, "type", "veth", "peer", "ba", "netns", rb)
        netns.in_ns(ra, "ip", "addr", "add", "10.70.0.1/30", "dev", "ab")
        netns.in_ns(rb, "ip", "addr", "add", "10.70.0.2/30", "dev", "ba")
        netns.in_ns(ra, "ip", "link", "set", "ab", "up")
        netns.in_ns(rb, "ip", "link", "set", "ba", "up")
        netns.in_ns(ra, "ip", "route", "add", "10.72.0.0/16", "via", "10.70.0.2")
        netns.in_ns(rb, "ip", "route", "add", "10.71.0.0/16", "via", "10.70.0.1")
        _shape(ra, "ab", self.rn)
        _shape(rb, "ba", self.rn)
        # unshaped control links from the root namespace to each router
        for node, (r, net) in routers.items():
            root_dev, r_dev = self._name(f"c{node}"), "ctl"
            netns.run("ip", "link", "add", root_dev, "type", "veth", "peer", r_dev, "netns", r)
            self.root_links.append(root_dev)
            netns.run("ip", "addr", "add", f"10.69.{net}.1/30", "dev", root_dev)
            netns.run("ip", "link", "set", root_dev, "up")
            netns.in_ns(r, "ip", "addr", "add", f"10.69.{net}.2/30", "dev", r_dev)
            netns.in_ns(r, "ip", "link", "set", r_dev, "up")
            netns.in_ns(r, "ip", "route", "add", "10.69.0.0/16", "via", f"10.69.{net}.1")
            netns.run("ip", "route", "replace", f"10.{70 + net}.0.0/16", "via", f"10.69.{net}.2")
        self.dir = Path(tempfile.mkdtemp(prefix="shoal-emulate-"))
        self.launcher = self.dir / "netns-launch"
        lines = ["#!/bin/sh", "# hydra calls it as ssh: netns-launch [-x] [-o OPT] HOST COMMAND...",
                 'while [ $# -gt 0 ]; do', '  case "$1" in',
                 '    -o|-p|-l|-i|-F) shift 2 ;;', '    -*) shift ;;', '    *) break ;;',
                 '  esac', 'done', 'host="$1"; shift', 'case "$host" in']
        lines += [f'  {h}) ns={ns} ;;' for h, ns in self.ns_of.items()]
        lines += ['  *) echo "netns-launch: unknown host $host" >&2; exit 1 ;;', "esac",
                  'exec ip netns exec "$ns" sh -c "$*"']
        self.launcher.write_text("\n".join(lines) + "\n")
        self.launcher.chmod(self.launcher.stat().st_mode | stat.S_IXUSR)
        self._wait_up()

    def _wait_up(self, timeout: float = 10.0) -> None:
        """Until every rank address answers from the root namespace: a TCP connection to a
        closed port is refused only if the packets went there and back."""
        end = time.monotonic() + timeout
        for host in self.hosts:
            while True:
                try:
                    socket.create_connection((host, 9), timeout=0.5).close()
                    break
                except ConnectionRefusedError:
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise UsageError(f"the emulated link to {host} did not come up") \
                            from None
                    time.sleep(0.1)

    def mpiexec(self) -> list[str]:
        """The launcher command that starts one rank per emulated process."""
        from shoal.launch import mpiexec

        return [*mpiexec(), "-launcher", "ssh", "-launcher-exec", str(self.launcher),
                "-hosts", ",".join(self.hosts), "-iface", self.root_links[0],
                "-genv", "UCX_TLS", "tcp,self", "-genv", "UCX_NET_DEVICES", "all",
                "-genv", "MPICH_CH4_NETMOD", "ucx"]

    def close(self) -> None:
        for link in self.root_links:
            netns.run_quiet("ip", "link", "del", link)
        for net in (1, 2):
            netns.run_quiet("ip", "route", "del", f"10.{70 + net}.0.0/16")
        for ns in reversed(self.namespaces):
            netns.run_quiet("ip", "netns", "del", ns)
        self.namespaces, self.root_links = [], []
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def run_benchmark(cluster: Cluster, ks, sizes: str, repeat: int, mode: str, min_time: str,
                  csv_path: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``shoal netmodel bench`` on every emulated process (node A's ranks first)."""
    cmd = [*cluster.mpiexec(), "-n", str(2 * cluster.per_node), sys.executable, "-m", "shoal",
           "netmodel", "bench", "--pseudo-nodes", f"2x{cluster.per_node}",
           "--k", ",".join(str(k) for k in ks), "--sizes", sizes, "--repeat", str(repeat),
           "--mode", mode, "--min-time", min_time, "--csv", csv_path]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
