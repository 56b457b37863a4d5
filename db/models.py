"""SQLAlchemy 2.0 models of every table.

The flight part keeps the table names of the well-known airline demo database
(``airports_data``, ``aircrafts_data``, ``seats``, ``flights``, ``bookings``, ``tickets``,
``ticket_flights``, ``boarding_passes``). Money is stored as integer cents in
``CURRENCY``; timestamps as timezone-aware UTC (see ``UTCDateTime``); calendar dates
(hotel nights, rental days, excursion days) as ``Date``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

CURRENCY = "EUR"
FARE_CONDITIONS = ("Economy", "Comfort", "Business")
FLIGHT_STATUSES = ("Scheduled", "On Time", "Delayed", "Departed", "Arrived", "Cancelled")
# Statuses of a flight that a ticket may still be moved onto.
BOOKABLE_FLIGHT_STATUSES = ("Scheduled", "On Time", "Delayed")
RESERVATION_STATUSES = ("confirmed", "cancelled")
TICKET_STATUSES = ("active", "cancelled")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and always read back timezone-aware in UTC.

    SQLite has no timezone type; PostgreSQL would shift naive values by the session
    zone. Normalising at the boundary keeps both backends identical.
    """

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert an aware datetime to naive UTC; reject naive input."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not accepted; pass a timezone-aware value")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Attach UTC to the stored naive value."""
        if value is None:
            return None
        moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        if moment.tzinfo is None:  # rows written by bulk loaders come as ISO text, naive
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of every model."""


class Airport(Base):
    """An airport, with the IANA timezone its local times are shown in."""

    __tablename__ = "airports_data"

    airport_code: Mapped[str] = mapped_column(String(3), primary_key=True)
    airport_name: Mapped[str] = mapped_column(String(120))
    city: Mapped[str] = mapped_column(String(80), index=True)
    country: Mapped[str] = mapped_column(String(80))
    latitude: Mapped[float] = mapped_column(Float)
    longitude: Mapped[float] = mapped_column(Float)
    timezone: Mapped[str] = mapped_column(String(64))


class Aircraft(Base):
    """An aircraft type."""

    __tablename__ = "aircrafts_data"

    aircraft_code: Mapped[str] = mapped_column(String(3), primary_key=True)
    model: Mapped[str] = mapped_column(String(80))
    range_km: Mapped[int] = mapped_column(Integer)


class Seat(Base):
    """One seat of an aircraft type's seat map."""

    __tablename__ = "seats"
    __table_args__ = (
        CheckConstraint(
            "fare_conditions IN ('Economy', 'Comfort', 'Business')", name="ck_seats_fare"
        ),
    )

    aircraft_code: Mapped[str] = mapped_column(
        ForeignKey("aircrafts_data.aircraft_code", ondelete="CASCADE"), primary_key=True
    )
    seat_no: Mapped[str] = mapped_column(String(4), primary_key=True)
    fare_conditions: Mapped[str] = mapped_column(String(10))


class Flight(Base):
    """A scheduled flight (one leg)."""

    __tablename__ = "flights"
    __table_args__ = (
        UniqueConstraint("flight_no", "scheduled_departure", name="uq_flights_no_departure"),
        Index(
            "ix_flights_route_departure",
            "departure_airport",
            "arrival_airport",
            "scheduled_departure",
        ),
        Index("ix_flights_departure", "scheduled_departure"),
        CheckConstraint("scheduled_arrival > scheduled_departure", name="ck_flights_times"),
    )

    flight_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flight_no: Mapped[str] = mapped_column(String(6))
    scheduled_departure: Mapped[datetime] = mapped_column(UTCDateTime)
    scheduled_arrival: Mapped[datetime] = mapped_column(UTCDateTime)
    departure_airport: Mapped[str] = mapped_column(ForeignKey("airports_data.airport_code"))
    arrival_airport: Mapped[str] = mapped_column(ForeignKey("airports_data.airport_code"))
    status: Mapped[str] = mapped_column(String(20))
    aircraft_code: Mapped[str] = mapped_column(ForeignKey("aircrafts_data.aircraft_code"))
    actual_departure: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    actual_arrival: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class FlightFare(Base):
    """The price of one fare class on one flight."""

    __tablename__ = "flight_fares"

    flight_id: Mapped[int] = mapped_column(
        ForeignKey("flights.flight_id", ondelete="CASCADE"), primary_key=True
    )
    fare_conditions: Mapped[str] = mapped_column(String(10), primary_key=True)
    amount_cents: Mapped[int] = mapped_column(Integer)


class Passenger(Base):
    """A customer. ``passenger_id`` is the identity the assistant acts for."""

    __tablename__ = "passengers"

    passenger_id: Mapped[str] = mapped_column(String(20), primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    email: Mapped[str | None] = mapped_column(String(120), nullable=True)


class Booking(Base):
    """A booking (PNR): one purchase that holds one or more tickets."""

    __tablename__ = "bookings"

    book_ref: Mapped[str] = mapped_column(String(6), primary_key=True)
    book_date: Mapped[datetime] = mapped_column(UTCDateTime)
    total_amount_cents: Mapped[int] = mapped_column(Integer)


class Ticket(Base):
    """A ticket of one passenger inside a booking."""

    __tablename__ = "tickets"

    ticket_no: Mapped[str] = mapped_column(String(16), primary_key=True)
    book_ref: Mapped[str] = mapped_column(ForeignKey("bookings.book_ref"), index=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.passenger_id"), index=True)
    status: Mapped[str] = mapped_column(String(10), default="active")


class TicketFlight(Base):
    """One segment of a ticket: the flight, its fare class and what was paid for it."""

    __tablename__ = "ticket_flights"
    __table_args__ = (Index("ix_ticket_flights_flight_fare", "flight_id", "fare_conditions"),)

    ticket_no: Mapped[str] = mapped_column(
        ForeignKey("tickets.ticket_no", ondelete="CASCADE"), primary_key=True
    )
    flight_id: Mapped[int] = mapped_column(
        ForeignKey("flights.flight_id", onupdate="CASCADE"), primary_key=True
    )
    fare_conditions: Mapped[str] = mapped_column(String(10))
    amount_cents: Mapped[int] = mapped_column(Integer)


class BoardingPass(Base):
    """The seat assignment of a segment; ``checked_in_at`` is set once checked in.

    A rebooking moves this row with the segment, so a ticket never loses its seat
    (a known defect of the reference design).
    """

    __tablename__ = "boarding_passes"
    __table_args__ = (
        ForeignKeyConstraint(
            ["ticket_no", "flight_id"],
            ["ticket_flights.ticket_no", "ticket_flights.flight_id"],
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
        UniqueConstraint("flight_id", "seat_no", name="uq_boarding_passes_seat"),
        UniqueConstraint("flight_id", "boarding_no", name="uq_boarding_passes_boarding_no"),
    )

    ticket_no: Mapped[str] = mapped_column(String(16), primary_key=True)
    flight_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    boarding_no: Mapped[int] = mapped_column(Integer)
    seat_no: Mapped[str] = mapped_column(String(4))
    checked_in_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class CarRental(Base):
    """A car-rental offer: a company's car class at a location, with a fleet size."""

    __tablename__ = "car_rentals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    location: Mapped[str] = mapped_column(String(80), index=True)
    price_tier: Mapped[str] = mapped_column(String(20))
    car_class: Mapped[str] = mapped_column(String(60))
    daily_rate_cents: Mapped[int] = mapped_column(Integer)
    fleet_size: Mapped[int] = mapped_column(Integer, CheckConstraint("fleet_size >= 0"))


class Hotel(Base):
    """A hotel with a nightly rate and a number of rooms."""

    __tablename__ = "hotels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    location: Mapped[str] = mapped_column(String(80), index=True)
    price_tier: Mapped[str] = mapped_column(String(20))
    nightly_rate_cents: Mapped[int] = mapped_column(Integer)
    rooms: Mapped[int] = mapped_column(Integer, CheckConstraint("rooms >= 0"))


class TripRecommendation(Base):
    """An excursion offer with a price per person and places per day."""

    __tablename__ = "trip_recommendations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    location: Mapped[str] = mapped_column(String(80), index=True)
    keywords: Mapped[str] = mapped_column(String(200))
    details: Mapped[str] = mapped_column(Text)
    price_cents: Mapped[int] = mapped_column(Integer)
    capacity_per_day: Mapped[int] = mapped_column(Integer, CheckConstraint("capacity_per_day >= 0"))


class CarRentalBooking(Base):
    """A car rental reserved by a passenger, from ``start_date`` to ``end_date`` inclusive."""

    __tablename__ = "car_rental_bookings"
    __table_args__ = (
        CheckConstraint("end_date >= start_date", name="ck_car_rental_bookings_dates"),
        Index("ix_car_rental_bookings_rental_dates", "rental_id", "start_date", "end_date"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.passenger_id"), index=True)
    rental_id: Mapped[int] = mapped_column(ForeignKey("car_rentals.id"))
    start_date: Mapped[date] = mapped_column(Date)
    end_date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(10), default="confirmed")
    total_cents: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class HotelBooking(Base):
    """A hotel stay reserved by a passenger.

    The nights run from check-in to the day before check-out.
    """

    __tablename__ = "hotel_bookings"
    __table_args__ = (
        CheckConstraint("checkout_date > checkin_date", name="ck_hotel_bookings_dates"),
        Index("ix_hotel_bookings_hotel_dates", "hotel_id", "checkin_date", "checkout_date"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.passenger_id"), index=True)
    hotel_id: Mapped[int] = mapped_column(ForeignKey("hotels.id"))
    checkin_date: Mapped[date] = mapped_column(Date)
    checkout_date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(10), default="confirmed")
    total_cents: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ExcursionBooking(Base):
    """A place on an excursion on one date, reserved by a passenger."""

    __tablename__ = "excursion_bookings"
    __table_args__ = (
        Index("ix_excursion_bookings_recommendation_date", "recommendation_id", "date"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.passenger_id"), index=True)
    recommendation_id: Mapped[int] = mapped_column(ForeignKey("trip_recommendations.id"))
    date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(10), default="confirmed")
    total_cents: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Payment(Base):
    """Money moved by a write: positive is charged to the passenger, negative refunded."""

    __tablename__ = "payments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.passenger_id"), index=True)
    amount_cents: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    reference: Mapped[str] = mapped_column(String(40))
    description: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ToolCallRecord(Base):
    """The result of a write, keyed by the conversation and the tool call that asked for it.

    Written in the same transaction as the write, so a write repeated for the same
    tool call (a resume after a crash) returns the stored result instead of running twice.
    ``thread_id`` is ``""`` for calls made outside a conversation; ``args_sha256`` is the
    digest of the call's arguments (``""`` for records made before it was kept), so the
    same id with other arguments is refused instead of answered with this result.
    """

    __tablename__ = "tool_call_records"
    __table_args__ = (
        PrimaryKeyConstraint("thread_id", "tool_call_id", name="pk_tool_call_records"),
    )

    thread_id: Mapped[str] = mapped_column(String(120))
    tool_call_id: Mapped[str] = mapped_column(String(120))
    args_sha256: Mapped[str] = mapped_column(String(64))
    tool_name: Mapped[str] = mapped_column(String(60))
    passenger_id: Mapped[str] = mapped_column(String(20))
    result_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
