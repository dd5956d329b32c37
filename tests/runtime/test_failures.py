"""Exceptions in entry methods reach the caller that waits for them (jobs/failures.py);
one nobody waits for ends the job (test_errors.py)."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks", [2, 4])
def test_exceptions_are_raised_where_the_future_is_awaited(ranks):
    run_ok("failures", ranks, "element_call", "coroutine_call", "broadcast_ret",
           "broadcast_awaitable", "nested", "unpicklable", "broadcast_list")
