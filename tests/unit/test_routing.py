from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from assistants.routing import (
    ToolGroups,
    first_routing_call,
    last_tool_batch,
    next_step,
)
from assistants.state import active_assistant, update_dialog_stack
from tests.support.scripted import call

SPECIALIST = ToolGroups(
    sensitive=frozenset({"cancel_ticket", "update_ticket_to_new_flight"}),
    routing=frozenset({"CompleteOrEscalate"}),
)
HAND_OVERS = frozenset(
    {"ToFlightBookingAssistant", "ToBookCarRental", "ToHotelBookingAssistant", "ToBookExcursion"}
)
PRIMARY = ToolGroups(sensitive=frozenset(), routing=HAND_OVERS)


def answer(tool_call: dict, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, tool_call_id=tool_call["id"])


def test_update_dialog_stack_pushes_pops_and_keeps() -> None:
    assert update_dialog_stack([], "book_hotel") == ["book_hotel"]
    assert update_dialog_stack(["update_flight"], "book_hotel") == ["update_flight", "book_hotel"]
    assert update_dialog_stack(["update_flight", "book_hotel"], "pop") == ["update_flight"]
    assert update_dialog_stack(["book_hotel"], None) == ["book_hotel"]
    assert update_dialog_stack([], "pop") == []


def test_active_assistant_reads_top_of_stack() -> None:
    assert active_assistant([]) == "primary_assistant"
    assert active_assistant(None) == "primary_assistant"
    assert active_assistant(["update_flight", "book_hotel"]) == "book_hotel"


def test_next_step_ends_on_plain_answer() -> None:
    assert next_step([HumanMessage("hi"), AIMessage("hello")], SPECIALIST) == "end"
    assert next_step([HumanMessage("hi")], SPECIALIST) == "end"


def test_next_step_orders_safe_then_sensitive_then_leave() -> None:
    search = call("search_flights")
    change = call("update_ticket_to_new_flight", {"ticket_no": "1", "new_flight_id": 2})
    leave = call("CompleteOrEscalate", {"reason": "done"})
    ai = AIMessage("", tool_calls=[leave, change, search])
    messages = [HumanMessage("x"), ai]
    assert next_step(messages, SPECIALIST) == "safe_tools"
    messages.append(answer(search))
    assert next_step(messages, SPECIALIST) == "sensitive_tools"
    messages.append(answer(change))
    assert next_step(messages, SPECIALIST) == "leave"
    messages.append(answer(leave))
    assert next_step(messages, SPECIALIST) == "assistant"


def test_next_step_sends_unknown_tools_to_safe_node_not_approval() -> None:
    bogus = call("delete_everything")
    assert next_step([AIMessage("", tool_calls=[bogus])], SPECIALIST) == "safe_tools"
    assert SPECIALIST.select([bogus], "safe_tools") == [bogus]
    assert SPECIALIST.select([bogus], "sensitive_tools") == []


def test_next_step_waits_for_every_parallel_sensitive_call() -> None:
    first = call("cancel_ticket", {"ticket_no": "1"})
    second = call("cancel_ticket", {"ticket_no": "2"})
    messages = [AIMessage("", tool_calls=[first, second]), answer(first)]
    assert next_step(messages, SPECIALIST) == "sensitive_tools"
    _, pending = last_tool_batch(messages)
    assert [c["id"] for c in pending] == [second["id"]]


def test_primary_router_enters_first_routing_target_after_search() -> None:
    search = call("search_flights")
    hotel = call("ToHotelBookingAssistant", {"location": "Basel"})
    car = call("ToBookCarRental", {"location": "Basel"})
    messages = [AIMessage("", tool_calls=[hotel, search, car])]
    assert next_step(messages, PRIMARY) == "safe_tools"
    messages.append(answer(search))
    assert next_step(messages, PRIMARY) == "enter"
    _, pending = last_tool_batch(messages)
    assert first_routing_call(pending, HAND_OVERS) == hotel


def test_last_tool_batch_ignores_answers_to_older_batches() -> None:
    old = call("search_flights")
    new = call("search_flights")
    messages = [AIMessage("", tool_calls=[old]), answer(old), AIMessage("", tool_calls=[new])]
    ai, pending = last_tool_batch(messages)
    assert ai is messages[2]
    assert pending == [new]
