"""Entry point of the ``shoal`` command: assemble the commands of each part and turn a
user's mistake into one line on stderr."""

from __future__ import annotations

import sys
from importlib import import_module

import click

import shoal

COMMANDS = {"gossip": "shoal.cli.gossip:gossip", "netmodel": "shoal.cli.netmodel:netmodel",
            "map": "shoal.cli.mapping:map_cmd", "topology": "shoal.cli.mapping:topology",
            "run": "shoal.cli.runtime:run", "ctl": "shoal.cli.ctl:ctl",
            "demo": "shoal.cli.gossip:demo", "lb": "shoal.cli.lb:lb",
            "cluster": "shoal.cli.cluster:cluster",
            "dashboard": "shoal.cli.dashboard:dashboard", "top": "shoal.cli.top:top",
            "profile": "shoal.cli.profile:profile"}
"""Each command and where it lives: a command's module (and the part it drives) loads only
when that command runs, so ``shoal run`` does not import numpy, the simulator or the
balancers in the launching process."""


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name = where.split(":")
        command = getattr(import_module(module), name)
        assert isinstance(command, click.Command)
        return command


def _version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    """``--version``: the version and which core runs (compiled or pure, docs/compiled.md)."""
    if value and not ctx.resilient_parsing:
        from shoal._compiled import core

        click.echo(f"shoal {shoal.__version__} ({core()} core)")
        ctx.exit()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and which core runs (compiled or pure Python), and exit.")
def cli() -> None:
    """shoal: an adaptive runtime for parallel programs on HPC clusters, and the system
    knowledge it needs: gossip-spread node state, the migratable-object runtime (`shoal
    run`), the max-rate communication model, topology-aware process mapping, a web
    dashboard of the cluster and its jobs (`shoal dashboard`), a job's view in the
    terminal (`shoal top`) and Projections-style figures of a run (`shoal profile`)."""



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
