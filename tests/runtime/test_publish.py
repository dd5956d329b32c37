"""Live data of real jobs (issue 29 item 1, shoal.runtime.publish): ``shoal run`` jobs of
jobs/live.py on 2 PEs, their rows, events and registry entry read back by shoal.live and
compared with what the job measured itself (shoal.stats(), shoal.lb_history())."""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import live
from shoal.files import append_line, open_append

JOB = Path(__file__).with_name("jobs") / "live.py"


def shoal_run(tmp_path, *flags, seconds=3.0, extra=(), period="0.2"):
    """Run jobs/live.py under shoal run on 2 PEs with its own registry; (process, stats
    the job wrote or None, registry)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    reg, out = tmp_path / "registry", tmp_path / "stats.json"
    env = dict(os.environ, SHOAL_STATE_DIR=str(reg))
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--timeout", "2min",
           "--live-period", period, *flags, str(JOB), str(out), str(seconds), *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    stats = json.loads(out.read_text()) if out.exists() else None
    return done, stats, reg


def the_job(reg):
    found = live.jobs(reg)
    assert len(found) == 1, found
    return found[0], live.load(found[0]["path"])


def test_rows_at_the_period_on_every_pe_agree_with_the_jobs_stats(tmp_path):
    done, stats, reg = shoal_run(tmp_path, "--lb", "none")
    assert done.returncode == 0, done.stderr[-3000:]
    job, data = the_job(reg)
    # the registry entry: finished, and the live files moved there (the /tmp job
    # directory is gone)
    assert job["state"] == "done" and not job["alive"]
    assert job["npes"] == 2 and len(job["hosts"]) == 2 and job["period"] == 0.2
    assert job["name"] == "live.py" and job["argv"][0] == str(JOB)
    assert job["end"] > job["start"] and job["pid"] != os.getpid()
    assert not Path(job["jobdir"]).exists()
    assert Path(job["path"]).parent == reg / "jobs"
    assert sorted(data["pes"]) == [0, 1]
    by_pe = {s["pe"]: s for s in stats["pes"]}
    for pe, rows in data["pes"].items():
        assert all(tuple(r) == live.ROW_KEYS and r["pe"] == pe for r in rows)
        # about every 0.2 s (a row waits for the entry method running at its time: 24 ms
        # of CPU at most here, which a PE with a quarter of a core takes 0.1 s to spend)
        # over the 3 s of the job
        dts = [r["dt"] for r in rows[:-1]]
        assert len(rows) >= 6, len(rows)
        assert 0.19 <= statistics.median(dts) <= 0.3, dts
        # (a loaded machine holds a PE off its core now and then, 0.87 s once in CI: a
        # few late rows, and none that waited for the job's end)
        assert sum(dt > 0.4 for dt in dts) <= len(dts) // 4 and max(dts) < 2.0, dts
        ts = [r["t"] for r in rows]
        assert ts == sorted(ts)
        # the entry seconds of the rows are the job's own statistics (the rows go on
        # after the job measured itself: the final reduction and quiescence, < 10 ms)
        busy = sum(live.busy(r) for r in rows)
        assert busy == pytest.approx(by_pe[pe]["busy"], abs=0.01), (pe, busy, by_pe[pe])
        assert sum(r["idle"] for r in rows) == pytest.approx(by_pe[pe]["idle"], abs=0.15)
        calls = live.entry_totals(rows)
        # (PeAgent.run: shoal.run_on_all's, which measured the job)
        assert set(calls) == {"Worker.iterate", "Worker.resume_from_sync", "PeAgent.run"}
        assert calls["Worker.iterate"][0] == 4 * stats["steps"]  # 4 elements a PE
        for r in rows:
            assert r["overhead"] >= 0
            assert r["dt"] == pytest.approx(live.busy(r) + r["idle"] + r["overhead"],
                                            abs=1e-6) or r["overhead"] == 0
            # 4 Workers, and at the end shoal.run_on_all's PeAgent
            assert r["elements"] in (4, 5) and r["rss"] > 20e6 and r["queue"] >= 0
        assert rows[0]["elements"] == 4
        assert sum(r["sent"] for r in rows) > stats["steps"]
        assert sum(r["received"] for r in rows) > stats["steps"]
        assert sum(r["bytes_sent"] for r in rows) > 0
        assert sum(r["bytes_received"] for r in rows) > 0
    # PE 0 holds the three heavy elements (6 + 6 + 6 + 1 units against 4): busier
    assert live.utilisation(data["pes"][0]) > 0.9
    assert live.utilisation(data["pes"][1]) < 0.6
    assert data["events"] == []  # no balancing, no checkpoint


def test_balancing_steps_and_a_checkpoint_are_events(tmp_path):
    ckpt = tmp_path / "ckpt"
    done, stats, reg = shoal_run(tmp_path, "--lb", "greedy_refine", "--lb-period", "0.8s",
                                 extra=("checkpoint", str(ckpt)))
    assert done.returncode == 0, done.stderr[-3000:]
    job, data = the_job(reg)
    assert job["state"] == "done"
    history = stats["lb"]
    steps = [e for e in data["events"] if e["kind"] == "lb"]
    assert len(history) >= 2 and len(steps) == len(history)  # one event per step
    for event, record in zip(steps, history, strict=True):
        assert event["step"] == record["step"]
        assert event["before"] == pytest.approx(record["before"])
        assert event["predicted"] == pytest.approx(record["after_predicted"])
        assert event["migrations"] == record["migrations"]
        assert event["seconds"] == pytest.approx(record["total_time"])
        assert event["strategy"] == record["strategy"]
        if record["after_measured"] is not None:  # measured at the next step
            assert event["after"] == pytest.approx(record["after_measured"])
    assert steps[0]["after"] is not None
    # (19 units against 4 of CPU time, 1.65 by design, jobs/live.py; with wall-clock spins
    # and loads, a loaded machine had stretched the light elements': 1.29 once in CI, 1.05
    # and 1.146 in fresh clones' runs)
    assert history[0]["before"] > 1.15 and history[0]["migrations"] >= 1
    checkpoints = [e for e in data["events"] if e["kind"] == "checkpoint"]
    assert len(checkpoints) == 1
    assert checkpoints[0]["path"] == str(ckpt) and checkpoints[0]["generation"] >= 1
    assert checkpoints[0]["bytes"] > 0 and checkpoints[0]["seconds"] > 0
    # elements moved: each PE's rows count what ran there, the job's statistics follow
    # the element; over both PEs they agree
    rows_busy = sum(live.busy(r) for rows in data["pes"].values() for r in rows)
    assert rows_busy == pytest.approx(sum(s["busy"] for s in stats["pes"]), abs=0.02)
    # the balancer evened the load out: the PEs' utilisation after the first step
    first = steps[0]["t"]
    later = {pe: live.utilisation([r for r in rows if r["t"] > first + 0.5])
             for pe, rows in data["pes"].items()}
    assert abs(later[0] - later[1]) < 0.3, later


def test_a_killed_pe_restarted_and_a_cut_last_line(tmp_path):
    jobdir = tmp_path / "jobdir"
    jobdir.mkdir()  # (the user's: kept at the end, without shoal's files)
    done, stats, reg = shoal_run(tmp_path, "--lb", "none", "--kill", "1@2s",
                                 "--restarts", "1", "--jobdir", str(jobdir), seconds=4.0)
    assert done.returncode == 0, done.stderr[-3000:]
    # the relaunch ran, from the start (no checkpoint): about 50 steps in its 4 s when
    # quiet, a PE's step being 76 ms of CPU
    assert stats["steps"] > 2
    job, data = the_job(reg)
    assert job["state"] == "done"
    kinds = [e["kind"] for e in data["events"]]
    assert kinds == ["failure", "restart"], data["events"]
    assert "exit code" in data["events"][0]["detail"]
    # both launches' rows, PE 1's too: its file has the rows of the killed process and
    # those of the relaunched one after them
    failed_at = data["events"][0]["t"]
    for pe in (0, 1):
        ts = [r["t"] for r in data["pes"][pe]]
        assert any(t < failed_at for t in ts) and any(t > failed_at for t in ts), pe
    # a --jobdir of the user's loses what shoal wrote there: the registry keeps the files
    assert jobdir.is_dir() and not (jobdir / "live").exists()
    assert Path(job["path"]) == reg / "jobs" / job["id"]
    # a PE killed in the middle of a line: the reader skips it; a writer that opens the
    # file again ends the cut line first, and its rows read
    path = Path(job["path"]) / "pe-1.jsonl"
    rows = len(live.load(job["path"])["pes"][1])
    with open(path, "ab") as f:
        f.write(b'{"t": 1e12, "dt": 0.2, "pe": 1, "ent')
    assert len(live.load(job["path"])["pes"][1]) == rows
    fd = open_append(path)
    try:
        append_line(fd, {"t": 2e12, "dt": 0.2, "pe": 1, "entries": {"A.b": [1, 0.1]}})
    finally:
        os.close(fd)
    again = live.load(job["path"])["pes"][1]
    assert len(again) == rows + 1 and again[-1]["t"] == 2e12


def test_a_failed_job_is_registered_failed_and_period_0_publishes_nothing(tmp_path):
    done, stats, reg = shoal_run(tmp_path / "a", "--lb", "none", "--kill", "1@2s",
                                 seconds=6.0)
    assert done.returncode != 0 and stats is None
    job, data = the_job(reg)
    assert job["state"] == "failed" and job["end"] > job["start"] and not job["alive"]
    assert [e["kind"] for e in data["events"]] == ["failure"]  # (no restart asked for)
    assert len(data["pes"][0]) >= 3 and len(data["pes"][1]) >= 3
    done, stats, reg = shoal_run(tmp_path / "b", "--lb", "none", seconds=0.5, period="0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert stats is not None and live.jobs(reg) == []


def test_a_resize_is_an_event_and_the_job_runs_on_at_its_new_size(tmp_path):
    """shoal ctl shrink 1 while the job runs: PE 0's resize event (2 -> 1), job.json says 1
    PE at the end, and only PE 0 publishes after the resize."""
    from shoal.jobdir import JobDir

    reg, out, home = tmp_path / "registry", tmp_path / "stats.json", tmp_path / "job"
    env = dict(os.environ, SHOAL_STATE_DIR=str(reg))
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", "--timeout",
                            "2min", "--live-period", "0.2", "--jobdir",
                            str(home), str(JOB), str(out), "3", "plain"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while (JobDir(home).running() or {}).get("pes") != 2:
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.05)
        time.sleep(1.0)
        ctl = subprocess.run([sys.executable, "-m", "shoal", "ctl", str(home), "shrink", "1"],
                             capture_output=True, text=True, timeout=120)
        assert ctl.returncode == 0, ctl.stderr
        _, err = job.communicate(timeout=150)
        assert job.returncode == 0, err[-3000:]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)
    found, data = the_job(reg)
    assert found["state"] == "done" and found["npes"] == 1 and len(found["hosts"]) == 1
    resizes = [e for e in data["events"] if e["kind"] == "resize"]
    assert [(e["from"], e["to"]) for e in resizes] == [(2, 1)], data["events"]
    at = resizes[0]["t"]
    assert max(r["t"] for r in data["pes"][1]) < at + 0.5  # PE 1's last row: before it ended
    assert sum(1 for r in data["pes"][0] if r["t"] > at + 1) >= 5  # PE 0 goes on alone
    stats = json.loads(out.read_text())
    assert [s["pe"] for s in stats["pes"]] == [0]


@settings(max_examples=40, deadline=None)
@given(states=st.lists(st.sampled_from([live.RUNNING, live.DONE, live.FAILED, None]),
                       max_size=12),
       keep=st.integers(0, 5))
def test_the_registry_keeps_the_newest_ended_jobs_and_every_running_one(tmp_path_factory,
                                                                          states, keep):
    from shoal.supervise import _prune

    jobs = tmp_path_factory.mktemp("jobs")
    for k, state in enumerate(states):  # ids sort by start time, as the supervisor makes them
        (jobs / f"2026112{k:02d}-000000-abcdef").mkdir()
        if state is not None:  # (None: a folder without its job.json, left alone)
            (jobs / f"2026112{k:02d}-000000-abcdef" / live.JOB).write_text(
                json.dumps({"state": state}))
    ended = [k for k, s in enumerate(states) if s in (live.DONE, live.FAILED)]
    gone = set(ended[:max(len(ended) - keep, 0)])
    _prune(jobs, keep)
    left = sorted(p.name for p in jobs.iterdir())
    assert left == [f"2026112{k:02d}-000000-abcdef" for k in range(len(states)) if k not in gone]
