"""Terminal rendering shared by the commands (rich) and tidy result files."""

from __future__ import annotations

import csv
import datetime
import json
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import shoal
from shoal.files import atomic, write_text

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


def write_csv(path: str, rows: list[dict], meta: dict) -> None:
    """Write tidy ``rows`` to ``path`` and a JSON sidecar ``path.json`` of metadata (each
    file whole or not at all)."""
    if not rows:
        return
    p = Path(path)
    with atomic(p) as tmp, tmp.open("w", newline="") as f:
        names = list(dict.fromkeys(k for row in rows for k in row))  # every column, in order
        writer = csv.DictWriter(f, fieldnames=names, restval="")
        writer.writeheader()
        writer.writerows(rows)
    write_text(sidecar(p), json.dumps(provenance(meta), indent=2, default=str) + "\n")


def provenance(meta: dict) -> dict:
    """``meta`` after the shoal version, the command line and the date."""
    return {"shoal": shoal.__version__, "command": sys.argv,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), **meta}


def sidecar(path: str | Path) -> Path:
    """The JSON sidecar of metadata written beside a CSV file."""
    p = Path(path)
    return p.with_name(p.name + ".json")


def csv_outputs(path: str | None) -> list[Path] | None:
    """The files ``--csv PATH`` writes (the CSV and its sidecar), for
    :func:`shoal.files.check_outputs`."""
    return None if path is None else [Path(path), sidecar(path)]
