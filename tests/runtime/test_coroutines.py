"""Coroutine entry methods on 3 ranks (jobs/coroutines.py), with the shared memory of large
buffers, and without it (every large buffer by MPI: the path between nodes, on one node)."""

import pytest
from mpi_jobs import run_ok

SCENARIOS = ("channels", "awaits", "sleeping", "suspended_migration")


@pytest.fixture(scope="module")
def job():  # one launch for every scenario (why: mpi_jobs.shared)
    return run_ok("coroutines", 3, *SCENARIOS, "async_constructor")


def test_channels_between_coroutines_carry_arrays_and_values_in_order(job):
    assert "channels" in job


def test_coroutines_await_calls_with_ret_and_a_broadcast_with_ret_waits_for_each_one(job):
    assert "awaits" in job


def test_sleep_waits_its_time_and_quiescence_waits_for_sleeping_coroutines(job):
    assert "sleeping" in job


def test_a_migration_asked_for_during_a_suspended_coroutine_waits_for_it_to_return(job):
    assert "suspended_migration" in job


def test_an_async_init_runs_to_its_end_before_any_message_to_its_chare(job):
    assert "async_constructor" in job


def test_channels_awaits_sleep_and_suspended_migration_also_work_with_buffers_by_mpi_only():
    run_ok("coroutines", 3, *SCENARIOS, shm=0)  # one job: only channels carry large arrays
