"""Hello from an over-decomposed array: 8 elements on however many PEs, a reduction back to
main. Run: shoal run -n 2 examples/hello.py"""

import shoal


class Hello(shoal.Chare):
    def __init__(self, greeting):
        self.greeting = greeting

    def say(self, done):
        where = f"PE {shoal.my_pe()} (host {shoal.my_host()})"
        self.contribute(f"{self.greeting} from element {self.thisIndex[0]} on {where}",
                        shoal.Reducer.gather, done)


async def main():
    arr = shoal.Array(Hello, 8, args=("hello",))
    done = shoal.future()
    arr.say(done)
    for line in await done:
        print(line)
    print(f"{shoal.num_pes()} PEs on {shoal.num_nodes()} node(s), 8 elements")


if __name__ == "__main__":
    shoal.start(main)
