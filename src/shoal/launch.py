"""Start MPI jobs and make a failing rank end the whole job.

shoal runs under the installed ``mpiexec``: by default the one of the ``mpich`` wheel, found
beside the Python interpreter; ``SHOAL_MPIEXEC`` names another launcher (``srun``, a site
``mpiexec``). mpi4py is imported only inside ranks, never by the launching process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shoal.errors import UsageError


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


def run_ranks(nprocs: int, argv: list[str], timeout: float | None,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python argv...`` on ``nprocs`` ranks and wait at most ``timeout`` seconds (None:
    no limit). Output goes to this process's stdout/stderr. Raises :class:`UsageError` on a
    timeout. SIGTERM, SIGINT and SIGHUP to this process go to mpiexec (which ends its
    proxies and ranks), and this process waits for the job before it returns."""
    if nprocs < 1:
        raise UsageError(f"run at least 1 rank (got -n {nprocs})")
    cmd = [*mpiexec(), "-n", str(nprocs), sys.executable, *argv]
    with subprocess.Popen(cmd, env=env) as job, _forward_signals(job):
        try:
            code = job.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.kill()  # mpiexec's proxy ends the ranks
            job.wait()
            raise UsageError(f"the MPI job did not finish within {timeout:.0f} s and was "
                             f"killed: {shlex.join(cmd)}") from None
    return subprocess.CompletedProcess(cmd, code)


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


def run_shoal(nprocs: int, args: list[str], timeout: float | None) -> None:
    """Run ``shoal ARGS...`` on ``nprocs`` ranks (a command that launches itself as MPI
    ranks); a failing job raises :class:`UsageError` (the rank has printed why)."""
    done = run_ranks(nprocs, ["-m", "shoal", *args], timeout=timeout)
    if done.returncode:
        raise UsageError(f"the MPI job failed with exit code {done.returncode} "
                         "(see the rank's message above)")


@contextmanager
def abort_on_error(comm: Any) -> Iterator[None]:
    """Inside a rank: an exception prints ``rank R: traceback`` on stderr and aborts every
    rank of ``comm``'s job, so that no other rank waits forever."""
    try:
        yield
    except BaseException as exc:  # any failure must end the job
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        text = "".join(traceback.format_exception(exc))
        sys.stderr.write(f"rank {comm.Get_rank()}: {text}")
        sys.stderr.flush()
        comm.Abort(1)
