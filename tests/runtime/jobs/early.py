"""A rank that ends before ``shoal.start`` (run by test_startup.py):
``python early.py MODE [--no-chare]`` where MODE is ``RANK:exit:CODE`` (``sys.exit(CODE)``
on that rank), ``RANK:return``, ``RANK:raise`` (an uncaught exception), ``RANK:abort`` (a
fatal signal, as a crash in native code) or ``none`` (every rank uses mpi4py only and
ends without the runtime). The other ranks run a short main.
The program defines a chare class, as programs of the runtime do (which arms the exit hook
under a plain mpiexec), unless ``--no-chare``: then it is a program that uses mpi4py and
imports shoal, like the gossip service."""

import os
import sys

import shoal

if "--no-chare" not in sys.argv:

    class Cell(shoal.Chare):
        """Never created: its definition is what marks a program of the runtime."""


async def main():
    await shoal.sleep(0.05)
    print("main done", flush=True)


def leave(how):
    if how[0] == "exit":
        sys.exit(int(how[1]))
    if how[0] == "raise":
        raise ValueError("deliberate failure before shoal.start")
    if how[0] == "abort":
        os.abort()


def run(mode):
    rank = int(os.environ["PMI_RANK"])
    if mode == "none":
        from mpi4py import MPI

        total = MPI.COMM_WORLD.allreduce(rank + 1)
        if rank == 0:
            print(f"sum {total}", flush=True)
        return
    who, *how = mode.split(":")
    if rank == int(who):
        leave(how)
        return
    shoal.start(main)


if __name__ == "__main__":
    run(sys.argv[1])
