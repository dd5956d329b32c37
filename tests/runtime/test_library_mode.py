"""shoal inside an MPI program on 2 ranks (jobs/library_mode.py)."""

from mpi_jobs import run_job


def test_library_mode_runs_between_mpi_calls_of_the_program_on_the_same_communicator():
    out = run_job("library_mode", 2)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK library (2, 1)" in out.stdout  # allreduce of 1, then of the ranks: 0 + 1
