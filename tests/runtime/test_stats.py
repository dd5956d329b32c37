"""Instrumentation on 2 ranks (jobs/stats.py)."""

from mpi_jobs import run_ok


def test_stats_give_calls_and_time_per_entry_method_traffic_per_pair_and_idle_time():
    run_ok("stats", 2, "ring")


def test_a_coroutines_work_after_an_await_counts_as_its_elements_load():
    run_ok("stats", 2, "after_await")
