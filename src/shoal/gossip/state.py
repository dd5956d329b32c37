"""Read the local node's state from the OS: what a gossip record publishes by default."""

from __future__ import annotations

import os


def _available_memory() -> int:
    """Bytes of memory available to new work (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def local_state() -> dict:
    """The default state record: 1-minute load average, available memory (bytes), cores."""
    return {"load": os.getloadavg()[0], "free_mem": _available_memory(),
            "cores": os.cpu_count() or 1}
