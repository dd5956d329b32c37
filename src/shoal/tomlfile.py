"""Reading TOML files a user gives (profiles, patterns): one place for the Python 3.10
fallback and for turning an unreadable or malformed file into a clear error."""

from __future__ import annotations

import sys
from pathlib import Path

from shoal.errors import UsageError
from shoal.files import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read(path: str | Path, what: str) -> dict:
    """The contents of the TOML file ``path`` (``what`` names it in errors)."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
