"""A signal to ``shoal run`` ends the whole job: mpiexec, its proxy and every rank."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import until

import shoal
from shoal.jobdir import ENV as JOBDIR_ENV
from shoal.netns import alive

SRC = str(Path(shoal.__file__).parents[1])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_shoal_run_ends_every_rank(tmp_path, sig):
    prog = tmp_path / "prog.py"
    prog.write_text("import os, sys, time\n"
                    f"open(os.path.join({str(tmp_path)!r}, f'pid{{os.getpid()}}'), 'w').close()\n"
                    "time.sleep(300)\n")
    env = {**os.environ, "PYTHONPATH": SRC}
    run = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until(lambda: len(list(tmp_path.glob("pid*"))) == 2, "both ranks started")
        pids = [int(p.name[3:]) for p in tmp_path.glob("pid*")]
        run.send_signal(sig)
        assert run.wait(timeout=60) != 0
        until(lambda: not any(alive(p) for p in pids), "every rank ended")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for p in tmp_path.glob("pid*"):
            if alive(int(p.name[3:])):
                os.kill(int(p.name[3:]), signal.SIGKILL)


def test_a_killed_rank_is_named_by_its_pe_and_host(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\n\nasync def main():\n    await shoal.sleep(30)\n\n"
                    "shoal.start(main)\n")
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "3", "--kill", "1@1s",
                          str(prog)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "shoal: PE 1 (host " in out.stderr, out.stderr  # before: only MPICH's "PID n"
    assert "died first; the job ended by signal 9 (SIGKILL)" in out.stderr


BANNER = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 4242 RUNNING AT node7
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
"""


def test_mpichs_banner_is_read_for_the_pe_it_names(tmp_path):
    from shoal.jobdir import JobDir
    from shoal.launch import killed_rank

    (tmp_path / "pes").mkdir()
    (tmp_path / "pes" / "4242@node7").write_text("5\n")
    assert killed_rank(BANNER, None, JobDir(tmp_path)) == (
        "PE 5 (host node7, pid 4242) was killed by signal 9 (SIGKILL)")
    assert killed_rank(BANNER, None, None) == (
        "the rank with pid 4242 on host node7 was killed by signal 9 (SIGKILL)")
    assert killed_rank(BANNER, ("2", 99), JobDir(tmp_path)).startswith("PE 2 (host ")
    ended = BANNER.replace("Killed (signal 9)", "exit code 3").replace("CODE: 9", "CODE: 3")
    assert killed_rank(ended, None, JobDir(tmp_path)) is None  # the rank said why itself
    assert killed_rank("all good\n", None, None) is None
    # the banner names a rank the launcher ended after another (its code is not the signal)
    other = BANNER.replace("CODE: 9", "CODE: 11")
    assert killed_rank(other, ("1", 77), JobDir(tmp_path)) == (
        f"PE 1 (host {os.uname().nodename}, pid 77) died first; the job ended by signal 9 "
        "(SIGKILL)")
    assert killed_rank(other, None, JobDir(tmp_path)).startswith("PE 5 (host node7")


def test_a_rank_killed_from_outside_on_4_pes_is_named(tmp_path):
    """kill -9 of one rank's process (not --kill): shoal run names a PE that died first."""
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\n\nasync def main():\n    await shoal.sleep(60)\n\n"
                    "shoal.start(main)\n")
    home = tmp_path / "job"
    env = {**os.environ, "PYTHONPATH": SRC}
    run = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "4", "--jobdir",
                            str(home), str(prog)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        def notes() -> dict[str, Path]:  # (not the hidden files of a note being written)
            return {p.read_text().strip(): p for p in (home / "pes").glob("[0-9]*@*")}

        until(lambda: len(notes()) == 4, "every PE noted itself")
        note = notes()["2"]
        os.kill(int(note.name.split("@")[0]), signal.SIGKILL)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode != 0
    said = [ln for ln in err.splitlines() if "died first" in ln or "was killed by" in ln]
    assert len(said) == 1 and "signal 9 (SIGKILL)" in said[0], err


def test_a_killed_rank_of_the_gossip_service_is_named_by_rank_and_host(tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "shoal", "gossip", "run", "-n", "3",
                            "--duration", "30s"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        def ranks() -> list[int]:
            out = subprocess.run(["pgrep", "-f", "-P", str(_proxy_of(run.pid)),
                                  "shoal gossip run"], capture_output=True, text=True)
            return [int(p) for p in out.stdout.split()]

        until(lambda: _proxy_of(run.pid) and len(ranks()) == 3, "three ranks started")
        # each notes itself in the job directory once MPI is up (a loaded machine takes
        # seconds): the directory is in the ranks' environment
        pes = _jobdir_of(sorted(ranks())[0]) / "pes"
        until(lambda: len(list(pes.glob("[0-9]*@*"))) == 3, "every rank noted itself")
        os.kill(sorted(ranks())[1], signal.SIGKILL)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    said = [ln for ln in err.splitlines() if "died first" in ln or "was killed by" in ln]
    assert len(said) == 1 and said[0].startswith("shoal: rank ") and "(host " in said[0], err


def _jobdir_of(pid: int) -> Path:
    """The job directory of the rank ``pid`` (``SHOAL_JOBDIR`` in its environment)."""
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        name, _, value = item.partition(b"=")
        if name == JOBDIR_ENV.encode():
            return Path(value.decode())
    pytest.fail(f"rank {pid} has no {JOBDIR_ENV} in its environment")


def _proxy_of(pid: int) -> int:
    """The proxy of the mpiexec that ``pid`` started (the ranks' parent), or 0."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    for child in out.stdout.split():
        proxy = subprocess.run(["pgrep", "-P", child], capture_output=True, text=True)
        if proxy.stdout.split():
            return int(proxy.stdout.split()[0])
    return 0
