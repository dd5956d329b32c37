"""Supervised restart (issue 14, section 2): ``shoal run --restarts N`` relaunches a job
that died from the last checkpoint it completed, and ``--kill PE@time`` injects failures.

The supervisor gives the job a directory (``SHOAL_JOBDIR``); every time a checkpoint is
complete on disk, PE 0 writes its path to ``$SHOAL_JOBDIR/checkpoint``
(:mod:`shoal.runtime.checkpoint`). When the job ends with a non-zero code, the supervisor
relaunches it from that checkpoint (or as it was first started, if none was completed), on
one PE fewer with ``shrink`` (never fewer than one), and says so on stderr, at most
``restarts`` times. ``kills`` (``[(pe, seconds)]``) go to the first launch only
(``SHOAL_KILL``): that PE's process kills itself with SIGKILL that long after its runtime
started (:func:`arm_kills`), as a failing node would.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from shoal.errors import UsageError
from shoal.launch import run_ranks
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
              shrink: bool, kills: list[tuple[int, float]], timeout: float | None) -> int:
    """Run ``python argv`` on ``nprocs`` ranks, relaunched at most ``restarts`` times from
    its last checkpoint; the exit code of the last launch."""
    from shoal.runtime.shards import read_manifest

    jobdir = Path(tempfile.mkdtemp(prefix="shoal-job-"))
    env = {**env, "SHOAL_JOBDIR": str(jobdir)}
    if kills:
        env["SHOAL_KILL"] = ",".join(f"{pe}@{t!r}" for pe, t in kills)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        for attempt in range(restarts + 1):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            code = run_ranks(nprocs, argv, timeout=left, env=env).returncode
            env.pop("SHOAL_KILL", None)  # once per shoal run
            if code == 0 or attempt == restarts:
                if code and restarts:
                    _say(f"the job failed (exit code {code}) and {restarts} restart(s) are "
                         "used up")
                return code
            note = jobdir / "checkpoint"
            where = note.read_text().strip() if note.exists() else None
            if where is not None:
                read_manifest(where)
                env["SHOAL_RESTART"] = where
            if shrink:
                nprocs = max(1, nprocs - 1)
            start = (f"from checkpoint {where}" if where
                     else "as first started (no checkpoint completed)")
            _say(f"the job failed (exit code {code}); restart {attempt + 1} of {restarts} "
                 f"{start} on {nprocs} PE(s)")
        return code
    finally:
        shutil.rmtree(jobdir, ignore_errors=True)


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
            _DIE_IN_RECOVERY = True
        elif int(target) == pe:
            timer = threading.Timer(float(when), os.kill, (os.getpid(), signal.SIGKILL))
            timer.daemon = True
            timer.start()


_DIE_IN_RECOVERY = False  # --kill PE@recovery names this process


def die_in_recovery() -> None:
    """In an in-job recovery (:mod:`shoal.runtime.recovery`): ``--kill PE@recovery`` kills
    this process here, a second failure while the survivors recover from the first."""
    if _DIE_IN_RECOVERY:
        os.kill(os.getpid(), signal.SIGKILL)
