"""shoal inside an MPI program on 2 ranks (jobs/library_mode.py), and what the runtime does
to the program's garbage collector (shoal.runtime.collector)."""

import ast
import gc
import weakref

from mpi_jobs import run_job

from shoal.runtime import collector


def test_library_mode_runs_between_mpi_calls_of_the_program_on_the_same_communicator():
    out = run_job("library_mode", 2)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK library (2, 1)" in out.stdout  # allreduce of 1, then of the ranks: 0 + 1


def test_while_the_runtime_runs_the_collector_is_tuned_and_given_back_after():
    out = run_job("library_mode", 2)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("OK collector "))
    (young, frozen), (young_after, frozen_after) = ast.literal_eval(line[len("OK collector "):])
    assert young == collector.YOUNG and frozen > 10_000  # modules, numba, mpi4py: frozen
    assert young_after < collector.YOUNG and frozen_after == 0


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_cycles_made_while_tuned_are_still_collected_without_being_asked():
    gone = [0]

    def made() -> None:
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        weakref.finalize(a, lambda: gone.__setitem__(0, gone[0] + 1))

    gc.collect()
    with collector.tuned():
        for _ in range(20 * collector.YOUNG):
            made()
        inside = gone[0]
    assert gc.get_freeze_count() == 0
    # young collections every YOUNG net allocations (3 per cycle here) free all but the
    # cycles made since the last one
    assert inside >= 20 * collector.YOUNG - 2 * collector.YOUNG, inside
