"""``shoal top``: the dashboard's job view in the terminal, from live files written by hand
(``livefiles``): a finished job printed once, a running one followed until it ends, a
job id from the registry or a job directory, a truncated last line, a PE without a file,
and an unknown job (one line, exit code 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
from livefiles import expected_utilisation, row, write_job

from shoal import live, views
from shoal.dashboard import data

NPES, PERIODS, LB_AT = 4, 20, 10


def top(*args, root, extra_env=None, timeout=60):
    env = {**os.environ, live.STATE_ENV: str(root), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "shoal", "top", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@contextmanager
def following(target, root):
    """``shoal top TARGET`` following a job in a terminal (as rich sees one with
    TTY_COMPATIBLE), refreshed every 0.2 s; killed if the test leaves it running."""
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "top", str(target), "--interval",
                             "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, live.STATE_ENV: str(root),
                                 "TTY_COMPATIBLE": "1", "COLUMNS": "200"})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def pe_lines(stdout):
    """The PE table's rows: PE number -> its cells."""
    out = {}
    for line in stdout.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit() and len(cells) >= 14:
            out[int(cells[0])] = cells
    return out


def test_job_view_numbers(tmp_path):
    folder = write_job(tmp_path, npes=NPES, periods=PERIODS, lb_at=LB_AT)
    loaded = live.load(folder)
    view = views.job_view(loaded, now=time.time(), window=2.0)
    assert view.summary == data.job_summary({**loaded["job"], "alive": False},
                                            time.time()) | {"uptime": view.summary["uptime"]}
    assert view.summary["state"] == "done" and view.summary["uptime"] == pytest.approx(10.0)
    assert [p.utilisation for p in view.pes] == pytest.approx(
        expected_utilisation(NPES, PERIODS, LB_AT))
    for p in view.pes:  # the last 2 s are balanced: 60% busy, 2% overhead, the rest idle
        assert (p.busy, p.overhead, p.idle) == pytest.approx((0.6, 0.02, 0.38))
        assert p.msgs_sent == pytest.approx(100 * (p.pe + 1) / 0.5)
        assert p.bytes_received == pytest.approx(4000 * (p.pe + 1) / 0.5)
        assert (p.rss, p.queue, p.elements) == ((80 + p.pe) << 20, p.pe, 8 + p.pe)
    assert [m[0] for m in view.methods] == ["Cell.compute", "Cell.exchange", "Main.step"]
    assert sum(m[3] for m in view.methods) == pytest.approx(1.0)
    assert [e["kind"] for e in view.events] == ["lb", "checkpoint"] and view.missing == []


def test_a_finished_job_by_id_prints_once(tmp_path):
    write_job(tmp_path, job_id="job-abc", npes=NPES, periods=PERIODS, lb_at=LB_AT)
    for spec in ("job-abc", "job-a"):  # the id or a unique prefix
        out = top(spec, root=tmp_path)  # no --once: a finished job is shown once
        assert out.returncode == 0, out.stderr
        assert "job-abc" in out.stdout and "done" in out.stdout
        rows = pe_lines(out.stdout)
        assert sorted(rows) == list(range(NPES))
        runs = [float(rows[pe][6].rstrip("%")) for pe in range(NPES)]
        assert runs == pytest.approx([100 * u for u in expected_utilisation(NPES, PERIODS,
                                                                            LB_AT)], abs=0.06)
        assert "Cell.compute" in out.stdout and "70.0%" in out.stdout
        assert "max/avg 1.5 -> 1" in out.stdout and "generation 1" in out.stdout


def test_a_job_directory_once_and_a_truncated_line_and_a_missing_pe(tmp_path):
    folder = write_job(tmp_path / "reg", job_id="job-d", npes=NPES, periods=PERIODS)
    jobdir = tmp_path / "myjob"
    shutil.copytree(folder, jobdir / live.LIVE)
    whole = top(str(jobdir), "--once", root=tmp_path / "empty")
    assert whole.returncode == 0, whole.stderr
    with open(jobdir / live.LIVE / live.pe_file(0), "a") as f:  # being written
        f.write('{"t": 1700000011.0, "dt": 0.5, "pe": 0, "entries": {"Cell.comp')
    (jobdir / live.LIVE / live.pe_file(2)).unlink()
    out = top(str(jobdir), "--once", root=tmp_path / "empty")
    assert out.returncode == 0, out.stderr
    rows, before = pe_lines(out.stdout), pe_lines(whole.stdout)
    assert rows[0] == before[0]  # the partial line is not read
    assert "no data" in " ".join(rows[2]) and "no rows (yet) from PE 2" in out.stdout
    assert "\x1b[" not in out.stdout  # --once is plain text


def test_an_unknown_job_or_a_directory_without_live_data_is_exit_2(tmp_path):
    write_job(tmp_path, job_id="job-1")
    out = top("nope", root=tmp_path)
    assert out.returncode == 2 and "no job 'nope'" in out.stderr and "job-1" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    out = top(str(tmp_path / "empty"), root=tmp_path)
    assert out.returncode == 2 and "holds no live data" in out.stderr, out.stderr
    write_job(tmp_path, job_id="job-2")
    out = top("job-", root=tmp_path)
    assert out.returncode == 2 and "ambiguous" in out.stderr, out.stderr


def test_a_running_job_is_followed_until_it_ends(tmp_path):
    """The live display (a terminal, as rich sees one with TTY_COMPATIBLE) refreshes
    until the job's state says it ended; what was appended meanwhile is shown."""
    folder = write_job(tmp_path, job_id="job-run", npes=2, periods=4, lb_at=99,
                       state="running")
    with following("job-run", tmp_path) as proc:
        time.sleep(3)
        assert proc.poll() is None  # still following
        job = json.loads((folder / live.JOB).read_text())
        with open(folder / live.pe_file(0), "a") as f:
            f.write(json.dumps(row(0, job["start"] + 2.5, 0.5, 0.9, "node1")) + "\n")
        with open(folder / live.EVENTS, "a") as f:
            f.write(json.dumps({"t": job["start"] + 2.5, "kind": "resize", "from": 2,
                                "to": 3}) + "\n")
        time.sleep(1)
        (folder / live.JOB).write_text(json.dumps({**job, "state": "done",
                                                   "end": job["start"] + 3.0}))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "running" in stdout and "done" in stdout and "2 -> 3 PEs" in stdout


def test_a_job_whose_directory_is_removed_at_its_end_is_followed_into_the_registry(tmp_path):
    """A running job's files are in its job directory; at its end the supervisor keeps
    them in the registry and removes the directory: top shows the end from there."""
    entry = write_job(tmp_path / "reg", job_id="job-mv", npes=2, periods=4, lb_at=99,
                      state="running")
    jobdir = tmp_path / "jd"
    shutil.copytree(entry, jobdir / live.LIVE)
    job = json.loads((entry / live.JOB).read_text())
    for name in os.listdir(entry):
        os.unlink(entry / name)
    (entry / live.JOB).write_text(json.dumps({**job, "jobdir": str(jobdir)}))
    (jobdir / live.LIVE / live.JOB).write_text(json.dumps({**job, "jobdir": str(jobdir)}))
    with following(jobdir, tmp_path / "reg") as proc:
        time.sleep(3)
        assert proc.poll() is None
        for name in os.listdir(jobdir / live.LIVE):  # kept in the registry, then removed
            shutil.copy(jobdir / live.LIVE / name, entry / name)
        (entry / live.JOB).write_text(json.dumps({**job, "jobdir": str(jobdir),
                                                  "state": "failed",
                                                  "end": job["start"] + 2.0}))
        shutil.rmtree(jobdir)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "running" in stdout and "failed" in stdout and "gone" not in stdout
