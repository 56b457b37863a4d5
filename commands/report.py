"""``travel-assistant report``: the day's figures of the contact center, from the store."""

from __future__ import annotations

import argparse
import csv
import io
import json
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from commands.common import EXIT_OK, EXIT_USAGE, CliError, open_existing_store
from terminal import Console

if TYPE_CHECKING:
    from conversations.day_figures import DayFigures
    from settings import Settings

# The longest span one report reads: every conversation of it is opened.
MAX_DAYS = 366
DEFAULT_DAYS = 7


def span_of(since: str | None, until: str | None, today: date) -> tuple[date, date]:
    """Return the days a report covers: ``--since`` to ``--until`` (YYYY-MM-DD), both included.

    Without them, the last ``DEFAULT_DAYS`` days up to ``today``.

    Raises:
        CliError: A date that is not YYYY-MM-DD, an end before the start, or too long a span.
    """
    last = _date(until, "--until") if until else today
    first = _date(since, "--since") if since else last - timedelta(days=DEFAULT_DAYS - 1)
    if last < first:
        raise CliError(f"--until {last} is before --since {first}.", EXIT_USAGE)
    if (last - first).days + 1 > MAX_DAYS:
        raise CliError(
            f"A report covers at most {MAX_DAYS} days; narrow --since/--until.", EXIT_USAGE
        )
    return first, last


def cmd_report(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Print the figures of each day, as a table, JSON lines or CSV."""
    price = _price(args.price_in, args.price_out)
    first, last = span_of(args.since, args.until, datetime.now(UTC).date())
    store = open_existing_store(settings)
    days: list[DayFigures]
    if store is None:
        from conversations.day_figures import DayFigures

        days = [DayFigures(first + timedelta(days=n)) for n in range((last - first).days + 1)]
    else:
        from commands.sessions import session_reader
        from conversations.day_figures import day_figures

        with store:
            days = day_figures(session_reader(store), first, last)
    rows = [d.as_row(price) for d in days]
    if args.format == "json":
        console.say(json.dumps({"days": rows}, ensure_ascii=False, indent=2))
    elif args.format == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        console.say(out.getvalue().rstrip("\n"))
    else:
        _table(console, days, price)
    return EXIT_OK


def _table(console: Console, days: list[DayFigures], price: tuple[float, float] | None) -> None:
    from db.values import fmt_money

    headers = [
        "day",
        "conversations",
        "messages",
        "resolved alone",
        "to a person",
        "wait min (median/p90)",
        "actions done/failed/declined/refused/not done",
        "charged",
        "refunded",
        "checks yes/no/withdrawn/waiting",
        "model errors",
        "tokens in/out",
        "cost",
    ]
    rows = []
    for d in days:
        row = d.as_row(price)
        wait = "-" if d.wait_median is None else f"{d.wait_median:.0f}/{d.wait_p90:.0f}"
        actions = [str(v) for k, v in row.items() if k.startswith("actions_")]
        checks = [str(v) for k, v in row.items() if k.startswith("checks_")]
        rows.append(
            [
                str(row["day"]),
                str(d.conversations),
                str(d.messages),
                str(d.resolved_by_assistant),
                str(d.handed_to_person),
                wait,
                "/".join(actions),
                fmt_money(d.charged_cents),
                fmt_money(d.refunded_cents),
                "/".join(checks),
                str(d.model_errors),
                f"{d.tokens_in}/{d.tokens_out}",
                "n/a" if row["cost"] is None else f"{row['cost']:.4f}",
            ]
        )
    console.table(headers, rows, err=False, wrap=1)


def _price(price_in: float | None, price_out: float | None) -> tuple[float, float] | None:
    if (price_in is None) != (price_out is None):
        raise CliError(
            "Give both --price-in and --price-out (per million tokens), or neither.", EXIT_USAGE
        )
    if price_in is None or price_out is None:
        return None
    if price_in < 0 or price_out < 0:
        raise CliError("Prices cannot be negative.", EXIT_USAGE)
    return price_in, price_out


def _date(text: str, flag: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CliError(f"{flag} takes a date as YYYY-MM-DD, not {text!r}.", EXIT_USAGE) from None
