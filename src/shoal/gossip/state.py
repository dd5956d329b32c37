"""Read the local node's state from the OS: what a gossip record publishes by default."""

from __future__ import annotations

import os

from shoal.memory import node_available


def local_state() -> dict:
    """The default state record: 1-minute load average, available memory (bytes), cores."""
    return {"load": os.getloadavg()[0], "free_mem": node_available(),
            "cores": os.cpu_count() or 1}
