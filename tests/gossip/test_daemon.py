"""The gossip node daemon: daemons on loopback ports in subprocesses learn each other and a
user key, answer status, /status and /metrics, drop garbage, stop cleanly on SIGTERM and come
back with a version that did not go back. Every subprocess has a timeout and is killed in a
``finally``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from daemons import free_ports, status, wait

from shoal.gossip import packet
from shoal.gossip.analysis import expected_age, window_entries

N, INTERVAL, WINDOW = 5, 0.1, 0.4
CLI = [sys.executable, "-c", "from shoal.cli.main import main; main()"]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env





class Cluster:
    def __init__(self, root: Path, n: int):
        self.root, self.ports = root, free_ports(n + 1)
        self.http = self.ports.pop()
        self.procs: dict[int, subprocess.Popen] = {}

    def state(self, k: int) -> Path:
        return self.root / f"d{k}"

    def start(self, k: int) -> subprocess.Popen:
        args = [*CLI, "gossip", "daemon", "--bind", f"127.0.0.1:{self.ports[k]}",
                "--interval", f"{int(INTERVAL * 1000)}ms", "--window", f"{int(WINDOW * 100)}%",
                "--state-dir", str(self.state(k)), "--name", f"node{k}"]
        if k:
            args += ["--join", f"127.0.0.1:{self.ports[0]}"]
        else:
            args += ["--http", f"127.0.0.1:{self.http}"]
        self.procs[k] = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
        return self.procs[k]

    def stop(self, k: int, timeout: float = 10) -> tuple[int, str]:
        proc = self.procs.pop(k)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out + err

    def kill_all(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.communicate(timeout=10)
        self.procs.clear()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("gossipd"), N)
    try:
        for k in range(N):
            c.start(k)
        for k in range(N):
            wait(lambda k=k: status(c.state(k)), 30)
        yield c
    finally:
        c.kill_all()


def _knows_all(state: Path, n: int) -> dict | None:
    s = status(state)
    return s if s and len(s["nodes"]) == n else None


def test_every_daemon_learns_every_other_within_the_expected_age(cluster):
    # the expected age of an entry is A_v units (the paper's formula); a record reaches every
    # node well within a few A_v once the nodes know each other: 6 A_v plus the join (every
    # node reaches the seed within one interval, which sends to it within N intervals)
    a_v = expected_age(N, window_entries(N, WINDOW))
    bound = (6 * a_v + N + 2) * INTERVAL + 2.0  # + 2 s for 5 Pythons on 2 cores
    start = time.monotonic()
    views = [wait(lambda k=k: _knows_all(cluster.state(k), N), bound) for k in range(N)]
    assert time.monotonic() - start < bound
    for k, view in enumerate(views):
        names = {n["name"] for n in view["nodes"]}
        assert names == {f"node{j}" for j in range(N)}
        assert view["nodes"][0]["self"] and view["nodes"][0]["name"] == f"node{k}"
        me = view["nodes"][0]
        assert me["cores"] == os.cpu_count() and me["free_mem"] > 0
        assert view["stats"]["malformed"] == 0
    time.sleep(10 * INTERVAL)  # settled: the mean age is of the order of the formula's
    ages = [status(cluster.state(k))["mean_age"] for k in range(N)]
    assert all(0 < a < 3 * a_v * INTERVAL + 0.2 for a in ages), (ages, a_v * INTERVAL)


def test_a_key_set_on_one_node_appears_on_another(cluster):
    out = subprocess.run([*CLI, "gossip", "set", "rack", "r7", "--state-dir",
                          str(cluster.state(2))], env=_env(), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr

    def seen():
        s = status(cluster.state(4))
        return s and any(n["name"] == "node2" and n["keys"] == {"rack": "r7"}
                         for n in s["nodes"])

    wait(seen, 10)


def test_status_json_http_status_and_metrics_show_the_nodes(cluster):
    wait(lambda: _knows_all(cluster.state(0), N), 10)
    out = subprocess.run([*CLI, "gossip", "status", "--json", "--state-dir",
                          str(cluster.state(0))], env=_env(), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert {n["name"] for n in view["nodes"]} == {f"node{k}" for k in range(N)}
    assert all(n["addr"].startswith("127.0.0.1:") for n in view["nodes"])
    base = f"http://127.0.0.1:{cluster.http}"
    with urllib.request.urlopen(f"{base}/status", timeout=5) as r:
        assert len(json.loads(r.read())["nodes"]) == N
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    assert f"shoal_gossip_nodes {N}" in text
    for k in range(N):
        assert f'shoal_gossip_node_age_seconds{{node="node{k}"}}' in text
    import shoal
    import shoal.cluster  # (the emulated-cluster package: it must not hide the function)

    assert len(shoal.cluster_nodes(cluster.state(0))) == N
    assert shoal.cluster_nodes(cluster.root / "nowhere") == []


def _garbage_packets() -> list[bytes]:
    """Random bytes, real packets truncated, garbled in their header, grown past the cap."""
    import numpy as np

    rng = np.random.default_rng(1)
    rec = np.zeros(3, packet.RECORD)
    for k in range(3):
        rec[k]["name"], rec[k]["addr"], rec[k]["keys"] = f"x{k}".encode(), b"127.0.0.1:9", b"{}"
    ids = np.array([packet.node_id(f"x{k}") for k in range(3)], np.uint32)
    good = packet.encode_window(ids[0], ids, np.array([0.0, 1.0, 2.0]), rec)[0]
    out = [rng.bytes(int(n)) for n in rng.integers(0, 3000, 20)]
    out += [good[:cut] for cut in (0, 5, 19, 20, 21, len(good) - 1)]
    out += [good[:k] + bytes([good[k] ^ 0xFF]) + good[k + 1:] for k in (0, 4, 5, 12, 16)]
    out += [good + b"\0", good * 6]
    bad_name = bytearray(good)
    bad_name[20 + 16 + 44] ^= 1  # the first record's name no longer hashes to its id
    out.append(bytes(bad_name))
    return out


def test_malformed_packets_are_counted_and_dropped(cluster):
    garbage = _garbage_packets()
    before = status(cluster.state(1))["stats"]["malformed"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for data in garbage:
            s.sendto(data, ("127.0.0.1", cluster.ports[1]))
            time.sleep(0.002)
    wait(lambda: status(cluster.state(1))["stats"]["malformed"] - before == len(garbage), 5)
    assert cluster.procs[1].poll() is None
    assert status(cluster.state(1))["stats"]["oversized"] >= 1


def test_sigterm_stops_cleanly_and_the_version_never_goes_back(cluster):
    code, out = cluster.stop(3)
    assert code == 0, out
    assert "the cluster is OPEN" in out  # no key: it said so at its start
    stopped = int(out.rsplit("stopped at version", 1)[1].split()[0])
    saved = json.loads((cluster.state(3) / "state.json").read_text())
    assert saved["version"] > stopped and saved["name"] == "node3"
    assert not (cluster.state(3) / "daemon.pid").exists()
    assert not (cluster.state(3) / "control.sock").exists()
    cluster.start(3)
    wait(lambda: status(cluster.state(3)), 30)

    def peer_has_new_record():
        s = status(cluster.state(0))
        return s and any(n["name"] == "node3" and n["version"] > stopped for n in s["nodes"])

    wait(peer_has_new_record, 10)
    assert status(cluster.state(3))["version"] > stopped


def _state_of(cluster, at: int, name: str) -> str | None:
    s = status(cluster.state(at))
    return next((n["state"] for n in (s or {}).get("nodes", []) if n["name"] == name), None)


def test_a_killed_daemon_is_declared_dead_and_alive_again_when_it_comes_back(cluster):
    # suspected past the age law's 5% tail (N=5, W=2 at 40%), dead after 6 unanswered
    # probes a third of an interval apart; the others stay alive throughout
    from shoal.gossip.daemon import LOOKS, PROBES, DaemonConfig
    from shoal.gossip.health import Detector

    tail = DaemonConfig(("127.0.0.1", 0), []).suspect_tail
    limit = Detector(INTERVAL, WINDOW, tail=tail).threshold(N)
    confirm = (PROBES + 1) * INTERVAL / LOOKS
    wait(lambda: all(_state_of(cluster, 0, f"node{k}") == "alive" for k in range(1, N)), 10)
    proc = cluster.procs.pop(4)
    proc.kill()
    proc.communicate(timeout=10)
    killed = time.monotonic()
    wait(lambda: _state_of(cluster, 0, "node4") == "dead", limit + confirm + 5)
    took = time.monotonic() - killed
    assert limit < took + confirm  # not before its entry could be that old
    assert all(_state_of(cluster, 0, f"node{k}") == "alive" for k in (1, 2, 3))
    health = status(cluster.state(0))["health"]
    assert health["dead"] >= 1 and health["probes"] >= PROBES and not health["local_trouble"]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{cluster.http}/metrics",
                                     timeout=5).read().decode()
    assert 'shoal_gossip_node_state{node="node4"} 2' in metrics
    cluster.start(4)  # same state directory: a higher version, believed at once
    wait(lambda: _state_of(cluster, 0, "node4") == "alive", 10)
    assert status(cluster.state(0))["health"]["recovered"] >= 1


@pytest.mark.parametrize("args,says", [
    (["daemon", "--bind", "localhost"], "give host:port"),
    (["daemon", "--bind", "127.0.0.1:1", "--interval", "0s"], "--interval must be positive"),
    (["daemon", "--bind", "127.0.0.1:1", "--window", "0%"], "--window"),
    (["daemon", "--bind", "127.0.0.1:1", "--http", "8.8.8.8:80"], "localhost only"),
    (["daemon", "--bind", "127.0.0.1:1", "--join", "no.such.host.invalid:1"], "resolve"),
    (["daemon", "--bind", "127.0.0.1:1", "--name", "x" * 65], "1 to 64 bytes"),
    (["daemon", "--bind", "127.0.0.1:1", "--suspect-tail", "0.7"], "--suspect-tail"),
    (["daemon", "--bind", "127.0.0.1:0", "LOSS=1.5"], "SHOAL_GOSSIP_LOSS='1.5'"),
    (["status"], "no gossip daemon answers"),
])
def test_bad_input_exits_2_saying_what_to_change(args, says, tmp_path, monkeypatch, capsys):
    from shoal.cli.main import main

    extra = ["--state-dir", str(tmp_path)]
    for arg in [a for a in args if a.startswith("LOSS=")]:  # (an environment variable)
        monkeypatch.setenv("SHOAL_GOSSIP_LOSS", arg[5:])
        args = [a for a in args if a != arg]
    monkeypatch.setattr(sys, "argv", ["shoal", "gossip", *args, *extra])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_a_busy_port_or_a_running_daemon_is_refused(cluster, tmp_path, monkeypatch, capsys):
    from shoal.cli.main import main

    for argv in (["--bind", f"127.0.0.1:{cluster.ports[0]}", "--state-dir", str(tmp_path)],
                 ["--bind", "127.0.0.1:0", "--state-dir", str(cluster.state(0))]):
        monkeypatch.setattr(sys, "argv", ["shoal", "gossip", "daemon", *argv])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "cannot bind" in err and "runs with --state-dir" in err


def test_detach_writes_a_pid_file_and_sigterm_stops_it(tmp_path):
    state, port = tmp_path / "bg", free_ports(1)[0]
    out = subprocess.run([*CLI, "gossip", "daemon", "--bind", f"127.0.0.1:{port}",
                          "--state-dir", str(state), "--detach"], env=_env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    pid = 0
    try:
        wait(lambda: status(state), 20)
        pid = int((state / "daemon.pid").read_text())
        assert pid != os.getpid()
        os.kill(pid, signal.SIGTERM)
        wait(lambda: not (state / "daemon.pid").exists(), 10)
        assert "stopped at version" in (state / "daemon.log").read_text()
    finally:
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_jobs_and_pes_are_found_from_the_job_directories(tmp_path):
    from shoal.gossip.state import shoal_jobs

    job, proc = tmp_path / "job", tmp_path / "proc"
    (job / "pes").mkdir(parents=True)
    host = socket.gethostname()
    (job / "pes" / f"{os.getpid()}@{host}").write_text("0\n")
    (job / "pes" / f"{os.getppid()}@{host}").write_text("1\n")
    (job / "pes" / f"{os.getpid()}@otherhost").write_text("2\n")
    (proc / "123").mkdir(parents=True)
    (proc / "123" / "environ").write_bytes(f"A=1\0SHOAL_JOBDIR={job}\0".encode())
    jobs = shoal_jobs(host, proc=str(proc))
    assert {os.getpid(), os.getppid()} in jobs  # /tmp may hold a job of another test too
    assert shoal_jobs("nohost", proc=str(proc)) == []
