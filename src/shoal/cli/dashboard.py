"""``shoal dashboard``: serve the web dashboard (issue 29, item 2) until Ctrl-C."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from shoal.errors import UsageError


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but localhost, 127.0.0.1 or ::1 needs a "
                   "token (generated unless --token is given).")
@click.option("--port", default="8787", show_default=True,
              help="TCP port to listen on (0: any free one; the URL printed names it).")
@click.option("--token", default=None,
              help="The secret a browser must present (?token= once, then a cookie). "
                   "Generated and printed with the URL when bound off localhost.")
@click.option("--registry", default=None, metavar="DIR",
              help="Where shoal run registers jobs (default $SHOAL_STATE_DIR, else "
                   "~/.local/state/shoal).")
@click.option("--gossip-state-dir", default=None, metavar="DIR",
              help="The local gossip daemon's state directory (default: the daemon's "
                   "own default, or $SHOAL_GOSSIP_STATE_DIR).")
@click.option("--verbose", is_flag=True, help="Log every request on stderr.")
def dashboard(host: str, port: str, token: str | None, registry: str | None,
              gossip_state_dir: str | None, verbose: bool) -> None:
    """Serve a web dashboard on this machine: the cluster as the local gossip daemon sees
    it (else the nodes of the running jobs), the jobs found (running and recent), and each
    job's utilisation over time stacked by entry method, per PE, its message rates, load
    balancing steps, checkpoints and resizes, updated every second while it runs and the
    same after it ended. Everything it shows ships with shoal: no internet needed."""
    from shoal.dashboard.server import make_server, serve

    try:
        number = int(port)
    except ValueError:
        raise UsageError(f"--port {port!r} is not a number: give 1-65535 (0: any free one)")\
            from None
    server = make_server(host, number, token=token, root=registry,
                         gossip_dir=gossip_state_dir, verbose=verbose)
    signal.signal(signal.SIGTERM, _stop)
    click.echo(f"shoal dashboard: {server.url()}")
    if server.token is not None and token is None:
        click.echo("  (the token was generated: anyone with this URL can see your jobs; "
                   "give --token to choose it)")
    click.echo("  Ctrl-C stops it")
    sys.stdout.flush()
    serve(server)
