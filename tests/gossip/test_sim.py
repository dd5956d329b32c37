"""The fast simulator against an obviously-correct per-event reference (Fig. 1 of Levy14)."""

import heapq
import json
import math
import random
import subprocess
import sys
from typing import NamedTuple

import numba
import numpy as np
import pytest

from shoal import UsageError
from shoal.gossip import simkernel
from shoal.gossip.sim import simulate

# events at equal times happen in this order, as in the kernel
DEATH, ARRIVE, TICK, SAMPLE = range(4)


class Reference(NamedTuple):
    """What :func:`reference` measured, as the kernel measures it (nan: not measured)."""

    unit_excl: np.ndarray  # (units,) mean age per unit, own entry excluded
    unit_incl: np.ndarray  # (units,) own entry included
    unit_known: np.ndarray  # (units,) fraction of live others known
    dead_age: np.ndarray  # (units,) mean age of the dead nodes' entries, at the first sample
    ver: np.ndarray  # (N, N) the final versions, -1: unknown
    counters: dict  # sent, lost, to_dead, delivered


def reference(phase, w, units, warmup, draw, samples=4, latency=0.0, deaths=()):
    """Fig. 1 event by event: one heap of deaths, arrivals, ticks and samples, full sorts.

    Node ``i`` ticks at ``u + phase[i]`` while alive; ``draw(i)`` gives the destination of its
    message and whether the message is lost; ``deaths`` are (time, node) pairs. Messages
    still in flight after the last unit are never delivered."""
    n = len(phase)
    born = np.full((n, n), -np.inf)  # creation time of the record that i holds of j
    alive = np.ones(n, bool)
    counters = dict(sent=0, lost=0, to_dead=0, delivered=0)
    sums = np.zeros((units, 4))  # per unit: excl, incl, known, count
    dead_age = np.full(units, np.nan)
    events = [(t, DEATH, k, d) for k, (t, d) in enumerate(deaths)]
    events += [(u + phase[i], TICK, i, None) for u in range(units) for i in range(n)]
    events += [(u + (s + 0.5) / samples, SAMPLE, s, u) for u in range(warmup, units)
               for s in range(samples)]
    heapq.heapify(events)
    sent = 0  # orders the arrivals (FIFO at equal times)
    while events and events[0][0] < units:
        t, kind, key, what = heapq.heappop(events)
        if kind == DEATH:
            alive[what] = False
        elif kind == TICK and alive[key]:
            i = key
            born[i, i] = t
            known = np.flatnonzero(born[i] > -np.inf)
            window = known[np.argsort(-born[i, known])[:w]]
            r, lost = draw(i)
            counters["sent"] += 1
            message = (r, window, born[i, window].copy())
            if lost:
                counters["lost"] += 1
            elif latency > 0:
                sent += 1
                heapq.heappush(events, (t + latency, ARRIVE, sent, message))
            else:
                _receive(born, alive, message, counters)
        elif kind == ARRIVE:
            _receive(born, alive, what, counters)
        elif kind == SAMPLE:
            sums[what] += _measure(born, alive, t)
            if key == 0 and not alive.all():
                dead_age[what] = _dead_age(born, alive, t)
    with np.errstate(invalid="ignore"):
        unit = sums[:, :3] / sums[:, 3:]
    ver = np.where(born > -np.inf, np.round(born - phase[None, :]), -1).astype(int)
    return Reference(unit[:, 0], unit[:, 1], unit[:, 2], dead_age, ver, counters)


def _receive(born, alive, message, counters):
    """The destination keeps each entry of the window that is newer than its own copy."""
    r, window, times = message
    if not alive[r]:
        counters["to_dead"] += 1
        return
    counters["delivered"] += 1
    for j, b in zip(window, times, strict=True):
        if j != r and b > born[r, j]:
            born[r, j] = b


def _measure(born, alive, t):
    """Sums over the live nodes that have ticked and know a live other: their mean age at
    ``t`` (own entry excluded, included), the fraction of live others they know, their
    count."""
    n = len(alive)
    others = (born > -np.inf) & alive[None, :] & ~np.eye(n, dtype=bool)
    count = others.sum(axis=1)
    own = np.diag(born)
    ok = alive & (count > 0) & (own > -np.inf)
    total = np.where(others, born, 0.0).sum(axis=1)[ok]
    excl = t - total / count[ok]
    incl = t - (total + own[ok]) / (count[ok] + 1)
    known = count[ok] / max(alive.sum() - 1, 1)
    return excl.sum(), incl.sum(), known.sum(), ok.sum()


def _dead_age(born, alive, t):
    """The mean age at ``t`` of the dead nodes' entries that live nodes hold (nan if none)."""
    held = born[np.ix_(alive, ~alive)]
    held = held[held > -np.inf]
    return t - held.mean() if held.size else np.nan


def own_draws(n, seed):
    """Phases and draws (no loss) of a reference run from its own generator, and the
    generator."""
    rng = random.Random(seed)
    phase = np.array([rng.random() for _ in range(n)])

    def draw(i):
        return rng.choice([x for x in range(n) if x != i]), False

    return phase, draw, rng


@numba.njit
def _seed(seed):
    np.random.seed(seed)


def kernel_draws(cfg, n):
    """The kernel's draws (numba's generator, seeded as :func:`simkernel.run` seeds it, drawn
    by its own :func:`simkernel._draw`): a tick's destination and loss."""
    _seed(cfg.seed)

    def draw(i):
        d = simkernel._draw(0, i, n, cfg.loss)
        return d.dst, d.lost

    return draw


def simulate_with_reference(monkeypatch, deaths=None, **kwargs):
    """``simulate(**kwargs)`` and the reference run on the same phases, deaths and draws:
    the kernel's final state, its measures and the reference's. ``deaths(phase)`` gives the
    nodes that die and when, instead of ``simulate``'s (which kills them all at once)."""
    seen = {}
    run = simkernel.run

    def keep(state, cfg, sched, out):
        if deaths is not None:
            node, time = deaths(state.phase)
            sched = sched._replace(death_node=np.asarray(node, np.int32),
                                   death_time=np.asarray(time, np.float64))
        run(state, cfg, sched, out)
        seen.update(state=state, cfg=cfg, sched=sched, out=out)

    with monkeypatch.context() as m:
        m.setattr(simkernel, "run", keep)
        simulate(**kwargs)
    state, cfg, sched = seen["state"], seen["cfg"], seen["sched"]
    died = list(zip(sched.death_time, sched.death_node, strict=True))
    ref = reference(state.phase, cfg.window, cfg.units, cfg.warmup,
                    kernel_draws(cfg, len(state.phase)), cfg.samples, cfg.latency, died)
    return state, seen["out"], ref


def assert_same_run(state, out, ref):
    """The kernel's run is the reference's: the same final versions and counts, the same
    measures (to rounding: the kernel keeps running sums)."""
    np.testing.assert_array_equal(state.ver, ref.ver)
    counters = out.counters
    assert ref.counters == dict(sent=counters[simkernel.SENT], lost=counters[simkernel.LOST],
                                to_dead=counters[simkernel.TO_DEAD],
                                delivered=counters[simkernel.DELIVERED])
    for got, want in [(out.unit_excl, ref.unit_excl), (out.unit_incl, ref.unit_incl),
                      (out.unit_known, ref.unit_known), (out.dead_age, ref.dead_age)]:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n,w,latency,dead", [(32, 6, 0.0, 0), (64, 13, 0.0, 0),
                                              (100, 40, 0.0, 0), (48, 10, 0.3, 5)])
def test_fast_simulator_agrees_with_reference(n, w, latency, dead):
    units, warmup = 120, 30
    ref = []
    for seed in range(4):
        phase, draw, rng = own_draws(n, seed)
        deaths = [(warmup, d) for d in rng.sample(range(n), dead)]
        run = reference(phase, w, units, warmup, draw, latency=latency, deaths=deaths)
        ref.append(np.nanmean(run.unit_excl[warmup:]))
    ref = np.array(ref)
    fast = np.array([simulate(n, w, units, warmup, latency=latency, dead=dead, seed=s).mean_age
                     for s in range(24)])
    # seed-to-seed spread gives the statistical error of each mean
    err = math.hypot(ref.std(ddof=1) / math.sqrt(len(ref)), fast.std(ddof=1) / math.sqrt(24))
    assert abs(ref.mean() - fast.mean()) < 4 * err + 0.02 * ref.mean()


EXACT = {  # small runs, every feature; the kernel's draws make the reference's run its own
    "plain": dict(nodes=40, window=8, units=40, seed=0),
    "three_nodes": dict(nodes=3, window=2, units=60, seed=8),  # lists as long as the vectors
    "loss": dict(nodes=40, window=8, units=40, seed=1, loss=0.3, samples=5),
    "deaths": dict(nodes=40, window=8, units=60, seed=2, dead=6, samples=3),
    "deaths_latency": dict(nodes=40, window=8, units=60, seed=3, dead=0.1, latency=0.02),
    "deaths_latency_loss": dict(nodes=50, window=0.2, units=60, seed=4, dead=5,
                                dead_at=12.5, latency=1.3, loss=0.2, samples=7),
}


@pytest.mark.parametrize("name", EXACT)
def test_same_run_as_the_reference(name, monkeypatch):
    assert_same_run(*simulate_with_reference(monkeypatch, **EXACT[name]))


def test_a_run_that_starts_on_a_dead_tick_stops_at_the_next_death(monkeypatch):
    """Node ``a`` dies just before its tick in unit 10, node ``b`` (the next to tick) between
    the two ticks: the run of events that starts on ``a``'s skipped tick must end at ``b``'s
    death (it took ``b``'s tick, which ``b`` was then too dead to make)."""

    def deaths(phase):
        a, b = np.argsort(phase)[[3, 4]]
        t_a, t_b = 10 + phase[a], 10 + phase[b]
        return [a, b], [t_a - 1e-9, (t_a + t_b) / 2]

    assert_same_run(*simulate_with_reference(monkeypatch, deaths, nodes=12, window=4,
                                             units=30, seed=0))


def test_a_run_that_starts_on_a_dead_tick_stops_at_the_next_sample(monkeypatch):
    """The only tick between two samples is a dead node's: the run of events that starts on
    it must end at the second sample (it took the next live tick, which the sample then
    measured)."""
    samples = 64

    def deaths(phase):
        ticks = np.sort(phase)
        gap = np.floor(ticks * samples - 0.5)  # the samples that a tick lies between
        alone = [k for k in range(len(ticks) - 1)
                 if gap[k] != gap[k + 1] and (k == 0 or gap[k] != gap[k - 1])]
        return [np.argsort(phase)[alone[0]]], [1.0]

    assert_same_run(*simulate_with_reference(monkeypatch, deaths, nodes=12, window=4,
                                             units=30, seed=0, samples=samples))


def test_units_that_end_on_ticks_of_dead_nodes():
    """Two live nodes of ten: most units end on dead nodes' ticks with no message in flight;
    the unit must end there (the kernel took the queue's unused slot for an arrival and
    crashed), so the run goes in a subprocess."""
    code = ("import json; from shoal.gossip.sim import simulate; "
            "r = simulate(10, 5, 100, dead=8, dead_at=2.0, seed=9); "
            "print(json.dumps([r.sent, r.lost, r.to_dead, r.delivered, r.mean_age]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    sent, lost, to_dead, delivered, age = json.loads(done.stdout.splitlines()[-1])
    assert sent == 10 * 2 + 2 * 98  # all ten tick in units 0 and 1, the two live ones after
    assert lost == 0 and to_dead + delivered == sent  # no latency: each message at once
    assert math.isfinite(age)


def test_close_to_the_expected_age_at_the_papers_settings():
    r = simulate(1024, 0.2, 120, 40, seed=3)
    assert r.window == 205
    assert abs(r.mean_age - r.expected) < 0.1 * r.expected
    assert 7 < r.mean_age < 13  # "about 10 units" (slides)
    assert r.known > 0.999
    assert r.percentiles[50] <= r.percentiles[90] <= r.percentiles[99] <= r.max_age
    assert r.mean_age_incl < r.mean_age  # the own entry is the youngest


def test_results_do_not_depend_on_the_thread_count():
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = simulate(300, 0.3, 60, 20, seed=7, loss=0.1, latency=0.05)
    finally:
        numba.set_num_threads(threads)
    many = simulate(300, 0.3, 60, 20, seed=7, loss=0.1, latency=0.05)
    assert one.mean_age == many.mean_age
    assert one.sent == many.sent and one.lost == many.lost


def test_loss_and_latency_age_the_vector():
    base = simulate(256, 0.2, 100, 30, seed=1)
    lossy = simulate(256, 0.2, 100, 30, seed=1, loss=0.3)
    slow = simulate(256, 0.2, 100, 30, seed=1, latency=0.5)
    assert lossy.lost / lossy.sent == pytest.approx(0.3, abs=0.02)
    assert lossy.mean_age > base.mean_age * 1.15
    assert slow.mean_age > base.mean_age + 0.3
    assert base.sent == 256 * 100 and base.delivered == base.sent


def test_dead_nodes_entries_age_at_one_unit_per_unit():
    r = simulate(200, 0.2, 100, 30, seed=2, dead=0.05)
    assert r.dead == 10
    assert r.to_dead > 0
    trail = r.dead_age[40:]
    slope = np.polyfit(np.arange(len(trail)), trail, 1)[0]
    assert slope == pytest.approx(1.0, abs=0.05)
    assert np.isnan(r.dead_age[:30]).all()  # nobody died before the measurement started


@pytest.mark.parametrize("kwargs", [dict(nodes=1), dict(nodes=10, window=11),
                                    dict(nodes=10, window=1.5), dict(nodes=10, loss=1.0),
                                    dict(nodes=10, dead=9), dict(nodes=10, units=0)])
def test_bad_parameters(kwargs):
    with pytest.raises(UsageError):
        simulate(**kwargs)
