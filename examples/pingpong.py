"""Ping-pong between two chares on different PEs: one-way time and bandwidth of entry-method
calls from 8 bytes to 1 MiB (numpy payloads travel as MPI buffers, or through shared memory
between PEs of one node, never pickled).
Run: shoal run -n 2 examples/pingpong.py"""

import time

import numpy as np

import shoal


class Player(shoal.Chare):
    def serve(self, payload, rounds, done):
        self.left, self.done = rounds, done
        self.t0 = time.perf_counter()
        self.thisProxy[1].hit(payload)

    def hit(self, payload):
        self.thisProxy[0].back(payload)

    def back(self, payload):
        self.left -= 1
        if self.left:
            self.thisProxy[1].hit(payload)
        else:
            self.done.send(time.perf_counter() - self.t0)


async def main():
    if shoal.num_pes() < 2:
        print("run on 2 PEs: shoal run -n 2 examples/pingpong.py")
        return
    players = shoal.Array(Player, 2)
    print(f"{'bytes':>9} {'one-way us':>11} {'MB/s':>9}")
    for size in (8, 64, 1024, 16384, 1 << 17, 1 << 20):
        payload = np.zeros(size, np.uint8) if size >= 1024 else bytes(size)
        rounds = 2000 if size <= 16384 else 200
        done = shoal.future()
        players[0].serve(payload, rounds, done)
        one_way = await done / (2 * rounds)
        print(f"{size:9d} {one_way * 1e6:11.1f} {size / one_way / 1e6:9.1f}")


if __name__ == "__main__":
    shoal.start(main)
