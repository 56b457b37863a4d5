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


def bookings_text(summary: Mapping[str, Any]) -> str:
    """Return ``summary`` (``db.passengers.passenger_summary``) as the model reads it."""
    hotels = [
        f"- booking {h['booking_id']}: {h['hotel_name']} (hotel_id {h['hotel_id']}), "
        f"{h['location']}, {_when(h['checkin_date'], h['checkout_date'])} "
        f"({h['nights']} nights), {h['status']}, {h['total']}"
        for h in summary.get("hotel_reservations", [])
    ]
    cars = [
        f"- booking {c['booking_id']}: {c['company']}, {c['car_class']} (rental_id "
        f"{c['rental_id']}), {c['location']}, {_when(c['start_date'], c['end_date'])} "
        f"({c['days']} days), {c['status']}, {c['total']}"
        for c in summary.get("car_rental_reservations", [])
    ]
    excursions = [
        f"- booking {e['booking_id']}: {e['name']} (recommendation_id "
        f"{e['recommendation_id']}), {e['location']}, {e['date']}, {e['status']}, {e['total']}"
        for e in summary.get("excursion_reservations", [])
    ]
    lines = [
        f"{summary['name']} (passenger {summary['passenger_id']})",
        *_tickets(summary.get("tickets", [])),
        *_section("Hotels", hotels),
        *_section("Car rentals", cars),
        *_section("Excursions", excursions),
    ]
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
