"""The program against a server that behaves like real ones, through the real client.

``tests.support.fake_openai`` plays what llama.cpp, vLLM, Ollama and OpenAI do: usage
chunks with empty ``choices``, extra fields, tool-call arguments in pieces, replies cut at
the output limit, a 400 for roles that do not alternate, 429 with ``Retry-After``, 5xx,
a connection dropped mid-stream, a stream that never ends. Each test drives
``TravelAssistant`` (or the terminal program) over models built by
``assistants.models.build_chat_models``, as the program builds them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.types import RetryPolicy
from sqlalchemy import select

from assistants.assistant import is_cut_off
from assistants.call_limits import time_limit
from assistants.models import ModelSettings, build_chat_models
from assistants.prompts import CUT_OFF_ACTION_NOTE, CUT_OFF_NOTE, TURN_CUT_NOTES
from assistants.providers import describe_provider_error, is_transient_provider_error
from conversations.assistant import (
    ModelProviderError,
    Thread,
    TokenEvent,
    TravelAssistant,
    TurnCancelledError,
    is_cancel_note,
)
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from db.models import Ticket
from tests.support.assistants import build_assistant
from tests.support.cli import chat, chat_args
from tests.support.fake_openai import (
    Drop,
    Endless,
    Fail,
    FakeOpenAI,
    Reply,
    Silent,
    customer_text,
)

THREAD = Thread("real-server", FIXTURE_PASSENGER_ID)
# The program's retry policy, with no wait between its attempts.
TWO_QUICK_ATTEMPTS = RetryPolicy(
    initial_interval=0.01,
    backoff_factor=1.0,
    jitter=False,
    max_attempts=2,
    retry_on=is_transient_provider_error,
)


def settings(server: FakeOpenAI, reply_seconds: float = 300.0) -> ModelSettings:
    return ModelSettings(
        model="scripted",
        api_key="test-key",
        base_url=server.base_url,
        reply_seconds=reply_seconds,
    )


def assistant_for(
    server: FakeOpenAI, db: Database, reply_seconds: float = 300.0
) -> TravelAssistant:
    models = build_chat_models(settings(server, reply_seconds))
    return build_assistant(db, models, retry_policy=TWO_QUICK_ATTEMPTS)


def streamed(events: Iterator[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TokenEvent))


def ticket_status(db: Database) -> str:
    with db.session() as session:
        ticket = session.scalars(select(Ticket).where(Ticket.ticket_no == FIXTURE_TICKET_NO)).one()
        return str(getattr(ticket, "status", "active"))


def test_a_turn_through_a_realistic_stream(travel_db: Database) -> None:
    script = [
        Reply(tool_calls=[("fetch_user_flight_information", {})], argument_pieces=4),
        Reply(text="You fly LX0112 today."),
    ]
    with FakeOpenAI(script) as server:
        assistant = assistant_for(server, travel_db)
        text = streamed(assistant.send(THREAD, "Which flight am I on?"))
    assert text == "You fly LX0112 today."
    last = assistant.messages(THREAD)[-1]
    # The usage came in a chunk with empty choices; llama.cpp's "timings" were ignored.
    assert last.usage_metadata is not None and last.usage_metadata["input_tokens"] == 10
    assert not server.rejected
    first = server.requests[0]
    assert first["stream"] and first["stream_options"] == {"include_usage": True}
    assert first["max_tokens"] == 1024  # every call is bounded
    assert any(m["role"] == "tool" for m in server.requests[1]["messages"])


def test_a_reply_cut_at_the_limit_is_marked_as_it_streams(travel_db: Database) -> None:
    script = [Reply(text="Within twenty-four hours of booking you", finish_reason="length")]
    with FakeOpenAI(script) as server:
        assistant = assistant_for(server, travel_db)
        text = streamed(assistant.send(THREAD, "Can I cancel for free?"))
    assert text == f"Within twenty-four hours of booking you\n\n{CUT_OFF_NOTE}"
    last = assistant.messages(THREAD)[-1]
    assert last.content == text and is_cut_off(last)


def test_a_tool_call_cut_at_the_limit_is_not_run(travel_db: Database) -> None:
    script = [
        Reply(tool_calls=[("ToFlightBookingAssistant", {"request": "cancel my ticket"})]),
        Reply(
            text="Cancelling now.",
            tool_calls=[("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})],
            finish_reason="length",
            cut_arguments=22,  # '{"ticket_no": "7240005': parses, partially
        ),
        Reply(text="Shall I try again?"),
    ]
    before = ticket_status(travel_db)
    with FakeOpenAI(script) as server:
        assistant = assistant_for(server, travel_db)
        text = streamed(assistant.send(THREAD, "Cancel my ticket"))
        assert text.endswith(CUT_OFF_ACTION_NOTE)
        assert assistant.pending_actions(THREAD) == []
        list(assistant.send(THREAD, "Well?"))
    assert ticket_status(travel_db) == before
    assert not server.rejected  # the next request is still a valid conversation


def test_the_strict_server_refuses_roles_that_do_not_alternate(travel_db: Database) -> None:
    # What a client without normalisation sends after an interrupted turn.
    with FakeOpenAI([Reply(text="never")]) as server:
        model = build_chat_models(settings(server))["primary_assistant"]
        with pytest.raises(openai.BadRequestError) as raised:
            model.invoke([SystemMessage("s"), HumanMessage("first"), HumanMessage("again")])
    message = describe_provider_error(raised.value)
    assert "Conversation roles must alternate" in message  # not just the first line
    assert "bug in travel-assistant" in message
    assert server.script  # a refused request takes no reply


def test_a_dropped_connection_then_a_new_message(travel_db: Database) -> None:
    with FakeOpenAI([Drop(), Drop(), Reply(text="Hello again.")]) as server:
        assistant = assistant_for(server, travel_db)
        shown: list[Any] = []
        with pytest.raises(ModelProviderError, match="broke off") as raised:
            shown.extend(assistant.send(THREAD, "Hello?"))
        assert raised.value.retryable
        assert len(server.requests) == 2  # retried once
        # The failed turn was closed saying why: the model reads what the customer read
        # of the broken reply (the retried attempt's, once), then that its server failed
        # (not that the customer cancelled), before the next message.
        assert streamed(assistant.send(THREAD, "Are you there?")) == "Hello again."
    last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user"]
    assert customer_text(last[1]["content"]) == "Hello?"
    read, _, note = last[2]["content"].rpartition("\n\n")
    assert note == TURN_CUT_NOTES["model"]
    # The dropped stream's first chunks, as the customer saw them. Whether any reached the
    # customer before the error is a race (LangGraph drops what a failed step had not
    # handed on yet); what is kept is what was shown.
    assert read == ("This" if streamed(iter(shown)) else "")
    assert customer_text(last[3]["content"]) == "Are you there?"
    assert not server.rejected


def test_rate_limit_with_retry_after(travel_db: Database) -> None:
    busy = Fail(429, "Too many requests", {"Retry-After": "3"})
    with FakeOpenAI([busy, busy, busy, Reply(text="Made it.")]) as server:
        assistant = assistant_for(server, travel_db)
        with pytest.raises(ModelProviderError) as raised:
            list(assistant.send(THREAD, "Hello"))
        assert str(raised.value) == (
            "The model server is rate-limiting requests (HTTP 429): Too many requests. "
            "The server asked to wait 3 s: send your message again after that."
        )
        assert raised.value.retryable
        # Within the retries, a 429 then an answer is no error at all.
        assert streamed(assistant.send(THREAD, "Hello?")) == "Made it."


def test_server_errors_are_retried_then_reported(travel_db: Database) -> None:
    down = Fail(503, "Service Unavailable: loading model")
    with FakeOpenAI([down, Reply(text="Ready.")]) as server:
        assistant = assistant_for(server, travel_db)
        assert streamed(assistant.send(THREAD, "Hello")) == "Ready."
    with FakeOpenAI([down, down]) as server:
        assistant = assistant_for(server, travel_db)
        with pytest.raises(ModelProviderError, match="loading model") as raised:
            list(assistant.send(Thread("other", FIXTURE_PASSENGER_ID), "Hello"))
    assert "Sending your message again may work" in str(raised.value)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Fail(404, "model 'scripted' not found"), "no model 'scripted'"),
        (
            Fail(400, "the request exceeds the available context size, try increasing it"),
            "-c 8192",  # the first message: only a larger server context helps
        ),
        (Fail(401, "Invalid API key"), "check OPENAI_API_KEY"),
    ],
)
def test_errors_a_retry_cannot_fix_are_not_retried(
    travel_db: Database, failure: Fail, expected: str
) -> None:
    with FakeOpenAI([failure, Reply(text="unused")]) as server:
        assistant = assistant_for(server, travel_db)
        with pytest.raises(ModelProviderError, match=expected) as raised:
            list(assistant.send(THREAD, "Hello"))
    assert len(server.requests) == 1
    assert not raised.value.retryable
    assert "will not help" in str(raised.value)


def test_a_reply_that_never_ends_is_stopped_by_its_total_deadline(travel_db: Database) -> None:
    # Chunks keep coming every 20 ms, so the client's timeout between chunks (120 s)
    # never fires: only the total limit of one reply can stop it.
    with FakeOpenAI([Endless(), Endless()]) as server:
        assistant = assistant_for(server, travel_db, reply_seconds=1.0)
        started = time.monotonic()
        with pytest.raises(ModelProviderError, match="limit for one reply") as raised:
            list(assistant.send(THREAD, "Tell me everything"))
        assert time.monotonic() - started < 5
        assert not raised.value.retryable
        assert len(server.requests) == 1
        waited = time.monotonic()
        while server.abandoned == 0 and time.monotonic() - waited < 5:
            time.sleep(0.05)
        assert server.abandoned == 1  # the stream was closed, not left running


def test_the_time_limit_of_a_run_reaches_the_model_call(travel_db: Database) -> None:
    with FakeOpenAI([Endless()]) as server:
        assistant = assistant_for(server, travel_db)
        started = time.monotonic()
        with time_limit(1.0), pytest.raises(ModelProviderError, match="time limit"):
            list(assistant.send(THREAD, "Tell me everything"))
    assert time.monotonic() - started < 5


def test_the_terminal_shows_why_and_does_not_promise_a_retry_will_work(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI([Fail(401, "Invalid API key provided: test-key")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        result = chat(
            chat_args(db_path, FIXTURE_PASSENGER_ID, "--max-tokens", "77"),
            ["Hello"],
            None,
            tmp_path / "app",
        )
    assert result.code == 0, result.err
    assert (
        "The model server rejected the API key (HTTP 401): Invalid API key provided: test-key. "
        "Sending it again will not help: check OPENAI_API_KEY. Your conversation is saved."
    ) in result.err
    assert "send your message again" not in result.err
    assert server.requests[0]["max_tokens"] == 77


def test_a_cancel_while_the_server_sends_nothing_stops_the_turn_at_once(
    travel_db: Database,
) -> None:
    # A server still processing a long prompt sends nothing, not even its headers: the
    # turn must not wait for it (issue 10).
    with FakeOpenAI([Silent(Reply(text="Too late."), seconds=8), Reply(text="Hi!")]) as server:
        assistant = assistant_for(server, travel_db)
        cancel = threading.Event()

        def cancel_once_asked() -> None:
            # Once the silent request is at the server (on a busy machine the turn may
            # take longer than a fixed delay to send it), and half a second into it.
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)
            asked.append(time.monotonic())
            cancel.set()

        asked: list[float] = []
        canceller = threading.Thread(target=cancel_once_asked, daemon=True)
        canceller.start()
        with pytest.raises(TurnCancelledError):
            list(assistant.send(THREAD, "Hello?", cancel=cancel))
        waited = time.monotonic() - asked[0]
        assert waited < 5, f"the cancel waited {waited:.1f} s for the silent server"
        assert is_cancel_note(assistant.messages(THREAD)[-1])
        assert streamed(assistant.send(THREAD, "Are you there?")) == "Hi!"
    assert len(server.requests) == 2
    roles = [m["role"] for m in server.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # still a valid conversation
