"""The envelopes PEs exchange: their kinds, who handles each, and the spanning trees they
travel along.

An envelope is a tuple whose first field is its kind. Every kind is registered here, once,
with the method that handles it (``"manager.method"``: an attribute of the PE core, or
``"core.method"`` for the core itself; ``"manager.part.method"`` for a part of a manager)
and whether quiescence detection counts it.
Application work is counted when created and when processed; location updates and the
detection's own waves are not, or quiescence could never be reached.

The fields of the hot ``INVOKE`` envelope are read through the ``I_*`` constants, those of
a ``BCAST`` that waits in a queue through ``B_*``; otherwise envelopes are unpacked by name
at the top of their handler.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Kind(NamedTuple):
    """A registered message kind."""

    name: str
    counted: bool
    handler: str  # "manager.method" of the PE core that runs on arrival


KINDS: list[Kind] = []


def _kind(name: str, handler: str, *, counted: bool) -> int:
    KINDS.append(Kind(name, counted, handler))
    return len(KINDS) - 1


# application work (counted for quiescence)
INVOKE: Final = _kind("INVOKE", "core.on_invoke", counted=True)
FUT: Final = _kind("FUT", "core.on_fut", counted=True)
EXIT_REQ: Final = _kind("EXIT_REQ", "core.on_exit_req", counted=True)
CREATE: Final = _kind("CREATE", "location.on_create", counted=True)
INSERT: Final = _kind("INSERT", "location.on_insert", counted=True)
CREATE_ONE: Final = _kind("CREATE_ONE", "location.on_create_one", counted=True)
SIZE: Final = _kind("SIZE", "location.on_size", counted=True)
OUTSIDE: Final = _kind("OUTSIDE", "location.on_outside", counted=True)
DESTROY: Final = _kind("DESTROY", "location.on_destroy", counted=True)
DESTROY_ACK: Final = _kind("DESTROY_ACK", "location.on_destroy_ack", counted=True)
MIGRATE: Final = _kind("MIGRATE", "migration.on_migrate", counted=True)
BCAST_REQ: Final = _kind("BCAST_REQ", "broadcasts.on_bcast_req", counted=True)
BCAST: Final = _kind("BCAST", "broadcasts.on_bcast", counted=True)
RET: Final = _kind("RET", "broadcasts.on_ret", counted=True)
BCAST_FETCH: Final = _kind("BCAST_FETCH", "broadcasts.on_fetch", counted=True)
RED: Final = _kind("RED", "reductions.on_red", counted=True)
SEC_NEW: Final = _kind("SEC_NEW", "sections.on_new", counted=True)
SEC_REQ: Final = _kind("SEC_REQ", "sections.on_req", counted=True)
SEC_MCAST: Final = _kind("SEC_MCAST", "sections.on_mcast", counted=True)
SEC_RET: Final = _kind("SEC_RET", "sections.on_ret", counted=True)
SEC_RED: Final = _kind("SEC_RED", "sections.on_red", counted=True)
POOL_SUBMIT: Final = _kind("POOL_SUBMIT", "pool.on_submit", counted=True)
POOL_TASK: Final = _kind("POOL_TASK", "pool.on_task", counted=True)
POOL_ASK: Final = _kind("POOL_ASK", "pool.on_ask", counted=True)
QD_START: Final = _kind("QD_START", "quiescence.on_start", counted=True)
LB_COLLECT: Final = _kind("LB_COLLECT", "balancer.on_collect", counted=True)
LB_STATS: Final = _kind("LB_STATS", "balancer.on_stats", counted=True)
LB_MOVES: Final = _kind("LB_MOVES", "balancer.on_moves", counted=True)
LB_SENT: Final = _kind("LB_SENT", "balancer.on_sent", counted=True)
LB_EXPECT: Final = _kind("LB_EXPECT", "balancer.on_expect", counted=True)
LB_READY: Final = _kind("LB_READY", "balancer.on_ready", counted=True)
# lb="distributed" (lb/grapevine.py): tree reductions and broadcasts, gossip, transfers
LB_GV_UP: Final = _kind("LB_GV_UP", "balancer.grapevine.on_up", counted=True)
LB_GV_DOWN: Final = _kind("LB_GV_DOWN", "balancer.grapevine.on_down", counted=True)
LB_GV_GOSSIP: Final = _kind("LB_GV_GOSSIP", "balancer.grapevine.on_gossip", counted=True)
LB_GV_ACK: Final = _kind("LB_GV_ACK", "balancer.grapevine.on_ack", counted=True)
LB_GV_OFFER: Final = _kind("LB_GV_OFFER", "balancer.grapevine.on_offer", counted=True)
LB_GV_REPLY: Final = _kind("LB_GV_REPLY", "balancer.grapevine.on_reply", counted=True)
# aggregated items (aggregation.py): chunks of items toward their PEs
AGG: Final = _kind("AGG", "aggregation.on_items", counted=True)
# the runtime's own bookkeeping (not counted)
LOC: Final = _kind("LOC", "location.on_loc", counted=False)
HOME: Final = _kind("HOME", "location.on_home", counted=False)
# (among the bookkeeping kinds, but counted: after a quiescence the home knows of every
# deletion, so that an insertion at the same index cannot overtake it)
DELETED: Final = _kind("DELETED", "location.on_deleted", counted=True)
QD_ASK: Final = _kind("QD_ASK", "quiescence.on_ask", counted=False)
QD_REPLY: Final = _kind("QD_REPLY", "quiescence.on_reply", counted=False)
EXIT: Final = _kind("EXIT", "core.on_exit", counted=False)
CKPT_WRITE: Final = _kind("CKPT_WRITE", "checkpoints.on_write", counted=False)
CKPT_DONE: Final = _kind("CKPT_DONE", "checkpoints.on_done", counted=False)
CKPT_COPY: Final = _kind("CKPT_COPY", "checkpoints.on_copy", counted=False)
CKPT_COMMIT: Final = _kind("CKPT_COMMIT", "checkpoints.on_commit", counted=False)
AGG_LOC: Final = _kind("AGG_LOC", "aggregation.on_loc", counted=False)
POWER: Final = _kind("POWER", "power.on_report", counted=False)  # an emulated reading
# the common INVOKE, shorter (last: the numbers of the kinds before it, which checkpoints
# keep in the envelopes queued for an element, stay as they were)
CALL: Final = _kind("CALL", "core.on_call", counted=True)

COUNTED: Final[tuple[bool, ...]] = tuple(k.counted for k in KINDS)

# INVOKE: (INVOKE, cid, index, method, args, kwargs, src, seq, prio, fut, sender, hops)
# ``src`` is the sending element's key (or the sending PE's), ``seq`` its sequence number
# for this receiver, ``fut`` where the return value goes (or None), ``sender`` the PE that
# sent it and ``hops`` how many times it was forwarded.
# (Final, one per line: the compiled core reads each as a constant, not as a global looked
# up in the module's dict, about 140 instructions a read: 14 reads per received message)
I_CID: Final = 1
I_INDEX: Final = 2
I_METHOD: Final = 3
I_ARGS: Final = 4
I_KWARGS: Final = 5
I_SRC: Final = 6
I_SEQ: Final = 7
I_PRIO: Final = 8
I_FUT: Final = 9
I_SENDER: Final = 10
I_HOPS: Final = 11

# CALL: (CALL, cid, index, method, args, src, seq, sender), an INVOKE between PEs without
# keywords, priority or future that was not forwarded (kwargs None, prio 0, fut None, hops
# 0): 4 fields fewer to encode and decode. The receiver makes it the INVOKE it stands for.

# BCAST: (BCAST, cid, num, method, args, kwargs, prio, ret): broadcast number ``num`` of
# the collection, ``ret`` what the root gathers: 0 nothing, RET_VALUES the return values
# (``ret=True``), RET_DONE that each element ran it (``awaitable=True``), RET_LIST the
# return values with the exceptions of those that raised in their places (``ret=True,
# return_exceptions=True``)
B_NUM: Final = 2
B_PRIO: Final = 6
RET_VALUES: Final = 1
RET_DONE: Final = 2
RET_LIST: Final = 3
KEEP = (RET_VALUES, RET_LIST)  # the gathers that keep the return values

ARITY: Final = 4  # of the spanning trees over PEs
CHANNEL = "_shoal_channel"  # the Chare methods that carry channel data, deletions and
DELETE = "_shoal_delete"  # broadcasts replayed to an element that migrated
REPLAY = "_shoal_replay"


def handler_table(owner: object) -> tuple:
    """The bound handler of every kind, indexed by kind, looked up on ``owner`` (the PE
    core: ``core.m`` is ``owner.m``, ``manager.m`` is ``owner.manager.m``,
    ``manager.part.m`` is ``owner.manager.part.m``). A kind whose
    handler is missing, or a handler registered twice, is an error here, at start-up."""
    seen: set[str] = set()
    table = []
    for kind in KINDS:
        if kind.handler in seen:
            raise RuntimeError(f"message kind {kind.name}: handler {kind.handler} is "
                               "registered for another kind too")
        seen.add(kind.handler)
        *path, method = kind.handler.split(".")
        holder = owner
        for name in path if path != ["core"] else []:
            holder = getattr(holder, name)
        table.append(getattr(holder, method))
    return tuple(table)


def children(pe: int, root: int, npes: int) -> list[int]:
    """The children of ``pe`` in the ``ARITY``-ary tree over all PEs rooted at ``root``."""
    rel = (pe - root) % npes
    return [(k + root) % npes for k in range(rel * ARITY + 1, min(rel * ARITY + ARITY + 1, npes))]


def parent(pe: int, root: int, npes: int) -> int:
    """The parent of ``pe`` (not the root) in the same tree."""
    return ((((pe - root) % npes) - 1) // ARITY + root) % npes
