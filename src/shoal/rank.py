"""The side of a process that runs as an MPI rank: what it is told by its launcher and
how it ends the job, apart from the launcher itself (:mod:`shoal.launch`, the parent side),
so the runtime imports no launcher code.

- :data:`RANK_VARIABLES`, :func:`require_mpi`: is this process a rank?
- :func:`abort_job`, :func:`abort_on_error`: an error on one rank ends every rank, its text
  shown first;
- :func:`refuse_singleton`: ``srun`` with no MPI plugin (or the wrong one) starts N
  processes that each see a job of one rank, silently;
- :func:`arm_kills`, :func:`die_in_recovery`: the failures ``shoal run --kill`` injects.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shoal.errors import ShoalError, UsageError
from shoal.jobdir import JobDir

RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
"""Set in every rank by the launchers shoal knows (MPICH's hydra, PMIx, Open MPI, srun with
an MPI plugin)."""
KILL_ENV = "SHOAL_KILL"  # the failures shoal run --kill injects: PE@seconds,...


def require_mpi(command: str) -> None:
    """Refuse to run ``command`` as a rank outside an MPI launcher (before MPI starts, so
    the user reads one line instead of each rank's abort)."""
    why = _singleton()
    if why is not None:
        raise UsageError(why)
    if not any(v in os.environ for v in RANK_VARIABLES):
        raise UsageError(f"{command} runs on MPI ranks: give -n N to launch them, or start "
                         f"it under mpiexec or srun")


@contextmanager
def abort_on_error(comm: Any) -> Iterator[None]:
    """Inside a rank: an exception prints ``rank R: traceback`` on stderr (a user's mistake,
    :class:`ShoalError`: ``rank R: shoal: error: message``) and aborts every rank of
    ``comm``'s job, so that no other rank waits forever. Under a launcher of shoal's, the
    rank notes itself in the job directory first (a rank killed by a signal is named)."""
    home = JobDir.of_rank()
    if home is not None:
        home.note_pe(comm.Get_rank())
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


def arm_kills(pe: int) -> None:
    """In a rank: the failures ``SHOAL_KILL`` injects into PE ``pe`` (a SIGKILL of this
    process after so many seconds; a daemon timer thread)."""
    spec = os.environ.get(KILL_ENV)
    if not spec:
        return
    for item in spec.split(","):
        target, _, when = item.partition("@")
        if int(target) == pe and float(when) < 0:
            global _DIE_IN_RECOVERY
            _DIE_IN_RECOVERY = pe
        elif int(target) == pe:
            timer = threading.Timer(float(when), _die, (pe,))
            timer.daemon = True
            timer.start()


_DIE_IN_RECOVERY: int | None = None  # the PE of this process if --kill PE@recovery names it


def die_in_recovery() -> None:
    """In an in-job recovery (:mod:`shoal.runtime.recovery`): ``--kill PE@recovery`` kills
    this process here, a second failure while the survivors recover from the first."""
    if _DIE_IN_RECOVERY is not None:
        _die(_DIE_IN_RECOVERY)


def _die(pe: int) -> None:
    """The failure ``--kill`` injects: note it for the launcher, then SIGKILL."""
    home = JobDir.of_rank()
    if home is not None:
        home.note_kill(pe)
    os.kill(os.getpid(), signal.SIGKILL)


def _singleton() -> str | None:
    """Why this process must not run, when ``srun`` started it as one of several tasks
    but MPI will see it as a job of its own: without the MPI plugin the MPI library speaks
    (``--mpi=none``, or PMIx for the mpich wheel) every task starts alone, each would run
    the whole program, and nothing says so."""
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", "")
    if not tasks.isdigit() or int(tasks) < 2 or any(v in os.environ for v in RANK_VARIABLES):
        return None
    return (f"srun started {tasks} tasks but MPI sees each one alone (a job of one rank): "
            "srun's MPI plugin does not match this MPI; pass --mpi=pmi2 to srun for shoal's "
            "embedded MPICH (or the plugin of your site's MPI), or use shoal run, which does")


def refuse_singleton() -> None:
    """In ``shoal.start``: end a task of such a step with exit code 2, task 0 saying why."""
    why = _singleton()
    if why is None:
        return
    if os.environ.get("SLURM_PROCID", "0") == "0":
        sys.stderr.write(f"shoal: error: {why}\n")
        sys.stderr.flush()
    sys.exit(2)
