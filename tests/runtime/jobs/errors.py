"""An exception in an entry method (run by test_errors.py): ``python errors.py entry_method``."""

from runner import main

import shoal


class Faulty(shoal.Chare):
    def boom(self):
        raise ValueError("deliberate failure in an entry method")


async def entry_method():
    f = shoal.Array(Faulty, 4)
    f[3].boom()
    await shoal.future()  # never resolves: the failure must end the job


if __name__ == "__main__":
    main({"entry_method": entry_method})
