"""The built-in reducers on Python sequences, against a position-by-position reference,
combined in any order (as the runtime does: per PE, then up a tree, in arrival order)."""

import array
import math
import operator
import pickle
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal import Reducer, UsageError
from shoal.runtime.failure import Failure, RemoteError, RemoteTraceback, gathered
from shoal.runtime.reducers import checked

OPS = {"sum": sum, "product": math.prod, "max": max, "min": min,
       "logical_and": all, "logical_or": any,
       "logical_xor": lambda vs: sum(map(bool, vs)) % 2 == 1}

Point = namedtuple("Point", "x y")


def reference(name, values):
    """Reduce ``values`` position by position, recursing into sequences (a single
    contribution is the result as it is: nothing is combined)."""
    first = values[0]
    if len(values) == 1:
        return first
    if isinstance(first, (list, tuple, array.array)):
        parts = [reference(name, [v[k] for v in values]) for k in range(len(first))]
        if isinstance(first, array.array):
            return array.array(first.typecode, parts)
        if hasattr(first, "_fields"):
            return type(first)(*parts)
        return type(first)(parts)
    return OPS[name](values)


def shapes():
    """A shape: ("n",) a number, or (container, [shapes of the items])."""
    leaf = st.just(("n",))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(st.sampled_from(["list", "tuple"]), st.lists(inner, min_size=0,
                                                               max_size=4)),
        st.tuples(st.just("point"), st.tuples(inner, inner)),
        st.tuples(st.sampled_from(["array_q", "array_d"]), st.lists(leaf, max_size=4))),
        max_leaves=10)


def values_of(shape):
    """A strategy of values of ``shape`` (small ints, so that products stay exact)."""
    kind = shape[0]
    if kind == "n":
        return st.integers(-3, 3)
    if kind == "array_q":
        return st.lists(st.integers(-3, 3), min_size=len(shape[1]),
                        max_size=len(shape[1])).map(lambda v: array.array("q", v))
    if kind == "array_d":
        return st.lists(st.integers(-3, 3).map(float), min_size=len(shape[1]),
                        max_size=len(shape[1])).map(lambda v: array.array("d", v))
    items = st.tuples(*(values_of(s) for s in shape[1]))
    if kind == "point":
        return items.map(lambda v: Point(*v))
    return items.map(list if kind == "list" else tuple)


def combine_in_order(reducer, values, order):
    """Combine like the runtime: repeatedly two partial results, chosen by ``order``."""
    parts = list(values)
    for k in order:
        if len(parts) == 1:
            break
        a = parts.pop(k % len(parts))
        b = parts.pop(k % len(parts))
        parts.append(reducer.combine(a, b))
    while len(parts) > 1:
        parts.append(reducer.combine(parts.pop(0), parts.pop(0)))
    return parts[0]


@given(st.data(), shapes(), st.sampled_from(sorted(OPS)), st.integers(1, 7),
       st.lists(st.integers(0, 50), max_size=8))
def test_builtin_reducers_are_element_wise_on_sequences_in_any_order(data, shape, name, n,
                                                                      order):
    values = [data.draw(values_of(shape)) for _ in range(n)]
    got = combine_in_order(getattr(Reducer, name), values, order)
    want = reference(name, values)
    assert got == want
    assert type(got) is type(want)


@given(st.lists(st.integers(-5, 5), min_size=1, max_size=5), st.integers(1, 4))
def test_sequences_of_numpy_arrays_reduce_like_numpy(lengths, n):
    vals = [[np.full(3, i + k) for k in range(len(lengths))] for i in range(n)]
    got = combine_in_order(Reducer.sum, vals, [])
    assert all(np.array_equal(g, sum(v[k] for v in vals)) for k, g in enumerate(got))


@pytest.mark.parametrize(("a", "b", "said"), [
    ([1, 2], [1, 2, 3], "lengths 2 and 3"),
    ((1, (2, 3)), (1, (2,)), "lengths 2 and 1"),
    ([1, 2], 5, "combines a sequence with a int"),
    (array.array("b", [100]), array.array("b", [100]), "does not fit the type code"),
])
def test_sequences_that_do_not_combine_element_wise_are_errors(a, b, said):
    with pytest.raises(UsageError, match=said):
        Reducer.sum.combine(a, b)


def test_barrier_and_xor():
    assert checked(None, None) is Reducer.nop and checked(Reducer.nop, None) is Reducer.nop
    assert Reducer.nop.combine(None, None) is None
    with pytest.raises(UsageError, match=r"a barrier .* carries no value"):
        checked(None, 3)
    assert [Reducer.logical_xor.combine(a, b) for a, b in ((0, 0), (0, 1), (2, 0), (1, 1))] \
        == [False, True, True, False]
    assert np.array_equal(Reducer.logical_xor.combine(np.array([1, 0]), np.array([1, 1])),
                          [False, True])
    assert pickle.loads(pickle.dumps(Reducer.logical_xor)) is Reducer.logical_xor


def test_user_reducers_must_travel_to_other_pes():
    assert checked(operator.add, 1) is operator.add  # a module's function: sent by name
    with pytest.raises(UsageError, match="<lambda> cannot be sent to other PEs"):
        checked(lambda a, b: a + b, 1)

    def local(a, b):
        return a

    with pytest.raises(UsageError, match="define it with def at the top level"):
        checked(local, 1)


class _UnpicklableError(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}-{b}")


def test_failures_travel_and_raise_with_the_remote_traceback():
    try:
        {}["key"]
    except KeyError as exc:
        f = Failure.of(exc, "PE 3, Cell[2].step")
    back = pickle.loads(pickle.dumps(f))
    assert f.retrieved and not back.retrieved  # the copy that arrives must be awaited
    err = back.exception()
    assert back.retrieved and type(err) is KeyError
    assert isinstance(err.__cause__, RemoteTraceback)
    assert str(err.__cause__).startswith("PE 3, Cell[2].step raised:\nTraceback")
    assert '{}["key"]' in str(err.__cause__)
    odd = Failure.of(_UnpicklableError(1, 2), "PE 0, main")
    odd.retrieved = True
    assert type(odd.error) is RemoteError and str(odd.error) == "_UnpicklableError: 1-2"


def test_a_gather_raises_the_lowest_failing_index_and_names_the_others():
    fails = {(k,): Failure(ValueError(f"v{k}"), f"PE 0, C[{k}].m", f"tb {k}\n")
             for k in (5, 2, 9)}
    values = {(0,): 1, (1,): 2, **fails}
    g = gathered(values)
    assert all(f.retrieved for f in fails.values())
    assert str(g.error) == "v2" and g.where == "PE 0, C[2].m"
    assert g.text.endswith("(2 other element(s) of the broadcast raised too: [5], [9])\n")
    g.retrieved = True
    assert gathered({(0,): 1}) is None
