"""The compiled kernel gives bit-identical results to the one it was refactored from.

``DIGESTS`` were recorded with the kernel as it stood before its ~30 arguments became named
structures (commit 41a547b): a digest of every scalar of the :class:`SimResult` and of every
array the kernel fills or updates (its measurements and the nodes' final state), the same
on one thread and on two. The cases reach every branch of the kernel but three that these
sizes cannot reach (a rescan that finds more candidates than the list holds, a node's first
own entry into a full list, a full message queue): 2- and 4-byte versions, latency, loss,
deaths during the warm-up and at its end, lists that overflow and are rescanned, windows that
reach entries older than the age bins (exact select), several samples and no snapshots, and
units that end on ticks of dead nodes with no message in flight. A case whose digests a bug
fix changed says so where they are recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

from shoal.gossip import sim, simkernel
from shoal.gossip.sim import SimResult, simulate

CASES = {
    "n64": dict(nodes=64, window=0.2, units=60, seed=0),
    "n64_samples": dict(nodes=64, window=0.2, units=60, seed=5, samples=7, snapshots=3),
    "n200_loss_latency_deaths": dict(nodes=200, window=0.2, units=80, seed=1, loss=0.2,
                                     latency=0.3, dead=0.05),
    "n300_w5": dict(nodes=300, window=5, units=80, seed=2),
    "n1000_w3_loss": dict(nodes=1000, window=3, units=90, seed=3, loss=0.05),
    "n1000_latency_rescans": dict(nodes=1000, window=0.2, units=40, seed=4, latency=1.5,
                                  dead=20, dead_at=12.3, samples=3, snapshots=0),
    "n400_half_window": dict(nodes=400, window=0.5, units=50, seed=6, latency=0.05, loss=0.1,
                             dead=3),
    "n600_deaths_in_warmup": dict(nodes=600, window=12, units=70, seed=7, dead=0.3,
                                  dead_at=5.5, warmup=10),
    "n10_eight_dead": dict(nodes=10, window=5, units=100, seed=12, dead=8, dead_at=2.0),
    "n10_units_end_dead": dict(nodes=10, window=5, units=100, seed=9, dead=8, dead_at=2.0),
    "n100_97pc_loss": dict(nodes=100, window=3, units=200, seed=10, loss=0.97, latency=0.7),
    "int32_versions": dict(nodes=3, window=2, units=32800, warmup=32790, seed=8, samples=1),
}

# what the kernel fills or updates
ARRAYS = ("ver", "cand", "ccount", "overflow", "thr", "ssum", "known", "alive", "hist",
          "max_age", "unit_excl", "unit_incl", "unit_known", "dead_age", "counters")


def digest(part: np.ndarray | str) -> str:
    """The first 16 hex digits of the sha256 of an array (with its type and shape) or text."""
    h = hashlib.sha256()
    if isinstance(part, np.ndarray):
        h.update(f"{part.dtype.str}{part.shape}".encode())
        h.update(np.ascontiguousarray(part).tobytes())
    else:
        h.update(part.encode())
    return h.hexdigest()[:16]


def digests(result: SimResult, arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Digests of the result's scalars (exact: floats in hex; ``expected`` is left out, it is
    the analysis', not the simulator's) and of each of ``ARRAYS``."""
    scalars = {}
    for key, value in vars(result).items():
        if isinstance(value, float):
            scalars[key] = value.hex()
        elif isinstance(value, dict):
            scalars[key] = {p: x.hex() for p, x in value.items()}
        elif not isinstance(value, np.ndarray):
            scalars[key] = value
    del scalars["expected"]
    out = {"result": digest(json.dumps(scalars, sort_keys=True))}
    for name in ARRAYS:
        a = arrays[name]
        if name == "cand":  # beyond ccount, the rows hold whatever np.empty gave
            a = np.concatenate([a[i, :arrays["ccount"][i]] for i in range(a.shape[0])])
        out[name] = digest(a)
    return out


def run_case(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Simulate case ``name`` and return its digests."""
    arrays: dict[str, np.ndarray] = {}
    run = simkernel.run

    def keep(state, cfg, sched, out):
        run(state, cfg, sched, out)
        arrays.update(state._asdict())
        arrays.update(out._asdict())

    with monkeypatch.context() as m:
        m.setattr(simkernel, "run", keep)
        result = simulate(**CASES[name])
    return digests(result, arrays)


DIGESTS = {  # recorded with the kernel of commit 41a547b, unless a comment says otherwise
    "n64": dict(
        result="dc644e9624725fe2", ver="c39242e16febd838", cand="8b9746e8140a9d12",
        ccount="0c45c973547227b1", overflow="468cd8b910d91917", thr="3175fb4066865f84",
        ssum="f75c20eb6048a776", known="8105890e82dcb16a", alive="0df027451b190507",
        hist="450f5852d5c2cb6e", max_age="32b5b023a33a47cd", unit_excl="ddfe5ed5a96489dc",
        unit_incl="f433351d6e32740c", unit_known="cc6111e45c10c968", dead_age="886180457c5fd832",
        counters="f6b87f818b153d02"),
    "n64_samples": dict(
        result="c3bd6486a745ad93", ver="6e0dc0baf104a606", cand="5691dd375f5a9ec2",
        ccount="ff611ea517d83b3e", overflow="468cd8b910d91917", thr="10e2860cad2c996a",
        ssum="e17a0fdffa3e61ce", known="8105890e82dcb16a", alive="0df027451b190507",
        hist="4823ea991b3be2f9", max_age="1f69697d39e30353", unit_excl="eb754f4411925ddb",
        unit_incl="1423b86b0513671a", unit_known="f1f36507516ff4bb", dead_age="886180457c5fd832",
        counters="f6b87f818b153d02"),
    "n200_loss_latency_deaths": dict(
        result="9d61809f7e05eb85", ver="8210a40e485082bc", cand="d7dc545630573fbf",
        ccount="fe68a24cff3be6d2", overflow="3cf7406239132923", thr="15788090e5314bbf",
        ssum="a13d362ab63c8496", known="17613e3269f9cd35", alive="6bb4d1626be610a7",
        hist="f14d2b3712f28fe4", max_age="2fc124bbc386a278", unit_excl="6fa592271d05689b",
        unit_incl="c4850dbbbb2604aa", unit_known="45e911a5cd93bf3f", dead_age="d036a0fa08760982",
        counters="94556f9947e5fdf7"),
    "n300_w5": dict(
        result="e3ede74c6201dd37", ver="037674bb37bd3c45", cand="cce4aec772fa2752",
        ccount="72669b88bbfa6f70", overflow="e3ebe6b58087692b", thr="b2b9ed9d2e3682f3",
        ssum="ac746660d2a1190b", known="c0ba28e5323eaaec", alive="3b1edbf9ece78d86",
        hist="803adb2da041adb3", max_age="bb9adf905bc7efba", unit_excl="25a570b9dacb1391",
        unit_incl="20af7beca4af2f50", unit_known="c071ef26d61fc80c", dead_age="463b757db1820985",
        counters="407e12eaa2b9a46e"),
    "n1000_w3_loss": dict(
        result="1460a810989c2925", ver="b2f8cd1769b5fcbc", cand="4d722e6a692ad336",
        ccount="f4b7aabe93d185b7", overflow="96a195cccec9cd7f", thr="8021df86f14594a5",
        ssum="96d42a02bb083c5a", known="d74d24ba7b9c7877", alive="4bbb9f550ae5f70b",
        hist="33964e3b21a5a8ba", max_age="c8bbd6be7e571bca", unit_excl="9e424109b21a121c",
        unit_incl="a6ac640e7b0eb27d", unit_known="0da947901a05f147", dead_age="47396ad3edcd00d8",
        counters="473e64212d238c69"),
    "n1000_latency_rescans": dict(
        result="6e2013e8921ae20d", ver="d76e05c2bfba7fdb", cand="08649702a8c188a1",
        ccount="d502e3048e19e40a", overflow="96a195cccec9cd7f", thr="9d1d47af90acc2da",
        ssum="0aadb10df7ecc911", known="7191dc6a0babd2af", alive="54c459dde8d0a408",
        hist="4eaf90c61adc7ff6", max_age="7f772bdf682f6906", unit_excl="134eff83376fbdb3",
        unit_incl="756394d533b142dc", unit_known="05529780695e28a8", dead_age="4de59fff4f7ba7bc",
        counters="f3c5d07f0c9f0d6b"),
    "n400_half_window": dict(
        result="14b9e6a1b4f7f225", ver="9e4fadc0ba758aaa", cand="fcdb439c5f76a474",
        ccount="849fedd6930c49f5", overflow="d4706353381b5aaf", thr="4936b41899ac66dc",
        ssum="aa25ee301facd57d", known="b8a2a657624663e0", alive="32028f93daed4eae",
        hist="43941baf5aa5c194", max_age="ea7b8d87099ac831", unit_excl="1fbe4a2a60d74630",
        unit_incl="b79fd92f47be697a", unit_known="a0d5e6cff155a71d", dead_age="5eec800382d7dcc8",
        counters="15c375fe08a971b9"),
    "n600_deaths_in_warmup": dict(
        result="cdef579ea5448407", ver="f411483b36b6faf6", cand="80eb777dccdd4a2f",
        ccount="a966090e2f2e0327", overflow="6dd52b05a2f36636", thr="0d635fb1484336f5",
        ssum="09ac226a412d516a", known="a483325ae797edf0", alive="46c03ea737e9e51c",
        hist="555c3aae9505f9c7", max_age="2500de8d5bd8ef60", unit_excl="9fdf364ab1302850",
        unit_incl="4858293ffab0096f", unit_known="5446a24841dc588a", dead_age="2204e3ed78a9b39b",
        counters="7fb9552fedaf52aa"),
    # dead-tick fix: samples no longer follow later ticks; now matches test_sim's reference
    "n10_eight_dead": dict(
        result="ff6d82cfd8e0710f", ver="84e28a27346a0b04", cand="78dc1b76801a00cf",
        ccount="52d921dcc282b44d", overflow="6f5204fa2d09a529", thr="70da66d188dbbcb2",
        ssum="1730486176898bca", known="5c0ddf6be7d7c8f2", alive="5be2d0b653e45caf",
        hist="22ecca74589a96a7", max_age="418ed8006ec6a6ce", unit_excl="f83319a92a9fb49e",
        unit_incl="0e043528fba27249", unit_known="d9117b4a494080f7", dead_age="b99f2202b5accd4c",
        counters="7524e98c677ab48f"),
    # new with the dead-tick fix (the original kernel crashed); matches test_sim's reference
    # cand: full-list fix, the full lists no longer lose an entry to a duplicate (same run)
    "n10_units_end_dead": dict(
        result="3263b79833d60e6b", ver="52f8f31dda4d82b7", cand="d05ccd72c1548757",
        ccount="b796249b85f41b9c", overflow="6f5204fa2d09a529", thr="574bc7b004b1ddb2",
        ssum="2d3611ecd3ba087d", known="36d95a17a5cf8e36", alive="085229b70ba62215",
        hist="e08e07969c279b18", max_age="a37c91f45260919f", unit_excl="f3f0c8f7f8140ac3",
        unit_incl="c532a44e318e02d5", unit_known="d9117b4a494080f7", dead_age="42c32f1b7e6eb841",
        counters="e8aca624f608b133"),
    "n100_97pc_loss": dict(
        result="cb74e800c1e10034", ver="c105ee5610bc98ba", cand="5ea21d71b9b471ae",
        ccount="d5d313b050c187e6", overflow="277aa00c05d79022", thr="fc38aefc336e5b14",
        ssum="f33a06088ba6e0bc", known="439dd7f44faae745", alive="c8fd5c59e328435c",
        hist="cd48b887d79c81eb", max_age="04401976f22839fc", unit_excl="3d8174f39e1a1f74",
        unit_incl="993e870c286d5524", unit_known="fb3f211b88c03e51", dead_age="a279a0e19f3c939d",
        counters="1f27e73a5c302e1c"),
    # full-list fix: lists of 3 (= N) lost an entry when full; now matches test_sim's reference
    "int32_versions": dict(
        result="8b4409bda900d525", ver="00d5a56186795858", cand="b5cf5201b8749884",
        ccount="73343db88083451e", overflow="946b49a89406b381", thr="142bf26f987f074b",
        ssum="3ea1a5ece41dbe1b", known="ac15a47c86762fa3", alive="85a1049e5555f107",
        hist="bb1359c51069083f", max_age="6b0457942be9ca59", unit_excl="593c9dc93f0b950d",
        unit_incl="49241db3ba55cfd4", unit_known="89206cf3a9c0bb32", dead_age="29079763ae91d344",
        counters="b29d7118bddaa0da"),
}


@pytest.mark.parametrize("name", CASES)
def test_bit_identical_to_the_original_kernel(name, monkeypatch):
    assert run_case(name, monkeypatch) == DIGESTS[name]


@pytest.mark.parametrize("name", ["n200_loss_latency_deaths", "n1000_latency_rescans"])
def test_bit_identical_on_one_thread(name, monkeypatch):
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        got = run_case(name, monkeypatch)
    finally:
        numba.set_num_threads(threads)
    assert got == DIGESTS[name]


def test_openmp_threads_sleep_between_regions_unless_the_user_chose():
    """Spinning OpenMP threads took the cores a busy machine's simulation needed (module
    doc): the module asks for passive waiting, and a user's own choice stays."""
    code = "import os, shoal.gossip.simkernel; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for given, seen in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env if given is None else {**env, "OMP_WAIT_POLICY": given},
                             timeout=60, check=True)
        assert out.stdout.strip() == seen


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # (the stand-in kernel measures nothing)
def test_small_runs_go_on_one_thread_large_ones_on_numbas_and_the_count_is_restored(monkeypatch):
    # a run below PARALLEL_NODES executes its events on the calling thread (waking OpenMP's
    # threads for each short region cost more: sim.py), and the caller's thread count stays
    seen = []

    def lanes(state, cfg, sched, out):
        seen.append((cfg.lanes, numba.get_num_threads()))

    threads = numba.get_num_threads()
    monkeypatch.setattr(simkernel, "run", lanes)
    simulate(nodes=64, units=4, seed=1)
    simulate(nodes=sim.PARALLEL_NODES, units=4, seed=1)
    assert seen == [(1, 1), (threads, threads)]
    assert numba.get_num_threads() == threads
