"""``stockpool race``: the installed package raced under load through pgbench.

Scenarios (each a function that returns what it measured and checked):

- :func:`sellout` (sellout.py): C clients race for N units of one key;
- :func:`soak` (soak.py): D seconds of a shop's mix over many keys, with a
  sweeper, a replenisher and invariant checks beside the clients;
- :func:`hot` (hot.py): one hot key, reservations only, over client counts.

harness.py holds what they share (one measured pgbench run, the common
checks), verify.py the invariant checks, report.py the report, command.py the
command line.
"""

from stockpool.race.harness import ITEM_STRIDE, Harness, Measured, temporary_harness, zero_deadlocks
from stockpool.race.hot import hot
from stockpool.race.sellout import SelloutResult, sellout
from stockpool.race.soak import SoakOptions, soak

__all__ = [
    "ITEM_STRIDE",
    "Harness",
    "Measured",
    "SelloutResult",
    "SoakOptions",
    "hot",
    "sellout",
    "soak",
    "temporary_harness",
    "zero_deadlocks",
]
