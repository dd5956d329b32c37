"""A job that reports where its PEs run and what the balancer saw of the nodes (run by
test_multinode.py under ``shoal run --lb hierarchical --lb-machine 2x2``): 16 elements in
a ring, the first 4 working 5x longer, 4 AtSync iterations. PE 0 prints ``RESULT`` and a
Python literal."""

import time

import shoal
from shoal import Reducer

N, ITERS = 16, 4


class Where(shoal.Chare):
    def report(self):
        stats = shoal.stats()
        return (shoal.my_pe(), shoal.my_host(), shoal.my_node(), stats["host"])


class Ring(shoal.Chare):
    def __init__(self, done):
        self.done, self.it = done, 0

    def step(self):
        i = self.thisIndex[0]
        end = time.perf_counter() + (0.01 if i < 4 else 0.002)
        while time.perf_counter() < end:
            pass
        self.thisProxy[(i + 1) % N].hello(self.it)
        self.it += 1
        if self.it < ITERS:
            self.at_sync()
        else:
            self.contribute(1, Reducer.sum, self.done)

    def hello(self, it):
        pass

    def resume_from_sync(self):
        self.step()


async def main():
    where = await shoal.Group(Where).report(ret=True)
    done = shoal.future()
    ring = shoal.Array(Ring, N, args=(done,), at_sync=True)
    ring.step()
    await done
    steps = [{k: v for k, v in r.items() if k.startswith(("node_bytes", "hop_bytes"))}
             for r in shoal.lb_history()]
    print("RESULT", repr({"where": where, "nodes": shoal.num_nodes(), "steps": steps}),
          flush=True)


if __name__ == "__main__":
    shoal.start(main)
