"""Load balancing (Acun14, Section III-A): the database of what the runtime measured
(:mod:`.database`), strategies as pure functions of it (:mod:`.strategies`), and the driver
that decides when to balance and runs a step inside the runtime (:mod:`.driver`)."""
