"""Commands that launch themselves as MPI ranks hand every option the user gave to the ranks,
without the launcher's -n (no MPI here: the mpiexec call is caught)."""

import os
import sys
from typing import ClassVar

import click
import pytest

from shoal import launch
from shoal.cli import gossip as gossip_cli
from shoal.cli import netmodel as netmodel_cli
from shoal.cli.main import cli
from shoal.cli.relaunch import NPROCS, rank_argv

# Every command that relaunches itself: its path, the -n it needs, and a valid value other
# than the default for each of its options (test_every_option_is_listed keeps this complete).
RELAUNCHING = {
    "gossip run": (gossip_cli.run, "3", {
        "interval": ["--interval", "20ms"], "duration": ["--duration", "1s"],
        "window": ["--window", "2"], "entry_size": ["--entry-size", "2KiB"],
        "max_outstanding": ["--max-outstanding", "8"], "poll_max": ["--poll-max", "1ms"],
        "rows": ["--rows", "5"]}),
    "gossip overhead": (gossip_cli.overhead, "8", {
        "app": ["--app", "ptrans"], "every": ["--every", "2"],
        "intervals": ["--intervals", "4ms,16ms"], "window": ["--window", "10%,50%"],
        "repeat": ["--repeat", "2"], "size_hint": ["--size", "64"],
        "csv_path": ["--csv", "out.csv"], "plot": ["--plot", "out.png"]}),
    "netmodel bench": (netmodel_cli.bench, "4", {
        "ks": ["--k", "1,2"], "sizes": ["--sizes", "1B:1KiB"], "repeat": ["--repeat", "2"],
        "mode": ["--mode", "ack"], "min_time": ["--min-time", "5ms"],
        "pseudo_nodes": ["--pseudo-nodes", "2x2"], "csv_path": ["--csv", "b.csv"]}),
}


class FakeJob:
    """Stands for the mpiexec process: records its command, ends at once with ``code``."""

    calls: ClassVar[list] = []
    code = 0

    def __init__(self, cmd, **kwargs):
        FakeJob.calls.append(cmd)
        self.stdout = open(os.devnull, "rb")  # the launcher relays the job's output

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stdout.close()
        return False

    def wait(self, timeout=None):
        return self.code


def launched(monkeypatch, args, nprocs):
    """Run ``shoal ARGS`` in this process; return the arguments of shoal on the ranks."""
    calls = FakeJob.calls = []
    monkeypatch.setattr(launch.subprocess, "Popen", FakeJob)
    cli.main(args, prog_name="shoal", standalone_mode=False)
    assert len(calls) == 1
    cmd = calls[0]
    k = cmd.index("-m")
    assert cmd[k - 3:k + 2] == ["-n", nprocs, sys.executable, "-m", "shoal"]
    return cmd[k + 2:]


def parsed(monkeypatch, command, args):
    """The parameters ``command`` gets from ``shoal ARGS`` (its body is not run)."""
    got = []
    monkeypatch.setattr(command, "callback", lambda **kw: got.append(kw))
    cli.main(list(args), prog_name="shoal", standalone_mode=False)
    assert len(got) == 1
    return got[0]


def contains(seq, part):
    return any(seq[i:i + len(part)] == part for i in range(len(seq) - len(part) + 1))


@pytest.mark.parametrize("path", RELAUNCHING)
def test_every_option_is_listed(path):
    command, _, options = RELAUNCHING[path]
    names = {p.name for p in command.params if p.expose_value} - {NPROCS}
    assert set(options) == names, "give the new option a value in RELAUNCHING"


@pytest.mark.parametrize("path", RELAUNCHING)
def test_the_ranks_get_every_option_the_user_gave(monkeypatch, path):
    command, nprocs, options = RELAUNCHING[path]
    user = [*path.split(), "-n", nprocs, *[t for tokens in options.values() for t in tokens]]
    spy = []
    body = command.callback

    def spy_body(**kw):
        spy.append(kw)
        return body(**kw)

    monkeypatch.setattr(command, "callback", spy_body)
    ranks = launched(monkeypatch, user, nprocs)
    assert ranks[:2] == path.split()
    for tokens in options.values():
        assert contains(ranks, tokens), (tokens, ranks)
    assert not any(t in ("-n", "--np") or t.startswith(("-n", "--np")) for t in ranks)
    # the ranks parse exactly what the launcher parsed, except that they are ranks
    assert parsed(monkeypatch, command, ranks) == {**spy[0], NPROCS: None}


@pytest.mark.parametrize("form", [["-n", "3"], ["-n3"], ["--np", "3"], ["--np=3"]])
def test_any_spelling_of_n_stays_with_the_launcher(monkeypatch, form):
    ranks = launched(monkeypatch, ["gossip", "run", *form, "--duration", "1s"], "3")
    assert ranks == ["gossip", "run", "--duration", "1s"]


def test_defaults_stay_defaults_on_the_ranks(monkeypatch):
    # a launcher of the user's, which may span two nodes (one that is there: run_ranks
    # checks)
    monkeypatch.setenv("SHOAL_MPIEXEC", str(launch._wheel_mpiexec()))
    ranks = launched(monkeypatch, ["netmodel", "bench", "-n", "2"], "2")
    assert ranks == ["netmodel", "bench"]


def test_demo_runs_the_gossip_service_with_its_settings(monkeypatch):
    # demo calls gossip run through ctx.invoke: nothing on sys.argv names gossip run
    monkeypatch.setattr(gossip_cli.simulate, "callback", lambda **kw: None)
    ranks = launched(monkeypatch, ["demo", "--ranks", "3", "--duration", "2s"], "3")
    assert ranks[:2] == ["gossip", "run"]
    got = parsed(monkeypatch, gossip_cli.run, ranks)
    defaults = parsed(monkeypatch, gossip_cli.run, ["gossip", "run"])
    assert got == {**defaults, "interval": "50ms", "duration": "2s"}


def test_a_failed_job_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(launch.subprocess, "Popen", FakeJob)
    monkeypatch.setattr(FakeJob, "code", 3)
    with pytest.raises(launch.UsageError, match="exit code 3"):
        cli.main(["gossip", "run", "-n", "2"], prog_name="shoal", standalone_mode=False)


# Every kind of click parameter survives the trip, at every level of the command path.

@click.group()
@click.option("--level", default="low")
def root(level):
    pass


@root.group()
def tool():
    pass


@tool.command("job", context_settings={"ignore_unknown_options": True})
@click.option("-n", "--np", NPROCS, type=int, default=None)
@click.option("--verbose", is_flag=True)
@click.option("--color/--no-color", default=True)
@click.option("-v", "verbosity", count=True)
@click.option("--tag", multiple=True)
@click.option("--point", nargs=2, type=float)
@click.option("--ratio", type=float, default=0.5)
@click.option("--offset", default="0")
@click.option("--shape", type=click.Choice(["ring", "mesh"]), default="ring")
@click.option("--count", type=int, default=1)
@click.option("--unused", default="keep")
@click.argument("files", nargs=-1, type=click.UNPROCESSED)
def job(**kw):
    seen.append((kw, rank_argv() if kw[NPROCS] is not None else None))


seen = []


def test_every_kind_of_parameter_round_trips():
    seen.clear()
    user = ["--level", "high", "tool", "job", "-n", "4", "--verbose", "--no-color", "-vvv",
            "--tag", "a", "--tag", "b c", "--point", "1.5", "-2", "--ratio", "0.1",
            "--offset", "-5", "--shape", "mesh", "--count", "7", "x.txt", "-y.txt"]
    root.main(user, standalone_mode=False)
    params, ranks = seen[0]
    assert ranks[:4] == ["--level", "high", "tool", "job"]
    assert "--unused" not in ranks and "-n" not in ranks and "--np" not in ranks
    root.main(ranks, standalone_mode=False)
    assert seen[1] == ({**params, NPROCS: None}, None)
    assert params["files"] == ("x.txt", "-y.txt") and params["offset"] == "-5"


def test_a_command_without_n_cannot_relaunch():
    with click.Context(cli.get_command(None, "topology").commands["show"]) as ctx, \
            pytest.raises(RuntimeError, match="no 'nprocs' option"):
        rank_argv(ctx)
