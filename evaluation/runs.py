"""Running a scenario: offline with scripted replies, or live with a simulated customer."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolCall

from assistants.approvals import Decision
from assistants.call_limits import time_limit
from assistants.providers import ModelProviderError, describe_provider_error, is_provider_error
from assistants.specialists import build_crew
from conversations.assistant import Thread, TravelAssistant
from conversations.events import STAFF_NOTE_KEY
from conversations.records import Outcome, TurnFailure
from db.clock import Clock
from db.copies import database_copies
from db.engine import Database
from evaluation.desk_steps import record_staff_check, run_step
from evaluation.gold_database import apply_gold_actions, database_problems
from evaluation.judge import ScenarioResult, Transcript, judge
from evaluation.scenarios import Resolver, Scenario, StaffCheck

if TYPE_CHECKING:
    from conversations.audit import AuditLog
    from conversations.desk import Check
    from conversations.protocol import Conversation

# The member of staff who answers a trial's second-approval checks, as the scenario scripts.
STAFF = "Ana Lima"


def _reply(resolve: Resolver, spec: Mapping[str, Any], counter: Iterator[int]) -> AIMessage:
    calls = [
        ToolCall(
            name=str(c["name"]),
            args=resolve(dict(c.get("args", {}))),
            id=str(c.get("id") or f"call_{next(counter)}"),
            type="tool_call",
        )
        for c in spec.get("calls", ())
    ]
    return AIMessage(content=resolve(str(spec.get("text", ""))), tool_calls=calls)


def parse_decision(answer: str) -> Decision:
    """Turn ``"y"`` or ``"n: reason"`` into a decision (anything but yes denies)."""
    head, _, reason = answer.partition(":")
    if head.strip().lower() in ("y", "yes"):
        return Decision(True)
    return Decision(False, reason.strip() or None)


def run_scenario(
    scenario: Scenario,
    template: Path | str,
    clock: Clock,
    folder: Path,
    make_model: Callable[[Database], BaseChatModel | Mapping[str, BaseChatModel]],
    customer: Callable[[int, list[AnyMessage]], str | None] | None = None,
    *,
    offline: bool = False,
    seconds: float | None = None,
    on_turn: Callable[[int], None] | None = None,
    data_dir: Path | None = None,
) -> ScenarioResult:
    """Run one scenario in ``folder`` over copies of ``template`` and judge it.

    ``make_model`` gets the assistant's database (scripted replies resolve their
    placeholders against it); ``customer`` replaces the scripted turns when given;
    ``offline`` says the model's replies are scripted (see ``judge``). ``seconds``
    limits the whole run (every model call in it, the simulated customer's too);
    ``on_turn`` hears the index of each customer message as it is sent.

    ``template`` is a SQLite file, or the URL of a PostgreSQL database nothing is
    connected to: the copies are then databases on the same server, dropped afterwards
    (``db.copies``). The conversation is kept in a conversation store of its own in
    ``folder`` either way (a SQLite file: checkpoints, registry and the desk's queue).

    A provider error, or the time limit, ends the run: the result carries it as its
    ``error``, with the transcript so far, and the run is not judged.
    """
    with database_copies(
        template, folder, ["agent.sqlite", "gold.sqlite"], clock, data_dir
    ) as copies:
        agent_db, gold_db = copies
        models = make_model(agent_db)
        transcript = Transcript()
        try:
            with time_limit(seconds) if seconds is not None else contextlib.nullcontext():
                converse(
                    scenario,
                    agent_db,
                    lambda: models,
                    folder / "conversations.sqlite",
                    customer,
                    transcript=transcript,
                    on_turn=on_turn,
                )
        except Exception as failure:
            if isinstance(failure, ModelProviderError):
                return ScenarioResult(scenario, (), transcript, error=str(failure))
            if is_provider_error(failure):  # the simulated customer's model call
                error = f"(the simulated customer) {describe_provider_error(failure)}"
                return ScenarioResult(scenario, (), transcript, error=error)
            raise
        apply_gold_actions(gold_db, scenario.passenger_id, scenario.gold_actions)
        failures = judge(
            scenario,
            transcript,
            database_problems(agent_db, gold_db),
            build_crew(agent_db).sensitive_names,
            offline=offline,
        )
        return ScenarioResult(scenario, failures, transcript)


def run_offline(
    scenario: Scenario,
    template: Path | str,
    clock: Clock,
    model_factory: Callable[[list[AIMessage]], BaseChatModel],
) -> ScenarioResult:
    """Run ``scenario`` with its scripted replies over a copy of ``template``.

    ``model_factory`` turns the scripted replies into a chat model (the tests pass their
    scripted model), so this module needs no test code.
    """
    built: list[BaseChatModel] = []

    def scripted(db: Database) -> BaseChatModel:
        resolve = Resolver(db)
        counter = iter(range(1, 1_000_000))
        replies = [_reply(resolve, r, counter) for turn in scenario.turns for r in turn.replies]
        built.append(model_factory(replies))
        return built[-1]

    with tempfile.TemporaryDirectory() as folder:
        result = run_scenario(scenario, template, clock, Path(folder), scripted, offline=True)
    leftover = getattr(built[0], "script", []) if built else []
    if leftover:
        failures = (*result.failures, f"{len(leftover)} scripted replies were never used")
        return ScenarioResult(scenario, failures, result.transcript)
    return result


def converse(
    scenario: Scenario,
    db: Database,
    make_model: Callable[[], BaseChatModel | Mapping[str, BaseChatModel]],
    conversations: Path,
    customer: Callable[[int, list[AnyMessage]], str | None] | None = None,
    *,
    transcript: Transcript | None = None,
    on_turn: Callable[[int], None] | None = None,
) -> Transcript:
    """Play the scenario's turns (or a simulated customer's) through the conversation protocol.

    ``conversations`` is the trial's own conversation store (a SQLite file): checkpoints,
    registry, turn locks and the desk's queue, as ``chat`` and ``serve`` keep them. Each
    turn is claimed and run by ``conversations.protocol``, as the front ends run theirs,
    so what the protocol does after a turn (queueing the conversation for a person when
    the assistant called ``request_human_agent``; keeping the customer's messages for
    that person, unanswered, while it waits) happens here too, and the transcript ends
    with the desk's last hand-off of the conversation.

    With ``resume_after_turn`` set, the store and the graph are opened again right after
    that turn's message, before its approvals are answered, as a new process would, and
    the conversation goes on.

    With ``second_approval_above`` set, an action the customer approves that moves more
    waits for a member of staff's check, as with ``TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE``
    (the scenario's amount, not the variable's, counts here). ``STAFF`` then answers each
    waiting check with the next of the scenario's ``staff_checks`` (``decide_check``, as
    the desk does), and the last decision applies them at once (``apply_checked``, which
    runs or declines the action and calls the model), as the desk and the service do. A
    check with no scripted answer left is left waiting, and the conversation ends there:
    the customer can only wait for staff.

    The conversation is recorded in ``transcript`` (a new one by default), also when a
    model call fails part-way; ``on_turn`` hears the index of each customer message.

    Raises:
        ModelProviderError: A turn ended because the model server failed or the time
            limit was reached (the turn is closed as such, as in the front ends).
    """
    from conversations.protocol import Answer, Conversations
    from conversations.store import ConversationStore

    thread = Thread(f"eval-{scenario.id}", scenario.passenger_id)

    def open_conversation() -> tuple[ConversationStore, Conversation]:
        store = ConversationStore.open(conversations)
        try:
            assistant = TravelAssistant.build(make_model(), store.saver, db=db)
            assistant.prepare()  # as chat does: the first policy question does not index it
        except BaseException:
            store.close()
            raise
        owner = Conversations(
            assistant,
            store.registry,
            store.locks,
            store.desk,
            check_above=scenario.second_approval_above,
        )
        return store, owner.get(thread)

    store, conversation = open_conversation()
    transcript = transcript if transcript is not None else Transcript()
    decisions = [d for turn in scenario.turns for d in turn.decisions]
    staff = [c for turn in scenario.turns for c in turn.staff_checks]
    steps = [str(step) for turn in scenario.turns for step in turn.desk]
    resolve = Resolver(db)
    index = 0
    waiting_for_staff = False
    try:
        while not waiting_for_staff:
            turn = scenario.turns[index] if index < len(scenario.turns) else None
            message: str | None
            if turn is not None and turn.customer is None:
                message = None  # a turn of the people at the desk only
            elif customer is None:
                if turn is None:
                    break
                message = turn.customer
            else:
                message = customer(index, conversation.assistant.messages(thread))
                if message is None:
                    break
            started = time.perf_counter()
            if message is not None:
                if on_turn is not None:
                    on_turn(index)
                message_id = f"eval-turn-{index + 1}"
                with conversation.claim() as claimed:
                    _finish(claimed.send(message, message_id=message_id))
                transcript.sent[index] = message_id
            if scenario.resume_after_turn is not None and index + 1 == scenario.resume_after_turn:
                # A new process takes over, with any approval of this turn still pending.
                store.close()
                store, conversation = open_conversation()
            for step in turn.desk if turn is not None else ():
                # What people do once the message is answered, before the customer decides.
                transcript.desk_steps.append(
                    run_step(conversation, store.audit, step, index, resolve, transcript, _finish)
                )
            # The next turn's people may decide a check this one leaves waiting; the
            # customer may talk to them meanwhile (a message withdraws nothing).
            people_next = index + 1 < len(scenario.turns) and bool(scenario.turns[index + 1].desk)
            while pending := conversation.assistant.pending_actions(thread):
                # The customer said yes to these; a member of staff checks them first. (A
                # check already applied stays open until no action is pending: not these.)
                waiting = {a.tool_call_id for a in pending}
                checks = [c for c in conversation.checks() if c.tool_call_id in waiting]
                if checks:
                    if not _staff_decides(conversation, checks, staff, transcript, store.audit):
                        # No scripted answer: the check waits, and so does the customer,
                        # unless the people of the next turn decide it.
                        waiting_for_staff = not people_next
                        break
                    # The last decision applies them, as the desk and the service do.
                    _finish(conversation.apply_checked())
                    continue
                answers = {}
                for action in pending:
                    decision = parse_decision(decisions.pop(0) if decisions else "n: no answer")
                    transcript.decisions[action.tool_call_id] = decision
                    answers[action.tool_call_id] = Answer(decision.approved, decision.reason)
                with conversation.claim() as claimed:
                    _finish(claimed.resolve(answers))
            if message is not None:
                transcript.latencies.append(time.perf_counter() - started)
            index += 1
    finally:
        # Kept when a model call fails part-way too: what happened so far, and its tokens.
        try:
            transcript.messages = conversation.assistant.messages(thread)
            transcript.user_info = conversation.assistant.user_info(thread)
            transcript.unused_decisions = list(decisions)
            transcript.handoff = store.desk.latest(thread.thread_id)
            transcript.checks = store.desk.checks_ever(thread.thread_id)
            transcript.unused_staff_checks = [str(c) for c in staff]
            transcript.unused_desk_steps = steps[len(transcript.desk_steps) :]
            transcript.audit = store.audit.entries(conversation_id=thread.thread_id)
        finally:
            store.close()
    return transcript


def _staff_decides(
    conversation: Conversation,
    checks: list[Check],
    staff: list[StaffCheck],
    transcript: Transcript,
    audit: AuditLog,
) -> bool:
    """Answer ``checks`` still waiting with the next scripted staff answers.

    Records each answer in ``transcript`` (by tool call id) and in the desk's ``audit``
    log, as the desk does. Returns whether every check is decided: ``False`` when the
    script ran out and one is left waiting.
    """
    for check in checks:
        if check.decided:
            continue
        if not staff:
            return False
        answer = staff.pop(0)
        conversation.decide_check(STAFF, check.id, approved=answer.approved, reason=answer.reason)
        transcript.staff_decisions[check.tool_call_id] = answer
        record_staff_check(audit, STAFF, answer.approved, conversation)
    return True


def _finish(outcomes: Iterable[Outcome]) -> None:
    """Play a turn's outcomes to its end; a turn that failed raises.

    The protocol ends a turn the model server failed, or that ran out of time, with a
    ``TurnFailure`` (the front ends show it); a trial ends there, with that error.
    Any other failure (the conversation busy, a lost claim) is a bug of the trial.
    """
    for outcome in outcomes:
        if isinstance(outcome, TurnFailure):
            if outcome.kind in ("model", "time_limit"):
                raise ModelProviderError(outcome.detail or outcome.text)
            raise RuntimeError(f"The turn did not finish ({outcome.kind}): {outcome.text}")


CUSTOMER_PROMPT = """\
You play a customer of Meridian Travel talking to its customer-service assistant in a chat.
Your situation and goal:
{instructions}

Write only your next message to the assistant, in plain words, as the customer would. Give
details only when asked. When your goal is reached, or the assistant says it is impossible,
or the conversation goes in circles, reply with exactly {stop}."""
STOP = "###STOP###"
CUSTOMER_OPENING = "(You are connected to the assistant. Write your first message.)"
MAX_CUSTOMER_TURNS = 10
# USD per million input and output tokens, for the cost estimate; --price-in/--price-out
# override them and an unknown model has no estimate.
PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


def simulated_customer(
    scenario: Scenario, model: BaseChatModel
) -> Callable[[int, list[AnyMessage]], str | None]:
    """Return a customer played by ``model`` from the scenario's instructions.

    The first message is the scenario's first scripted turn, so every trial starts the
    same way; later ones come from the model, which sees the conversation from the
    customer's side.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    system = SystemMessage(
        content=CUSTOMER_PROMPT.format(instructions=scenario.instructions, stop=STOP)
    )

    def next_message(index: int, history: list[AnyMessage]) -> str | None:
        if index == 0:
            return scenario.turns[0].customer
        if index >= MAX_CUSTOMER_TURNS:
            return None
        # The customer's own messages are the assistant side of this chat. Strict chat
        # templates want a user message first and the roles alternating, so the chat
        # opens with a cue and messages of one side in a row are merged.
        flipped: list[AnyMessage] = [system, HumanMessage(content=CUSTOMER_OPENING)]
        for message in history:
            text = str(message.content).strip()
            if isinstance(message, AIMessage) and message.response_metadata.get(STAFF_NOTE_KEY):
                continue  # a note for the model, which the customer never sees
            if isinstance(message, HumanMessage) and text:
                turn: AnyMessage = AIMessage(content=text)
            elif isinstance(message, AIMessage) and text:
                turn = HumanMessage(content=text)
            else:
                continue
            if type(flipped[-1]) is type(turn):
                merged = f"{flipped[-1].content}\n\n{text}"
                turn = (
                    AIMessage(content=merged)
                    if isinstance(turn, AIMessage)
                    else HumanMessage(content=merged)
                )
                flipped[-1] = turn
            else:
                flipped.append(turn)
        if isinstance(flipped[-1], AIMessage):  # the assistant has not answered yet
            return None
        reply = str(model.invoke(flipped).content).strip()
        return None if not reply or STOP in reply else reply

    return next_message
