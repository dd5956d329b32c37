"""Failures that must end the job with a message and a non-zero exit (jobs/errors.py)."""

import subprocess
import sys

import pytest
from mpi_jobs import TIMEOUT, run_job, run_ok

from shoal.launch import mpiexec, ranks_env


def test_an_exception_in_an_entry_method_ends_the_job_with_pe_element_and_traceback():
    out = run_job("errors", 3, "entry_method")
    assert out.returncode != 0
    assert "PE 2, Faulty[3].boom" in out.stderr
    assert "ValueError: deliberate failure in an entry method" in out.stderr


@pytest.mark.parametrize(("scenario", "said"), [
    ("outside_shape", "index (100,) lies outside the shape (4,)"),
    ("outside_shape_2d", "index (1, 3) lies outside the shape (2, 3)"),
])
def test_an_index_outside_a_dense_arrays_shape_is_an_error_at_the_caller(scenario, said):
    out = run_job("errors", 2, scenario)
    assert out.returncode != 0
    assert "PE 0, main" in out.stderr
    assert said in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("options", [(), ("--lb-period", "0.3")])
def test_main_waiting_on_a_future_nothing_can_resolve_ends_the_job(options):
    out = run_job("errors", 3, "stuck_main", options=options)
    assert out.returncode != 0
    assert "main waits on Future(pe=0, id=" in out.stderr, out.stderr[-2000:]
    assert "but no work is pending" in out.stderr


def test_main_waiting_on_a_sleeping_element_a_sleep_or_quiescence_is_not_stuck():
    run_ok("errors", 3, "alive")


def test_sys_exit_in_an_entry_method_ends_the_job_with_its_code_and_no_traceback():
    out = run_job("errors", 3, "exit_3")
    assert out.returncode == 3, out.stderr[-2000:]
    assert "PE 2, Faulty[3].quit: sys.exit(3)" in out.stderr
    assert "Traceback" not in out.stderr
    out = run_job("errors", 3, "exit_0")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Abort" not in out.stderr


def test_a_future_sent_twice_names_the_element_that_sent_it():
    out = run_job("errors", 3, "sent_twice")
    assert out.returncode != 0
    assert "received a second value from PE 2, Faulty[3].twice" in out.stderr, out.stderr


def test_an_exception_in_an_async_init_ends_the_job_with_pe_element_and_traceback():
    out = run_job("errors", 2, "async_init")
    assert out.returncode != 0
    assert "PE 1, Unready[3].__init__" in out.stderr, out.stderr[-2000:]
    assert "ValueError: deliberate failure in an async __init__" in out.stderr
    assert "never awaited" not in out.stderr


@pytest.mark.parametrize(("scenario", "ranks", "said"), [
    ("ragged", 2, "Reducer.sum combines sequences element-wise, and two contributions have "
                  "lengths"),
    ("lambda_reducer", 1, "the reducer Faulty.anonymous.<locals>.<lambda> cannot be sent to "
                          "other PEs"),
    ("lambda_reducer", 2, "define it with def at the top level of a module"),
    ("sparse_block", 2, "map='block' needs the array's shape"),
    ("lambda_map", 2, "the array map lambda_map.<locals>.<lambda> cannot be sent"),
    ("single_contributes", 2, "Faulty is a single chare (shoal.create): it takes part in no "
                              "reduction"),
])
def test_silent_differences_are_clear_errors(scenario, ranks, said):
    out = run_job("errors", ranks, scenario)
    assert out.returncode != 0
    assert said in out.stderr, out.stderr[-2000:]
    assert "shoal.errors.UsageError" in out.stderr


@pytest.mark.parametrize("ranks", [2, 4])
def test_an_exception_whose_future_is_dropped_ends_the_job_with_pe_and_traceback(ranks):
    out = run_job("errors", ranks, "dropped")
    assert out.returncode != 0
    pe = 3 * ranks // 4
    assert f"shoal: PE {pe}, Faulty[3].boom: Traceback" in out.stderr, out.stderr[-2000:]
    assert "ValueError: deliberate failure in an entry method" in out.stderr
    assert "its caller dropped the future without awaiting it" in out.stderr


def test_a_strategy_only_the_root_refuses_ends_the_job_with_its_traceback():
    # the root loads the balancing strategy (topo refuses to run without a machine), the
    # other PEs only check its name: they must not wait for a root that is gone
    code = ("import shoal\n"
            "async def main():\n"
            "    pass\n"
            "shoal.start(main, lb='topo')\n")
    out = subprocess.run([*mpiexec(), "-n", "2", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=TIMEOUT,
                         env=ranks_env(None, 2))
    assert out.returncode == 1, out.stderr[-2000:]
    assert "shoal: PE 0 (starting): Traceback" in out.stderr
    assert "strategy 'topo' needs the machine" in out.stderr
