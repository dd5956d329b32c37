"""``shoal dashboard``: a web page on this machine that shows the cluster (the local gossip
daemon's view), the jobs found in the registry, and one job's utilisation over time, per PE
and per entry method, live or post mortem. The server is the standard library's
(:mod:`shoal.dashboard.server`), the answers are shaped in :mod:`shoal.dashboard.data`, and
the page, its script and its style sheet ship in ``static/`` (no asset loads from outside:
cluster login nodes have no internet)."""
