"""PDES (shoal.apps.pdes, examples/phold.py): the serial reference against a brute-force
windowed (YAWNS) execution and its invariants, the random streams against one direct draw,
and the parallel runs on 1, 2 and 4 PEs, with and without aggregation, against the serial
reference: the same events per LP, the same last timestamps, the same windows."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.apps.pdes import UID_SHIFT, Params, Stream, initial_events, serial
from shoal.errors import UsageError
from shoal.launch import mpiexec

EXAMPLE = Path(__file__).parents[2] / "examples" / "phold.py"
JOB = Path(__file__).with_name("pdes_job.py")
TIMEOUT = 300


# ----------------------------------------------------------------- brute-force references
def draws(p: Params, lp: int, npes: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` destinations and delays of LP ``lp``, from one draw of the
    generator and a loop per event."""
    u = np.random.default_rng((p.seed, lp, 1)).random((n, 4))
    pe = lp // p.lps
    dests, delays = np.empty(n, np.int64), np.empty(n)
    for k, (a, b, c, d) in enumerate(u):
        to = pe
        if npes > 1 and a < p.remote:
            to = (pe + 1 + int(b * (npes - 1))) % npes
        dests[k] = to * p.lps + int(c * p.lps)
        delays[k] = p.lookahead + p.mean_delay * -np.log1p(-d)
    return dests, delays


def yawns(p: Params, npes: int) -> dict:
    """YAWNS run window by window, LPs in reverse order, events delivered at the end of each
    window: per-LP committed and last timestamps, and the windows."""
    n = npes * p.lps
    pending = [list(initial_events(p, lp)) for lp in range(n)]
    streams = [Stream(p, lp, npes) for lp in range(n)]
    seq = [p.events] * n
    committed, last, windows = [0] * n, [-np.inf] * n, 0
    while True:
        start = min((e[0] for q in pending for e in q), default=np.inf)
        if start >= p.end_time:
            break
        windows += 1
        end = min(start + p.lookahead, p.end_time)
        out = []
        for lp in reversed(range(n)):
            due = sorted(e for e in pending[lp] if e[0] < end)
            pending[lp] = [e for e in pending[lp] if e[0] >= end]
            for ts, _ in due:
                assert ts >= last[lp]
                last[lp] = ts
                committed[lp] += 1
                dest, delay = streams[lp].draw()
                assert ts + delay >= end  # nothing new falls inside the window
                out.append((dest, (ts + delay, (lp << UID_SHIFT) + seq[lp])))
                seq[lp] += 1
        for dest, e in out:
            pending[dest].append(e)
    return {"committed": np.array(committed), "last": np.array(last), "windows": windows,
            "pending": np.array([len(q) for q in pending])}


configs = st.builds(
    Params, lps=st.integers(1, 4), events=st.integers(1, 5),
    lookahead=st.floats(0.05, 2.0), mean_delay=st.floats(0.0, 2.0),
    remote=st.floats(0.0, 1.0), end_time=st.floats(0.5, 12.0), seed=st.integers(0, 2**31))


# ----------------------------------------------------------------- without MPI
@settings(max_examples=40, deadline=None)
@given(configs, st.integers(1, 4))
def test_serial_reference_invariants(p, npes):
    r = serial(p, npes)
    n = npes * p.lps
    assert not r.disorder.any()  # every LP in non-decreasing timestamp order
    assert r.conserved(p)  # initial + sent = committed + pending
    assert np.array_equal(r.sent, r.committed)  # PHOLD: one new event per executed one
    assert r.received.sum() == r.sent.sum()
    assert r.pending.sum() == p.events * n  # the population of events stays constant
    assert (r.last[r.committed > 0] < p.end_time).all()
    assert np.isneginf(r.last[r.committed == 0]).all()
    # a window is at least lookahead long (the last may be cut at the end time)
    assert r.windows <= int(np.ceil(p.end_time / p.lookahead)) + 1


@settings(max_examples=40, deadline=None)
@given(configs, st.integers(1, 4))
def test_serial_reference_is_the_windowed_execution(p, npes):
    """One global heap in timestamp order gives what YAWNS windows give."""
    r, w = serial(p, npes), yawns(p, npes)
    assert np.array_equal(r.committed, w["committed"])
    assert np.array_equal(r.last, w["last"])
    assert np.array_equal(r.pending, w["pending"])
    assert r.windows == w["windows"]


@settings(max_examples=20, deadline=None)
@given(configs, st.integers(1, 4), st.integers(0, 3), st.integers(1, 700))
def test_streams_match_one_draw(p, npes, pe, n):
    lp = min(pe, npes - 1) * p.lps + p.lps - 1
    s = Stream(p, lp, npes)
    got = np.array([s.draw() for _ in range(n)])
    dests, delays = draws(p, lp, npes, n)
    assert np.array_equal(got[:, 0].astype(np.int64), dests)
    assert np.allclose(got[:, 1], delays, rtol=1e-15, atol=0)


def test_remote_fraction_and_delays():
    """The share of events to another PE is ``remote`` (10^5 draws), none with 0, all with
    1; delays are lookahead + an exponential of the mean delay."""
    for remote in (0.0, 0.3, 1.0):
        p = Params(lps=5, remote=remote, lookahead=0.25, mean_delay=2.0, seed=4)
        s = Stream(p, 7, 3)  # LP 7 is on PE 1
        got = np.array([s.draw() for _ in range(100_000)])
        away = (got[:, 0] // p.lps != 1).mean()
        assert abs(away - remote) < 0.01
        assert abs(got[:, 1].mean() - 2.25) < 0.03
        assert got[:, 1].min() >= 0.25
        assert set(np.unique(got[:, 0] // p.lps)) <= ({1} if remote == 0 else
                                                      {0, 2} if remote == 1 else {0, 1, 2})


def test_one_pe_keeps_every_event_local():
    s = Stream(Params(lps=6, remote=1.0), 2, 1)
    assert {s.draw()[0] for _ in range(500)} == set(range(6))


def test_bad_parameters_are_refused():
    with pytest.raises(UsageError, match="lookahead must be > 0"):
        Params(lookahead=0).check()
    with pytest.raises(UsageError, match="remote must be a probability"):
        Params(remote=1.5).check()
    with pytest.raises(UsageError, match="lps must be >= 1"):
        Params(lps=0).check()
    bad = subprocess.run([sys.executable, str(EXAMPLE), "--end-time", "-1"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "end_time must be a finite number > 0" in bad.stderr
    mesh = subprocess.run([sys.executable, str(EXAMPLE), "--aggregate", "--mesh", "2x2"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert mesh.returncode == 2
    assert "has 4 PEs but the job has 1" in mesh.stderr


# ----------------------------------------------------------------- parallel runs
def run(tmp_path: Path, ranks: int, p: Params, *flags: str,
        env: dict[str, str] | None = None) -> tuple[dict, str]:
    out = tmp_path / f"r{ranks}{''.join(flags)}.npz"
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLE), "--lps", str(p.lps),
           "--events", str(p.events), "--lookahead", str(p.lookahead), "--mean-delay",
           str(p.mean_delay), "--remote", str(p.remote), "--end-time", str(p.end_time),
           "--seed", str(p.seed), "--out", str(out), *flags]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                              env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        pytest.fail(f"phold on {ranks} ranks did not finish within {TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return dict(z), done.stdout


SMALL = Params(lps=6, events=8, lookahead=0.3, mean_delay=1.0, remote=0.5, end_time=25.0,
               seed=11)


@pytest.mark.parametrize("flags", [(), ("--aggregate", "--buffer-items", "16")],
                         ids=["direct", "aggregated"])
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_parallel_matches_serial(tmp_path, ranks, flags):
    """Every LP committed exactly the events of the serial run of the same seed, with the
    same last timestamp, in the same number of windows; nothing lost or out of order."""
    got, out = run(tmp_path, ranks, SMALL, *flags)
    ref = serial(SMALL, ranks)
    assert ref.total > 800 * ranks
    for key in ("committed", "last", "pending", "sent", "received", "disorder"):
        assert np.array_equal(got[key], getattr(ref, key)), key
    assert int(got["windows"]) == ref.windows
    assert "timestamp order per LP ok; conservation ok" in out
    assert f"{ref.total} events, per-LP counts ok" in out


@pytest.mark.parametrize("flags", [(), ("--aggregate", "--mesh", "2x2")],
                         ids=["direct", "aggregated-2x2"])
def test_all_remote_on_four_pes(tmp_path, flags):
    """Every event to another PE, short lookahead (many windows of few events each); with
    aggregation over a 2x2 mesh, events to the PE across the diagonal are relayed."""
    p = Params(lps=3, events=2, lookahead=0.05, mean_delay=0.5, remote=1.0, end_time=8.0,
               seed=2)
    got, _ = run(tmp_path, 4, p, *flags)
    ref = serial(p, 4)
    assert ref.windows > 50
    assert np.array_equal(got["committed"], ref.committed)
    assert np.array_equal(got["last"], ref.last)
    assert int(got["windows"]) == ref.windows


@pytest.mark.parametrize("flags", [(), ("--aggregate",)], ids=["direct", "aggregated"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_windows_wait_for_events_in_flight(tmp_path, ranks, flags):
    """Every event held back 1 ms at its receiver (tests/apps/pdes_job.py), so window
    results overtake events: LPs wait for them, and the run still equals the serial one."""
    p = Params(lps=3, events=4, lookahead=0.5, remote=0.5, end_time=12.0, seed=8)
    out = tmp_path / "held.npz"
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(JOB), "--lps", str(p.lps),
           "--events", str(p.events), "--lookahead", str(p.lookahead), "--remote",
           str(p.remote), "--end-time", str(p.end_time), "--seed", str(p.seed), *flags,
           str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    got = dict(np.load(out))
    ref = serial(p, ranks)
    assert got["waited"].sum() > 0
    assert np.array_equal(got["committed"], ref.committed)
    assert np.array_equal(got["last"], ref.last)
    assert np.array_equal(got["pending"], ref.pending)
    assert not got["disorder"].any()
    assert int(got["windows"]) == ref.windows


@pytest.mark.parametrize("flags", [(), ("--aggregate",)], ids=["direct", "aggregated"])
def test_moved_lps_change_nothing(tmp_path, flags):
    """A periodic balancer (greedy every 10 ms) moves LPs while they run: the same counts as
    the serial run (items to a moved LP are forwarded; no count depends on placement).
    End 100: 199 windows, 34k events, about 400 (direct) and 1200 (aggregated) migrations
    (end 400 had 4x of each, at 17 CPU-s for the two against 9; end 40: 0.03 s, no step
    yet)."""
    p = Params(lps=8, events=32, end_time=100.0, seed=6)
    got, out = run(tmp_path, 2, p, *flags, env={"SHOAL_LB": "greedy",
                                                "SHOAL_LB_PERIOD": "0.01"})
    ref = serial(p, 2)
    assert int(got["lb_migrations"]) > 0, out
    for key in ("committed", "last", "pending", "received"):
        assert np.array_equal(got[key], getattr(ref, key)), key
    assert int(got["windows"]) == ref.windows
