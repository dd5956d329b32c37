"""In-job recovery from a dead PE with the MPI fault-tolerance extensions (ULFM), issue 14
section 2, seed 002 Section III-B ("when a failure is detected ... the runtime ... restarts
from the last in-memory checkpoint" of the failed PEs' buddies, without a job restart).

Under ``shoal.start(main, ft=True)`` (``shoal run --ft``) every MPI call of the runtime
returns its errors (``MPI_ERRORS_RETURN``). When one reports a dead peer
(``MPI_ERR_PROC_FAILED``, ``..._PENDING``) or a revoked communicator (a survivor that
noticed first revoked it), :meth:`Runtime.run <shoal.runtime.pe.Runtime.run>` raises
:class:`PeFailureError` and every survivor calls :func:`recover`:

1. revoke the runtime's communicators (the others, wherever they wait, fail too and come
   here), shrink the job's communicator to the survivors (``MPI_Comm_shrink``);
2. agree on the generation to roll back to: the lowest committed in-memory generation of
   any survivor (each keeps its last two, :mod:`shoal.runtime.buddy`);
3. gather the shards of that generation: each survivor gives its own and those of dead
   PEs it holds as their buddy; every shard of the old runtime must be there (else two
   failures hit a PE and its buddy: the job ends with that message);
4. a new runtime starts on the shrunk communicator and restores from those shards as a
   restart on one PE fewer (:class:`~shoal.runtime.checkpoint.InMemory`); ``main`` runs
   again on the new PE 0 and finds the state in ``shoal.restored()``.

A second failure during recovery ends the job: each survivor prints why and exits with
code 3 (an MPI call on a broken communicator returns an error, it does not hang).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, cast

from shoal.runtime.buddy import STORE
from shoal.runtime.checkpoint import InMemory

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.runtime.pe import Runtime
    from shoal.runtime.shards import Image


class PeFailureError(Exception):
    """A peer PE died (or another survivor revoked the runtime's communicators)."""


def is_failure(exc: BaseException) -> bool:
    """Is ``exc`` an MPI error saying a process failed or the communicator was revoked?"""
    from mpi4py import MPI

    if not isinstance(exc, MPI.Exception):
        return False
    codes = {getattr(MPI, name, None) for name in
             ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING", "ERR_REVOKED")}
    return exc.Get_error_class() in codes - {None}


def recover(base: MPI.Intracomm, rt: Runtime) -> tuple[MPI.Intracomm, InMemory, str]:
    """Steps 1-3 of the module doc, on every survivor: the shrunk communicator, the
    checkpoint to restore and a line saying what happened."""
    t0 = time.perf_counter()
    for comm in rt.net.comms():
        try:
            comm.Revoke()
        except Exception:
            pass
    from shoal.supervise import die_in_recovery

    try:
        new = cast("MPI.Intracomm", base.Shrink())  # (mpi4py's stubs say Comm)
        die_in_recovery()  # (failure injection: --kill PE@recovery)
        olds: list[int] = new.allgather(base.Get_rank())
        dead = sorted(set(range(base.Get_size())) - set(olds))
        gen = _agree_generation(new, dead)
        everything = _gather(new, gen, base.Get_rank(), dead)
    except Exception as exc:
        if is_failure(exc):
            _end("another PE failed during the recovery from a PE failure: shoal recovers "
                 "from one failure at a time")
        raise
    main, pes = everything[0][1], [everything[q][0] for q in range(len(everything))]
    STORE.clear()
    say = (f"PE(s) {', '.join(map(str, dead))} failed; the job continues on {len(olds)} "
           f"PE(s) from in-memory checkpoint generation {gen} (recovery took "
           f"{time.perf_counter() - t0:.2f} s)")
    return new, InMemory(main.shard(), [img.shard() for img in pes]), say


def _agree_generation(new: MPI.Intracomm, dead: list[int]) -> int:
    from mpi4py import MPI

    gen = int(new.allreduce(STORE.committed, op=MPI.MIN))
    if gen == 0:
        _end(f"PE(s) {', '.join(map(str, dead))} failed before the first in-memory "
             "checkpoint was complete: nothing to roll back to (take one with "
             "await shoal.checkpoint(memory=True))")
    return gen


def _gather(new: MPI.Intracomm, gen: int, me: int, dead: list[int]
            ) -> dict[int, list[Image]]:
    """Every shard of generation ``gen``: own ones from every survivor, those of the dead
    from their buddies."""
    held = STORE.held(gen)
    mine = {q: imgs for q, imgs in held.items() if q == me or q in dead}
    everything: dict[int, list[Image]] = {}
    for part in new.allgather(mine):
        everything.update(part)
    lost = sorted(set(range(len(STORE.buddy))) - set(everything))
    if lost:
        _end(f"the in-memory shards of PE(s) {', '.join(map(str, lost))} are lost (a PE "
             "and its buddy failed): restart from a checkpoint on disk")
    return everything


def _end(text: str) -> None:
    sys.stderr.write(f"shoal: {text}; the job ends\n")
    sys.stderr.flush()
    os._exit(3)
