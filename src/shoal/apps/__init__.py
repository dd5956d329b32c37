"""Application kernels the papers measure with (seed 000: PTRANS, MPI-FFT), on any communicator."""
