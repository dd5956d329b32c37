"""Read the local node's state from the OS: what a gossip record publishes by default.

The CPU a node's processes use (:class:`CpuMeter`) is what placement needs (a load average
counts waiting processes, not cores taken, and lags a minute behind): on a real node the
kernel's totals (``/proc/stat``); on an emulated node (a network namespace that shares the
machine's kernel with the other nodes, :mod:`shoal.cluster.emulated`) the CPU time of the
processes in the daemon's network namespace, since the kernel's totals are the machine's.
A daemon is on an emulated node when its network namespace is a named one (``ip netns``,
listed in ``/run/netns``); a real node's daemon runs in the host's namespace.
"""

from __future__ import annotations

import os

from shoal.memory import node_available


def local_state() -> dict:
    """The default state record: 1-minute load average, available memory (bytes), cores."""
    return {"load": os.getloadavg()[0], "free_mem": node_available(),
            "cores": os.cpu_count() or 1}


def load_averages() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (zeros where the OS has none)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def shoal_jobs(host: str, proc: str = "/proc") -> list[set[int]]:
    """The live PEs (their pids) of each job of ``shoal run`` on this host: the job
    directories named by the ``SHOAL_JOBDIR`` of the processes this user may read (every
    process for root), plus the node-local ones in the temporary directory; a PE counts
    when its note (``pes/PID@HOST``, :meth:`shoal.jobdir.JobDir.note_pe`) names a live
    process here."""
    import glob
    import tempfile

    from shoal.jobdir import ENV, PES, alive

    dirs = set(glob.glob(os.path.join(tempfile.gettempdir(), "shoal-job-*")))
    marker = f"{ENV}=".encode()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "environ"), "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(marker):
                dirs.add(os.fsdecode(item[len(marker):]))
    jobs = []
    for d in dirs:
        live = {pid for pid in map(_pid_of, glob.glob(os.path.join(d, PES, f"*@{host}")))
                if pid is not None and alive(pid)}
        if live:
            jobs.append(live)
    return jobs


def _pid_of(note: str) -> int | None:
    head = os.path.basename(note).split("@", 1)[0]
    return int(head) if head.isdigit() else None


MIN_SPAN = 1.0  # seconds: a share of CPU measured over less is mostly the scheduler's noise


class CpuMeter:
    """Cores busy on this node, and how many of them shoal's processes took, averaged
    between two samples at least :data:`MIN_SPAN` apart (:meth:`sample` returns the last
    figures until then). ``scope`` is ``"node"`` (the kernel's totals) or ``"netns"`` (the
    processes of this network namespace); by default ``"netns"`` in a named network
    namespace (an emulated node), else ``"node"``. A process is shoal's when its
    environment names a job directory (``SHOAL_JOBDIR``: the PEs and the launcher of a
    ``shoal run``), read once per process (a process this user may not read is not)."""

    def __init__(self, proc: str = "/proc", scope: str | None = None,
                 named: str = "/run/netns"):
        from shoal.jobdir import ENV

        self.proc = proc
        self.hz = os.sysconf("SC_CLK_TCK")
        self._ns = _netns(proc, "self")
        self.scope = scope or ("netns" if _is_named(self._ns, named) else "node")
        self._marker = f"{ENV}=".encode()
        # pid -> (counted: in our namespace, or any with scope node; shoal's)
        self._kind: dict[int, tuple[bool, bool]] = {}
        self._last: tuple[float, float, dict[int, int]] | None = None
        self.busy = self.shoal = 0.0

    def sample(self, now: float) -> tuple[float, float]:
        """(cores busy, cores shoal's processes took) since the last sample."""
        if self._last is not None and now - self._last[0] < MIN_SPAN:
            return self.busy, self.shoal
        ticks = self._per_pid()
        total = self._node_ticks() if self.scope == "node" else float(sum(ticks.values()))
        if self._last is not None:
            was_at, was_total, was = self._last
            span = (now - was_at) * self.hz
            # a pid first seen now started within the span: all its time counts
            grown = {pid: t - was.get(pid, 0) for pid, t in ticks.items()}
            busy = total - was_total if self.scope == "node" else sum(grown.values())
            self.busy = max(0.0, busy / span)
            self.shoal = max(0.0, sum(g for pid, g in grown.items() if self._kind[pid][1])
                             / span)
        self._last = (now, total, ticks)
        return self.busy, self.shoal

    def _per_pid(self) -> dict[int, int]:
        """utime + stime (ticks) of the processes to follow: this namespace's (scope
        netns), shoal's only (scope node: the kernel's totals give the rest)."""
        try:
            pids = {int(p) for p in os.listdir(self.proc) if p.isdigit()}
        except OSError:
            pids = set()
        for gone in self._kind.keys() - pids:
            del self._kind[gone]
        for pid in pids - self._kind.keys():
            counted = self.scope == "node" or _netns(self.proc, str(pid)) == self._ns
            self._kind[pid] = (counted, counted and self._is_shoal(pid))
        out = {}
        for pid in pids:
            counted, shoal = self._kind[pid]
            if shoal or (counted and self.scope == "netns"):
                t = _cpu_ticks(self.proc, pid)
                if t is not None:
                    out[pid] = t
        return out

    def _is_shoal(self, pid: int) -> bool:
        try:
            with open(os.path.join(self.proc, str(pid), "environ"), "rb") as fh:
                env = fh.read()
        except OSError:
            return False
        return any(item.startswith(self._marker) for item in env.split(b"\0"))

    def _node_ticks(self) -> float:
        """Busy ticks of every core since boot (user, nice, system, irq, softirq, steal)."""
        try:
            with open(os.path.join(self.proc, "stat")) as fh:
                fields = fh.readline().split()
        except OSError:
            return 0.0
        if not fields or fields[0] != "cpu":
            return 0.0
        v = [float(x) for x in fields[1:9]]
        return v[0] + v[1] + v[2] + sum(v[5:8])


def _cpu_ticks(proc: str, pid: int) -> int | None:
    """utime + stime of ``pid`` in clock ticks (None once it is gone)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()  # the command name may hold spaces
    return int(rest[11]) + int(rest[12]) if len(rest) > 12 else None


def _netns(proc: str, pid: str) -> str | None:
    try:
        return os.readlink(os.path.join(proc, pid, "ns", "net"))
    except OSError:
        return None


def _is_named(ns: str | None, named: str) -> bool:
    """Whether the namespace ``ns`` (``net:[inode]``) is one of ``ip netns``'s."""
    try:
        inodes = {os.stat(os.path.join(named, n)).st_ino for n in os.listdir(named)}
    except OSError:
        return False
    return ns is not None and ns.startswith("net:[") and int(ns[5:-1]) in inodes
