"""Reproduce the shape of Fig. 2 of the gossip paper (Levy14): average age against window
size, for 512 and 1024 nodes, beside the expected age.

    python examples/gossip_sweep.py                     # writes fig2.png
    python examples/gossip_sweep.py --nodes 256 --out small.png
"""

import argparse

from shoal.gossip.plots import age_vs_window
from shoal.gossip.sim import simulate

ap = argparse.ArgumentParser(description="Average age against window size (Fig. 2)")
ap.add_argument("--nodes", default="512,1024", help="vector sizes, comma-separated")
ap.add_argument("--out", default="fig2.png", help="the figure (PNG)")
args = ap.parse_args()
results = [simulate(int(n), pct / 100, units=150, warmup=50, seed=pct)
           for n in args.nodes.split(",") for pct in range(10, 101, 10)]
for r in results:
    print(f"N={r.nodes:5d} window={r.window:5d}  age {r.mean_age:6.2f}  "
          f"expected {r.expected:6.2f} units")
age_vs_window(results, args.out)
print(f"wrote {args.out}")
