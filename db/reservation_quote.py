"""The quote of a partner write: what booking, changing or cancelling would do, unwritten.

Every partner write is priced by a ``ReservationQuote``, which the customer approves (its
``lines``) and the write applies. Its ``net_cents`` is what the write moves: positive is
charged, negative refunded (new total - old total + fee).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from db.values import AmountKind, amount_line, fmt_money, money

Action = Literal["book", "update", "cancel"]
RESULT_STATUS: dict[Action, str] = {"book": "booked", "update": "changed", "cancel": "cancelled"}
# How an action starts the title of its approval card ("Change hotel").
VERBS: dict[Action, str] = {"book": "Book", "update": "Change", "cancel": "Cancel"}


@dataclass(frozen=True)
class ReservationQuote:
    """What a partner write would do, computed without writing.

    Attributes:
        action: ``"book"``, ``"update"`` or ``"cancel"``.
        kind: ``"hotel"``, ``"car_rental"`` or ``"excursion"``.
        noun: The kind in the title, e.g. ``"car rental"``.
        kind_label: The kind for people, e.g. ``"Hotel reservation"``.
        passenger_id: Who the reservation belongs to.
        booking_id: The reservation id (``None`` before a booking exists).
        item: The catalogue entry shown to the customer (id, name, location, ...).
        before: The dates before the write (``None`` for a booking).
        after: The dates after the write (``None`` for a cancellation).
        before_text: ``before`` for people, e.g. ``"check-in 2026-05-10, ..."``.
        after_text: ``after`` for people.
        old_total_cents: What the reservation cost before (0 for a booking).
        new_total_cents: What it costs after (0 for a cancellation).
        price_detail: How ``new_total_cents`` is made, e.g. ``"3 nights x EUR 150.00"``.
        fee_cents: The late change or cancellation fee.
        fee_note: Why the fee is what it is.
    """

    action: Action
    kind: str
    noun: str
    kind_label: str
    passenger_id: str
    booking_id: int | None
    item: dict[str, Any]
    before: dict[str, str] | None
    after: dict[str, str] | None
    before_text: str | None
    after_text: str | None
    old_total_cents: int
    new_total_cents: int
    price_detail: str | None
    fee_cents: int = 0
    fee_note: str | None = None
    extra_lines: tuple[str, ...] = field(default=())

    @property
    def net_cents(self) -> int:
        """Return the money the write moves: positive charged, negative refunded."""
        return self.new_total_cents - self.old_total_cents + self.fee_cents

    @property
    def amount_kind(self) -> AmountKind:
        """Return what the customer does with ``amount_cents``; nothing moved is paying 0."""
        return "refund" if self.net_cents < 0 else "pay"

    @property
    def amount_cents(self) -> int:
        """Return the money the write moves, without its sign (see ``amount_kind``)."""
        return abs(self.net_cents)

    @property
    def title(self) -> str:
        """Return a short title for the approval prompt."""
        return f"{VERBS[self.action]} {self.noun}"

    def lines(self) -> list[str]:
        """Return the before -> after and price lines shown before approval."""
        name = self.item.get("name", "")
        location = self.item.get("location", "")
        header = f"{name}, {location}" if location else str(name)
        lines: list[str] = []
        if self.booking_id is not None:
            lines.append(f"{self.kind_label} {self.booking_id}: {header}")
        else:
            lines.append(header)
        lines.extend(self.extra_lines)
        if self.action == "book":
            lines.append(f"Dates: {self.after_text}")
            lines.append(f"Price: {self.price_detail}")
        elif self.action == "update":
            lines.append(f"Dates: {self.before_text} -> {self.after_text}")
            lines.append(
                f"Price: {fmt_money(self.old_total_cents)} -> {fmt_money(self.new_total_cents)}"
                + (f" ({self.price_detail})" if self.price_detail else "")
            )
            lines.append(f"Change fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        else:
            lines.append(f"Dates: {self.before_text}")
            lines.append(f"Paid: {fmt_money(self.old_total_cents)}")
            lines.append(f"Cancellation fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        lines.append(amount_line(self.amount_kind, self.amount_cents))
        return lines

    def as_result(self, booking_id: int) -> dict[str, Any]:
        """Return the JSON-able result of the applied write.

        Args:
            booking_id: The reservation id (the new one for a booking).
        """
        charged = max(self.net_cents, 0)
        refunded = max(-self.net_cents, 0)
        result: dict[str, Any] = {
            "status": RESULT_STATUS[self.action],
            "booking_id": booking_id,
            self.kind: self.item,
            "before": self.before,
            "after": self.after,
            **money("total", self.new_total_cents if self.action != "cancel" else 0),
            **money("fee", self.fee_cents),
            **money("charged", charged),
            **money("refunded", refunded),
        }
        if self.fee_note:
            result["fee_note"] = self.fee_note
        result["summary"] = self._summary(booking_id, charged, refunded)
        return result

    def _summary(self, booking_id: int, charged: int, refunded: int) -> str:
        what = f"{self.kind_label} {booking_id} ({self.item.get('name', '')})"
        if self.action == "book":
            done = f"{what} is booked for {self.after_text}."
        elif self.action == "update":
            done = f"{what} now runs {self.after_text} (was {self.before_text})."
        else:
            done = f"{what} for {self.before_text} is cancelled."
        if charged:
            money_text = f" Charged {fmt_money(charged)}."
        elif refunded:
            money_text = f" Refunded {fmt_money(refunded)}."
        else:
            money_text = " Nothing was charged or refunded."
        return done + money_text
