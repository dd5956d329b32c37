"""Entry point of the ``shoal`` command: assemble the commands of each part and turn a
user's mistake into one line on stderr."""

from __future__ import annotations

import sys

import click

import shoal
from shoal.cli.ctl import ctl
from shoal.cli.gossip import demo, gossip
from shoal.cli.lb import lb
from shoal.cli.mapping import map_cmd, topology
from shoal.cli.netmodel import netmodel
from shoal.cli.runtime import run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(shoal.__version__, prog_name="shoal")
def cli() -> None:
    """shoal: an adaptive runtime for parallel programs on HPC clusters, and the system
    knowledge it needs: gossip-spread node state, the migratable-object runtime (`shoal
    run`), the max-rate communication model, and topology-aware process mapping."""


cli.add_command(gossip)
cli.add_command(netmodel)
cli.add_command(map_cmd)
cli.add_command(topology)
cli.add_command(run)
cli.add_command(ctl)
cli.add_command(demo)
cli.add_command(lb)


def main() -> None:
    """Run the CLI; a user's mistake is one line on stderr and exit code 2."""
    try:
        cli.main(standalone_mode=False)
    except shoal.ShoalError as exc:
        _fail(str(exc))
    except click.exceptions.Abort:
        _fail("aborted")
    except click.ClickException as exc:
        _fail(exc.format_message())
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def _fail(message: str) -> None:
    sys.stderr.write(f"shoal: error: {message}\n")
    sys.exit(2)
