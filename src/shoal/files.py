"""Files a user names: input text read with a clear error, output paths checked before the
work that fills them, and outputs written atomically (whole or not at all).

Every command that writes results checks all of its outputs with :func:`check_outputs`
before it starts, so that a missing directory, a directory given as a file, an unwritable
place or two outputs on one path cost nothing; :func:`atomic` then writes each through a
temporary file renamed over the target, so that an interrupted command never leaves half
a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shoal.errors import UsageError


def read_text(path: str | Path, what: str) -> str:
    """The text of ``path``, which must be UTF-8 (``what`` names the file in errors)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not UTF-8 text (byte {exc.start} cannot be "
                         f"read): give a text file saved as UTF-8, not UTF-16 or binary") \
            from None


class Figure(str):
    """The path of a figure a command will draw (``--plot out.png``): :func:`check_outputs`
    also checks that matplotlib can write its format (the file name's suffix)."""


def figure(path: str | None) -> Figure | None:
    return None if path is None else Figure(path)


def check_outputs(outputs: dict[str, str | Path | list | None]) -> None:
    """Refuse, before any work, outputs that cannot be written: ``outputs`` maps each option
    (``--csv``) to its path (a :class:`Figure` for a figure), or to a list of paths the
    option writes (a CSV and its JSON sidecar), or None when not given. Each path must name
    a file (not a directory) in an existing directory where a file can be created, no two
    may be the same file, and a figure's suffix must be a format matplotlib writes."""
    seen: dict[Path, str] = {}
    for flag, value in outputs.items():
        if value is None:
            continue
        for path in value if isinstance(value, list) else [value]:
            p = Path(path).resolve()
            if p in seen:
                raise UsageError(f"{seen[p]} and {flag} name the same file {path}: give "
                                 f"them different paths")
            seen[p] = flag
            if isinstance(path, Figure):
                _check_format(flag, path)
            _check_writable(flag, Path(path))


def _check_format(flag: str, path: str) -> None:
    """A figure's file name must end in a format matplotlib writes (or have no suffix:
    PNG)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if suffix not in formats:
        raise UsageError(f"{flag} {path}: figures are written as {', '.join(formats)}; "
                         f"give a file name ending in one of them (.{suffix} is not)")


def _check_writable(flag: str, path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory: give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {parent} does not exist")
    try:  # a real probe: permissions, read-only mounts and pseudo file systems alike
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create a file in {parent} "
                         f"({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


@contextmanager
def atomic(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an error it is
    renamed over ``path`` in one step, otherwise removed (``path`` keeps its old content)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                               suffix=f".tmp{path.suffix}")  # the suffix tells the format
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_figure(fig: object, path: str | Path) -> None:
    """Write matplotlib figure ``fig`` to ``path`` atomically, in the format its suffix
    names (PNG without one), and close it; a failure to write is a :class:`UsageError`."""
    import matplotlib.pyplot as plt

    fmt = Path(path).suffix.lower().lstrip(".") or "png"
    try:
        with atomic(path) as tmp:
            fig.savefig(tmp, dpi=120, format=fmt)  # type: ignore[attr-defined]
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the figure ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)  # type: ignore[arg-type]


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic`)."""
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def append_line(fd: int, value: dict[str, Any]) -> None:
    """One JSON line, written whole by one call (the file is opened with O_APPEND)."""
    os.write(fd, (json.dumps(value, separators=(",", ":")) + "\n").encode())


def open_append(path: Path) -> int:
    """``path`` opened for appending whole lines (its folder made); a last line without
    its newline (a writer killed in the middle) is ended first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    size = os.fstat(fd).st_size
    if size:
        with open(path, "rb") as f:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                os.write(fd, b"\n")
    return fd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
