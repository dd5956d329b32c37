"""Message kinds: each registered once, with exactly one handler, and the right ones counted
for quiescence (no MPI: the handler table is built on a runtime without a transport)."""

import inspect

import pytest

from shoal._compiled import core
from shoal.options import Options
from shoal.runtime import protocol
from shoal.runtime.pe import Runtime
from shoal.runtime.protocol import KINDS, Kind, handler_table

# compiled (mypyc), Runtime cannot be made without its __init__, and its methods are not
# Python functions for inspect
needs_pure = pytest.mark.skipif(core() == "compiled", reason="a bare Runtime needs the pure core")


def bare_runtime() -> Runtime:
    rt = Runtime.__new__(Runtime)  # no MPI: only the managers and the handler table
    rt._attach_managers(Options())
    return rt


def handler_owners(rt: Runtime) -> dict[str, object]:
    """The core, its managers and their parts that handle messages, by handler prefix."""
    return {"core": rt, **{name: getattr(rt, name) for name in
                             ("location", "migration", "broadcasts", "reductions",
                              "sections", "quiescence", "pool", "balancer",
                              "checkpoints", "aggregation", "power")},
              "balancer.grapevine": rt.balancer.grapevine}


def handler_methods(rt: Runtime) -> set[str]:
    """Every ``on_*`` method of the core, its managers and their parts, as
    ``owner.method``."""
    owners = handler_owners(rt)
    return {f"{owner}.{name}" for owner, obj in owners.items()
            for name, _ in inspect.getmembers(type(obj), inspect.isfunction)
            if name.startswith("on_")}


@needs_pure
def test_every_kind_has_exactly_one_handler_and_every_handler_a_kind():
    rt = bare_runtime()
    assert len(rt.handlers) == len(KINDS)
    registered = [k.handler for k in KINDS]
    assert len(set(registered)) == len(registered)
    assert set(registered) == handler_methods(rt)  # no handler left without its kind
    owners = handler_owners(rt)
    for code, kind in enumerate(KINDS):
        assert getattr(protocol, kind.name) == code
        owner_name, _, method = kind.handler.rpartition(".")
        owner = owners[owner_name]
        assert rt.handlers[code] == getattr(owner, method)


def test_only_the_runtimes_own_bookkeeping_is_left_out_of_quiescence_counts():
    uncounted = {k.name for k in KINDS if not k.counted}
    assert uncounted == {"LOC", "HOME", "QD_ASK", "QD_REPLY", "EXIT",
                         "CKPT_WRITE", "CKPT_DONE", "CKPT_COPY", "CKPT_COMMIT", "AGG_LOC",
                         "POWER"}  # (an emulated temperature reading to PE 0)
    assert protocol.COUNTED == tuple(k.counted for k in KINDS)


@needs_pure
def test_a_kind_without_its_handler_or_a_handler_registered_twice_fails_at_start_up(
        monkeypatch):
    rt = bare_runtime()
    monkeypatch.setattr(protocol, "KINDS", [*KINDS, Kind("NOPE", True, "location.on_nope")])
    with pytest.raises(AttributeError, match="on_nope"):
        handler_table(rt)
    monkeypatch.setattr(protocol, "KINDS", [*KINDS, Kind("TWICE", True, KINDS[0].handler)])
    with pytest.raises(RuntimeError, match="registered for another kind"):
        handler_table(rt)


def test_invoke_fields_are_numbered_after_the_kind():
    names = ["I_CID", "I_INDEX", "I_METHOD", "I_ARGS", "I_KWARGS", "I_SRC", "I_SEQ", "I_PRIO",
             "I_FUT", "I_SENDER", "I_HOPS"]
    assert [getattr(protocol, n) for n in names] == list(range(1, 12))
