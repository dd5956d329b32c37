"""Shrink and expand on command (Acun14, Section III-D: "the ability of parallel jobs to
shrink or expand the number of processors on which they are executing at run-time in
response to an external command"; Fig. 5).

``shoal ctl JOBDIR shrink 2`` (or ``expand 4``) writes ``JOBDIR/control``
(:mod:`shoal.jobdir`). PE 0 of the job looks for it every ``POLL`` seconds, on a timer of
its scheduler (no thread, nothing runs while the PE is idle but the timer). A request is
served at the job's next consistent point, the one automatic checkpoints use
(:meth:`~shoal.runtime.checkpoint.Checkpoints.at_sync_point` or ``shoal.iteration(state)``
in main): the runtime checkpoints every element and main's last ``iteration`` state into
node-local memory (``/dev/shm``; the job directory when the job spans nodes, or
``--checkpoint-dir``), writes ``JOBDIR/resize.json`` and ends the job cleanly on every
PE. ``shoal run`` (:func:`shoal.supervise.supervise`) relaunches the program on the new
number of processes from that checkpoint: elements are spread over the new PEs as on any
restart (and balanced when an LB is configured), and ``main`` continues from its restored
state. No process of the old size stays behind.

Charm++ shrinks the same way since its residual processes were removed (Acun14 ref. [16]):
the objects are checkpointed in memory, the processes restart at the new size and the
objects are redistributed; its Fig. 5 time (2.7 s to shrink 256 -> 128 cores, 7.2 s to
expand) "is dominated by the time taken to restart the application processes". Moving
objects inside a running MPI job instead would leave the leaving ranks in ``MPI_Finalize``
(with MPICH they cannot leave ``COMM_WORLD``) and could not add ranks without
``MPI_Comm_spawn``, which the embedded MPICH launcher does not offer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.jobdir import JobDir

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core

POLL = 0.1  # seconds between two looks at JOBDIR/control


class Resize:
    """PE 0's side of a resize: watch for a request, say when one is due, finish it."""

    def __init__(self, rt: Core):
        self.rt = rt
        home = JobDir.of_rank()
        self.home = home if home is not None and rt.pe == 0 else None
        self.request: dict[str, Any] | None = None  # the request waiting or being served
        self.target: Path | None = None  # its checkpoint, once it is being taken

    def start(self) -> None:
        """Once the runtime has restored: tell ``shoal ctl`` the job runs at this size;
        start watching."""
        if self.home is None:
            return
        self.home.note_running(self.rt.npes)
        self.rt.after(POLL, self._watch)

    def _watch(self) -> None:
        assert self.home is not None
        self.request = self.home.take_request(self.rt.npes)
        if self.request is not None:
            why = self._refusal(self.request["pes"])
            if why is not None:
                self.home.refuse_request(self.rt.npes, self.request, why)
                self.request = None
        if self.request is None:
            self.rt.after(POLL, self._watch)

    def _refusal(self, pes: int) -> str | None:
        """Why the job cannot run on ``pes`` PEs (None: it can): a group on some PEs
        (``Group(cls, pes=...)``) needs each of them, its members being named by PE."""
        groups = [(coll.cls.__name__, coll.pes) for coll in self.rt.colls.values()
                  if coll.pes is not None and coll.pes[-1] >= pes]
        if not groups:
            return None
        need = max(on[-1] for _, on in groups) + 1
        names = ", ".join(f"{name} on PEs {list(on)}" for name, on in groups)
        return (f"the job cannot run on {pes} PEs: its group(s) {names} need {need} PEs (a "
                f"member is named by its PE); resize to {need} PEs or more")

    def due(self) -> bool:
        """Is a request waiting for the job's next consistent point?"""
        return self.request is not None and self.target is None

    def begin(self) -> Path:
        """The request is served now: where its checkpoint goes (``SHOAL_RESIZE_DIR``,
        which the supervisor sets: node-local memory unless ``--checkpoint-dir``)."""
        assert self.home is not None
        self.target = self.home.resize_target()
        return self.target

    def done(self, root: Path) -> None:
        """A checkpoint is complete at ``root``: if it is the resize's, tell the supervisor
        and end the job."""
        if self.target is None or root != self.target:
            return
        assert self.home is not None and self.request is not None
        self.rt.publisher.event("resize", **{"from": self.rt.npes, "to": self.request["pes"]})
        self.home.note_resized(self.request, root)
        self.rt.exit(resize=True)
