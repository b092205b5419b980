"""One screen of ``stockpool top``, rendered from two snapshots.

Per-second rates are the deltas of metrics()'s counters over the time between
the two snapshots; without an earlier snapshot (the first frame), or when a
counter went down (statistics reset, a restarted server), a rate is ``-``.
Colours follow the thresholds of monitoring/rules/stockpool.yml's alerts, so
what is red here is what pages someone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stockpool.top.frame import HotKey, Snapshot, Waits

RATES = (
    ("reservations", "reservations_total"),
    ("refusals", "refusals_total"),
    ("claims", "claims_total"),
    ("releases", "releases_total"),
    ("expiries", "expiries_total"),
    ("refills", "refills_total"),
)
# The alerts' thresholds (monitoring/rules/stockpool.yml).
DEAD_RATIO_ALERT = 0.2
OVERDUE_ALERT_SECONDS = 120.0
IDLE_IN_TRANSACTION_ALERT_SECONDS = 15.0
SETTLING_ALERT_SECONDS = 60.0
WAIT_EVENTS = 8
POOL_LEAVES = 8
APPLICATIONS = 10


@dataclass
class Status:
    """What the header says: where top looks, as whom, and what went wrong."""

    where: str
    role: str = ""
    interval: float = 1.0
    problem: str | None = None  # a lost connection or a failed read, one line
    hint: str | None = None  # what to do about it
    note: str | None = None  # what went wrong a moment ago (a reconnection)


def rate(prev: Snapshot | None, cur: Snapshot, metric: str) -> float | None:
    """Per second between the two snapshots; None without a usable delta."""
    if prev is None:
        return None
    before, after = prev.counter(metric), cur.counter(metric)
    elapsed = cur.taken_at - prev.taken_at
    if before is None or after is None or elapsed <= 0 or after < before:
        return None
    return (after - before) / elapsed


def render(
    prev: Snapshot | None, cur: Snapshot | None, waits: Waits | None, status: Status, console: Console
) -> RenderableType:
    """The whole screen, laid out for ``console``'s width."""
    parts: list[RenderableType] = [header(cur, status)]
    if status.problem:
        parts.append(Text(status.problem, style="bold red"))
        if status.hint:
            parts.append(Text(f"hint: {status.hint}", style="dim"))
    elif status.note:
        parts.append(Text(status.note, style="yellow"))
    if cur is None:
        parts.append(Text("no data yet", style="dim"))
        return Group(*parts)
    parts += side_by_side(console, throughput(prev, cur), holds_and_stock(cur))
    parts.append(hot_keys(cur.hot_keys))
    parts += side_by_side(console, wait_events(waits), sessions(cur), pool_leaves(cur))
    return Group(*parts)


def side_by_side(console: Console, *tables: Table) -> list[RenderableType]:
    """The tables in one row when they fit the width at their natural
    widths, else one under the other (a narrow terminal, a pipe)."""
    gap = 2
    natural = sum(console.measure(t).maximum for t in tables) + gap * (len(tables) - 1)
    if natural > console.width:
        return list(tables)
    row = Table.grid(padding=(0, gap))
    row.add_row(*tables)
    return [row]


def header(cur: Snapshot | None, status: Status) -> Text:
    text = Text()
    text.append("stockpool top", style="bold")
    text.append(f"  {status.where}")
    if status.role:
        text.append(f"  as {status.role}")
    if cur is not None:
        text.append(f"  {cur.clock:%H:%M:%S}")
    text.append(f"  every {status.interval:g} s  (Ctrl-C quits)", style="dim")
    return text


def _table(title: str, *columns: str) -> Table:
    table = Table(
        title=title,
        title_style="bold",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=True)
    return table


def throughput(prev: Snapshot | None, cur: Snapshot) -> Table:
    table = _table("throughput", "event", "per second", "total")
    for label, metric in RATES:
        total = cur.counter(metric)
        per_second = rate(prev, cur, metric)
        table.add_row(label, rate_text(per_second), "-" if total is None else f"{total:,.0f}")
    if cur.value("track_functions_enabled") == 0:
        table.caption = "counters are off: track_functions is none (ALTER SYSTEM SET track_functions = 'pl')"
        table.caption_style = "yellow"
    elif prev is None:
        table.caption = "rates from the next frame"
        table.caption_style = "dim"
    return table


def holds_and_stock(cur: Snapshot) -> Table:
    table = _table("holds and stock", "figure", "now")
    overdue = cur.value("holds_overdue")
    oldest = cur.value("holds_oldest_overdue_seconds")
    overdue_text = count_text(overdue)
    if overdue:
        overdue_text += f" (oldest {seconds_text(oldest)} past expiry)"
    pending = cur.value("pending_claims")
    pending_oldest = cur.value("pending_claims_oldest_seconds")
    pending_text = count_text(pending)
    if pending:
        pending_text += f" (oldest {seconds_text(pending_oldest)})"
    violations = cur.value("invariant_violations")
    rows: list[tuple[str, str, str]] = [
        ("holds live", count_text(cur.value("holds_live")), ""),
        ("holds overdue", overdue_text, _level(oldest, OVERDUE_ALERT_SECONDS) if overdue else ""),
        ("pending claims", pending_text, _level(pending_oldest, SETTLING_ALERT_SECONDS) if pending else ""),
        ("stock keys", count_text(cur.value("stock_keys")), ""),
        ("units on hand", count_text(cur.value("stock_on_hand_units")), ""),
        ("units pooled", count_text(cur.value("stock_pooled_units")), ""),
        ("units held", count_text(cur.value("stock_held_units")), ""),
        ("units unsettled", count_text(cur.value("stock_unsettled_units")), ""),
        ("pools active", count_text(cur.value("pools_active")), ""),
        ("dry pools with free stock", count_text(cur.value("pools_dry_with_free_stock")), ""),
        ("invariant violations", count_text(violations), "bold red" if violations else "green"),
    ]
    for label, value, style in rows:
        table.add_row(label, Text(value, style=style))
    return table


def hot_keys(keys: list[HotKey]) -> Table:
    table = _table(
        "hot keys",
        "shop",
        "item",
        "loc",
        "on hand",
        "pool",
        "target",
        "held",
        "free",
        "unsettled",
        "holds",
        "refill age",
    )
    for k in keys:
        table.add_row(
            str(k.shop_id),
            str(k.item_id),
            str(k.location_id),
            f"{k.on_hand:,}",
            f"{k.pooled:,}",
            f"{k.pool_target:,}" if k.pool_target else "-",
            f"{k.held:,}",
            Text(f"{k.free:,}", style="yellow" if k.free == 0 else ""),
            f"{k.unsettled:,}",
            f"{k.live_holds:,}",
            "never" if k.refilled_ago is None else seconds_text(k.refilled_ago),
        )
    if not keys:
        table.caption = "no key has a pool or live holds"
        table.caption_style = "dim"
    return table


def wait_events(waits: Waits | None) -> Table:
    table = _table("wait events", "event", "backends", "share")
    top = waits.top(WAIT_EVENTS) if waits else []
    total = sum(avg for _, avg in top) or 1.0
    for event, avg in top:
        table.add_row(escape(event), f"{avg:.1f}", f"{avg / total:.0%}")
    notes = []
    warn = False
    if waits is not None and waits.samples and not top:
        notes.append("no active session")
    if waits is not None and waits.error:
        notes.append(f"sampling failed: {waits.error}")
        warn = True
    if notes:
        table.caption = "\n".join(notes)
        table.caption_style = "yellow" if warn else "dim"
    return table


def sessions(cur: Snapshot) -> Table:
    table = _table(
        "sessions by application",
        "application",
        "sessions",
        "active",
        "idle in transaction",
        "longest idle in tx",
    )
    per_app: dict[str, dict[str, int]] = {}
    for (app, state), n in cur.sessions().items():
        per_app.setdefault(app, {})
        per_app[app][state] = per_app[app].get(state, 0) + n
    longest_idle = cur.by_application("longest_idle_in_transaction_seconds")

    def idle_in_transaction(states: dict[str, int]) -> int:
        return sum(n for state, n in states.items() if state.startswith("idle in transaction"))

    apps = sorted(per_app, key=lambda a: (-idle_in_transaction(per_app[a]), -sum(per_app[a].values()), a))
    for app in apps[:APPLICATIONS]:
        states = per_app[app]
        idle = idle_in_transaction(states)
        longest = longest_idle.get(app, 0.0)
        table.add_row(
            escape(app) if app else Text("(none)", style="dim"),
            str(sum(states.values())),
            str(states.get("active", 0)),
            Text(str(idle), style="yellow" if idle else ""),
            Text(
                seconds_text(longest) if idle else "-",
                style=_level(longest, IDLE_IN_TRANSACTION_ALERT_SECONDS),
            ),
        )
    if len(apps) > APPLICATIONS:
        table.caption = f"and {len(apps) - APPLICATIONS} more applications"
        table.caption_style = "dim"
    if any(state == "unknown" for _, state in cur.sessions()):
        table.caption = "states unknown: stockpool's owner lacks pg_read_all_stats (re-run stockpool deploy)"
        table.caption_style = "yellow"
    return table


def pool_leaves(cur: Snapshot) -> Table:
    table = _table("pool dead tuples", "leaf", "dead ratio", "last vacuum")
    ratios = cur.by_relation("pool_dead_ratio")
    vacuumed = cur.by_relation("pool_last_vacuum_seconds")
    leaves = sorted(ratios, key=lambda leaf: (-ratios[leaf], leaf))
    for leaf in leaves[:POOL_LEAVES]:
        ago = vacuumed.get(leaf)
        table.add_row(
            escape(leaf),
            Text(f"{ratios[leaf]:.1%}", style="bold red" if ratios[leaf] > DEAD_RATIO_ALERT else ""),
            "-" if ago is None else "never" if ago < 0 else f"{seconds_text(ago)} ago",
        )
    if len(leaves) > POOL_LEAVES:
        table.caption = f"and {len(leaves) - POOL_LEAVES} more leaves"
        table.caption_style = "dim"
    return table


def _level(value: float | None, alert: float) -> str:
    if value is None:
        return ""
    return "bold red" if value > alert else "yellow"


def rate_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def count_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def seconds_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"
