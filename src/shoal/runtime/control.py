"""Control points and the controller that tunes them: introspective control (Acun14, Section
III-E; PICS, and Dooley's control points): "tunable parameters with information about the
expected effects of changing the parameters. The control system monitors the application
events, collects performance data ... and makes decisions about what control points to
adjust and how to adjust them."

A **control point** is a named parameter with an ordered list of candidate values, the one in
force, and a note of its expected effect. A program registers its own in ``main``
(``shoal.control_point(name, values, default)``) and reads ``point.value`` where it uses it;
the runtime has built-in ones that ``shoal run --tune`` switches on
(:data:`shoal.options.TUNABLE`):
``lb_every`` (balance at every k-th AtSync point; Charm++'s ``+LBPeriod``),
``lb_period`` (the seconds between periodic balancing steps) and ``agg_buffer`` (the items
every aggregation buffer holds before it is sent, TRAM's buffer size: the root tells every
PE, whose aggregators resize their buffers; :mod:`shoal.runtime.aggregation`). The
checkpoint period is set
by a rule rather than by search: with ``--mtbf`` the period follows Young's optimum
``sqrt(2 C M)`` for the measured checkpoint cost ``C`` and the mean time between failures
``M`` (:func:`young`): time per iteration alone would always prefer no checkpoints.

The **objective** is the time per iteration measured on PE 0, where ``main`` runs: between
calls of ``shoal.iteration()`` when main calls it every iteration, else between AtSync
points (an AtSync program's iteration ends at its sync point).

The **controller** (:class:`Controller`) tunes one point at a time. It skips the first
``window`` iterations of the job (start-up), and after a change ``warmup`` iterations (the
change settles: elements move, buffers refill); then it averages the time per iteration over
a window of at least ``window`` iterations that is a whole number of the value's cycle, two
cycles at least (``lb_every = 8`` balances once per 8 iterations: a window of 16 pays for two
steps, as a run with that value does), and goes on a cycle at a time, up to ``longest`` (6)
windows, while the standard error of the mean over its cycles is above ``precision`` (2%) of
it: one short window cannot order values a few percent apart on a noisy machine (with
+-25% noise per iteration on values 6% apart, single windows of 8 found the best in 68 of
100 seeded runs, windows grown to a 2% error in 95, after a median of 246 iterations
instead of 52; ``tests/runtime/test_control.py``). It searches the candidates as a
local descent: measure the value in force, then an unmeasured neighbour of the best value
measured so far, until both neighbours of the best are measured and worse; a neighbour worse
by less than twice the standard error of the difference is looked past (the candidate
beyond it is measured too: a plateau, or an unlucky window); then it sets the best and
settles. Settled, it keeps measuring windows; two windows in a row more than
``drift`` slower than the best seen send it exploring again from the value in force (the
application changed phase). With several points it explores them in turn, each with the
others fixed. Every iteration and every decision is kept (:func:`shoal.control_history`),
which gives the form of Fig. 6 (the value over the iterations, and the time per iteration).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import UsageError
from shoal.options import TUNABLE


def young(cost: float, mtbf: float) -> float:
    """Young's optimal checkpoint interval ``sqrt(2 C M)`` (Young 1974) for a checkpoint
    that costs ``cost`` seconds and failures ``mtbf`` seconds apart on average."""
    return math.sqrt(2.0 * cost * mtbf)


@dataclass
class ControlPoint:
    """A tunable parameter: its candidate ``values`` in order, the ``index`` of the one in
    force, its expected ``effect`` (said in the history), ``apply`` (called with a new
    value: the runtime's built-in points set their knob; a program's read ``value``), and
    ``cycle`` (iterations of one cycle of a value, given the seconds per iteration)."""

    name: str
    values: tuple[Any, ...]
    index: int
    effect: str = ""
    apply: Callable[[Any], None] | None = None
    cycle: Callable[[Any, float], int] = field(default=lambda value, per_iteration: 1)

    @property
    def value(self) -> Any:
        """The value in force."""
        return self.values[self.index]

    def __repr__(self) -> str:
        return f"ControlPoint({self.name!r}, value={self.value!r}, values={self.values!r})"


def point(name: str, values: Sequence[Any], default: Any = None, effect: str = "",
          apply: Callable[[Any], None] | None = None,
          cycle: Callable[[Any, float], int] | None = None) -> ControlPoint:
    """A checked :class:`ControlPoint` (``default``: the value to start from, the first by
    default)."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"a control point needs a name (text), not {name!r}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise UsageError(f"control point {name!r}: values must be a non-empty list of "
                         f"candidates in order, not {values!r}")
    values = tuple(values)
    if len(set(map(repr, values))) != len(values):
        raise UsageError(f"control point {name!r}: a candidate appears twice in {values!r}")
    if default is None:
        index = 0
    elif default in values:
        index = values.index(default)
    else:
        raise UsageError(f"control point {name!r}: default {default!r} is not one of "
                         f"{values!r}")
    made = ControlPoint(name, values, index, effect, apply)
    if cycle is not None:
        made.cycle = cycle
    return made


class Controller:
    """The controller of PE 0 (see the module doc). ``mark(source)`` at the end of every
    iteration; ``clock`` is the time source (tests give their own)."""

    def __init__(self, window: int = 8, warmup: int = 2, drift: float = 0.2,
                 precision: float = 0.02, longest: int = 6,
                 clock: Callable[[], float] = time.perf_counter):
        if window < 1 or warmup < 0 or drift <= 0 or precision <= 0:
            raise UsageError(f"controller: window >= 1, warmup >= 0, drift > 0, precision "
                             f"> 0, not {window}, {warmup}, {drift}, {precision}")
        self.window, self.warmup, self.drift, self.clock = window, warmup, drift, clock
        self.precision, self.longest = precision, longest
        self.points: dict[str, ControlPoint] = {}
        self.history: list[dict[str, Any]] = []  # one row per iteration
        self.decisions: list[dict[str, Any]] = []
        self.explicit = 0  # shoal.iteration() calls seen: from 2 on, they mark iterations
        self.last: float | None = None
        self.iterations = 0
        self.samples: list[float] = []
        self.skip = 0
        self.active: ControlPoint | None = None  # the point being explored (None: settled)
        self.queue: list[str] = []  # points still to explore in this round
        # the active point's measured candidates: index -> (mean, standard error)
        self.scores: dict[int, tuple[float, float]] = {}
        self.direction = 1  # of the last move between candidates
        self.best = math.inf  # settled: the best window seen since
        self.high = 0  # settled: windows in a row above best * (1 + drift)
        self.measured = 0  # iterations in the last window

    # ------------------------------------------------------------------ registration
    def register(self, made: ControlPoint) -> ControlPoint:
        """Add a point (its name must be new); exploring starts with it if nothing else
        is being explored."""
        if made.name in self.points:
            raise UsageError(f"control point {made.name!r} is registered already")
        first = not self.points
        self.points[made.name] = made
        self.queue.append(made.name)
        if self.active is None:
            self._next_point()
        if first:  # the job's first iterations (start-up, compilation) say little
            self.skip = max(self.warmup, self.window)
        return made

    # ------------------------------------------------------------------ measuring
    def mark(self, source: str) -> None:
        """The end of an iteration: ``source`` is ``"iteration"`` (``shoal.iteration()``)
        or ``"sync"`` (an AtSync point), of which only one counts (see the module doc)."""
        if source == "iteration":
            self.explicit += 1
            if self.explicit < 2:
                return
        elif self.explicit >= 2:
            return
        now = self.clock()
        if self.last is None or (self.explicit == 2 and source == "iteration" and \
                self.history and self.history[-1]["source"] == "sync"):
            self.last = now  # the first mark, or the first of main's: times start here
            return
        dt, self.last = now - self.last, now
        self.iterations += 1
        self.history.append({"iteration": self.iterations, "seconds": dt, "source": source,
                             **{name: p.value for name, p in self.points.items()}})
        if not self.points:
            return
        if self.skip:
            self.skip -= 1
            return
        self.samples.append(dt)
        needed, cycle = self._needed()
        if len(self.samples) < needed or len(self.samples) % cycle:
            return
        score, error = self._score(cycle)
        if error > self.precision * score and len(self.samples) < self.longest * needed:
            return  # too noisy to tell values apart yet: one more cycle
        self.measured = len(self.samples)
        self.samples = []
        if self.active is not None:
            self._explored(self.active, score, error)
        else:
            self._watch(score)

    def _needed(self) -> tuple[int, int]:
        """The window for the value in force, and its cycle: at least ``window``
        iterations, a whole number of cycles, two at least when a cycle is longer than
        one iteration (one cycle alone says nothing of its spread)."""
        per = sum(self.samples) / len(self.samples)
        cycle = 1
        for q in ([self.active] if self.active is not None else self.points.values()):
            cycle = max(cycle, int(q.cycle(q.value, per)))
        return cycle * max(math.ceil(self.window / cycle), 2 if cycle > 1 else 1), cycle

    def _score(self, cycle: int) -> tuple[float, float]:
        """The mean time per iteration of the window and its standard error over the
        window's cycles (``precision`` of the mean when there is one cycle only)."""
        n = len(self.samples) // cycle
        means = [sum(self.samples[k * cycle:(k + 1) * cycle]) / cycle for k in range(n)]
        mean = sum(means) / n
        if n < 2:
            return mean, self.precision * mean
        var = sum((m - mean) ** 2 for m in means) / (n - 1)
        return mean, math.sqrt(var / n)

    # ------------------------------------------------------------------ deciding
    def _explored(self, p: ControlPoint, score: float, error: float) -> None:
        self.scores[p.index] = (score, error)
        self._decide("measured", p, score)
        scores = self.scores
        best = min(scores, key=lambda i: (scores[i][0], i))
        # next: an unmeasured neighbour of the best, on in the direction of the last move
        # while it pays; else past a neighbour that is not worse beyond the noise (twice
        # the standard error of the difference: a plateau, or an unlucky window)
        ahead = [best + self.direction, best - self.direction]
        untried = [i for i in ahead if 0 <= i < len(p.values) and i not in scores]
        if not untried:
            untried = [best + 2 * d for d in (self.direction, -self.direction)
                       if 0 <= best + 2 * d < len(p.values) and best + 2 * d not in scores
                       and best + d in scores and not self._worse(best + d, best)]
        if untried:
            self.direction = 1 if untried[0] > best else -1
            self._set(p, untried[0])
            return
        self._set(p, best)
        self._decide("settled", p, scores[best][0])
        self._next_point()

    def _worse(self, i: int, j: int) -> bool:
        """Is candidate ``i`` slower than ``j`` beyond the noise of their windows?"""
        (a, ea), (b, eb) = self.scores[i], self.scores[j]
        return a - b > 2.0 * math.sqrt(ea * ea + eb * eb)

    def _watch(self, score: float) -> None:
        self.best = min(self.best, score)
        if score > self.best * (1 + self.drift):
            self.high += 1
            if self.high >= 2:  # the application changed: explore again
                self._decide("drift", None, score)
                self.queue = list(self.points)
                self._next_point()
        else:
            self.high = 0

    def _next_point(self) -> None:
        """Explore the next point of the round, or settle."""
        self.scores = {}
        self.direction = 1
        self.active = self.points[self.queue.pop(0)] if self.queue else None
        self.best, self.high = math.inf, 0
        self.samples = []
        self.skip = self.warmup

    def _set(self, p: ControlPoint, index: int) -> None:
        if index != p.index:
            p.index = index
            if p.apply is not None:
                p.apply(p.value)
        self.samples = []
        self.skip = self.warmup

    def _decide(self, what: str, p: ControlPoint | None, score: float) -> None:
        self.note(what, None if p is None else p.name, None if p is None else p.value,
                  score)

    def note(self, what: str, name: str | None, value: Any, seconds: float) -> None:
        """A decision into the history: ``what`` (measured, settled, drift, or a rule's
        name such as young), the point and its value, and the seconds it went by (per
        iteration, or a checkpoint's cost for young)."""
        self.decisions.append({"iteration": self.iterations, "decision": what,
                               "point": name, "value": value, "seconds": seconds,
                               "window": self.measured if what == "measured" else None})


def builtin(name: str, apply: Callable[[Any], None], start: Any) -> ControlPoint:
    """The built-in point ``name`` of :data:`~shoal.options.TUNABLE`, starting at the
    candidate nearest ``start`` and setting its knob through ``apply``."""
    values, effect = TUNABLE[name]
    nearest = min(values, key=lambda v: abs(math.log(v / start)))
    made = point(name, values, nearest, effect, apply)
    if name == "lb_every":
        made.cycle = lambda value, per_iteration: int(value)
    elif name == "lb_period":  # the iterations of one period
        made.cycle = lambda value, per_iteration: max(
            1, math.ceil(value / per_iteration) if per_iteration > 0 else 1)
    if nearest != start:
        apply(nearest)
    return made
