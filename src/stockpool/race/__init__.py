"""``stockpool race``: the installed package raced under load through pgbench.

Scenarios (each a function that returns what it measured and checked):

- :func:`sellout` (sellout.py): C clients race for N units of one key;
- :func:`soak` (soak.py): D seconds of a shop's mix over many keys, with a
  sweeper, a replenisher and invariant checks beside the clients;
- :func:`hot` (hot.py): one hot key, reservations only, over client counts;
- :func:`seats` (seats.py): C clients sell out one named key (seats):
  reserve_named and reserve_labels, rollbacks, claims and releases, then a
  final one-seat rush; every label to at most one checkout, every client
  holds the labels it was told;
- ``failover`` (failover.py, ``race --failover``): Python clients and a worker
  on a primary and its streaming standby (server/replica.py); the primary is
  SIGKILLed mid-run and the standby promoted; journal.py holds the clients'
  journals of what they were told and the check of them against the new
  primary.

harness.py holds what the pgbench scenarios share (one measured pgbench run,
the common checks), verify.py the invariant checks, report.py the report,
command.py the command line.
"""

from stockpool.race.harness import ITEM_STRIDE, Harness, Measured, temporary_harness, zero_deadlocks
from stockpool.race.hot import hot
from stockpool.race.seats import seats
from stockpool.race.sellout import SelloutResult, sellout
from stockpool.race.soak import SoakOptions, soak

__all__ = [
    "ITEM_STRIDE",
    "Harness",
    "Measured",
    "SelloutResult",
    "SoakOptions",
    "hot",
    "seats",
    "sellout",
    "soak",
    "temporary_harness",
    "zero_deadlocks",
]
