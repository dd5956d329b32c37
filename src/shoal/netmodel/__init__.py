"""The max-rate model of MPI communication on multicore nodes (seed 003): models, fitting per
protocol regime, machine profiles and advice."""
