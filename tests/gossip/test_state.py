"""The CPU a node's processes use, as the daemon publishes it (:class:`CpuMeter`), read from a
/proc written by the test: the kernel's totals on a real node, the processes of the daemon's
network namespace on an emulated one, and the share of shoal's PEs in both."""

import os

import pytest

from shoal.gossip.state import MIN_SPAN, CpuMeter

HZ = os.sysconf("SC_CLK_TCK")


def write_stat(proc, busy_ticks: int) -> None:
    # user nice system idle iowait irq softirq steal: busy = user + nice + system + irq + ...
    a, b, c, irq = busy_ticks // 2, busy_ticks // 4, busy_ticks // 8, 0
    rest = busy_ticks - a - b - c
    (proc / "stat").write_text(f"cpu  {a} {b} {c} 99999 77 {irq} {rest} 0 0 0\ncpu0 1 2 3\n")


def write_pid(proc, pid: int, ticks: int, ns: str, shoal: bool = False,
              name: str = "py (x) y") -> None:
    d = proc / str(pid)
    (d / "ns").mkdir(parents=True, exist_ok=True)
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(ticks - ticks // 3),
              str(ticks // 3), "0", "0"]
    (d / "stat").write_text(f"{pid} ({name}) " + " ".join(fields) + "\n")
    (d / "environ").write_bytes(b"A=1\0" + (b"SHOAL_JOBDIR=/j\0" if shoal else b""))
    link = d / "ns" / "net"
    if not link.is_symlink():
        link.symlink_to(ns)


def in_namespace(proc, ns: str) -> None:
    (proc / "self" / "ns").mkdir(parents=True)
    (proc / "self" / "ns" / "net").symlink_to(ns)


def test_a_real_node_counts_the_kernels_busy_ticks_and_shoals_processes_apart(tmp_path):
    proc = tmp_path
    write_stat(proc, 1000)
    write_pid(proc, 7, 100, "net:[1]", shoal=True)
    write_pid(proc, 8, 50, "net:[1]")
    meter = CpuMeter(str(proc), scope="node")
    assert meter.sample(0.0) == (0.0, 0.0)  # one sample: no span yet
    write_stat(proc, 1000 + 3 * HZ)  # 3 cores busy over 1 s ...
    write_pid(proc, 7, 100 + HZ // 2, "net:[1]", shoal=True)  # ... half of one by a PE
    write_pid(proc, 9, HZ // 2, "net:[1]", shoal=True)  # a PE started within the span
    write_pid(proc, 8, 50 + HZ, "net:[1]")  # (the kernel's totals count the others)
    busy, shoal = meter.sample(1.0)
    assert busy == pytest.approx(3.0) and shoal == pytest.approx(1.0)
    write_stat(proc, 1000 + 4 * HZ)
    assert meter.sample(1.0 + MIN_SPAN / 2) == (busy, shoal)  # too soon: the last figures


def test_an_emulated_node_counts_the_processes_of_its_network_namespace(tmp_path):
    proc = tmp_path
    write_stat(proc, 0)  # the machine's totals are not this node's
    in_namespace(proc, "net:[5]")
    write_pid(proc, 10, 0, "net:[5]")
    write_pid(proc, 11, 0, "net:[5]", shoal=True)
    write_pid(proc, 12, 0, "net:[6]", shoal=True)
    meter = CpuMeter(str(proc), scope="netns")
    meter.sample(0.0)
    write_pid(proc, 10, 2 * HZ, "net:[5]")  # a burner, 2 s of CPU in 2 s
    write_pid(proc, 11, HZ, "net:[5]", shoal=True)  # a PE, half a core
    write_pid(proc, 12, 4 * HZ, "net:[6]", shoal=True)  # another node's PE
    write_pid(proc, 13, HZ // 2, "net:[5]")  # started within the span: all of it counts
    busy, shoal = meter.sample(2.0)
    assert busy == pytest.approx(1.75) and shoal == pytest.approx(0.5)
    (proc / "10" / "stat").unlink()  # the burner ends: no negative share
    busy, shoal = meter.sample(4.0)
    assert busy == 0.0 and shoal == 0.0


def test_the_scope_is_the_namespace_only_in_a_named_network_namespace(tmp_path):
    named = tmp_path / "netns"
    named.mkdir()
    (named / "n2").write_text("")
    inode = os.stat(named / "n2").st_ino
    for ns, scope in ((f"net:[{inode}]", "netns"), (f"net:[{inode + 1}]", "node")):
        proc = tmp_path / f"proc-{scope}"
        (proc / "self" / "ns").mkdir(parents=True)
        (proc / "self" / "ns" / "net").symlink_to(ns)
        assert CpuMeter(str(proc), named=str(named)).scope == scope
    assert CpuMeter(named=str(tmp_path / "none")).scope == "node"
