"""Checkpoint write and restart read rates against ``dd`` on the same filesystem, 2 PEs.

Each run: ``dd if=/dev/zero bs=4M conv=fdatasync`` writes as many bytes as the checkpoint
holds (the disk's sequential write rate); a job on 2 PEs builds ``--elements`` elements
holding ``--gib`` GiB of numpy state in all and times ``await shoal.checkpoint(...)`` in
``main`` (quiescence, both shards written in parallel with their sha256, fsync, commit);
then the checkpoint's files and dd's are evicted from the page cache
(``posix_fadvise(DONTNEED)`` on the fsync'ed files: dropping every cache needs root, this
does not) and ``dd`` reads its file back (the sequential read rate) while a job on 2 PEs
restarts from the checkpoint (each PE reads and verifies its shard: the slower PE's time
counts). Printed per run and as medians (min-max) of ``--runs``: rates in MB/s and the
ratios to dd. Targets (issue 14): write >= 50% of dd's write rate; restart reads at least
as fast as the checkpoint was written.

Usage: python benchmarks/checkpoint.py [--gib 1] [--elements 64] [--runs 3] [--dir DIR]
(DIR default: ./checkpoint-bench, removed afterwards; it must have room for 2x the state)
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import shoal

MB = 1e6


class Block(shoal.Chare):
    def __init__(self, nbytes):
        self.data = np.full(nbytes // 8, float(self.thisIndex[0]))


class Clock(shoal.Chare):
    def restore_seconds(self):
        from shoal.runtime.context import current

        return current().checkpoints.restore_seconds


async def write_main(where, elements, nbytes):
    shoal.Array(Block, elements, args=(nbytes,))
    await shoal.quiescence()
    t0 = time.perf_counter()
    info = await shoal.checkpoint(where, {"elements": elements})
    print(f"WRITE {info['bytes']} {time.perf_counter() - t0}", flush=True)


async def read_main(where, elements, nbytes):
    assert shoal.restored() == {"elements": elements}
    seconds = await shoal.Group(Clock).restore_seconds(ret=True)
    print(f"READ {max(seconds)}", flush=True)


def evict(path: Path) -> None:
    """Drop the (fsync'ed, clean) pages of every file under ``path`` from the page cache."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dd(args: list[str]) -> float:
    """Run dd; its own figure of seconds."""
    out = subprocess.run(["dd", *args], capture_output=True, text=True, check=True)
    return float(re.search(r"copied, ([0-9.e+-]+) s", out.stderr).group(1))


def one_run(where: Path, gib: float, elements: int) -> dict:
    from shoal.launch import mpiexec

    nbytes = int(gib * 2**30) // elements // 8 * 8
    total = nbytes * elements
    blocks = total // (4 << 20)
    ddfile = where / "dd.bin"
    dd_write = total / dd(["if=/dev/zero", f"of={ddfile}", "bs=4M", f"count={blocks}",
                           "conv=fdatasync"])
    ck = where / "ck"
    shutil.rmtree(ck, ignore_errors=True)
    cmd = [*mpiexec(), "-n", "2", sys.executable, __file__, "--job"]
    out = subprocess.run([*cmd, "write", str(ck), str(elements), str(nbytes)],
                         capture_output=True, text=True, check=True)
    written, seconds = out.stdout.split("WRITE ")[1].split()[:2]
    write = int(written) / float(seconds)
    evict(ddfile)
    dd_read = total / dd([f"if={ddfile}", "of=/dev/null", "bs=4M"])
    ddfile.unlink()
    evict(ck)
    out = subprocess.run([*cmd, "read", str(ck), str(elements), str(nbytes)],
                         capture_output=True, text=True, check=True)
    read = int(written) / float(out.stdout.split("READ ")[1].split()[0])
    shutil.rmtree(ck)
    return {"dd_write": dd_write / MB, "write": write / MB, "dd_read": dd_read / MB,
            "read": read / MB, "bytes": int(written)}


def median(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    if "--job" in sys.argv:
        mode, where, elements, nbytes = sys.argv[sys.argv.index("--job") + 1:][:4]
        if mode == "write":
            shoal.start(write_main, where, int(elements), int(nbytes))
        else:
            shoal.start(read_main, where, int(elements), int(nbytes), restart=where)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0, help="GiB of element state")
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="checkpoint-bench")
    a = ap.parse_args()
    where = Path(a.dir)
    where.mkdir(parents=True, exist_ok=True)
    runs = []
    print(f"{a.gib} GiB in {a.elements} elements on 2 PEs, into {where.resolve()}; MB/s")
    print("run   dd write  ckpt write  ratio    dd read  restart  ratio  restart/write")
    try:
        for k in range(a.runs):
            r = one_run(where, a.gib, a.elements)
            runs.append(r)
            print(f"{k + 1:3d}  {r['dd_write']:9.0f}  {r['write']:10.0f}  "
                  f"{r['write'] / r['dd_write']:5.2f}  {r['dd_read']:9.0f}  {r['read']:7.0f}  "
                  f"{r['read'] / r['dd_read']:5.2f}  {r['read'] / r['write']:12.2f}",
                  flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    col = {key: [r[key] for r in runs] for key in runs[0]}
    ratio = [r["write"] / r["dd_write"] for r in runs]
    back = [r["read"] / r["write"] for r in runs]
    print(f"median (min-max) of {a.runs}: dd write {median(col['dd_write'])}, checkpoint "
          f"write {median(col['write'])}, dd read {median(col['dd_read'])}, restart read "
          f"{median(col['read'])}")
    print(f"write / dd write: {statistics.median(ratio):.2f} ({min(ratio):.2f}-"
          f"{max(ratio):.2f}), target >= 0.50; restart read / checkpoint write: "
          f"{statistics.median(back):.2f} ({min(back):.2f}-{max(back):.2f}), target >= 1")


if __name__ == "__main__":
    main()
