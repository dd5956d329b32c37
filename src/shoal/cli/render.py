"""Terminal rendering shared by the commands (rich) and tidy result files."""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import shoal

console = Console(highlight=False)
if not console.is_terminal:  # pipes and CI logs: do not squeeze tables into 80 columns
    console.width = 160


def table(title: str, columns: list[str], rows: list[list]) -> Table:
    """A rich table with right-aligned columns after the first."""
    t = Table(title=title, title_justify="left")
    for k, name in enumerate(columns):
        t.add_column(name, justify="left" if k == 0 else "right")
    for row in rows:
        t.add_row(*[cell(v) for v in row])
    return t


def cell(value) -> str:
    """Format one value: floats with 4 significant digits, infinities as ∞, NaN as -."""
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if math.isinf(value):
            return "∞"
        return f"{value:.4g}"
    return str(value)


def check_output(path: str, flag: str) -> None:
    """Refuse, before any work, an output file that cannot be written: a directory, or a
    file in a folder that does not exist or is not writable."""
    from shoal.errors import UsageError

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``: beside it first, then renamed, so the file appears whole
    or not at all."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


def write_csv(path: str, rows: list[dict], meta: dict) -> None:
    """Write tidy ``rows`` to ``path`` and a JSON sidecar ``path.json`` of metadata (each
    file whole or not at all)."""
    if not rows:
        return
    p = Path(path)
    f = io.StringIO(newline="")
    names = list(dict.fromkeys(k for row in rows for k in row))  # every column, in order
    writer = csv.DictWriter(f, fieldnames=names, restval="")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(p, f.getvalue())
    write_atomic(p.with_name(p.name + ".json"), json.dumps(provenance(meta), indent=2,
                                                           default=str) + "\n")


def provenance(meta: dict) -> dict:
    """``meta`` after the shoal version, the command line and the date."""
    return {"shoal": shoal.__version__, "command": sys.argv,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), **meta}
