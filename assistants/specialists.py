"""The specialists, as data: one row each, and the crew built from the rows.

``SPECIALISTS`` is the one table that says what each specialist is: its name (also its
node's name and its entry on the dialog stack), title, duty, the line the primary
assistant's prompt gives it, its routing tool, the factory of its domain's tools (safe,
sensitive and their previews) and the label the terminal shows. Everything else that
depends on the specialists (the primary's hand-over list, the routing map, node names,
the sensitive tool names, labels) is derived from these rows; adding a fifth specialist
means adding a row.

``build_crew`` builds every row's tools over one database, together with the primary
assistant's tools, as the ``Crew`` that the graph wires and callers ask questions of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, NewType

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from assistants.prompts import ROLE_NOTE, crew_prompt
from assistants.routing import (
    COMPLETE_OR_ESCALATE,
    ToBookCarRental,
    ToBookExcursion,
    ToFlightBookingAssistant,
    ToHotelBookingAssistant,
    ToolGroups,
)
from assistants.state import PRIMARY_ASSISTANT
from db.engine import Database
from tools import (
    DomainTools,
    Preview,
    build_primary_tools,
    make_car_rental_tools,
    make_excursion_tools,
    make_flight_tools,
    make_hotel_tools,
)
from tools.policies import POLICY_FILE_NAME, PolicyIndex, make_lookup_policy_tool

CallKind = Literal["safe", "sensitive", "routing", "unknown"]
# A graph node named from a row of ``SPECIALISTS`` (the specialist itself, its entry and
# its tool nodes). The table is data, so no ``Literal`` can list them; the routers return
# these or one of the graph's fixed nodes (``graph.FixedNode``).
SpecialistNode = NewType("SpecialistNode", str)


@dataclass(frozen=True)
class Specialist:
    """What makes one specialist.

    Attributes:
        name: The specialist's name: its assistant node, its entry on the dialog stack
            and its key in the model map (``update_flight``).
        title: How it is named to the model ("flights specialist").
        duty: What it does, for the system prompt.
        hand_over: What the primary assistant hands it, for the primary's prompt.
        routing_tool: The pydantic model the primary calls to hand over.
        make_tools: Builds its domain's tools over a database.
        label: How the terminal names it beside its replies ("flights").
    """

    name: str
    title: str
    duty: str
    hand_over: str
    routing_tool: type[BaseModel]
    make_tools: Callable[[Database], DomainTools]
    label: str

    @property
    def routing_name(self) -> str:
        """Return the name of the routing tool that enters this specialist."""
        return self.routing_tool.__name__

    @property
    def node(self) -> SpecialistNode:
        """Return the node of this specialist's assistant (named as the specialist)."""
        return SpecialistNode(self.name)

    @property
    def entry_node(self) -> SpecialistNode:
        """Return the node that hands the conversation to this specialist."""
        return SpecialistNode(f"enter_{self.name}")

    @property
    def safe_node(self) -> SpecialistNode:
        """Return the node that runs this specialist's safe tools."""
        return SpecialistNode(f"{self.name}_safe_tools")

    @property
    def sensitive_node(self) -> SpecialistNode:
        """Return the node that runs this specialist's approved sensitive tools."""
        return SpecialistNode(f"{self.name}_sensitive_tools")

    @property
    def role_note(self) -> str:
        """Return what ends the system prompt once this specialist's hand-over is out of sight."""
        return ROLE_NOTE.format(title=self.title)


SPECIALISTS: tuple[Specialist, ...] = (
    Specialist(
        name="update_flight",
        title="flights specialist",
        duty=(
            "You change and cancel flight tickets. A ticket can move only to another flight "
            "on the same route; show the options with their fare and seats left, and the "
            "change fee and fare difference from the tools."
        ),
        hand_over="change or cancel a flight ticket.",
        routing_tool=ToFlightBookingAssistant,
        make_tools=make_flight_tools,
        label="flights",
    ),
    Specialist(
        name="book_car_rental",
        title="car-rental specialist",
        duty=(
            "You book, change and cancel rental cars. Show the offers with their total price "
            "for the dates, and ask for the dates if they are missing."
        ),
        hand_over="book, change or cancel a rental car.",
        routing_tool=ToBookCarRental,
        make_tools=make_car_rental_tools,
        label="car rental",
    ),
    Specialist(
        name="book_hotel",
        title="hotel specialist",
        duty=(
            "You book, change and cancel hotel stays. Show the hotels with their total price "
            "for the nights, and ask for check-in and check-out dates if they are missing."
        ),
        hand_over="book, change or cancel a hotel stay.",
        routing_tool=ToHotelBookingAssistant,
        make_tools=make_hotel_tools,
        label="hotels",
    ),
    Specialist(
        name="book_excursion",
        title="excursions specialist",
        duty=(
            "You book, change and cancel excursions and activities. Show the offers with "
            "their price, and ask for the date if it is missing."
        ),
        hand_over="book, change or cancel an excursion or activity.",
        routing_tool=ToBookExcursion,
        make_tools=make_excursion_tools,
        label="excursions",
    ),
)


def assistant_names(specialists: Sequence[Specialist] = SPECIALISTS) -> tuple[str, ...]:
    """Return the name of every assistant: the primary first, then each specialist."""
    return (PRIMARY_ASSISTANT, *(s.name for s in specialists))


@dataclass(frozen=True)
class Member:
    """A specialist with its domain's tools built over one database."""

    specialist: Specialist
    tools: DomainTools

    @property
    def name(self) -> str:
        """Return the specialist's name."""
        return self.specialist.name

    @cached_property
    def groups(self) -> ToolGroups:
        """Return how this specialist's calls are sorted (sensitive, routing)."""
        return ToolGroups(
            sensitive=frozenset(t.name for t in self.tools.sensitive),
            routing=frozenset({COMPLETE_OR_ESCALATE}),
        )


@dataclass(frozen=True)
class Crew:
    """The primary assistant's tools and every specialist with its tools."""

    primary_tools: tuple[BaseTool, ...]
    members: tuple[Member, ...]
    # The company policy behind the default ``lookup_policy`` (None when the caller
    # supplied the policy tool or the primary's tools): ``prepare`` reads it.
    policy: PolicyIndex | None = field(default=None, compare=False)

    def prepare(self) -> None:
        """Read now what the tools would otherwise read on first use: the policy.

        A missing or empty policy file then stops the program at start-up instead of
        failing the first policy question of a conversation, and that question does
        not pay for building the index.

        Raises:
            FileNotFoundError: The policy file does not exist.
            ValueError: The policy file holds no passage.
        """
        if self.policy is not None:
            self.policy.load()

    @cached_property
    def hand_overs(self) -> dict[str, Member]:
        """Return each routing tool's name with the member it enters."""
        return {m.specialist.routing_name: m for m in self.members}

    @cached_property
    def primary_groups(self) -> ToolGroups:
        """Return how the primary assistant's calls are sorted."""
        return ToolGroups(sensitive=frozenset(), routing=frozenset(self.hand_overs))

    @cached_property
    def sensitive_names(self) -> frozenset[str]:
        """Return the names of every tool that needs the customer's approval."""
        return frozenset(name for m in self.members for name in m.groups.sensitive)

    @cached_property
    def previews(self) -> dict[str, Preview]:
        """Return every sensitive tool's preview, by tool name."""
        return {name: p for m in self.members for name, p in m.tools.previews.items()}

    @cached_property
    def sensitive_nodes(self) -> dict[str, str]:
        """Return each sensitive-tools node with the specialist it belongs to."""
        return {m.specialist.sensitive_node: m.name for m in self.members}

    def all_tools(self) -> list[BaseTool]:
        """Return every tool once (by name), the primary's first."""
        seen: dict[str, BaseTool] = {}
        for members_tools in (
            self.primary_tools,
            *((*m.tools.safe, *m.tools.sensitive) for m in self.members),
        ):
            for item in members_tools:
                seen.setdefault(item.name, item)
        return list(seen.values())

    def member(self, name: str) -> Member | None:
        """Return the member called ``name``, if there is one."""
        return next((m for m in self.members if m.name == name), None)

    def label(self, assistant: str) -> str:
        """Return how the terminal names ``assistant`` (empty for the primary)."""
        member = self.member(assistant)
        return member.specialist.label if member else ""

    def prompt(self) -> str:
        """Return the system prompt every assistant sends, listing every specialist."""
        return crew_prompt(
            [(m.specialist.routing_name, m.specialist.hand_over) for m in self.members],
            [(m.specialist.title, m.specialist.duty) for m in self.members],
        )

    def call_kind(self, name: str) -> CallKind:
        """Tell what a tool call named ``name`` is, whoever made it."""
        if name in self.sensitive_names:
            return "sensitive"
        if name in self.hand_overs or name == COMPLETE_OR_ESCALATE:
            return "routing"
        known = {t.name for t in self.primary_tools}
        known |= {t.name for m in self.members for t in m.tools.safe}
        return "safe" if name in known else "unknown"


def build_crew(
    db: Database,
    specialists: Sequence[Specialist] = SPECIALISTS,
    *,
    lookup_policy: BaseTool | None = None,
    tavily_api_key: str | None = None,
    primary_tools: Sequence[BaseTool] | None = None,
) -> Crew:
    """Build the primary assistant's tools and every specialist's tools over ``db``.

    Args:
        db: The travel database; its clock defines "now" for every rule.
        specialists: The rows to build (``SPECIALISTS`` by default).
        lookup_policy: The policy tool; the default reads the company policy.
        tavily_api_key: Adds web search to the primary's tools when given.
        primary_tools: The primary's tools, replacing the default set entirely.

    Returns:
        The crew.
    """
    policy = None
    if primary_tools is None and lookup_policy is None:
        policy = PolicyIndex(db.data_dir / POLICY_FILE_NAME)
        lookup_policy = make_lookup_policy_tool(policy)
    built_primary = (
        tuple(primary_tools)
        if primary_tools is not None
        else build_primary_tools(db, lookup_policy=lookup_policy, tavily_api_key=tavily_api_key)
    )
    return Crew(
        primary_tools=built_primary,
        members=tuple(Member(s, s.make_tools(db)) for s in specialists),
        policy=policy,
    )
