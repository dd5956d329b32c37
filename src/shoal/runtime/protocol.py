"""The envelopes PEs exchange and the spanning trees they travel along.

An envelope is a tuple whose first field is its kind. Kinds below ``COUNTED`` are
application work: quiescence detection counts them when created and when processed; location
updates and the detection's own messages are not counted.
"""

(INVOKE, BCAST_REQ, BCAST, FUT, CREATE, INSERT, CREATE_ONE, MIGRATE, SIZE, RED, EXIT_REQ,
 QD_START, RET, LOC, HOME, DELETED, QD_ASK, QD_REPLY, EXIT) = range(19)
COUNTED = LOC
ARITY = 4  # of the spanning trees over PEs
CHANNEL = "_shoal_channel"  # the Chare methods that carry channel data and deletions
DELETE = "_shoal_delete"


def children(pe: int, root: int, npes: int) -> list[int]:
    """The children of ``pe`` in the ``ARITY``-ary tree over all PEs rooted at ``root``."""
    rel = (pe - root) % npes
    return [(k + root) % npes for k in range(rel * ARITY + 1, min(rel * ARITY + ARITY + 1, npes))]


def parent(pe: int, root: int, npes: int) -> int:
    """The parent of ``pe`` (not the root) in the same tree."""
    return ((((pe - root) % npes) - 1) // ARITY + root) % npes
