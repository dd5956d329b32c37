"""Every test cleans up after itself: the MPICH shared-memory files (/dev/shm/mpich_shm_*)
that a job it started left behind when it died (an abort test, a killed rank, a timeout)
are removed when the test ends; segments of jobs still running stay."""

import pytest

from shoal.launch import removing_shm_leftovers


@pytest.fixture(autouse=True)
def _no_shm_leftovers():
    with removing_shm_leftovers():
        yield
