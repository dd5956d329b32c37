"""The measured reasons behind three decisions of the runtime (docs/architecture.md), one run:

1. envelopes are tuples: pickle round trip (dumps + loads, protocol 5) and reading the fields
   of an INVOKE envelope as a tuple, a NamedTuple and a class with ``__slots__``;
2. proxies are generated classes with one method per entry method: the cost of
   ``proxy.method(x)`` up to the runtime's send, against a generic ``__getattr__`` proxy;
3. the runtime is found through a process-wide context: ``_Process.runtime`` against a
   runtime reference carried by every proxy (which would have to be dropped and found again
   at every unpickling) - the figure is the lookup's cost per send.
Each figure: the median of 7 timeit runs, nanoseconds per operation.

Usage: python benchmarks/runtime_envelopes.py
"""

import pickle
import statistics
import timeit
from typing import NamedTuple

from shoal.runtime.context import _Process

FIELDS = (0, 1 << 20, (17,), "update", (3.5, "x"), None, (1 << 20, (4,)), 41, 0, None, 1, 0)


class EnvTuple(NamedTuple):
    kind: int
    cid: int
    index: tuple
    method: str
    args: tuple
    kwargs: object
    src: tuple
    seq: int
    prio: int
    fut: object
    sender: int
    hops: int


class EnvSlots:
    __slots__ = EnvTuple._fields

    def __init__(self, *values):
        for name, v in zip(self.__slots__, values, strict=True):
            setattr(self, name, v)

    def __reduce__(self):
        return (EnvSlots, tuple(getattr(self, n) for n in self.__slots__))


def ns(stmt, number=200_000, **names) -> float:
    runs = timeit.repeat(stmt, globals=names, number=number, repeat=7)
    return statistics.median(runs) / number * 1e9


def envelopes() -> None:
    print("1. envelope of an entry-method call (ns per operation)")
    print(f"{'':14}{'pickle round trip':>20}{'read 5 fields':>16}")
    for label, env in (("tuple", FIELDS), ("NamedTuple", EnvTuple(*FIELDS)),
                       ("__slots__", EnvSlots(*FIELDS))):
        rt = ns("loads(dumps(env, 5))", 100_000, env=env, loads=pickle.loads,
                dumps=pickle.dumps)
        if label == "__slots__":
            read = ns("env.args; env.src; env.seq; env.prio; env.fut", env=env)
        else:
            read = ns("env[4]; env[6]; env[7]; env[8]; env[9]", env=env)
        print(f"{label:14}{rt:20.0f}{read:16.0f}")


class _Rt:
    def invoke(self, cid, index, name, args, kwargs, prio, fut):
        pass


class Generated:
    __slots__ = ("cid", "index")

    def __init__(self):
        self.cid, self.index = 1, (2,)

    def update(self, *args, **kwargs):
        rt = _Process.runtime
        rt.invoke(self.cid, self.index, "update", args, None, 0, None)


class Generic:
    __slots__ = ("cid", "index")

    def __init__(self):
        self.cid, self.index = 1, (2,)

    def __getattr__(self, name):
        def send(*args, **kwargs):
            _Process.runtime.invoke(self.cid, self.index, name, args, None, 0, None)
        return send


def proxies() -> None:
    _Process.runtime = _Rt()
    try:
        gen = ns("p.update(1.0)", p=Generated())
        dyn = ns("p.update(1.0)", p=Generic())
        print("2. proxy.method(x) up to the runtime's send (ns per call)")
        print(f"   generated method {gen:.0f}, generic __getattr__ {dyn:.0f} "
              f"({dyn / gen:.1f}x)")
        ctx = ns("P.runtime", P=_Process)
        print(f"3. finding the runtime from a proxy: {ctx:.0f} ns per send")
    finally:
        _Process.runtime = None


if __name__ == "__main__":
    envelopes()
    proxies()
