"""Aggregated items (shoal.Aggregator) on 2 and 4 PEs, over 1-D and 2-D meshes
(jobs/aggregation.py): exactly once against the multiset sent, minimal routes, migration,
quiescence with items buffered (charm#1658), the flush timer, and refused input."""

import pytest
from mpi_jobs import run_ok

ALL = ("exactly_once_dtype", "exactly_once_pickled", "migration", "quiescence_waits",
       "timer_flush")


@pytest.mark.parametrize(("ranks", "mesh"), [(2, None), (4, None), (4, "2,2")])
def test_every_item_runs_exactly_once_at_its_element(ranks, mesh):
    figures = run_ok("aggregation", ranks, *ALL,
                     options=() if mesh is None else ("--mesh", mesh))
    dtype = figures["exactly_once_dtype"]
    assert dtype["items"] == 8 * ranks * 300  # every element sends 300
    assert dtype["mesh"] == ([2, 2] if mesh else [ranks])
    if mesh:  # a quarter of the items go to the diagonal PE, through a peer
        assert dtype["entered"] > dtype["items"]
    else:
        assert dtype["entered"] == dtype["items"]
    assert dtype["messages"] < dtype["items"] / 10  # aggregated: many items per message
    assert figures["migration"]["forwarded_first"] == 4 * ranks * 100
    assert figures["migration"]["items"] == 6 * 4 * ranks * 100
    assert figures["quiescence_waits"]["items"] == 4 * ranks * 50
    assert figures["timer_flush"]["items"] == 4 * ranks * 50


def test_mistakes_are_usage_errors_that_say_what_to_change():
    msgs = run_ok("aggregation", 2, "bad_input")["bad_input"]
    assert "no entry method 'tkae'" in msgs["method"]
    assert "async" in msgs["async"]
    assert "not a numpy dtype" in msgs["dtype"]
    assert "without objects" in msgs["object_dtype"]
    assert "product is 2" in msgs["mesh"]
    assert "array or group proxy" in msgs["proxy"]
    assert "buffer_items" in msgs["buffer"]
    assert "flush_period" in msgs["period"]
    assert "3 fields" in msgs["fields"]
    assert "outside the shape" in msgs["index"]
    assert "integer" in msgs["index_type"]
    assert "'one'" in msgs["value"] and "Sink[2].take" in msgs["value"]
    assert "cannot be pickled" in msgs["pickle"] and "Sink[3].take" in msgs["pickle"]
