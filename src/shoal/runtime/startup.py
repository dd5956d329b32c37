"""A rank that ends before ``shoal.start`` ends the job (issue 17, section 4).

Every rank of a job runs ``shoal.start``, whose first collective call waits for all of
them: a rank that ended before it (``sys.exit(3)``, an exception, a plain return) left the
others waiting forever. So ``shoal.start`` on ``MPI_COMM_WORLD`` begins with a handshake
(tag ``TAG`` of ``MPI_COMM_WORLD``, reserved for it), and an armed process that ends
without it meets the others at its exit:

- in the handshake, every rank other than 0 tells rank 0 ``started``, then waits for rank
  0's ``go``; rank 0 waits for a word from all of them, then tells each ``go``;
- at its exit, a rank other than 0 tells rank 0 ``left`` (with its exit code and host, and
  whether it ran the runtime on another communicator: library mode), then waits for rank
  0's answer; rank 0 waits for a word from all of them and answers each ``ok``;
- whoever hears ``left`` in the handshake, or ``started`` at its exit, aborts the job with
  the code of the rank that left (1 for a code of 0: a job missing a rank did not succeed),
  and ``shoal: PE r (host h) ended before shoal.start (exit code c): the job ends``; the
  rank that left says it itself when its code is not 0 (the launcher may end the job as
  soon as that rank is gone, before the others have looked).

So a job whose ranks all end without the runtime (``--help``, library mode on part of
``MPI_COMM_WORLD``) ends as it would have, every message received: MPICH's
``MPI_Finalize`` went wrong with unreceived ones (the gossip service's job: rank 0 left
without the PMI barrier and the launcher killed the others). Waits are polled with back-off
and bounded (``WAIT``): after it, a rank that left stops waiting, and rank 0 tells the
ranks it has not heard from ``left`` (so one that reaches the handshake later ends the job)
and ends.

A process arms itself under ``shoal run`` (``SHOAL_JOBDIR``) when shoal is imported, and
elsewhere (a plain ``mpiexec python prog.py``) when the program defines its first chare
class (a :class:`~shoal.runtime.chare.Chare` subclass outside shoal): the ranks of an SPMD
program all do, and the programs that use shoal's other parts over mpi4py (the gossip
service, the network benchmarks) never do, so they end as before with nothing sent. Only in
a rank of an MPI job of several ranks. The exit code is what ``sys.exit`` was given (the
hook records it: Python does not tell ``atexit`` hooks the code), 1 after an uncaught
exception, else 0. A rank that ends before it is armed, that finalises MPI itself, or that
is killed, is not seen here (``shoal run`` names a killed rank; MPICH's launcher ends the
job). An armed process also turns Python's ``faulthandler`` on: a rank that dies of a fatal
signal (a crash in native code: ``free(): invalid pointer``, a segmentation fault) prints
the Python stack of each of its threads before it goes, not only the C library's one line.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from shoal.jobdir import ENV as JOBDIR_ENV
from shoal.rank import RANK_VARIABLES, abort_job

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.jobdir import JobDir

TAG = 32700  # of MPI_COMM_WORLD, for the handshake (MPI guarantees tags up to 32767)
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
WAIT = 10.0  # seconds a process at its exit waits for the others' word (see the module doc)


class _State:
    armed = False
    handshake = False  # shoal.start did the handshake here: the hook has nothing to do
    ran = False  # shoal.start ran here on another communicator (library mode)
    code: int | None = None  # the code sys.exit was given, 1 after an uncaught exception


def arm(chare: type | None = None) -> None:
    """In a rank of an MPI job of several ranks, under ``shoal run`` (``chare`` None: at
    import) or once the program defines its first chare class ``chare``: record the exit
    code and meet the others at exit if this process ends before ``shoal.start`` (once per
    process)."""
    if _State.armed or not _in_job(chare is None):
        return
    if chare is not None and chare.__module__.partition(".")[0] == "shoal":
        return  # shoal's own chares (apps, run_on_all) say nothing about the program
    _State.armed = True
    if not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)
    sys.exit = _recording_exit(sys.exit)
    sys.excepthook = _recording_hook(sys.excepthook)
    atexit.register(_ended)


def _in_job(under_run: bool) -> bool:
    """A rank of an MPI job of several ranks (the launchers set ``PMI_RANK`` and friends),
    under ``shoal run`` (``SHOAL_JOBDIR``) if ``under_run``."""
    if under_run and JOBDIR_ENV not in os.environ:
        return False
    if not any(v in os.environ for v in RANK_VARIABLES):
        return False
    sizes = [os.environ[v] for v in SIZE_VARIABLES if os.environ.get(v, "").isdigit()]
    return not sizes or int(sizes[0]) > 1


def ran() -> None:
    """``shoal.start`` runs here on a communicator of the program's (library mode)."""
    _State.ran = True


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
    """At exit, without the handshake: meet the others (see the module doc)."""
    if _State.handshake or _cli():
        return
    from mpi4py import MPI

    if MPI.Is_finalized():
        return
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size == 1:
        return
    code, host = _State.code or 0, socket.gethostname()
    if code and not _State.ran:
        sys.stderr.write(_line(rank, host, code))
        sys.stderr.flush()
    if rank:
        if not world.iprobe(0, TAG):  # else rank 0 has stopped waiting for this one
            world.send(("left", code, host), 0, TAG)  # small: eager, returns at once
        _receive(world, 0, time.monotonic() + WAIT)
        return
    heard = _gather(world, time.monotonic() + WAIT)
    if any(msg[0] == "started" for msg in heard.values()) and not _State.ran:
        _abort(0, host, code)  # ranks wait in the handshake for this one
    for dest in range(1, size):
        world.send(("ok",) if dest in heard else ("left", code, host), dest, TAG)


def _gather(world: MPI.Intracomm, until: float) -> dict[int, tuple[Any, ...]]:
    """Rank 0: the word of every other rank, by rank, or of those heard by ``until``."""
    heard: dict[int, tuple[Any, ...]] = {}
    while len(heard) < world.Get_size() - 1:
        got = _receive(world, None, until)
        if got is None:
            break
        heard[got[1]] = got[0]
    return heard


def _line(rank: int, host: str, code: int) -> str:
    return (f"shoal: PE {rank} (host {host}) ended before shoal.start (exit code {code}): "
            "the job ends\n")


def _abort(rank: int, host: str, code: int) -> NoReturn:
    """End the job because PE ``rank`` ended before ``shoal.start`` with ``code``."""
    from mpi4py import MPI

    # a rank that left with an error has said why; one that left with code 0 has not
    abort_job(MPI.COMM_WORLD, "" if code else _line(rank, host, code), code or 1)
    raise SystemExit(code or 1)  # (Abort does not return)


def _cli() -> bool:
    """This process is shoal's own command (``python -m shoal``, ranks of ``shoal gossip
    run`` and friends), not a program of the runtime."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == "shoal.__main__"


def handshake(world: MPI.Intracomm, home: JobDir | None = None) -> None:
    """The start of ``shoal.start`` on ``MPI_COMM_WORLD``: returns once every rank has
    called it; aborts the job if one ended before (see the module doc), or if a rank does
    not see the job directory ``home`` of ``shoal run`` (a node-local path on a job that
    spans nodes)."""
    _State.handshake = True
    size = world.Get_size()
    seen = home is None or home.visible()
    if size == 1:
        return
    if world.Get_rank() == 0:
        blind = [] if seen else [(0, socket.gethostname())]
        for _ in range(size - 1):
            got = _receive(world, None)
            _check(got)
            assert got is not None
            (_, host, sees), rank = got
            if not sees:
                blind.append((rank, host))
        if blind and home is not None:
            _blind(home, sorted(blind))
        for dest in range(1, size):
            world.send(("go",), dest, TAG)
    else:
        world.send(("started", socket.gethostname(), seen), 0, TAG)
        _check(_receive(world, 0))


def _blind(home: JobDir, blind: list[tuple[int, str]]) -> NoReturn:
    """End the job: PEs of ``blind`` (rank, host) do not see the job directory."""
    from mpi4py import MPI

    hosts = sorted({host for _, host in blind})
    pes = ", ".join(str(rank) for rank, _ in blind)
    abort_job(MPI.COMM_WORLD, f"shoal: error: the job directory {home.path} is not visible "
              f"on host(s) {', '.join(hosts)} (PEs {pes}): the PEs of a job that spans nodes "
              "need one on a file system every node mounts; pass --jobdir DIR on a shared "
              "path to shoal run\n", 2)
    raise SystemExit(2)  # (Abort does not return)


def _receive(world: MPI.Intracomm, source: int | None,
             until: float | None = None) -> tuple[tuple[Any, ...], int] | None:
    """The next handshake message (from ``source``, or any rank) and its sender, polled
    with back-off (an MPI blocking receive would spin on the core); None if ``until``
    (a ``time.monotonic()``) comes first."""
    from mpi4py import MPI

    status = MPI.Status()
    src = MPI.ANY_SOURCE if source is None else source
    nap = 1e-5
    while not world.iprobe(src, TAG, status):
        if until is not None and time.monotonic() > until:
            return None
        time.sleep(nap)
        nap = min(2 * nap, 0.05)
    return world.recv(source=status.Get_source(), tag=TAG), status.Get_source()


def _check(got: tuple[tuple[Any, ...], int] | None) -> None:
    assert got is not None  # (waited without a bound)
    msg, src = got
    if msg[0] == "left":
        _abort(src, msg[2], msg[1])
