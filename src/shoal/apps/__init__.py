"""Application kernels the papers measure with (Levy14: PTRANS, MPI-FFT), on any communicator."""
