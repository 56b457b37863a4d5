"""Reservation kinds: hotels, car rentals and excursions, each declared as one ``ReservationKind``.

A declaration names a kind's tables (the columns every reservation table and catalogue
has are ``BookingRow`` and ``CatalogueRow``), its period, free window and late fee, the
columns it shows and searches, and its words. The generic code reads only this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.orm import QueryableAttribute

from db.periods import Dates, Period
from db.values import money


class BookingRow(Protocol):
    """The columns every reservation table has (a mapped class takes them as keywords)."""

    def __init__(self, **columns: Any) -> None: ...

    id: int
    passenger_id: str
    status: str
    total_cents: int


class CatalogueRow(Protocol):
    """The columns every partner catalogue has."""

    id: int
    name: str
    location: str


BookingT = TypeVar("BookingT", bound=BookingRow)
CatalogueT = TypeVar("CatalogueT", bound=CatalogueRow)
Column = QueryableAttribute[Any]
# A column shown under its own name, or under another one: ``("places_per_day", column)``.
Shown = Column | tuple[str, Column]


def shown_name(entry: Shown) -> str:
    """Return the key a shown column has in results."""
    return entry[0] if isinstance(entry, tuple) else entry.key


def shown_column(entry: Shown) -> Column:
    """Return the column of a shown entry."""
    return entry[1] if isinstance(entry, tuple) else entry


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per kind
class ReservationKind(Generic[BookingT, CatalogueT]):
    """One kind of partner reservation, declared: everything that tells it from another.

    The generic code (``db.partners``'s lookups, quotes and writes; ``db.reservations`` for
    search, availability, pricing and the passenger's summary) reads only this.

    Attributes:
        kind: ``"hotel"``, ``"car_rental"`` or ``"excursion"``: the quote's kind, the key
            of the catalogue entry in results and the prefix of payment kinds; the tools'
            names are ``book_<kind>``, ``update_<kind>``, ``cancel_<kind>``.
        noun: The kind in approval titles, e.g. ``"car rental"`` ("Change car rental").
        label: The kind for people, e.g. ``"Hotel reservation"``.
        payment_prefix: The prefix of payment references, e.g. ``"hotel"`` (``hotel-4``).
        booking_model: The reservation table.
        catalogue_model: The partner's catalogue table (``id``, ``name``, ``location``).
        catalogue_key: The reservation column holding the catalogue id, e.g. ``"hotel_id"``;
            also the catalogue id's key in results and the booking tool's id argument.
        period: How the reservation is dated; its fields are the reservation's date
            columns and the keys of a quote's ``before``/``after``.
        free_hours: The free change/cancellation window before the first day, in hours.
        late_fee_what: What the late fee is, for the fee note.
        late_fee_parts: How many parts the price paid splits into for the late fee (one
            part is kept), from the reservation's dates.
        rate: The catalogue's price column, in cents per unit of the period (per night,
            per day; per person for a one-day period).
        capacity: The catalogue's units per day (rooms, cars, places).
        shown: The catalogue columns shown to the customer, after the id; the rate is
            shown as money under its name without ``_cents``.
        full_message: Why a day has no unit left: ``{item.<column>}`` and ``{day}``.
        missing_item: The not-found message for a catalogue id (``{id}`` is filled in).
        missing_booking: The not-found message for a reservation id (``{id}``).
        unchanged: What a change to the same dates says, e.g. ``"already runs {dates}"``.
        price_detail: How a booking's price is made: ``{units}``, ``{rate}``, ``{total}``.
        change_detail: The same for a change (``None``: not shown).
        book_lines: Lines the booking card shows under the name (``{item.<column>}``).
        results_key: The key of the search results, e.g. ``"hotels"``.
        search_columns: The catalogue columns searched by a partial match; the search
            arguments have their names.
        keywords_column: A column searched for any of comma-separated words (the
            ``keywords`` argument), if any.
        dates_message: With dates, a search prices the period and says this when only
            some dates are given; ``None`` for a search without dates.
        left_key: The key of the units left in a priced search, e.g. ``"rooms_left"``.
        summary_key: The key of the passenger's reservations of this kind in their
            summary, e.g. ``"hotel_reservations"``.
        summary_title: Their heading in the bookings the model reads, e.g. ``"Hotels"``.
        summary_columns: The catalogue columns a summary row shows, after the ids; all
            but ``location`` name the entry.
        placeholder: The evaluation scenarios' placeholder, ``{<placeholder>:NAME}``.
        placeholder_columns: The columns a placeholder's ``/``-separated parts match.
    """

    kind: str
    noun: str
    label: str
    payment_prefix: str
    booking_model: type[BookingT]
    catalogue_model: type[CatalogueT]
    catalogue_key: str
    period: Period
    free_hours: int
    late_fee_what: str
    late_fee_parts: Callable[[Dates], int]
    rate: Column
    capacity: Column
    shown: tuple[Shown, ...]
    full_message: str
    missing_item: str
    missing_booking: str
    unchanged: str
    results_key: str
    search_columns: tuple[Column, ...]
    summary_key: str
    summary_title: str
    summary_columns: tuple[Shown, ...]
    placeholder: str
    placeholder_columns: tuple[Column, ...]
    price_detail: str = "{units} x {rate} = {total}"
    change_detail: str | None = "{units} x {rate}"
    book_lines: tuple[str, ...] = ()
    keywords_column: Column | None = None
    dates_message: str | None = None
    left_key: str = ""

    @property
    def date_fields(self) -> tuple[str, ...]:
        """Return the reservation's date columns, first day first."""
        return self.period.fields

    def dates_of(self, booking: BookingT) -> Dates:
        """Return a reservation's dates, in ``date_fields`` order."""
        return tuple(getattr(booking, name) for name in self.date_fields)

    def dates_dict(self, dates: Dates) -> dict[str, str]:
        """Return dates as a quote's ``before``/``after``: ``{column: "YYYY-MM-DD"}``."""
        return self.period.as_dict(dates)

    def dates_text(self, dates: Dates) -> str:
        """Return the dates for people."""
        return self.period.show(dates)

    def catalogue_id(self, booking: BookingT) -> int:
        """Return the id of the catalogue entry a reservation is for."""
        value: int = getattr(booking, self.catalogue_key)
        return value

    def view(self, item: CatalogueT) -> dict[str, Any]:
        """Return a catalogue entry as shown to the customer."""
        view: dict[str, Any] = {self.catalogue_key: item.id}
        for entry in self.shown:
            value = getattr(item, shown_column(entry).key)
            if shown_column(entry).key == self.rate.key:
                view.update(money(shown_name(entry).removesuffix("_cents"), value))
            else:
                view[shown_name(entry)] = value
        return view
