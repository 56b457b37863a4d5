"""Ctrl-C while the assistant works cancels the turn, not the program (issue 11 finding 2,
issue 10).

In process: ``TravelAssistant.send``/``resolve`` with a cancel event (the model stops at
its next token, no node starts after it, the saved conversation is closed and stays a
valid conversation), the terminal's Ctrl-C handler (a real SIGINT sent while the model
streams), and a resumed conversation whose process died mid-turn. The pseudo-terminal
test against a slow server is ``tests/integration/test_terminal_chat.py``.
"""

from __future__ import annotations

import io
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from assistants.approvals import facts_of
from assistants.models import ModelSettings, build_chat_models
from conversations.assistant import (
    Decision,
    MessageEvent,
    Thread,
    TokenEvent,
    TravelAssistant,
    TurnCancelledError,
    is_cancel_note,
)
from conversations.events import Cancel
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.cli import chat, chat_args, leave_pending_approval
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import change_call, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say

THREAD = Thread("t-cancel", FIXTURE_PASSENGER_ID)
LONG_REPLY = " ".join(f"word{i}" for i in range(200))


@pytest.fixture
def api(make_assistant: Callable[..., TravelAssistant], fixed_db: Database) -> TravelAssistant:
    return make_assistant(db=fixed_db)


def cancelling(event: threading.Event, reply: AIMessage) -> Any:
    """A script item that sets ``event`` when the model is called, then answers ``reply``."""

    def answer(_messages: list[BaseMessage]) -> AIMessage:
        event.set()
        return reply

    return answer


def roles(messages: list[BaseMessage]) -> list[str]:
    return [m.type for m in messages if m.type != "system"]


def test_cancel_stops_at_the_next_token_and_closes_the_turn(
    api: TravelAssistant, model: ScriptedChatModel
) -> None:
    cancel = threading.Event()
    model.extend(cancelling(cancel, say(LONG_REPLY)), say("Hello again."))
    tokens = []
    with pytest.raises(TurnCancelledError):
        for event in api.send(THREAD, "hi", cancel=cancel):
            if isinstance(event, TokenEvent):
                tokens.append(event.text)
    assert len(tokens) <= 1  # the stream stopped at the first token after the cancel
    messages = api.messages(THREAD)
    assert [type(m) for m in messages] == [HumanMessage, AIMessage]
    assert is_cancel_note(messages[-1])
    assert not api.interrupted(THREAD) and not api.pending_actions(THREAD)

    list(api.send(THREAD, "are you there?", cancel=threading.Event()))
    assert roles(model.received[-1]) == ["human", "ai", "human"]  # still a valid conversation
    assert api.messages(THREAD)[-1].content == "Hello again."


def test_a_reply_cut_mid_stream_keeps_what_the_customer_read(
    make_assistant: Callable[..., TravelAssistant], fixed_db: Database
) -> None:
    # A real client streaming from a server that sends a word every 50 ms: the customer
    # presses Stop with three words on the screen, while the reply is still coming.
    script = [Reply(text=LONG_REPLY), Reply(text="Hello again.")]
    with FakeOpenAI(script, chunk_delay=0.05) as server:
        models = build_chat_models(
            ModelSettings(model="scripted", base_url=server.base_url, api_key="k")
        )
        api = make_assistant(db=fixed_db, model=models, retry_policy=None)
        cancel = Cancel()
        shown: list[str] = []
        with pytest.raises(TurnCancelledError):
            for event in api.send(THREAD, "hi", cancel=cancel):
                if isinstance(event, TokenEvent):
                    shown.append(event.text)
                    if len(shown) == 3:
                        cancel.set()  # Stop
        assert shown == ["word0 ", "word1 ", "word2 "]
        messages = api.messages(THREAD)
        assert [type(m) for m in messages] == [HumanMessage, AIMessage, AIMessage]
        kept, note = messages[1], messages[2]
        assert kept.content == "word0 word1 word2 "  # what was read, no more
        assert not is_cancel_note(kept) and is_cancel_note(note)
        list(api.send(THREAD, "are you there?"))
        assert api.messages(THREAD)[-1].content == "Hello again."
        assert not server.rejected  # the next request is a conversation servers accept


def test_cancel_runs_no_tool_after_it(api: TravelAssistant, model: ScriptedChatModel) -> None:
    cancel = threading.Event()
    search = call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    model.extend(say("", search))
    with pytest.raises(TurnCancelledError):
        for event in api.send(THREAD, "flights to Basel?", cancel=cancel):
            if isinstance(event, MessageEvent) and isinstance(event.message, AIMessage):
                cancel.set()  # Ctrl-C as "searching flights" shows, before the tool runs
    answers = [m for m in api.messages(THREAD) if isinstance(m, ToolMessage)]
    assert len(answers) == 1
    assert facts_of(answers[0]).not_run == "cancelled"  # answered, never run
    assert "LX0112" not in str(answers[0].content)
    assert is_cancel_note(api.messages(THREAD)[-1])
    assert len(model.received) == 1


def test_tokens_name_the_node_that_streams_them(
    api: TravelAssistant, model: ScriptedChatModel
) -> None:
    model.extend(say("Good morning to you."))
    events = list(api.send(THREAD, "hi"))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert "".join(t.text for t in tokens) == "Good morning to you."
    assert {t.assistant for t in tokens} == {"primary_assistant"}
    reply = next(e.message for e in events if isinstance(e, MessageEvent))
    assert {t.message_id for t in tokens} == {reply.id}  # the terminal pairs them by id


def test_a_caller_that_stops_reading_stops_the_run(
    api: TravelAssistant, model: ScriptedChatModel
) -> None:
    search = call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    model.extend(say("", search), say("Hello again."))
    run = api.send(THREAD, "flights to Basel?")
    for event in run:
        if isinstance(event, MessageEvent) and isinstance(event.message, AIMessage):
            break  # the caller goes away as the tool call shows, before the tool runs
    run.close()
    assert not any(t.name == "graph-run" for t in threading.enumerate())
    answers = [m for m in api.messages(THREAD) if isinstance(m, ToolMessage)]
    assert [facts_of(a).not_run for a in answers] == ["cancelled"]
    assert is_cancel_note(api.messages(THREAD)[-1])
    assert not api.interrupted(THREAD)
    list(api.send(THREAD, "are you there?"))
    assert api.messages(THREAD)[-1].content == "Hello again."


def test_a_caller_that_stops_reading_before_an_approval_stop_leaves_it_pending(
    api: TravelAssistant, model: ScriptedChatModel, fixed_db: Database
) -> None:
    change = change_call(fixed_db)
    model.extend(say("", call("ToFlightBookingAssistant", {"request": "m"})), say("", change))
    run = api.send(THREAD, "move my flight")
    for event in run:
        calls = getattr(event, "message", None) and getattr(event.message, "tool_calls", [])
        if calls and calls[0]["name"] == change["name"]:
            break  # gone as the write is proposed: no node runs before the stop
    run.close()  # the stop before the approval has no reader to wait for
    assert not any(t.name == "graph-run" for t in threading.enumerate())
    assert [a.tool_call_id for a in api.pending_actions(THREAD)] == [change["id"]]


def test_cancel_before_an_approved_write_does_not_write(
    api: TravelAssistant, model: ScriptedChatModel, fixed_db: Database, db_path: Path
) -> None:
    change = change_call(fixed_db)
    model.extend(say("", call("ToFlightBookingAssistant", {"request": "m"})), say("", change))
    list(api.send(THREAD, "move my flight"))
    [action] = api.pending_actions(THREAD)
    before = ticket_flight(db_path)
    cancel = threading.Event()
    cancel.set()  # Ctrl-C as the customer pressed y
    with pytest.raises(TurnCancelledError):
        list(api.resolve(THREAD, {action.tool_call_id: Decision(True)}, cancel=cancel))
    assert ticket_flight(db_path) == before
    assert api.pending_actions(THREAD) == []
    answer = next(
        m
        for m in api.messages(THREAD)
        if isinstance(m, ToolMessage) and m.tool_call_id == action.tool_call_id
    )
    assert facts_of(answer).not_run == "cancelled"


def test_cli_ctrl_c_while_the_model_streams_cancels_the_turn(
    db_path: Path, tmp_path: Path, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The terminal's handler runs in the main thread whenever Python gets to it; on a
    # loaded machine the scripted model could stream the whole reply first. Note when
    # the handler has run, and let the model wait for it, as a real server's latency
    # between tokens would.
    handled = threading.Event()
    install = signal.signal

    def noting(signum: int, handler: Any) -> Any:
        if not callable(handler):
            return install(signum, handler)

        def run_and_note(number: int, frame: Any) -> None:
            handler(number, frame)
            handled.set()

        return install(signum, run_and_note)

    monkeypatch.setattr(signal, "signal", noting)

    def interrupt(_messages: list[BaseMessage]) -> AIMessage:
        # The customer presses Ctrl-C. Sent with kill() from this worker thread, the
        # signal may be delivered to a thread other than the main one, and the main
        # thread, asleep in a wait, would notice it only when that wait ends (once, 30 s
        # under load). A terminal's Ctrl-C reaches the main thread while it runs; aim
        # the signal at it so its wait is interrupted at once.
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)
        assert handled.wait(30), "the terminal never handled Ctrl-C"
        return say(LONG_REPLY)

    model.extend(interrupt, say("Here I am."))
    result = chat(chat_args(db_path), ["hi", "are you there?", "exit"], model, tmp_path / "home")
    assert result.code == 0, result.err
    assert "Turn cancelled" in result.err
    assert "word150" not in result.out  # the reply stopped
    assert "Here I am." in result.out  # and the conversation went on
    assert roles(model.received[-1]) == ["human", "ai", "human"]
    assert "Resume it with" in result.err
    assert "Traceback" not in result.err


def test_cli_resume_after_a_process_died_mid_turn(
    db_path: Path, tmp_path: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    home = tmp_path / "home"
    thread_id = leave_pending_approval(home, fixed_db, "move my flight")
    # The process dies while the approved change is about to run: emulate it by saving
    # the state at the step before the tools node, as a killed run leaves it.
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(home / "sessions.sqlite", check_same_thread=False)
    crashing = ScriptedChatModel(script=[RuntimeError("the process died")])
    api = build_assistant(fixed_db, crashing, SqliteSaver(connection))
    thread = Thread(thread_id, FIXTURE_PASSENGER_ID)
    with pytest.raises(RuntimeError):
        list(api.send(thread, "hello?"))
    assert api.interrupted(thread)
    connection.close()

    model.extend(say("Sorry for the wait: what can I do?"))
    result = chat(
        chat_args(db_path, FIXTURE_PASSENGER_ID, "--thread-id", thread_id),
        ["are you there?", "exit"],
        model,
        home,
    )
    assert result.code == 0, result.err
    assert "Your last message was not answered" in result.err
    assert "Sorry for the wait" in result.out
    sent = roles(model.received[-1])
    assert sent[-3:] == ["human", "ai", "human"]  # never two customer messages in a row


def _sigint_once(original: Callable[..., Any], *, after: bool = False) -> Callable[..., Any]:
    """Wrap ``original`` so that its first call is preceded (or followed) by a SIGINT."""
    sent = threading.Event()

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        first = not sent.is_set()
        sent.set()
        if first and not after:
            signal.raise_signal(signal.SIGINT)  # handled in this, the main, thread
        result = original(*args, **kwargs)
        if first and after:
            signal.raise_signal(signal.SIGINT)
        return result

    return wrapped


@pytest.mark.parametrize("moment", ["as-the-prompt-returns", "while-the-turn-is-claimed"])
def test_cli_ctrl_c_right_after_enter_cancels_the_turn_not_the_program(
    db_path: Path,
    tmp_path: Path,
    model: ScriptedChatModel,
    monkeypatch: pytest.MonkeyPatch,
    moment: str,
) -> None:
    # A Ctrl-C in the moments between Enter and the turn's start: the prompt has left
    # raw mode (so the key is a signal), the turn has not taken it over yet. Python's
    # default handler would raise KeyboardInterrupt there and end the program.
    import conversations.protocol
    from terminal.prompter import PromptReads

    if moment == "as-the-prompt-returns":
        monkeypatch.setattr(PromptReads, "__call__", _sigint_once(PromptReads.__call__, after=True))
    else:
        claim = conversations.protocol.Conversation.claim
        monkeypatch.setattr(conversations.protocol.Conversation, "claim", _sigint_once(claim))
    model.extend(say("Here I am."))
    result = chat(chat_args(db_path), ["hi", "are you there?", "exit"], model, tmp_path / "home")
    assert result.code == 0, result.err
    assert "Turn cancelled" in result.err
    assert "Here I am." in result.out  # the chat went on
    assert len(model.received) == 1  # the cancelled turn never called the model
    assert "Resume it with" in result.err  # left by "exit", not by the Ctrl-C


def test_ctrl_c_typed_at_a_terminal_right_after_enter_is_the_cancel_of_the_line() -> None:
    # Typed so soon after Enter that the prompt read it as a key (its type-ahead): the
    # cancel of what the line starts, not a Ctrl-C at the next, empty, prompt (which
    # would leave). The keys after it are kept for the next prompt.
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from terminal.prompter import PromptReads
    from terminal.signals import CtrlC

    ctrl_c = CtrlC(io.StringIO(), lambda: None, lambda: "")
    with create_pipe_input() as keys:
        session: PromptSession[str] = PromptSession(input=keys, output=DummyOutput())
        reads = PromptReads(session, ctrl_c, terminal=True)
        keys.send_text("hi\r\x03more\r")
        with ctrl_c.installed():
            assert reads("you> ") == "hi"
            assert ctrl_c.arm().is_set()
            assert reads("you> ") == "more"
            assert not ctrl_c.arm().is_set()
