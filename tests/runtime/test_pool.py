"""The task pool on 2 and 4 PEs (jobs/pool.py)."""

import pytest
from mpi_jobs import run_ok

ALL = ["mapping", "submitting", "nested", "errors", "dynamic", "from_chares"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_task_pool_as_a_user_writes_it(ranks, tmp_path):
    figures = run_ok("pool", ranks, *ALL, options=("--dir", str(tmp_path)))
    assert figures["mapping"] == list(range(ranks))  # every PE ran tasks
    # the long task held its PE until every short one had run: all ran on the others
    assert 1 <= figures["dynamic"] <= ranks - 1


def test_a_map_with_many_failed_chunks_raises_once_and_the_job_goes_on():
    run_ok("pool", 2, "many_failures", "mapping")
