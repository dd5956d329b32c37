"""The job directory of a ``shoal run``: how the supervisor, the job's PEs and ``shoal ctl``
talk, and the one owner of its files and of where it lives.

Where it lives. A job whose PEs all run on the launching host gets a new directory in
``/tmp`` (node-local, removed at the end). A job whose PEs span nodes needs one that every
node sees: a rank on another node cannot read the launching node's ``/tmp``, and its
checkpoints must be readable wherever the job restarts. By default that is a new
``.shoal/job-*`` under the current directory, which clusters mount on every node (Slurm
writes a batch job's output there); ``shoal run --jobdir DIR`` names another. Every PE
checks at start that it sees the directory (``runtime.startup``): one that does not ends
the job with a line that names its host and says to pass ``--jobdir`` on a shared path.

=================  ============  ===========================================================
file               written by    holds
=================  ============  ===========================================================
``job.json``       supervisor    its pid, the job's PE count now, the launch number
``checkpoint``     PE 0          the path of the last checkpoint the job completed
``running.json``   PE 0          the PE count the job runs at, and since when
``control``        shoal ctl     a resize request: the PE count wanted, when it was made
``resize.json``    PE 0          the request it served, and its checkpoint (the job ended)
``pes/PID@HOST``   every PE      its PE number, so the launcher can name a killed process
``pes/killed-PE``  a PE          when ``shoal run --kill`` ended it (the launcher names it)
``auto/``          the PEs       ``--checkpoint-every`` checkpoints (default place)
``resize/``        the PEs       a resize's checkpoint when the job spans nodes (else in
                                 node-local ``/dev/shm``)
``live/``          all           the job's live data (:mod:`shoal.live`): ``job.json``
                                 (supervisor; PE 0 adds the PEs' hosts), ``pe-N.jsonl``
                                 (PE N, :mod:`shoal.runtime.publish`), ``events.jsonl``
                                 (PE 0, and the supervisor's failures and restarts)
=================  ============  ===========================================================

The live files are the one thing of a job directory kept after the job: at the end the
supervisor copies them into the registry (:meth:`JobDir.keep_live`), then the directory, or
what shoal wrote in a ``--jobdir`` of the user's, is removed.

Every file is written whole under a temporary name and renamed (:func:`shoal.files.atomic`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shoal.errors import UsageError
from shoal.files import write_text

ENV = "SHOAL_JOBDIR"  # the job directory, in the ranks' environment
RESIZE_ENV = "SHOAL_RESIZE_DIR"  # where a resize's checkpoint goes, set by the supervisor
JOB, RUNNING, CONTROL, RESIZE, CHECKPOINT = (
    "job.json", "running.json", "control", "resize.json", "checkpoint")
PES, KILLED, AUTO, RESIZE_DIR = "pes", "killed-", "auto", "resize"
SHM = Path("/dev/shm")
SHARED_HOME = ".shoal"  # under the current directory: jobs that span nodes


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's object, or None when there is none (or it is not one)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def alive(pid: object) -> bool:
    """Is there a process ``pid`` (the supervisor of ``job.json``)?"""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobDir:
    """One job's directory: every file of the table above, read and written here."""

    def __init__(self, path: str | os.PathLike[str], shared: bool = False):
        self.path = Path(path)
        self.shared = shared  # the PEs span nodes: nothing may go to node-local storage

    # ------------------------------------------------------------- making and finding
    @classmethod
    def create(cls, given: str | None, spans_nodes: bool) -> tuple[JobDir, bool]:
        """The supervisor's directory (``given``: the user's ``--jobdir``) and whether this
        run made it (then :meth:`remove` deletes it)."""
        if given is None:
            return cls(_new_directory(spans_nodes), spans_nodes), True
        home = Path(given).resolve()
        if home.exists() and not home.is_dir():
            raise UsageError(f"--jobdir {given}: a file is in the way; give a directory")
        other = read_json(home / JOB) or {}
        if alive(other.get("pid")):
            raise UsageError(f"--jobdir {given}: job {other['pid']} runs there; give another "
                             "directory")
        created = not home.exists()
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--jobdir {given}: cannot create it ({exc.strerror})") from None
        return cls(home, spans_nodes), created

    @classmethod
    def of_rank(cls) -> JobDir | None:
        """In a rank: the job directory of the ``shoal run`` that launched it, if any."""
        return cls.of(os.environ)

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> JobDir | None:
        """The job directory that ``environ`` (a rank's) names, if any."""
        path = environ.get(ENV)
        return cls(path) if path else None

    def environment(self, resize_dir: str | None) -> dict[str, str]:
        """What the ranks are told: this directory, and where a resize's checkpoint goes
        (``resize_dir``, else node-local memory unless the job spans nodes)."""
        return {ENV: str(self.path), RESIZE_ENV: resize_dir or str(self.resize_local())}

    def resize_local(self) -> Path:
        """Where a resize checkpoint goes unless ``resize_dir`` says: node-local memory,
        in a folder named after this directory's whole path (two jobs whose directories
        share a name, ``a/job`` and ``b/job``, once shared one there and each removed the
        other's checkpoint), else the job directory when the job spans nodes."""
        if not self.shared and SHM.is_dir() and os.access(SHM, os.W_OK):
            tag = hashlib.sha256(os.path.abspath(self.path).encode()).hexdigest()[:12]
            return SHM / f"shoal-{self.path.name}-{tag}" / RESIZE_DIR
        return self.path / RESIZE_DIR

    @property
    def auto(self) -> Path:
        """Where ``--checkpoint-every`` writes when no ``--checkpoint-dir`` is given."""
        return self.path / AUTO

    def visible(self) -> bool:
        """Does this process see the directory (False on a node it is not shared with)?"""
        return self.path.is_dir()

    # ------------------------------------------------------------- the supervisor
    def announce(self, pes: int, launch: int) -> None:
        self._write(JOB, {"pid": os.getpid(), "pes": pes, "launch": launch})

    def job(self) -> dict[str, Any] | None:
        return read_json(self.path / JOB)

    def last_checkpoint(self) -> str | None:
        """The checkpoint PE 0 last completed, if any."""
        try:
            return (self.path / CHECKPOINT).read_text().strip() or None
        except OSError:
            return None

    def take_resized(self) -> dict[str, Any] | None:
        """The resize a clean end of the job served (removed from the directory)."""
        resized = read_json(self.path / RESIZE)
        (self.path / RESIZE).unlink(missing_ok=True)
        return resized

    def remove(self, created: bool) -> None:
        """At the end of ``shoal run``: the resize checkpoint in node-local memory, and the
        directory (``created``) or what shoal wrote in it (a ``--jobdir`` of the user's)."""
        local = self.resize_local()
        if local.parent != self.path:
            shutil.rmtree(local.parent, ignore_errors=True)
        if created:
            shutil.rmtree(self.path, ignore_errors=True)
            if self.path.parent.name == SHARED_HOME:
                try:
                    self.path.parent.rmdir()  # (only when no other job uses it)
                except OSError:
                    pass
            return
        for name in (JOB, RUNNING, CONTROL, RESIZE, CHECKPOINT):
            (self.path / name).unlink(missing_ok=True)
        for name in (AUTO, RESIZE_DIR, PES):
            shutil.rmtree(self.path / name, ignore_errors=True)
        shutil.rmtree(self.live, ignore_errors=True)  # (kept in the registry: keep_live)

    # ------------------------------------------------------------- live data
    @property
    def live(self) -> Path:
        """The folder of the job's live data (:mod:`shoal.live`)."""
        from shoal.live import LIVE

        return self.path / LIVE

    @property
    def live_job(self) -> Path:
        from shoal.live import JOB as LIVE_JOB

        return self.live / LIVE_JOB

    @property
    def live_events(self) -> Path:
        from shoal.live import EVENTS

        return self.live / EVENTS

    def live_pe(self, pe: int) -> Path:
        """PE ``pe``'s rows."""
        from shoal.live import pe_file

        return self.live / pe_file(pe)

    def write_live_job(self, job: Mapping[str, Any]) -> None:
        """The supervisor: the live ``job.json`` (written whole)."""
        self.live.mkdir(parents=True, exist_ok=True)
        write_text(self.live_job, json.dumps(dict(job)) + "\n")

    def note_live_pes(self, pes: int, hosts: list[str]) -> None:
        """PE 0 at start: the job runs on ``pes`` PEs on ``hosts`` (one a PE), in the live
        ``job.json`` the supervisor wrote (if any)."""
        job = read_json(self.live_job)
        if job is not None:
            self.write_live_job({**job, "npes": pes, "hosts": hosts})

    def clear_live(self) -> None:
        """The supervisor, before a new job: live files left in a ``--jobdir`` given again
        (by a supervisor that was killed) go."""
        shutil.rmtree(self.live, ignore_errors=True)

    def keep_live(self, dest: Path) -> None:
        """Copy the live files into ``dest`` (the job's registry entry: post mortem)."""
        if not self.live.is_dir():
            return
        dest.mkdir(parents=True, exist_ok=True)
        for file in self.live.iterdir():
            if file.is_file():
                shutil.copyfile(file, dest / (file.name + ".tmp"))
                os.replace(dest / (file.name + ".tmp"), dest / file.name)

    # ------------------------------------------------------------- the PEs
    def note_pe(self, pe: int) -> None:
        """This process is PE ``pe`` (the launcher names it if the process is killed); a
        directory this node does not see is left alone (the handshake says so)."""
        folder = self.path / PES
        try:
            folder.mkdir(exist_ok=True)
            write_text(folder / f"{os.getpid()}@{socket.gethostname()}", f"{pe}\n")
        except OSError:
            return

    def note_kill(self, pe: int) -> None:
        """``shoal run --kill`` ends PE ``pe`` now (:meth:`killed_at` reads it)."""
        try:
            write_text(self.path / PES / f"{KILLED}{pe}", repr(time.monotonic()))
        except OSError:
            return

    def killed_at(self, pe: str) -> float | None:
        try:
            return float((self.path / PES / f"{KILLED}{pe}").read_text())
        except (OSError, ValueError):
            return None

    def pe_notes(self, host: str) -> list[Path]:
        """The notes of the PEs of ``host``, named ``PID@HOST``."""
        return list((self.path / PES).glob(f"*@{host}"))

    def pe_of(self, pid: int, host: str) -> str | None:
        try:
            return (self.path / PES / f"{pid}@{host}").read_text().strip()
        except OSError:
            return None

    def note_checkpoint(self, root: Path) -> None:
        """PE 0: a checkpoint is complete at ``root`` (the supervisor restarts from it)."""
        write_text(self.path / CHECKPOINT, str(root.resolve()) + "\n")

    def note_running(self, pes: int) -> None:
        """PE 0, once restored: the job runs on ``pes`` PEs now (``shoal ctl`` waits for it)."""
        self._write(RUNNING, {"pes": pes, "at": time.time()})

    def running(self) -> dict[str, Any] | None:
        return read_json(self.path / RUNNING)

    def refuse_request(self, npes: int, request: dict[str, Any], why: str) -> None:
        """PE 0: the resize ``request`` cannot be served (``why``); the job goes on at
        ``npes`` PEs and ``shoal ctl`` says why."""
        running = self.running() or {"pes": npes, "at": time.time()}
        self._write(RUNNING, {**running, "refused": {"at": request.get("at"), "why": why}})

    def ask_resize(self, pes: int, at: float) -> None:
        """``shoal ctl``: ask the job to run on ``pes`` PEs."""
        self._write(CONTROL, {"pes": pes, "at": at})

    def take_request(self, npes: int) -> dict[str, Any] | None:
        """PE 0: the resize request waiting, removed; None if there is none or it asks for
        the size the job has (then it is dropped)."""
        path = self.path / CONTROL
        request = read_json(path)
        if request is None:
            return None
        path.unlink(missing_ok=True)
        pes = request.get("pes")
        if not isinstance(pes, int) or pes < 1 or pes == npes:
            return None
        return request

    def resize_target(self) -> Path:
        """PE 0: where a resize's checkpoint goes (what the supervisor set)."""
        return Path(os.environ.get(RESIZE_ENV) or self.resize_local())

    def note_resized(self, request: dict[str, Any], root: Path) -> None:
        """PE 0: the resize ``request`` is served by the checkpoint at ``root``."""
        self._write(RESIZE, {**request, "checkpoint": str(root)})

    def _write(self, name: str, value: dict[str, Any]) -> None:
        write_text(self.path / name, json.dumps(value) + "\n")


def _new_directory(spans_nodes: bool) -> Path:
    """A new job directory: in ``/tmp``, or under the current directory when the job spans
    nodes (see the module doc)."""
    if not spans_nodes:
        return Path(tempfile.mkdtemp(prefix="shoal-job-"))
    base = Path.cwd() / SHARED_HOME
    try:
        base.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="job-", dir=base))
    except OSError as exc:
        raise UsageError(f"the job spans nodes and needs a directory every node sees; "
                         f"{base} cannot be made ({exc.strerror}): pass --jobdir DIR on a "
                         "shared file system") from None
