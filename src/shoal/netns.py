"""Small helpers for Linux network namespaces and the processes in them, shared by the
emulated clusters.

Both the two-node max-rate emulation (:mod:`shoal.netmodel.emulate`) and the Slurm cluster
of :mod:`shoal.cluster` build namespaces, veth pairs and ``tc`` qdiscs by running ``ip``,
``tc``, ``nsenter`` and ``unshare``; a failing command becomes a :class:`UsageError` that
carries its stderr, and :func:`available` says in one line why none of it can work here.
The cluster also starts daemons inside namespaces and must find and end every process
there, whoever started it: :func:`pids_in`, :func:`find_processes`, :func:`stop`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from shoal.errors import UsageError

TIMEOUT = 20.0
"""Seconds any one namespace command may take (they take milliseconds)."""

TOOLS = ("ip", "tc", "nsenter", "unshare")
"""The commands the namespaces are made and entered with."""

START_TIMEOUT = 10.0
"""Seconds a daemon may take to start and write its pid file."""


def run(*cmd: str, timeout: float = TIMEOUT) -> str:
    """Run ``cmd`` and return its stdout; raise :class:`UsageError` with its stderr when it
    fails or does not end within ``timeout`` seconds."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{' '.join(cmd)} did not end within {timeout:g} s") from None
    except OSError as exc:
        raise UsageError(f"cannot run {cmd[0]}: {exc.strerror}") from None
    if done.returncode:
        raise UsageError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return done.stdout


def run_quiet(*cmd: str, timeout: float = TIMEOUT) -> bool:
    """Run ``cmd`` for cleaning up: True if it succeeded; failures and timeouts (a thing
    already gone) are ignored."""
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return done.returncode == 0


def in_ns(ns: str, *cmd: str, timeout: float = TIMEOUT) -> str:
    """Run ``cmd`` in the network namespace ``ns`` (``ip netns exec``), as :func:`run`."""
    return run("ip", "netns", "exec", ns, *cmd, timeout=timeout)


def available(tools: tuple[str, ...] = TOOLS, probe_prefix: str = "shoal") -> str | None:
    """None if network namespaces can be made here with ``tools``, else a one-line reason:
    not Linux, not root, a missing tool, or the kernel refuses (e.g. in an unprivileged
    container)."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    for tool in tools:
        if shutil.which(tool) is None:
            package = "util-linux" if tool in ("nsenter", "unshare") else "iproute2"
            return f"the '{tool}' command is missing ({package})"
    probe = f"{probe_prefix}probe{os.getpid()}"
    try:
        run("ip", "netns", "add", probe)
    except UsageError as exc:
        return f"cannot create a network namespace: {exc}"
    run_quiet("ip", "netns", "del", probe)
    return None


def pids_in(ns: str) -> list[int]:
    """The live processes (not zombies) whose network namespace is ``ns`` (a name under
    ``/run/netns``): found by comparing each ``/proc/PID/ns/net`` with the namespace file,
    the one way that also finds what was started there by other means than ours."""
    try:
        target = os.stat(f"/run/netns/{ns}")
    except OSError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:  # ended meanwhile, or a kernel thread
            continue
        if (st.st_ino, st.st_dev) == (target.st_ino, target.st_dev) and alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def remove(namespaces: list[str], first: int = signal.SIGTERM) -> None:
    """End what runs in each of ``namespaces`` (see :func:`stop`), then delete them; what is
    already gone is fine."""
    for ns in namespaces:
        stop(pids_in(ns), first=first)
    for ns in namespaces:
        run_quiet("ip", "netns", "del", ns)


def alive(pid: int) -> bool:
    """True if process ``pid`` exists and is not a zombie (a dead child not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def find_processes(commands: tuple[str, ...], needle: str) -> list[int]:
    """The live processes running one of ``commands`` with ``needle`` in their arguments
    (e.g. the path of a configuration file): daemons found without their pid files."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or command_name(int(entry.name)) not in commands:
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace")
        except OSError:
            continue
        if needle in args and alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def command_name(pid: int) -> str:
    """The command name of ``pid`` (``/proc/PID/comm``), or "" if it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def stop(pids: list[int], grace: float = 2.0, first: int = signal.SIGTERM) -> None:
    """End ``pids``: signal ``first``, up to ``grace`` seconds to exit, then SIGKILL (and 2 s
    more). Processes already gone are fine; a zombie counts as gone (this does not reap the
    children of this process: their owner, a Popen, will)."""
    for sig, wait in ((first, grace), (signal.SIGKILL, 2.0)):
        pending = [p for p in pids if alive(p)]
        for pid in pending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        end = time.monotonic() + wait
        while pending and time.monotonic() < end:
            pending = [p for p in pending if alive(p)]
            if pending:
                time.sleep(0.02)
        if not pending:
            return


def start_daemon(argv: list[str], pid_file: Path, out: Path) -> int:
    """Run the self-daemonizing ``argv`` (its early output to ``out``) and wait for its pid
    file."""
    with out.open("ab") as log:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  timeout=START_TIMEOUT, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise UsageError(f"{argv[0]} did not start within {START_TIMEOUT:g} s: see "
                             f"{out}") from None
    if done.returncode:
        raise UsageError(f"{argv[0]} failed to start: {tail(out)}")
    return wait_pid_file(pid_file, argv[0], out)


def wait_pid_file(path: Path, what: str, log: Path) -> int:
    """The pid in ``path`` once the daemon ``what`` wrote it and runs."""
    end = time.monotonic() + START_TIMEOUT
    while time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError):
            pid = int(path.read_text())
            if alive(pid):
                return pid
        time.sleep(0.02)
    raise UsageError(f"{what} did not start: {tail(log)}")


def tail(path: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of a log file, on one line, to name why a daemon failed."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"(no log {path})"
    return " | ".join(text[-lines:]) + f" (log: {path})"
