"""``run_ranks`` under srun: when slurmstepd garbled the wheel's PMI start (a PMI line longer
than it reads, :data:`shoal.launch.PMI_GARBLED`), the job starts again with MPICH's own
launcher. A stand-in ``srun`` that fails that way (or hangs after saying so, as the rank
whose line was cut waits for an answer), then the real launcher runs the ranks."""

import os
import re
import sys
import time

import pytest

from shoal.launch import LAUNCHER_ENV, _counted, run_ranks

FAILS = "echo 'srun: error: n1: task 0: Exited with exit code 15' >&2\nexit 15\n"
HANGS = "exec sleep 300\n"  # (exec: the terminate reaches the sleep)


@pytest.mark.parametrize(("said", "then"), [
    ("mpi/pmi2: value not properly terminated in client request", FAILS),
    ("mpi/pmi2: invalid client request", HANGS)])
def test_a_garbled_pmi_start_under_srun_runs_again_with_mpichs_launcher(tmp_path, capfd,
                                                                       said, then):
    srun = tmp_path / "srun"  # (named srun: run_ranks reads srun's messages)
    calls = tmp_path / "calls"
    srun.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                    f"echo 'slurmstepd-n1: error: {said}' >&2\n{then}")
    srun.chmod(0o755)
    t0 = time.monotonic()
    prog = tmp_path / "prog.py"
    prog.write_text("from mpi4py import MPI\n"  # (one write a rank: the ranks' lines stay whole)
                    "c = MPI.COMM_WORLD\nprint(f'rank {c.Get_rank()} of {c.Get_size()}')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SHOAL_"))}
    done = run_ranks(2, [str(prog)], 120, {**env, LAUNCHER_ENV: str(srun)})
    assert time.monotonic() - t0 < 60  # (a hanging step is stopped when srun says it)
    out, err = capfd.readouterr()
    assert done.returncode == 0 and done.args[0].endswith("/mpiexec"), (done.args, err)
    assert sorted(re.findall(r"rank (\d) of 2", out)) == ["0", "1"], out
    assert calls.read_text().split()[-1] == str(prog)  # srun was tried once, first
    assert len(calls.read_text().splitlines()) == 1
    assert "starting the job again with MPICH's own launcher" in err
    assert str(sys.executable) in " ".join(done.args)


def test_placed_ranks_become_hydras_host_counts():
    assert _counted(["n1", "n1", "n3", "n2", "n2"]) == "n1:2,n3:1,n2:2"
