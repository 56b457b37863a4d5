"""The passenger's bookings as the model reads them: short lines, not JSON.

``fetch_user_info`` reads ``db.passengers.passenger_summary`` on every turn and keeps
this text as ``user_info``; the requests carry it in ``<bookings>`` tags (see
``assistants.context.normalise``). Every request holds it at least once, so each
character costs on every model call: the lines keep every id a tool takes (ticket
number, flight_id, booking_id) and every figure the model may quote (times, seats,
amounts), and leave out what JSON repeats (keys, quotes, cents beside the amounts,
airport codes beside the route).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from db.domains import RESERVATION_KINDS
from db.reservation_kind import ReservationKind, shown_name

Kind = ReservationKind[Any, Any]


def _when(start: Any, end: Any) -> str:
    return f"{start} to {end}"


def _segment(segment: Mapping[str, Any]) -> str:
    seat = f"seat {segment['seat_no']}" if segment.get("seat_no") else "no seat yet"
    boarding = f", boarding no. {segment['boarding_no']}" if segment.get("boarding_no") else ""
    checked = "checked in" if segment.get("checked_in") else "not checked in"
    return (
        f"  - {segment['flight_no']}, flight_id {segment['flight_id']}, {segment['route']}, "
        f"{_when(segment['departure'], segment['arrival'])}, {segment['flight_status']}; "
        f"{segment['segment_status']}, {segment['fare_conditions']}, {seat}{boarding}, "
        f"{checked}, paid {segment['amount_paid']}"
    )


def _tickets(tickets: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["Tickets:" if tickets else "Tickets: none"]
    for ticket in tickets:
        lines.append(
            f"- {ticket['ticket_no']} (booking {ticket['book_ref']}, booked "
            f"{ticket['booked_at']}), {ticket['status']}:"
        )
        lines += [_segment(s) for s in ticket.get("segments", [])]
    return lines


def _section(title: str, rows: Sequence[str]) -> list[str]:
    return [f"{title}:", *rows] if rows else [f"{title}: none"]


def _reservation(kind: Kind, row: Mapping[str, Any]) -> str:
    names = [shown_name(e) for e in kind.summary_columns]
    title = ", ".join(str(row[name]) for name in names if name != "location")
    units_key = f"{kind.period.unit}s"
    units = f" ({row[units_key]} {units_key})" if units_key in row else ""
    return (
        f"- booking {row['booking_id']}: {title} ({kind.catalogue_key} "
        f"{row[kind.catalogue_key]}), {row['location']}, "
        f"{' to '.join(str(row[name]) for name in kind.date_fields)}{units}, "
        f"{row['status']}, {row['total']}"
    )


def bookings_text(summary: Mapping[str, Any]) -> str:
    """Return ``summary`` (``db.passengers.passenger_summary``) as the model reads it."""
    lines = [
        f"{summary['name']} (passenger {summary['passenger_id']})",
        *_tickets(summary.get("tickets", [])),
    ]
    for kind in RESERVATION_KINDS:
        rows = [_reservation(kind, row) for row in summary.get(kind.summary_key, [])]
        lines += _section(kind.summary_title, rows)
    return "\n".join(lines)


def _sections(text: str) -> list[str]:
    """Split bookings text into its sections: a heading line and the lines under it."""
    sections: list[str] = []
    for line in text.splitlines():
        if line.startswith(("-", " ")) and sections:
            sections[-1] += "\n" + line
        else:
            sections.append(line)
    return sections


def changed_sections(before: str, after: str) -> str:
    """Return the sections of ``after`` that differ from ``before``, in order.

    A request shows bookings in full once, then only what changed: every later copy
    would otherwise repeat the sections the model already read.
    """
    known = set(_sections(before))
    return "\n".join(section for section in _sections(after) if section not in known)
