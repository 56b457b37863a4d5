"""The assistant wrapper's history window."""

from itertools import pairwise

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from assistants.assistant import TURNS_PER_BLOCK, history_window
from assistants.context import message_tokens
from tests.support.scripted import call


def conversation(turns: int) -> list:
    messages: list = []
    for index in range(turns):
        search = call("search_flights")
        messages += [
            HumanMessage(f"question {index}"),
            AIMessage("", tool_calls=[search]),
            ToolMessage("results", tool_call_id=search["id"]),
            AIMessage(f"answer {index}"),
        ]
    return messages


def within(tokens: int):
    return lambda window: sum(message_tokens(m) for m in window) <= tokens


def test_the_window_keeps_short_conversations_whole() -> None:
    messages = conversation(3)
    assert history_window(messages, within(10_000)) == messages


def test_the_window_is_bounded_by_tokens_and_starts_at_a_customer_message() -> None:
    messages = conversation(50)
    budget = 300
    kept = history_window(messages, within(budget))
    assert sum(message_tokens(m) for m in kept) <= budget
    assert len(kept) < len(messages)
    assert isinstance(kept[0], HumanMessage)
    assert kept[-1] is messages[-1]
    # No tool result is separated from its call.
    calls = {c["id"] for m in kept if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    assert answered <= calls


def test_the_window_is_bounded_in_messages_too() -> None:
    kept = history_window(conversation(50), within(100_000), limit=10)
    assert len(kept) <= 10 and isinstance(kept[0], HumanMessage)


def test_the_window_starts_at_a_block_start_when_one_fits() -> None:
    messages = conversation(11)  # questions 0..10; blocks start at 0, 4 and 8
    budget = sum(message_tokens(m) for m in messages[4 * 4 :])  # questions 4..10 fit
    kept = history_window(messages, within(budget))
    assert kept[0].content == f"question {TURNS_PER_BLOCK}"
    # Too long from there: the next block start that fits, though question 6 would too.
    shorter = sum(message_tokens(m) for m in messages[4 * 6 :])  # questions 6..10 fit
    assert history_window(messages, within(shorter))[0].content == "question 8"
    # No block start fits: the earliest turn from which the rest fits.
    tight = sum(message_tokens(m) for m in messages[4 * 9 :])  # questions 9..10 fit
    assert history_window(messages, within(tight))[0].content == "question 9"


def test_the_window_keeps_a_long_current_turn_whole() -> None:
    messages = [HumanMessage("old"), AIMessage("old answer"), HumanMessage("now")]
    for _ in range(20):
        search = call("search_flights")
        messages += [
            AIMessage("", tool_calls=[search]),
            ToolMessage("r", tool_call_id=search["id"]),
        ]
    kept = history_window(messages, within(50), limit=5)
    assert kept[0].content == "now"
    assert len(kept) == 41


# --- what the node sends and keeps -----------------------------------------------------------

import pytest  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from assistants import context  # noqa: E402
from assistants.assistant import (  # noqa: E402
    CUT_OFF_KEY,
    Assistant,
    is_cut_off,
    mark_cut_off,
)
from assistants.context import REQUEST_OVERHEAD, tools_tokens  # noqa: E402
from assistants.prompts import CUT_OFF_ACTION_NOTE, CUT_OFF_NOTE  # noqa: E402
from assistants.specialists import build_crew  # noqa: E402
from conversations.assistant import Decision, Thread  # noqa: E402
from db.clock import fixed_clock  # noqa: E402
from db.engine import Database  # noqa: E402
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO  # noqa: E402
from tests.support.assistants import build_assistant  # noqa: E402
from tests.support.databases import FIXED_NOW  # noqa: E402
from tests.support.scripted import ScriptedChatModel, say  # noqa: E402
from tests.support.strict_chat import check  # noqa: E402

THREAD = Thread("t-1", FIXTURE_PASSENGER_ID)


class SmallWindow(ScriptedChatModel):
    """A scripted model configured like a local server with a small context window."""

    context_tokens: int = 5000
    max_tokens: int = 1000


def cut(text: str, name: str = "", args: str = "") -> AIMessage:
    calls = (
        [{"name": name, "args": args, "id": "cut1", "error": None, "type": "invalid_tool_call"}]
        if name
        else []
    )
    return AIMessage(
        content=text, invalid_tool_calls=calls, response_metadata={"finish_reason": "length"}
    )


def test_mark_cut_off_keeps_the_text_drops_the_calls_and_says_so() -> None:
    reply = AIMessage(
        content="I will cancel it now.",
        tool_calls=[call("cancel_ticket", {"ticket_no": "72400"})],
        additional_kwargs={"tool_calls": [{"id": "x", "function": {"name": "cancel_ticket"}}]},
        response_metadata={"finish_reason": "length"},
    )
    kept = mark_cut_off(reply)
    assert not kept.tool_calls and not kept.invalid_tool_calls
    assert "tool_calls" not in kept.additional_kwargs  # langchain-openai would resend them
    assert kept.content == f"I will cancel it now.\n\n{CUT_OFF_ACTION_NOTE}"
    assert kept.response_metadata[CUT_OFF_KEY] and is_cut_off(kept)
    # The note streamed by the model wrapper is not added twice, and is corrected when
    # the calls only showed up in the final message.
    assert mark_cut_off(kept).content == kept.content
    streamed = AIMessage(
        content=f"Partial\n\n{CUT_OFF_NOTE}",
        tool_calls=[call("cancel_ticket")],
        response_metadata={"finish_reason": "length"},
    )
    assert mark_cut_off(streamed).content == f"Partial\n\n{CUT_OFF_ACTION_NOTE}"
    assert not is_cut_off(AIMessage("done", response_metadata={"finish_reason": "stop"}))


def test_a_reply_cut_at_the_limit_is_kept_with_a_note(travel_db: Database) -> None:
    model = ScriptedChatModel(script=[cut("Within twenty-four hours of booking you")])
    assistant = build_assistant(travel_db, model, retry_policy=None)
    list(assistant.send(THREAD, "Can I cancel for free?"))
    last = assistant.messages(THREAD)[-1]
    assert last.content == f"Within twenty-four hours of booking you\n\n{CUT_OFF_NOTE}"
    assert is_cut_off(last)


def test_a_tool_call_cut_at_the_limit_never_runs(travel_db: Database) -> None:
    # The cut arguments still parse (LangChain completes partial JSON), into a call that
    # looks valid: without the guard it would wait for approval as a real action.
    model = ScriptedChatModel(
        script=[
            say("", call("ToFlightBookingAssistant", {"request": "cancel my ticket"})),
            cut("Cancelling now.", "cancel_ticket", '{"ticket_no": "' + FIXTURE_TICKET_NO[:8]),
        ]
    )
    assistant = build_assistant(travel_db, model, retry_policy=None)
    list(assistant.send(THREAD, "Cancel my ticket"))
    assert assistant.pending_actions(THREAD) == []
    messages = assistant.messages(THREAD)
    assert messages[-1].content == f"Cancelling now.\n\n{CUT_OFF_ACTION_NOTE}"
    assert not any(isinstance(m, ToolMessage) and m.name == "cancel_ticket" for m in messages)
    model.extend(say("Shall I try again?"))
    list(assistant.send(THREAD, "Well?"))
    assert not check(model.received[-1])


def test_asking_again_goes_into_the_system_prompt(travel_db: Database) -> None:
    model = ScriptedChatModel(script=[say(""), say("Hello!")])
    assistant = build_assistant(travel_db, model, retry_policy=None)
    list(assistant.send(THREAD, "hi"))
    first, second = model.received
    assert second[1:] == first[1:]  # the same conversation, no extra customer message
    assert "could not be used" in str(second[0].content)
    assert not check(second)


def test_requests_fit_the_models_context_window(travel_db: Database) -> None:
    model = SmallWindow()
    assistant = build_assistant(travel_db, model, retry_policy=None)
    for index in range(25):
        model.extend(say(f"Answer {index}: " + "lorem ipsum dolor sit amet " * 20))
        list(assistant.send(THREAD, f"Question {index}: " + "please tell me more " * 20))
    node = Assistant(
        "primary_assistant",
        model,
        assistant.crew.prompt(),
        [*assistant.crew.primary_tools],
        clock=fixed_clock(FIXED_NOW),
    )
    assert node.prompt_budget == 4000
    routing = [m.specialist.routing_tool for m in assistant.crew.members]
    tools = tools_tokens([*assistant.crew.primary_tools, *routing])
    last = model.received[-1]
    used = REQUEST_OVERHEAD + tools + sum(message_tokens(m) for m in last)
    assert used <= 4000
    assert len(last) < 2 * 25  # older turns were left out
    # The bookings stay in the request, before the latest customer message, when the
    # message that first carried them is out of the window.
    bookings, latest = str(last[-1].content).split("\n</bookings>\n")
    assert bookings.startswith("<bookings>\n") and FIXTURE_TICKET_NO in bookings
    assert latest.startswith("[2026-05-04 09:00 UTC, Monday] Question 24")
    assert not check(last)


def test_the_tools_are_counted_from_what_a_chat_openai_binding_sends(
    travel_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    crew = build_crew(travel_db)
    tools = list(crew.primary_tools)
    expected = tools_tokens(tools)
    model = ChatOpenAI(model="any", api_key="not-used", base_url="http://127.0.0.1:9/v1")
    node = Assistant("primary_assistant", model, "", tools, clock=fixed_clock(FIXED_NOW))

    def converted_again(tool: object) -> dict:
        raise AssertionError("the binding already holds the converted tools")

    monkeypatch.setattr(context, "convert_to_openai_tool", converted_again)
    assert node.budget_for("") == node.prompt_budget - REQUEST_OVERHEAD - expected
    # A model whose binding holds no definitions (a scripted one) has them converted.
    scripted = Assistant(
        "primary_assistant", ScriptedChatModel(), "", tools, clock=fixed_clock(FIXED_NOW)
    )
    with pytest.raises(AssertionError, match="already holds"):
        scripted.budget_for("")


@pytest.mark.parametrize("approve", [True, False])
def test_the_request_after_an_answered_approval_is_valid(
    travel_db: Database, approve: bool
) -> None:
    cancel = call("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})
    model = ScriptedChatModel(
        script=[
            say("", call("ToFlightBookingAssistant", {"request": "cancel"})),
            say("I will cancel it.", cancel),
            say("Done."),
        ]
    )
    assistant = build_assistant(travel_db, model, retry_policy=None)
    list(assistant.send(THREAD, "Cancel my ticket"))
    list(assistant.resolve(THREAD, {cancel["id"]: Decision(approve)}))
    assert all(not check(request) for request in model.received)


def test_the_window_moves_in_blocks_of_turns_so_the_prompt_start_repeats(
    travel_db: Database,
) -> None:
    model = SmallWindow()
    assistant = build_assistant(travel_db, model, retry_policy=None)
    for index in range(30):  # a window holds several of these turns, not all
        model.extend(say(f"Answer {index}: " + "lorem ipsum dolor sit amet " * 4))
        list(assistant.send(THREAD, f"Question {index}: " + "please tell me more " * 4))
    firsts = [
        next(str(m.content) for m in request if isinstance(m, HumanMessage))
        for request in model.received
    ]
    starts = [int(first.split("Question ")[1].split(":")[0]) for first in firsts]
    assert starts[-1] > 0  # the window did move
    assert all(start % TURNS_PER_BLOCK == 0 for start in starts), starts  # only at block starts
    moves = sum(1 for before, after in pairwise(starts) if after != before)
    assert moves <= len(starts) // 2  # most calls keep the start of the one before
