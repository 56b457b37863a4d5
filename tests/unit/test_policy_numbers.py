"""Every number the policy states about one kind of booking is that kind's own rule.

``test_policies.py`` compares the at-a-glance tables with ``db.rules`` and checks that
every number in the prose is *some* rule. That misses a number moved to another kind's
value (hotel free cancellation 48 h -> 72 h is the excursion's value). Here the policy is
split into sentences (and table cells); each sentence belongs to the kinds it names, or
else to the kinds its question names, or else to flights; and every number in it must be
explained by a rule of one of those kinds and equal that kind's constant.

``policy_drift(markdown)`` is pure, so the last tests feed it drifted copies of the real
policy to prove that it reports each drift.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import pytest

from db import rules
from db.engine import reference_data_dir

# --- What each kind of booking states, and the constant it must equal ---------------------

FLIGHT = "flight"
HOTEL = "hotel"
CAR = "car rental"
EXCURSION = "excursion"
PARTNER_KINDS = (HOTEL, CAR, EXCURSION)
FARE_CLASSES = tuple(rules.FARE_RULES)

# Words that put a sentence (or a question) under a kind. A fare class is also a flight.
KIND_WORDS: dict[str, re.Pattern[str]] = {
    HOTEL: re.compile(r"\bhotels?\b", re.IGNORECASE),
    CAR: re.compile(r"\bcar(?:s|[- ]rentals?)?\b|\brent a car\b", re.IGNORECASE),
    EXCURSION: re.compile(r"\bexcursions?\b", re.IGNORECASE),
    **{fare: re.compile(rf"\b{fare}\b") for fare in FARE_CLASSES},
}


@dataclass(frozen=True)
class Rule:
    """One number a kind states: ``pattern``'s group 1 must read ``expected``."""

    kind: str
    what: str
    pattern: re.Pattern[str]
    expected: int
    money: bool = False

    def read(self, number: str) -> int:
        return int(Decimal(number) * 100) if self.money else int(number)


def _rule(kind: str, what: str, pattern: str, expected: int, *, money: bool = False) -> Rule:
    return Rule(kind, what, re.compile(pattern, re.IGNORECASE), expected, money)


def _partner_rules() -> list[Rule]:
    found = []
    for kind, free_hours in (
        (HOTEL, rules.HOTEL_FREE_CANCEL_HOURS),
        (CAR, rules.CAR_FREE_CANCEL_HOURS),
        (EXCURSION, rules.EXCURSION_FREE_CANCEL_HOURS),
    ):
        # Any "N hours" said of a partner kind is its free cancellation window.
        found.append(_rule(kind, "free cancellation hours", r"\b(\d+)[ -]hours?\b", free_hours))
        found.append(_rule(kind, "days ahead", r"\b(\d+) days ahead\b", rules.MAX_DAYS_AHEAD))
    found.append(_rule(HOTEL, "longest stay", r"\b(\d+)[ -]nights?\b", rules.MAX_HOTEL_NIGHTS))
    found.append(
        _rule(CAR, "longest rental", r"\b(\d+)[ -]days?\b(?! ahead)", rules.MAX_CAR_RENTAL_DAYS)
    )
    return found


def _flight_rules() -> list[Rule]:
    free = rules.FREE_WINDOW_HOURS_AFTER_BOOKING
    cancel = rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL
    change = rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE
    check_in = rules.CHECK_IN_OPENS_HOURS
    return [
        _rule(FLIGHT, "free window", r"\bwithin (\d+) hours of (?:booking|buying)\b", free),
        _rule(
            FLIGHT,
            "free window",
            r"fee-free changes and cancellations after booking.*?(\d+) hours",
            free,
        ),
        _rule(FLIGHT, "changes close", r"\bclose (\d+) hours before\b", cancel),
        _rule(FLIGHT, "changes close", r"\bclose before departure.*?(\d+) hours", cancel),
        _rule(FLIGHT, "changes close", r"\bleaves in (?:less than )?(\d+) hours\b", cancel),
        _rule(FLIGHT, "new flight leaves", r"\bleaves? at least (\d+) hours from now\b", change),
        _rule(
            FLIGHT,
            "new flight leaves",
            r"\bleave at least this long from now.*?(\d+) hours",
            change,
        ),
        _rule(FLIGHT, "check-in opens", r"\bcheck-in opens,? (\d+) hours\b", check_in),
        _rule(
            FLIGHT, "check-in opens", r"\bcheck-in opens before departure.*?(\d+) hours", check_in
        ),
        _rule(
            FLIGHT,
            "heaviest bag",
            r"\bno checked bag may weigh more than (\d+) kg in any class\b",
            max(fare.bag_weight_kg for fare in rules.FARE_RULES.values()),
        ),
    ]


def _fare_rules() -> list[Rule]:
    found = []
    for fare, rule in rules.FARE_RULES.items():
        found += [
            _rule(
                fare,
                "change fee",
                r"\bchange fee\b[^.]*?EUR (\d+(?:\.\d\d)?)",
                rule.change_fee_cents,
                money=True,
            ),
            _rule(
                fare,
                "cancellation fee",
                r"\bcancellation fee\b[^.]*?EUR (\d+(?:\.\d\d)?)",
                rule.cancel_fee_cents,
                money=True,
            ),
            _rule(fare, "checked bags", r"\b(\d+) checked bags?\b", rule.checked_bags),
            _rule(fare, "weight per checked bag", r"\b(\d+) ?kg\b", rule.bag_weight_kg),
            _rule(fare, "cabin bags", r"\b(\d+) cabin bags?\b", rule.cabin_bags),
        ]
    return found


RULES: tuple[Rule, ...] = (*_partner_rules(), *_flight_rules(), *_fare_rules())
# Numbers that state no rule: clock times such as "00:00 UTC".
NOT_A_RULE = re.compile(r"\b\d{1,2}:\d{2}\b")


# --- Reading the policy: passages, sentences, table cells --------------------------------


@dataclass(frozen=True)
class Sentence:
    """One sentence of the policy (or one table cell, spelled out) and where it is."""

    question: str
    text: str
    in_table: bool = False


def _passages(markdown: str) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(heading, lines)`` for every heading of the policy."""
    heading, lines = "", list[str]()
    for line in markdown.splitlines():
        if line.startswith("#"):
            yield heading, lines
            heading, lines = line.lstrip("#").strip(), []
        else:
            lines.append(line)
    yield heading, lines


def _table_sentences(rows: list[list[str]]) -> Iterator[str]:
    """Spell a table out: ``"<row label> <column>: <cell> [<column>]"`` per cell."""
    header, _separator, *body = rows
    for row in body:
        label, *cells = row
        for column, cell in zip(header[1:], cells, strict=True):
            unit = f" {column.lower()}" if cell.isdigit() else ""
            yield f"{label} {column}: {cell}{unit}"


def sentences(markdown: str) -> list[Sentence]:
    """Split the policy into sentences, each with the question it answers."""
    found: list[Sentence] = []
    for heading, lines in _passages(markdown):
        if heading:
            found.append(Sentence(heading, heading))
        paragraph: list[str] = []
        table: list[list[str]] = []
        for line in [*lines, ""]:
            if line.startswith("|"):
                table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
                continue
            if table:
                found += [Sentence(heading, text, True) for text in _table_sentences(table)]
                table = []
            if line.strip():
                paragraph.append(line.strip().removeprefix("- "))
                continue
            prose = " ".join(paragraph)
            paragraph = []
            found += [
                Sentence(heading, text)
                for text in re.split(r"(?<=[.;?!])\s+", prose)
                if text.strip()
            ]
    return found


def kinds_named(text: str) -> set[str]:
    named = {kind for kind, words in KIND_WORDS.items() if words.search(text)}
    if named & set(FARE_CLASSES):
        named.add(FLIGHT)
    return named


def kinds_of(sentence: Sentence) -> set[str]:
    """The kinds a sentence speaks of: its own words, else its question's, else flights."""
    return kinds_named(sentence.text) or kinds_named(sentence.question) or {FLIGHT}


# --- The checker --------------------------------------------------------------------------


def policy_drift(markdown: str) -> list[str]:
    """Return one line per number of the policy that is not its kind's rule.

    A number is wrong when a rule of the sentence's kinds reads it and it differs from
    that kind's constant, or when no rule of those kinds reads it at all. A rule that no
    sentence of the prose states (the tables aside) is reported too, so a number cannot
    drift out of the checker's sight by being reworded.
    """
    problems: list[str] = []
    stated: set[tuple[str, str]] = set()
    for sentence in sentences(markdown):
        kinds = kinds_of(sentence)
        text = NOT_A_RULE.sub(" ", " ".join(sentence.text.split()))
        explained: set[int] = set()
        for rule in RULES:
            if rule.kind not in kinds:
                continue
            for match in rule.pattern.finditer(text):
                explained.add(match.start(1))
                if not sentence.in_table:
                    stated.add((rule.kind, rule.what))
                if rule.read(match.group(1)) != rule.expected:
                    problems.append(
                        f"{rule.kind} {rule.what}: the policy says {match.group(1)} "
                        f"where db.rules says {rule.expected}"
                        f"{' cents' if rule.money else ''}, in {sentence.question!r}: "
                        f"{sentence.text!r}"
                    )
        for number in re.finditer(r"\d+(?:\.\d+)?", text):
            if number.start() not in explained:
                problems.append(
                    f"{'/'.join(sorted(kinds))}: no rule explains {number.group()!r}, "
                    f"in {sentence.question!r}: {sentence.text!r}"
                )
    for rule in RULES:
        if (rule.kind, rule.what) not in stated:
            problems.append(f"{rule.kind} {rule.what}: the policy's prose never states it")
    return sorted(set(problems))


@pytest.fixture(scope="module")
def policy_text() -> str:
    return (reference_data_dir() / "policy.md").read_text(encoding="utf-8")


def test_policy_numbers_each_match_their_own_kinds_rule(policy_text: str) -> None:
    assert policy_drift(policy_text) == []


def test_policy_numbers_sentences_are_sorted_into_kinds(policy_text: str) -> None:
    # The checker only sees what it sorts: every kind has sentences with numbers.
    with_numbers = [s for s in sentences(policy_text) if re.search(r"\d", s.text)]
    sorted_kinds = set().union(*(kinds_of(s) for s in with_numbers))
    assert sorted_kinds >= {FLIGHT, *PARTNER_KINDS, *FARE_CLASSES}
    hotel_prose = [
        s.text
        for s in with_numbers
        if kinds_of(s) == {HOTEL} and s.question.startswith("Can I cancel or change")
    ]
    assert hotel_prose == [
        f"Yes, until {rules.HOTEL_FREE_CANCEL_HOURS} hours before the check-in day begins "
        "(00:00 UTC on the check-in date)."
    ]


# (the text as published, the drifted text, what the report must name)
DRIFTS = [
    pytest.param(
        f"Yes, until {rules.HOTEL_FREE_CANCEL_HOURS} hours before the check-in day",
        f"Yes, until {rules.EXCURSION_FREE_CANCEL_HOURS} hours before the check-in day",
        "hotel free cancellation hours",
        id="hotel-prose-48-to-72",
    ),
    pytest.param(
        f"| Hotels | {rules.HOTEL_FREE_CANCEL_HOURS} hours",
        f"| Hotels | {rules.EXCURSION_FREE_CANCEL_HOURS} hours",
        "hotel free cancellation hours",
        id="hotel-table-48-to-72",
    ),
    pytest.param(
        f"Yes, until {rules.CAR_FREE_CANCEL_HOURS} hours before the pick-up day",
        f"Yes, until {rules.HOTEL_FREE_CANCEL_HOURS} hours before the pick-up day",
        "car rental free cancellation hours",
        id="car-prose-24-to-48",
    ),
    pytest.param(
        f"Yes, until {rules.EXCURSION_FREE_CANCEL_HOURS} hours before the excursion day",
        f"Yes, until {rules.CAR_FREE_CANCEL_HOURS} hours before the excursion day",
        "excursion free cancellation hours",
        id="excursion-prose-72-to-24",
    ),
    pytest.param(
        f"Up to {rules.MAX_HOTEL_NIGHTS} nights per reservation",
        f"Up to {rules.MAX_HOTEL_NIGHTS + 1} nights per reservation",
        "hotel longest stay",
        id="hotel-nights",
    ),
    pytest.param(
        f"Up to {rules.MAX_CAR_RENTAL_DAYS} days per rental",
        f"Up to {rules.MAX_CAR_RENTAL_DAYS + 15} days per rental",
        "car rental longest rental",
        id="car-days",
    ),
    pytest.param(
        f"starting up to {rules.MAX_DAYS_AHEAD} days ahead",
        f"starting up to {rules.MAX_DAYS_AHEAD - 65} days ahead",
        "car rental days ahead",
        id="car-days-ahead",
    ),
    pytest.param(
        f"The fee is waived within {rules.FREE_WINDOW_HOURS_AFTER_BOOKING} hours of booking.\n\n"
        "### How much does it cost to change a Comfort",
        f"The fee is waived within {rules.HOTEL_FREE_CANCEL_HOURS} hours of booking.\n\n"
        "### How much does it cost to change a Comfort",
        "flight free window",
        id="economy-free-window",
    ),
    pytest.param(
        f"Changes and cancellations close {rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL} hours",
        "Changes and cancellations close 2 hours",
        "flight changes close",
        id="changes-close",
    ),
    pytest.param(
        f"Online check-in opens {rules.CHECK_IN_OPENS_HOURS} hours before the scheduled",
        f"Online check-in opens {rules.HOTEL_FREE_CANCEL_HOURS} hours before the scheduled",
        "flight check-in opens",
        id="check-in-opens",
    ),
    pytest.param(
        "The cancellation fee for a Comfort ticket is "
        f"EUR {rules.FARE_RULES['Comfort'].cancel_fee_cents // 100}.",
        "The cancellation fee for a Comfort ticket is "
        f"EUR {rules.FARE_RULES['Economy'].cancel_fee_cents // 100}.",
        "Comfort cancellation fee",
        id="comfort-cancel-fee",
    ),
    pytest.param(
        f"The Economy baggage allowance is {rules.FARE_RULES['Economy'].checked_bags} checked bag "
        f"of up to {rules.FARE_RULES['Economy'].bag_weight_kg} kg",
        f"The Economy baggage allowance is {rules.FARE_RULES['Economy'].checked_bags} checked bag "
        f"of up to {rules.FARE_RULES['Business'].bag_weight_kg} kg",
        "Economy weight per checked bag",
        id="economy-bag-weight",
    ),
    pytest.param(
        f"Yes, until {rules.HOTEL_FREE_CANCEL_HOURS} hours before the check-in day begins",
        "Yes, until two days before the check-in day begins",
        "hotel free cancellation hours: the policy's prose never states it",
        id="hotel-hours-in-words",
    ),
]


@pytest.mark.parametrize(("published", "drifted", "reported"), DRIFTS)
def test_policy_numbers_report_a_drifted_copy(
    policy_text: str, published: str, drifted: str, reported: str
) -> None:
    assert policy_text.count(published) == 1, f"the policy no longer reads {published!r}"
    problems = policy_drift(policy_text.replace(published, drifted))
    assert problems, "the drift went unnoticed"
    assert any(reported in problem for problem in problems), problems


def test_policy_numbers_report_an_unexplained_number(policy_text: str) -> None:
    drifted = policy_text.replace(
        "Rooms depend on availability for every night of the stay.",
        "Rooms depend on availability for every night of the stay, for up to 4 guests.",
    )
    assert drifted != policy_text
    problems = policy_drift(drifted)
    assert any("hotel: no rule explains '4'" in problem for problem in problems), problems
