"""Refusing work that cannot fit in memory before it starts: commands estimate the bytes
they will allocate and call :func:`require`, which compares them with the memory this
process may use (the available memory of the machine, or a lower address-space limit)."""

from __future__ import annotations

import os
import resource

from shoal.errors import UsageError


def node_available() -> int:
    """Bytes of memory the machine has available for new work: ``MemAvailable`` of
    /proc/meminfo, else the free physical pages (what gossip publishes of a node)."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def available() -> int:
    """Bytes this process can still allocate: :func:`node_available`, capped by the
    address-space limit (RLIMIT_AS) when one is set."""
    free = node_available()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        free = min(free, soft)
    return free


def require(nbytes: float, what: str, hint: str) -> None:
    """Raise :class:`UsageError` when ``what`` needs more than the available memory
    (``nbytes``, an estimate); ``hint`` says what to change."""
    from shoal.units import format_bytes

    have = available()
    if nbytes > have:
        raise UsageError(f"{what} needs about {format_bytes(nbytes)} of memory, more than the "
                         f"{format_bytes(have)} available: {hint}")
