"""The co-location harness with 4 ranks: a baseline and two configurations, one impossible."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.launch import mpiexec

JOB = Path(__file__).with_name("overhead_job.py")


def test_baseline_and_configurations_are_consistent():
    out = subprocess.run([*mpiexec(), "-n", "4", sys.executable, str(JOB)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    base, ok, bad = json.loads(out.stdout.strip().splitlines()[-1])
    assert base["interval_s"] is None and base["slowdown"] == 0.0 and "sent" not in base
    assert ok["error"] == "" and ok["window"] == 1.0
    assert ok["slowdown"] == pytest.approx(ok["seconds"] / base["seconds"] - 1)
    assert ok["slowdown_min"] <= ok["slowdown"] <= ok["slowdown_max"]
    # the two gossip ranks really sent and merged windows, and their ages are finite
    assert ok["sent"] > 5 and ok["received"] > 5
    assert 0 < ok["mean_age_s"] < 1.0 and 0 <= ok["busy_fraction"] < 1
    assert ok["dropped"] >= 0
    for r in (base, ok):
        assert r["seconds"] > 0 and 0 < r["mpi_fraction"] < 1
    # a window of 5 entries among 2 gossiping ranks cannot run: reported, the sweep went on
    assert bad["window"] == 5 and "window" in bad["error"] and "seconds" not in bad
