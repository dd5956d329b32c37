"""Reproduce the shape of Fig. 2 of the gossip paper: average age against window size.

    python examples/gossip_sweep.py            # writes fig2.png
"""

from shoal.gossip.plots import age_vs_window
from shoal.gossip.sim import simulate

results = [simulate(n, pct / 100, units=150, warmup=50, seed=pct)
           for n in (1024, 2048) for pct in range(10, 101, 10)]
for r in results:
    print(f"N={r.nodes:5d} window={r.window:5d}  age {r.mean_age:6.2f}  "
          f"expected {r.expected:6.2f} units")
age_vs_window(results, "fig2.png")
print("wrote fig2.png")
