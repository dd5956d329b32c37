"""Emulated power awareness (shoal.runtime.power; Acun14 III-C): the thermal model against
its exact solution, the controller keeping simulated cores under the threshold, the
duty-cycle slowing a PE's loop by about its frequency, and the balancer giving a slower PE
less load. Nothing here reads real hardware: the model and the frequency are emulated."""

import math
import time

import numpy as np
import pytest
from mpi_jobs import run_ok

from shoal.errors import UsageError
from shoal.options import Options
from shoal.runtime.lb.driver import _database
from shoal.runtime.lb.strategies import LBOptions, chain
from shoal.runtime.power import (
    DEFAULT_MODEL,
    ROOM,
    STEPS,
    Controller,
    ThermalModel,
    Throttle,
    simulate,
)
from shoal.units import parse_temperature


def test_constant_power_approaches_room_plus_p_r_exponentially():
    model = ThermalModel(room=20.0, r=1.5, c=4.0)
    p = 12.0
    tau = model.r * model.c
    # the model's steps, any length, follow the exact solution T_room + P R (1 - e^(-t/RC))
    temp, t = model.room, 0.0
    for dt in [0.1, 0.5, 2.0, 0.25, 7.0, 1.0] * 5:
        temp = model.advance(temp, p, dt)
        t += dt
        exact = model.room + p * model.r * (1.0 - math.exp(-t / tau))
        assert temp == pytest.approx(exact, rel=1e-12, abs=1e-12)
    assert model.advance(model.room, p, 1e6) == pytest.approx(model.steady(p))
    # and the solution solves C dT/dt = P - (T - T_room) / R (a fine Euler integration)
    euler, h = 35.0, 1e-4
    for _ in range(int(3.0 / h)):
        euler += h * (p - (euler - model.room) / model.r) / model.c
    assert model.advance(35.0, p, 3.0) == pytest.approx(euler, abs=1e-3)


def test_power_is_static_plus_dynamic_cubed():
    m = DEFAULT_MODEL
    assert m.power(1.0, 1.0) == m.p_static + m.p_dynamic
    assert m.power(0.5, 1.0) == pytest.approx(m.p_static + m.p_dynamic / 8)
    assert m.power(1.0, 0.0) == m.p_static
    assert ROOM == pytest.approx(23.333, abs=1e-3)  # 74 F


def test_the_defaults_cross_50c_within_tens_of_seconds():
    for pe in range(4):
        model = DEFAULT_MODEL.scaled(pe, 4, 0.4)
        path = simulate(model, None, 60.0, every=0.5)
        crossed = next(t for t, temp, _ in path if temp > 50.0)
        assert 5.0 < crossed < 30.0, (pe, crossed)


@pytest.mark.parametrize("spread", [0.0, 0.4, 0.6])
@pytest.mark.parametrize("util", [1.0, 0.7])
def test_the_controller_keeps_simulated_cores_under_the_threshold(spread, util):
    for pe in range(4):
        model = DEFAULT_MODEL.scaled(pe, 4, spread)
        path = simulate(model, Controller(50.0), 300.0, every=1.0, util=util)
        assert max(temp for _, temp, _ in path) < 50.0, (pe, spread, util)
        uncontrolled = simulate(model, None, 300.0, util=util)[-1][1]
        freqs = [f for _, _, f in path[100:]]
        if uncontrolled > 50.0:  # it had to act, and runs as fast as it may: near 50
            assert min(freqs) < 1.0
            late = max(temp for _, temp, _ in path[100:])
            assert late > 50.0 - Controller(50.0).raise_below - 1.0
        elif uncontrolled < 50.0 - Controller(50.0).guard:  # never near: full speed
            assert min(freqs) == 1.0


def test_the_controller_raises_frequency_well_below_and_lowers_it_when_hot():
    c = Controller(50.0)  # guard 1, raise below 47
    assert c.next(3, 30.0) == 2  # well below: one step up
    assert c.next(0, 30.0) == 0
    assert c.next(3, 46.0, 2.0) == 3  # ... unless it is heating fast
    assert c.next(2, 48.0) == 2  # in the band: stays
    assert c.next(2, 47.5, 1.6) == 3  # predicted within the guard: one step down
    assert c.next(2, 49.0, -0.5) == 3  # (a fall predicts no fall)
    assert c.next(2, 48.0, 2.5) == 4  # predicted over the threshold: two
    assert c.next(len(STEPS) - 1, 60.0) == len(STEPS) - 1


class FakeCore:
    def __init__(self, f):
        self.freq, self.cpu_stats = f, True


@pytest.mark.parametrize("f", [0.5, 0.8])
def test_duty_cycling_slows_a_loop_by_about_f(f):
    """A loop run 150 times through the throttle: the element is charged exactly t / f,
    and the wall time of the whole (loops and sleeps) over the loops' own time is about 1/f
    (a ratio of two times measured together, with a generous margin: no absolute timing)."""
    throttle = Throttle(FakeCore(f))
    st = [0, 0.0, 0.0]
    busy = 0.0
    start = time.perf_counter()
    for _ in range(150):
        t0 = time.perf_counter()
        x = 0
        for i in range(5000):
            x += i
        dt = time.perf_counter() - t0
        busy += dt
        st[1] += dt
        st[2] += dt
        throttle.slow(st, dt)
    wall = time.perf_counter() - start
    assert st[1] == pytest.approx(busy / f)
    assert st[2] == pytest.approx(busy / f)
    assert 0.75 / f < wall / busy < 1.5 / f
    assert throttle.slept == pytest.approx(busy * (1 - f) / f - throttle.debt)


def test_a_pe_at_half_frequency_runs_its_loop_at_about_half_speed():
    """In the runtime (1 PE): 200 calls of a 1 ms loop at f = 1 and f = 0.5."""
    got = run_ok("power", 1, "slow", options=("--power-monitor",))["slow"]
    assert 0.8 < got["ratio1"] < 1.25
    assert 1.6 < got["ratio5"] < 2.6
    assert got["readings"] >= 1


def parts(speeds, objects_per_pe=20, exact=True):
    """Every PE's part of a balancing step: equal objects, all on PE 0."""
    npes = len(speeds)
    out = []
    for pe, s in enumerate(speeds):
        n = objects_per_pe * npes if pe == 0 else 0
        out.append({"pe": pe, "keys": [(0, (pe, k)) for k in range(n)],
                    # measured on a PE at f: t / f wall seconds per unit of work
                    "load": [0.01 / s] * n, "size": [100] * n,
                    "migratable": [True] * n, "pos": [()] * n, "wall": 1.0, "idle": 0.0,
                    "slept": 0.0, "background": 0.0, "speed": s, "exact_speed": exact,
                    "edges": []})
    return out


@pytest.mark.parametrize("speeds", [[1.0, 0.5], [1.0, 0.9], [0.9, 0.7, 1.0, 0.5]])
def test_the_balancer_gives_a_slower_pe_less_load(speeds):
    db = _database(parts(speeds), len(speeds))
    # loads back in nominal seconds: every object the same whatever PE measured it
    assert np.allclose(db.load, db.load[0])
    placement = chain("greedy", LBOptions())(db)
    work = np.bincount(placement, weights=db.load, minlength=len(speeds))
    share = work / work.sum()
    target = np.array(speeds) / sum(speeds)
    grain = db.load[0] / work.sum()
    assert np.all(np.abs(share - target) <= grain + 1e-9), (share, target)
    order = np.argsort(speeds)
    assert np.all(np.diff(work[order]) >= 0)  # slower PEs, no more work


def test_emulated_speeds_are_exact_where_probed_ones_are_banded():
    """A probe's 0.9 is noise (the 15% band makes it 1.0); an emulated 0.9 is not."""
    exact = _database(parts([1.0, 0.9]), 2)
    probed = _database(parts([1.0, 0.9], exact=False), 2)
    assert exact.speed[1] / exact.speed[0] == pytest.approx(0.9)
    assert probed.speed[0] == probed.speed[1]


def test_power_options():
    o = Options.build({"power_threshold": "50C", "power_room": "74F", "power_every": 0.5})
    assert o.power.power_threshold == 50.0
    assert o.power.power_room == pytest.approx(ROOM)
    assert o.power.power_every == 0.5
    o = Options.build({}, environ={"SHOAL_POWER_THRESHOLD": "122F",
                                   "SHOAL_POWER_MONITOR": "1", "SHOAL_POWER_SPREAD": "0.2"})
    assert o.power.power_threshold == pytest.approx(50.0)
    assert o.power.power_monitor and o.power.power_spread == 0.2
    assert Options.build({}).power.power_threshold is None
    assert parse_temperature("323.15K") == pytest.approx(50.0)
    with pytest.raises(UsageError, match="power_threshold must be a temperature"):
        Options.build({"power_threshold": "hot"})
    with pytest.raises(UsageError, match="power_spread must be a number >= 0"):
        Options.build({"power_spread": -1})


def test_the_balancers_speed_is_the_frequency_averaged_since_the_last_step(monkeypatch):
    """2 s at 1.0 then 6 s at 0.6 since the last step: speed 0.7; then a fresh average."""
    from types import SimpleNamespace

    from shoal.options import Powering
    from shoal.runtime import power

    clock = [100.0]
    monkeypatch.setattr(power.time, "perf_counter", lambda: clock[0])
    rt = SimpleNamespace(freq=1.0, pe=0, npes=1, instrument=True, running=True,
                         idle_seconds=lambda: 0.0, after=lambda *a: None,
                         send=lambda *a: None)
    p = power.Power(rt, Powering(power_monitor=True))
    p.start()
    clock[0] += 2.0
    p.set_frequency(0.6)
    clock[0] += 6.0
    assert p.speed() == pytest.approx(0.7)
    clock[0] += 3.0
    assert p.speed() == pytest.approx(0.6)
