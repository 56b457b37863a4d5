"""The assistant wrapper's history window."""

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from assistants.assistant import trim_history
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


def test_trim_history_keeps_short_conversations_whole() -> None:
    messages = conversation(3)
    assert trim_history(messages, limit=40) == messages


def test_trim_history_is_bounded_and_starts_at_a_customer_message() -> None:
    messages = conversation(50)
    kept = trim_history(messages, limit=10)
    assert len(kept) <= 10
    assert isinstance(kept[0], HumanMessage)
    assert kept[-1] is messages[-1]
    # No tool result is separated from its call.
    calls = {c["id"] for m in kept if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    assert answered <= calls


def test_trim_history_keeps_a_long_current_turn_whole() -> None:
    messages = [HumanMessage("old"), AIMessage("old answer"), HumanMessage("now")]
    for _ in range(20):
        search = call("search_flights")
        messages += [
            AIMessage("", tool_calls=[search]),
            ToolMessage("r", tool_call_id=search["id"]),
        ]
    kept = trim_history(messages, limit=5)
    assert kept[0].content == "now"
    assert len(kept) == 41
