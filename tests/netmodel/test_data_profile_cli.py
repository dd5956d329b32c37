"""Measurement files, profiles and the netmodel commands, including bad input (exit 2)."""

import math
import subprocess
import sys

import numpy as np
import pytest

from shoal import UsageError
from shoal.netmodel.data import Measurements, read_csv, synthetic, write_csv
from shoal.netmodel.models import Model
from shoal.netmodel.profile import Profile, RegimeModels
from shoal.netmodel.regimes import analyse

BW = Model("maxrate4", {"alpha": 2.0e-5, "rn": 5.5e9, "rcb": 3.6e9, "rci": 6.1e8})


def shoal(*args):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=120)


def test_repetitions_reduce_to_best_or_median():
    m = Measurements([1, 1, 1, 2], [8, 8, 8, 8], [3.0, 1.0, 2.0, 5.0])
    best = m.reduce("best")
    assert list(zip(best.k, best.t, strict=True)) == [(1, 1.0), (2, 5.0)]
    assert list(m.reduce("median").t) == [2.0, 5.0]


def test_csv_round_trip(tmp_path):
    m = synthetic(BW, [1, 4], [1024, 4096], repeat=3, seed=2)
    write_csv(tmp_path / "d.csv", m)
    back = read_csv(tmp_path / "d.csv")
    assert np.array_equal(back.k, m.k) and np.array_equal(back.n, m.n)
    assert np.array_equal(back.t, m.t)


@pytest.mark.parametrize("text,hint", [
    ("k,n\n1,8\n", "missing column(s) seconds"),
    ("k,n,seconds\n1,0,1e-6\n", "n must be positive"),
    ("k,n,seconds\n1,8,nan\n", "NaN"),
    ("k,n,seconds\n1,8,fast\n", "not a number"),
    ("k,n,seconds\n1.5,8,1e-6\n", "whole numbers"),
])
def test_bad_files_say_what_to_fix(tmp_path, text, hint):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=hint.replace("(", r"\(").replace(")", r"\)")):
        read_csv(path)
    out = shoal("netmodel", "fit", str(path))
    assert out.returncode == 2 and hint in out.stderr


def test_profile_round_trip_keeps_infinity_and_regimes(tmp_path):
    short = Model("maxrate", {"alpha": 4e-6, "rc": 6e8, "rn": math.inf})
    prof = Profile([RegimeModels("short", 0.0, 32.0, {"maxrate": short}),
                    RegimeModels("rendezvous", 32.0, math.inf, {"maxrate4": BW})],
                   {"source": "test"})
    prof.save(tmp_path / "p.toml")
    back = Profile.load(tmp_path / "p.toml")
    assert back.model_for(8).params == short.params
    assert math.isinf(back.model_for(8).params["rn"])
    assert back.time(1 << 20, 4) == pytest.approx(float(BW.time(1 << 20, 4)))
    assert back.meta["source"] == "test"
    (tmp_path / "broken.toml").write_text("[[regime]]\nname = 'x'\n")
    with pytest.raises(UsageError, match="lacks"):
        Profile.load(tmp_path / "broken.toml")


def test_fit_save_predict_advise_end_to_end(tmp_path):
    data = tmp_path / "bw.csv"
    write_csv(data, synthetic(BW, np.arange(1, 17), 2.0 ** np.arange(10, 23), seed=4))
    prof = tmp_path / "bw.toml"
    out = shoal("netmodel", "fit", str(data), "--thresholds", "none", "--save", str(prof),
                "--plot", str(tmp_path / "bw.png"), "--errors", str(tmp_path / "err.png"))
    assert out.returncode == 0, out.stderr
    assert "max-rate 3-p" in out.stdout and (tmp_path / "bw.png").stat().st_size > 10000
    model = Profile.load(prof).model_for(1 << 20, "maxrate")
    assert model.params["rn"] == pytest.approx(5.5e9, rel=0.05)
    out = shoal("netmodel", "predict", "--profile", str(prof), "--bytes", "1MiB", "--k", "1,16",
                "--model", "maxrate")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("maxrate ") == 2
    out = shoal("netmodel", "advise", "--profile", str(prof), "--k", "1,8", "--model",
                "maxrate")
    assert out.returncode == 0, out.stderr
    assert "k* = R_N / R_C = 1.5" in out.stdout


CRAY = Model("maxrate4", {"alpha": 1.5e-6, "rn": 6.0e9, "rcb": 3.0e9, "rci": 2.0e8})
"""Cray-like: each added process adds much less than the first (R_Ci << R_Cb), so eq. 3's
single R_C misfits and the 4-parameter model of eq. 4 is the better description."""


def test_profile_keeps_every_model_and_uses_the_best(tmp_path):
    m = synthetic(CRAY, np.arange(1, 17), 2.0 ** np.arange(12, 23), noise=0.02, seed=7)
    data, prof = tmp_path / "cray.csv", tmp_path / "cray.toml"
    write_csv(data, m)
    out = shoal("netmodel", "fit", str(data), "--thresholds", "none", "--save", str(prof))
    assert out.returncode == 0, out.stderr
    [reg] = analyse(read_csv(data), [])  # the reference: the fits the command compared
    saved = Profile.load(prof).regime_for(1 << 20)
    assert set(saved.models) == {"maxrate4", "maxrate", "postal"}
    for kind, variant in (("maxrate4", "maxrate4"), ("maxrate", "maxrate"),
                          ("postal", "postal_all")):
        assert saved.errors[kind] == pytest.approx(reg.error_sum[variant], rel=1e-9)
        assert saved.models[kind].params == pytest.approx(reg.fits[variant].model.params)
    assert saved.errors["maxrate4"] * 4 < saved.errors["maxrate"]  # the data's verdict
    assert saved.best() == "maxrate4"
    best = saved.models["maxrate4"]
    out = shoal("netmodel", "predict", "--profile", str(prof), "--bytes", "1MiB", "--k", "8")
    assert out.returncode == 0, out.stderr
    from shoal.units import format_duration

    assert "maxrate4" in out.stdout
    assert format_duration(float(best.time(1 << 20, 8))) in out.stdout
    out = shoal("netmodel", "predict", "--profile", str(prof), "--bytes", "1MiB", "--k", "8",
                "--model", "maxrate")
    assert "maxrate4" not in out.stdout and "maxrate" in out.stdout
    assert format_duration(float(saved.models["maxrate"].time(1 << 20, 8))) in out.stdout
    out = shoal("netmodel", "advise", "--profile", str(prof), "--k", "1")
    assert out.returncode == 0, out.stderr
    assert f"k* = R_N / R_C = {best.saturation_k():.3g}" in out.stdout
    assert "eq. 4" in out.stdout


def test_a_profile_of_one_model_per_regime_still_reads(tmp_path):
    (tmp_path / "old.toml").write_text(
        '[[regime]]\nname = "all"\nlow = 0.0\nhigh = inf\nmodel = "maxrate"\n'
        'alpha = 2e-6\nrc = 3e9\nrn = 6e9\n')
    model = Profile.load(tmp_path / "old.toml").model_for(1024)
    assert model == Model("maxrate", {"alpha": 2e-6, "rc": 3e9, "rn": 6e9})


def test_a_single_k_cannot_give_r_n(tmp_path):
    data = tmp_path / "one.csv"
    write_csv(data, synthetic(BW, [2], 2.0 ** np.arange(10, 20), seed=1))
    out = shoal("netmodel", "fit", str(data), "--thresholds", "none", "--save",
                str(tmp_path / "p.toml"))
    assert out.returncode == 0, out.stderr
    assert "R_N and R_C cannot be separated" in out.stdout
    assert set(Profile.load(tmp_path / "p.toml").regime_for(1024).models) == {"postal"}
    out = shoal("netmodel", "advise", "--profile", str(tmp_path / "p.toml"))
    assert out.returncode == 2 and "refit with measurements at several k" in out.stderr
