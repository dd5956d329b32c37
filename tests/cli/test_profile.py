"""``shoal profile`` and the binning behind it (``shoal.views``): from traces with known busy
intervals the binned utilisation equals a brute-force reference and the sums by entry
method equal the totals; invariants under hypothesis; a real traced run gives a figure;
what is not a trace is refused with one line and exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shoal import live, views

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("A.work", "B.talk", "C.wait")


def shoal(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def trace(intervals, npes, extra=()):
    """A trace document (format of shoal.runtime.trace) of ``intervals``: (pe, method,
    start s, duration s)."""
    events = [{"name": m, "cat": "entry", "ph": "X", "pid": pe, "tid": 0, "ts": s * 1e6,
               "dur": d * 1e6, "args": {"index": [0]}} for pe, m, s, d in intervals]
    return {"traceEvents": events + list(extra), "displayTimeUnit": "ms",
            "shoal": {"version": 1, "npes": npes}}


def brute(intervals, edges, methods):
    """Per bin and method, the overlap of every interval with the bin: the reference."""
    out = np.zeros((len(edges) - 1, len(methods)))
    for _, m, s, d in intervals:
        for b in range(len(edges) - 1):
            out[b, methods.index(m)] += max(0.0, min(s + d, edges[b + 1]) - max(s, edges[b]))
    return out


def known():
    """2 PEs: PE 0 busy 0.0-0.25 (A) and 0.5-1.0 (B); PE 1 busy 0.1-0.9 (A), 0.95-1.0 (C)."""
    return [(0, "A.work", 0.0, 0.25), (0, "B.talk", 0.5, 0.5), (1, "A.work", 0.1, 0.8),
            (1, "C.wait", 0.95, 0.05)]


def test_binned_utilisation_of_known_intervals_is_exact():
    prof = views.trace_profile(trace(known(), 2), bins=4)
    assert prof.edges == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    # of 0.5 PE-seconds each: bin 0 PE 0 0.25 + PE 1 0.15; bin 1 0 + 0.25; bin 2 0.25 + 0.25;
    # bin 3 0.25 + (0.15 of A and 0.05 of C)
    assert prof.utilisation == pytest.approx([0.4 / 0.5, 0.25 / 0.5, 0.5 / 0.5, 0.45 / 0.5])
    assert prof.methods == ["A.work", "B.talk", "C.wait"]
    assert prof.busy == pytest.approx(brute(known(), prof.edges, prof.methods))
    assert prof.pe_utilisation == pytest.approx([0.75, 0.85])


def test_a_long_run_gives_a_curve_of_round_bins():
    # 40 steps over 12.3 s: 80-200 bins of a round width, not one point per step
    steps = [(pe, "A.work", k * 0.3075 + 0.01 * pe, 0.2) for k in range(40) for pe in (0, 1)]
    prof = views.trace_profile(trace(steps, 2))
    n = len(prof.edges) - 1
    width = prof.edges[1] - prof.edges[0]
    assert 80 <= n <= 200 and width == pytest.approx(0.1)
    assert prof.edges[-1] >= steps[-1][2] + 0.2 - 1e-9
    assert prof.busy.sum() == pytest.approx(sum(d for *_, d in steps))


@st.composite
def runs(draw):
    """Per PE, intervals that do not overlap (gaps and durations drawn), methods drawn."""
    npes = draw(st.integers(1, 4))
    intervals = []
    for pe in range(npes):
        t = draw(st.floats(0, 2))
        for _ in range(draw(st.integers(0 if pe else 1, 12))):
            d = draw(st.floats(0, 1.5))
            intervals.append((pe, draw(st.sampled_from(METHODS)), t, d))
            t += d + draw(st.floats(0, 1))
    return npes, intervals, draw(st.one_of(st.none(), st.integers(1, 300)))


@settings(max_examples=60, deadline=None)
@given(runs())
@example(run=(1, [(0, "A.work", 0.125, 1.6405019755433692e-17)], None))  # (shorter than an
# ulp of its start: its span once rounded below its busy time)
def test_profile_invariants(run):
    npes, intervals, bins = run
    if not any(d > 0 for *_, d in intervals):
        intervals.append((0, "A.work", 0.0, 0.5))
    prof = views.trace_profile(trace(intervals, npes), bins)
    u = prof.utilisation
    assert np.all(u >= 0) and np.all(u <= 1 + 1e-9)
    totals = {m: sum(d for _, mm, _, d in intervals if mm == m) for m in prof.methods}
    assert prof.busy.sum(axis=0) == pytest.approx([totals[m] for m in prof.methods], abs=1e-9)
    assert prof.pe_busy.sum(axis=0) == pytest.approx(prof.busy.sum(axis=0), abs=1e-9)
    start = min(s for *_, s, _ in intervals)
    shifted = [(pe, m, s - start, d) for pe, m, s, d in intervals]
    assert prof.busy == pytest.approx(brute(shifted, prof.edges, prof.methods), abs=1e-9)
    assert np.all(prof.pe_utilisation <= 1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 5), st.floats(0, 3)),
                min_size=1, max_size=30), st.integers(1, 50))
@example(items=[(0.0, 5e-324, 0.5)], nbins=1)  # (CI's case: the reference rounded to 0)
def test_spread_gives_each_bin_its_overlap(items, nbins):
    edges = np.linspace(0, 12, nbins + 1)
    starts = [s for s, _, _ in items]
    ends = [s + d for s, d, _ in items]
    amounts = [a for *_, a in items]
    out = views.spread(starts, ends, amounts, [0] * len(items), edges, 1)[:, 0]
    ref = np.zeros(nbins)
    for s, e, a in zip(starts, ends, amounts, strict=True):
        if e == s:
            if s <= 12:
                ref[min(np.searchsorted(edges, s, "right") - 1, nbins - 1)] += a
            continue
        for b in range(nbins):
            # (the share first: a times a subnormal overlap would round to 0)
            ref[b] += a * (max(0.0, min(e, edges[b + 1]) - max(s, edges[b])) / (e - s))
    assert out == pytest.approx(ref, abs=1e-9)


def write_live(folder, rows_by_pe, period=0.5, npes=None):
    folder.mkdir(parents=True, exist_ok=True)
    job = {"id": "j-live", "name": "prog.py", "argv": ["prog.py"],
           "npes": npes or len(rows_by_pe), "hosts": ["h"] * (npes or len(rows_by_pe)),
           "start": 100.0, "end": 110.0, "state": "done", "pid": 0, "host": "h",
           "jobdir": str(folder), "period": period}
    (folder / live.JOB).write_text(json.dumps(job))
    for pe, rows in rows_by_pe.items():
        (folder / live.pe_file(pe)).write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / live.EVENTS).write_text(json.dumps({"t": 102.0, "kind": "lb", "step": 1,
                                                  "before": 1.4, "after": 1.05}) + "\n")


def live_rows(pe, busy_share, count=10, period=0.5):
    return [{"t": 100.0 + (k + 1) * period, "dt": period, "pe": pe, "host": "h",
             "entries": {"A.work": [3, busy_share * period * 0.75],
                         "B.talk": [1, busy_share * period * 0.25]},
             "idle": period * (0.95 - busy_share), "overhead": period * 0.05, "sent": 4,
             "received": 4, "bytes_sent": 100, "bytes_received": 100, "rss": 1 << 20,
             "queue": 0, "elements": 2} for k in range(count)]


def test_live_profile_agrees_with_the_rows(tmp_path):
    folder = tmp_path / "job" / live.LIVE
    write_live(folder, {0: live_rows(0, 0.8), 1: live_rows(1, 0.4)})
    prof = views.live_profile(live.load(folder))
    assert len(prof.edges) - 1 == 10  # bins no shorter than the period
    assert prof.utilisation == pytest.approx([0.6] * 10)
    assert prof.pe_utilisation == pytest.approx([0.8, 0.4])
    assert prof.overhead.sum() == pytest.approx(2 * 10 * 0.5 * 0.05)
    assert prof.busy.sum(axis=0) == pytest.approx([0.6 * 10 * 0.75, 0.6 * 10 * 0.25])
    assert [e[1] for e in prof.events] == ["lb"] and prof.events[0][0] == pytest.approx(2.0)
    fine = views.live_profile(live.load(folder), bins=40)  # finer than the rows: spread
    assert fine.utilisation == pytest.approx([0.6] * 40)


def test_profile_of_a_job_directory_writes_the_figure(tmp_path):
    write_live(tmp_path / "job" / live.LIVE, {0: live_rows(0, 0.8), 1: live_rows(1, 0.4)})
    out = shoal("profile", str(tmp_path / "job"), "--out", str(tmp_path / "p.svg"),
                "--view", "usage")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")
    assert "2 PEs (utilisation 40.0%-80.0%)" in out.stdout


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    """A real traced run of an example on 2 PEs."""
    folder = tmp_path_factory.mktemp("traced")
    path = folder / "trace.json"
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--timeout", "3min",
                          "--trace", str(path), str(ROOT / "examples" / "stencil2d.py"),
                          "--n", "256", "--blocks", "4", "--iters", "20"],
                         capture_output=True, text=True, timeout=300, cwd=folder)
    assert out.returncode == 0, out.stderr[-3000:]
    return path


def test_a_real_traced_run_gives_the_figures(real_trace, tmp_path):
    png, csv = tmp_path / "profile.png", tmp_path / "profile.csv"
    out = shoal("profile", str(real_trace), "--out", str(png), "--csv", str(csv))
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = csv.read_text().splitlines()
    assert lines[0] == "bin,start_s,end_s,method,seconds,capacity_s"
    from shoal.runtime.trace import read

    doc = read(real_trace)
    prof = views.trace_profile(doc)
    assert 80 <= len(prof.edges) - 1 <= 200
    entries = [e for e in doc["traceEvents"] if e["cat"] == "entry"]
    assert prof.busy.sum() == pytest.approx(sum(e["dur"] for e in entries) * 1e-6)
    assert np.all(prof.utilisation <= 1 + 1e-9)
    svg = tmp_path / "time.svg"
    out = shoal("profile", str(real_trace), "--out", str(svg), "--view", "time", "--bins", "50")
    assert out.returncode == 0 and "50 bins" in out.stdout, out.stderr


@pytest.mark.parametrize("content,says", [
    (b"\xff\xfe{", "not a trace"), (b'{"a": 1}', "not a trace"), (b"", "not a trace"),
    (json.dumps({"traceEvents": [], "shoal": {"version": 1, "npes": 2}}).encode(),
     "no entry methods"),
    (json.dumps({"traceEvents": [{"name": "idle", "cat": "idle", "ph": "X", "pid": 0,
                                  "ts": 0, "dur": 5}],
                 "shoal": {"version": 1, "npes": 1}}).encode(), "no entry methods"),
])
def test_profile_refuses_what_is_not_a_trace_with_exit_2(tmp_path, content, says):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = shoal("profile", str(bad), "--out", str(tmp_path / "x.png"))
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_profile_refuses_an_unknown_format_and_an_unknown_job(tmp_path):
    good = tmp_path / "t.json"
    good.write_text(json.dumps(trace(known(), 2)))
    out = shoal("profile", str(good), "--out", str(tmp_path / "x.doc"))
    assert out.returncode == 2 and "--out" in out.stderr and "svg" in out.stderr, out.stderr
    env = {**__import__("os").environ, "SHOAL_STATE_DIR": str(tmp_path / "reg")}
    out = shoal("profile", "no-such-job", "--out", str(tmp_path / "x.png"), env=env)
    assert out.returncode == 2 and "no job 'no-such-job'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
