"""Checkpoint write and restart read rates against ``dd`` on the same filesystem, 2 PEs.

Each run: ``dd`` writes as many bytes as the checkpoint holds, with the same durability
(``conv=fdatasync``: on disk when it ends, as the checkpoint's fsyncs make it), once through
the page cache and once with ``oflag=direct``; the disk's sequential write rate is the
faster of the two (the checkpoint writes with direct I/O where the file system has it, so
the comparison is against the best dd does either way). A job on 2 PEs builds
``--elements`` elements holding ``--gib`` GiB of numpy state in all and times ``await
shoal.checkpoint(...)`` in ``main`` (quiescence, both shards written in parallel with their
sha256, fsync, commit). Then every file is evicted from the page cache
(``posix_fadvise(DONTNEED)`` on the fsync'ed files: dropping every cache needs root, this
does not), ``dd`` reads its two files back (page cache and ``iflag=direct``; the faster is
the sequential read rate) and a job on 2 PEs restarts from the checkpoint (each PE reads
and verifies its shard: the slower PE's time counts). The dd runs and the checkpoint
alternate in every run. Printed per run and as medians (min-max) of ``--runs``: rates in
MB/s and the ratios to dd, and the kernel seconds of the slower PE's restore ("restart sys
s"): a restart lands the state in memory the process has not touched before, and faulting it
in is kernel time the write does not pay (its state exists). On a virtual machine whose
balloon reports free pages to the host, that first touch costs 0.03-0.9 s per 512 MiB from
run to run; the column shows how much of a slow restart it was. Targets (issue 14): write
>= 50% of dd's write rate; restart reads at least as fast as the checkpoint was written.

Usage: python benchmarks/checkpoint.py [--gib 1] [--elements 64] [--runs 5] [--dir DIR]
(DIR default: ./checkpoint-bench, removed afterwards; it must have room for 3x the state)
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

        ck = current().checkpoints
        return ck.restore_seconds, ck.restore_sys


async def write_main(where, elements, nbytes):
    shoal.Array(Block, elements, args=(nbytes,))
    await shoal.quiescence()
    t0 = time.perf_counter()
    info = await shoal.checkpoint(where, {"elements": elements})
    print(f"WRITE {info['bytes']} {time.perf_counter() - t0}", flush=True)


async def read_main(where, elements, nbytes):
    assert shoal.restored() == {"elements": elements}
    seconds, sys_seconds = zip(*await shoal.Group(Clock).restore_seconds(ret=True),
                                 strict=True)
    print(f"READ {max(seconds)} {max(sys_seconds)}", flush=True)


def evict(path: Path) -> None:
    """Drop the (fsync'ed, clean) pages of every file under ``path`` from the page cache."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dd(*args: str) -> float:
    """Run dd; its rate in bytes/s from its own figures of bytes and seconds."""
    out = subprocess.run(["dd", "bs=4M", *args], capture_output=True, text=True, check=True)
    found = re.search(r"^(\d+) bytes.*copied, ([0-9.e+-]+) s", out.stderr, re.M)
    assert found, out.stderr
    return int(found.group(1)) / float(found.group(2))


def one_run(where: Path, gib: float, elements: int) -> dict:
    from shoal.launch import mpiexec

    nbytes = int(gib * 2**30) // elements // 8 * 8
    blocks = -(-nbytes * elements // (4 << 20))
    cached, direct = where / "dd-cached.bin", where / "dd-direct.bin"
    count = f"count={blocks}"
    dd_write = [dd("if=/dev/zero", f"of={cached}", count, "conv=fdatasync")]
    ck = where / "ck"
    shutil.rmtree(ck, ignore_errors=True)
    cmd = [*mpiexec(), "-n", "2", sys.executable, __file__, "--job"]
    out = subprocess.run([*cmd, "write", str(ck), str(elements), str(nbytes)],
                         capture_output=True, text=True, check=True)
    written, seconds = out.stdout.split("WRITE ")[1].split()[:2]
    write = int(written) / float(seconds)
    dd_write.append(dd("if=/dev/zero", f"of={direct}", count, "oflag=direct",
                       "conv=fdatasync"))
    for path in (cached, direct, ck):
        evict(path)
    dd_read = [dd(f"if={cached}", "of=/dev/null"), dd(f"if={direct}", "of=/dev/null",
                                                      "iflag=direct")]
    cached.unlink()
    direct.unlink()
    out = subprocess.run([*cmd, "read", str(ck), str(elements), str(nbytes)],
                         capture_output=True, text=True, check=True)
    seconds, sys_seconds = map(float, out.stdout.split("READ ")[1].split()[:2])
    read = int(written) / seconds
    shutil.rmtree(ck)
    return {"dd_write": max(dd_write) / MB, "write": write / MB, "dd_read": max(dd_read) / MB,
            "read": read / MB, "bytes": int(written), "restart_sys": sys_seconds,
            "dd_cached_write": dd_write[0] / MB,
            "dd_direct_write": dd_write[1] / MB}


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
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="checkpoint-bench")
    a = ap.parse_args()
    where = Path(a.dir)
    where.mkdir(parents=True, exist_ok=True)
    runs = []
    print(f"{a.gib} GiB in {a.elements} elements on 2 PEs, into {where.resolve()}; MB/s; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("run  dd write (cached direct)  ckpt write  ratio    dd read  restart  ratio  "
          "restart/write  restart sys s")
    try:
        for k in range(a.runs):
            r = one_run(where, a.gib, a.elements)
            runs.append(r)
            print(f"{k + 1:3d}  {r['dd_write']:8.0f} ({r['dd_cached_write']:6.0f} "
                  f"{r['dd_direct_write']:6.0f})  {r['write']:10.0f}  "
                  f"{r['write'] / r['dd_write']:5.2f}  {r['dd_read']:9.0f}  {r['read']:7.0f}  "
                  f"{r['read'] / r['dd_read']:5.2f}  {r['read'] / r['write']:12.2f}  "
                  f"{r['restart_sys']:13.2f}",
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
