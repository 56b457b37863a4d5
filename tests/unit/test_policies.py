"""The company policy text, its search index and the ``lookup_policy`` tool."""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from assistants.specialists import build_crew
from db import rules
from db.engine import Database, packaged_data_dir, reference_data_dir
from db.errors import InvalidInputError
from tools.common import tool_node
from tools.policies import (
    PolicyIndex,
    PolicyPassage,
    format_passages,
    make_lookup_policy_tool,
    parse_policy,
    tokenize,
)

POLICY_PATH = packaged_data_dir() / "policy.md"


@pytest.fixture(scope="module")
def policy_text() -> str:
    return POLICY_PATH.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def index() -> PolicyIndex:
    return PolicyIndex(POLICY_PATH)


# --- Parsing helpers: the numbers are read out of the policy, never typed in here -------


def _table_after(markdown: str, heading: str) -> list[dict[str, str]]:
    """Return the first Markdown table under the ``### `` heading, one dict per row."""
    lines = markdown.splitlines()
    start = lines.index(f"### {heading}")
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) >= 3, f"no table under {heading!r}"
    header, _separator, *body = rows
    return [dict(zip(header, row, strict=True)) for row in body]


def _cents(text: str) -> int:
    match = re.fullmatch(r"EUR (\d+(?:\.\d{2})?)", text)
    assert match, f"not an amount in EUR: {text!r}"
    return int(Decimal(match.group(1)) * 100)


def _leading_int(text: str) -> int:
    match = re.match(r"(\d+)\b", text)
    assert match, f"no number at the start of {text!r}"
    return int(match.group(1))


def _amounts(text: str) -> set[int]:
    return {int(Decimal(a) * 100) for a in re.findall(r"EUR (\d+(?:\.\d{2})?)", text)}


def _numbers_before(text: str, unit: str) -> set[int]:
    return {int(n) for n in re.findall(rf"(\d+)[ -]{unit}\b", text)}


# --- (a) The policy states the numbers the tools enforce --------------------------------


def test_policy_md_fare_table_matches_fare_rules(policy_text: str) -> None:
    rows = _table_after(
        policy_text,
        "What does each fare class include and what does it cost to change or cancel?",
    )
    assert {row["Fare class"] for row in rows} == set(rules.FARE_RULES)
    for row in rows:
        rule = rules.FARE_RULES[row["Fare class"]]
        stated = rules.FareRule(
            change_fee_cents=_cents(row["Change fee"]),
            cancel_fee_cents=_cents(row["Cancellation fee"]),
            checked_bags=_leading_int(row["Checked bags"]),
            bag_weight_kg=_leading_int(row["Weight per checked bag"]),
            cabin_bags=_leading_int(row["Cabin bags"]),
        )
        assert stated == rule, row["Fare class"]


def test_policy_md_time_limits_table_matches_rules(policy_text: str) -> None:
    rows = _table_after(
        policy_text, "What are the time limits for changing, cancelling and checking in?"
    )
    stated = {row["Flight rule"]: _leading_int(row["Hours"]) for row in rows}
    assert stated == {
        "Changes and cancellations close before departure": (
            rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL
        ),
        "A new flight must leave at least this long from now": (
            rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE
        ),
        "Fee-free changes and cancellations after booking": rules.FREE_WINDOW_HOURS_AFTER_BOOKING,
        "Online check-in opens before departure": rules.CHECK_IN_OPENS_HOURS,
    }


def test_policy_md_partner_table_matches_rules(policy_text: str) -> None:
    rows = {
        row["Partner"]: row
        for row in _table_after(
            policy_text, "What are the cancellation terms for hotels, car rentals and excursions?"
        )
    }
    assert set(rows) == {"Hotels", "Car rentals", "Excursions"}
    free_until = {
        name: _leading_int(row["Free cancellation or change until"]) for name, row in rows.items()
    }
    assert free_until == {
        "Hotels": rules.HOTEL_FREE_CANCEL_HOURS,
        "Car rentals": rules.CAR_FREE_CANCEL_HOURS,
        "Excursions": rules.EXCURSION_FREE_CANCEL_HOURS,
    }
    assert _leading_int(rows["Hotels"]["Longest reservation"]) == rules.MAX_HOTEL_NIGHTS
    assert _leading_int(rows["Car rentals"]["Longest reservation"]) == rules.MAX_CAR_RENTAL_DAYS
    assert _numbers_before(policy_text, "days ahead") == {rules.MAX_DAYS_AHEAD}


def test_policy_md_states_no_number_outside_the_rules(policy_text: str) -> None:
    # A fee, limit or allowance typed anywhere in the prose must be one the tools enforce.
    fares = rules.FARE_RULES.values()
    assert _amounts(policy_text) <= {f.change_fee_cents for f in fares} | {
        f.cancel_fee_cents for f in fares
    }
    assert _numbers_before(policy_text, "hours?") <= {
        rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
        rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
        rules.FREE_WINDOW_HOURS_AFTER_BOOKING,
        rules.CHECK_IN_OPENS_HOURS,
        rules.HOTEL_FREE_CANCEL_HOURS,
        rules.CAR_FREE_CANCEL_HOURS,
        rules.EXCURSION_FREE_CANCEL_HOURS,
    }
    assert _numbers_before(policy_text, "kg") <= {f.bag_weight_kg for f in fares}
    assert _numbers_before(policy_text, "checked bags?") <= {f.checked_bags for f in fares}
    assert _numbers_before(policy_text, "cabin bags?") <= {f.cabin_bags for f in fares}
    assert _numbers_before(policy_text, "nights?") <= {rules.MAX_HOTEL_NIGHTS}
    assert _numbers_before(policy_text, "days?") <= {
        rules.MAX_CAR_RENTAL_DAYS,
        rules.MAX_DAYS_AHEAD,
    }
    # The heaviest bag any class may check is the one the prose calls the absolute limit.
    heaviest = max(f.bag_weight_kg for f in fares)
    assert f"No checked bag may weigh more than {heaviest} kg" in " ".join(policy_text.split())


@pytest.mark.parametrize("fare_class", sorted(rules.FARE_RULES))
def test_policy_md_fare_class_answers_quote_their_own_numbers(
    index: PolicyIndex, fare_class: str
) -> None:
    rule = rules.FARE_RULES[fare_class]
    own = [
        p
        for p in index.passages
        if fare_class in p.question
        and not any(other in p.question for other in rules.FARE_RULES if other != fare_class)
    ]
    # A change-fee, a cancellation-fee and a baggage question per class.
    assert len(own) == 3
    for passage in own:
        question = passage.question.lower()
        if "to change" in question:
            assert _amounts(passage.answer) == {rule.change_fee_cents}, passage.question
        elif "to cancel" in question:
            assert _amounts(passage.answer) == {rule.cancel_fee_cents}, passage.question
        else:
            assert "baggage" in question
            assert _numbers_before(passage.answer, "checked bags?") == {rule.checked_bags}
            assert _numbers_before(passage.answer, "kg") == {rule.bag_weight_kg}
            assert _numbers_before(passage.answer, "cabin bags?") == {rule.cabin_bags}


def test_policy_md_states_the_rules_the_tools_enforce(policy_text: str) -> None:
    prose = " ".join(policy_text.split())
    for sentence in (
        "A ticket can be moved only to a flight on the same route",
        "If the new flight's fare in your class is higher, the difference is charged",
        "the difference is not refunded",
        "Segments that have been flown or checked in can no longer be changed or cancelled",
        "The refund is the amount you paid for the ticket minus the cancellation fee",
        "It is never negative",
        f"Online check-in opens {rules.CHECK_IN_OPENS_HOURS} hours before",
    ):
        assert sentence in prose


def test_policy_md_has_one_question_per_passage(index: PolicyIndex) -> None:
    questions = [p for p in index.passages if p.question.endswith("?")]
    assert 25 <= len(questions) <= 45
    assert len({p.question for p in questions}) == len(questions)
    assert all(p.answer.strip() for p in index.passages)


# --- Tokenizer and parser ------------------------------------------------------------


@pytest.mark.parametrize(
    "family",
    [
        ["cancel", "cancels", "cancelled", "canceled", "cancelling", "cancellation"],
        ["change", "changes", "changed", "changing"],
        ["refund", "refunds", "refunded", "refundable"],
        ["bag", "bags", "baggage", "luggage", "suitcase"],
        ["book", "booked", "booking", "bookings"],
        ["assist", "assistance"],
        ["rent", "rental", "rentals", "renting"],
    ],
)
def test_tokenize_brings_word_families_together(family: list[str]) -> None:
    assert len({tuple(tokenize(word)) for word in family}) == 1
    assert tokenize(family[0]) != []


def test_tokenize_drops_stopwords_and_splits_numbers() -> None:
    assert tokenize("Can I cancel within 24h?") == ["cancel", "within", "24", "hour"]
    assert tokenize("What is the, and a") == []


def test_parse_policy_makes_one_passage_per_question() -> None:
    markdown = (
        "# Title\n\nA preamble.\n\n## Baggage\n\n### How many bags?\n\nTwo.\n\n"
        "### And cabin bags?\n\nOne.\n\n## Seats\n\nSeats are assigned.\n"
    )
    assert parse_policy(markdown) == [
        PolicyPassage("Title", "Title", "A preamble."),
        PolicyPassage("Baggage", "How many bags?", "Two."),
        PolicyPassage("Baggage", "And cabin bags?", "One."),
        PolicyPassage("Seats", "Seats", "Seats are assigned."),
    ]


# --- (b) Real questions find the right passage ---------------------------------------


@pytest.mark.parametrize(
    ("query", "expected_question"),
    [
        (
            "can I cancel within 24 hours?",
            "Can I cancel or change for free within 24 hours of booking?",
        ),
        ("how much baggage in Business?", "How much baggage can I bring in Business?"),
        (
            "what is the fee to change an economy ticket",
            "How much does it cost to change an Economy ticket?",
        ),
        (
            "can I change a flight that leaves in 2 hours",
            "Can I change or cancel a flight that leaves in less than 3 hours?",
        ),
        ("hotel cancellation", "Can I cancel or change my hotel reservation for free?"),
        (
            "do you refund the fare difference",
            "Is the fare difference charged or refunded when I change my flight?",
        ),
        ("wheelchair assistance", "Can I get wheelchair assistance at the airport?"),
        ("invoice for my company", "Can I get an invoice for my company?"),
        (
            "How much does it cost to cancel a Comfort ticket?",
            "How much does it cost to cancel a Comfort ticket?",
        ),
        (
            "how many kilos can my suitcase weigh in economy",
            "How much baggage can I bring in Economy?",
        ),
        ("when does check-in open", "When does online check-in open?"),
        ("how long does a refund take", "How will I receive my refund and how long does it take?"),
        ("excursion cancellation", "Can I cancel or change an excursion for free?"),
        (
            "change flight to a different city",
            "Can I change my flight to another destination or route?",
        ),
    ],
)
def test_policy_index_finds_the_passage_that_answers(
    index: PolicyIndex, query: str, expected_question: str
) -> None:
    results = index.search(query)
    assert results, f"nothing found for {query!r}"
    assert results[0].question == expected_question
    assert results[0].score > 0


def test_policy_index_returns_at_most_k_best_first(index: PolicyIndex) -> None:
    results = index.search("cancel ticket fee", k=2)
    assert 1 <= len(results) <= 2
    assert [p.score for p in results] == sorted((p.score for p in results), reverse=True)
    with pytest.raises(ValueError, match="k must be at least 1"):
        index.search("cancel", k=0)


# --- (c) Nonsense and off-topic questions find nothing ---------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "purple elephant quantum",
        "asdkjh qwe zzz",
        "what's the weather in Paris tomorrow",
        "who won the football world cup",
        "tell me a joke about flights",
        "recommend a good restaurant in Basel",
        "",
        "what is the",
    ],
)
def test_policy_index_finds_nothing_for_off_topic_queries(index: PolicyIndex, query: str) -> None:
    assert index.search(query) == []


def test_lookup_policy_says_when_nothing_matches(index: PolicyIndex) -> None:
    tool = make_lookup_policy_tool(index)
    text = tool.invoke({"query": "purple elephant quantum"})
    assert text.startswith('No policy passage matches "purple elephant quantum".')


# --- (d) The tool, alone and through ToolNode ------------------------------------------


def _tool_call(query: str, call_id: str) -> dict[str, object]:
    return {"name": "lookup_policy", "args": {"query": query}, "id": call_id, "type": "tool_call"}


def _run_tool_node(index: PolicyIndex, call: AIMessage) -> list[ToolMessage]:
    """Run the tool the way the graph does: its tool node, with the graph's error handler."""
    node = tool_node([make_lookup_policy_tool(index)])
    graph = StateGraph(MessagesState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    replies: list[BaseMessage] = graph.compile().invoke({"messages": [call]})["messages"][1:]
    assert all(isinstance(m, ToolMessage) for m in replies)
    return [m for m in replies if isinstance(m, ToolMessage)]


def test_lookup_policy_has_the_public_name_and_one_documented_argument(index: PolicyIndex) -> None:
    tool = make_lookup_policy_tool(index)
    assert tool.name == "lookup_policy"
    assert tool.description.startswith("Look up the company policy")
    assert list(tool.args) == ["query"]
    assert tool.args["query"]["type"] == "string"
    assert "key words" in tool.args["query"]["description"]


def test_lookup_policy_returns_topic_question_and_answer(index: PolicyIndex) -> None:
    text = make_lookup_policy_tool(index).invoke({"query": "how much baggage in Business?"})
    business = rules.FARE_RULES["Business"]
    assert "[1] Baggage: How much baggage can I bring in Business?" in text
    assert f"{business.bag_weight_kg} kg" in text


def test_lookup_policy_through_tool_node_answers_every_call(index: PolicyIndex) -> None:
    call = AIMessage(
        content="",
        tool_calls=[
            _tool_call("can I cancel within 24 hours?", "call_1"),
            _tool_call("wheelchair assistance", "call_2"),
        ],
    )
    messages = _run_tool_node(index, call)
    by_id = {m.tool_call_id: m for m in messages}
    assert set(by_id) == {"call_1", "call_2"}
    assert by_id["call_1"].status == "success"
    assert "within 24 hours of booking?" in by_id["call_1"].content
    assert "Can I get wheelchair assistance at the airport?" in by_id["call_2"].content


def test_lookup_policy_empty_query_is_an_error_tool_message(index: PolicyIndex) -> None:
    call = AIMessage(content="", tool_calls=[_tool_call("   ", "call_empty")])
    [message] = _run_tool_node(index, call)
    assert message.tool_call_id == "call_empty"
    assert message.status == "error"
    # The text the model reads: the graph's handler, not LangChain's default wrapping.
    assert str(message.content).startswith("Error: The policy query is empty")
    assert "Please fix your mistakes" not in str(message.content)


def test_the_keyword_ranking_is_langchain_communitys_bm25_retriever(
    index: PolicyIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    # langchain-community is a dependency for this: search ranks with its BM25Retriever.
    from langchain_community.retrievers import BM25Retriever

    retriever = index._index().retriever
    assert isinstance(retriever, BM25Retriever)
    asked: list[str] = []
    ranked = type(retriever).invoke

    def spy(self: BM25Retriever, query: str, *args: object, **kwargs: object) -> object:
        asked.append(query)
        return ranked(self, query, *args, **kwargs)

    monkeypatch.setattr(type(retriever), "invoke", spy)
    assert index.search("baggage in Business")
    assert asked == ["baggage in Business"]


def test_lookup_policy_empty_query_raises_invalid_input(index: PolicyIndex) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        make_lookup_policy_tool(index).invoke({"query": ""})


# --- Loading -------------------------------------------------------------------------


def test_policy_index_reads_nothing_until_searched(tmp_path: Path) -> None:
    missing = PolicyIndex(tmp_path / "missing.md")
    with pytest.raises(FileNotFoundError, match="TRAVEL_ASSISTANT_DATA"):
        missing.search("baggage")


def test_policy_index_defaults_to_the_packaged_policy_whatever_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TRAVEL_ASSISTANT_DATA is read once, at the edge (settings.Settings), and reaches the
    # index through the database's data_dir: the index itself never reads it.
    monkeypatch.setenv("TRAVEL_ASSISTANT_DATA", str(tmp_path))
    assert PolicyIndex().path == reference_data_dir() / "policy.md" == POLICY_PATH
    assert PolicyIndex().search("checked baggage allowance") != []  # not the empty tmp_path


def test_policy_index_rejects_a_file_without_passages(tmp_path: Path) -> None:
    path = tmp_path / "policy.md"
    path.write_text("# Only a title\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no question"):
        PolicyIndex(path).load()


def test_crew_prepare_reads_the_policy_before_any_question(
    travel_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = tmp_path / "policy.md"
    policy.write_text(
        "## Pets\n\n### Can my cat fly with me?\n\nYes, in a carrier.\n", encoding="utf-8"
    )
    crew = build_crew(Database(travel_db.engine, travel_db.clock, tmp_path))
    crew.prepare()
    policy.unlink()  # read at start-up: the first question no longer needs the file
    lookup = next(t for t in crew.primary_tools if t.name == "lookup_policy")
    assert "Yes, in a carrier." in lookup.invoke({"query": "cat carrier"})


def test_crew_prepare_reports_a_missing_policy_file(
    travel_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crew = build_crew(Database(travel_db.engine, travel_db.clock, tmp_path))  # reads nothing
    missing = re.escape(f"policy file {tmp_path / 'policy.md'} does not exist")
    with pytest.raises(FileNotFoundError, match=missing):
        crew.prepare()


# --- Optional embeddings -------------------------------------------------------------


class _ConceptEmbeddings(Embeddings):
    """Offline stand-in for an embedding model: one dimension per concept."""

    CONCEPTS = (("wheelchair", "crutches", "mobility"), ("bag", "suitcase"))

    def _vector(self, text: str) -> list[float]:
        lowered = text.lower()
        return [1.0 if any(w in lowered for w in words) else 0.0 for words in self.CONCEPTS]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class _BrokenEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding provider is down")

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("embedding provider is down")


def test_policy_index_embeddings_find_what_keywords_miss() -> None:
    query = "I walk with crutches"
    assert PolicyIndex(POLICY_PATH).search(query) == []
    results = PolicyIndex(POLICY_PATH, embeddings=_ConceptEmbeddings()).search(query)
    assert [p.question for p in results] == ["Can I get wheelchair assistance at the airport?"]


def test_policy_index_falls_back_to_keywords_when_embeddings_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = PolicyIndex(POLICY_PATH, embeddings=_BrokenEmbeddings())
    with caplog.at_level(logging.WARNING, logger="tools.policies"):
        results = index.search("wheelchair assistance")
    assert results[0].question == "Can I get wheelchair assistance at the airport?"
    assert "keyword search only" in caplog.text


def test_policy_answer_repeats_only_the_start_of_a_long_query() -> None:
    # Found by the hostile-input property test: a 500-character query came back whole
    # in the "no passage matches" answer, to be sent to the model on every later call.
    query = "9" * 500  # the longest query the tool takes
    answer = make_lookup_policy_tool().invoke({"query": query})
    assert "9" * 81 not in answer
    assert len(answer) < 500
    passage = PolicyPassage("Baggage", "How much can I bring?", "Two bags in Business.")
    header = format_passages("baggage " * 200, [passage]).splitlines()[0]
    assert len(header) < 150 and header.endswith('…", best match first:')
