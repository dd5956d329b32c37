"""Fitting speed: 10^5 measurements drawn from the Blue Waters rendezvous parameters (seed
003, Table 1) with 3% noise, fitted by every model (issue target: well under 5 s).
Usage: python benchmarks/netmodel_fit.py [--points 100000] [--repeat 3]"""

import argparse
import statistics
import time

import numpy as np

from shoal.netmodel.data import synthetic
from shoal.netmodel.fit import fit
from shoal.netmodel.models import Model
from shoal.netmodel.regimes import analyse

BW = Model("maxrate4", {"alpha": 2.0e-5, "rn": 5.5e9, "rcb": 3.6e9, "rci": 6.1e8})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ks, ns = np.arange(1, 17), 2.0 ** np.arange(10, 23)
    m = synthetic(BW, ks, ns, repeat=max(1, args.points // (len(ks) * len(ns))), seed=1)
    print(f"{len(m.t)} measurements, {len(ks)} k x {len(ns)} sizes; median of {args.repeat}")
    for kind in ("postal", "maxrate", "maxrate4", "overhead"):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            f = fit(kind, m.n, m.k, m.t)
            times.append(time.perf_counter() - t0)
        rn = f.model.params.get("rn", float("nan"))
        print(f"  {kind:9s} {statistics.median(times) * 1e3:8.1f} ms   R_N = {rn:.3g}")
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        analyse(m)  # reduce to best-of, detect thresholds, 5 variants per regime
        times.append(time.perf_counter() - t0)
    print(f"  full analysis (regimes + 5 variants): {statistics.median(times):.2f} s, "
          f"target well under 5 s")


if __name__ == "__main__":
    main()
