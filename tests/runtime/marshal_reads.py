"""The envelopes of tests/runtime/test_direct.py and its property on any bytes, which runs
in a process of its own with its address space capped (``python marshal_reads.py``).

marshal allocates a list, tuple or int of the size a header declares before it reads the
first element: garbage whose first five bytes read ``[`` and 2**31 - 1 made marshal, and
the C reader's fallback to it, allocate and walk 16 GB, and a test worker grew past 16 GB
of the machine's 24 GB for minutes (hypothesis draws such bytes seldom, not never). Capped,
that allocation fails at once, in marshal and in the reader alike: MemoryError for both."""

import marshal
import math
import resource
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

CAP = 1 << 30  # bytes of address space: python, hypothesis and the reader need under 200 MB

scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
           | st.floats(allow_nan=True) | st.text() | st.binary())
# envelopes as transport._plain takes them: a tuple, and up to 3 levels of tuples below it
plain = st.tuples(st.lists(st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                                        .map(tuple), max_leaves=12), max_size=6)
                  ).map(lambda t: tuple(t[0]))


def depth(x):
    return 1 + max(map(depth, x), default=0) if type(x) is tuple else 0


def same(a, b):
    """Equal and of the same types all the way down (a NaN equal to itself)."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(map(same, a, b))
    return a == b or (type(a) is float and math.isnan(a) and math.isnan(b))


# (no deadline: a header declaring some 100 million entries is allocated, under the cap)
@settings(deadline=None)
@example(b"[\xff\xff\xff\x7f")  # a list, a tuple, an int of 2**31 - 1 entries, digits
@example(b"(\xff\xff\xff\x7f")
@example(b"l\xff\xff\xff\x7f")
@given(st.binary(max_size=40) | plain.map(lambda env: marshal.dumps(env, 2)[:-1]))
def reads_as_marshal(data):
    """Garbage and truncated envelopes: the same value, or the same exception, as marshal's."""
    from shoal.runtime.wire import _direct
    try:
        want = marshal.loads(data)
    except Exception as exc:
        try:
            got = _direct.loads(data)
        except Exception as mine:
            assert type(mine) is type(exc), (data, exc, mine)
        else:
            raise AssertionError(f"{data!r}: marshal raised {exc!r}, the reader gave {got!r}")
    else:
        assert same(_direct.loads(data), want), data


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
    reads_as_marshal()
    sys.exit(0)
