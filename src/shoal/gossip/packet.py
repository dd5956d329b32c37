"""The node daemon's packets: its record, how a window is cut into datagrams, and the one
place where bytes become entries and back (encryption, issue 28 item 2, wraps
:func:`encode_window` and :func:`decode_packet`).

A packet is a :mod:`shoal.gossip.wire` message of kind 1 (open membership): the 20-byte
versioned header, then entries of 16 bytes (node id, flags, age) plus a :data:`RECORD` of
260 bytes. A packet never exceeds :data:`MAX_PACKET` (1400 B, memberlist's choice: below an
Ethernet MTU of 1500 minus IP and UDP headers, so no datagram is fragmented), which is 5
entries; a window of more goes out in several packets to the same peer, youngest entries
first, each one a complete message. Sealed (a key given, :mod:`shoal.gossip.secure`), a
message travels inside a 49-byte envelope, so a packet carries :data:`SEALED_PER_PACKET` = 4
entries and still never exceeds the cap.

A node's id is the first 4 bytes of the BLAKE2b hash of its name; its record carries the name,
so a receiver checks that they agree (a collision or a forged entry is refused). Grouped
daemons (hierarchical gossip) put the group's id, the same hash of the group's name, in each
entry's flags, and send group summaries (:data:`SUMMARY`, 120 bytes, 10 to a packet, 9
sealed) in messages of kind 4, whose entries are named by group id. Everything a
peer can get wrong raises :class:`shoal.WireError`: the daemon counts and drops the packet.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
from typing import Any, NamedTuple

import numpy as np

from shoal.errors import WireError
from shoal.gossip import secure, wire
from shoal.gossip.records import wire_dtype

MAX_PACKET = 1400
MAX_CORES = 65535  # a record's cores field is 16 bits
NAME_BYTES, ADDR_BYTES, KEYS_BYTES = 64, 48, 104
RECORD = np.dtype([("version", "<u8"), ("load", "<f4"), ("load5", "<f4"), ("load15", "<f4"),
                   ("busy", "<f4"), ("shoal", "<f4"), ("free_mem", "<u8"), ("cores", "<u2"),
                   ("jobs", "<u2"), ("pes", "<u4"),
                   ("name", f"S{NAME_BYTES}"), ("addr", f"S{ADDR_BYTES}"),
                   ("keys", f"S{KEYS_BYTES}")])
GROUP_BYTES = 32
SUMMARY = np.dtype([("nodes", "<u4"), ("cores", "<u4"), ("busy_min", "<f4"),
                    ("busy_mean", "<f4"), ("busy_max", "<f4"), ("free_mem", "<u8"),
                    ("free_min", "<u8"), ("oldest", "<f4"), ("contact", f"S{ADDR_BYTES}"),
                    ("group", f"S{GROUP_BYTES}")])  # what a group's live members hold
ENTRY_BYTES = wire_dtype(RECORD).itemsize


def per_packet(state: np.dtype, sealed: bool) -> int:
    """Entries of ``state`` one packet carries."""
    room = MAX_PACKET - wire.HEADER.size - (secure.OVERHEAD if sealed else 0)
    return room // wire_dtype(state).itemsize


PER_PACKET, SEALED_PER_PACKET = per_packet(RECORD, False), per_packet(RECORD, True)
Address = tuple[str, int]
KINDS = (wire.KIND_DAEMON, wire.KIND_PROBE, wire.KIND_ALIVE, wire.KIND_SUMMARY)  # a daemon's


class Decoded(NamedTuple):
    """A packet that passed every check: its sender, its entries (a copy), its sequence
    number (0 for an open packet) and its wire kind (a window, a probe or an answer to one)."""

    sender: int
    entries: np.ndarray
    seq: int
    kind: int = wire.KIND_DAEMON


def node_id(name: str) -> int:
    """The 32-bit wire id of the node called ``name``."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")


def group_of(group: str | None) -> int:
    """The id of group ``group`` (0: no groups, flat gossip)."""
    return 0 if group is None else node_id(group) or 1


def encode_window(sender: int, ids: np.ndarray, ages: np.ndarray, records: np.ndarray,
                  envelope: secure.Envelope | None = None, version: int = 0, first: int = 0,
                  kind: int = wire.KIND_DAEMON, group: int = 0) -> list[bytes]:
    """The packets that carry a window: youngest entries first, at most
    :data:`MAX_PACKET` bytes each. With an ``envelope`` each is sealed, the ``k``-th with the
    sequence number ``version << 20 | (first + k)`` (``version``: the sender's record version
    of this tick, which never repeats; ``first``: the packets it sent before under it).
    ``kind``: a window, a probe or the answer to one, or group summaries (``wire.KIND_*``,
    ``records`` of :data:`SUMMARY` then); ``group``: the group id of the entries."""
    order = np.argsort(ages, kind="stable")
    per = per_packet(records.dtype, envelope is not None)
    packets = []
    for k, start in enumerate(range(0, len(order), per), first):
        part = order[start:start + per]
        data = bytes(wire.encode(sender, ids[part], ages[part], records[part], kind=kind,
                                 flags=group))
        if envelope is not None:
            data = envelope.seal((version << secure.SEQ_SHIFT) | k, data)
        packets.append(data)
    return packets


def decode_packet(data: bytes, envelope: secure.Envelope | None = None) -> Decoded:
    """Validate one datagram (opened first with ``envelope``, which refuses an open one).
    Raises :class:`WireError` for anything a peer can get wrong, a subclass of it for a
    foreign, forged or unknown-key packet (:mod:`shoal.gossip.secure`)."""
    if len(data) > MAX_PACKET:
        raise WireError(f"packet of {len(data)} B is larger than the {MAX_PACKET} B cap")
    seq = 0
    if envelope is not None:
        seq, data = envelope.open(data)
    summary = len(data) >= wire.HEADER.size and wire.kind_of(data) == wire.KIND_SUMMARY
    sender, entries = wire.decode(data, None, SUMMARY if summary else RECORD, kind=KINDS)
    entries = entries.copy()
    check = _check_summary if summary else _check_record
    for entry in entries:
        check(int(entry["node"]), entry["state"])
    return Decoded(sender, entries, seq, wire.kind_of(data))


def _check_summary(ident: int, rec: np.void) -> None:
    """Refuse a summary whose group name does not hash to its id, whose contact is not
    ip:port, or whose figures are not finite."""
    try:
        group, contact = rec["group"].decode(), rec["contact"].decode()
    except UnicodeDecodeError:
        raise WireError("a summary's group or contact is not valid text") from None
    if not group or group_of(group) != ident:
        raise WireError(f"summary {ident:#x} carries another group's name ({group!r})")
    if parse_ip_addr(contact) is None:
        raise WireError(f"a summary's contact {contact!r} is not ip:port")
    if not all(math.isfinite(float(rec[f])) and float(rec[f]) >= 0
               for f in ("busy_min", "busy_mean", "busy_max", "oldest")):
        raise WireError("a summary's figures are not finite and >= 0")


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
    if not all(0.0 <= float(rec[f]) <= MAX_CORES for f in ("busy", "shoal")):
        raise WireError("a record's busy cores are not in [0, 65535]")


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


def summary_fields(rec: np.void) -> dict[str, Any]:
    """A group summary as plain values (for status, JSON and metrics)."""
    return {"group": rec["group"].decode(), "contact": rec["contact"].decode(),
            "nodes": int(rec["nodes"]), "cores": int(rec["cores"]),
            "busy": [round(float(rec[f]), 3) for f in ("busy_min", "busy_mean", "busy_max")],
            "free_mem": int(rec["free_mem"]), "free_min": int(rec["free_min"]),
            "oldest": round(float(rec["oldest"]), 4)}


def record_fields(rec: np.void) -> dict[str, Any]:
    """A record as plain values (for status, JSON and metrics)."""
    return {"name": rec["name"].decode(), "addr": rec["addr"].decode(),
            "version": int(rec["version"]),
            "load": [round(float(rec[f]), 3) for f in ("load", "load5", "load15")],
            "busy": round(float(rec["busy"]), 3), "shoal": round(float(rec["shoal"]), 3),
            "free_mem": int(rec["free_mem"]), "cores": int(rec["cores"]),
            "jobs": int(rec["jobs"]), "pes": int(rec["pes"]),
            "keys": json.loads(rec["keys"].decode() or "{}")}
