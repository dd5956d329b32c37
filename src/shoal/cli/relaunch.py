"""Commands that launch themselves as MPI ranks.

``shoal gossip run -n 4 ...`` is the launcher; under ``mpiexec`` the same command without
``-n`` is one rank. :func:`relaunch` re-runs the current command on N ranks with the options
click parsed from the user's command line, written back as arguments, minus the launcher-only
``-n``: every option reaches the ranks, including options added to the command later, and
also when another command calls this one with ``ctx.invoke`` (``shoal demo``).
"""

from __future__ import annotations

import enum
import os

import click
from click.core import ParameterSource

NPROCS = "nprocs"
"""Parameter name of the launcher-only option: given, the command launches; absent, it is a
rank."""


def nprocs_option(help_text: str):
    """The ``-n/--np N`` option of a command that launches itself (see :func:`relaunch`)."""
    return click.option("-n", "--np", NPROCS, type=int, default=None, help=help_text)


def relaunch(nprocs: int, timeout: float | None = None,
             ctx: click.Context | None = None) -> None:
    """Run the command of ``ctx`` (default: the current click context) again on ``nprocs``
    ranks, ``mpiexec -n NPROCS python -m shoal ARGS`` with ``ARGS`` from :func:`rank_argv`,
    and wait at most ``timeout`` seconds (None: no limit). A failed or timed-out job raises
    :class:`shoal.errors.UsageError`."""
    from shoal.launch import run_shoal

    run_shoal(nprocs, rank_argv(ctx), timeout=timeout)


def rank_argv(ctx: click.Context | None = None, launcher: str = NPROCS) -> list[str]:
    """The ``shoal`` arguments that run the command of ``ctx`` as a rank: the command's path
    from the root group, then at each level every parameter that was not left at its
    default (every parameter of a command called through ``ctx.invoke``), as option tokens
    (converted values written back as text), without the ``launcher`` option, whose absence
    makes the command take its rank path."""
    ctx = ctx or click.get_current_context()
    if launcher not in {p.name for p in ctx.command.params}:
        raise RuntimeError(f"command {ctx.command.name!r} has no {launcher!r} option: its "
                           f"ranks could not tell they are ranks")
    root = ctx.find_root().command
    path = _path(root, ctx.command)
    if path is None:
        raise RuntimeError(f"command {ctx.command.name!r} is not reachable from "
                           f"{root.name!r}")
    contexts = {}
    c = ctx
    while c is not None:
        contexts.setdefault(id(c.command), c)
        c = c.parent
    argv: list[str] = []
    for name, command in [(None, root), *path]:
        if name is not None:
            argv.append(name)
        level = contexts.get(id(command))  # a group passed through ctx.invoke: its defaults
        if level is not None:
            argv += _params(level, launcher if level is ctx else None)
    return argv + list(ctx.args)


def _path(group: click.Command, target: click.Command) -> list | None:
    """``[(name, command), ...]`` from ``group`` (excluded) down to ``target``."""
    if group is target:
        return []
    if not isinstance(group, click.Group):
        return None
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        rest = None if sub is None else _path(sub, target)
        if rest is not None:
            return [(name, sub), *rest]
    return None


def _params(ctx: click.Context, skip: str | None) -> list[str]:
    options, positional = [], []
    for p in ctx.command.params:
        if not p.expose_value or p.name == skip or p.name not in ctx.params:
            continue
        value = ctx.params[p.name]
        if value is None or ctx.get_parameter_source(p.name) == ParameterSource.DEFAULT:
            continue
        if isinstance(p, click.Option):
            options += _option(p, value)
        else:
            for v in value if p.multiple or p.nargs != 1 else [value]:
                positional += _texts(p, v)
    if any(t.startswith("-") for t in positional):
        positional.insert(0, "--")
    return options + positional


def _option(p: click.Option, value) -> list[str]:
    name = max(p.opts, key=len)
    if p.count:
        return [name] * value
    if p.is_flag:
        if p.is_bool_flag and p.secondary_opts:
            return [name] if value else [max(p.secondary_opts, key=len)]
        active = getattr(p, "flag_activation_value", p.flag_value)  # click >= 8.3 / older
        if p.is_bool_flag and not isinstance(active, bool):
            active = True  # a boolean flag whose flag_value is unset
        return [name] if value == active else []
    out = []
    for v in value if p.multiple else [value]:
        texts = _texts(p, v)
        if len(texts) == 1 and texts[0].startswith("-") and name.startswith("--"):
            out.append(f"{name}={texts[0]}")  # a value that looks like an option
        else:
            out += [name, *texts]
    return out


def _texts(p: click.Parameter, value) -> list[str]:
    """One parameter value (a tuple when nargs > 1) as command-line text."""
    if p.nargs != 1 and isinstance(value, (tuple, list)):
        return [_text(p, v) for v in value]
    return [_text(p, value)]


def _text(p: click.Parameter, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{p.name}: a {type(value).__name__} value cannot be passed to the ranks "
                    f"as text")
