"""What every test shares.

- Cleanup: the MPICH shared-memory files (/dev/shm/mpich_shm_*) that a job it started left
  behind when it died (an abort test, a killed rank, a timeout) are removed when the test
  ends; segments of jobs still running stay (and so do files too young to tell: another
  test's job may be starting, see shoal.launch.removing_shm_leftovers). Each worker marks
  the jobs its tests start (``SHOAL_LAUNCH``, which ``shoal run`` replaces with its own
  and cleans up after itself): a test's end waits only for the exiting ranks of its own
  worker's jobs, not for the 2 s grace on every segment that the other worker's (or
  another user's) running job created meanwhile.
- Parallel runs (``make test`` runs ``pytest -n 3 --dist loadscope
  --no-loadscope-reorder``): the tests of one file run on one worker, in order (their
  module fixtures start one job for several tests), the files that bring up network
  namespaces and Slurm share one group (never two emulated clusters at once), and the
  longest groups are handed out first so that no worker is left with a long file at the
  end.
- numba: every kernel, in the tests' processes and in the jobs they launch (which inherit
  the environment), is compiled with bounds checks, into a cache of its own (numba's cache
  index does not tell checked code from unchecked). A kernel that indexes out of range
  raises IndexError instead of corrupting the heap: locality's undo log once wrote past
  its end and a PE died steps later in ``free(): invalid pointer`` in some parallel suites.
- The registry of jobs (``SHOAL_STATE_DIR``, where every ``shoal run`` registers its live
  data, :mod:`shoal.live`) is a temporary folder of the test process, removed at its end:
  the tests' jobs stay out of the user's ``~/.local/state/shoal``.
"""

import atexit
import os
import shutil
import tempfile

os.environ["NUMBA_BOUNDSCHECK"] = "1"
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                   f"shoal-numba-checked-{os.getuid()}"))
if "SHOAL_STATE_DIR" not in os.environ:
    os.environ["SHOAL_STATE_DIR"] = tempfile.mkdtemp(prefix="shoal-test-state-")
    atexit.register(shutil.rmtree, os.environ["SHOAL_STATE_DIR"], True)

import pytest

from shoal.launch import LAUNCH_MARK, one_host, removing_shm_leftovers

CLUSTER = ("tests/cluster/", "tests/netmodel/test_emulated_cluster.py")
# the groups that take longest (seconds of a serial run, wall), started first
LONGEST_FIRST = ("cluster", "tests/runtime/test_autockpt.py", "tests/runtime/test_lb.py",
                 "tests/runtime/test_ft.py", "tests/runtime/test_checkpoint.py",
                 "tests/runtime/test_resize.py", "tests/runtime/test_errors.py",
                 "tests/runtime/test_lb_meta.py", "tests/apps/test_leanmd.py",
                 "tests/apps/test_pdes.py", "tests/test_examples.py",
                 "tests/test_pure_core.py")


def _group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return "cluster" if path.startswith(CLUSTER) else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item.nodeid), len(rank)))  # (stable)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``--dist loadscope``, and under ``-n N`` alone (``--dist load``): one unit of
    work per group (xdist's ``loadgroup`` reads markers into node ids that pytest 9.2 no
    longer uses, so it grouped nothing: two tests of a file ran at once on two workers).
    Under plain ``load``, ``pytest -n 2`` of two emulated-cluster tests brought up two
    clusters at once, and the benchmark's ranks hung until its 150 s timeout, 4 times of
    4."""
    if config.getvalue("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ByGroup(config, log)


# Ranks this suite starts by mpiexec get shoal run's own UCX settings for ranks of one host
# (launch.one_host: the loopback device, no memory hooks): the suite's emulated clusters add
# and remove network devices while other tests start ranks, and a device removed while UCX
# opens it ends MPI_Init. (The multi-node tests take both out of their jobs' environment.)
os.environ.update(one_host(dict(os.environ)))

# the jobs this worker's tests start inherit the mark (shoal run's own jobs get their own)
MARK = os.environ[LAUNCH_MARK] = f"pytest-{os.getpid()}"


@pytest.fixture(autouse=True)
def _no_shm_leftovers():
    with removing_shm_leftovers(MARK):
        yield
