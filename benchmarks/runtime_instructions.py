"""Instructions per message of the runtime's hot paths, under callgrind (one process, no MPI
traffic between processes), for this tree and optionally an earlier commit.

A busy machine changes timings a lot and instruction counts not at all, so a change of a
few percent in the hot path shows here when ``runtime_ab.py`` cannot see it. Each path runs
n messages on one element (the Counter of ``runtime_percall.py``) with collection switched
on around the loop only; a path's figure is (I(n2) - I(n1)) / (n2 - n1), so what is paid
once drops out. Paths:

- ``receive``: the envelope of ``proxy[0].take(k)`` from PE 1 as it comes off the network
  (a CALL where the tree has that kind, else an INVOKE), handler to entry method;
- ``send``: ``proxy[0].take(k)`` to an element of the same PE, up to its queue entry;
- ``loop``: a queued local message taken and run by the scheduler loop;
- ``index``, ``index2``: ``self.thisProxy[0].take(k)`` (``[0, 0]`` in a 2-D array) in an
  element, up to the queue entry;
- ``wire``: send over MPI (to its own rank), poll, receive and run;
- ``netloop``: the loop receives an envelope from MPI, runs it, and the entry method sends
  the next one.

Garbage collection is on, as in a program. Deterministic to about 20 instructions: hash
seed 0, no address randomization (``setarch -R``), one OpenBLAS thread (its idle thread
polls for a time that depends on the wall clock).

``--budget`` prints, for this tree, where each path's instructions per message go: the
self cost of each shared object (the interpreter, ``_pickle``, mpi4py, the MPI library,
libc, numpy) and the interpreter's costliest functions, from the same two runs.

``--pure`` measures this tree under the pure-Python core too (``SHOAL_PURE=1``), beside the
compiled one it runs where it was built (docs/compiled.md); an earlier commit (``--base``) is
measured from its source, pure.

Usage: python benchmarks/runtime_instructions.py [--base REV] [--pure] [--paths receive,send]
           [--n 5000,25000] [--budget]
(needs valgrind and a C compiler, for the client request that switches collection)
"""

import argparse
import ctypes
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("receive", "send", "loop", "index", "index2", "wire", "netloop")
TOGGLE = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


# ---------------------------------------------------------------- in the measured process
def child(path: str, n: int, lib: str) -> None:  # noqa: C901 - one small scene per path
    toggle = ctypes.CDLL(lib).toggle
    from mpi4py import MPI

    import shoal
    from shoal.runtime.context import set_current

    class Counter(shoal.Chare):
        def __init__(self):
            self.n = 0

        def take(self, k):
            self.n += 1

        def burst(self, n, index):
            for k in range(n):
                self.thisProxy[index].take(k)

        def relay(self, k):
            if k < n:
                rt.net.send(0, invoke(cid, "relay", k + 1))
            else:
                rt.running = False

        def stop(self):
            rt.running = False

    def invoke(cid, method, k):  # from PE 1, what the runtime sends for proxy[0].method(k):
        # a CALL (shoal.runtime.protocol) where there is one, else the INVOKE (as the
        # runtime's API had it at 41a547b too)
        if kind is not None:
            return (kind, cid, (0,), method, (k,), (-1, 1), k, 1)
        return (0, cid, (0,), method, (k,), None, (-1, 1), k, 0, None, 1, 0)

    def self_sends():  # MPICH's blocking send to its own rank waits for the receive
        reqs = []
        isend = rt.net.comm.Isend
        rt.net._bsend = lambda data, dest, tag: reqs.append(isend(data, dest, tag))

    rt = shoal.Runtime(MPI.COMM_SELF)
    set_current(rt)
    protocol = sys.modules.get("shoal.runtime.protocol")
    kind = getattr(protocol, "CALL", None)
    create = getattr(rt, "location", rt).create  # (before the managers: rt.create)
    dims = (1, 1) if path == "index2" else (1,)
    proxy = create("array", Counter, dims, None, (), "block")
    cid = proxy.cid
    slot = next(iter(rt.colls[cid].local.values()))
    on_invoke = getattr(rt, "on_invoke", None) or rt._on_invoke
    if kind is not None:
        on_invoke = rt.on_call
    envs = [invoke(cid, "take", k) for k in range(n)]
    element = proxy[(0,) * len(dims)]
    pe = sys.modules.get("shoal.runtime.pe")
    if pe is not None:  # 50x slower under callgrind: a TURN of 1 ms would cut drains short
        pe.TURN = 1e9
    gc.collect()
    if path == "receive":
        toggle()
        for env in envs:
            rt.direct = True
            on_invoke(env)
        toggle()
    elif path == "send":
        toggle()
        for k in range(n):
            element.take(k)
        toggle()
    elif path == "loop":
        for k in range(n):
            element.take(k)
        element.stop()
        rt.running = True
        toggle()
        rt._loop()
        toggle()
        assert slot.obj.n == n
    elif path in ("index", "index2"):
        rt.current = slot
        toggle()
        slot.obj.burst(n, 0 if path == "index" else (0, 0))
        toggle()
    elif path == "wire":
        self_sends()
        net = rt.net
        toggle()
        for env in envs:
            net.send(0, env)
            rt.direct = True
            on_invoke(net.poll())
        toggle()
    elif path == "netloop":
        self_sends()
        rt.net.send(0, invoke(cid, "relay", 0))
        rt.running = True
        toggle()
        rt._loop()
        toggle()
    os._exit(0)  # (the queue holds n entries: no teardown, nothing more to count)


# ---------------------------------------------------------------- the driver
def _expand(names: dict[str, str], text: str) -> str:
    """A callgrind name, ``(id) name`` defining a compressed id or ``(id)`` using one."""
    m = re.match(r"\((\d+)\)(?: (.*))?", text)
    if not m:
        return text
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), text)


def self_costs(out: Path) -> dict[tuple[str, str], int]:
    """Self instructions per (shared object, function) of a callgrind output file (its
    compressed names expanded; a call's inclusive cost, the line after ``calls=``, is the
    callee's and is not counted)."""
    names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
    costs: dict[tuple[str, str], int] = {}
    ob = fn = ""
    skip = False
    for line in out.read_text().splitlines():
        key = line[:3]
        if key in ("ob=", "fn="):
            value = _expand(names[key[:2]], line[3:])
            if key == "ob=":
                ob = value
            else:
                fn = re.sub(r"'\d+$", "", value)  # (f'2: f called from itself)
        elif line.startswith(("cob=", "cfn=")):
            _expand(names[line[1:3]], line[4:])  # (may define a name)
        elif line.startswith("calls="):
            skip = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if not skip and len(parts) > 1:
                costs[ob, fn] = costs.get((ob, fn), 0) + int(parts[1])
            skip = False
    return costs


def budget(n1: int, n2: int, c1: dict[tuple[str, str], int],
           c2: dict[tuple[str, str], int]) -> None:
    """Print per-message self instructions by shared object and the top functions."""
    per = {k: (c2.get(k, 0) - c1.get(k, 0)) / (n2 - n1) for k in set(c1) | set(c2)}
    total = sum(per.values())
    objects: dict[str, float] = {}
    for (ob, _), v in per.items():
        objects[Path(ob).name] = objects.get(Path(ob).name, 0.0) + v
    print(f"    by shared object (of {total:,.0f}):")
    for ob, v in sorted(objects.items(), key=lambda kv: -kv[1])[:8]:
        print(f"      {v:10,.0f}  {v / total:5.1%}  {ob}")
    print("    costliest functions:")
    for (ob, fn), v in sorted(per.items(), key=lambda kv: -kv[1])[:12]:
        print(f"      {v:10,.0f}  {v / total:5.1%}  {fn} ({Path(ob).name})")


def instructions(src: Path, pure: bool, path: str, n: int, lib: str, tmp: str) -> int:
    out = Path(tmp) / f"cg.{path}.{n}"
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1",
               SHOAL_PURE="1" if pure else "0")
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           f"--callgrind-out-file={out}", sys.executable, __file__,
           "--child", path, "--n", str(n), "--lib", lib]
    if shutil.which("setarch"):
        cmd = ["setarch", "-R", *cmd]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=3600)
    total = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
    assert total is not None, f"no totals in {out}"
    return int(total.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="an earlier commit to measure too (e.g. 41a547b)")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--n", default="5000,25000", help="the two message counts")
    ap.add_argument("--pure", action="store_true",
                    help="this tree under the pure-Python core too (SHOAL_PURE=1)")
    ap.add_argument("--budget", action="store_true",
                    help="where this tree's instructions per message go")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, int(args.n), args.lib)
        return
    n1, n2 = (int(x) for x in args.n.split(","))
    from shoal._compiled import core

    with tempfile.TemporaryDirectory() as tmp:
        lib = str(Path(tmp) / "toggle.so")
        (Path(tmp) / "toggle.c").write_text(TOGGLE)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, str(Path(tmp) / "toggle.c")],
                       check=True)
        trees = {"this": (ROOT / "src", False)}
        if args.pure:
            trees = {"pure": (ROOT / "src", True), **trees}
        if args.base:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"],
                                     capture_output=True, check=True).stdout
            (Path(tmp) / "base").mkdir()
            subprocess.run(["tar", "-x", "-C", str(Path(tmp) / "base")], input=archive,
                           check=True)
            trees = {"base": (Path(tmp) / "base" / "src", True), **trees}
        ref = next(iter(trees))  # what "this" is compared with
        print(f"instructions per message, (I({n2}) - I({n1})) / {n2 - n1}; this tree runs "
              f"the {core()} core")
        print(f"{'':10}" + "".join(f"{t:>12}" for t in trees)
              + (f"   this/{ref}" if len(trees) > 1 else ""))
        for path in args.paths.split(","):
            per = {t: (instructions(src, pure, path, n2, lib, tmp)
                       - instructions(src, pure, path, n1, lib, tmp)) / (n2 - n1)
                   for t, (src, pure) in trees.items()}
            line = f"{path:10}" + "".join(f"{v:12,.0f}" for v in per.values())
            if len(trees) > 1:
                line += f"   {per['this'] / per[ref]:.3f}"
            print(line, flush=True)
            if args.budget:  # (the files of the last tree's two runs: this tree's)
                budget(n1, n2, self_costs(Path(tmp) / f"cg.{path}.{n1}"),
                       self_costs(Path(tmp) / f"cg.{path}.{n2}"))


if __name__ == "__main__":
    main()
