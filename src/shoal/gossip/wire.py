"""The gossip message: a small versioned header followed by the window's raw entries.

Header (20 bytes, little-endian): magic ``SHGP``, format version (1), kind, header length,
sender, entry count, record size. The kind says who speaks: 0 the MPI service (nodes are
ranks, below the communicator's size), 1 the node daemon (nodes are 32-bit ids of an open
membership, :mod:`shoal.gossip.packet`; 2 and 3 its probes and their answers, 4 its group
summaries); a message of another kind than expected is refused. Then
``count`` entries of :func:`shoal.gossip.records.wire_dtype`. :func:`decode` checks everything
a datagram from an untrusted peer can get wrong and raises :class:`shoal.WireError`; the
service counts and drops such messages.
"""

from __future__ import annotations

import struct

import numpy as np

from shoal.errors import WireError
from shoal.gossip.records import wire_dtype

MAGIC = b"SHGP"
VERSION = 1
KIND_SERVICE, KIND_DAEMON, KIND_PROBE, KIND_ALIVE = 0, 1, 2, 3  # (a probe asks a daemon
# for an answer at once, an "alive" is that answer: each carries its sender's own entry, and
# neither is merged into the vector: shoal.gossip.health)
KIND_SUMMARY = 4  # group summaries between the groups of hierarchical daemons (entries are
# groups, not nodes: shoal.gossip.packet.SUMMARY)
HEADER = struct.Struct("<4sBBHIII")


def message_size(count: int, state: np.dtype) -> int:
    """Bytes of a message that carries ``count`` entries."""
    return HEADER.size + count * wire_dtype(state).itemsize


def encode(sender: int, nodes: np.ndarray, ages: np.ndarray, records: np.ndarray,
           out: bytearray | None = None, kind: int = KIND_SERVICE,
           flags: int = 0) -> memoryview:
    """Pack a window into ``out`` (allocated if None) and return a view of the used bytes;
    ``flags`` go into each entry's header (the daemon's group id; 0 elsewhere)."""
    state = records.dtype
    count = len(nodes)
    size = message_size(count, state)
    if out is None or len(out) < size:
        out = bytearray(size)
    HEADER.pack_into(out, 0, MAGIC, VERSION, kind, HEADER.size, sender, count, state.itemsize)
    body = np.frombuffer(out, wire_dtype(state), count, HEADER.size)
    body["node"] = nodes
    body["flags"] = flags
    body["age"] = ages
    body["state"] = records
    return memoryview(out)[:size]


def decode(buf: bytes | bytearray | memoryview, nodes: int | None, state: np.dtype,
           kind: int | tuple[int, ...] = KIND_SERVICE) -> tuple[int, np.ndarray]:
    """Validate a message of a cluster of ``nodes`` (None: an open membership, any id) and
    of ``kind`` (or one of several: :func:`kind_of` then says which), and return (sender,
    entries). The entries are a view into ``buf``; copy what you keep."""
    view = memoryview(buf)
    sender, count = _check_header(view, nodes, state, kind)
    entries = np.frombuffer(view, wire_dtype(state), count, HEADER.size)
    _check_entries(entries, nodes)
    return sender, entries


def kind_of(buf: bytes | bytearray | memoryview) -> int:
    """The kind of a message :func:`decode` accepted."""
    return int(HEADER.unpack_from(buf, 0)[2])


def _check_header(view: memoryview, nodes: int | None, state: np.dtype,
                  kind: int | tuple[int, ...]) -> tuple[int, int]:
    """The header's sender and entry count, once the header and the message's length agree
    with this build and a cluster of ``nodes``."""
    if len(view) < HEADER.size:
        raise WireError(f"message of {len(view)} B is shorter than the {HEADER.size} B header")
    magic, version, got_kind, hlen, sender, count, esize = HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}: not a shoal gossip message")
    if version != VERSION or hlen != HEADER.size:
        raise WireError(f"unsupported format version {version} (header {hlen} B): "
                        f"this build reads version {VERSION}")
    if got_kind not in (kind if isinstance(kind, tuple) else (kind,)):
        raise WireError(f"message of kind {got_kind}, expected {kind} (a daemon's message "
                        "reached an MPI service, or the reverse)")
    if esize != state.itemsize:
        raise WireError(f"record size {esize} B differs from ours ({state.itemsize} B): "
                        "all ranks must use the same --entry-size")
    if nodes is not None and (sender >= nodes or count > nodes):
        raise WireError(f"sender {sender} or entry count {count} out of range for "
                        f"{nodes} nodes")
    expect = message_size(count, state)
    if len(view) != expect:
        raise WireError(f"message is {len(view)} B, its header announces {expect} B")
    return sender, count


def _check_entries(entries: np.ndarray, nodes: int | None) -> None:
    """Refuse entries for unknown or repeated nodes, ages in the future and flags where
    none are used (the MPI service: an open membership's flags are its daemons' group)."""
    count = len(entries)
    idx = entries["node"]
    if nodes is not None and count and int(idx.max()) >= nodes:
        raise WireError(f"entry for node {int(idx.max())} in a cluster of {nodes}")
    if len(np.unique(idx)) != count:
        raise WireError("the same node appears twice in one window")
    ages = entries["age"]
    if not (np.isfinite(ages).all() and (ages >= 0).all()):
        raise WireError("an entry's age is negative or not finite (a time in the future)")
    if nodes is not None and (entries["flags"] != 0).any():
        raise WireError("unknown entry flags")
