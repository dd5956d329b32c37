"""A rank that ends before ``shoal.start`` ends the job (issue 17, section 4).

Every rank of a job runs ``shoal.start``, whose first collective call waits for all of
them: a rank that ended before it (``sys.exit(3)``, an exception, a plain return) left the
others waiting forever. So, in a rank of an MPI job of several ranks under ``shoal run``
(``SHOAL_JOBDIR``; the launchers set ``PMI_RANK`` and friends), importing shoal arms an
``atexit`` hook, and ``shoal.start``
begins with a handshake on ``MPI_COMM_WORLD`` (tag ``TAG``, reserved for it):

- every rank other than 0 tells rank 0 ``started``, then waits for rank 0's ``go``;
- rank 0 waits for all of them, then tells each ``go``;
- a rank that ends without having called ``shoal.start`` tells rank 0 (rank 0 tells every
  rank) ``left``, with its exit code and host, and ends as it would have;
- a rank in the handshake that hears ``left`` aborts the job with that code (1 for a code
  of 0: a job missing a rank did not succeed).

The message, ``shoal: PE r (host h) ended before shoal.start (exit code c): the job ends``,
comes from the rank that ended when its code is not 0 (the launcher may end the job as
soon as that rank is gone, before the others have looked), else from the rank that aborts.

Nobody waits in the hook. It is armed under ``shoal run`` only: a program that uses
shoal's other parts over mpi4py and never calls ``shoal.start`` (the gossip service, the
network benchmarks) would otherwise leave ``left`` messages unreceived at its
``MPI_Finalize``, which made such jobs end by signal under MPICH. The exit code is what
``sys.exit`` was given (the hook records it: Python does
not tell ``atexit`` hooks the code), 1 after an uncaught exception, else 0. Under a plain
``mpiexec python prog.py`` nothing is armed; a rank that ends before it
imports shoal, or that is killed, is not seen here (``shoal run`` names a killed rank).
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from shoal.launch import RANK_VARIABLES

if TYPE_CHECKING:
    from mpi4py import MPI

TAG = 32700  # of MPI_COMM_WORLD, for the handshake (MPI guarantees tags up to 32767)
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


class _State:
    armed = False
    started = False  # shoal.start was called here: the hook has nothing to do
    code: int | None = None  # the code sys.exit was given, 1 after an uncaught exception


def arm() -> None:
    """In a rank of an MPI job of several ranks: record the exit code and tell the job if
    this process ends before ``shoal.start`` (once per process)."""
    if _State.armed or not _in_job():
        return
    _State.armed = True
    sys.exit = _recording_exit(sys.exit)
    sys.excepthook = _recording_hook(sys.excepthook)
    atexit.register(_ended)


def _in_job() -> bool:
    """A rank of a runtime program under ``shoal run`` (``SHOAL_JOBDIR``): other MPI
    programs that import shoal (the gossip service, the benchmarks) never call
    ``shoal.start`` and must not talk to their peers at exit."""
    if "SHOAL_JOBDIR" not in os.environ:
        return False
    if not any(v in os.environ for v in RANK_VARIABLES):
        return False
    sizes = [os.environ[v] for v in SIZE_VARIABLES if os.environ.get(v, "").isdigit()]
    return not sizes or int(sizes[0]) > 1


def _recording_exit(plain: Callable[..., NoReturn]) -> Callable[..., NoReturn]:
    def exit(code: Any = None) -> NoReturn:
        _State.code = 0 if code is None else code if isinstance(code, int) else 1
        plain(code)

    exit.__doc__ = plain.__doc__
    return exit


def _recording_hook(plain: Callable[..., Any]) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        _State.code = 1
        return plain(*args)

    return hook


def _ended() -> None:
    """At exit, without ``shoal.start``: say so to rank 0 (rank 0: to every rank)."""
    if _State.started or _cli():
        return
    from mpi4py import MPI

    if MPI.Is_finalized():
        return
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size == 1:
        return
    code, host = _State.code or 0, socket.gethostname()
    if code:
        _say(rank, host, code)
    for dest in range(1, size) if rank == 0 else (0,):
        world.send(("left", code, host), dest, TAG)  # small: eager, returns at once


def _say(rank: int, host: str, code: int) -> None:
    sys.stderr.write(f"shoal: PE {rank} (host {host}) ended before shoal.start (exit code "
                     f"{code}): the job ends\n")
    sys.stderr.flush()


def _cli() -> bool:
    """This process is shoal's own command (``python -m shoal``, ranks of ``shoal gossip
    run`` and friends), not a program of the runtime."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == "shoal.__main__"


def handshake(world: MPI.Intracomm) -> None:
    """The start of ``shoal.start`` on ``MPI_COMM_WORLD``: returns once every rank has
    called it; aborts the job if one ended before (see the module doc)."""
    _State.started = True
    size = world.Get_size()
    if size == 1:
        return
    if world.Get_rank() == 0:
        for _ in range(size - 1):
            _check(_receive(world, None))
        for dest in range(1, size):
            world.send(("go",), dest, TAG)
    else:
        world.send(("started",), 0, TAG)
        _check(_receive(world, 0))


def _receive(world: MPI.Intracomm, source: int | None) -> tuple[Any, int]:
    """The next handshake message (from ``source``, or any rank) and its sender, polled
    with back-off (an MPI blocking receive would spin on the core)."""
    from mpi4py import MPI

    status = MPI.Status()
    src = MPI.ANY_SOURCE if source is None else source
    nap = 1e-5
    while not world.iprobe(src, TAG, status):
        time.sleep(nap)
        nap = min(2 * nap, 0.05)
    return world.recv(source=status.Get_source(), tag=TAG), status.Get_source()


def _check(got: tuple[Any, int]) -> None:
    msg, src = got
    if msg[0] != "left":
        return
    _, code, host = msg
    if not code:
        _say(src, host, code)
    from mpi4py import MPI

    MPI.COMM_WORLD.Abort(code or 1)
