"""Guarded entry methods and awaited conditions: the compiled conditions (no MPI) and user
programs on 2 and 4 PEs (jobs/guards.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpi_jobs import run_job, run_ok

import shoal
from shoal.errors import UsageError
from shoal.runtime import guards
from shoal.runtime.guards import GuardError


class Box(shoal.Chare):
    def __init__(self):
        self.level = 3

    @shoal.when("a + b * c > self.level and tag != 'no'")
    def put(self, a, b=2, *rest, c=1, tag="yes", **extra):
        return (a, b, rest, c, tag, extra)


LIMIT = 10


class Uses(shoal.Chare):
    @shoal.when("n < LIMIT")
    def small(self, n):
        return n


@given(st.integers(-5, 5), st.integers(-5, 5), st.integers(-5, 5),
       st.sampled_from(["yes", "no"]), st.integers(-5, 8))
def test_a_condition_binds_the_arguments_as_the_method_does(a, b, c, tag, level):
    """Positional, default, keyword-only arguments and ``self``: the compiled condition
    agrees with the expression evaluated by hand on the bound arguments."""
    box = Box.__new__(Box)
    box.level = level
    guard = Box.put._shoal_guard
    for args, kwargs, (ea, eb, ec, etag) in [
            ((a,), {}, (a, 2, 1, "yes")),
            ((a, b), {"c": c}, (a, b, c, "yes")),
            ((a, b, 9, 9), {"c": c, "tag": tag, "z": 1}, (a, b, c, tag))]:
        want = ea + eb * ec > level and etag != "no"
        assert guard(box, *args, **kwargs) is want
        if want:
            assert Box.put(box, *args, **kwargs)[:2] == (ea, eb)
        else:
            with pytest.raises(GuardError, match="is false"):
                Box.put(box, *args, **kwargs)


def test_a_condition_sees_the_module_globals_and_is_compiled_once():
    u = Uses.__new__(Uses)
    assert Uses.small(u, 3) == 3
    with pytest.raises(GuardError):
        Uses.small(u, 12)
    first = guards._compile_wait(Uses, "self.x == 1")
    assert guards._compile_wait(Uses, "self.x == 1") is first


def test_a_condition_that_is_not_an_expression_is_refused_where_it_is_written():
    with pytest.raises(UsageError, match="is not a Python expression"):
        @shoal.when("self.iter ==")
        def f(self, iter):
            pass
    with pytest.raises(UsageError, match="as a string"):
        shoal.when(lambda self: True)


ALL = ["ordered", "arguments", "waits", "migrating", "returns", "direct", "with_reductions"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_guarded_methods_as_a_user_writes_them(ranks):
    figures = run_ok("guards", ranks, *ALL)
    assert figures["migrating"] == 8 * 3  # every held message ran once, after the move


def test_a_condition_that_never_holds_ends_the_job_instead_of_hanging():
    out = run_job("guards", 2, "never")
    assert out.returncode != 0
    assert "but no work is pending" in out.stderr, out.stderr[-2000:]
