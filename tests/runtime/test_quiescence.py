"""The stuck-main probe of quiescence detection, on one PE without MPI."""

import pytest

from shoal.errors import ShoalError
from shoal.runtime.collectives.quiescence import Quiescence
from shoal.runtime.futures import Future, Task
from shoal.runtime.protocol import QD_ASK


class Counts:
    pushed = 0

    def counts(self):
        return 0, 0


class FakeRuntime:
    """A single PE with nothing pending: its counts are all zero."""

    pe, npes, created, processed, probe_at, work = 0, 1, 0, 0, 0.0, None

    def __init__(self):
        self.queue = self.aggregation = Counts()
        self.futures, self.resolved, self.timers = {}, [], []

    def resolve(self, pe, fid, value):
        self.resolved.append(fid)

    def after(self, delay, fn):
        self.timers.append(fn)


def probing(main_awaits_quiescence):
    """A probe whose wave finds the PE quiet, ``main`` suspended on future 1 (the future of
    a quiescence it asked for, or another)."""
    rt = FakeRuntime()
    q = Quiescence(rt)
    q.main = main = Task(None, None, None, "main")  # (only its identity matters here)
    fut = Future(0, 1)
    fut.waiters = [main]
    rt.futures[1] = fut
    if main_awaits_quiescence:
        q.waiters.append(fut)
    q.probing, q.last = 1, (0, 0)
    return rt, q


def test_a_probe_that_finds_main_stuck_ends_the_job():
    _, q = probing(False)
    with pytest.raises(ShoalError, match="no work is pending"):
        q.on_ask((QD_ASK, 1, True))


def test_a_probe_resolves_the_quiescence_main_asked_for_while_it_ran():
    rt, q = probing(True)
    q.on_ask((QD_ASK, 1, True))
    assert rt.resolved == [1] and q.waiters == [] and q.probing == 0
