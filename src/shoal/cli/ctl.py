"""``shoal ctl``: commands to a running ``shoal run`` job (issue 14, section 3)."""

from __future__ import annotations

import sys
import time
from typing import NoReturn

import click

from shoal.errors import UsageError
from shoal.jobdir import JOB, JobDir, alive

POLL = 0.05  # seconds between two looks at the job directory while waiting


@click.command("ctl")
@click.argument("home", metavar="JOBDIR", type=click.Path(file_okay=False))
@click.argument("command", type=click.Choice(["status", "shrink", "expand"]))
@click.argument("pes", type=int, required=False)
@click.option("--wait", "wait", default="60s", show_default=True,
              help="How long to wait until the job runs at the new size (0: do not wait).")
def ctl(home: str, command: str, pes: int | None, wait: str) -> None:
    """Send COMMAND to the job running in JOBDIR (printed by shoal run at start, or its
    --jobdir): `status` prints its PE count; `shrink N` / `expand N` moves it to N PEs. The
    job checkpoints at its next shoal.iteration() or AtSync point, ends, and shoal run
    relaunches it on N PEs from that checkpoint (Acun14, Section III-D). Prints the time
    from the request until the job runs at the new size. A size the job cannot run on (a
    group made on some PEs needs each of them) is refused by the job with the reason."""
    from shoal.units import parse_duration

    limit = parse_duration(wait, "--wait")
    root = JobDir(home)
    job = _job(root)
    if command == "status":
        running = root.running() or {}
        click.echo(f"job {job['pid']}: {job['pes']} PE(s), launch {job['launch']}"
                   + ("" if running.get("pes") == job["pes"] else " (starting)"))
        return
    _check(command, pes, job["pes"])
    asked = time.time()
    root.ask_resize(pes, asked)
    if limit <= 0:
        click.echo(f"asked job {job['pid']} to {command} from {job['pes']} to {pes} PEs")
        return
    seconds = _until_running(root, pes, asked, limit)
    click.echo(f"job {job['pid']}: {command} from {job['pes']} to {pes} PEs in "
               f"{seconds:.2f} s")


def _job(root: JobDir) -> dict:
    job = root.job()
    if job is None:
        raise UsageError(f"{root.path} is not the directory of a running shoal run job (no "
                         f"{JOB}): give the path shoal run printed, or its --jobdir")
    if not alive(job.get("pid")):
        raise UsageError(f"the job of {root.path} (shoal run {job.get('pid')}) has ended")
    return job


def _check(command: str, pes: int | None, now: int) -> None:
    if pes is None or pes < 1:
        raise UsageError(f"shoal ctl {command} N: give the number of PEs N >= 1 "
                         f"(got {pes})")
    if command == "shrink" and pes >= now:
        raise UsageError(f"shrink {pes}: the job runs on {now} PE(s); shrink to fewer "
                         f"(or expand {pes})")
    if command == "expand" and pes <= now:
        raise UsageError(f"expand {pes}: the job runs on {now} PE(s); expand to more "
                         f"(or shrink {pes})")


def _until_running(root: JobDir, pes: int, asked: float, limit: float) -> float:
    """Wait until PE 0 says the job runs on ``pes`` PEs (since after ``asked``)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        running = root.running() or {}
        if running.get("pes") == pes and running.get("at", 0) >= asked:
            return float(running["at"]) - asked
        refused = running.get("refused") or {}
        if refused.get("at") == asked:  # the job says why it cannot, and goes on
            raise UsageError(str(refused.get("why")))
        if root.job() is None:
            _unserved("the job ended before it was resized")
        time.sleep(POLL)
    _unserved(f"the job has not run on {pes} PEs within {limit:g} s: it resizes at its "
              "next shoal.iteration() in main or AtSync point (a program with neither "
              "never resizes); the request stays until then")


def _unserved(text: str) -> NoReturn:
    """Not the user's mistake (exit code 1, not 2): the job did not do what was asked."""
    click.echo(f"shoal: {text}", err=True)
    sys.exit(1)
