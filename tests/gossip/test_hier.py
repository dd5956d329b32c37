"""Hierarchical gossip's simulation (shoal.gossip.hier): its summary layer against a plain
reference step by step, against the flat simulator where the two coincide, and its sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.gossip import hier
from shoal.gossip.hier import UNKNOWN, _summary_unit, compare, simulate_summaries
from shoal.gossip.sim import simulate


def reference_unit(birth, order, phase, s, w, u, targets):
    """The summary layer's unit written plainly: renew the own group's summary, send the w
    youngest known summaries, the receiver keeps the newer."""
    birth = birth.copy()
    sent = 0
    for i in order:
        birth[i, i // s] = np.float32(u + phase[i])
        known = [c for c in range(birth.shape[1]) if birth[i, c] != UNKNOWN]
        youngest = sorted(known, key=lambda c: -birth[i, c])[:w]
        for c in youngest:
            sent += 1
            birth[targets[i], c] = max(birth[targets[i], c], birth[i, c])
    return birth, sent


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 5), st.integers(1, 4), st.data())
def test_a_unit_of_the_summary_layer_is_the_plain_algorithms(groups, s, data):
    n = groups * s
    w = data.draw(st.integers(1, groups))
    seed = data.draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    phase = rng.random(n).astype(np.float32)
    order = np.argsort(phase).astype(np.int64)
    birth = np.where(rng.random((n, groups)) < 0.5, UNKNOWN,
                     rng.random((n, groups)) * 3).astype(np.float32)
    own = np.arange(n) // s * s
    pick = rng.integers(0, n - s, n)
    targets = pick + s * (pick >= own)
    assert all(targets[i] // s != i // s for i in range(n))
    want, want_sent = reference_unit(birth, order, phase, s, w, 3, targets)
    got = birth.copy()
    sent = _summary_unit(got, order, phase, s, w, 3, targets, np.empty(groups, np.float32))
    np.testing.assert_array_equal(got, want)
    assert sent == want_sent


@pytest.mark.parametrize("nodes,window", [(300, 30), (500, 25)])
def test_groups_of_one_are_the_flat_algorithm(nodes, window):
    # every node its own group: the summaries are the flat vector, their ages the flat ones
    summ = simulate_summaries(nodes, 1, window, units=60, warmup=20, seed=1)
    flat = simulate(nodes, window, units=60, warmup=20, seed=1)
    assert summ.mean_age == pytest.approx(flat.mean_age, rel=0.05)
    assert summ.known == pytest.approx(flat.known, abs=0.02)


def test_groups_hold_fewer_entries_send_fewer_bytes_and_see_fresh_summaries(monkeypatch):
    # the flat runs compare makes, seen as they happen: the flat simulation of 4096 nodes is
    # the test's dearest part (11 CPU-s with bounds checks), so it is not run a second time
    runs = []

    def seen(nodes, window, **kwargs):
        got = simulate(nodes, window, **kwargs)
        runs.append((nodes, window, kwargs, got.mean_age))
        return got

    monkeypatch.setattr(hier, "simulate", seen)
    c = compare(4096, 0.2, units=50, warmup=20)
    assert c.group == 64
    flat = [(window, kw, age) for nodes, window, kw, age in runs if nodes == 4096]
    assert flat == [(c.flat_window, dict(units=50, warmup=20, seed=0), c.flat_age)]
    assert c.flat_simulated
    own = simulate(64, c.in_window, units=50, warmup=20).mean_age
    assert c.own_age == pytest.approx(own, rel=0.05)  # the same flat code at N = S
    assert c.summary_known > 0.98
    assert 1 < c.summary_age < c.flat_age  # summaries cross in fewer, smaller windows
    assert c.hier_memory * 20 < c.flat_memory
    assert c.hier_bytes_unit * 50 < c.flat_bytes_unit


def test_sizes_that_form_no_groups_are_refused():
    with pytest.raises(UsageError, match="at least 2 groups"):
        simulate_summaries(10, 3, 1)
    with pytest.raises(UsageError, match="1 to 5 entries"):
        simulate_summaries(10, 2, 6)
