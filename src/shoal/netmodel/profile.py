"""Machine profiles: every model fitted per protocol regime, with its relative-error sum on
the regime's measurements (the quantity of Gropp16's Table 2), saved as TOML for the
mapping and runtime parts and for ``shoal netmodel predict`` and ``advise``.

A profile holds, per regime, every model the data could give (max-rate 4-p, eq. 4; 3-p,
eq. 3; postal, eq. 2): which one describes the machine best is the data's verdict, not the
user's guess at fit time, so users of the profile take the model of least error unless they
ask for another.

Layout (one ``[[regime]]`` table per regime, one ``[[regime.fit]]`` per model)::

    [[regime]]
    name = "rendezvous"
    low = 65536.0
    high = inf
    [[regime.fit]]
    model = "maxrate4"
    error_sum = 3.0
    alpha = 2e-06
    ...

A profile of one model per regime (``model = ...`` and its parameters inside ``[[regime]]``,
as earlier versions of shoal wrote them) still reads: each regime then has that model only.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from pathlib import Path

from shoal import tomlfile
from shoal._version import __version__
from shoal.errors import UsageError
from shoal.files import write_text
from shoal.netmodel.models import PARAMS, Model


@dataclass
class RegimeModels:
    """The models of one regime (messages of ``low < n <= high`` bytes), by kind, with the
    relative-error sum of each on the regime's measurements (NaN: not known)."""

    name: str
    low: float
    high: float
    models: dict[str, Model]
    errors: dict[str, float] = field(default_factory=dict)

    def best(self, kinds=None) -> str:
        """The kind of least error sum among ``kinds`` (default: all); unknown errors
        last, then the order the models were given in."""
        cands = [k for k in self.models if kinds is None or k in kinds]
        if not cands:
            raise UsageError(f"the {self.name} regime has no {' or '.join(kinds)} model "
                             f"(it has {', '.join(self.models)})")

        def error(kind: str) -> float:
            e = self.errors.get(kind, math.nan)
            return math.inf if math.isnan(e) else e

        return min(cands, key=error)


class Profile:
    """Models per regime: ``regimes`` is a list of :class:`RegimeModels`; a message of n
    bytes belongs to the regime with low < n <= high."""

    def __init__(self, regimes: list[RegimeModels], meta: dict):
        if not regimes:
            raise UsageError("a profile needs at least one regime")
        if any(not r.models for r in regimes):
            raise UsageError("every regime of a profile needs at least one model")
        self.regimes = sorted(regimes, key=lambda r: r.low)
        self.meta = meta

    def regime_for(self, n: float) -> RegimeModels:
        for reg in self.regimes:
            if reg.low < n <= reg.high:
                return reg
        raise UsageError(f"no regime of the profile covers {n:g} bytes")

    def model_for(self, n: float, kind: str | None = None, kinds=None) -> Model:
        """The model for n-byte messages: ``kind`` when given (an error if the regime lacks
        it), else the one of least error among ``kinds`` (default: all)."""
        reg = self.regime_for(n)
        if kind is not None:
            if kind not in reg.models:
                raise UsageError(f"the profile has no {kind} model for the {reg.name} regime "
                                 f"(it has {', '.join(reg.models)})")
            return reg.models[kind]
        return reg.models[reg.best(kinds)]

    def time(self, n: float, k: float) -> float:
        return float(self.model_for(n).time(n, k))

    def save(self, path: str | Path) -> None:
        """Write the profile as TOML (atomically)."""
        lines = ["# shoal netmodel profile: the time of k processes per node each sending n",
                 "# bytes to another node, every fitted model per protocol regime with its",
                 "# relative-error sum (Gropp16)"]
        for key, value in self.meta.items():
            lines.append(f"{key} = {_toml(value)}")
        for reg in self.regimes:
            lines += ["", "[[regime]]", f"name = {_toml(reg.name)}", f"low = {_toml(reg.low)}",
                      f"high = {_toml(reg.high)}"]
            for kind, model in reg.models.items():
                lines += ["[[regime.fit]]", f"model = {_toml(kind)}"]
                if kind in reg.errors:
                    lines.append(f"error_sum = {_toml(reg.errors[kind])}")
                lines += [f"{k} = {_toml(v)}" for k, v in model.params.items()]
        write_text(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        data = tomlfile.read(path, "profile")
        tables = data.get("regime", [])
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise UsageError(f"{path}: 'regime' must be [[regime]] tables, not "
                             f"{tables!r}")
        try:
            regimes = [_regime(t) for t in tables]
        except KeyError as exc:
            raise UsageError(f"{path}: a [[regime]] lacks {exc.args[0]!r}") from None
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
        meta = {k: v for k, v in data.items() if k != "regime"}
        return cls(regimes, meta)


def _regime(table: dict) -> RegimeModels:
    """One ``[[regime]]`` table: its bounds and its fits (or its one legacy model)."""
    name = table["name"]
    low, high = _number(table, "low"), _number(table, "high")
    if not isinstance(name, str) or not low < high:
        raise UsageError(f"a [[regime]] needs a name and low < high (got {name!r}, {low:g}, "
                         f"{high:g})")
    fits = table["fit"] if "fit" in table else [table]  # one model per regime before
    if not isinstance(fits, list) or not all(isinstance(f, dict) for f in fits):
        raise UsageError(f"regime {name}: 'fit' must be [[regime.fit]] tables")
    models, errors = {}, {}
    for f in fits:
        kind = f["model"]
        if kind not in PARAMS:
            raise UsageError(f"regime {name}: unknown model {kind!r} (use one of "
                             f"{', '.join(PARAMS)})")
        models[kind] = Model(kind, {p: _value(f, p) for p in PARAMS[kind]})
        if "error_sum" in f:
            errors[kind] = _number(f, "error_sum")
    return RegimeModels(name, low, high, models, errors)


def _value(table: dict, key: str):
    """A parameter as written (the model checks it is a number in its range)."""
    value = table[key]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _number(table: dict, key: str) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise UsageError(f"{key} must be a number, not {value!r}")
    return float(value)


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise UsageError(f"cannot store {value!r} in a profile")


def provenance(source: str) -> dict:
    """Metadata every saved profile carries."""
    return {"source": source, "created": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"), "shoal": __version__}
