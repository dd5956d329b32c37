"""``shoal run``: everything after the program belongs to the program (no MPI here: the
mpiexec call is caught)."""

import subprocess

from click.testing import CliRunner
from test_relaunch import FakeJob

from shoal.cli.main import cli


def test_options_after_the_program_go_to_the_program_not_to_shoal_run(monkeypatch, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("")
    calls = FakeJob.calls = []
    monkeypatch.setattr(subprocess, "Popen", FakeJob)
    res = CliRunner().invoke(cli, ["run", "-n", "2", str(prog), "-n", "3", "--size", "5",
                                   "--timeout", "1s"])
    assert res.exit_code == 0, res.output
    (cmd,) = calls
    n = cmd.index("-n")
    assert cmd[n + 1] == "2"
    assert cmd[cmd.index(str(prog)):] == [str(prog), "-n", "3", "--size", "5", "--timeout",
                                          "1s"]
