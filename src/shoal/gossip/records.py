"""The state record a node publishes and the layout of a vector entry on the wire.

The paper's entries are 1 KiB (Levy14, Section 4.2); a record holds the fields a scheduler
needs (load, free memory, cores) and opaque padding up to the chosen entry size, so that the
cost of gossip can be measured at realistic message sizes. On the wire each entry is preceded
by the node index and the age of the record, 16 bytes: with 1 KiB records and N = 1024 a 20%
window is about 212 kB, as in the paper.
"""

from __future__ import annotations

import numpy as np

from shoal.errors import UsageError

STATE_FIELDS: tuple[tuple[str, str], ...] = (("load", "<f4"), ("free_mem", "<u8"),
                                             ("cores", "<u2"))
ENTRY_HEADER = np.dtype([("node", "<u4"), ("flags", "<u4"), ("age", "<f8")])


MAX_ENTRY = 2**31 - 1  # the largest numpy record


def state_dtype(entry_size: int = 1024,
                fields: tuple[tuple[str, str], ...] = STATE_FIELDS) -> np.dtype:
    """A packed structured dtype of exactly ``entry_size`` bytes: ``fields`` then padding."""
    base = np.dtype(list(fields))
    if entry_size > MAX_ENTRY:
        raise UsageError(f"entry size {entry_size} B is larger than a record can be "
                         f"({MAX_ENTRY} B): use a smaller --entry-size")
    if entry_size < base.itemsize:
        raise UsageError(f"entry size {entry_size} B is smaller than the state fields "
                         f"({base.itemsize} B): use --entry-size {base.itemsize} or more")
    pad = entry_size - base.itemsize
    return np.dtype(list(fields) + ([("pad", f"V{pad}")] if pad else []))


def wire_dtype(state: np.dtype) -> np.dtype:
    """One window entry on the wire: node index, flags (the daemon's group id, else 0),
    age in seconds, record."""
    return np.dtype([*ENTRY_HEADER.descr, ("state", state)])
