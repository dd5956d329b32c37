"""Power awareness, EMULATED (Acun14, Section III-C, Fig. 4): per-PE frequency scaling, a
thermal model per core, and a controller that keeps every core under a temperature
threshold by lowering the frequency of hot cores and raising it on cool ones.

Nothing here reads or sets real hardware. A VM (this project's machines) reaches no DVFS
governor and no temperature sensor, so all three parts are emulated, and every figure they
give is the emulation's:

* **Frequency** (:class:`Throttle`): a PE at ``f`` (a fraction of nominal) duty-cycles. After
  an entry method (or a coroutine's step) ran for ``t`` seconds, the element is charged
  ``t / f`` (its statistics get the extra ``t (1 - f) / f``, wall and CPU columns alike, as a
  core clocked at ``f`` would show), and the PE owes that much sleep; once it owes at least
  :data:`QUANTUM` it sleeps it off between entry methods (``time.sleep``; an overshoot is
  carried to the next sleep). So a PE at ``f`` gets through a fixed amount of entry-method
  work at about ``f`` of its nominal rate, and the core is free for others while it sleeps.
  Only entry methods are slowed: the runtime's own work (sending, unpickling, balancing) runs
  at full speed. No cgroup CPU quota is used (it would need a cgroup per rank that a user
  process cannot create here, and it would slow the runtime too).
* **Temperature** (:class:`ThermalModel`): a first-order RC model per core,
  ``C dT/dt = P(f, u) - (T - T_room) / R`` with ``P = P_static + P_dynamic * f^3 * u``
  (dynamic power scales with ``f V^2`` and ``V`` with ``f``), ``u`` the PE's measured
  utilisation over the last interval (1 - its idle fraction; duty-cycle sleep counts as
  busy, being the emulated slow core's work). Between readings the power is constant, so
  the model advances by the exact solution ``T_inf + (T - T_inf) e^(-dt / RC)``,
  ``T_inf = T_room + P R``. Parameters (:data:`DEFAULT_MODEL`): ``P_static`` 5 W,
  ``P_dynamic`` 35 W, ``R`` 1 K/W, ``C`` 8 J/K (time constant 8 s: a busy core at full
  frequency, 63 °C at equilibrium from a 23.3 °C room, crosses 50 °C after about 9 s).
  Cores differ in cooling, as chips in a rack do (the source of the imbalance DVFS makes):
  PE ``p`` of ``n`` has ``R (1 + spread (p / (n - 1) - 1/2))`` (``power_spread``, default
  0.4: R from 0.8 to 1.2 K/W, busy equilibria 55-71 °C at full frequency).
* **Controller** (:class:`Controller`): every ``power_every`` seconds each PE reads its
  emulated temperature, predicts the next reading from the last rise, and steps its
  frequency one step down the ladder :data:`STEPS` (1.0 to 0.5 in steps of 0.1, as a DVFS
  governor's P-states) when the prediction is within :data:`GUARD` of the threshold (two
  steps when it is over it), and one step up when it is more than :data:`RAISE_BELOW`
  under it (the paper's "decreases the frequency of hot cores and increases the ones that
  are well below the threshold").

The balancer sees a PE at ``f`` as a PE of speed ``f``: its ``speed`` in the database is
the set frequency (:meth:`Power.speed`: its mean over time since the last step), not the
probe ``_speed()`` of the driver, whose 50 µs loop never spans a duty-cycle sleep and would
measure 1.0 (on a real clocked-down core it would measure ``f``), and the emulated speed is
exact where the probe's is noisy
(the driver's 15% band of equal speeds is not applied to it). Loads measured on that PE are
``t / f``; the database scales them back to nominal seconds, so the strategy gives the PE
``f`` of a nominal PE's work. The duty-cycle sleeps are not counted as background time
(another process on the core), which would lower the PE's capacity a second time.

Settings (:mod:`shoal.options`): ``power_threshold`` (°C; turns the emulation and the
controller on), ``power_room`` (°C, default 23.33 = 74 °F, the paper's CRAC setting),
``power_every`` (seconds, default 1), ``power_spread``, ``power_monitor`` (the thermal
model alone, at nominal frequency: Fig. 4's Base). Each PE's readings go to PE 0
(:func:`shoal.power_history`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime.protocol import POWER

if TYPE_CHECKING:
    from shoal.options import Powering
    from shoal.runtime.interfaces import Core

ROOM = (74.0 - 32.0) * 5.0 / 9.0  # the paper's CRAC setting, 74 °F, in °C (23.33)
STEPS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)  # the frequency ladder, fractions of nominal
GUARD = 1.0  # °C: a predicted reading at threshold - GUARD or above: one step down
RAISE_BELOW = 3.0  # °C: more than this under the threshold, one step up
QUANTUM = 1e-3  # seconds of owed sleep before a PE duty-cycles (a sleep's granularity)
SPREAD = 0.4  # default spread of the cores' thermal resistances (fraction of R)


@dataclass(frozen=True)
class ThermalModel:
    """A core's first-order RC thermal model (all emulated; units: °C, W, K/W, J/K)."""

    room: float = ROOM
    r: float = 1.0  # thermal resistance to the room, K/W
    c: float = 8.0  # heat capacity, J/K
    p_static: float = 5.0  # W, whatever the load
    p_dynamic: float = 35.0  # W at nominal frequency and full utilisation

    def power(self, f: float, u: float) -> float:
        """Watts at frequency ``f`` (fraction of nominal) and utilisation ``u`` in [0, 1]."""
        return self.p_static + self.p_dynamic * f ** 3 * min(max(u, 0.0), 1.0)

    def steady(self, power: float) -> float:
        """The temperature a constant ``power`` settles at."""
        return self.room + power * self.r

    def advance(self, temp: float, power: float, dt: float) -> float:
        """The temperature after ``dt`` seconds at constant ``power`` from ``temp`` (the
        exact solution of the RC equation)."""
        end = self.steady(power)
        return end + (temp - end) * math.exp(-dt / (self.r * self.c))

    def scaled(self, pe: int, npes: int, spread: float) -> ThermalModel:
        """PE ``pe``'s model: its resistance spread over ``R (1 +- spread / 2)`` by PE
        number (PE 0 the best cooled)."""
        x = pe / (npes - 1) - 0.5 if npes > 1 else 0.0
        return ThermalModel(self.room, self.r * (1.0 + spread * x), self.c, self.p_static,
                            self.p_dynamic)


DEFAULT_MODEL = ThermalModel()


@dataclass(frozen=True)
class Controller:
    """The frequency controller of one core. At each reading it predicts the next one
    from the last rise (``temp + max(rise, 0)``: readings a period apart, a core heating
    at 3 K per period would otherwise cross the threshold between two of them) and steps
    down the ladder ``steps``: one step when the prediction reaches ``threshold - guard``,
    two when it reaches the threshold; one step up when reading and prediction are both more
    than ``raise_below`` under the threshold."""

    threshold: float
    steps: tuple[float, ...] = STEPS
    guard: float = GUARD
    raise_below: float = RAISE_BELOW

    def next(self, level: int, temp: float, rise: float = 0.0) -> int:
        """The ladder level (index into ``steps``) after a reading of ``temp``, ``rise``
        above the previous one, at ``level``."""
        predicted = temp + max(rise, 0.0)
        if predicted >= self.threshold - self.guard:
            down = 2 if predicted >= self.threshold else 1
            return min(level + down, len(self.steps) - 1)
        if predicted < self.threshold - self.raise_below:
            return max(level - 1, 0)
        return level


def simulate(model: ThermalModel, controller: Controller | None, seconds: float,
             every: float = 1.0, util: float = 1.0,
             temp: float | None = None) -> list[tuple[float, float, float]]:
    """A core busy at ``util`` for ``seconds`` under ``controller`` (None: nominal
    frequency throughout), read every ``every`` seconds: ``(time, temperature, frequency)``
    at each reading. Pure Python, no runtime (the tests' and the docs' check)."""
    t, level = 0.0, 0
    temp = model.room if temp is None else temp
    out = [(t, temp, 1.0)]
    while t < seconds - 1e-12:
        f = 1.0 if controller is None else controller.steps[level]
        before, temp = temp, model.advance(temp, model.power(f, util), every)
        t += every
        if controller is not None:
            level = controller.next(level, temp, temp - before)
        out.append((t, temp, f))
    return out


class Throttle:
    """A PE's emulated frequency: the extra time its entry methods are charged and the
    sleep it owes (see the module doc). ``pe.py`` calls :meth:`slow` after each timed call
    while the PE's ``freq`` is below 1."""

    __slots__ = ("debt", "rt", "slept")

    def __init__(self, rt: Any):
        self.rt = rt
        self.debt = 0.0  # seconds of sleep owed (negative: an overshoot carried)
        self.slept = 0.0  # seconds slept duty-cycling, in all

    def slow(self, st: list, dt: float) -> None:
        """A call of ``dt`` seconds at the PE's frequency: charge its statistics ``st`` the
        time a core at that frequency would have taken, and sleep off the debt once it is
        :data:`QUANTUM` or more."""
        f = self.rt.freq
        extra = dt * (1.0 - f) / f
        st[1] += extra
        if self.rt.cpu_stats:
            st[2] += extra
        self.debt += extra
        if self.debt >= QUANTUM:
            t0 = time.perf_counter()
            time.sleep(self.debt)
            slept = time.perf_counter() - t0
            self.debt -= slept
            self.slept += slept


class Power:
    """The power manager of one PE: its throttle, thermal model and controller, and the
    timer that reads utilisation, advances the model and sets the frequency."""

    def __init__(self, rt: Core, options: Powering):
        self.rt = rt
        self.threshold = options.power_threshold
        self.monitor = options.power_monitor
        self.on = self.threshold is not None or self.monitor
        self.control = self.threshold is not None
        self.every = options.power_every
        room = ROOM if options.power_room is None else options.power_room
        self.spread = options.power_spread
        self.base = ThermalModel(room=room)
        self.model = self.base  # this PE's own once it starts (its R)
        self.controller = (None if self.threshold is None
                           else Controller(self.threshold))
        if self.control and self.threshold is not None and self.threshold <= room:
            raise UsageError(f"power_threshold {self.threshold:g} C is not above the room "
                             f"temperature {room:g} C")
        self.throttle = Throttle(rt)
        self.freq_area = self.freq_span = self.freq_mark = 0.0  # time-averaged frequency
        self.worked = 0.0  # seconds slept in emulated_work
        self.level = 0
        self.temp = room
        self.t0 = self.t_mark = self.idle_mark = 0.0
        self.history: list[dict[str, Any]] = []  # at PE 0: every PE's readings

    def start(self) -> None:
        """Once the scheduler runs: the first interval begins."""
        if not self.on:
            return
        if not self.rt.instrument:
            raise UsageError("power emulation slows entry methods as it times them: it "
                             "needs instrument=True")
        self.model = self.base.scaled(self.rt.pe, self.rt.npes, self.spread)
        self.t0 = self.t_mark = self.freq_mark = time.perf_counter()
        self.idle_mark = self.rt.idle_seconds()
        self._record(0.0, 0.0)
        self.rt.after(self.every, self._tick)

    def speed(self) -> float:
        """This PE's speed for the balancer: its emulated frequency (see the module doc),
        averaged over time since the last call (the last balancing step). The controller
        moves a hot core between two steps of the ladder every few seconds; the mean over
        the period the loads were measured in predicts the next period better than the
        step the core happens to be at (the recent past predicts the near future, as for
        the loads)."""
        self._integrate()
        area, span = self.freq_area, self.freq_span
        self.freq_area = self.freq_span = 0.0
        return area / span if span > 0 else float(self.rt.freq)

    def _integrate(self) -> None:
        """Add the time since the last call at the current frequency to the average's sums."""
        now = time.perf_counter()
        if self.freq_mark:
            self.freq_area += float(self.rt.freq) * (now - self.freq_mark)
            self.freq_span += now - self.freq_mark
        self.freq_mark = now

    def set_frequency(self, f: float) -> None:
        """Run at ``f`` from now (the time before counts at the frequency it had)."""
        self._integrate()
        self.rt.freq = f

    def throttled_seconds(self) -> float:
        """Seconds this PE slept duty-cycling or in :func:`emulated_work` (not background:
        its own slow clock, its own work)."""
        return self.throttle.slept + self.worked

    def own_sleep(self, seconds: float) -> None:
        """``seconds`` of :func:`emulated_work` slept."""
        self.worked += seconds

    def _tick(self) -> None:
        if not self.rt.running:
            return
        now, idle = time.perf_counter(), self.rt.idle_seconds()
        wall = now - self.t_mark
        util = 1.0 - (idle - self.idle_mark) / wall if wall > 0 else 0.0
        util = min(max(util, 0.0), 1.0)
        self.t_mark, self.idle_mark = now, idle
        f = float(self.rt.freq)
        before = self.temp
        self.temp = self.model.advance(self.temp, self.model.power(f, util), wall)
        if self.controller is not None:
            self.level = self.controller.next(self.level, self.temp, self.temp - before)
            self._integrate()
            self.rt.freq = self.controller.steps[self.level]
        self._record(now - self.t0, util)
        self.rt.after(self.every, self._tick)

    def _record(self, t: float, util: float) -> None:
        rec = {"pe": self.rt.pe, "t": t, "temp": self.temp, "freq": float(self.rt.freq),
               "util": util, "slept": self.throttle.slept}
        if self.rt.pe == 0:
            self.history.append(rec)
        else:
            self.rt.send(0, (POWER, rec))

    def on_report(self, env: tuple) -> None:
        """At PE 0: another PE's reading."""
        self.history.append(env[1])


def set_frequency(f: float) -> None:
    """Set this PE's EMULATED frequency to ``f`` (a fraction of nominal, 0 < f <= 1): its
    entry methods are charged ``t / f`` and it duty-cycles (see the module doc); the
    balancer weighs it as a PE of speed ``f`` when the power emulation is on. With
    ``power_threshold`` set, the controller sets the frequency at its next reading."""
    from shoal.runtime.context import current

    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 1.0:
        raise UsageError(f"set_frequency: f is a fraction of the nominal frequency, "
                         f"0 < f <= 1, not {f!r}")
    current().power.set_frequency(float(f))


def emulated_work(seconds: float) -> None:
    """Inside an entry method: hold this PE for ``seconds`` as computing would, without
    taking the CPU (a sleep), and count that time as the PE's own, not as background time
    (time another process took from the core), which would lower its capacity in the
    balancer. For benchmarks on a machine shared with other programs: the work's duration
    does not depend on them. Like real work, it is charged ``t / f`` and slowed by the
    duty-cycle at an emulated frequency ``f``."""
    from shoal.runtime.context import current

    rt = current()
    t0 = time.perf_counter()
    time.sleep(seconds)
    rt.power.own_sleep(time.perf_counter() - t0)
