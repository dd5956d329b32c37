import math

import pytest

from shoal import UsageError
from shoal.gossip.analysis import (
    age_quantile,
    expected_age,
    refresh_probability,
    window_age,
    window_entries,
)
from shoal.gossip.sim import simulate


def test_refresh_probability_is_the_closed_form():
    for n, w in [(3, 1), (1024, 205), (8192, 1638)]:
        assert refresh_probability(n, w) == pytest.approx(1 - (1 - 1 / (n - 1)) ** w)


def test_expected_age_is_the_sum_of_waiting_and_window_age():
    for n, w in [(64, 13), (1024, 205), (2048, 410)]:
        a_w = window_age(n, w)
        assert 0 < a_w < expected_age(n, w)
        assert expected_age(n, w) == pytest.approx(1 / refresh_probability(n, w) + a_w)


def test_orders_of_magnitude_of_the_paper():
    # slides: 20% of 1024 nodes gives about 10 units (2-3 s at 256 ms)
    assert 7 < expected_age(1024, 205) < 13
    # larger windows help, with diminishing returns (Fig. 2)
    ages = [expected_age(1024, w) for w in (102, 205, 410)]
    assert ages[0] > ages[1] > ages[2]
    assert ages[0] - ages[1] > ages[1] - ages[2]


def test_window_of_one_entry_sends_only_the_own_record():
    assert window_age(100, 1) == 0.0
    assert expected_age(100, 1) == pytest.approx(99.0)


@pytest.mark.parametrize("n,w", [(1, 1), (10, 0), (10, 11)])
def test_impossible_sizes(n, w):
    with pytest.raises(UsageError):
        expected_age(n, w)


def test_window_entries():
    assert window_entries(1024, 0.2) == 205
    assert window_entries(10, 3) == 3
    assert window_entries(10, 0.01) == 1
    with pytest.raises(UsageError, match="lower --window"):
        window_entries(10, 11)
    assert math.isfinite(expected_age(2, 2))


@pytest.mark.parametrize("nodes,window", [(64, 13), (256, 51)])
def test_the_age_law_s_quantiles_are_the_simulated_ones(nodes, window):
    # the failure detector's threshold (analysis.age_quantile) against the simulator's
    # percentiles of entry ages (bins of 1/64 unit)
    sim = simulate(nodes, window, units=300, warmup=50, seed=3)
    for pct in (50, 90, 99):
        want = sim.percentiles[pct]
        assert age_quantile(nodes, window, 1 - pct / 100) == pytest.approx(want, rel=0.12)
    # a deeper tail is further out
    assert age_quantile(nodes, window, 1e-6) > 2 * age_quantile(nodes, window, 0.01)


def test_an_impossible_tail_is_refused():
    with pytest.raises(UsageError, match="tail probability"):
        age_quantile(64, 13, 0.0)
