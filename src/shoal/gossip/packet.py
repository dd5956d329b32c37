"""The node daemon's packets: its record, how a window is cut into datagrams, and the one
place where bytes become entries and back (encryption, issue 28 item 2, wraps
:func:`encode_window` and :func:`decode_packet`).

A packet is a :mod:`shoal.gossip.wire` message of kind 1 (open membership): the 20-byte
versioned header, then entries of 16 bytes (node id, flags, age) plus a :data:`RECORD` of
260 bytes. A packet never exceeds :data:`MAX_PACKET` (1400 B, memberlist's choice: below an
Ethernet MTU of 1500 minus IP and UDP headers, so no datagram is fragmented), which is 5
entries; a window of more goes out in several packets to the same peer, youngest entries
first, each one a complete message.

A node's id is the first 4 bytes of the BLAKE2b hash of its name; its record carries the name,
so a receiver checks that they agree (a collision or a forged entry is refused). Everything a
peer can get wrong raises :class:`shoal.WireError`: the daemon counts and drops the packet.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
from typing import Any

import numpy as np

from shoal.errors import WireError
from shoal.gossip import wire
from shoal.gossip.records import wire_dtype

MAX_PACKET = 1400
NAME_BYTES, ADDR_BYTES, KEYS_BYTES = 64, 48, 112
RECORD = np.dtype([("version", "<u8"), ("load", "<f4"), ("load5", "<f4"), ("load15", "<f4"),
                   ("free_mem", "<u8"), ("cores", "<u2"), ("jobs", "<u2"), ("pes", "<u4"),
                   ("name", f"S{NAME_BYTES}"), ("addr", f"S{ADDR_BYTES}"),
                   ("keys", f"S{KEYS_BYTES}")])
ENTRY_BYTES = wire_dtype(RECORD).itemsize
PER_PACKET = (MAX_PACKET - wire.HEADER.size) // ENTRY_BYTES
Address = tuple[str, int]


def node_id(name: str) -> int:
    """The 32-bit wire id of the node called ``name``."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")


def encode_window(sender: int, ids: np.ndarray, ages: np.ndarray,
                  records: np.ndarray) -> list[bytes]:
    """The packets that carry a window: youngest entries first, at most
    :data:`PER_PACKET` entries (:data:`MAX_PACKET` bytes) each."""
    order = np.argsort(ages, kind="stable")
    packets = []
    for start in range(0, len(order), PER_PACKET):
        part = order[start:start + PER_PACKET]
        packets.append(bytes(wire.encode(sender, ids[part], ages[part], records[part],
                                         kind=wire.KIND_DAEMON)))
    return packets


def decode_packet(data: bytes) -> tuple[int, np.ndarray]:
    """Validate one datagram and return (sender id, entries, copied). Raises
    :class:`WireError` for anything a peer can get wrong."""
    if len(data) > MAX_PACKET:
        raise WireError(f"packet of {len(data)} B is larger than the {MAX_PACKET} B cap")
    sender, entries = wire.decode(data, None, RECORD, kind=wire.KIND_DAEMON)
    entries = entries.copy()
    for entry in entries:
        _check_record(int(entry["node"]), entry["state"])
    return sender, entries


def _check_record(ident: int, rec: np.void) -> None:
    """Refuse a record whose name does not hash to its id, or whose text fields are not what
    a daemon writes."""
    try:
        name = rec["name"].decode()
        addr = rec["addr"].decode()
        keys = json.loads(rec["keys"].decode() or "{}")
    except (UnicodeDecodeError, ValueError):
        raise WireError("a record's name, address or keys are not valid text") from None
    if not name or node_id(name) != ident:
        raise WireError(f"entry {ident:#x} carries a record of another node ({name!r})")
    if parse_ip_addr(addr) is None:
        raise WireError(f"a record's address {addr!r} is not ip:port")
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise WireError("a record's keys are not an object of strings")
    if not all(math.isfinite(float(rec[f])) for f in ("load", "load5", "load15")):
        raise WireError("a record's load is not finite")


def parse_ip_addr(text: str) -> Address | None:
    """``ip:port`` or ``[ipv6]:port`` as (ip, port); None unless it is exactly that."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        return None
    return (host, number) if sep and 0 < number < 65536 else None


def encode_keys(keys: dict[str, str]) -> bytes:
    """User keys as a record holds them: compact JSON, at most :data:`KEYS_BYTES` bytes."""
    return json.dumps(keys, separators=(",", ":"), sort_keys=True).encode()


def record_fields(rec: np.void) -> dict[str, Any]:
    """A record as plain values (for status, JSON and metrics)."""
    return {"name": rec["name"].decode(), "addr": rec["addr"].decode(),
            "version": int(rec["version"]),
            "load": [round(float(rec[f]), 3) for f in ("load", "load5", "load15")],
            "free_mem": int(rec["free_mem"]), "cores": int(rec["cores"]),
            "jobs": int(rec["jobs"]), "pes": int(rec["pes"]),
            "keys": json.loads(rec["keys"].decode() or "{}")}
