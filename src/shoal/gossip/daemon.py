"""The gossip node daemon (``shoal gossip daemon``): Fig. 1 of Levy14 as a system service,
one per node, over UDP, without MPI.

Once per interval, at its own random phase, the daemon renews its own record (load averages,
the cores busy and how many of them shoal's PEs took (:class:`shoal.gossip.state.CpuMeter`),
available memory, cores, the shoal jobs and PEs on the node, the user's keys; its version goes
up by one) and sends the window of its youngest entries to a random node it knows, or to a
seed of ``--join`` while it knows none. Arriving windows are merged by the same code as the MPI
service's (:class:`shoal.gossip.vector.OpenVector` over :class:`InfoVector`); the packets are
:mod:`shoal.gossip.packet`'s. One asyncio loop serves the UDP socket, the timer, the control
socket (:mod:`shoal.gossip.control`) and the optional HTTP endpoint (``/status``,
``/metrics``): it sleeps until a datagram, a request or the next tick.

The version never goes back: the state file (``state.json`` in the state directory, written
atomically) holds a version the daemon has not yet used; a block of :data:`RESERVE` versions
is reserved at a time, so a crash loses at most a skip forward, and SIGTERM saves the exact
one. Peers keep the record with the higher version, so a restarted daemon is believed at once.

With a key (``--key``, or a keyring file from a previous run) every packet is sealed
(:mod:`shoal.gossip.secure`: AES-256-GCM under the cluster label, a sequence number derived
from the version, a replay window per sender); ``--allow`` drops packets from outside the
given networks. Without a key the daemon says at its start that the cluster is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import json
import os
import random
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shoal.errors import UsageError, WireError
from shoal.files import write_text
from shoal.gossip import control, groups, health, packet, secure, wire
from shoal.gossip.analysis import window_entries
from shoal.gossip.packet import Address, parse_ip_addr
from shoal.gossip.state import CpuMeter, load_averages, shoal_jobs
from shoal.gossip.vector import OpenVector
from shoal.memory import node_available

LOSS_ENV = "SHOAL_GOSSIP_LOSS"  # a probability: drop that share of arriving packets, to
# measure the failure detector under packet loss (benchmarks/gossip_detect.py); unset: none
RESERVE = 64  # versions reserved per write of the state file
LOOKS = 3  # looks of the failure detector per interval (probes go a third of one apart)
PROBES = 6  # unanswered probes that declare a suspect dead: 6 lost at 10% loss per round
# trip (5% each way) is 1e-6 per suspicion; at a third of an interval apart, 2 intervals
JOB_SCAN = 5.0  # seconds between two looks for shoal jobs on the node
MIN_WINDOW = 2  # own entry and one other: with the own entry alone, nodes that know only a
# seed would never learn of each other (membership spreads through the windows)


@dataclass
class DaemonConfig:
    """What ``shoal gossip daemon`` was asked for (addresses already resolved to IPs)."""

    bind: Address
    seeds: list[Address]
    interval: float = 1.0
    window: float | int = 0.2
    state_dir: Path = field(default_factory=control.default_state_dir)
    name: str | None = None
    advertise: str | None = None  # host:port peers send to; default: the bound address
    http: Address | None = None
    key: bytes | None = None  # starts a keyring when there is none
    keyring: Path | None = None  # default: keyring.json in the state directory
    label: str = secure.DEFAULT_LABEL
    allow: list[secure.Network] = field(default_factory=list)  # empty: any source
    suspect_tail: float = 0.05  # a live node is suspected at one look with this probability
    cores: int | None = None  # the cores offered to jobs; default: the machine's
    group: str | None = None  # hierarchical gossip: this node's group (a topology key) ...
    groups: int | None = None  # ... or one of this many groups by a hash of the name

    @property
    def keyring_path(self) -> Path:
        return self.keyring if self.keyring is not None else self.state_dir / secure.KEYRING


@dataclass
class DaemonStats:
    sent: int = 0
    received: int = 0
    malformed: int = 0  # packets dropped by validation (oversized ones included)
    oversized: int = 0
    foreign: int = 0  # another format or cluster label, or open while sealed is expected
    unknown_key: int = 0  # sealed under a key not installed here
    forged: int = 0  # the tag is wrong
    replayed: int = 0  # a sequence number seen before from that sender
    disallowed: int = 0  # the source is outside --allow
    merged_entries: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    ticks: int = 0
    send_errors: int = 0
    probes_answered: int = 0
    dropped_emulated: int = 0  # arriving packets dropped on purpose (LOSS_ENV)
    relayed: int = 0  # windows of another group passed on to a node of that group


def format_addr(addr: Address) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Daemon:
    """One node's daemon around sockets already bound (so that errors show before
    ``--detach``): ``udp`` (the gossip), ``ctl`` (the control socket, listening) and
    ``http`` (listening, or None)."""

    def __init__(self, cfg: DaemonConfig, udp: socket.socket, ctl: socket.socket,
                 http: socket.socket | None = None):
        self.cfg, self.udp, self.ctl, self.http = cfg, udp, ctl, http
        bound = udp.getsockname()[:2]
        self.advertise = cfg.advertise or format_addr(_reachable(bound))
        self.name = cfg.name or f"{socket.gethostname()}@{self.advertise}"
        self.id = packet.node_id(self.name)
        self.vector = OpenVector(self.id, packet.RECORD)
        group = groups.group_name(cfg.group, cfg.groups, self.name)
        self.groups = None if group is None else groups.GroupLayer(group, cfg.window)
        self.group_id = 0 if self.groups is None else self.groups.id
        self.stats = DaemonStats()
        self.rng = random.Random()
        saved = _load_state(cfg.state_dir)
        self.version = int(saved.get("version", 0))
        self.reserved = self.version
        self.keys: dict[str, str] = dict(saved.get("keys", {}))
        self.seeds = list(cfg.seeds) + [a for a in map(parse_ip_addr, saved.get("peers", []))
                                        if a is not None]
        self.started = time.monotonic()
        self._jobs: list[set[int]] = []
        self._jobs_at = -JOB_SCAN
        self.cpu = CpuMeter()
        self._own = np.zeros((), packet.RECORD)
        self._transport: asyncio.DatagramTransport | None = None
        self.keyring, self.key_note = secure.open_keyring(
            cfg.keyring_path, cfg.key, required=cfg.keyring is not None)
        self.envelope = (secure.Envelope(self.keyring, cfg.label)
                         if self.keyring is not None else None)
        self.replay = secure.ReplayWindow()
        self.allow = secure.Allow(cfg.allow)
        self.detector = health.Detector(cfg.interval, cfg.window, tail=cfg.suspect_tail,
                                        probes=PROBES, probe_wait=cfg.interval / LOOKS)
        self._sent_k = 0  # packets sent under the current version (their sequence numbers)
        self.loss = _emulated_loss()

    # -- state that survives a restart ------------------------------------------------
    def save(self, exact: bool = False) -> None:
        """Write the state file: the next unused version (``exact``: at a clean stop), the
        keys and the peers' addresses (to rejoin without seeds)."""
        if not exact:
            self.reserved = self.version + RESERVE
        version = self.version + 1 if exact else self.reserved
        peers = sorted({n["addr"] for n in self.nodes(time.monotonic()) if not n["self"]})
        write_text(self.cfg.state_dir / control.STATEFILE, json.dumps(
            {"name": self.name, "version": version, "keys": self.keys,
             "peers": peers[:64]}, indent=1) + "\n")

    # -- the algorithm ------------------------------------------------------------------
    def renew(self, now: float) -> None:
        """Fig. 1: the node's own record, now, with the next version."""
        self.version += 1
        if self.version >= self.reserved:
            self.save()
        if now - self._jobs_at >= JOB_SCAN:
            self._jobs, self._jobs_at = shoal_jobs(socket.gethostname()), now
        own = self._own
        own["version"] = self.version
        own["load"], own["load5"], own["load15"] = load_averages()
        own["free_mem"] = node_available()
        own["cores"] = min(self.cfg.cores or os.cpu_count() or 1, 65535)
        own["busy"], own["shoal"] = self.cpu.sample(now)
        own["jobs"] = min(len(self._jobs), 65535)
        own["pes"] = sum(map(len, self._jobs))
        own["name"], own["addr"] = self.name.encode(), self.advertise.encode()
        own["keys"] = packet.encode_keys(self.keys)
        self.vector.vector.update_own(own, now)

    def tick(self, now: float) -> None:
        """Renew the own entry and send the window to a random known node (or a seed)."""
        self.renew(now)
        self._sent_k = 0
        self.stats.ticks += 1
        target = self.pick_target()
        if target is not None:
            self.send_window(target, now)
        if self.groups is not None:
            self.groups.renew(now, self._live(now), self.advertise)
            picked = self.groups.target(self.rng)
            target, group = picked if picked is not None else (self.pick_target(), 0)
            if target is not None:
                self.send_summaries(target, now, group)

    def _live(self, now: float) -> list[dict[str, Any]]:
        """The records of the own group's nodes that are not dead (this one first)."""
        return [n for n in self.nodes(now) if n["state"] != health.DEAD]

    def send_summaries(self, target: Address, now: float, group: int = 0) -> None:
        """Send the window of the youngest group summaries to ``target`` (of ``group``, whose
        own summary it is not sent)."""
        assert self.groups is not None
        vec, slots = self.groups.summaries.vector, self.groups.window_slots(group)
        self._send(packet.encode_window(self.id, self.groups.summaries.ids[slots],
                                        now - vec.born[slots], vec.records[slots],
                                        self.envelope, self.version, self._sent_k,
                                        wire.KIND_SUMMARY, self.group_id), target)

    def _others(self) -> np.ndarray:
        """The slots of the other nodes known."""
        return np.flatnonzero(self.vector.vector.known[1:len(self.vector)]) + 1

    def look(self, now: float) -> None:
        """Give the failure detector every entry's age (:mod:`shoal.gossip.health`) and
        probe the nodes it asks for."""
        vec = self.vector.vector
        slots = self._others()
        ids = self.vector.ids[slots].tolist()
        ages = dict(zip(ids, (now - vec.born[slots]).tolist(), strict=True))
        slot_of = dict(zip(ids, slots.tolist(), strict=True))
        for ident in self.detector.look(now, ages):
            addr = parse_ip_addr(vec.records["addr"][slot_of[ident]].decode())
            if addr is not None:
                self.send_window(addr, now, wire.KIND_PROBE)

    def send_window(self, target: Address, now: float, kind: int = wire.KIND_DAEMON) -> None:
        """Send this node's window to ``target``; a probe or its answer (``kind``) carries
        this node's own entry alone, and its receiver does not merge it: the detector's
        traffic says "alive" without spreading records faster than the algorithm does."""
        slots = (self.vector.window(self.window_size()) if kind == wire.KIND_DAEMON
                 else np.zeros(1, np.int64))
        vec = self.vector.vector
        self._send(packet.encode_window(self.id, self.vector.ids[slots],
                                        now - vec.born[slots], vec.records[slots],
                                        self.envelope, self.version, self._sent_k, kind,
                                        self.group_id), target)

    def _send(self, packets: list[bytes], target: Address) -> None:
        """Send this node's packets (each took a sequence number: ``_sent_k``)."""
        for data in packets:
            self._sent_k += 1
            self._sendto(data, target)

    def _sendto(self, data: bytes, target: Address) -> bool:
        """One datagram out, counted (a send error too); False if it did not go."""
        if self._transport is None:
            return False
        try:
            self._transport.sendto(data, target)
        except OSError:
            self.stats.send_errors += 1
            return False
        self.stats.sent += 1
        self.stats.bytes_sent += len(data)
        return True

    def window_size(self) -> int:
        """Entries sent: ``--window`` of the nodes known now (a count is capped by them), at
        least :data:`MIN_WINDOW`."""
        known = int(self.vector.vector.known.sum())
        if known < 2:
            return 1
        win = self.cfg.window
        return max(MIN_WINDOW, window_entries(known, win if isinstance(win, float)
                                              else min(win, known)))

    def pick_target(self) -> Address | None:
        """A random known node other than this one (of the own group), else a random seed."""
        vec = self.vector.vector
        slots = self._others()
        if len(slots):
            addr = parse_ip_addr(vec.records["addr"][self.rng.choice(slots)].decode())
            if addr is not None:
                return addr
        return self._seed()

    def _seed(self) -> Address | None:
        seeds = [s for s in self.seeds if format_addr(s) != self.advertise]
        return self.rng.choice(seeds) if seeds else None

    def receive(self, data: bytes, now: float, source: Address | None = None) -> None:
        """Merge one datagram's window (from ``source``); count and drop it if its source is
        not allowed, or it is malformed, foreign, forged or replayed. A probe is answered
        at once (this node's own entry, to ``source``); a probe or an answer tells the
        failure detector that its sender is alive and is not merged."""
        self.stats.received += 1
        self.stats.bytes_received += len(data)
        if source is not None and not self.allow.permits(source[0]):
            self.stats.disallowed += 1
            return
        try:
            got = packet.decode_packet(data, self.envelope)
        except WireError as exc:
            self._refused(exc, len(data))
            return
        if self.envelope is not None and not self.replay.accept(got.sender, got.seq):
            self.stats.replayed += 1
            return
        self.detector.answered(got.sender, now)  # (it spoke to this node: it is alive)
        if got.kind == wire.KIND_PROBE and source is not None:
            self.stats.probes_answered += 1
            self.send_window(source, now, wire.KIND_ALIVE)
        if got.kind == wire.KIND_SUMMARY:
            self._summaries(got.entries, now, source)
        if got.kind != wire.KIND_DAEMON:
            return
        entries = got.entries
        ours = entries["flags"] == self.group_id
        if self.groups is not None and not ours.all():
            self._foreign_window(data, entries[~ours][0], source)
        entries = entries[ours]
        self.stats.merged_entries += self.vector.merge(
            entries["node"], entries["age"], entries["state"], now)

    def _foreign_window(self, data: bytes, entry: np.void, source: Address | None) -> None:
        """A window from another group (its sender knows no member of its own yet, and this
        node was its seed): note the sender, and pass the datagram on to another node heard
        of in that group (:mod:`shoal.gossip.groups`)."""
        assert self.groups is not None
        group, sender = int(entry["flags"]), entry["state"]["addr"].decode()
        self.groups.heard(group, sender)
        target = self.groups.relay_to(group, sender, self.rng)
        if target is not None and target != source and self._sendto(data, target):
            self.stats.relayed += 1

    def _summaries(self, entries: np.ndarray, now: float, source: Address | None) -> None:
        """Merge group summaries; a member of the own group they name that this node does
        not know yet gets this node's window (how a group's members find each other). A
        member of the own group that sent only the group's own summary knows no other group
        yet: it gets this node's summaries back, if they hold another group's."""
        if self.groups is None:
            self.stats.foreign += 1  # (a grouped cluster's packet at a flat daemon)
            return
        if (source is not None and (entries["node"] == self.group_id).all()
                and (entries["flags"] == self.group_id).all() and len(self.groups.summaries) > 1):
            self.send_summaries(source, now)
        kept, member = self.groups.merge(entries, now)
        self.stats.merged_entries += kept
        addr = None if member is None else parse_ip_addr(member)
        if addr is not None and member.encode() not in set(
                self.vector.vector.records["addr"][:len(self.vector)].tolist()):
            self.send_window(addr, now)

    def _refused(self, exc: WireError, size: int) -> None:
        if isinstance(exc, secure.ForgedPacketError):
            self.stats.forged += 1
        elif isinstance(exc, secure.UnknownKeyError):
            self.stats.unknown_key += 1
        elif isinstance(exc, secure.ForeignPacketError):
            self.stats.foreign += 1
        else:
            self.stats.malformed += 1
            self.stats.oversized += size > packet.MAX_PACKET

    # -- queries ------------------------------------------------------------------------
    def nodes(self, now: float) -> list[dict[str, Any]]:
        """Every node known, this one first, then by name."""
        vec = self.vector.vector
        out = []
        for slot in np.flatnonzero(vec.known):
            entry = packet.record_fields(vec.records[slot])
            ident = int(self.vector.ids[slot])
            entry.update(id=ident, age=round(float(now - vec.born[slot]), 4),
                         self=bool(slot == 0),
                         state=health.ALIVE if slot == 0 else self.detector.state(ident))
            out.append(entry)
        return sorted(out, key=lambda e: (not e["self"], e["name"]))

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        nodes = self.nodes(now)
        ages = [n["age"] for n in nodes if not n["self"]]
        return {"name": self.name, "addr": self.advertise, "version": self.version,
                "group": None if self.groups is None else self.groups.name,
                "groups": [] if self.groups is None else self.groups.status(now),
                "interval": self.cfg.interval, "window": self.cfg.window,
                "uptime": round(now - self.started, 3), "cpu_seconds": time.process_time(),
                "mean_age": float(np.mean(ages)) if ages else None,
                "security": self.security(), "health": self.health(len(nodes)),
                "stats": asdict(self.stats), "nodes": nodes}

    def health(self, nodes: int) -> dict[str, Any]:
        """The failure detector: its threshold now, its counts, whether the fault looks
        local (most nodes suspect: nobody is declared dead meanwhile)."""
        d = self.detector
        limit = d.threshold(nodes) if nodes >= 2 else None
        return {"suspect_after": None if limit is None else round(limit, 4), "tail": d.tail,
                "probes": d.probes, "local_trouble": d.local_trouble, **d.counts}

    def security(self) -> dict[str, Any]:
        """How packets are protected (key ids, never keys)."""
        sealed = self.keyring is not None
        out: dict[str, Any] = {"encrypted": sealed, "allow": [str(n) for n in self.allow.networks]}
        if self.keyring is not None:
            out.update(label=self.cfg.label, **self.keyring.summary())
        return out

    def notice(self) -> str:
        """What the daemon says at its start about the security of the cluster."""
        allow = ", ".join(str(n) for n in self.allow.networks) or "any"
        if self.keyring is None:
            return ("shoal gossip: the cluster is OPEN: packets are neither encrypted nor "
                    "authenticated, anyone who reaches the UDP port can read and forge node "
                    "state; start with --key (from `shoal gossip keys generate`) to secure it. "
                    f"Sources allowed: {allow}")
        return (f"shoal gossip: packets encrypted and authenticated (AES-256-GCM, label "
                f"{self.cfg.label!r}), {self.key_note}; sources allowed: {allow}")

    def metrics(self) -> str:
        return prometheus(self.status())

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """One control request (see :mod:`shoal.gossip.control`)."""
        op = req.get("op")
        if op == "status":
            return {"ok": True, **self.status()}
        if op == "keys":
            return self._keys_request(req)
        if op in ("set", "unset") and isinstance(req.get("key"), str):
            keys = dict(self.keys)
            if op == "set":
                keys[req["key"]] = str(req.get("value", ""))
            else:
                keys.pop(req["key"], None)
            size = len(packet.encode_keys(keys))
            if size > packet.KEYS_BYTES:
                return {"ok": False, "error": f"the keys would take {size} B of the record's "
                        f"{packet.KEYS_BYTES} B: use shorter keys or values, or unset some"}
            self.keys = keys
            self.save()
            return {"ok": True, "keys": keys}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def _keys_request(self, req: dict[str, Any]) -> dict[str, Any]:
        """``{"op": "keys", "action": "list|install|use|remove", "key": BASE64}``."""
        ring, action = self.keyring, req.get("action")
        if ring is None:
            return {"ok": False, "error": "this daemon runs an open cluster (no key): restart "
                    "it with --key KEY (every node with the same key) to encrypt"}
        try:
            if action in ("install", "use", "remove"):
                key = secure.parse_key(str(req.get("key", "")))
                getattr(ring, action)(key)
            elif action != "list":
                return {"ok": False, "error": f"unknown keys action {action!r}: use list, "
                        "install, use or remove"}
        except (UsageError, OSError) as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "keys": ring.listing()}

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then save the state (exact version)."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        self._transport, _ = await loop.create_datagram_endpoint(
            lambda: _Udp(self), sock=self.udp)
        servers = [await asyncio.start_unix_server(self._control, sock=self.ctl)]
        if self.http is not None:
            servers.append(await asyncio.start_server(self._http, sock=self.http))
        ticker = asyncio.create_task(self._ticks())
        print(self.notice(), file=sys.stderr, flush=True)
        print(f"shoal gossip daemon {self.name} (id {self.id:#010x}) on {self.advertise}, "
              f"version {self.version}", flush=True)
        stopped = asyncio.create_task(stop.wait())
        try:  # until SIGTERM, or a failure of the ticks (a bug: raised, the daemon ends)
            await asyncio.wait([stopped, ticker], return_when=asyncio.FIRST_COMPLETED)
            if ticker.done():
                ticker.result()
        finally:
            stopped.cancel()
            ticker.cancel()
            for server in servers:
                server.close()
            self._transport.close()
            self.save(exact=True)
            print(f"shoal gossip daemon {self.name} stopped at version {self.version}",
                  flush=True)

    async def _ticks(self) -> None:
        interval = self.cfg.interval / LOOKS
        deadline = time.monotonic() + self.rng.random() * self.cfg.interval
        for k in itertools.count():
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            now = time.monotonic()
            self.detector.late(now, now - deadline)
            if k % LOOKS == 0:
                self.tick(now)
            self.look(now)
            deadline += interval
            if now - deadline > interval:  # fell behind (suspended): skip, do not burst
                deadline = now + interval

    async def _control(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 2.0)
            try:
                req = json.loads(line)
                answer = self.handle(req if isinstance(req, dict) else {})
            except ValueError:
                answer = {"ok": False, "error": "a request is one JSON object on one line"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2.0)
            parts = head.split(b"\r\n", 1)[0].split()
            path = parts[1].decode(errors="replace").split("?")[0] if len(parts) > 1 else ""
            code, ctype, body = self._route(parts[0] if parts else b"", path)
            writer.write(f"HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _route(self, method: bytes, path: str) -> tuple[str, str, bytes]:
        if method != b"GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if path == "/status":
            return "200 OK", "application/json", json.dumps(self.status()).encode()
        if path == "/metrics":
            return ("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                    self.metrics().encode())
        return "404 Not Found", "text/plain", b"try /status or /metrics\n"


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, daemon: Daemon):
        self.daemon = daemon

    def datagram_received(self, data: bytes, addr: Any) -> None:
        loss = self.daemon.loss
        if loss and self.daemon.rng.random() < loss:
            self.daemon.stats.dropped_emulated += 1
            return
        self.daemon.receive(data, time.monotonic(), (addr[0], addr[1]))

    def error_received(self, exc: Exception) -> None:  # ICMP unreachable of a past send
        self.daemon.stats.send_errors += 1


STATE_CODE = {health.ALIVE: 0, health.SUSPECT: 1, health.DEAD: 2}  # shoal_gossip_node_state


def prometheus(status: dict[str, Any]) -> str:
    """The Prometheus text format of a status: the daemon's counters, the failure detector's,
    per node its age, load, cores busy (all, shoal's), free memory, cores, jobs, PEs and
    state (0 alive, 1 suspect, 2 dead; labelled with its name), and per group (grouped
    daemons) its summary's age, live nodes, cores, busy cores, free memory, oldest age."""
    lines = []
    for key, value in status["stats"].items():
        lines += [f"# TYPE shoal_gossip_{key}_total counter",
                  f"shoal_gossip_{key}_total {value}"]
    lines += ["# TYPE shoal_gossip_nodes gauge", f"shoal_gossip_nodes {len(status['nodes'])}",
              "# TYPE shoal_gossip_version gauge", f"shoal_gossip_version {status['version']}",
              "# TYPE shoal_gossip_cpu_seconds_total counter",
              f"shoal_gossip_cpu_seconds_total {status['cpu_seconds']:.6f}"]
    per_node = {"age_seconds": lambda n: n["age"], "load1": lambda n: n["load"][0],
                "load5": lambda n: n["load"][1], "load15": lambda n: n["load"][2],
                "busy_cores": lambda n: n["busy"], "shoal_cores": lambda n: n["shoal"],
                "free_memory_bytes": lambda n: n["free_mem"], "cores": lambda n: n["cores"],
                "jobs": lambda n: n["jobs"], "pes": lambda n: n["pes"]}
    per_node["state"] = lambda n: STATE_CODE[n["state"]]
    health_counts = {k: v for k, v in status["health"].items() if k in health.COUNTS}
    for key, value in health_counts.items():
        lines += [f"# TYPE shoal_gossip_health_{key}_total counter",
                  f"shoal_gossip_health_{key}_total {value}"]
    lines += ["# TYPE shoal_gossip_local_trouble gauge",
              f"shoal_gossip_local_trouble {int(status['health']['local_trouble'])}"]
    for metric, get in per_node.items():
        lines.append(f"# TYPE shoal_gossip_node_{metric} gauge")
        for n in status["nodes"]:
            lines.append(f'shoal_gossip_node_{metric}{{node="{_label(n["name"])}"}} {get(n)}')
    per_group = {"age_seconds": lambda g: g["age"], "nodes": lambda g: g["nodes"],
                 "cores": lambda g: g["cores"], "busy_mean_cores": lambda g: g["busy"][1],
                 "busy_max_cores": lambda g: g["busy"][2],
                 "free_memory_bytes": lambda g: g["free_mem"],
                 "oldest_age_seconds": lambda g: g["oldest"]}
    for metric, get in per_group.items() if status["groups"] else ():
        lines.append(f"# TYPE shoal_gossip_group_{metric} gauge")
        for g in status["groups"]:
            lines.append(f'shoal_gossip_group_{metric}{{group="{_label(g["group"])}"}} {get(g)}')
    return "\n".join(lines) + "\n"


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _reachable(bound: Address) -> Address:
    """The address peers reach a socket bound to ``bound`` at (the host's address for a
    wildcard bind)."""
    host, port = bound
    if ipaddress.ip_address(host).is_unspecified:
        host = socket.gethostbyname(socket.gethostname())
    return host, port


def _emulated_loss() -> float:
    """The share of arriving packets to drop (:data:`LOSS_ENV`), 0 by default."""
    text = os.environ.get(LOSS_ENV, "0")
    try:
        loss = float(text)
    except ValueError:
        loss = -1.0
    if not 0.0 <= loss < 1.0:
        raise UsageError(f"{LOSS_ENV}={text!r}: give a probability in [0, 1), e.g. 0.05")
    return loss


def _load_state(state_dir: Path) -> dict[str, Any]:
    try:
        saved = json.loads((state_dir / control.STATEFILE).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(f"{state_dir / control.STATEFILE} is unreadable ({exc}): repair or "
                         "remove it (the node's version then restarts at 0 and its peers "
                         "ignore it until it passes the old one)") from None
    return saved if isinstance(saved, dict) else {}


# -- starting: sockets, pid file, detaching ----------------------------------------------
def open_sockets(cfg: DaemonConfig) -> tuple[socket.socket, socket.socket,
                                              socket.socket | None]:
    """Bind the UDP socket, the control socket and the HTTP one; a busy address or a state
    directory that cannot be made is a :class:`UsageError`."""
    try:
        cfg.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise UsageError(f"--state-dir {cfg.state_dir}: cannot create it ({exc.strerror}): "
                         "give a writable directory") from None
    _refuse_running(cfg.state_dir)
    family = socket.AF_INET6 if ":" in cfg.bind[0] else socket.AF_INET
    udp = _bound(socket.socket(family, socket.SOCK_DGRAM), cfg.bind, "--bind")
    udp.setblocking(False)
    http = None
    if cfg.http is not None:
        hfam = socket.AF_INET6 if ":" in cfg.http[0] else socket.AF_INET
        http = _bound(socket.socket(hfam, socket.SOCK_STREAM), cfg.http, "--http")
        http.listen(16)
    path = cfg.state_dir / control.CONTROL
    path.unlink(missing_ok=True)  # left by a daemon that was killed
    ctl = _bound(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), os.fspath(path),
                 "--state-dir")
    os.chmod(path, 0o600)
    ctl.listen(16)
    return udp, ctl, http


def _bound(sock: socket.socket, addr: Any, flag: str) -> socket.socket:
    if sock.type == socket.SOCK_STREAM and sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise UsageError(f"{flag}: cannot bind {addr} ({exc.strerror}): give another "
                         "address or port") from None
    return sock


def _refuse_running(state_dir: Path) -> None:
    from shoal.jobdir import alive

    try:
        pid = int((state_dir / control.PIDFILE).read_text())
    except (OSError, ValueError):
        return
    if pid != os.getpid() and alive(pid):
        raise UsageError(f"a gossip daemon (pid {pid}) runs with --state-dir {state_dir}: "
                         "stop it (kill -TERM) or give another --state-dir")


def detach(state_dir: Path) -> None:
    """Become a daemon: double fork, a new session, stdio to ``daemon.log``. The caller's
    process exits 0 once the daemon is started."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.chdir("/")
    log = os.open(state_dir / control.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)


def serve(cfg: DaemonConfig, background: bool = False) -> None:
    """Bind, optionally detach, write the pid file, run until SIGTERM, clean up."""
    udp, ctl, http = open_sockets(cfg)
    daemon = Daemon(cfg, udp, ctl, http)
    if background:
        detach(cfg.state_dir)
    pidfile = cfg.state_dir / control.PIDFILE
    write_text(pidfile, f"{os.getpid()}\n")
    try:
        daemon.run()
    finally:
        with contextlib.suppress(OSError):
            (cfg.state_dir / control.CONTROL).unlink()
            pidfile.unlink()
