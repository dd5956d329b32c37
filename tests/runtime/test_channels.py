"""Channels: each Channel object is its own channel (jobs/channels.py)."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks", [2, 4])
def test_channels_between_one_pair_are_distinct_and_pair_by_order_and_name(ranks):
    run_ok("channels", ranks, "distinct", "concurrent_phases", "named", "migrating")
