"""A flood of forged packets against one encrypted gossip daemon (issue 28 item 2): what it
costs the daemon (CPU, resident memory), how many it counted, and whether it still gossips
with a legitimate peer meanwhile.

Two daemons with the same key on 127.0.0.1 (A, the target, and B, its peer) gossip at
--interval. After a warm-up, --senders processes send forged packets at A as fast as they
can for --duration seconds: each has A's clear header (magic, format, label tag, the id of
the key A holds), so A cannot refuse it before AES-GCM, then a random nonce and a random
ciphertext+tag (--size bytes in all): every one costs A a full decryption attempt. Once a
second the script samples A's resident memory, and B's view of A (A's version and age as B
holds it). At the end it prints the senders' rate, A's CPU share, RSS before/during/after,
the packets A counted (forged, received) and those the kernel dropped before A read them
(UDP receive-buffer errors of the whole host, /proc/net/snmp), and A's records that reached B
during the flood. Both daemons are stopped with SIGTERM (killed after 10 s).

    python benchmarks/gossip_flood.py --duration 10 --senders 1
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gossip_daemon import stop

from shoal.errors import UsageError
from shoal.gossip import secure
from shoal.gossip.control import request

CLI = [sys.executable, "-c", "from shoal.cli.main import main; main()"]
HERE = Path(__file__).resolve()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def status(state: Path) -> dict[str, Any] | None:
    try:
        return request(state, {"op": "status"}, timeout=2.0)
    except UsageError:
        return None


def proc_rss(pid: int) -> int:
    """Resident memory of ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def udp_rcvbuf_errors() -> int:
    """The host's UDP datagrams dropped for a full receive buffer (IPv4)."""
    lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines()
             if ln.startswith("Udp:")]
    return int(lines[1][lines[0].index("RcvbufErrors")])


def free_ports(count: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def send_forged(port: int, key: str, label: str, size: int, duration: float) -> None:
    """The sender's side (run as a child process): print how many packets it sent."""
    header = secure.HEADER.pack(secure.MAGIC, secure.FORMAT, secure.label_tag(label),
                                secure.key_id(secure.parse_key(key)))
    pool = [header + os.urandom(size - len(header)) for _ in range(4096)]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    send, sent, errors = sock.send, 0, 0
    end = time.monotonic() + duration
    while time.monotonic() < end:
        for data in pool[:1024]:  # check the clock once per 1024 packets
            try:
                send(data)
            except OSError:  # ECONNREFUSED of an earlier ICMP, ENOBUFS
                errors += 1
        sent += 1024
        pool.append(pool.pop(0))
    print(sent - errors, errors, flush=True)


def start_daemons(root: Path, key: str, label: str, interval: str) -> tuple[list, list[Path],
                                                                            list[int]]:
    ports, procs, states = free_ports(2), [], []
    for k in range(2):
        state = root / "AB"[k]
        args = [*CLI, "gossip", "daemon", "--bind", f"127.0.0.1:{ports[k]}", "--interval",
                interval, "--window", "100%", "--state-dir", str(state), "--name",
                f"flood-{'AB'[k]}", "--key", key, "--label", label]
        if k:
            args += ["--join", f"127.0.0.1:{ports[0]}"]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        states.append(state)
    end = time.monotonic() + 60
    while not all((s := status(st)) and len(s["nodes"]) == 2 for st in states):
        if time.monotonic() > end or any(p.poll() is not None for p in procs):
            raise SystemExit("the two daemons did not learn each other within 60 s")
        time.sleep(0.1)
    return procs, states, ports


def view_of(state: Path, name: str) -> tuple[int, float] | None:
    """(version, age) of node ``name``'s record in the daemon of ``state``."""
    s = status(state)
    for n in (s or {}).get("nodes", []):
        if n["name"] == name:
            return n["version"], n["age"]
    return None


def flood(args: argparse.Namespace, procs: list, states: list[Path], ports: list[int],
          key: str) -> dict[str, Any]:
    pid = procs[0].pid
    before = {"rss": proc_rss(pid), "cpu": proc_cpu(pid), "t": time.monotonic(),
              "stats": status(states[0])["stats"], "kdrop": udp_rcvbuf_errors(),
              "b_view": view_of(states[1], "flood-A")}
    senders = [subprocess.Popen([sys.executable, str(HERE), "--send", str(ports[0]),
                                 "--key", key, "--label", args.label, "--size", str(args.size),
                                 "--duration", str(args.duration)],
                                stdout=subprocess.PIPE, text=True)
               for _ in range(args.senders)]
    samples = []
    try:
        while any(s.poll() is None for s in senders):
            time.sleep(1.0)
            samples.append((proc_rss(pid), view_of(states[1], "flood-A"),
                            view_of(states[0], "flood-B"), proc_cpu(pid), time.monotonic()))
        counts = [list(map(int, s.communicate(timeout=30)[0].split())) for s in senders]
    finally:
        for s in senders:
            if s.poll() is None:
                s.kill()
                s.communicate(timeout=10)
    time.sleep(0.5)  # let A drain its socket
    return {"before": before, "samples": samples, "sent": sum(c[0] for c in counts),
            "send_errors": sum(c[1] for c in counts), "wall": time.monotonic() - before["t"],
            "rss": proc_rss(pid), "cpu": proc_cpu(pid), "stats": status(states[0])["stats"],
            "kdrop": udp_rcvbuf_errors(), "b_view": view_of(states[1], "flood-A")}


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    b, s0, s1 = r["before"], r["before"]["stats"], r["stats"]
    mib = 1 << 20
    rss_during = [x[0] for x in r["samples"]]
    ages_at_b = [x[1][1] for x in r["samples"] if x[1]]
    ages_at_a = [x[2][1] for x in r["samples"] if x[2]]
    counted = {k: s1[k] - s0[k] for k in ("received", "forged", "malformed", "foreign",
                                          "unknown_key", "replayed", "merged_entries")}
    print(f"flood: {args.senders} sender(s), {args.size} B forged packets, "
          f"{args.duration:.0f} s, daemons at {args.interval}")
    print(f"sent: {r['sent']} packets in {args.duration:.1f} s = "
          f"{r['sent'] / args.duration:,.0f} packets/s ({r['send_errors']} send errors)")
    print(f"daemon A counted: received {counted['received']}, forged {counted['forged']}, "
          f"other refusals {counted['malformed'] + counted['foreign'] + counted['unknown_key']}"
          f" ({counted['forged'] / args.duration:,.0f} forged/s handled)")
    print(f"kernel UDP receive-buffer drops (host): {r['kdrop'] - b['kdrop']}")
    print(f"daemon A CPU: {r['cpu'] - b['cpu']:.2f} s over {r['wall']:.1f} s = "
          f"{100 * (r['cpu'] - b['cpu']) / r['wall']:.0f}% of a core")
    if len(r["samples"]) >= 3:  # from the first to the last 1 s sample: inside the flood
        first, last = r["samples"][0], r["samples"][-2]
        print(f"daemon A CPU inside the flood: {last[3] - first[3]:.2f} s over "
              f"{last[4] - first[4]:.1f} s = "
              f"{100 * (last[3] - first[3]) / (last[4] - first[4]):.0f}% of a core")
    print(f"daemon A RSS: before {b['rss'] / mib:.1f} MiB, during max "
          f"{max(rss_during, default=0) / mib:.1f} MiB, after {r['rss'] / mib:.1f} MiB")
    v0, v1 = (b["b_view"] or (0, 0))[0], (r["b_view"] or (0, 0))[0]
    print(f"legitimate gossip during the flood: B's copy of A's record went from version "
          f"{v0} to {v1}; A merged {counted['merged_entries']} entries from B; age of A at B "
          f"max {max(ages_at_b, default=float('nan')):.2f} s, age of B at A max "
          f"{max(ages_at_a, default=float('nan')):.2f} s (1 s samples)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--senders", type=int, default=1)
    ap.add_argument("--size", type=int, default=1173, help="bytes per forged packet "
                    "(default: a full sealed packet of 4 entries)")
    ap.add_argument("--interval", default="256ms")
    ap.add_argument("--label", default="flood")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--send", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--key", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.send:
        send_forged(args.send, args.key, args.label, args.size, args.duration)
        return
    key = secure.generate_key()
    with tempfile.TemporaryDirectory(prefix="shoal-flood-") as root:
        procs: list = []
        try:
            procs, states, ports = start_daemons(Path(root), key, args.label, args.interval)
            log(f"two daemons up; warm-up {args.warmup} s, then {args.duration} s of flood")
            time.sleep(args.warmup)
            report(args, flood(args, procs, states, ports, key))
        finally:
            stop(procs)


if __name__ == "__main__":
    main()
