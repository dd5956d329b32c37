"""A job of known, uneven load for the dashboard's test: one element per PE, each step PE
0's element computes about 8 times as long as PE 1's; at the end every PE's own
instrumentation (``shoal.stats()``: entry seconds, idle seconds) is written to the JSON file
named by argv[1], for the test to compare with what the dashboard shows.

Run: shoal run -n 2 tests/dashboard/busy_job.py OUT.json [SECONDS]"""

import json
import sys
import time

import shoal

UNIT = 0.01  # seconds of computing per unit of load


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Worker(shoal.Chare):
    def step(self, done):
        spin(UNIT * (8 if shoal.my_pe() == 0 else 1))
        self.contribute(None, None, done)


def own_stats():
    stats = shoal.stats()
    busy = sum(v[1] for methods in stats["elements"].values() for v in methods.values())
    return {"pe": stats["pe"], "busy": busy, "idle": stats["idle"], "host": stats["host"]}


async def main():
    out, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    workers = shoal.Array(Worker, shoal.num_pes())
    start = time.time()
    steps = 0
    while time.time() - start < seconds:
        done = shoal.future()
        workers.step(done)
        await done
        steps += 1
    stats = await shoal.run_on_all(own_stats)
    with open(out, "w") as f:
        json.dump({"steps": steps, "seconds": time.time() - start, "pes": stats}, f)


if __name__ == "__main__":
    shoal.start(main)
