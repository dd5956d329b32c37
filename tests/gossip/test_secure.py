"""The daemon's security (issue 28 item 2): sealed packets round trip and refuse every
altered bit, another label, a removed key and a replay; --allow drops other sources; the
keyring is 0600 and written whole; bad keys exit 2 saying what to change; a key rotation
across 3 daemons never stops their exchange. Every subprocess has a timeout and is killed in
a ``finally``."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from daemons import free_ports, status, wait
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import WireError
from shoal.errors import UsageError
from shoal.gossip import packet, secure
from shoal.gossip.daemon import Daemon, DaemonConfig, open_sockets

CLI = [sys.executable, "-c", "from shoal.cli.main import main; main()"]
SRC = str(Path(__file__).resolve().parents[2] / "src")
K1, K2 = os.urandom(32), os.urandom(32)


def _window(names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rec = np.zeros(len(names), packet.RECORD)
    for k, name in enumerate(names):
        rec[k]["name"], rec[k]["addr"] = name.encode(), f"127.0.0.{k + 1}:7946".encode()
        rec[k]["keys"], rec[k]["version"] = b"{}", k + 1
    ids = np.array([packet.node_id(n) for n in names], np.uint32)
    return ids, np.arange(len(names), dtype=float), rec


def _sealed(envelope: secure.Envelope, names: list[str], version: int = 1) -> list[bytes]:
    ids, ages, rec = _window(names)
    return packet.encode_window(ids[0], ids, ages, rec, envelope, version)


ENV1 = secure.Envelope(secure.Keyring([], K1), "shoal")
GOOD = _sealed(ENV1, ["a", "b", "c"])[0]


def test_a_sealed_window_round_trips_within_the_cap():
    names = [f"node{k}" for k in range(13)]
    parts = _sealed(ENV1, names, version=9)
    assert packet.SEALED_PER_PACKET == 4 and len(parts) == 4
    assert all(len(p) <= packet.MAX_PACKET for p in parts)
    assert all(p[:4] == secure.MAGIC for p in parts)
    got = [packet.decode_packet(p, ENV1) for p in parts]
    assert [g.seq for g in got] == [(9 << 20) | k for k in range(4)]
    entries = np.concatenate([g.entries for g in got])
    assert sorted(entries["state"]["name"].tolist()) == sorted(n.encode() for n in names)
    assert all(name.encode() not in b"".join(parts) for name in names)  # encrypted
    # the same window sealed twice differs (a random nonce per packet)
    assert _sealed(ENV1, names, 9)[0] != parts[0]


def test_every_flipped_bit_is_refused():
    for pos in range(len(GOOD)):
        data = bytearray(GOOD)
        data[pos] ^= 1 << (pos % 8)
        with pytest.raises(WireError):
            packet.decode_packet(bytes(data), ENV1)
    with pytest.raises(secure.ForgedPacketError):  # a bit of the ciphertext
        packet.decode_packet(GOOD[:40] + bytes([GOOD[40] ^ 4]) + GOOD[41:], ENV1)


def test_another_label_is_refused_cheaply_and_by_the_tag():
    other = secure.Envelope(secure.Keyring([], K1), "other-cluster")
    with pytest.raises(secure.ForeignPacketError, match="label"):
        packet.decode_packet(GOOD, other)
    other.tag = ENV1.tag  # even with the clear tag matching, the label is authenticated
    with pytest.raises(secure.ForgedPacketError):
        packet.decode_packet(GOOD, other)


def test_every_installed_key_decrypts_and_a_removed_one_is_refused():
    ring = secure.Keyring([K1], K2)
    receiver = secure.Envelope(ring, "shoal")
    assert packet.decode_packet(GOOD, receiver).sender == packet.node_id("a")
    ring.remove(K1)
    with pytest.raises(secure.UnknownKeyError):
        packet.decode_packet(GOOD, receiver)
    with pytest.raises(UsageError, match="is the primary"):
        ring.remove(K2)
    with pytest.raises(UsageError, match="install"):
        ring.use(K1)


def test_open_and_sealed_packets_do_not_mix():
    ids, ages, rec = _window(["a", "b"])
    open_packet = packet.encode_window(ids[0], ids, ages, rec)[0]
    with pytest.raises(secure.ForeignPacketError):
        packet.decode_packet(open_packet, ENV1)
    with pytest.raises(WireError):
        packet.decode_packet(GOOD)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_are_refused_by_a_sealed_decoder(data):
    with pytest.raises(WireError):
        packet.decode_packet(data, ENV1)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=1400))
def test_random_bytes_behind_a_right_header_are_forged(body):
    data = GOOD[:secure.HEADER.size] + body
    with pytest.raises(WireError) as exc:
        packet.decode_packet(data, ENV1)
    if len(data) >= secure.OVERHEAD and len(data) <= packet.MAX_PACKET:
        assert isinstance(exc.value, secure.ForgedPacketError)


def test_the_replay_window_refuses_repeats_and_old_numbers_and_stays_bounded():
    win = secure.ReplayWindow()
    assert all(win.accept(7, s) for s in (5, 3, 9))  # out of order is fine
    assert not win.accept(7, 9) and not win.accept(7, 3)
    assert win.accept(8, 3)  # per sender
    for s in range(100, 200):
        assert win.accept(7, s)
    assert not win.accept(7, 130) and not win.accept(7, 120)  # below the window: too old
    assert win.accept(7, 250)
    win.SENDERS = 10
    for sender in range(1000):
        win.accept(sender, 1)
    assert len(win._senders) == 10
    assert all(len(h) <= win.WIDTH for h, _ in win._senders.values())


def _daemon(state: Path, key: bytes | None = K1, **kw: object) -> Daemon:
    cfg = DaemonConfig(bind=("127.0.0.1", 0), seeds=[], state_dir=state, key=key, **kw)
    udp, ctl, http = open_sockets(cfg)
    return Daemon(cfg, udp, ctl, http)


def _close(d: Daemon) -> None:
    d.udp.close()
    d.ctl.close()


def test_a_daemon_counts_and_drops_replays_forgeries_and_other_sources(tmp_path):
    a, b = _daemon(tmp_path / "a", name="a"), _daemon(tmp_path / "b", name="b")
    c = _daemon(tmp_path / "c", allow=secure.parse_allow("10.0.0.0/8"), name="c")
    try:
        a.renew(1.0)
        sent = packet.encode_window(a.id, a.vector.ids[:1], np.zeros(1),
                                    a.vector.vector.records[:1], a.envelope, a.version)
        b.receive(sent[0], 2.0, ("127.0.0.1", 9))
        assert b.stats.merged_entries == 1
        b.receive(sent[0], 2.1, ("127.0.0.1", 9))  # captured and resent
        b.receive(sent[0][:-1] + bytes([sent[0][-1] ^ 1]), 2.2, ("127.0.0.1", 9))
        b.receive(b"SHGE" + os.urandom(200), 2.3, ("127.0.0.1", 9))
        b.receive(os.urandom(2000), 2.4, ("127.0.0.1", 9))
        c.receive(sent[0], 2.5, ("127.0.0.1", 9))
        c.receive(sent[0], 2.6, ("::ffff:10.1.2.3", 9))
        s = b.stats
        assert (s.replayed, s.forged, s.foreign, s.malformed, s.oversized) == (1, 1, 1, 1, 1)
        assert (c.stats.disallowed, c.stats.merged_entries) == (1, 1)
        assert b.status()["security"]["encrypted"] and "OPEN" not in b.notice()
        # a restart (same state directory) sends higher sequence numbers: accepted
        a.save(exact=True)
        _close(a)
        a = _daemon(tmp_path / "a", key=None, name="a")  # the keyring file encrypts
        a.renew(3.0)
        again = packet.encode_window(a.id, a.vector.ids[:1], np.zeros(1),
                                     a.vector.vector.records[:1], a.envelope, a.version)
        b.receive(again[0], 3.1, ("127.0.0.1", 9))
        assert b.stats.merged_entries == 2 and b.stats.replayed == 1
        b.receive(sent[0], 3.2, ("127.0.0.1", 9))  # the old one is still a replay
        assert b.stats.replayed == 2
    finally:
        for d in (a, b, c):
            _close(d)


def test_the_keyring_is_0600_written_whole_and_an_open_daemon_says_so(tmp_path):
    d = _daemon(tmp_path / "k")
    try:
        path = tmp_path / "k" / secure.KEYRING
        assert path.stat().st_mode & 0o777 == 0o600
        key2 = secure.generate_key()
        answer = d.handle({"op": "keys", "action": "install", "key": key2})
        assert answer["ok"] and len(answer["keys"]) == 2 and answer["keys"][0]["primary"]
        assert path.stat().st_mode & 0o777 == 0o600
        assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
        assert len(secure.Keyring.load(path)) == 2
        assert not d.handle({"op": "keys", "action": "remove",
                             "key": secure.encode_key(K1)})["ok"]
        assert "key" not in str(d.status()["security"]["keys"])  # ids only
        assert K1 not in str(d.status()).encode()
    finally:
        _close(d)
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not a keyring"):
        _daemon(tmp_path / "k")
    d = _daemon(tmp_path / "open", key=None)
    try:
        assert "OPEN" in d.notice() and not d.status()["security"]["encrypted"]
        assert "open cluster" in d.handle({"op": "keys", "action": "list"})["error"]
    finally:
        _close(d)


@pytest.mark.parametrize("args,says", [
    (["keys", "install", "not base64!"], "not base64"),
    (["keys", "use", base64.b64encode(b"x" * 16).decode()], "16 bytes, AES-256 needs 32"),
    (["daemon", "--bind", "127.0.0.1:1", "--key", "abc"], "not base64"),
    (["daemon", "--bind", "127.0.0.1:1", "--allow", "10.0.0.0/33"], "give CIDRs"),
    (["daemon", "--bind", "127.0.0.1:1", "--label", ""], "1 to 64 bytes"),
    (["daemon", "--bind", "127.0.0.1:0", "--keyring", "/nonexistent/k.json"], "--key KEY"),
])
def test_bad_key_input_exits_2_saying_what_to_change(args, says, tmp_path, monkeypatch,
                                                       capsys):
    from shoal.cli.main import main

    monkeypatch.setattr(sys, "argv", ["shoal", "gossip", *args, "--state-dir", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err and ("keys generate" in err or "give" in err)


# -- rotation across 3 daemons -------------------------------------------------------------
INTERVAL = 0.1





def _versions(states: list[Path]) -> dict[tuple[int, str], int] | None:
    """(observer, node) -> the version the observer holds of another node's record."""
    out = {}
    for k, state in enumerate(states):
        s = status(state)
        if s is None or len(s["nodes"]) != len(states):
            return None
        out.update({(k, n["name"]): n["version"] for n in s["nodes"] if not n["self"]})
    return out


def _advanced(states: list[Path], before: dict[tuple[int, str], int]) -> bool:
    """Every daemon has received a newer record of every other one since ``before``."""
    now = _versions(states)
    return now is not None and all(now[k] > v for k, v in before.items())


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    from shoal.cli.main import main

    monkeypatch.setattr(sys, "argv", ["shoal", "gossip", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_key_rotation_across_3_daemons_never_stops_the_exchange(tmp_path, monkeypatch,
                                                                   capsys):
    old, new = secure.generate_key(), secure.generate_key()
    ports, states = free_ports(3), [tmp_path / f"r{k}" for k in range(3)]
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = []
    try:
        for k in range(3):
            args = [*CLI, "gossip", "daemon", "--bind", f"127.0.0.1:{ports[k]}", "--interval",
                    f"{int(INTERVAL * 1000)}ms", "--window", "100%", "--state-dir",
                    str(states[k]), "--name", f"r{k}", "--key", old, "--label", "rot",
                    "--allow", "127.0.0.0/8"]
            if k:
                args += ["--join", f"127.0.0.1:{ports[0]}"]
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        before = wait(lambda: _versions(states), 20)
        steps = [("install", new)] * 3 + [("use", new)] * 3 + [("remove", old)] * 3
        for i, (action, key) in enumerate(steps):
            code, out = _cli(monkeypatch, capsys, "keys", action, key,
                             "--state-dir", str(states[i % 3]))
            assert code == 0, out
            wait(lambda b=before: _advanced(states, b), 5)  # still exchanging
            before = _versions(states)
        code, out = _cli(monkeypatch, capsys, "keys", "remove", new, "--state-dir",
                         str(states[0]))
        assert code == 2 and "is the primary" in out
        code, out = _cli(monkeypatch, capsys, "keys", "list", "--state-dir", str(states[1]))
        assert code == 0 and new in out and old not in out
        for state in states:
            stats = status(state)["stats"]
            assert stats["forged"] == stats["unknown_key"] == stats["foreign"] == 0, stats
            assert stats["replayed"] == stats["malformed"] == 0, stats
            assert (state / secure.KEYRING).stat().st_mode & 0o777 == 0o600
        # a packet under the removed key is refused now
        ring = secure.Keyring([], secure.parse_key(old))
        stale = _sealed(secure.Envelope(ring, "rot"), ["x", "y"])[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(stale, ("127.0.0.1", ports[0]))
        wait(lambda: status(states[0])["stats"]["unknown_key"] == 1, 5)
    finally:
        errs = []
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            try:
                errs.append(proc.communicate(timeout=10)[1])
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)
    assert all("encrypted and authenticated" in e and "'rot'" in e for e in errs), errs
