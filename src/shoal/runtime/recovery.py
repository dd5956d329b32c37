"""In-job recovery from a dead PE with the MPI fault-tolerance extensions (ULFM), issue 14
section 2, Acun14 Section III-B ("when a failure is detected ... the runtime ... restarts
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
3. gather what every PE needs to rebuild the collections: the main shard and the first
   record (the PE's counters) of every old PE's shard, from the survivor that holds it (its
   own, or a dead PE's copy at its buddy); every shard of the old runtime must be held
   somewhere (else two failures hit a PE and its buddy: the job ends with that message);
4. a new runtime starts on the shrunk communicator and restores from that
   :class:`InMemory` checkpoint as a restart on fewer PEs
   (:meth:`~shoal.runtime.checkpoint.Checkpoints.start`), except where the array elements
   go: those of a surviving PE stay on its process, those of the dead go to their homes,
   sent there by the buddy in one ``alltoall``; ``main`` runs again on the new PE 0 and
   finds the state in ``shoal.restored()``. So only the dead PEs' elements travel (a
   restart's placement by homes would move nearly all of them), as in Charm++, whose
   buddy restores the failed PE's objects.

A second failure during a recovery (up to the end of the restore) ends the job: each
survivor prints why and exits with code 3 (an MPI call on a broken communicator returns an
error, it does not hang). :data:`STAMPS` holds when each phase ended; the new PE 0 prints
their durations with the line that says what happened.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, NamedTuple, cast

from shoal.runtime.buddy import STORE

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.runtime.interfaces import Core
    from shoal.runtime.shards import Image, Shard

PHASES = (("shrink", "detected", "shrunk"), ("agree", "shrunk", "agreed"),
          ("gather", "agreed", "gathered"), ("new runtime", "gathered", "started"),
          ("exchange", "started", "exchanged"), ("restore", "exchanged", "restored"))
"""The phases of a recovery: name, the stamp where it starts, the one where it ends."""

STAMPS: dict[str, float] = {}
"""Wall-clock time (``time.time()``) at which each phase of this process's last recovery
ended (``detected``: the failure was seen here; then the ends of :data:`PHASES`)."""

ANOTHER = ("another PE failed during the recovery from a PE failure: shoal recovers from "
           "one failure at a time")


class PeFailureError(Exception):
    """A peer PE died (or another survivor revoked the runtime's communicators)."""


class InMemory(NamedTuple):
    """A checkpoint to restore from memory (an in-job recovery): the main shard; the first
    record (its counters) of the shard of every PE of the runtime that took it; the whole
    shards this process holds (its own, the copy of a dead PE), by old PE; the new PE of
    every old one (None: dead); and the line that says what happened."""

    main: Shard
    heads: list[Shard]
    held: dict[int, Image]
    now: list[int | None]
    note: str


def is_failure(exc: BaseException) -> bool:
    """Is ``exc`` an MPI error saying a process failed or the communicator was revoked?"""
    from mpi4py import MPI

    if not isinstance(exc, MPI.Exception):
        return False
    codes = {getattr(MPI, name, None) for name in
             ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING", "ERR_REVOKED")}
    return exc.Get_error_class() in codes - {None}


def mark(phase: str) -> None:
    """Phase ``phase`` of a recovery ended now."""
    STAMPS[phase] = time.time()


def recovering() -> bool:
    """Is this process between a failure's detection and the end of its restore?"""
    return "detected" in STAMPS and "restored" not in STAMPS


def recover(base: MPI.Intracomm, rt: Core) -> tuple[MPI.Intracomm, InMemory]:
    """Steps 1-3 of the module doc, on every survivor: the shrunk communicator and the
    checkpoint to restore."""
    if recovering():
        _end(ANOTHER)
    STAMPS.clear()
    mark("detected")
    for comm in rt.net.comms():
        try:
            comm.Revoke()
        except Exception:
            pass
    from shoal.rank import die_in_recovery

    try:
        new = cast("MPI.Intracomm", base.Shrink())  # (mpi4py's stubs say Comm)
        mark("shrunk")
        die_in_recovery()  # (failure injection: --kill PE@recovery)
        olds: list[int] = new.allgather(base.Get_rank())
        dead = sorted(set(range(base.Get_size())) - set(olds))
        gen = _agree_generation(new, dead)
        mark("agreed")
        main, heads, held = _gather(new, gen, base.Get_rank(), dead)
        mark("gathered")
    except Exception as exc:
        if is_failure(exc):
            _end(ANOTHER)
        raise
    STORE.clear()
    now = [olds.index(q) if q in olds else None for q in range(base.Get_size())]
    note = (f"PE(s) {', '.join(map(str, dead))} failed; the job continues on {len(olds)} "
            f"PE(s) from in-memory checkpoint generation {gen}")
    return new, InMemory(main.shard(), [h.shard() for h in heads], held, now, note)


def _agree_generation(new: MPI.Intracomm, dead: list[int]) -> int:
    from mpi4py import MPI

    gen = int(new.allreduce(STORE.committed, op=MPI.MIN))
    if gen == 0:
        _end(f"PE(s) {', '.join(map(str, dead))} failed before the first in-memory "
             "checkpoint was complete: nothing to roll back to (take one with "
             "await shoal.checkpoint(memory=True))")
    return gen


def _gather(new: MPI.Intracomm, gen: int, me: int, dead: list[int]
            ) -> tuple[Image, list[Image], dict[int, Image]]:
    """The main shard and the first record of every old PE's shard of generation ``gen``
    (each from the survivor that holds that shard: its owner, or a dead PE's buddy), and
    the whole shards this process holds, by old PE."""
    held = {q: imgs for q, imgs in STORE.held(gen).items() if q == me or q in dead}
    heads: dict[int, list[Image]] = {}
    for part in new.allgather({q: [imgs[0].subset([0]), *imgs[1:]]
                               for q, imgs in held.items()}):
        heads.update(part)
    lost = sorted(set(range(len(STORE.buddy))) - set(heads))
    if lost:
        _end(f"the in-memory shards of PE(s) {', '.join(map(str, lost))} are lost (a PE "
             "and its buddy failed): restart from a checkpoint on disk")
    return (heads[0][1], [heads[q][0] for q in range(len(heads))],
            {q: imgs[0] for q, imgs in held.items()})


def restored(pe: int, note: str) -> None:
    """The restore after a recovery is complete here; the new PE 0 says what happened and
    how long each phase took on it."""
    mark("restored")
    if pe != 0:
        return
    took = ", ".join(f"{name} {STAMPS[end] - STAMPS[begin]:.3f}" for name, begin, end in PHASES)
    sys.stderr.write(f"shoal: {note} (recovery took "
                     f"{STAMPS['restored'] - STAMPS['detected']:.2f} s: {took})\n")
    sys.stderr.flush()


def starting_failed(exc: BaseException) -> None:
    """A runtime's start-up (its communicators) met a dead PE: end the job with why (the
    caller re-raises anything else)."""
    if not is_failure(exc):
        return
    _end(ANOTHER if recovering() else "a PE failed before the first in-memory checkpoint "
         "was complete: nothing to roll back to")


def _end(text: str) -> None:
    sys.stderr.write(f"shoal: {text}; the job ends\n")
    sys.stderr.flush()
    os._exit(3)
