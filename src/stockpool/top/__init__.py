"""``stockpool top``: a live terminal view of a stockpool database.

``frame.py`` reads one snapshot (stockpool.metrics(), stockpool.hot_keys())
and samples stockpool.wait_events(), ``view.py`` renders two snapshots as one
screen, ``watch.py`` runs the refresh loop (reconnecting, stopping on a
signal) and ``command.py`` is the typer command. Everything it reads is
readable by a member of stockpool_monitor alone.
"""
