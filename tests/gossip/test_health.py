"""The failure detector (shoal.gossip.health) on a made-up clock: thresholds from the age law,
suspicion, confirmation by probes, refutation, recovery, and the local-health guard."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.gossip.analysis import age_quantile
from shoal.gossip.health import ALIVE, DEAD, SUSPECT, Detector

N = 64  # nodes: this one and 63 others
OTHERS = [f"n{k}" for k in range(N - 1)]


def detector(**kw):
    return Detector(interval=0.25, window=0.2, tail=0.01, probes=3, **kw)


def test_the_threshold_is_the_age_law_s_quantile_in_seconds():
    d = detector()
    assert d.threshold(N) == pytest.approx(age_quantile(N, 13, 0.01) * 0.25)
    assert Detector(interval=1.0, window=0.2, tail=1e-4).threshold(N) > d.threshold(N) * 4


def run(d, ages_at, until, step=0.25, answers=()):
    """Look every ``step`` s up to ``until``; ``ages_at(t)`` gives the ages; ``answers``:
    (time, name) answered probes. Returns the probes asked for, with their times."""
    probes, t, answers = [], 0.0, sorted(answers)
    while t <= until:
        while answers and answers[0][0] <= t:
            d.answered(answers.pop(0)[1], t)
        probes += [(t, name) for name in d.look(t, ages_at(t))]
        t += step
    return probes


def test_a_live_node_is_never_suspected_and_a_killed_one_dies_after_its_probes():
    d = detector()
    limit = d.threshold(N)
    killed_at = 10.0

    def ages(t):  # n0 stops at killed_at with an entry 1 s old; the others stay fresh
        return {n: (1.0 + max(0.0, t - killed_at) if n == "n0" else 1.0) for n in OTHERS}

    probes = run(d, ages, until=killed_at + limit + 5)
    assert d.state("n0") == DEAD and all(d.state(n) == ALIVE for n in OTHERS[1:])
    assert [n for _, n in probes] == ["n0"] * 3  # unanswered; a dead node is not probed
    first = probes[0][0]
    assert killed_at + limit - 1.0 <= first <= killed_at + limit - 1.0 + 0.25
    assert d.peers["n0"].since == pytest.approx(first + 3 * 0.25)  # dead after 3 waits
    assert d.counts["suspected"] == 1 and d.counts["dead"] == 1


def test_an_answered_probe_refutes_the_suspicion_until_the_answer_itself_is_old():
    d = detector()
    limit = d.threshold(N)

    def ages(t):  # n0's entry grows old: its packets are lost, but it answers probes
        return {n: (1.0 + t if n == "n0" else 1.0) for n in OTHERS}

    start = limit - 1.0
    probes = run(d, ages, until=start + 0.3, answers=[(start + 0.25, "n0")])
    assert [n for _, n in probes] == ["n0"]
    assert d.state("n0") == ALIVE and d.counts["refuted"] == 1
    run_more = [n for n in d.look(start + 0.25 + limit - 0.1, ages(0)) if n == "n0"]
    assert not run_more  # the answer is younger than the limit: not suspected
    assert d.look(start + 0.25 + limit + 0.3, ages(100)) == ["n0"]
    assert d.state("n0") == SUSPECT


def test_a_dead_node_that_comes_back_is_alive_again():
    d = detector()
    limit = d.threshold(N)
    run(d, lambda t: {"n0": 2 * limit, "n1": 1.0, "n2": 1.0, "n3": 1.0}, until=2.0)
    assert d.state("n0") == DEAD
    d.look(2.5, {"n0": 0.5, "n1": 1.0, "n2": 1.0, "n3": 1.0})  # a record with a new version
    assert d.state("n0") == ALIVE and d.counts["recovered"] == 1


def test_when_most_nodes_look_dead_the_fault_is_here_and_nobody_is_declared_dead():
    d = detector()
    limit = d.threshold(N)
    starved = {n: 2 * limit for n in OTHERS}  # this node heard nothing for long: starved
    run(d, lambda t: starved, until=3.0)
    assert d.local_trouble
    assert all(d.state(n) == SUSPECT for n in OTHERS) and d.counts["dead"] == 0
    fresh = dict(starved, **{n: 1.0 for n in OTHERS[1:]})  # it catches up: n0 alone is old
    d.look(3.25, fresh)
    assert not d.local_trouble and d.state("n1") == ALIVE
    d.look(3.5, fresh)
    assert d.state("n0") == DEAD  # probed 3 times already, unanswered


def test_a_node_whose_own_timer_ran_late_declares_nobody_dead_for_a_confirmation():
    """Lifeguard's self-awareness: a node stopped for a while finds every answer to its
    probes unread; it waits a whole confirmation period (3 probe waits) before any death."""
    d = detector()
    limit = d.threshold(N)
    ages = dict.fromkeys(OTHERS, 1.0)
    ages["n0"] = 2 * limit
    for t in (0.0, 0.25, 0.5):  # n0 is suspected and probed 3 times, unanswered
        d.look(t, ages)
    d.late(0.75, 0.2)  # late by less than an interval: nothing changes
    d.late(2.0, 1.0)  # then stopped for a second
    d.look(2.0, ages)
    assert d.local_trouble and d.state("n0") == SUSPECT and d.counts["dead"] == 0
    d.look(2.7, ages)
    assert d.state("n0") == SUSPECT
    d.look(2.75, ages)  # a confirmation period after the late tick, still no answer
    assert not d.local_trouble and d.state("n0") == DEAD


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 30), st.booleans()), min_size=1, max_size=60))
def test_a_node_is_dead_only_after_its_probes_went_unanswered_past_the_threshold(steps):
    d = detector()
    limit = d.threshold(4)
    t, probed, answered = 0.0, 0, -1e300
    for age, answers in steps:
        t += 0.25
        if answers:
            d.answered("n0", t)
            answered, probed = t, 0
        was = d.state("n0")
        asked = d.look(t, {"n0": age, "n1": 0.0, "n2": 0.0})
        probed = probed + ("n0" in asked) if was != DEAD else probed
        if d.state("n0") == DEAD and was != DEAD:
            assert min(age, t - answered) > limit and probed >= 3
        if min(age, t - answered) <= limit:
            assert d.state("n0") == ALIVE


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(UsageError, match="interval must be positive"):
        Detector(interval=0, window=0.2)
    with pytest.raises(UsageError, match="tail lies in"):
        Detector(interval=1, window=0.2, tail=1.0)
    with pytest.raises(UsageError, match="at least 1 unanswered probe"):
        Detector(interval=1, window=0.2, probes=0)
