"""Tests of db.writes (once-only writes, serialised writers) and db.values (formats)."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

import db.writes
from db import reservations
from db.engine import Database
from db.errors import InvalidInputError, RuleViolationError, TravelError
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID, FLOWN_PASSENGER_ID
from db.hotels import HOTEL
from db.models import Hotel, HotelBooking, Payment, ToolCallRecord
from db.values import local_time, money, parse_date, parse_time_bound
from db.writes import NO_THREAD, record_payment, run_once
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump

NOW = FIXED_NOW


def _counting_write(counter: list[int]) -> Any:
    def write() -> dict[str, Any]:
        counter.append(1)
        return {"n": len(counter), "when": "2026-05-04"}

    return write


def test_run_once_runs_a_tool_call_once(travel_db: Database) -> None:
    counter: list[int] = []
    results = []
    for _ in range(2):
        with travel_db.transaction() as session:
            results.append(
                run_once(
                    session,
                    tool_call_id="call-1",
                    tool_name="book_hotel",
                    passenger_id=FIXTURE_PASSENGER_ID,
                    now=NOW,
                    write=_counting_write(counter),
                )
            )
    assert counter == [1]
    assert results[0] == results[1] == {"n": 1, "when": "2026-05-04"}


def test_run_once_without_an_id_always_runs(travel_db: Database) -> None:
    counter: list[int] = []
    for _ in range(2):
        with travel_db.transaction() as session:
            run_once(
                session,
                tool_call_id=None,
                tool_name="book_hotel",
                passenger_id=FIXTURE_PASSENGER_ID,
                now=NOW,
                write=_counting_write(counter),
            )
    assert counter == [1, 1]
    with travel_db.session() as session:
        assert session.scalar(select(func.count()).select_from(ToolCallRecord)) == 0


def test_run_once_stores_nothing_when_the_write_fails(travel_db: Database) -> None:
    def failing() -> dict[str, Any]:
        raise RuleViolationError("no")

    with pytest.raises(RuleViolationError), travel_db.transaction() as session:
        run_once(
            session,
            tool_call_id="call-2",
            tool_name="cancel_hotel",
            passenger_id=FIXTURE_PASSENGER_ID,
            now=NOW,
            write=failing,
        )
    with travel_db.session() as session:
        # Keyed by (thread, tool call id); a call made outside a conversation has no thread.
        assert session.get(ToolCallRecord, (NO_THREAD, "call-2")) is None


def test_run_once_refuses_an_id_reused_by_another_passenger(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        run_once(
            session,
            tool_call_id="call-3",
            tool_name="book_hotel",
            passenger_id=FIXTURE_PASSENGER_ID,
            now=NOW,
            write=_counting_write([]),
        )
    with pytest.raises(RuleViolationError, match="already used"), travel_db.transaction() as s:
        run_once(
            s,
            tool_call_id="call-3",
            tool_name="book_hotel",
            passenger_id=FLOWN_PASSENGER_ID,
            now=NOW,
            write=_counting_write([]),
        )


def test_concurrent_bookings_of_the_last_room_sell_it_once(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        hotel = session.scalars(select(Hotel).order_by(Hotel.id).limit(1)).one()
        session.execute(update(Hotel).where(Hotel.id == hotel.id).values(rooms=1))
        hotel_id = hotel.id
    checkin = (NOW.date() + timedelta(days=60)).isoformat()
    checkout = (NOW.date() + timedelta(days=61)).isoformat()
    barrier = threading.Barrier(4)
    outcomes: list[str] = []

    def attempt(passenger_id: str) -> None:
        barrier.wait()
        try:
            with travel_db.transaction() as session:
                run_once(
                    session,
                    tool_call_id=None,
                    tool_name="book_hotel",
                    passenger_id=passenger_id,
                    now=NOW,
                    write=lambda: reservations.book(
                        session, HOTEL, passenger_id, hotel_id, (checkin, checkout), NOW
                    ),
                )
            outcomes.append("booked")
        except TravelError:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=attempt, args=(p,))
        for p in (
            FIXTURE_PASSENGER_ID,
            BUSINESS_PASSENGER_ID,
            FLOWN_PASSENGER_ID,
            FIXTURE_PASSENGER_ID,
        )
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["booked", "refused", "refused", "refused"]
    with travel_db.session() as session:
        count = session.scalar(
            select(func.count())
            .select_from(HotelBooking)
            .where(HotelBooking.hotel_id == hotel_id, HotelBooking.status == "confirmed")
            .where(HotelBooking.checkin_date == date.fromisoformat(checkin))
        )
    assert count == 1


# Values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Europe/Paris", "2026-05-04 15:05 CEST (+02:00)"),
        ("America/New_York", "2026-05-04 09:05 EDT (-04:00)"),
        ("Asia/Tokyo", "2026-05-04 22:05 JST (+09:00)"),
        ("UTC", "2026-05-04 13:05 UTC (+00:00)"),
    ],
)
def test_local_time_shows_zone_and_offset(zone: str, expected: str) -> None:
    assert local_time(datetime(2026, 5, 4, 13, 5, tzinfo=UTC), zone) == expected


def test_money_gives_cents_and_text() -> None:
    assert money("fee", 7_500) == {"fee_cents": 7_500, "fee": "EUR 75.00"}


@pytest.mark.parametrize("text", ["2026-5-4", "04/05/2026", "2026-02-30", "", "tomorrow"])
def test_parse_date_rejects_other_formats(text: str) -> None:
    with pytest.raises(InvalidInputError, match="YYYY-MM-DD"):
        parse_date(text, "checkin_date")


def test_parse_time_bound_reads_dates_and_offsets() -> None:
    assert parse_time_bound("2026-05-06", "end_time", end=True) == datetime(2026, 5, 7, tzinfo=UTC)
    assert parse_time_bound("2026-05-06T10:00", "start_time", end=False) == datetime(
        2026, 5, 6, 10, tzinfo=UTC
    )
    assert parse_time_bound("2026-05-06T10:00+02:00", "start_time", end=False) == datetime(
        2026, 5, 6, 8, tzinfo=UTC
    )
    assert parse_time_bound("2026-05-06 10:00Z", "start_time", end=False) == datetime(
        2026, 5, 6, 10, tzinfo=UTC
    )


# Duplicate deliveries at once ---------------------------------------------------------------


@pytest.mark.parametrize("per_call_lock", [True, False], ids=["locked", "lock-bypassed"])
def test_duplicate_deliveries_at_once_answer_with_the_stored_result(
    travel_db: Database, engine_name: str, monkeypatch: pytest.MonkeyPatch, per_call_lock: bool
) -> None:
    """Two deliveries of one call (same thread, id and arguments) at the same moment.

    Each runs ``run_once`` in its own transaction. Both get the first one's answer, the
    write happens once, and no ``IntegrityError`` comes out of ``run_once``. With the
    per-call lock bypassed (PostgreSQL only: SQLite's ``BEGIN IMMEDIATE`` cannot be), both
    deliveries find no record and both write; the one whose record insert conflicts is
    rolled back to its savepoint and answers with the stored result.
    """
    if not per_call_lock:
        if engine_name == "sqlite":
            pytest.skip("SQLite serialises every writer with BEGIN IMMEDIATE")
        monkeypatch.setattr(db.writes, "_wait_for_other_deliveries", lambda session, key: None)
    start = threading.Barrier(2, timeout=30)
    both_writing = threading.Barrier(2, timeout=30)
    writes: list[int] = []
    results: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    with travel_db.session() as session:
        payments_before = session.scalar(select(func.count()).select_from(Payment))

    def deliver() -> None:
        try:
            start.wait()
            with travel_db.transaction() as session:

                def write() -> dict[str, Any]:
                    writes.append(1)
                    if not per_call_lock:
                        both_writing.wait()  # both passed the look-up
                    payment = record_payment(
                        session,
                        passenger_id=FIXTURE_PASSENGER_ID,
                        amount_cents=1_234,
                        kind="test",
                        reference="dup",
                        description="a duplicate delivery",
                        now=NOW,
                    )
                    session.flush()
                    assert payment is not None
                    return {"payment_id": payment.id}

                results.append(
                    run_once(
                        session,
                        tool_call_id="dup-call",
                        thread_id="dup-thread",
                        tool_name="pay",
                        passenger_id=FIXTURE_PASSENGER_ID,
                        now=NOW,
                        write=write,
                        args={"amount": 1_234},
                    )
                )
        except BaseException as error:  # reported in the test's thread
            failures.append(error)

    workers = [threading.Thread(target=deliver) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not failures, failures
    assert len(results) == 2 and results[0] == results[1]
    assert len(writes) == (1 if per_call_lock else 2)
    with travel_db.session() as session:
        payments = session.scalars(select(Payment).where(Payment.reference == "dup")).all()
        assert [p.id for p in payments] == [results[0]["payment_id"]]
        assert session.scalar(select(func.count()).select_from(Payment)) == payments_before + 1
        assert session.get(ToolCallRecord, ("dup-thread", "dup-call")) is not None


def test_the_tests_dump_sees_any_committed_change_and_no_rolled_back_one(
    travel_db: Database,
) -> None:
    # ``tests.support.tools.dump`` is how every "refused and wrote nothing" test looks.
    before = dump(travel_db)
    assert dump(travel_db) == before
    with pytest.raises(RuntimeError), travel_db.transaction() as session:
        session.execute(update(Hotel).where(Hotel.id == 1).values(rooms=Hotel.rooms + 1))
        raise RuntimeError("rolled back")
    assert dump(travel_db) == before
    # A table no write tool touches: still seen.
    with travel_db.transaction() as session:
        session.execute(update(Hotel).where(Hotel.id == 1).values(rooms=Hotel.rooms + 1))
    assert dump(travel_db) != before
