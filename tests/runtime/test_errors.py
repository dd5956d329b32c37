"""A failure in an entry method on 3 ranks (jobs/errors.py)."""

from mpi_jobs import run_job


def test_an_exception_in_an_entry_method_ends_the_job_with_pe_element_and_traceback():
    out = run_job("errors", 3, "entry_method")
    assert out.returncode != 0
    assert "PE 2, Faulty[3].boom" in out.stderr
    assert "ValueError: deliberate failure in an entry method" in out.stderr
