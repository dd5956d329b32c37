"""Parse and print quantities with explicit units.

Inside the library every quantity is in bytes, seconds or bytes/s; users write ``256ms``,
``4MiB``, ``20%`` or ``150Mbit``. Parsers raise :class:`shoal.UsageError` naming the accepted
units, and the sweep syntax ``a,b,c`` or ``start:stop:step`` (inclusive stop) expands lists.
"""

from __future__ import annotations

import math
import re

from shoal.errors import UsageError

_NUMBER = r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
_QUANTITY = re.compile(_NUMBER + r"\s*([A-Za-z%µ]*)$")

_TIME = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
         "min": 60.0, "h": 3600.0}
_SIZE = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9,
         "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_RATE = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
         "b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "bps": 1 / 8}


def _split(text: str, what: str, units: dict) -> tuple[float, float]:
    m = _QUANTITY.match(str(text).strip())
    if m is None:
        raise UsageError(f"cannot read {what} {text!r}: write a number with a unit, "
                         f"one of {', '.join(k for k in units if k)}")
    unit = m.group(2)
    key = unit if unit in units else unit.lower()
    if key not in units:
        raise UsageError(f"unknown unit {unit!r} in {what} {text!r}: use one of "
                         f"{', '.join(k for k in units if k)}")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise UsageError(f"{what} {text!r} is not a finite number")
    return value, units[key]


def parse_duration(text: str | float, what: str = "duration") -> float:
    """Seconds in ``text`` (``256ms``, ``2.5s``, ``10us``; a bare number is seconds), >= 0."""
    if isinstance(text, (int, float)):
        value, scale = float(text), 1.0
    else:
        value, scale = _split(text, what, _TIME)
    if value < 0:
        raise UsageError(f"{what} must not be negative (got {text!r})")
    return value * scale


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes in ``text`` (``1KiB``, ``4MiB``, ``212164``), an integer >= 0."""
    if isinstance(text, int):
        value, scale = float(text), 1
    else:
        value, scale = _split(text, what, _SIZE)
    nbytes = value * scale
    if nbytes < 0 or nbytes != int(nbytes):
        raise UsageError(f"{what} must be a whole, non-negative number of bytes (got {text!r})")
    return int(nbytes)


def parse_rate(text: str, what: str = "rate") -> float:
    """Bytes/s in ``text`` (``150Mbit``, ``2GB/s``), > 0."""
    value, scale = _split(text, what, _RATE)
    if value <= 0:
        raise UsageError(f"{what} must be positive (got {text!r})")
    return value * scale


def parse_fraction(text: str | float, what: str = "fraction") -> float:
    """A fraction in [0, 1] from ``20%`` or ``0.2``."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise UsageError(f"cannot read {what} {text!r}: write a percentage such as 5% "
                         "or a fraction such as 0.05") from None
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"{what} must lie between 0% and 100% (got {text!r})")
    return value


def parse_count(text: str | int, what: str = "count", minimum: int = 0) -> int:
    """A whole number >= ``minimum``."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{what} must be a whole number (got {text!r})") from None
    if value < minimum:
        raise UsageError(f"{what} must be at least {minimum} (got {value})")
    return value


def expand_sweep(text: str) -> list[str]:
    """Items of a sweep: ``a,b,c`` lists; ``start:stop:step`` is an inclusive range whose
    parts keep their unit suffix (``10%:100%:10%``). Returns the items as strings."""
    items: list[str] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"empty item in list {text!r}: remove the extra comma")
        if ":" not in part:
            items.append(part)
            continue
        bits = part.split(":")
        if len(bits) != 3:
            raise UsageError(f"range {part!r} must be start:stop:step")
        nums = [_QUANTITY.match(b.strip()) for b in bits]
        if any(n is None for n in nums):
            raise UsageError(f"range {part!r} must be three numbers with the same unit")
        units = {n.group(2) for n in nums}
        if len(units) != 1:
            raise UsageError(f"range {part!r} mixes units {sorted(units)}: use one unit")
        unit = units.pop()
        start, stop, step = (float(n.group(1)) for n in nums)
        if step <= 0 or stop < start:
            raise UsageError(f"range {part!r} needs start <= stop and a positive step")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > 10_000:
            raise UsageError(f"range {part!r} has {count} items: use a larger step")
        for k in range(count):
            v = start + k * step
            items.append((f"{v:.10g}") + unit)
    return items


def format_duration(seconds: float) -> str:
    """``0.000123`` -> ``123 µs``; chooses ns, µs, ms, s."""
    if not math.isfinite(seconds):
        return "∞" if seconds > 0 else "n/a"
    a = abs(seconds)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if a >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def format_bytes(nbytes: float) -> str:
    """``212164`` -> ``207 KiB`` (binary prefixes)."""
    if not math.isfinite(nbytes):
        return "∞"
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"


def parse_temperature(text: str | float, what: str = "temperature") -> float:
    """°C in ``text``: ``50C``, ``74F``, ``323.15K``, or a bare number (°C)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        raise UsageError(f"{what} must be a temperature such as 50C or 74F, not {text!r}")
    s = text.strip().upper().replace("°", "")
    unit = s[-1:] if s[-1:] in ("C", "F", "K") else "C"
    number = s[:-1] if s[-1:] in ("C", "F", "K") else s
    try:
        value = float(number)
    except ValueError:
        raise UsageError(f"{what} must be a temperature such as 50C or 74F, "
                         f"not {text!r}") from None
    return (value - 32.0) * 5.0 / 9.0 if unit == "F" else value - 273.15 if unit == "K" \
        else value
