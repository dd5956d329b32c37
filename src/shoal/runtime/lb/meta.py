"""When balancing pays: the MetaBalancer model (Menon, Jain, Zheng and Kale, "Automated
load balancing invocation based on application characteristics", IEEE Cluster 2012;
Acun14 ref. [47] and Section III-A: "the RTS can observe the application and automate the
decision of when to invoke load balancing").

At every AtSync point the runtime gives the model each PE's load in the iteration that just
ended (wall seconds in entry methods, so that a core shared with another process shows;
CPU seconds with ``cpu_stats``, which hides it).
What a strategy can remove is the imbalance that persists, not the noise of one iteration
on one PE, which a maximum over PEs would otherwise pick up every time: a garbage-collector
pass or a burst of page faults inside one entry method makes a single iteration of one PE
1.5-3x longer, in CPU time as much as in wall time (measured on 3 PEs, about once in 100
iterations). So each PE's load is first the median of its last ``SPIKE`` (3) iterations,
which a one-iteration spike does not move at all and a lasting change moves after two
iterations; then smoothed over iterations (an exponential average, weight ``SMOOTH`` on the
newest). The model fits straight lines (least squares) to the maximum and the average
of the smoothed PE loads per iteration since the last balancing step, over at most the last
``window`` iterations:

    max(i) ~ a_max + b_max * i        avg(i) ~ a_avg + b_avg * i

The time an iteration loses to imbalance is ``max(i) - avg(i)`` (a perfect balance runs
every iteration in ``avg``). Over the coming period of ``H`` iterations the loss is the area
between the two lines,

    A = sum_{i=n}^{n+H-1} max(0, (a_max - a_avg) + (b_max - b_avg) * i),

and a step pays when ``A`` exceeds its cost ``C`` (gather, strategy, migration, resume: the
measured total time of the last step). ``H`` is the number of iterations since the last
step, at least ``window`` (the recent interval between steps predicts the next one). No step
is taken while the fitted max/avg at the last iteration is at most ``threshold`` (1.05):
below that the strategies cannot do much better than noise; nor in the first
``MIN_ITERATIONS`` (3) iterations after a step. Before any step has been
measured, ``C`` is the fitted maximum load of one iteration (a step stops the application
for about that long: every element is synchronised, then moved).

A fitted line damps one noisy iteration (a spike of +20% in a window of 20 moves the fitted
end by about 4%), while an imbalance that persists for a few iterations moves it by most of
its size. The model is a pure object: :class:`~shoal.runtime.lb.driver.Balancer` feeds it
at the root, and tests feed it series.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

THRESHOLD = 1.05  # no step while the fitted max/avg is at most this
WINDOW = 20  # iterations the lines are fitted over (the most recent ones)
MIN_ITERATIONS = 3  # a line through fewer points is one iteration's noise
SMOOTH = 0.5  # weight of the newest iteration in each PE's smoothed load
SPIKE = 3  # iterations of each PE's running median (a spike of one iteration drops out)


@dataclass
class Decision:
    """What the model said at one AtSync point (kept in ``lb_history`` for the steps)."""

    balance: bool
    iterations: int  # since the last step, this one included
    ratio: float  # fitted max/avg at this iteration
    area: float  # predicted seconds lost to imbalance over the horizon
    cost: float  # the cost a step is expected to have, seconds


@dataclass
class MetaBalancer:
    """Decides at each AtSync point whether a balancing step pays for itself."""

    threshold: float = THRESHOLD
    window: int = WINDOW
    cost: float | None = None  # measured seconds of the last step; None before any
    maxes: list[float] = field(default_factory=list)
    avgs: list[float] = field(default_factory=list)
    recent: list[np.ndarray] = field(default_factory=list)  # the last SPIKE PE loads
    smooth: np.ndarray | None = None  # each PE's smoothed load

    def observe(self, loads: np.ndarray) -> Decision:
        """One iteration ended with PE loads ``loads`` (seconds of entry methods per PE):
        should the runtime balance now?"""
        loads = np.asarray(loads, np.float64)
        if self.recent and self.recent[-1].shape != loads.shape:
            self.recent.clear()
        self.recent = [*self.recent[1 - SPIKE:], loads]
        loads = np.median(self.recent, axis=0)
        if self.smooth is None or self.smooth.shape != loads.shape:
            self.smooth = loads.copy()
        else:
            self.smooth += SMOOTH * (loads - self.smooth)
        self.maxes.append(float(self.smooth.max()) if loads.size else 0.0)
        self.avgs.append(float(self.smooth.mean()) if loads.size else 0.0)
        n = len(self.maxes)
        first = max(0, n - self.window)
        x = np.arange(first, n, dtype=np.float64)
        a_max, b_max = _line(x, np.array(self.maxes[first:]))
        a_avg, b_avg = _line(x, np.array(self.avgs[first:]))
        last = n - 1
        fit_max = a_max + b_max * last
        fit_avg = a_avg + b_avg * last
        ratio = fit_max / fit_avg if fit_avg > 0 else 1.0
        cost = self.cost if self.cost is not None else max(fit_max, 0.0)
        horizon = np.arange(n, n + max(n, self.window), dtype=np.float64)
        gap = (a_max - a_avg) + (b_max - b_avg) * horizon
        area = float(np.clip(gap, 0.0, None).sum())
        balance = n >= MIN_ITERATIONS and ratio > self.threshold and area > cost
        return Decision(balance, n, float(ratio), area, cost)

    def balanced(self, cost: float) -> None:
        """A step took ``cost`` seconds: the lines start again from the next iteration."""
        self.cost = cost
        self.maxes.clear()
        self.avgs.clear()
        self.recent.clear()
        self.smooth = None


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``y ~ a + b x`` (a constant through one point)."""
    if len(x) < 2:
        return float(y.mean()), 0.0
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)
