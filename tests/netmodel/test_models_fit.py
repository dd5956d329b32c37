"""The models against hand-computed values, and the fits against data drawn from known
parameters (Gropp16: Blue Waters rendezvous parameters of Table 1, the ordering of Table 2)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import UsageError
from shoal.netmodel.data import Measurements, synthetic
from shoal.netmodel.fit import fit, relative_errors
from shoal.netmodel.models import Model
from shoal.netmodel.regimes import analyse, detect_thresholds

BW = Model("maxrate4", {"alpha": 2.0e-5, "rn": 5.5e9, "rcb": 3.6e9, "rci": 6.1e8})
KS = np.arange(1, 17)
NS = 2.0 ** np.arange(10, 23)  # 1 KiB .. 4 MiB


def test_models_by_hand():
    n, k = 1e6, 4
    assert Model("postal", {"alpha": 1e-5, "beta": 1e-9}).time(n, k) == pytest.approx(1e-5 + 1e-3)
    m3 = Model("maxrate", {"alpha": 1e-5, "rc": 1e9, "rn": 2e9})
    assert m3.time(n, 1) == pytest.approx(1e-5 + 1e-3)  # k R_C < R_N: the process limits
    assert m3.time(n, 4) == pytest.approx(1e-5 + 4e6 / 2e9)  # the node limits
    assert m3.bandwidth(n, 4) == pytest.approx(4e6 / (1e-5 + 2e-3))
    assert m3.saturation_k() == 2
    m4 = Model("maxrate4", {"alpha": 0.0, "rn": math.inf, "rcb": 1e9, "rci": 5e8})
    assert m4.time(n, 3) == pytest.approx(3e6 / 2e9)
    m5 = Model("overhead", {"alpha": 1e-3, "rc": 1e9, "rn": 2e9})
    assert m5.time(n, 8) == pytest.approx(max(8e6 / 2e9, 1e-3 + 1e-3))
    infinite = Model("maxrate", {"alpha": 1e-5, "rc": 1e9, "rn": math.inf})
    assert infinite.time(n, 64) == pytest.approx(1e-5 + 1e-3)  # eq. 3 reduces to postal
    with pytest.raises(UsageError, match="stay positive"):
        Model("maxrate4", {"alpha": 0.0, "rn": math.inf, "rcb": 1e9, "rci": -5e8}).time(n, 4)
    with pytest.raises(UsageError, match="needs parameter"):
        Model("maxrate", {"alpha": 1.0})


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-6, 1e-4), st.floats(1e8, 1e10), st.floats(1.5, 12.0))
def test_noise_free_data_gives_back_the_parameters(alpha, rc, ratio):
    true = Model("maxrate", {"alpha": alpha, "rc": rc, "rn": ratio * rc})
    m = synthetic(true, [1, 2, 4, 8, 16], NS, noise=0.0)
    got = fit("maxrate", m.n, m.k, m.t).model.params
    for key in ("alpha", "rc", "rn"):
        assert got[key] == pytest.approx(true.params[key], rel=1e-3)


def test_blue_waters_rendezvous_with_noise_table2_ordering():
    m = synthetic(BW, KS, NS, noise=0.03, seed=7)
    f4 = fit("maxrate4", m.n, m.k, m.t)
    assert f4.model.params["rn"] == pytest.approx(5.5e9, rel=0.05)
    (reg,) = analyse(m, thresholds=[])
    worst_maxrate = max(reg.error_sum["maxrate4"], reg.error_sum["maxrate"])
    for postal in ("postal_one", "postal_max", "postal_all"):
        assert reg.error_sum[postal] > 4 * worst_maxrate, reg.error_sum
    assert reg.error_sum["maxrate4"] <= reg.error_sum["maxrate"] * 1.05


def test_unidentifiable_and_impossible_fits_are_reported():
    fast_node = Model("maxrate", {"alpha": 1e-5, "rc": 1e9, "rn": 1e12})
    m = synthetic(fast_node, [1, 2, 4], NS, noise=0.0)
    f = fit("maxrate", m.n, m.k, m.t)
    assert math.isinf(f.model.params["rn"])
    assert any("not identifiable" in note for note in f.notes)
    one_k = synthetic(fast_node, [4], NS, noise=0.0)
    with pytest.raises(UsageError, match="two or more values of k"):
        fit("maxrate", one_k.n, one_k.k, one_k.t)
    (reg,) = analyse(one_k, thresholds=[])
    assert "maxrate" not in reg.fits and "postal_all" in reg.fits
    assert any("cannot be separated" in note for note in reg.notes)


def test_thresholds_are_found_where_the_protocol_changes():
    short = Model("maxrate4", {"alpha": 4e-6, "rn": math.inf, "rcb": 6.3e8, "rci": 1e7})
    eager = Model("maxrate4", {"alpha": 1.1e-5, "rn": math.inf, "rcb": 1.7e9, "rci": 6.2e7})
    parts = [synthetic(short, KS, 2.0 ** np.arange(0, 6), seed=1),
             synthetic(eager, KS, 2.0 ** np.arange(6, 11), seed=2),
             synthetic(BW, KS, 2.0 ** np.arange(11, 23), seed=3)]
    m = Measurements(*(np.concatenate([getattr(p, a) for p in parts]) for a in "knt"))
    assert detect_thresholds(m) == [32.0, 1024.0]
    regimes = analyse(m)
    assert [r.name for r in regimes] == ["short", "eager", "rendezvous"]
    rdv = regimes[2].fits["maxrate"].model.params
    assert rdv["rn"] == pytest.approx(5.5e9, rel=0.05)
    # one smooth regime: no threshold
    assert detect_thresholds(synthetic(BW, KS, NS, noise=0.01)) == []


def test_relative_errors_are_zero_on_the_model_itself():
    m = synthetic(BW, KS, NS, noise=0.0)
    assert np.allclose(relative_errors(BW, m.n, m.k, m.t), 0.0)
