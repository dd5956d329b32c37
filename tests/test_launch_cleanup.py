"""The launcher removes the MPICH shared-memory files its job left when it died, and only
those (issue 17, section 3)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from polling import until

from shoal import launch
from shoal.launch import LAUNCH_MARK, SHM_DIR, SHM_GLOB, removing_shm_leftovers
from shoal.netns import alive

ABORTING = textwrap.dedent("""
    from mpi4py import MPI
    import time
    c = MPI.COMM_WORLD
    buf = bytearray(1000)
    if c.Get_rank() == 0:
        c.Send(buf, 1)
    else:
        c.Recv(buf, 0)  # the shared-memory segment is in use now
    c.Barrier()
    if c.Get_rank() == 0:
        c.Abort(3)
    time.sleep(30)
""")


def shm_files():
    return set(SHM_DIR.glob(SHM_GLOB))


def test_an_aborted_job_leaves_no_shared_memory(tmp_path):
    prog = tmp_path / "abort.py"
    prog.write_text(ABORTING)
    before = shm_files()
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr
    # a segment some live process maps is another job's, on a shared machine (or under
    # pytest -n, another test's), and so is one that another job's clean-up removes soon
    deadline = time.monotonic() + launch.SHM_GRACE + launch.SHM_SETTLE + 2
    while left := {p for p in shm_files() - before if str(p) not in launch._users()}:
        assert time.monotonic() < deadline, f"left behind: {sorted(map(str, left))}"
        time.sleep(0.2)


def test_only_files_nobody_uses_are_removed(tmp_path):
    """A segment that appears during the job but that a live process maps stays (another
    job's); one that nobody maps is removed; one there before is not touched."""
    old = tmp_path / "mpich_shm_shoaltest_old"
    old.write_bytes(b"x")
    live = tmp_path / "mpich_shm_shoaltest_live"
    dead = tmp_path / "mpich_shm_shoaltest_dead"
    holder = None
    try:
        with removing_shm_leftovers(where=tmp_path):  # (apart from other tests' jobs)
            live.write_bytes(b"y" * 4096)
            holder = subprocess.Popen(  # maps ``live`` like a running rank
                [sys.executable, "-c", "import mmap, sys, time\n"
                 f"f = open({str(live)!r}, 'r+b'); m = mmap.mmap(f.fileno(), 4096)\n"
                 "f.close(); print('mapped', flush=True); time.sleep(60)"],
                stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "mapped"
            dead.write_bytes(b"z")
        assert old.exists() and live.exists() and not dead.exists()
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        for p in (old, live, dead):
            Path(p).unlink(missing_ok=True)


HOLD = ("import mmap, sys, time\n"
        "f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 4096)\n"
        "f.close(); print('mapped', flush=True); time.sleep(float(sys.argv[2]))")


def _holder(path, seconds, marker=None):
    env = dict(os.environ)
    if marker is not None:
        env[LAUNCH_MARK] = marker
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "mapped"
    return proc


def test_with_a_marker_another_jobs_segment_is_left_without_waiting(monkeypatch, tmp_path):
    """A launch's own cleanup does not wait out the grace for a segment that only another
    job's ranks map (a second job beside it): no sleep at all."""
    other = tmp_path / "mpich_shm_shoaltest_other"
    holder = None
    try:
        with removing_shm_leftovers("job-a", tmp_path):
            other.write_bytes(b"y" * 4096)
            holder = _holder(other, 60, marker="job-b")

            def no_sleep(_):
                raise AssertionError("waited for another job's segment")

            monkeypatch.setattr(launch.time, "sleep", no_sleep)
        assert other.exists()
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        other.unlink(missing_ok=True)


def test_with_a_marker_its_own_lingering_rank_is_waited_for(monkeypatch, tmp_path):
    """A segment mapped by an exiting rank of the job itself is removed once that rank has
    gone, within the grace."""
    # (a grace the test can rely on: the rank exits 0.5 s after mapping, but on a loaded
    # machine its exit and the scans of every process's maps took more than the 2 s of
    # SHM_GRACE once, in a fresh clone's suite)
    monkeypatch.setattr(launch, "SHM_GRACE", 20.0)
    own = tmp_path / "mpich_shm_shoaltest_own"
    holder = None
    try:
        with removing_shm_leftovers("job-a", tmp_path):
            own.write_bytes(b"y" * 4096)
            holder = _holder(own, 0.5, marker="job-a")
        assert holder.wait(timeout=30) == 0  # it had exited when the cleanup gave up...
        assert not own.exists()  # ...and the cleanup removed its file after it exited
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        own.unlink(missing_ok=True)


def test_a_rank_that_ended_after_the_scan_is_looked_at_again():
    # a rank seen mapping its file may exit before its environment is read: a zombie (its
    # environment unreadable) or a gone process counts as the job's, so its file is looked
    # at again rather than left as another job's
    proc = subprocess.Popen([sys.executable, "-c", "pass"], env={**os.environ,
                                                                 LAUNCH_MARK: "job-b"})
    until(lambda: not alive(proc.pid), "the child did not exit")  # (a zombie: not reaped)
    assert launch._marked(proc.pid, "job-a")  # (a zombie, though marked for another job)
    proc.wait()
    assert launch._marked(proc.pid, "job-a")  # (reaped: no such process)
    assert launch._marked(os.getpid(), "job-a") is (os.environ.get(LAUNCH_MARK) == "job-a")


def test_a_file_a_starting_job_has_not_mapped_yet_stays(tmp_path):
    """A job starting beside this one creates its segment, then maps it: a clean-up that
    looks in between leaves the file (younger than SHM_SETTLE), and finds it mapped on its
    next look."""
    young = tmp_path / "mpich_shm_shoaltest_young"
    holder = None
    try:
        with removing_shm_leftovers(where=tmp_path):
            young.write_bytes(b"y" * 4096)
            holder = subprocess.Popen(  # maps it 0.3 s later, as a slow rank would
                [sys.executable, "-c", "import time; time.sleep(0.3)\n" + HOLD,
                 str(young), "60"], stdout=subprocess.PIPE, text=True)
        assert young.exists()
        assert holder.stdout.readline().strip() == "mapped"
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        young.unlink(missing_ok=True)
