"""A dashboard served in a thread of the test's process, on a free port."""

from __future__ import annotations

import threading

from shoal.dashboard.server import Dashboard, make_server


def serve(**kwargs) -> Dashboard:
    """A dashboard on a free port of 127.0.0.1 (or ``host``), serving in a thread."""
    server = make_server(port=0, **kwargs)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                     daemon=True).start()
    return server


def stop(server: Dashboard) -> None:
    server.shutdown()
    server.server_close()


def base(server: Dashboard, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{server.port}"
