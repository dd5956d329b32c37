"""The gossip message: a small versioned header followed by the window's raw entries.

Header (20 bytes, little-endian): magic ``SHGP``, format version (1), reserved byte, header
length, sender, entry count, record size. Then ``count`` entries of
:func:`shoal.gossip.records.wire_dtype`. :func:`decode` checks everything a datagram from an
untrusted peer can get wrong and raises :class:`shoal.WireError`; the service counts and drops
such messages.
"""

from __future__ import annotations

import struct

import numpy as np

from shoal.errors import WireError
from shoal.gossip.records import wire_dtype

MAGIC = b"SHGP"
VERSION = 1
HEADER = struct.Struct("<4sBBHIII")


def message_size(count: int, state: np.dtype) -> int:
    """Bytes of a message that carries ``count`` entries."""
    return HEADER.size + count * wire_dtype(state).itemsize


def encode(sender: int, nodes: np.ndarray, ages: np.ndarray, records: np.ndarray,
           out: bytearray | None = None) -> memoryview:
    """Pack a window into ``out`` (allocated if None) and return a view of the used bytes."""
    state = records.dtype
    count = len(nodes)
    size = message_size(count, state)
    if out is None or len(out) < size:
        out = bytearray(size)
    HEADER.pack_into(out, 0, MAGIC, VERSION, 0, HEADER.size, sender, count, state.itemsize)
    body = np.frombuffer(out, wire_dtype(state), count, HEADER.size)
    body["node"] = nodes
    body["flags"] = 0
    body["age"] = ages
    body["state"] = records
    return memoryview(out)[:size]


def decode(buf, nodes: int, state: np.dtype) -> tuple[int, np.ndarray]:
    """Validate a message of a cluster of ``nodes`` and return (sender, entries). The entries
    are a view into ``buf``; copy what you keep."""
    view = memoryview(buf)
    sender, count = _check_header(view, nodes, state)
    entries = np.frombuffer(view, wire_dtype(state), count, HEADER.size)
    _check_entries(entries, nodes)
    return sender, entries


def _check_header(view: memoryview, nodes: int, state: np.dtype) -> tuple[int, int]:
    """The header's sender and entry count, once the header and the message's length agree
    with this build and a cluster of ``nodes``."""
    if len(view) < HEADER.size:
        raise WireError(f"message of {len(view)} B is shorter than the {HEADER.size} B header")
    magic, version, _, hlen, sender, count, esize = HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}: not a shoal gossip message")
    if version != VERSION or hlen != HEADER.size:
        raise WireError(f"unsupported format version {version} (header {hlen} B): "
                        f"this build reads version {VERSION}")
    if esize != state.itemsize:
        raise WireError(f"record size {esize} B differs from ours ({state.itemsize} B): "
                        "all ranks must use the same --entry-size")
    if sender >= nodes or count > nodes:
        raise WireError(f"sender {sender} or entry count {count} out of range for "
                        f"{nodes} nodes")
    expect = message_size(count, state)
    if len(view) != expect:
        raise WireError(f"message is {len(view)} B, its header announces {expect} B")
    return sender, count


def _check_entries(entries: np.ndarray, nodes: int) -> None:
    """Refuse entries for unknown or repeated nodes, ages in the future and unknown flags."""
    count = len(entries)
    idx = entries["node"]
    if count and int(idx.max()) >= nodes:
        raise WireError(f"entry for node {int(idx.max())} in a cluster of {nodes}")
    if len(np.unique(idx)) != count:
        raise WireError("the same node appears twice in one window")
    ages = entries["age"]
    if not (np.isfinite(ages).all() and (ages >= 0).all()):
        raise WireError("an entry's age is negative or not finite (a time in the future)")
    if (entries["flags"] != 0).any():
        raise WireError("unknown entry flags")
