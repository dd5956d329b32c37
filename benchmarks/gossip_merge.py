"""Merge throughput of the gossip service for the paper's largest case: N=8192 nodes, a
window of 1638 entries of 1 KiB (about 1.7 MB per message). Target: <= 2 ms per received
window (the paper's implementation could not keep up below a 4 ms interval, Section 5.3).

Times decode (validation included) + merge of a received message, and window selection +
encode of a sent one; prints medians of --repeat rounds of --messages messages each.
"""

import argparse
import statistics
import time

import numpy as np

from shoal.gossip import wire
from shoal.gossip.records import state_dtype
from shoal.gossip.vector import InfoVector


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8192)
    ap.add_argument("--window", type=int, default=1638)
    ap.add_argument("--entry-size", type=int, default=1024)
    ap.add_argument("--messages", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n, w = args.nodes, args.window
    state = state_dtype(args.entry_size)
    rng = np.random.default_rng(0)
    me = InfoVector(n, 0, state)
    peer = InfoVector(n, 1, state)
    now = 1000.0
    me.born[:] = now - rng.exponential(10.0, n)
    peer.born[:] = now - rng.exponential(10.0, n)
    messages = []
    for _ in range(args.messages):
        idx = rng.choice(n, w, replace=False)
        recs = np.zeros(w, state)
        recs["load"] = rng.random(w)
        messages.append(bytes(wire.encode(1, idx, rng.exponential(5.0, w), recs)))
    size = len(messages[0])
    recv, send = [], []
    buf = bytearray(wire.message_size(n, state))
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for msg in messages:
            _, entries = wire.decode(msg, n, state)
            me.merge(entries["node"].astype(np.intp), entries["age"], entries["state"], now)
            now += 1e-3
        recv.append((time.perf_counter() - t0) / len(messages))
        t0 = time.perf_counter()
        for _ in messages:
            idx = peer.window(w)
            wire.encode(1, idx, now - peer.born[idx], peer.records[idx], buf)
        send.append((time.perf_counter() - t0) / len(messages))
    print(f"N={n}, window {w} entries of {args.entry_size} B, message {size / 1e6:.2f} MB")
    print(f"receive (decode + validate + merge): median {1e3 * statistics.median(recv):.3f} ms "
          f"per window over {args.repeat} rounds; target <= 2 ms")
    print(f"send (select window + encode):        median {1e3 * statistics.median(send):.3f} ms "
          f"per window")
    print(f"=> one service keeps up with about {1 / statistics.median(recv):.0f} windows/s")


if __name__ == "__main__":
    main()
