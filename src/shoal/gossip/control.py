"""Talking to the local node daemon: where its state directory is, its control socket, and
the queries that ``shoal gossip set/status`` and :func:`shoal.cluster` make.

The control channel is a Unix stream socket, ``control.sock`` in the daemon's state
directory (so only who may enter the directory may talk to it): one JSON object per line
each way, ``{"op": "status"}``, ``{"op": "set", "key": K, "value": V}``,
``{"op": "unset", "key": K}``, ``{"op": "keys", "action": "list|install|use|remove",
"key": BASE64}`` (the keyring, :mod:`shoal.gossip.secure`); the answer has ``"ok"`` and, if
false, ``"error"``.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from shoal.errors import UsageError

ENV = "SHOAL_GOSSIP_STATE_DIR"
CONTROL, PIDFILE, STATEFILE, LOG = "control.sock", "daemon.pid", "state.json", "daemon.log"


def default_state_dir() -> Path:
    """``$SHOAL_GOSSIP_STATE_DIR``, else /var/lib/shoal-gossip for root, else
    ``$XDG_STATE_HOME/shoal-gossip`` (~/.local/state/shoal-gossip)."""
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    if os.geteuid() == 0:
        return Path("/var/lib/shoal-gossip")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "shoal-gossip"


def request(state_dir: Path, message: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """Send one request to the daemon of ``state_dir`` and return its answer. Raises
    :class:`UsageError` when no daemon answers there, or it refuses the request."""
    path = state_dir / CONTROL
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(os.fspath(path))
            sock.sendall(json.dumps(message).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        answer = json.loads(data)
    except (OSError, ValueError) as exc:
        raise UsageError(f"no gossip daemon answers at {path} ({exc}): start one with "
                         "`shoal gossip daemon` or pass its --state-dir") from None
    if not answer.get("ok"):
        raise UsageError(str(answer.get("error", "the daemon refused the request")))
    return answer


def cluster(state_dir: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The nodes the local daemon knows (one dict each: name, addr, age in seconds, load,
    free_mem, cores, jobs, pes, keys, self), or an empty list when no daemon runs."""
    where = Path(state_dir) if state_dir is not None else default_state_dir()
    try:
        return list(request(where, {"op": "status"}, timeout=1.0)["nodes"])
    except (UsageError, KeyError):
        return []
