"""The strategies that never gather the database on one PE: hierarchical (groups, coarsened
loads) and distributed (GrapevineLB simulated with per-PE state and messages). No MPI."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.runtime.lb import hierarchical as hier
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.distributed import ACCEPT, OFFER, REFUSE, PEState, distributed, simulate
from shoal.runtime.lb.greedy import greedy, greedy_refine
from shoal.runtime.lb.machine import Machine
from shoal.topology.torus import Torus


def lognormal(n, npes, sigma=0.5, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return LBDatabase(load=rng.lognormal(0, sigma, n), pe=rng.integers(0, npes, n),
                      npes=npes, **kw)


# ------------------------------------------------------------------------- hierarchical


def test_one_group_is_greedy_refine():
    db = lognormal(3000, 16, 1.0)
    np.testing.assert_array_equal(hier.hierarchical(db, group=16), greedy_refine(db))


def test_transfers_even_out_the_coarsened_loads():
    # loads 10, 0, 5, 1 on equal capacity: average 4; surpluses 6 and 1, deficits 4 and 3
    summaries = np.array([[10, 1, 10], [0, 1, 0], [5, 1, 5], [1, 1, 1]], float)
    moves = hier.transfers(summaries)
    assert moves == [(0, 1, 4.0), (0, 3, 2.0), (2, 3, 1.0)]
    # a group that cannot move its load sends nothing
    assert hier.transfers(np.array([[10, 1, 0], [0, 1, 0]], float)) == []


def test_each_group_sees_only_its_objects(monkeypatch):
    db = lognormal(4000, 32, 1.0)
    seen = []
    real = hier.balance_group

    def spy(group, leaving, arriving):
        assert np.all(np.isin(db.pe[group.objects], group.pes))
        assert not np.any(np.isin(db.pe[arriving.objects], group.pes))
        seen.append(group.objects.size + arriving.objects.size - leaving.size)
        return real(group, leaving, arriving)

    monkeypatch.setattr(hier, "balance_group", spy)
    placement = hier.hierarchical(db, group=8)
    assert len(seen) == 4 and sum(seen) == db.n == placement.size
    assert max(seen) < db.n / 2  # no group held the whole database


def test_hierarchical_is_within_three_percent_of_greedy():
    db = lognormal(50000, 1024, 1.0, speed=np.where(np.arange(1024) % 7 == 0, 0.7, 1.0))
    h, g = hier.hierarchical(db), greedy(db)
    assert db.imbalance(h) <= 1.03 * db.imbalance(g)
    assert np.mean(h != db.pe) < np.mean(g != db.pe)


def test_hierarchical_groups_the_pes_of_a_node():
    db = lognormal(2000, 12, 1.0)
    machine = Machine(Torus((3,), 4), np.repeat([2, 0, 1], 4))
    parts = hier.groups(db, 64, machine)
    assert [p.pes.tolist() for p in parts] == [[4, 5, 6, 7], [8, 9, 10, 11], [0, 1, 2, 3]]
    assert db.imbalance(hier.hierarchical(db, machine=machine)) < 1.05
    with pytest.raises(UsageError, match="at least 1 PE"):
        hier.hierarchical(db, group=0)


def test_hierarchical_evacuates_a_group_of_speed_zero():
    db = lognormal(2000, 16, 0.5, speed=[0.0] * 4 + [1.0] * 12)
    placement = hier.hierarchical(db, group=4)
    assert not np.any(placement < 4)
    assert db.imbalance(placement) < 1.05


# -------------------------------------------------------------------------- distributed


def state(pe, load, cap=1.0, objects=(), avg=1.0):
    s = PEState(pe, cap, load, [o for o, _ in objects], [w for _, w in objects])
    s.avg = avg
    return s


def test_gossip_sends_the_youngest_window_to_two_others_and_keeps_newer_entries():
    s = state(3, 0.5)
    s.start_gossip(1.0)  # underloaded: knows itself
    s.known.merge([(7, 1, (0.2, 1.0)), (9, 2, (0.4, 1.0))])
    msgs = s.gossip(3, 16, np.random.default_rng(0), window=2)
    assert len(msgs) == 2 and len({m[2] for m in msgs}) == 2
    assert all(m[2] != 3 for m in msgs)
    assert [e[0] for e in msgs[0][3]] == [3, 9]  # itself (renewed) and the youngest other
    r = state(5, 2.0)
    r.known.merge([(9, 5, (0.9, 1.0))])
    r.on_gossip(msgs[0][3])
    assert r.known.entries[9] == (5, (0.9, 1.0)) and r.known.entries[3] == (3, (0.5, 1.0))


def test_an_overloaded_pe_offers_its_lightest_objects_until_it_is_under_threshold():
    s = state(0, 10.0, objects=[(4, 0.5), (2, 1.0), (8, 3.0), (1, 5.5)], avg=5.0)
    s.known.merge([(1, 1, (0.0, 1.0)), (2, 1, (1.0, 1.0))])
    msgs = s.offers(1.1, np.random.default_rng(0))  # limit 5.5: offer 0.5, 1, 3
    assert [m[0] for m in msgs] == [OFFER] * 3
    assert [m[3] for m in msgs] == [(4, 0.5), (2, 1.0), (8, 3.0)]
    assert {m[2] for m in msgs} <= {1, 2}


def test_a_receiver_accepts_only_what_fits_under_the_threshold():
    r = state(1, 4.0, avg=5.0)
    assert r.on_offer(0, 7, 1.0, 1.1)[0] == ACCEPT  # 5 <= 5.5
    assert r.on_offer(0, 8, 1.0, 1.1)[0] == REFUSE  # 6 > 5.5
    assert r.load == 5.0 and r.objects == [7]


def test_distributed_balances_within_ten_percent_in_at_most_2_log2_p_rounds():
    for npes, seed in ((64, 0), (256, 1), (1000, 2)):
        db = lognormal(60 * npes, npes, 0.5, seed)
        out = simulate(db, seed)
        assert db.imbalance(db.pe) > 1.3
        assert db.imbalance(out.placement) <= 1.10
        assert out.rounds <= 2 * math.log2(npes)
        assert out.phases <= 10
        assert out.gossip_messages <= 2 * npes * out.rounds
        assert out.messages > out.gossip_messages + 2 * (npes - 1)
        assert np.mean(out.placement != db.pe) < 0.2  # it moves only what it must


def test_distributed_is_deterministic_for_a_seed():
    db = lognormal(5000, 64, 0.5, 4)
    a, b, c = simulate(db, 1), simulate(db, 1), simulate(db, 2)
    np.testing.assert_array_equal(a.placement, b.placement)
    assert a.messages == b.messages
    assert not np.array_equal(a.placement, c.placement)


def test_distributed_refuses_more_rounds_than_2_log2_p():
    db = lognormal(100, 16)
    with pytest.raises(UsageError, match=r"\[0, 8\]"):
        simulate(db, rounds=9)


def test_distributed_empties_a_pe_of_speed_zero():
    db = LBDatabase(load=np.ones(200), pe=np.arange(200) % 4, npes=4, speed=[1, 0, 1, 1])
    placement = distributed(db)
    assert not np.any(placement == 1)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 64), st.integers(1, 30), st.floats(0.0, 1.5), st.integers(0, 10**6))
def test_distributed_never_raises_the_maximum(npes, per_pe, sigma, seed):
    db = lognormal(npes * per_pe, npes, sigma, seed,
                   migratable=np.random.default_rng(seed).random(npes * per_pe) < 0.8)
    out = simulate(db, seed)
    cap = db.capacity()
    assert (db.pe_loads(out.placement) / cap).max() <= (db.pe_loads() / cap).max() + 1e-9
    np.testing.assert_array_equal(out.placement[~db.migratable], db.pe[~db.migratable])
