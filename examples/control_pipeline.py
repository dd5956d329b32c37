"""The stages of a pipelined ping, tuned by a control point: the form of Acun14 Fig. 6
("Tuning the number of pipelines in a ping benchmark": the control system finds the best
value and the time per iteration settles).

Each iteration element 0 (PE 0) produces ``--floats`` values and sends them to element 1
(PE 1), which consumes them; the iteration ends when element 1 has consumed them all. In
``stages`` pieces, element 1 works on a piece while element 0 makes the next: more stages
overlap more of the two halves, and each costs a message (its runtime overhead and, below
the shared-memory threshold, the MPI path), so the time per iteration falls, then rises
again. ``stages`` is a control point (``shoal.control_point``); main reads its value at
the start of every iteration and marks the end with ``shoal.iteration()``, and the
runtime's controller moves it to the value with the least time per iteration.

    shoal run -n 2 examples/control_pipeline.py --iters 200
    shoal run -n 2 examples/control_pipeline.py --fixed 16 --iters 40   # one value, no tuning

Prints the value over the iterations (runs of the same value with their median time) and
the decisions; ``--json`` prints them as one JSON line instead (benchmarks/control_points.py).
"""

import argparse
import json
import statistics
import sys
import time

import numpy as np

import shoal

STAGES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def produce(start: int, n: int) -> np.ndarray:
    """The producer's work on its piece: about as much per value as the consumer's."""
    x = np.arange(start, start + n, dtype=np.float64)
    return np.sin(x * 1e-3) * np.sqrt(x + 1.0)


def consume(piece: np.ndarray) -> float:
    return float(np.sum(np.cos(piece) * np.sqrt(np.abs(piece) + 1.0)))


class Stage(shoal.Chare):
    def __init__(self):
        self.got, self.total = 0, 0.0

    def ping(self, floats: int, stages: int, done):
        """Element 0: make the values in ``stages`` pieces, each sent once made."""
        bounds = np.linspace(0, floats, stages + 1).astype(int)
        for k in range(stages):
            self.thisProxy[1].take(produce(bounds[k], bounds[k + 1] - bounds[k]), stages,
                                   done)

    def take(self, piece: np.ndarray, stages: int, done):
        """Element 1: consume a piece; the last one ends the iteration."""
        self.total += consume(piece)
        self.got += 1
        if self.got == stages:
            self.got = 0
            done.send(self.total)


def _runs(rows: list[dict]) -> list[tuple[int, int, int, float]]:
    """(first, last iteration, value, median ms) of each run of one value."""
    out: list[tuple[int, int, int, float]] = []
    start = 0
    for k in range(1, len(rows) + 1):
        if k == len(rows) or rows[k]["stages"] != rows[start]["stages"]:
            ms = statistics.median(r["seconds"] for r in rows[start:k]) * 1e3
            out.append((rows[start]["iteration"], rows[k - 1]["iteration"],
                        rows[start]["stages"], ms))
            start = k
    return out


async def main(args: argparse.Namespace):
    arr = shoal.Array(Stage, 2)  # block map: element 0 on PE 0, element 1 on PE 1
    if args.fixed:
        stages = None
        value = args.fixed
    else:
        stages = shoal.control_point(
            "stages", STAGES, default=args.start,
            effect="more stages overlap producing and consuming; each costs a message")
    times = []
    for it in range(args.iters):
        if stages is not None:
            value = stages.value
        done = shoal.future()
        t0 = time.perf_counter()
        arr[0].ping(args.floats, value, done)
        await done
        times.append(time.perf_counter() - t0)
        await shoal.iteration()
        if not args.json and (it + 1) % 50 == 0:
            print(f"  iteration {it + 1}: stages {value}, {times[-1] * 1e3:.2f} ms",
                  flush=True)
    history = shoal.control_history()
    if args.json:
        print(json.dumps({"fixed": args.fixed, "times": times,
                          "history": history["iterations"],
                          "decisions": history["decisions"], "points": history["points"]}))
        return
    if args.fixed:
        print(f"stages {args.fixed}: median {statistics.median(times) * 1e3:.2f} ms per "
              f"iteration over {args.iters} iterations")
        return
    print("iterations  stages  median ms per iteration")
    for first, last, value, ms in _runs(history["iterations"]):
        print(f"{first:4d}-{last:<4d}   {value:6d}  {ms:8.2f}")
    for d in history["decisions"]:
        print(f"  at iteration {d['iteration']}: {d['decision']} stages={d['value']} "
              f"({d['seconds'] * 1e3:.2f} ms per iteration)")


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--floats", type=int, default=1 << 20, help="values per iteration")
    ap.add_argument("--start", type=int, default=1, choices=STAGES,
                    help="the value the controller starts from")
    ap.add_argument("--fixed", type=int, default=0, help="run this many stages, no tuning")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.iters < 1 or args.floats < 1 or args.fixed < 0:
        raise shoal.UsageError("--iters and --floats must be >= 1, --fixed >= 0")
    return args


if __name__ == "__main__":
    try:
        arguments = _arguments()
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        print(f"control_pipeline: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, arguments)
