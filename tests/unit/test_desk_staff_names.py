"""Staff at the desk by login and by name, and stores made before names existed.

The desk keeps who holds a conversation and who decided a check by login, with the name
customers see beside it. A store whose desk tables were made by an earlier version (no
name columns) gains them when it is opened, on SQLite and on PostgreSQL: its rows show
the login as before, its holders keep their conversations, and a second process opening
it meanwhile finds nothing left to add. A proposal saved before logins were kept with it
still keeps four eyes, by the name it carries (which was the login then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage

from conversations.assistant import Thread, TravelAssistant
from conversations.desk import CHECKS, HANDOFFS, DeskError
from conversations.desk_rows import Staff, add_missing_columns
from conversations.events import PERSON_KEY
from conversations.locks import ConversationStoreError
from conversations.protocol import Answer, Conversations
from conversations.store import ConversationStore
from conversations.tables import open_engine
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from locations import Location
from tests.support.conversation_stores import scratch_conversations
from tests.support.web import plan_trip

NOW = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
ANA = Staff("ana.lima@example.com", "Ana Lima")
BRUNO = Staff("bruno.costa@example.com", "Bruno Costa")

# The desk's tables as the version before names made them (their rows' columns only).
_BEFORE = sa.MetaData()
_OLD_HANDOFFS = sa.Table(
    "travel_handoffs",
    _BEFORE,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", sa.Text, nullable=False),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("requested_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("agent", sa.Text, nullable=False, server_default=""),
    sa.Column("taken_at", sa.DateTime(timezone=True)),
    sa.Column("ended_at", sa.DateTime(timezone=True)),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.Column("messages", sa.Integer, nullable=False, server_default="0"),
)
_OLD_CHECKS = sa.Table(
    "travel_checks",
    _BEFORE,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", sa.Text, nullable=False),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("tool_call_id", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("amount", sa.Text, nullable=False),
    sa.Column("cents", sa.BigInteger, nullable=False),
    sa.Column("answers", sa.Text, nullable=False),
    sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("staff", sa.Text, nullable=False, server_default=""),
    sa.Column("decided_at", sa.DateTime(timezone=True)),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
)


@pytest.fixture(params=["sqlite", "postgresql"])
def made_before_names(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store whose desk an earlier version made: a held hand-off and a decided check."""
    with scratch_conversations(request.param, tmp_path) as where:
        location = Location.parse(where)
        if location.path is not None:
            location.path.parent.mkdir(parents=True, exist_ok=True)
            engine = open_engine(f"sqlite:///{location.path}")
        else:
            engine = open_engine(location.sqlalchemy_url())
        try:
            _BEFORE.create_all(engine)
            held = {"passenger_id": "p", "requested_by": "customer", "requested_at": NOW}
            with engine.begin() as connection:
                connection.execute(
                    _OLD_HANDOFFS.insert(),
                    [
                        {**held, "thread_id": "t-old", "status": "held", "agent": ANA.login},
                        {**held, "thread_id": "t-new", "status": "waiting", "agent": ""},
                    ],
                )
                connection.execute(
                    _OLD_CHECKS.insert().values(
                        thread_id="t-old",
                        passenger_id="p",
                        tool_call_id="c1",
                        title="Change flight",
                        amount="To pay: EUR 90.00",
                        cents=9000,
                        answers="{}",
                        asked_at=NOW,
                        status="approved",
                        staff=BRUNO.login,
                        decided_at=NOW,
                    )
                )
        finally:
            engine.dispose()
        yield where


def test_desk_opens_tables_made_before_names_and_keeps_their_holders(
    made_before_names: str,
) -> None:
    with (
        ConversationStore.open(made_before_names) as first,
        ConversationStore.open(made_before_names) as second,  # nothing left to add
    ):
        columns = {
            table.name: {c["name"] for c in sa.inspect(first.desk.engine).get_columns(table.name)}
            for table in (HANDOFFS, CHECKS)
        }
        assert "agent_name" in columns["travel_handoffs"]
        assert "staff_name" in columns["travel_checks"]
        # A row from before names shows its login, as it did, and keeps its holder.
        old = second.desk.current("t-old")
        assert old is not None and (old.agent, old.agent_login) == (ANA.login, ANA.login)
        (check,) = second.desk.checks_of("t-old")
        assert (check.staff, check.staff_login) == (BRUNO.login, BRUNO.login)
        assert [h.thread_id for h in first.desk.held_by(ANA)] == ["t-old"]
        with pytest.raises(DeskError, match="holds conversation t-old"):
            first.desk.end("t-old", Staff("someone@example.com", ANA.login), NOW)
        ended = first.desk.end("t-old", ANA, NOW, note="done")
        assert ended.status == "returned"
        # What is written now keeps the name beside the login.
        taken = second.desk.take("t-new", ANA, NOW)
        assert (taken.agent, taken.agent_login) == (ANA.name, ANA.login)
        assert first.desk.held_by(ANA.login) == [taken]


def test_a_column_another_process_added_meanwhile_is_not_added_twice(
    made_before_names: str,
) -> None:
    # Two processes opening one store at once: the second was told the column is
    # missing, then finds it added when it tries. Listing the table twice does just that
    # here: what was read of it the first time says the column is missing.
    location = Location.parse(made_before_names)
    url = f"sqlite:///{location.path}" if location.path else location.sqlalchemy_url()
    engine = open_engine(url)
    try:
        with engine.begin() as connection:
            add_missing_columns(connection, [HANDOFFS, HANDOFFS, CHECKS])
        columns = {c["name"] for c in sa.inspect(engine).get_columns(HANDOFFS.name)}
        assert "agent_name" in columns
    finally:
        engine.dispose()


def test_desk_that_cannot_gain_its_name_columns_is_refused_saying_why(tmp_path: Path) -> None:
    # Not left without them (every desk query would fail later): the store is not opened,
    # and the error names the table and the column.
    path = tmp_path / "sessions.sqlite"
    engine = open_engine(f"sqlite:///{path}")
    try:
        _BEFORE.create_all(engine, tables=[_OLD_CHECKS])
        with engine.begin() as connection:
            # A view cannot gain a column, as a table whose owner is someone else cannot.
            connection.exec_driver_sql(
                "CREATE VIEW travel_handoffs AS SELECT 1 AS id, '' AS thread_id, '' AS "
                "passenger_id, 'held' AS status, 'customer' AS requested_by, '' AS reason, "
                "'' AS summary, NULL AS requested_at, 'ana' AS agent, NULL AS taken_at, "
                "NULL AS ended_at, '' AS note, 0 AS messages"
            )
    finally:
        engine.dispose()
    with pytest.raises(ConversationStoreError, match="travel_handoffs lacks its column agent_name"):
        ConversationStore.open(str(path))


def test_desk_compares_logins_and_shows_names(tmp_path: Path) -> None:
    with ConversationStore.open(str(tmp_path / "sessions.sqlite")) as store:
        desk = store.desk
        desk.request("t-1", "p", by="customer", reason="", summary="", now=NOW)
        taken = desk.take("t-1", ANA, NOW)
        assert (taken.agent, taken.agent_login, str(taken.holder)) == (
            "Ana Lima",
            ANA.login,
            "Ana Lima (ana.lima@example.com)",
        )
        # Taking again under another name is the same person; a namesake is not.
        assert desk.take("t-1", Staff(ANA.login, "Ana"), NOW).agent_login == ANA.login
        namesake = Staff(BRUNO.login, ANA.name)
        with pytest.raises(DeskError, match=r"Ana Lima \(ana.lima@example.com\) already holds"):
            desk.take("t-1", namesake, NOW)
        assert desk.held_by(namesake) == []
        with pytest.raises(DeskError, match=r"not Ana Lima \(bruno.costa@example.com\)"):
            desk.end("t-1", namesake, NOW)
        # A plain name is login (canonical) and name (as spelled) at once.
        desk.request("t-2", "p", by="customer", reason="", summary="", now=NOW)
        plain = desk.take("t-2", "  Carla   Reis ", NOW)
        assert (plain.agent, plain.agent_login) == ("Carla Reis", "carla reis")
        assert desk.held_by(Staff("Carla Reis", "Carla")) == [plain]


@pytest.fixture
def conversations(make_assistant: Callable[..., TravelAssistant]) -> Iterator[Conversations]:
    store = ConversationStore.in_memory()
    assistant = make_assistant(checkpointer=store.saver)
    yield Conversations(assistant, store.registry, desk=store.desk, check_above=1000)
    store.close()


def test_a_proposal_saved_before_logins_were_kept_still_has_four_eyes(
    conversations: Conversations, travel_db: Database
) -> None:
    # The version before kept only the proposer's name with a proposal, and that name
    # was their login: its check is still not theirs to decide.
    conversation = conversations.get(Thread("t-before", FIXTURE_PASSENGER_ID))
    conversation.ask_for_person("move my flight")
    conversation.take(ANA.login)
    trip = plan_trip(travel_db)
    args = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    proposal = AIMessage(content="A proposal.", response_metadata={PERSON_KEY: ANA.login})
    with conversation.claim():
        conversation.assistant.propose(
            conversation.thread, "update_ticket_to_new_flight", args, proposal
        )
    (approval,) = conversation.approvals()
    assert approval.proposed_by == ANA.login
    with conversation.claim() as turn:
        list(turn.resolve({approval.tool_call_id: Answer(True)}))
    (check,) = conversation.checks()
    with pytest.raises(DeskError, match="another member of staff"):
        conversation.decide_check(Staff(ANA.login, "Ana Lima"), check.id, approved=True)
    decided = conversation.decide_check(BRUNO, check.id, approved=True)
    assert (decided.staff, decided.staff_login) == (BRUNO.name, BRUNO.login)
