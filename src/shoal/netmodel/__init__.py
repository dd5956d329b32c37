"""The max-rate model of MPI communication on multicore nodes (Gropp16): models, fitting per
protocol regime, machine profiles and advice."""
