"""Refusing work that cannot fit in memory before it starts: commands estimate the bytes
they will allocate and call :func:`require`, which compares them with the memory this
process may use (the available memory of the machine, or a lower address-space limit)."""

from __future__ import annotations

import os
import resource

from shoal.errors import UsageError


def available() -> int:
    """Bytes this process can still allocate: ``MemAvailable`` of /proc/meminfo (else the
    physical memory), capped by the address-space limit (RLIMIT_AS) when one is set."""
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except OSError:
        pass
    if free is None:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
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
