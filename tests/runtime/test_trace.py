"""``--trace``: the per-PE timeline of a run (Chrome trace format) and ``shoal lb plot``.
The AtSync job of jobs/lb.py runs traced; its trace must hold every entry method it ran, one
AtSync point and one balancing step per iteration, migrations that add up to the steps'
counts, and loads per iteration that add up to the entry methods' time."""

import json
import subprocess
import sys

import numpy as np
import pytest
from mpi_jobs import run_ok

from shoal.runtime.trace import loads_per_iteration, read

ITERS, N = 6, 24  # jobs/lb.py atsync: 6 iterations of 24 workers (one in, one out)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    run_ok("lb", 2, "atsync", options=("--cpu-stats", "--trace", str(path)))
    return path, read(path)


def test_the_trace_holds_every_entry_method_sync_point_step_and_migration(traced):
    _, doc = traced
    events = doc["traceEvents"]
    assert doc["shoal"] == {"version": 1, "npes": 2}
    start = [e for e in events if e["name"] == "Worker.start"]
    resume = [e for e in events if e["name"] == "Worker.resume_from_sync"]
    # every worker starts once, then resumes after each of the 6 AtSync points: 24 of
    # them, 25 after the insertion in iteration 2, 24 after the deletion in iteration 3
    assert len(start) == N and len(resume) == N * ITERS + 1
    assert {e["pid"] for e in resume} == {0, 1}  # work ran on both PEs
    assert all(e["ph"] == "X" and e["dur"] >= 900 for e in start)  # each spins >= 1 ms
    syncs = [e for e in events if e["name"] == "sync"]
    steps = [e for e in events if e["name"] == "lb step"]
    assert len(syncs) == ITERS and len(steps) == ITERS
    assert all(e["pid"] == 0 for e in syncs + steps)
    moved = sum(n for e in events if e["name"] == "migrate" for n in e["args"]["out"].values())
    assert moved == sum(e["args"]["migrations"] for e in steps) > 0
    assert all(e["ph"] == "X" and e["dur"] > 0 for e in events if e["name"] == "idle")


def test_loads_per_iteration_add_up_to_the_entry_methods_time(traced):
    _, doc = traced
    edges, loads, steps = loads_per_iteration(doc)
    assert loads.shape == (ITERS, 2) and steps == list(range(ITERS))
    entries = [e for e in doc["traceEvents"] if e["cat"] == "entry" and e["ts"] <= edges[-1]]
    assert loads.sum() == pytest.approx(sum(e["dur"] for e in entries) * 1e-6)
    assert np.all(np.diff(edges) > 0)
    # the heavy workers (the first 8) start on PE 0, and its first iteration is the heavier
    # one (52 ms against 12 on a quiet machine; the loads are wall time, and a loaded
    # suite, whose other work preempted PE 1's short entries, measured 52 against 44)
    start = [e for e in doc["traceEvents"] if e["name"] == "Worker.start"]
    assert {e["pid"] for e in start if e["args"]["index"][0] < 8} == {0}
    assert loads[0, 0] > loads[0, 1]


def test_lb_plot_draws_the_figure_and_writes_the_csv(traced, tmp_path):
    path, _ = traced
    png, csv = tmp_path / "loads.png", tmp_path / "loads.csv"
    done = subprocess.run([sys.executable, "-m", "shoal", "lb", "plot", str(path), "--out",
                           str(png), "--csv", str(csv)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = csv.read_text().splitlines()
    assert lines[0] == "iteration,end_us,pe,load_s,step_after" and len(lines) == 1 + ITERS * 2


@pytest.mark.parametrize("content,says", [
    (b"\xff\xfe{", "not a trace"), (b'{"a": 1}', "not a trace"),
    (json.dumps({"traceEvents": [], "shoal": {"version": 9}}).encode(), "version 9"),
])
def test_lb_plot_refuses_what_is_not_a_trace_with_exit_2(tmp_path, content, says):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "shoal", "lb", "plot", str(bad), "--out",
                           str(tmp_path / "x.png")], capture_output=True, text=True)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_run_refuses_a_trace_path_in_a_missing_directory_before_running(tmp_path):
    done = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "1", "--trace",
                           str(tmp_path / "no" / "t.json"), "examples/hello.py"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "does not exist" in done.stderr
