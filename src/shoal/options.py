"""The runtime's settings, each defined once: its name as a keyword of ``shoal.start`` and
``Runtime``, its environment variable (what ``shoal run``'s flags set for the ranks), its
kind, and the section of :class:`Options` it belongs to.

:meth:`Options.build` is the one place where arguments and the environment become options:
a keyword given wins over its variable; every value is checked here and a wrong one names
the setting and says what it takes. ``shoal run`` writes its flags with :func:`environment`,
so the names on both sides are the ones of :data:`SETTINGS`. (The anchors: dask's config,
one documented table of keys, and mpi4py's ``rc``, read once before MPI starts.)
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import UsageError
from shoal.units import parse_temperature

SHM_BYTES = 32 << 20  # shared memory per PE for large buffers to PEs of its node
POOL_BYTES = 64 << 20  # the default bound of a PE's pool of receive buffers
RESTART_ENV = "SHOAL_RESTART"
POLL_SPIN = 2e-4  # seconds an idle PE spins, where each PE of its node has a core
LIVE_ENV = "SHOAL_LIVE_PERIOD"  # seconds between two rows of live data (0: none)
LIVE_PERIOD = 0.5


@dataclass(frozen=True)
class Setting:
    """One setting: ``name`` (keyword), ``env`` (variable, or "" for none), ``kind``
    (``text``, ``path``, ``flag``, ``seconds``, ``bytes``, ``celsius``: a temperature, 50C
    or 74F, kept in °C; ``number``: a float >= 0), its :class:`Options` section."""

    name: str
    env: str
    kind: str
    section: str


SETTINGS = (
    Setting("lb", "SHOAL_LB", "text", "balancing"),
    Setting("lb_period", "SHOAL_LB_PERIOD", "seconds", "balancing"),
    Setting("lb_dump", "SHOAL_LB_DUMP", "path", "balancing"),
    Setting("lb_auto", "SHOAL_LB_AUTO", "flag", "balancing"),
    Setting("lb_machine", "SHOAL_LB_MACHINE", "text", "balancing"),
    Setting("lb_costs", "SHOAL_LB_COSTS", "text", "balancing"),
    Setting("tune", "SHOAL_TUNE", "text", "balancing"),
    Setting("power_threshold", "SHOAL_POWER_THRESHOLD", "celsius", "power"),
    Setting("power_room", "SHOAL_POWER_ROOM", "celsius", "power"),
    Setting("power_every", "SHOAL_POWER_EVERY", "seconds", "power"),
    Setting("power_spread", "SHOAL_POWER_SPREAD", "number", "power"),
    Setting("power_monitor", "SHOAL_POWER_MONITOR", "flag", "power"),
    Setting("checkpoint_every", "SHOAL_CHECKPOINT_EVERY", "seconds", "checkpoint"),
    Setting("checkpoint_dir", "SHOAL_CHECKPOINT_DIR", "path", "checkpoint"),
    Setting("mtbf", "SHOAL_MTBF", "seconds", "checkpoint"),
    Setting("restart", RESTART_ENV, "path", "checkpoint"),
    Setting("ft", "SHOAL_FT", "flag", "checkpoint"),
    Setting("trace", "SHOAL_TRACE", "path", "tracing"),
    Setting("live_period", LIVE_ENV, "seconds", "tracing"),
    Setting("cpu_stats", "", "flag", "tracing"),
    Setting("instrument", "", "flag", "tracing"),
    Setting("poll_spin", "", "seconds", "transport"),
    Setting("poll_max", "", "seconds", "transport"),
    Setting("shm_bytes", "", "bytes", "transport"),
    Setting("pool_bytes", "", "bytes", "transport"),
)
BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Balancing:
    lb: str | None = None  # strategy or chain, "auto", "none"; None: greedy_refine at AtSync
    lb_period: float | None = None  # also balance every so many seconds
    lb_dump: str | None = None  # write each step's database here
    lb_auto: bool = False  # the MetaBalancer decides at every AtSync point
    lb_machine: str | None = None  # the torus of the PEs (TORUS[:CORES|:MAP.csv])
    lb_costs: str | None = None  # netmodel profiles: PROFILE or INTRA,INTER (lb/costs.py)
    tune: str | None = None  # built-in control points the controller tunes (runtime.control)


@dataclass(frozen=True)
class Powering:
    """The emulated DVFS and thermal model (shoal.runtime.power; no real sensor or
    governor is touched)."""

    power_threshold: float | None = None  # °C: emulate, and keep cores under this
    power_room: float | None = None  # °C: the room (default 74 F = 23.33 C)
    power_every: float = 1.0  # seconds between readings and frequency decisions
    power_spread: float = 0.4  # the cores' thermal resistances differ by this fraction
    power_monitor: bool = False  # the thermal model alone, nominal frequency (a baseline)


@dataclass(frozen=True)
class Checkpointing:
    checkpoint_every: float | None = None  # automatic checkpoints at most this often
    checkpoint_dir: str | None = None  # where they go
    mtbf: float | None = None  # mean time between failures: the period follows Young's rule
    restart: Any = None  # a checkpoint directory, or an in-memory one (recovery)
    ft: bool = False  # in-job recovery (ULFM)


@dataclass(frozen=True)
class Tracing:
    trace: str | None = None  # the Chrome-trace file of the run
    # seconds between two rows of live data under shoal run (runtime.publish); 0: none
    live_period: float = LIVE_PERIOD
    cpu_stats: bool = False  # CPU time per entry method too
    instrument: bool = True  # calls and time per element (the balancer's database)


@dataclass(frozen=True)
class Transport:
    # an idle PE spins this long before it naps (None: POLL_SPIN, or 0 on a node with more
    # PEs than cores: shoal.threads.oversubscribed)
    poll_spin: float | None = None
    poll_max: float = 1e-3  # the longest nap of its back-off
    shm_bytes: int = SHM_BYTES
    pool_bytes: int = POOL_BYTES


@dataclass(frozen=True)
class Options:
    """Every setting of one run, by section (frozen: managers read theirs, none writes)."""

    balancing: Balancing = field(default_factory=Balancing)
    power: Powering = field(default_factory=Powering)
    checkpoint: Checkpointing = field(default_factory=Checkpointing)
    tracing: Tracing = field(default_factory=Tracing)
    transport: Transport = field(default_factory=Transport)

    @classmethod
    def build(cls, given: Mapping[str, Any], environ: Mapping[str, str] = os.environ,
              auto_dir: str | None = None) -> Options:
        """The options of keywords ``given``, then of the variables of ``environ`` for
        those not given; ``auto_dir`` (in ``shoal run``'s job directory) is where automatic
        checkpoints go when no ``checkpoint_dir`` is set."""
        unknown = sorted(set(given) - set(BY_NAME))
        if unknown:
            raise UsageError(f"unknown setting(s) {', '.join(unknown)}: the runtime takes "
                             f"{', '.join(BY_NAME)}")
        values: dict[str, Any] = {}
        for s in SETTINGS:
            if s.name in given:
                values[s.name] = _checked(s, given[s.name], s.name)
            elif s.env and environ.get(s.env):
                values[s.name] = _checked(s, _parsed(s, environ[s.env]), s.env)
        if values.get("checkpoint_every") and not values.get("checkpoint_dir") and auto_dir:
            values["checkpoint_dir"] = auto_dir
        if values.get("checkpoint_every") and not values.get("checkpoint_dir"):
            raise UsageError("checkpoint_every needs checkpoint_dir (shoal run gives its job "
                             "directory; with shoal.start pass checkpoint_dir=...)")
        if values.get("mtbf") and not values.get("checkpoint_every"):
            raise UsageError("mtbf needs checkpoint_every: the first period (Young's rule "
                             "sets the next ones from the measured checkpoint cost)")
        parse_tune(values.get("tune"))  # a misspelt point: at start-up, named
        return cls(**{name: kind(**{s.name: values[s.name] for s in SETTINGS
                                    if s.section == name and s.name in values})
                      for name, kind in SECTIONS.items()})


SECTIONS = {"balancing": Balancing, "power": Powering, "checkpoint": Checkpointing,
            "tracing": Tracing, "transport": Transport}


def environment(**values: Any) -> dict[str, str]:
    """The ranks' environment for settings given by ``shoal run``'s flags (None: unset)."""
    out = {}
    for name, value in values.items():
        if value is None or value is False:
            continue
        s = BY_NAME[name]
        if not s.env:
            raise UsageError(f"setting {name} has no environment variable")
        out[s.env] = "1" if value is True else repr(float(value)) if s.kind in NUMBERS \
            else os.path.abspath(value) if s.kind == "path" else str(value)
    return out


NUMBERS = ("seconds", "celsius", "number")  # the kinds whose values are floats
ZERO_OK = ("poll_spin", "live_period")  # the durations that may be 0 (live_period: off)


def live_period(environ: Mapping[str, str]) -> float:
    """The live-data period the ranks of ``environ`` will use (what ``shoal run`` writes
    into the job's ``job.json``; 0: none)."""
    s = BY_NAME["live_period"]
    text = environ.get(s.env)
    if not text:
        return LIVE_PERIOD
    return float(_checked(s, _parsed(s, text), s.env))


def _parsed(s: Setting, text: str) -> Any:
    """A variable's text as the setting's value."""
    if s.kind == "flag":
        if text not in ("0", "1"):
            raise UsageError(f"{s.env} must be 1 or 0, not {text!r}")
        return text == "1"
    if s.kind == "celsius":
        return parse_temperature(text, s.env)
    if s.kind in ("seconds", "number"):
        try:
            return float(text)
        except ValueError:
            unit = " of seconds" if s.kind == "seconds" else ""
            raise UsageError(f"{s.env} must be a number{unit}, not {text!r}") from None
    return text


def _checked(s: Setting, value: Any, where: str) -> Any:
    """``value`` if it suits setting ``s``, else a :class:`UsageError` naming ``where``."""
    if s.kind == "seconds":
        if value is None:
            return None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        zero = s.name in ZERO_OK
        if not number or not (value >= 0 if zero else value > 0):
            raise UsageError(f"{where} must be a number of seconds "
                             f"{'>= 0' if zero else '> 0'}, not {value!r}")
        return float(value)
    if s.kind in ("celsius", "number"):
        return _number(s, value, where)
    if s.kind == "bytes":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{where} must be a whole number of bytes >= 0, not {value!r}")
        return value
    if s.kind == "flag":
        return bool(value)
    if s.name == "restart" and value is not None and not isinstance(value, (str, os.PathLike)):
        return value  # (an in-memory checkpoint, which a recovery restarts from)
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{where} must be text, not {value!r}")
    return None if value is None else os.fspath(value)


def _number(s: Setting, value: Any, where: str) -> float | None:
    """A ``celsius`` or ``number`` setting's value (a temperature's text read as °C)."""
    if isinstance(value, str) and s.kind == "celsius":
        value = parse_temperature(value, where)
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or (s.kind == "number" and value < 0):
        what = "temperature (50C, 74F)" if s.kind == "celsius" else "number >= 0"
        raise UsageError(f"{where} must be a {what}, not {value!r}")
    return float(value)


# The control points the runtime has built in (shoal.runtime.control), which --tune names:
# their candidate values and what each trades
TUNABLE: dict[str, tuple[tuple[Any, ...], str]] = {
    "lb_every": ((1, 2, 4, 8, 16, 32, 64),
                 "balance at every k-th AtSync point: fewer steps cost less, and let the "
                 "imbalance grow between them"),
    "lb_period": ((0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
                  "seconds between periodic balancing steps: the same trade"),
    "agg_buffer": ((16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
                   "items an aggregation buffer holds before it is sent: larger buffers send "
                   "fewer messages and hold items longer"),
}


def parse_tune(text: str | None) -> tuple[str, ...]:
    """``--tune lb_every,lb_period``: the built-in points named, checked."""
    if not text:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in TUNABLE]
    if unknown:
        raise UsageError(f"tune: no built-in control point {', '.join(unknown)}; the "
                         f"runtime has {', '.join(TUNABLE)}")
    return names
