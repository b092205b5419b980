"""What the failover soak's clients were told, and the check of it against a server.

A :class:`Shopper` is one buyer's thread: it runs checkouts through the
Python client (``stockpool.client.Client``), reserving a few units of a key
under a fresh checkout id, then claiming, releasing or walking away, and
writes every answer into its own journal (:class:`Answer`). An answer is
*acknowledged* when the call returned: the server committed it and said so.
A call that lost its connection and could not get an answer within the
client's retries has an *unknown* outcome: it may or may not have committed,
and nothing is expected of it. Idempotent calls (reserve with the same
checkout id, claim, release) are retried by the client across a lost
connection, so a failover shorter than the retries leaves no unknown outcome.

:func:`missing` compares the acknowledged answers with the holds a server
has: every one must be there, in the state the last acknowledged answer left
it (a refused reservation: no hold), or one a later call of unknown outcome
may have moved it to. What differs is listed exactly: which checkout, what
its client was told, what the server has instead. :func:`journal_check`
makes that a check, which fails when the dead primary had acknowledged
nothing (a check of nothing must not pass).

:class:`WatchedWorker` is ``stockpool worker``'s loop, remembering when and on
which server each cycle ran.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check
from stockpool.client import Client, RetryPolicy, is_connection_lost
from stockpool.maintenance.worker import Cycle, Worker, WorkerOptions
from stockpool.race.verify import HELD, KeyRange

ACKNOWLEDGED = {"reserve": ("reserved", "refused"), "claim": ("claimed",), "release": ("released",)}
# The hold status an acknowledged answer leaves (None: no hold at all).
LEAVES: dict[str, tuple[str | None, ...]] = {
    "reserved": ("held", "expired"),
    "refused": (None,),
    "claimed": ("claimed",),
    "released": ("released",),
}
# What a successful claim or release is answered.
DONE = {"claim": "claimed", "release": "released"}
UNKNOWN = "unknown"
MAX_LISTED = 5  # missing outcomes named in the check's detail; the report's counts list all
# Enough retries to ride out a failover (about 25 s of jittered waits of at
# most half a second), and no longer.
RIDE_OUT = RetryPolicy(attempts=100, base=0.05, cap=0.5)


@dataclass(frozen=True)
class Answer:
    """One call of one checkout, and what its client was told."""

    checkout_id: uuid.UUID
    item_id: int
    quantity: int
    call: str  # reserve, claim, release
    outcome: str  # reserved, refused, claimed, released; unknown; or an error answer's SQLSTATE
    value: int  # what the function returned (reserve: 1 or 0; claim, release: units)
    at: float  # seconds into the run when the answer came (or the client gave up)
    took: float  # seconds the call took, retries included
    port: int  # the server that answered (0: none did)

    @property
    def acknowledged(self) -> bool:
        return self.outcome in ACKNOWLEDGED[self.call]

    def told(self) -> str:
        what = f"{self.quantity} units of item {self.item_id}" if self.call == "reserve" else "the hold"
        return f"{self.call} of {what} answered {self.outcome} {self.at:.2f} s into the run"


@dataclass(frozen=True)
class Mix:
    """What a shopper does: which keys, and how its checkouts end."""

    keys: KeyRange
    claim_pct: int
    release_pct: int
    ttl: timedelta
    abandon_ttl: timedelta

    def weights(self) -> list[float]:
        """Zipf-like popularity: a few hot items, a tail of quiet ones."""
        return [1 / (i + 1) ** 1.1 for i in range(self.keys.item_hi - self.keys.item_lo + 1)]


class Shopper(threading.Thread):
    """One buyer's checkouts, one after another, until stopped."""

    def __init__(self, n: int, dsn: str, mix: Mix, started: float, stop: threading.Event) -> None:
        super().__init__(name=f"shopper-{n}", daemon=True)
        self.dsn = dsn
        self.mix = mix
        self.started = started
        self.stop = stop
        self.rng = random.Random(n)
        self.answers: list[Answer] = []
        self.port = 0  # the server of the client's current connection
        self.client = Client(dsn, retry=RIDE_OUT, connect=self._connect, sleep=self._sleep, pooled=False)
        self.failure: BaseException | None = None

    def _sleep(self, seconds: float) -> None:
        """The client's wait between retries, cut short when the run stops."""
        self.stop.wait(seconds)

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=5, application_name=f"stockpool-failover/{self.name}"
        )
        self.port = int(conn.info.port)
        return conn

    def run(self) -> None:
        items = range(self.mix.keys.item_lo, self.mix.keys.item_hi + 1)
        weights = self.mix.weights()
        try:
            with self.client:
                while not self.stop.is_set():
                    self.checkout(self.rng.choices(items, weights)[0], self.rng.randint(1, 3))
        except BaseException as exc:  # reported by the run, never lost in a thread
            self.failure = exc

    def checkout(self, item: int, quantity: int) -> None:
        shop, location = self.mix.keys.shop_ids[0], self.mix.keys.location_id
        checkout = uuid.uuid4()
        intent = self.rng.randrange(100)
        abandon = intent >= self.mix.claim_pct + self.mix.release_pct
        ttl = self.mix.abandon_ttl if abandon else self.mix.ttl
        c = self.client
        if self._call(
            "reserve",
            checkout,
            item,
            quantity,
            lambda: c.reserve_units(shop, item, location, quantity, checkout, ttl),
        ):
            if intent < self.mix.claim_pct:
                self._call("claim", checkout, item, quantity, lambda: c.claim(shop, checkout))
            elif not abandon:
                self._call("release", checkout, item, quantity, lambda: c.release(shop, checkout))

    def _call(
        self, call: str, checkout: uuid.UUID, item: int, quantity: int, send: Callable[[], int | bool]
    ) -> bool:
        """Send one call, journal its answer; True when it succeeded."""
        sent = time.monotonic()
        port = 0
        try:
            value = int(send())
            outcome = ("reserved" if value else "refused") if call == "reserve" else DONE[call]
            port = self.port
        except psycopg.Error as exc:
            value = 0
            if is_connection_lost(exc):
                outcome = UNKNOWN
            else:
                outcome = exc.sqlstate or type(exc).__name__
                port = self.port
        now = time.monotonic()
        self.answers.append(
            Answer(checkout, item, quantity, call, outcome, value, now - self.started, now - sent, port)
        )
        return outcome in ("reserved", "claimed", "released")


class WatchedWorker(Worker):
    """The maintenance worker, remembering when (seconds into the run) and on
    which server (port) each cycle ran, and what it did."""

    def __init__(self, dsn: str, options: WorkerOptions, started: float) -> None:
        super().__init__(dsn, options)
        self.started = started
        self.ran: list[tuple[float, int, Cycle]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as exc:  # reported by the run, never lost in a thread
            self.failure = exc

    def cycle(self, conn: psycopg.Connection[TupleRow]) -> Cycle:
        done = super().cycle(conn)
        self.ran.append((time.monotonic() - self.started, int(conn.info.port), done))
        return done


@dataclass(frozen=True)
class Missing:
    """An acknowledged answer the server does not show."""

    checkout_id: uuid.UUID
    told: str  # what the client was told, and when
    found: str  # what the server has instead
    at: float

    def line(self) -> str:
        return f"checkout {self.checkout_id}: {self.told}; the server has {self.found}"


def missing(
    conn: psycopg.Connection[TupleRow], keys: KeyRange, answers: Sequence[Answer]
) -> tuple[list[Missing], int]:
    """The acknowledged answers whose effect the server does not have, in the
    order they were given, and the holds of ``keys`` no client ever asked for."""
    holds = {
        checkout: (int(item), int(quantity), str(status))
        for _, checkout, item, quantity, status, _ in conn.execute(HELD, keys.params)
    }
    by_checkout: dict[uuid.UUID, list[Answer]] = {}
    for answer in sorted(answers, key=lambda a: a.at):
        by_checkout.setdefault(answer.checkout_id, []).append(answer)
    lost: list[Missing] = []
    for checkout, calls in by_checkout.items():
        acked = [a for a in calls if a.acknowledged]
        if not acked:
            continue  # nothing was acknowledged: nothing is owed
        last = acked[-1]
        # A later call whose outcome is unknown may have moved the hold on.
        allowed = set(LEAVES[last.outcome])
        allowed |= {DONE.get(a.call) for a in calls[calls.index(last) + 1 :] if a.outcome == UNKNOWN}
        if last.outcome == "released" and last.value == 0:
            allowed.add("expired")  # release of holds that had all expired: 0 units
        found = holds.get(checkout)
        if found is None:
            if None not in allowed:
                lost.append(Missing(checkout, last.told(), "no hold", last.at))
        elif found[2] not in allowed or (found[0], found[1]) != (last.item_id, last.quantity):
            lost.append(
                Missing(
                    checkout,
                    last.told(),
                    f"a {found[2]} hold of {found[1]} units of item {found[0]}",
                    last.at,
                )
            )
    unasked = sum(1 for checkout in holds if checkout not in by_checkout)
    return lost, unasked


def journal_check(answers: Sequence[Answer], lost: Sequence[Missing], unasked: int, old_port: int) -> Check:
    """:func:`missing`'s findings as a check: every acknowledged outcome is
    there and no hold that no client asked for. FAIL also when the old primary
    (``old_port``) acknowledged nothing: then nothing was put to the test."""
    acked = sum(a.acknowledged for a in answers)
    unknown = sum(a.outcome == UNKNOWN for a in answers)
    name = "every acknowledged outcome on the new primary"
    before = sum(a.acknowledged and a.port == old_port for a in answers)
    if not before:
        return Check(name, False, "the old primary acknowledged nothing before the kill: nothing to check")
    if lost or unasked:
        shown = "; ".join(m.line() for m in lost[:MAX_LISTED])
        more = f"; and {len(lost) - MAX_LISTED} more" if len(lost) > MAX_LISTED else ""
        extra = f"; {unasked} holds no client asked for" if unasked else ""
        return Check(name, False, f"{len(lost)} of {acked} acknowledged outcomes lost: {shown}{more}{extra}")
    return Check(
        name,
        True,
        f"{acked} acknowledged outcomes of {len({a.checkout_id for a in answers})} checkouts "
        f"({before} by the old primary), all there; {unknown} calls with an unknown outcome (not checked)",
    )
