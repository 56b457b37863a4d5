"""One small spec per specialist; the graph turns each into its four nodes."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from assistants.prompts import SPECIALIST_TITLES, specialist_prompt
from assistants.routing import (
    ToBookCarRental,
    ToBookExcursion,
    ToFlightBookingAssistant,
    ToHotelBookingAssistant,
)
from assistants.state import SpecialistName
from tools import ToolSet


@dataclass(frozen=True)
class SpecialistSpec:
    """What makes one specialist: its name, prompt, routing tool and tools."""

    name: SpecialistName
    title: str
    prompt: str
    routing_tool: type[BaseModel]
    safe_tools: tuple[BaseTool, ...]
    sensitive_tools: tuple[BaseTool, ...]


def _spec(
    name: SpecialistName,
    routing_tool: type[BaseModel],
    safe: tuple[BaseTool, ...],
    sensitive: tuple[BaseTool, ...],
) -> SpecialistSpec:
    return SpecialistSpec(
        name=name,
        title=SPECIALIST_TITLES[name],
        prompt=specialist_prompt(name),
        routing_tool=routing_tool,
        safe_tools=safe,
        sensitive_tools=sensitive,
    )


def specialist_specs(tools: ToolSet) -> tuple[SpecialistSpec, ...]:
    """Return the four specialists over ``tools``, in a stable order."""
    return (
        _spec(
            "update_flight", ToFlightBookingAssistant, tools.flights_safe, tools.flights_sensitive
        ),
        _spec(
            "book_car_rental", ToBookCarRental, tools.car_rentals_safe, tools.car_rentals_sensitive
        ),
        _spec("book_hotel", ToHotelBookingAssistant, tools.hotels_safe, tools.hotels_sensitive),
        _spec("book_excursion", ToBookExcursion, tools.excursions_safe, tools.excursions_sensitive),
    )
