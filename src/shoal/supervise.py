"""Supervised restart and resize (issue 14, sections 2 and 3): ``shoal run --restarts N``
relaunches a job that died from the last checkpoint it completed, and ``--kill PE@time``
injects failures.

The supervisor gives the job a directory (``SHOAL_JOBDIR``); every time a checkpoint is
complete on disk, PE 0 writes its path to ``$SHOAL_JOBDIR/checkpoint``
(:mod:`shoal.runtime.checkpoint`). When the job ends with a non-zero code, the supervisor
relaunches it from that checkpoint (or as it was first started, if none was completed), on
one PE fewer with ``shrink`` (never fewer than one), and says so on stderr, at most
``restarts`` times. ``kills`` (``[(pe, seconds)]``) go to the first launch only
(``SHOAL_KILL``): that PE's process kills itself with SIGKILL that long after its runtime
started (:func:`arm_kills`), as a failing node would.

The job directory is also where ``shoal ctl`` resizes the job (issue 14, section 3; files in
:mod:`shoal.jobdir`): when a launch ends cleanly after writing ``resize.json``, the
supervisor relaunches it at the size asked for, from the checkpoint the resize took; a
resize does not count as a restart.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from shoal import jobdir as jd
from shoal.errors import UsageError
from shoal.launch import note_injected_kill, run_ranks
from shoal.units import parse_duration


def parse_kill(text: str, nprocs: int) -> tuple[int, float]:
    """``PE@time`` (``1@1.5s``) as ``(pe, seconds)``; ``PE@recovery`` (``--ft``: that PE dies
    inside the next in-job recovery) as ``(pe, -1.0)``."""
    pe, at, when = text.partition("@")
    if not at or not pe.strip().isdigit():
        raise UsageError(f"--kill {text!r}: write PE@time, e.g. 1@1.5s")
    if int(pe) >= nprocs:
        raise UsageError(f"--kill {text!r}: PE {pe} does not exist on -n {nprocs}")
    if when.strip() == "recovery":
        return int(pe), -1.0
    return int(pe), parse_duration(when, "--kill time")


def supervise(nprocs: int, argv: list[str], env: dict[str, str], *, restarts: int,
              shrink: bool, kills: list[tuple[int, float]], timeout: float | None,
              jobdir: str | None = None, resize_dir: str | None = None) -> int:
    """Run ``python argv`` on ``nprocs`` ranks, relaunched at most ``restarts`` times from
    its last checkpoint, and at another size whenever ``shoal ctl`` resizes it
    (:mod:`shoal.runtime.resize`); the exit code of the last launch. ``jobdir``: the job
    directory (default: a new temporary one); ``resize_dir``: where resize checkpoints go
    (default: node-local memory)."""
    home, created = _job_directory(jobdir)
    env = {**env, "SHOAL_JOBDIR": str(home),
           "SHOAL_RESIZE_DIR": resize_dir or str(jd.node_local(home))}
    if kills:
        env["SHOAL_KILL"] = ",".join(f"{pe}@{t!r}" for pe, t in kills)
    deadline = None if timeout is None else time.monotonic() + timeout
    _say(f"job directory {home} (shoal ctl {home} shrink|expand N resizes the job)")
    failures = launches = 0
    try:
        while True:
            launches += 1
            jd.write_json(home / jd.JOB, {"pid": os.getpid(), "pes": nprocs,
                                          "launch": launches})
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            code = run_ranks(nprocs, argv, timeout=left, env=env).returncode
            env.pop("SHOAL_KILL", None)  # once per shoal run
            resized = jd.read_json(home / jd.RESIZE) if code == 0 else None
            if resized is not None:
                (home / jd.RESIZE).unlink()
                env["SHOAL_RESTART"] = resized["checkpoint"]
                _say(f"resizing the job from {nprocs} to {resized['pes']} PEs")
                nprocs = resized["pes"]
                continue
            if code == 0 or failures == restarts:
                if code and restarts:
                    _say(f"the job failed (exit code {code}) and {restarts} restart(s) are "
                         "used up")
                return code
            failures += 1
            nprocs = _relaunch(home, env, nprocs, shrink)
            _say(f"the job failed (exit code {code}); restart {failures} of {restarts} "
                 f"{_origin(env)} on {nprocs} PE(s)")
    finally:
        jd.remove(home, created)


def _job_directory(jobdir: str | None) -> tuple[Path, bool]:
    """The job directory, and whether this run created it (then it is removed at the end)."""
    if jobdir is None:
        return Path(tempfile.mkdtemp(prefix="shoal-job-")), True
    home = Path(jobdir).resolve()
    if home.exists() and not home.is_dir():
        raise UsageError(f"--jobdir {jobdir}: a file is in the way; give a directory")
    if (home / jd.JOB).exists():
        other = jd.read_json(home / jd.JOB) or {}
        if jd.alive(other.get("pid")):
            raise UsageError(f"--jobdir {jobdir}: job {other['pid']} runs there; give "
                             "another directory")
    created = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    return home, created


def _relaunch(home: Path, env: dict[str, str], nprocs: int, shrink: bool) -> int:
    """After a failure: restart from the last checkpoint the job completed (``env``); the
    PE count of the next launch."""
    from shoal.runtime.shards import read_manifest

    note = home / jd.CHECKPOINT
    if note.exists():
        where = note.read_text().strip()
        read_manifest(where)
        env["SHOAL_RESTART"] = where
    return max(1, nprocs - 1) if shrink else nprocs


def _origin(env: dict[str, str]) -> str:
    where = env.get("SHOAL_RESTART")
    return f"from checkpoint {where}" if where else "as first started (no checkpoint completed)"


def _say(text: str) -> None:
    sys.stderr.write(f"shoal: {text}\n")
    sys.stderr.flush()


def arm_kills(pe: int) -> None:
    """In a rank: the failures ``SHOAL_KILL`` injects into PE ``pe`` (a SIGKILL of this
    process after so many seconds; a daemon timer thread)."""
    spec = os.environ.get("SHOAL_KILL")
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
    note_injected_kill(pe)
    os.kill(os.getpid(), signal.SIGKILL)
