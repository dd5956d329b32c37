"""A/B of the runtime's speed: this tree against an earlier commit, jobs interleaved in one run.

The same measuring programs (this tree's ``benchmarks/runtime_messaging.py --job shoal`` and
``examples/stencil2d.py`` on 2 PEs, and ``benchmarks/runtime_percall.py`` in one process,
which a busy machine disturbs least) run against each version of ``src/shoal`` in turn, the
earlier one extracted by ``git archive`` into a temporary directory and put first on
``PYTHONPATH``. Rounds alternate which version goes first, so the machine's slow spells hit
both alike. Printed per figure: median (min-max) of each version and the ratio this/base, marked
"better" or "worse".

Usage: python benchmarks/runtime_ab.py [--base REV] [--rounds 5] [--repeat 3]
Default base: the commit before the runtime-architecture change (core + managers).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from shoal.launch import mpiexec

ROOT = Path(__file__).resolve().parent.parent
BASE = "41a547b"  # the last commit with the Runtime(Mobility, Collectives) mixins
MESSAGING = ROOT / "benchmarks" / "runtime_messaging.py"
STENCIL = ROOT / "examples" / "stencil2d.py"
PERCALL = ROOT / "benchmarks" / "runtime_percall.py"
# figure: (label, scale to the printed unit, True if higher is better)
FIGURES = {"latency": ("8-byte call one-way (us)", 1e6, False),
           "rate": ("small messages PE0 -> PE1 (k msg/s)", 1e-3, True),
           "big": ("1 MiB array one-way (us)", 1e6, False),
           "stencil": ("stencil 4096^2, 4x4 blocks (ms/iter)", 1.0, False),
           "receive": ("in-process: receive and run (ns/msg)", 1.0, False),
           "send": ("in-process: local send (ns/msg)", 1.0, False)}


def extract(rev: str, into: Path) -> Path:
    """``src/`` of commit ``rev`` under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def job(src: Path, argv: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([*mpiexec(), "-n", "2", sys.executable, *argv], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{argv[0]} against {src} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def measure(src: Path, repeat: int, iters: int) -> dict[str, list[float]]:
    out = job(src, [str(MESSAGING), "--job", "shoal", "--repeat", str(repeat)])
    res = json.loads(next(x for x in out.splitlines() if x.startswith("{")))
    figures = {k: res[k] for k in ("latency", "rate", "big")}
    out = job(src, [str(STENCIL), "--n", "4096", "--blocks", "4", "--iters", str(iters)])
    figures["stencil"] = [float(re.search(r"([\d.]+) ms per iteration", out).group(1))]
    out = subprocess.run([sys.executable, str(PERCALL), "--json"], capture_output=True,
                         text=True, timeout=600, check=True,
                         env=dict(os.environ, PYTHONPATH=str(src))).stdout
    figures.update(json.loads(out))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help="the commit to compare against")
    ap.add_argument("--rounds", type=int, default=5, help="jobs per version and program")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per messaging job")
    ap.add_argument("--iters", type=int, default=30, help="stencil iterations per job")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": extract(args.base, Path(tmp)), "this": ROOT / "src"}
        res: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
        for r in range(args.rounds):
            order = ["base", "this"] if r % 2 == 0 else ["this", "base"]
            for tree in order:
                for key, values in measure(trees[tree], args.repeat, args.iters).items():
                    res[tree].setdefault(key, []).extend(values)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"2 PEs, {args.rounds} interleaved rounds; base {args.base}, this tree at {head} "
          "(plus uncommitted changes)")
    print(f"{'':40}{'base':>24}{'this':>24}   this/base")
    for key, (label, scale, higher) in FIGURES.items():
        cells = ""
        for tree in trees:
            v = [x * scale for x in res[tree][key]]
            cells += f"{statistics.median(v):10.1f} ({min(v):.1f}-{max(v):.1f})".rjust(24)
        ratio = statistics.median(res["this"][key]) / statistics.median(res["base"][key])
        better = (ratio > 1) == higher
        print(f"{label:40}{cells}   {ratio:.3f} ({'better' if better else 'worse'})")


if __name__ == "__main__":
    main()
