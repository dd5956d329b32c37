"""The runtime's settings (shoal.options): each defined once, built in one place from
keywords and the environment, checked with a message that names the setting; shoal run's
flags travel as the same variables the ranks read."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.options import SETTINGS, Options, environment


def test_a_keyword_wins_over_its_variable_and_the_variables_fill_the_rest():
    env = {"SHOAL_LB": "refine", "SHOAL_LB_PERIOD": "0.5", "SHOAL_TRACE": "/x/t.json",
           "SHOAL_LB_AUTO": "1", "SHOAL_FT": "0"}
    opts = Options.build({"lb": "greedy", "poll_max": 0.002}, env)
    assert opts.balancing.lb == "greedy" and opts.balancing.lb_period == 0.5
    assert opts.balancing.lb_auto and not opts.checkpoint.ft
    assert opts.tracing.trace == "/x/t.json" and opts.transport.poll_max == 0.002
    assert Options.build({}, {}) == Options()  # nothing given: the defaults


def test_automatic_checkpoints_go_to_the_job_directory_unless_told_otherwise():
    opts = Options.build({"checkpoint_every": 2}, {}, auto_dir="/j/auto")
    assert opts.checkpoint.checkpoint_dir == "/j/auto"
    opts = Options.build({"checkpoint_every": 2, "checkpoint_dir": "/c"}, {},
                         auto_dir="/j/auto")
    assert opts.checkpoint.checkpoint_dir == "/c"


@pytest.mark.parametrize(("given", "env", "says"), [
    ({"lb_perod": 1}, {}, "unknown setting(s) lb_perod"),
    ({"lb_period": 0}, {}, "lb_period must be a number of seconds > 0"),
    ({"poll_spin": -1}, {}, "poll_spin must be a number of seconds >= 0"),
    ({"poll_max": 0}, {}, "poll_max must be a number of seconds > 0"),
    ({"shm_bytes": 1.5}, {}, "shm_bytes must be a whole number of bytes"),
    ({"trace": 3}, {}, "trace must be text"),
    ({}, {"SHOAL_LB_PERIOD": "soon"}, "SHOAL_LB_PERIOD must be a number of seconds"),
    ({}, {"SHOAL_LB_PERIOD": "-2"}, "SHOAL_LB_PERIOD must be a number of seconds > 0"),
    ({}, {"SHOAL_FT": "yes"}, "SHOAL_FT must be 1 or 0"),
])
def test_a_wrong_value_names_the_setting_or_variable_it_came_from(given, env, says):
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Options.build(given, env)


@given(period=st.floats(1e-3, 1e4), every=st.floats(1e-3, 1e4), auto=st.booleans(),
       lb=st.sampled_from(["greedy", "refine,greedy", "auto", "none"]))
def test_what_shoal_run_writes_the_ranks_read_back(period, every, auto, lb):
    env = environment(lb=lb, lb_period=period, lb_auto=auto, checkpoint_every=every,
                      checkpoint_dir="/ckpt", trace=None)
    assert set(env) <= {s.env for s in SETTINGS}
    opts = Options.build({}, env)
    assert (opts.balancing.lb, opts.balancing.lb_period, opts.balancing.lb_auto) == (
        lb, period, auto)
    assert opts.checkpoint.checkpoint_every == every
    assert opts.checkpoint.checkpoint_dir == "/ckpt" and opts.tracing.trace is None


def test_every_setting_has_one_name_and_one_variable():
    names = [s.name for s in SETTINGS]
    variables = [s.env for s in SETTINGS if s.env]
    assert len(names) == len(set(names)) and len(variables) == len(set(variables))
    assert all(v.startswith("SHOAL_") for v in variables)


def test_every_setting_is_a_field_of_its_section_and_every_field_a_setting():
    from dataclasses import fields

    from shoal.options import SECTIONS

    for section, kind in SECTIONS.items():
        assert {f.name for f in fields(kind)} == {
            s.name for s in SETTINGS if s.section == section}, section
