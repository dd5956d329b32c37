"""Shrink and expand a running job on command (issue 14, section 3; Acun14 Fig. 5: Charm++
took 2.7 s to shrink LeanMD from 256 to 128 cores and 7.2 s to expand it back).

One ``shoal run -n BIG`` of ``examples/resize.py`` (``--elements`` of ``--kib`` KiB each, a
reduction and a short pause per iteration); ``shoal ctl`` then shrinks it to SMALL and
expands it back to BIG, ``--rounds`` times. Each figure is the time from the request to the
job running at the new size with every element restored (what ``shoal ctl`` prints: the wait
for the next iteration, the checkpoint to node-local memory, the end of the old processes,
the start of the new ones and the restore). Printed per move and as medians (min-max);
target: each <= 3 s with 1,000 elements of 64 KiB between 4 and 2 PEs.

Usage: python benchmarks/resize.py [--elements 1000] [--kib 64] [--pes 4x2] [--rounds 3]
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shoal import jobdir as jd

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "resize.py"
TARGET = 3.0  # seconds per move


def wait_running(home: Path, pes: int, job: subprocess.Popen) -> None:
    while (jd.read_json(home / jd.RUNNING) or {}).get("pes") != pes:
        if job.poll() is not None:
            sys.exit(f"the job ended early: {job.communicate()}")
        time.sleep(0.05)


def move(home: Path, command: str, pes: int) -> float:
    out = subprocess.run([sys.executable, "-m", "shoal", "ctl", str(home), command, str(pes),
                          "--wait", "120s"], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"shoal ctl {command} {pes} failed: {out.stderr}")
    return float(re.search(r"in ([0-9.]+) s", out.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1000)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--pes", default="4x2", help="BIGxSMALL")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    big, small = (int(v) for v in args.pes.split("x"))
    home = Path(tempfile.mkdtemp(prefix="shoal-resize-bench-")) / "job"
    print(f"{args.elements} elements of {args.kib} KiB "
          f"({args.elements * args.kib / 1024:.0f} MiB), {big} <-> {small} PEs", flush=True)
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", str(big), "--jobdir",
                            str(home), str(EXAMPLE), "--elements", str(args.elements),
                            "--kib", str(args.kib), "--iterations", "1000000",
                            "--pause", "0.01"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    times: dict[str, list[float]] = {"shrink": [], "expand": []}
    try:
        wait_running(home, big, job)
        for k in range(args.rounds):
            for command, pes in (("shrink", small), ("expand", big)):
                seconds = move(home, command, pes)
                times[command].append(seconds)
                print(f"round {k + 1}: {command} to {pes} PEs in {seconds:.2f} s", flush=True)
    finally:
        job.terminate()
        job.wait(timeout=60)
    for command, values in times.items():
        print(f"{command}: median {statistics.median(values):.2f} s "
              f"({min(values):.2f}-{max(values):.2f}) over {len(values)}, target <= "
              f"{TARGET:g} s: {'met' if statistics.median(values) <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
