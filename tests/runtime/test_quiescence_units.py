"""The quiescence detector on one PE, driven by hand (no MPI)."""

from shoal.runtime.collectives.quiescence import Quiescence
from shoal.runtime.futures import Future, Task
from shoal.runtime.queue import Queue


class _NoItems:
    """No aggregation buffer holds an item."""

    def counts(self):
        return 0, 0


class _OnePE:
    """What the detector uses of a runtime, for a job of one PE."""

    def __init__(self):
        self.pe, self.npes = 0, 1
        self.created = self.processed = 0
        self.queue = Queue()
        self.aggregation = _NoItems()
        self.futures: dict[int, Future] = {}
        self.timers: list = []
        self.resolved: list[int] = []
        self.probe_at = float("inf")
        self.work = None

    def future(self):
        fut = Future(0, len(self.futures) + 1)
        self.futures[fut.fid] = fut
        return fut

    def send(self, dest, env):
        assert dest == 0
        self.quiescence.on_start(env)

    def after(self, delay, fn):
        self.timers.append(fn)

    def resolve(self, pe, fid, value):
        self.futures.pop(fid)
        self.resolved.append(fid)


def test_main_awaiting_quiescence_while_a_stuck_main_probe_runs_is_not_stuck():
    rt = _OnePE()
    q = rt.quiescence = Quiescence(rt)
    main = Task(None, None, None, "main")
    q.watch(main)
    rt.future().waiters.append(main)  # main awaits something (a reply), the PE is idle
    q.probe()  # the probe's first wave
    assert q.probing
    rt.futures.clear()  # the reply came; main now awaits quiescence
    fut = q.request()
    fut.waiters.append(main)
    while rt.timers and fut.fid not in rt.resolved:
        rt.timers.pop(0)()  # the probe's next waves (this raised "main waits on ...")
    assert rt.resolved == [fut.fid]
