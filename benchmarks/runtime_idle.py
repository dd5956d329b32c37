"""What an idle PE costs and what it costs a message that wakes it: the poll_max trade-off.

For each ``poll_max``, 2 PEs sit idle for ``--idle`` seconds; PE 1 reports the CPU time it
used meanwhile. Then, 5 times, both idle for 50 ms and PE 0 calls PE 1 and waits for the
answer: both PEs may be asleep, so the round trip takes up to about 2 x poll_max.
Usage: python benchmarks/runtime_idle.py [--idle 2]"""

import argparse
import json
import subprocess
import sys
import time

import shoal


class Sleeper(shoal.Chare):
    def cpu(self):
        return time.process_time()

    def echo(self):
        return None


def job(poll_max: float, idle: float):
    async def main():
        s = shoal.Array(Sleeper, 2)
        c0 = await s[1].cpu(ret=True)
        await shoal.sleep(idle)
        c1 = await s[1].cpu(ret=True)
        wakes = []
        for _ in range(5):
            await shoal.sleep(0.05)
            t0 = time.perf_counter()
            await s[1].echo(ret=True)
            wakes.append(time.perf_counter() - t0)
        print(json.dumps({"cpu": (c1 - c0) / idle, "wake": sorted(wakes)[2]}))

    shoal.start(main, poll_max=poll_max)


class Timer(shoal.Chare):
    """Resolves ``fut`` after ``delay`` seconds (sleeping in a plain method would block the
    PE; here the wait happens in the scheduler's idle back-off)."""

    def __init__(self, delay, fut):
        self.fut = fut
        self.until = time.perf_counter() + delay
        self.thisElement.check()

    def check(self):
        if time.perf_counter() >= self.until:
            self.fut.send(None)
        else:
            time.sleep(1e-3)
            self.thisElement.check()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--job", type=float)
    args = ap.parse_args()
    if args.job is not None:
        job(args.job, args.idle)
        return
    from shoal.launch import mpiexec

    print(f"{'poll_max':>9} {'idle PE CPU':>12} {'wake-up round trip':>19}")
    for poll_max in (1e-4, 1e-3, 1e-2):
        out = subprocess.run([*mpiexec(), "-n", "2", sys.executable, __file__, "--job",
                              str(poll_max), "--idle", str(args.idle)],
                             capture_output=True, text=True, timeout=300, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{poll_max * 1e3:7.1f}ms {100 * r['cpu']:11.1f}% {r['wake'] * 1e6:16.0f} us")


if __name__ == "__main__":
    main()
