"""The main of the job scripts here: ``python TOPIC.py NAME... [--shm BYTES] [--pool-bytes
BYTES] [--lb STRATEGY] [--lb-period SECONDS] [--lb-dump DIR] [--lb-machine TORUS]
[--lb-auto] [--cpu-stats] [--trace FILE] [--poll-spin SECONDS] [--tune POINTS]
[--checkpoint-every SECONDS] [--checkpoint-dir DIR] [--mtbf SECONDS] [--power-monitor]`` runs
the named scenarios of TOPIC one after another in one runtime; ``--shm`` sets the shared
memory per PE (0: large buffers by MPI only), ``--pool-bytes`` the bound of its receive
buffers, ``--lb``, ``--lb-period``, ``--lb-dump``, ``--lb-auto`` and ``--lb-machine`` the load
balancer, ``--tune`` the built-in control points the controller tunes, ``--checkpoint-every``,
``--checkpoint-dir`` and ``--mtbf`` automatic checkpoints, ``--cpu-stats`` loads in CPU
seconds, ``--power-monitor`` the emulated thermal model (no control), ``--trace`` the timeline
file, ``--poll-spin`` how long an idle PE polls before it sleeps. A scenario checks its own
results (a failed assert ends the job with the PE and the traceback) and may return figures
for the test to compare: plain Python values, printed by PE 0 as a literal after ``OK
NAME``."""

import sys

import shoal


def main(scenarios: dict) -> None:
    """Run the scenarios that ``sys.argv`` names, from ``scenarios`` (name: async function)."""
    args = sys.argv[1:]
    options = {}
    for flag, option, kind in (("--shm", "shm_bytes", int), ("--pool-bytes", "pool_bytes", int),
                               ("--lb", "lb", str),
                               ("--lb-period", "lb_period", float),
                               ("--lb-dump", "lb_dump", str),
                               ("--lb-machine", "lb_machine", str), ("--trace", "trace", str),
                               ("--tune", "tune", str), ("--mtbf", "mtbf", float),
                               ("--checkpoint-every", "checkpoint_every", float),
                               ("--checkpoint-dir", "checkpoint_dir", str),
                               ("--poll-spin", "poll_spin", float)):
        if flag in args:
            k = args.index(flag)
            options[option] = kind(args[k + 1])
            del args[k:k + 2]
    for flag, option in (("--cpu-stats", "cpu_stats"), ("--lb-auto", "lb_auto"),
                         ("--power-monitor", "power_monitor")):
        if flag in args:
            args.remove(flag)
            options[option] = True
    if not args or any(a not in scenarios for a in args):
        raise SystemExit(f"usage: {sys.argv[0]} NAME... [--shm BYTES] [--lb STRATEGY] "
                         f"[--lb-period SECONDS] [--cpu-stats], NAME in "
                         f"{', '.join(scenarios)}")
    shoal.start(run, args, scenarios, **options)


async def run(names, scenarios):
    for name in names:
        figures = await scenarios[name]()
        print(f"OK {name}" if figures is None else f"OK {name} {figures!r}", flush=True)
