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

Live data (:mod:`shoal.live`, issue 29): unless ``SHOAL_LIVE_PERIOD`` is 0, the supervisor
writes the job's ``live/job.json`` (id, program, argv, PEs, start, state ``running``, its
pid and host, the job directory, the period) and registers the job in the registry
(``$SHOAL_STATE_DIR/jobs/<id>/job.json``); the PEs publish their rows
(:mod:`shoal.runtime.publish`); the supervisor adds a ``failure`` event for each launch that
failed and a ``restart`` event for each relaunch. At the end it sets ``state`` (``done`` or
``failed``) and ``end``, and copies the live files into the registry entry, which keeps
them once the job directory is removed (post mortem).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from shoal import live
from shoal.errors import UsageError
from shoal.files import append_line, open_append, write_text
from shoal.jobdir import JobDir, read_json
from shoal.launch import ranks_share_this_host, run_ranks
from shoal.options import RESTART_ENV, live_period
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
    job = _register(home, argv, nprocs, env)
    code = 1
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
            if code:
                _event(home, job, "failure", pe=None, detail=f"launch {launches} ended "
                       f"with exit code {code}")
            if code == 0 or failures == restarts:
                if code and restarts:
                    _say(f"the job failed (exit code {code}) and {restarts} restart(s) are "
                         "used up")
                return code
            failures += 1
            lost |= done.lost_hosts
            nprocs = _relaunch(home, env, nprocs, shrink)
            away = f", without host(s) {', '.join(sorted(lost))}" if lost else ""
            _event(home, job, "restart", pe=None, detail=f"restart {failures} of {restarts} "
                   f"{_origin(env)} on {nprocs} PE(s){away}")
            _say(f"the job failed (exit code {code}); restart {failures} of {restarts} "
                 f"{_origin(env)} on {nprocs} PE(s){away}")
    finally:
        _finish(home, job, code)
        home.remove(created)


def _register(home: JobDir, argv: list[str], nprocs: int, env: dict[str, str]
              ) -> dict[str, Any] | None:
    """The job's live ``job.json`` and its registry entry (None: no live data, period 0,
    or a registry that cannot be written, said on stderr)."""
    period = live_period(env)
    if not period:
        return None
    start = time.time()
    ident = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(start))}-{uuid.uuid4().hex[:6]}"
    program = next((a for a in argv if not a.startswith("-")), argv[0] if argv else "")
    job: dict[str, Any] = {
        "id": ident, "name": os.path.basename(program), "argv": list(argv), "npes": nprocs,
        "hosts": [], "start": start, "end": None, "state": live.RUNNING, "pid": os.getpid(),
        "host": socket.gethostname(), "jobdir": str(home.path), "period": period}
    entry = live.registry_dir(ident, env.get(live.STATE_ENV) or None)
    try:
        home.clear_live()
        home.write_live_job(job)
        entry.mkdir(parents=True, exist_ok=True)
        _write_entry(entry, job)
        _prune(entry.parent)
    except OSError as exc:
        _say(f"no live data for this job ({exc})")
        return None
    job["registry"] = str(entry)
    return job


KEEP_ENDED = 200  # ended jobs the registry keeps (the oldest go when a job registers)


def _prune(jobs: Path, keep: int = KEEP_ENDED) -> None:
    """Remove the registry's oldest ended jobs beyond the ``keep`` most recent (their ids
    begin with their start time, so names sort by age); running ones stay."""
    try:
        names = sorted(p.name for p in jobs.iterdir() if p.is_dir())
    except OSError:
        return
    ended = [n for n in names
             if (read_json(jobs / n / live.JOB) or {}).get("state") in (live.DONE, live.FAILED)]
    for name in ended[:max(len(ended) - keep, 0)]:
        shutil.rmtree(jobs / name, ignore_errors=True)


def _write_entry(entry: Path, job: dict[str, Any]) -> None:
    """The registry's ``job.json`` of the job (written whole)."""
    write_text(entry / live.JOB,
               json.dumps({k: v for k, v in job.items() if k != "registry"}) + "\n")


def _event(home: JobDir, job: dict[str, Any] | None, kind: str, **fields: Any) -> None:
    """A launch's failure or a restart, in the job's events."""
    if job is None:
        return
    try:
        fd = open_append(home.live_events)
        try:
            append_line(fd, {"t": time.time(), "kind": kind, **fields})
        finally:
            os.close(fd)
    except OSError:
        pass


def _finish(home: JobDir, job: dict[str, Any] | None, code: int) -> None:
    """The job ended with ``code``: its state and end in its live ``job.json``, and the
    live files copied into its registry entry (they outlive the job directory)."""
    if job is None:
        return
    now = read_json(home.live_job) or {k: v for k, v in job.items() if k != "registry"}
    now.update(end=time.time(), state=live.DONE if code == 0 else live.FAILED)
    entry = Path(job["registry"])
    try:
        home.write_live_job(now)
        home.keep_live(entry)
        _write_entry(entry, now)
    except OSError as exc:
        _say(f"the live data of job {job['id']} could not be kept in {entry} ({exc})")


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
