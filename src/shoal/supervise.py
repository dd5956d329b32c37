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
started (:func:`shoal.rank.arm_kills`), as a failing node would.

The job directory is also where ``shoal ctl`` resizes the job (issue 14, section 3; files in
:mod:`shoal.jobdir`): when a launch ends cleanly after writing ``resize.json``, the
supervisor relaunches it at the size asked for, from the checkpoint the resize took; a
resize does not count as a restart.
"""

from __future__ import annotations

import sys
import time

from shoal.errors import UsageError
from shoal.jobdir import JobDir
from shoal.launch import ranks_share_this_host, run_ranks
from shoal.options import RESTART_ENV
from shoal.rank import KILL_ENV
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
    directory (default: a new one, see :mod:`shoal.jobdir`); ``resize_dir``: where resize
    checkpoints go (default: node-local memory, or the job directory when the job spans
    nodes). After a failure inside a Slurm allocation, the nodes whose PEs died are left
    out of the next launch (:class:`shoal.launch.Launch`)."""
    home, created = JobDir.create(jobdir, not ranks_share_this_host())
    env = {**env, **home.environment(resize_dir)}
    if kills:
        env[KILL_ENV] = ",".join(f"{pe}@{t!r}" for pe, t in kills)
    deadline = None if timeout is None else time.monotonic() + timeout
    _say(f"job directory {home.path} (shoal ctl {home.path} shrink|expand N resizes the job)")
    failures = launches = 0
    lost: set[str] = set()  # hosts whose PEs died
    try:
        while True:
            launches += 1
            home.announce(nprocs, launches)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = run_ranks(nprocs, argv, timeout=left, env=env, exclude=lost)
            code = done.returncode
            env.pop(KILL_ENV, None)  # once per shoal run
            resized = home.take_resized() if code == 0 else None
            if resized is not None:
                env[RESTART_ENV] = resized["checkpoint"]
                _say(f"resizing the job from {nprocs} to {resized['pes']} PEs")
                nprocs = resized["pes"]
                continue
            if code == 0 or failures == restarts:
                if code and restarts:
                    _say(f"the job failed (exit code {code}) and {restarts} restart(s) are "
                         "used up")
                return code
            failures += 1
            lost |= done.lost_hosts
            nprocs = _relaunch(home, env, nprocs, shrink)
            away = f", without host(s) {', '.join(sorted(lost))}" if lost else ""
            _say(f"the job failed (exit code {code}); restart {failures} of {restarts} "
                 f"{_origin(env)} on {nprocs} PE(s){away}")
    finally:
        home.remove(created)


def _relaunch(home: JobDir, env: dict[str, str], nprocs: int, shrink: bool) -> int:
    """After a failure: restart from the last checkpoint the job completed (``env``); the
    PE count of the next launch."""
    from shoal.runtime.shards import read_manifest

    where = home.last_checkpoint()
    if where is not None:
        read_manifest(where)
        env[RESTART_ENV] = where
    return max(1, nprocs - 1) if shrink else nprocs


def _origin(env: dict[str, str]) -> str:
    where = env.get(RESTART_ENV)
    return f"from checkpoint {where}" if where else "as first started (no checkpoint completed)"


def _say(text: str) -> None:
    sys.stderr.write(f"shoal: {text}\n")
    sys.stderr.flush()
