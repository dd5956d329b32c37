"""Machine profiles: the fitted model per regime, saved as TOML for the mapping and runtime
parts (and for ``shoal netmodel predict``)."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

from shoal import tomlfile
from shoal._version import __version__
from shoal.errors import UsageError
from shoal.netmodel.models import PARAMS, Model


class Profile:
    """One model kind fitted per regime: ``regimes`` is a list of (name, low, high, Model)
    where a message of n bytes belongs to the regime with low < n <= high."""

    def __init__(self, regimes: list[tuple[str, float, float, Model]], meta: dict):
        if not regimes:
            raise UsageError("a profile needs at least one regime")
        self.regimes = sorted(regimes, key=lambda r: r[1])
        self.meta = meta

    def model_for(self, n: float) -> Model:
        for _, low, high, model in self.regimes:
            if low < n <= high:
                return model
        raise UsageError(f"no regime of the profile covers {n:g} bytes")

    def time(self, n: float, k: float) -> float:
        return float(self.model_for(n).time(n, k))

    def save(self, path: str | Path) -> None:
        lines = ["# shoal netmodel profile: the time of k processes per node each sending n",
                 "# bytes to another node, per protocol regime (seed 003)"]
        for key, value in self.meta.items():
            lines.append(f"{key} = {_toml(value)}")
        for name, low, high, model in self.regimes:
            lines += ["", "[[regime]]", f"name = {_toml(name)}", f"low = {_toml(low)}",
                      f"high = {_toml(high)}", f"model = {_toml(model.kind)}"]
            lines += [f"{k} = {_toml(v)}" for k, v in model.params.items()]
        Path(path).write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        data = tomlfile.read(path, "profile")
        regimes = []
        for reg in data.get("regime", []):
            try:
                kind = reg["model"]
                params = {p: float(reg[p]) for p in PARAMS[kind]}
                regimes.append((reg["name"], float(reg["low"]), float(reg["high"]),
                                Model(kind, params)))
            except KeyError as exc:
                raise UsageError(f"{path}: a [[regime]] lacks {exc.args[0]!r}") from None
        meta = {k: v for k, v in data.items() if k != "regime"}
        return cls(regimes, meta)


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
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
