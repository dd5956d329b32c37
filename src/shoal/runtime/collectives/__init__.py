"""Collective operations of the runtime (Acun14, Section III): broadcasts along a tree with
replay for elements that migrate behind them (:mod:`.broadcast`), reductions combined per PE
and then up a tree (:mod:`.reduction`), and quiescence detection (:mod:`.quiescence`)."""
