"""The fast simulator against an obviously-correct per-event reference (Fig. 1 of seed 000)."""

import heapq
import math
import random

import numba
import numpy as np
import pytest

from shoal import UsageError
from shoal.gossip.sim import simulate


def reference(n, w, units, warmup, seed, samples=4):
    """Fig. 1 event by event: a heap of ticks and samples, full sorts, Python lists."""
    rng = random.Random(seed)
    phase = [rng.random() for _ in range(n)]
    born = [[-math.inf] * n for _ in range(n)]
    events = [(u + phase[i], 0, i) for u in range(units) for i in range(n)]
    events += [(u + (s + 0.5) / samples, 1, u) for u in range(warmup, units)
               for s in range(samples)]
    heapq.heapify(events)
    ages = []
    while events:
        t, kind, who = heapq.heappop(events)
        if kind == 0:
            i = who
            born[i][i] = t
            known = [j for j in range(n) if born[i][j] > -math.inf]
            window = sorted(known, key=lambda j: -born[i][j])[:w]
            r = rng.choice([x for x in range(n) if x != i])
            for j in window:
                if j != r and born[i][j] > born[r][j]:
                    born[r][j] = born[i][j]
        else:
            per_node = []
            for i in range(n):
                others = [t - born[i][j] for j in range(n) if j != i and born[i][j] > -math.inf]
                if others and born[i][i] > -math.inf:
                    per_node.append(sum(others) / len(others))
            ages.append(sum(per_node) / len(per_node))
    return sum(ages) / len(ages)


@pytest.mark.parametrize("n,w", [(32, 6), (64, 13), (100, 40)])
def test_fast_simulator_agrees_with_reference(n, w):
    units, warmup = 120, 30
    ref = np.array([reference(n, w, units, warmup, seed) for seed in range(4)])
    fast = np.array([simulate(n, w, units, warmup, seed=s).mean_age for s in range(24)])
    # seed-to-seed spread gives the statistical error of each mean
    err = math.hypot(ref.std(ddof=1) / math.sqrt(len(ref)), fast.std(ddof=1) / math.sqrt(24))
    assert abs(ref.mean() - fast.mean()) < 4 * err + 0.02 * ref.mean()


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
