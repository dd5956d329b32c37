"""What the tests of gossip daemons share: free loopback ports, a daemon's status, waiting."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from shoal.errors import UsageError
from shoal.gossip.control import request


def free_ports(count: int) -> list[int]:
    """``count`` UDP ports free on 127.0.0.1 now."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def status(state: Path) -> dict | None:
    """The status of the daemon of state directory ``state``, or None if none answers."""
    try:
        return request(state, {"op": "status"}, timeout=1.0)
    except UsageError:
        return None


def wait(what, timeout: float, step: float = 0.05):
    """Poll ``what()`` until it returns something true; fail after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = what()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {timeout:.2f} s")
