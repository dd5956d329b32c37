"""Read the local node's state from the OS: what a gossip record publishes by default."""

from __future__ import annotations

import os

from shoal.memory import node_available


def local_state() -> dict:
    """The default state record: 1-minute load average, available memory (bytes), cores."""
    return {"load": os.getloadavg()[0], "free_mem": node_available(),
            "cores": os.cpu_count() or 1}


def load_averages() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (zeros where the OS has none)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def shoal_jobs(host: str, proc: str = "/proc") -> tuple[int, int]:
    """(jobs, PEs) of ``shoal run`` on this host: the job directories named by the
    ``SHOAL_JOBDIR`` of the processes this user may read (every process for root), plus the
    node-local ones in the temporary directory; a job counts when one of its PE notes
    (``pes/PID@HOST``, :meth:`shoal.jobdir.JobDir.note_pe`) names a live process here."""
    import glob
    import tempfile

    from shoal.jobdir import ENV, PES, alive

    dirs = set(glob.glob(os.path.join(tempfile.gettempdir(), "shoal-job-*")))
    marker = f"{ENV}=".encode()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "environ"), "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(marker):
                dirs.add(os.fsdecode(item[len(marker):]))
    jobs = pes = 0
    for d in dirs:
        live = sum(1 for note in glob.glob(os.path.join(d, PES, f"*@{host}"))
                   if alive(_pid_of(note)))
        jobs += live > 0
        pes += live
    return jobs, pes


def _pid_of(note: str) -> int | None:
    head = os.path.basename(note).split("@", 1)[0]
    return int(head) if head.isdigit() else None
