"""The job directory of a ``shoal run`` (``SHOAL_JOBDIR``): how the supervisor, the job's PE 0
and ``shoal ctl`` talk. Every file is written whole under a temporary name and renamed.

=================  ============  ===========================================================
file               written by    holds
=================  ============  ===========================================================
``job.json``       supervisor    its pid, the job's PE count now, the launch number
``checkpoint``     PE 0          the path of the last checkpoint the job completed
``running.json``   PE 0          the PE count the job runs at, and since when
``control``        shoal ctl     a resize request: the PE count wanted, when it was made
``resize.json``    PE 0          the request it served, and its checkpoint (the job ended)
=================  ============  ===========================================================
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

JOB = "job.json"
RUNNING = "running.json"
CONTROL = "control"
RESIZE = "resize.json"
CHECKPOINT = "checkpoint"
SHM = Path("/dev/shm")


def write_json(path: Path, value: dict[str, Any]) -> None:
    staged = path.with_name(path.name + ".tmp")
    staged.write_text(json.dumps(value) + "\n")
    staged.rename(path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's object, or None when there is none (or it is not one)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def take_request(home: Path, npes: int) -> dict[str, Any] | None:
    """At the job's PE 0: the resize request waiting in ``home``, removed from it; None if
    there is none or it asks for the size the job has (then it is dropped)."""
    path = home / CONTROL
    request = read_json(path)
    if request is None:
        return None
    path.unlink(missing_ok=True)
    pes = request.get("pes")
    if not isinstance(pes, int) or pes < 1 or pes == npes:
        return None
    return request


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


def node_local(home: Path) -> Path:
    """Where a resize checkpoint goes by default: node-local memory when there is some."""
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        return SHM / f"shoal-{home.name}" / "resize"
    return home / "resize"


def remove(home: Path, created: bool) -> None:
    """At the end of ``shoal run``: the resize checkpoint in node-local memory, and the
    directory (``created``) or what shoal wrote in it (a ``--jobdir`` of the user's)."""
    local = node_local(home)
    if local.parent != home:
        shutil.rmtree(local.parent, ignore_errors=True)
    if created:
        shutil.rmtree(home, ignore_errors=True)
        return
    for name in (JOB, RUNNING, CONTROL, RESIZE, CHECKPOINT):
        (home / name).unlink(missing_ok=True)
    for name in ("auto", "resize"):
        shutil.rmtree(home / name, ignore_errors=True)
