"""What every emulated cluster of the tests shares with this process: the checkout and the
Python environment, which a fresh clone may keep under /tmp (each node has its own /tmp)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def share() -> tuple[str, ...]:
    """Of this checkout and the environment's prefix, those under /tmp (``up(share=...)``)."""
    return tuple(str(p) for p in (ROOT, Path(sys.prefix).resolve())
                 if p.resolve().is_relative_to("/tmp"))
