"""Waiting in a test for what another process does: poll, with a limit."""

import time

import pytest


def until(cond, what: str, limit: float = 60.0) -> None:
    """Poll ``cond()`` every 0.1 s until it is true; fail, saying ``what`` did not happen,
    after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {limit:.0f} s")
        time.sleep(0.1)
